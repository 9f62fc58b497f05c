//! The probe thread: asks the scheduler what to do next, runs the job (a
//! sweep, a re-check or a LogfP fan-out), hands the outcome to the
//! publisher, and keeps the peers' status current. It is the only thread
//! that sends systemd watchdog keep-alives, so a wedged probe loop gets the
//! daemon restarted.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::config::Config;
use super::contention::{contention_job, pick_peers};
use super::job::{fanout_job, fanout_sets, run_job, JobCtx, JobError, JobResult, Target};
use super::publisher::Outcome;
use super::sched::{Job, PeerPhase, Scheduler};
use super::status::PeerStatus;
use super::{sys, verbs, Shared};
use crate::clock::HostClock;
use crate::control::{ClusterKey, ConnConfig, RejectReason};
use crate::link::Kind;
use crate::probe;

/// What the probe thread starts with.
pub(super) struct ProbeCtx<'a> {
    pub cfg: &'a Config,
    pub shared: &'a Shared,
    pub clock: HostClock,
    pub verbs: Option<&'a verbs::Node>,
}

/// A peer (or this node) busy with another session: not a failure, soon
/// again.
fn busy(e: &JobError) -> bool {
    matches!(
        e,
        JobError::Refused(_, RejectReason::Busy) | JobError::Occupied(_)
    )
}

/// A retry after a busy peer: in 0.2–1.2 s.
fn soon(now_s: f64) -> f64 {
    now_s + 0.2 + rand::random::<f64>()
}

pub(super) fn probe_loop(
    pctx: &ProbeCtx<'_>,
    key: ClusterKey,
    targets: &[Target],
    known: &[bool],
    tx: &Sender<Outcome>,
) {
    let ProbeCtx {
        cfg,
        shared,
        clock,
        verbs: verbs_node,
    } = *pctx;
    if cfg.lock_memory {
        if let Err(e) = sys::lock_memory() {
            tracing::warn!(
                "memory not locked (mlockall: {e}); needs CAP_IPC_LOCK or LimitMEMLOCK=infinity"
            );
        }
    }
    if let Some(prio) = cfg.sched_fifo_priority {
        if let Err(e) = sys::sched_fifo(prio) {
            tracing::warn!("probe thread not SCHED_FIFO {prio}: {e} (needs CAP_SYS_NICE)");
        }
    }
    let watchdog = sys::watchdog_interval().map(|d| d / 2);
    let mut last_keepalive = Instant::now();
    let cc = ConnConfig::new(&shared.node, key);
    let t0 = Instant::now();
    let now_s = || t0.elapsed().as_secs_f64();
    let mut sched = Scheduler::new(
        known,
        cfg.recheck_interval_s,
        cfg.budget_bytes_per_s,
        0.0,
        rand::random(),
    );
    let mut published: HashMap<(usize, Kind), probe::ProbeResult> = HashMap::new();
    let mut errors: Vec<Option<String>> = vec![None; targets.len()];
    let mut next_fanout_s = 0.0;
    // The first conflict probe after one interval: the pair sweeps and the
    // fan-out come first.
    let mut next_contention_s = cfg.contention.interval_s;
    let ctx = JobCtx {
        cfg,
        cc: &cc,
        clock,
        shared,
        verbs: verbs_node,
    };
    while !shared.shutdown.load(Ordering::Relaxed) {
        if let Some(w) = watchdog {
            if last_keepalive.elapsed() >= w {
                sys::notify(&[sd_notify::NotifyState::Watchdog]);
                last_keepalive = Instant::now();
            }
        }
        publish_status(cfg, shared, targets, &sched, &errors, now_s());
        // Others' flow sessions through this node are paid from its budget.
        sched.charge(shared.take_flow_bytes(), now_s());
        // LogfP over the known peers, now and then, once every target has
        // been tried.
        let phases: Vec<PeerPhase> = (0..targets.len()).map(|i| sched.peer(i).phase).collect();
        let fanouts = if cfg.fanout_interval_s > 0.0
            && now_s() >= next_fanout_s
            && !phases.contains(&PeerPhase::New)
        {
            fanout_sets(cfg, targets, &phases)
        } else {
            Vec::new()
        };
        if !fanouts.is_empty() {
            next_fanout_s = now_s() + cfg.fanout_interval_s;
            for (kind, peers) in &fanouts {
                match fanout_job(&ctx, *kind, peers) {
                    Ok((fit, bytes)) => {
                        sched.charge(bytes, now_s());
                        let peers = peers.iter().map(|&i| cfg.peers[i].name.clone()).collect();
                        let _ = tx.send(Outcome::Logfp {
                            peers,
                            transport: kind.name().to_string(),
                            fit,
                        });
                    }
                    Err(e) if busy(&e) => {
                        tracing::debug!("LogfP fan-out over {kind}: {e}");
                        next_fanout_s = soon(now_s());
                        break;
                    }
                    Err(e) => tracing::warn!("LogfP fan-out over {kind} failed: {e}"),
                }
            }
            continue;
        }
        if cfg.contention.interval_s > 0.0
            && now_s() >= next_contention_s
            && !phases.contains(&PeerPhase::New)
            && sched.solvent(now_s())
        {
            next_contention_s = now_s() + cfg.contention.interval_s;
            for (kind, peers) in fanout_sets(cfg, targets, &phases) {
                if run_contention(&ctx, kind, pick_peers(peers), &mut sched, tx, now_s) {
                    next_contention_s = soon(now_s());
                    break;
                }
            }
            continue;
        }
        let (i, job) = match sched.next(now_s()) {
            Ok(j) => j,
            Err(wait) => {
                std::thread::sleep(wait.min(Duration::from_millis(200)));
                continue;
            }
        };
        let target = targets[i];
        let peer = &cfg.peers[target.peer];
        let key = (target.peer, target.kind);
        let job = if published.contains_key(&key) {
            job
        } else {
            Job::FullSweep
        };
        let started = Instant::now();
        match run_job(&ctx, peer, target.kind, job, published.get(&key)) {
            Ok(JobResult::Swept(r)) => {
                sched.charge(r.probe_bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                let entry = crate::publish::entry_from_probe(&peer.name, target.kind.name(), &r);
                tracing::info!(
                    "{} over {}: EEL {:.0} ns, g {:.0} ns, G {:.4} ns/B, S {:?} ({} B of probes in {:.1} s)",
                    peer.name,
                    target.kind,
                    r.fit.eel_ns,
                    entry.ranges.first().map_or(f64::NAN, |x| x.g_ns),
                    entry.ranges.first().map_or(f64::NAN, |x| x.G_ns_per_byte),
                    r.fit.S_bytes,
                    r.probe_bytes,
                    started.elapsed().as_secs_f64()
                );
                let _ = tx.send(Outcome::Publish(Box::new(entry)));
                published.insert(key, *r);
                sched.swept(i, now_s());
                errors[i] = None;
            }
            Ok(JobResult::Rechecked { agrees, bytes }) => {
                sched.charge(bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                if !agrees {
                    tracing::info!(
                        "{}: re-check disagrees with the published model; full sweep",
                        peer.name
                    );
                }
                sched.rechecked(i, agrees, now_s());
                errors[i] = None;
            }
            Err(e) if busy(&e) => {
                // The peer is busy with another session (or driving one),
                // or this node serves one: try again shortly.
                tracing::debug!("{}: {e}; retrying shortly", peer.name);
                sched.defer(i, soon(now_s()));
            }
            Err(e) => {
                tracing::warn!("{}: probe failed: {e}", peer.name);
                sched.failed(i, now_s());
                errors[i] = Some(e.to_string());
                let _ = tx.send(Outcome::Stale {
                    peer: peer.name.clone(),
                    transport: target.kind.name().into(),
                });
            }
        }
    }
}

/// One conflict probe over `kind` with `peers`, published and charged.
/// True when it should be retried soon (a peer or this node was busy).
fn run_contention(
    ctx: &JobCtx<'_>,
    kind: Kind,
    peers: Vec<usize>,
    sched: &mut Scheduler,
    tx: &Sender<Outcome>,
    now_s: impl Fn() -> f64,
) -> bool {
    if ctx.shared.quiet() {
        tracing::debug!("no conflict probe over {kind}: this node is quiet");
        return false;
    }
    match contention_job(ctx, kind, &peers) {
        Ok(r) => {
            sched.charge(r.probe_bytes, now_s());
            ctx.shared
                .spent_bytes
                .store(sched.spent_bytes, Ordering::Relaxed);
            tracing::info!(
                "conflict probe over {kind} with {} peers: beta {:.2} ({} B in {:.1} s)",
                peers.len(),
                r.fit.beta.value,
                r.probe_bytes,
                r.elapsed_ns * 1e-9
            );
            let _ = tx.send(Outcome::Contention {
                transport: kind.name().to_string(),
                fit: Box::new(r.fit),
            });
            false
        }
        Err(e) if busy(&e) || matches!(e, JobError::Refused(_, RejectReason::Quiet)) => {
            tracing::debug!("conflict probe over {kind}: {e}; later");
            true
        }
        Err(e) => {
            tracing::warn!("conflict probe over {kind} failed: {e}");
            false
        }
    }
}

/// The peers' status as the status file shows it.
fn publish_status(
    cfg: &Config,
    shared: &Shared,
    targets: &[Target],
    sched: &Scheduler,
    errors: &[Option<String>],
    now_s: f64,
) {
    let mut st = shared.status.lock().unwrap_or_else(|e| e.into_inner());
    st.clear();
    let now_unix = crate::publish::unix_now_ns();
    for (i, t) in targets.iter().enumerate() {
        let s = sched.peer(i);
        st.push(PeerStatus {
            name: cfg.peers[t.peer].name.clone(),
            phase: s.phase,
            transport: t.kind.name().into(),
            failures: s.failures,
            last_probe_unix_ns: s
                .last_probe_s
                .map(|t| now_unix.saturating_sub(((now_s - t).max(0.0) * 1e9) as u64)),
            last_error: errors[i].clone(),
        });
    }
}
