//! The probe thread: asks the scheduler what to do next, runs the job (a
//! sweep, a re-check, a LogfP fan-out or a conflict probe), hands the
//! outcome to the publisher, and keeps the peers' status current.
//!
//! Between jobs it sleeps until the next one is due (or the shutdown
//! wakes it), promising the watchdog ([`super::lifecycle::Liveness`]) to
//! be back by then; a job promises to end within [`MAX_JOB`] (every wait
//! in it has a deadline). Entries restored from the state file are
//! re-checked first, within seconds of the start: one that agrees becomes
//! current, one that does not is marked stale and measured again, one
//! whose peer now announces another MAC (raw) is dropped.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use netgauge::{flags, EntryData};

use super::config::Config;
use super::contention::{contention_job, pick_peers};
use super::job::{fanout_job, fanout_sets, run_job, JobCtx, JobError, JobResult, Target};
use super::publisher::Outcome;
use super::sched::{Job, PeerPhase, Scheduler};
use super::state::{Provenance, Stored};
use super::status::PeerStatus;
use super::{sys, verbs, Shared};
use crate::clock::HostClock;
use crate::control::{ClusterKey, ConnConfig, RejectReason};
use crate::transport::kind::PeerEndpoint;
use crate::transport::Kind;

/// A job ends within this (its waits all have deadlines; this bounds how
/// long the watchdog trusts a thread it does not hear from).
pub(super) const MAX_JOB: Duration = Duration::from_secs(30 * 60);
/// Slack of a sleeping thread's promise.
const SLACK: Duration = Duration::from_secs(5);
/// Longest single sleep between jobs.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

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

/// What the thread knows of each target beyond the scheduler.
struct Targets {
    /// The entry a re-check compares with (published now, or restored).
    models: HashMap<usize, EntryData>,
    /// raw: the MAC the model was measured toward.
    macs: HashMap<usize, [u8; 6]>,
    /// Still flagged RESTORED (not yet confirmed).
    restored: HashSet<usize>,
    /// The last re-check disagreed: the next sweep's entry is CHANGED.
    disagreed: HashSet<usize>,
    errors: Vec<Option<String>>,
}

pub(super) fn probe_loop(
    pctx: &ProbeCtx<'_>,
    key: ClusterKey,
    targets: &[Target],
    restored: &HashMap<(String, String), Stored>,
    tx: &Sender<Outcome>,
) {
    let ProbeCtx {
        cfg,
        shared,
        clock,
        verbs: verbs_node,
    } = *pctx;
    let alive = &shared.probe_alive;
    alive.promise(MAX_JOB);
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
    let cc = ConnConfig::new(&shared.node, key);
    let t0 = Instant::now();
    let t0_unix_ns = crate::publish::unix_now_ns();
    let now_s = || t0.elapsed().as_secs_f64();
    let name_of = |t: &Target| (cfg.peers[t.peer].name.clone(), t.kind.name().to_string());
    let mut st = Targets {
        models: HashMap::new(),
        macs: HashMap::new(),
        restored: HashSet::new(),
        disagreed: HashSet::new(),
        errors: vec![None; targets.len()],
    };
    for (i, t) in targets.iter().enumerate() {
        if let Some(s) = restored.get(&name_of(t)) {
            st.models.insert(i, s.entry.clone());
            st.restored.insert(i);
            if let Some(m) = s.provenance.peer_mac {
                st.macs.insert(i, m);
            }
        }
    }
    let known: Vec<bool> = (0..targets.len())
        .map(|i| st.models.contains_key(&i))
        .collect();
    let mut sched = Scheduler::new(
        &known,
        cfg.recheck_interval_s,
        cfg.budget_bytes_per_s,
        0.0,
        rand::random(),
    );
    // Restored values are not current until re-checked: first thing.
    for &i in &st.restored {
        sched.defer(i, 0.5 * rand::random::<f64>());
    }
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
    publish_status(cfg, shared, targets, &sched, &st.errors, t0_unix_ns);
    while !shared.shutdown.is_set() {
        // Others' flow sessions through this node are paid from its budget.
        sched.charge(shared.take_flow_bytes(), now_s());
        // LogfP over the known peers, now and then, once every target has
        // been tried.
        let phases: Vec<PeerPhase> = (0..targets.len()).map(|i| sched.peer(i).phase).collect();
        let fanout_on = cfg.fanout_interval_s > 0.0 && !phases.contains(&PeerPhase::New);
        let fanouts = if fanout_on && now_s() >= next_fanout_s {
            fanout_sets(cfg, targets, &phases)
        } else {
            Vec::new()
        };
        if !fanouts.is_empty() {
            next_fanout_s = now_s() + cfg.fanout_interval_s;
            for (kind, peers) in &fanouts {
                alive.promise(MAX_JOB);
                match fanout_job(&ctx, *kind, peers) {
                    Ok(f) => {
                        sched.charge(f.bytes, now_s());
                        let peers = peers.iter().map(|&i| cfg.peers[i].name.clone()).collect();
                        let _ = tx.send(Outcome::Logfp {
                            peers,
                            transport: kind.name().to_string(),
                            fit: f.fit,
                            ci95: f.ci95,
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
        let contention_on = cfg.contention.interval_s > 0.0 && !phases.contains(&PeerPhase::New);
        if contention_on && now_s() >= next_contention_s && sched.solvent(now_s()) {
            next_contention_s = now_s() + cfg.contention.interval_s;
            for (kind, peers) in fanout_sets(cfg, targets, &phases) {
                alive.promise(MAX_JOB);
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
                // Asleep until the next job is due (the scheduler's own
                // wait is at most a second: it stands for a budget in debt
                // or a job due now), the next fan-out, the next conflict
                // probe, or the shutdown. A conflict probe due but waiting
                // for the budget sleeps the scheduler's wait (at most 1 s).
                let now = now_s();
                let mut due = (0..targets.len())
                    .map(|i| sched.peer(i).due_s)
                    .fold(f64::INFINITY, f64::min);
                if fanout_on {
                    due = due.min(next_fanout_s);
                }
                if contention_on {
                    due = due.min(next_contention_s);
                }
                let sleep = if due > now {
                    Duration::from_secs_f64((due - now).min(MAX_SLEEP.as_secs_f64())).max(wait)
                } else {
                    wait
                };
                alive.promise(sleep + SLACK);
                shared.shutdown.wait(sleep);
                continue;
            }
        };
        alive.promise(MAX_JOB);
        let target = targets[i];
        let peer = &cfg.peers[target.peer];
        let job = if st.models.contains_key(&i) {
            job
        } else {
            Job::FullSweep
        };
        let (name, transport) = name_of(&target);
        let started = Instant::now();
        let outcome = run_job(
            &ctx,
            peer,
            target.kind,
            job,
            st.models.get(&i),
            st.macs.get(&i).copied(),
        );
        match outcome {
            Ok(JobResult::Swept {
                result: r,
                peer_mac,
            }) => {
                sched.charge(r.probe_bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                let mut entry = crate::publish::entry_from_probe(&name, &transport, &r);
                if st.disagreed.remove(&i) {
                    entry.flags |= flags::CHANGED;
                    entry.ext.changed_unix_ns = crate::publish::unix_now_ns();
                }
                tracing::info!(
                    "{} over {}: large-message bandwidth {}; EEL {:.0} ns, g {:.0} ns, S {:?} ({} B of probes in {:.1} s)",
                    peer.name,
                    target.kind,
                    crate::report::bandwidth_line(&r.bandwidth),
                    r.fit.eel_ns,
                    entry.ranges.first().map_or(f64::NAN, |x| x.g_ns),
                    r.fit.S_bytes,
                    r.probe_bytes,
                    started.elapsed().as_secs_f64()
                );
                let raw = target.kind.descriptor().endpoint == PeerEndpoint::MacOnLink;
                let provenance = Provenance {
                    local: shared.local_ip,
                    peer_address: peer.address,
                    interface: peer.interface.clone().filter(|_| raw),
                    peer_mac: peer_mac.filter(|_| raw),
                };
                match peer_mac.filter(|_| raw) {
                    Some(m) => st.macs.insert(i, m),
                    None => st.macs.remove(&i),
                };
                st.restored.remove(&i);
                st.models.insert(i, entry.clone());
                let _ = tx.send(Outcome::Publish(Box::new(entry), provenance));
                sched.swept(i, now_s());
                st.errors[i] = None;
            }
            Ok(JobResult::Rechecked { agrees, bytes }) => {
                sched.charge(bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                if agrees {
                    st.restored.remove(&i);
                    let _ = tx.send(Outcome::Confirmed {
                        peer: name,
                        transport,
                        at_unix_ns: crate::publish::unix_now_ns(),
                    });
                } else {
                    tracing::info!(
                        "{}: re-check disagrees with the published model; full sweep",
                        peer.name
                    );
                    st.disagreed.insert(i);
                    if st.restored.remove(&i) {
                        // Never confirmed: not to be read as current while
                        // the new sweep runs.
                        let _ = tx.send(Outcome::Stale {
                            peer: name,
                            transport,
                        });
                    }
                }
                sched.rechecked(i, agrees, now_s());
                st.errors[i] = None;
            }
            Err(JobError::PeerChanged(why)) => {
                tracing::info!("{}: {why}; measuring again", peer.name);
                st.models.remove(&i);
                st.macs.remove(&i);
                st.restored.remove(&i);
                let _ = tx.send(Outcome::Dropped {
                    peer: name,
                    transport,
                    why,
                });
                sched.rechecked(i, false, now_s());
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
                st.errors[i] = Some(e.to_string());
                let _ = tx.send(Outcome::Stale {
                    peer: name,
                    transport,
                });
            }
        }
        publish_status(cfg, shared, targets, &sched, &st.errors, t0_unix_ns);
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

/// The peers' status as the status file (and `Msg::Status`) shows it;
/// the publisher rewrites the file when its version moves.
fn publish_status(
    cfg: &Config,
    shared: &Shared,
    targets: &[Target],
    sched: &Scheduler,
    errors: &[Option<String>],
    t0_unix_ns: u64,
) {
    let fresh: Vec<PeerStatus> = targets
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let s = sched.peer(i);
            PeerStatus {
                name: cfg.peers[t.peer].name.clone(),
                phase: s.phase,
                transport: t.kind.name().into(),
                failures: s.failures,
                last_probe_unix_ns: s
                    .last_probe_s
                    .map(|t| t0_unix_ns.saturating_add((t.max(0.0) * 1e9) as u64)),
                last_error: errors[i].clone(),
            }
        })
        .collect();
    let mut st = shared.status.lock().unwrap_or_else(|e| e.into_inner());
    if *st != fresh {
        *st = fresh;
        shared.status_version.fetch_add(1, Ordering::Relaxed);
    }
}
