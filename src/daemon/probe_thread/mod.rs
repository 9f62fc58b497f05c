//! The probe thread: runs this node's part of the cluster schedule. At
//! every round it asks the schedule what to do (drive a pair's job, drive
//! a fan-out, serve, or sit out), runs a meeting through [`super::job`],
//! reports each job's outcome back to the schedule (which may continue
//! the meeting with a confirming re-check or a repair sweep), hands what
//! is to be published to the publisher, and keeps the status current. A
//! fan-out round also carries the conflict probe when it is due.
//!
//! Between rounds it sleeps until the next one starts (or the shutdown
//! wakes it), promising the watchdog ([`super::lifecycle::Liveness`]) to
//! be back by then; a round's work promises to end within [`MAX_JOB`]
//! (every wait in it has a deadline).
//!
//! What a job publishes:
//! - a full sweep whose data are not disturbed (`cluster::recheck::
//!   disturbed`): the pair's entry (CHANGED after a repair), and for a
//!   class sweep the class's entry (`@class`) too; a disturbed one nothing,
//!   and the pair is met again at its next round;
//! - a re-check that agrees with the pair's own entry: the entry's
//!   `checked_unix_ns` (and the end of RESTORED; a restored entry is held
//!   to the plain tolerance, without the re-check's noise allowance); one
//!   that disagrees: its largest deviation, for the history (the schedule
//!   confirms it, then repairs the entry: the repair sweep logs the change
//!   old → new, EEL and large-message bandwidth);
//! - an unreachable or failed partner: its entries marked stale;
//! - a partner now at another address, or (raw) announcing another MAC,
//!   than where its restored or published entries were measured: those
//!   entries dropped before anything is measured;
//! - a fan-out: the LogfP fit on the entries of its peers.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use netgauge::EntryData;

use super::config::Config;
use super::contention::conflict_probe;
use super::costs::Costs;
use super::history::Event;
use super::job::{
    self, connect, decline_of, fanout_plan, measured_first, JobCtx, JobError, Meeting, Target,
};
use super::publisher::Outcome as Publish;
use super::sched::PeerPhase;
use super::state::{Provenance, Stored};
use super::status::PeerStatus;
use super::{recheck_plan, sys, unix_now_s, verbs, Shared};
use crate::clock::HostClock;
use crate::cluster::recheck::SessionSpread;
use crate::cluster::rounds::ClassId;
use crate::cluster::schedule::{Cost, Decline, Job, JobKind, Outcome, Plan, Purpose};
use crate::control::{ClusterKey, ConnConfig};
use crate::link::Kind;
use crate::transport::kind::PeerEndpoint;

mod pair;
#[cfg(test)]
pub(super) use pair::recheck_policy;
use pair::run_job;

/// A job ends within this (its waits all have deadlines; this bounds how
/// long the watchdog trusts a thread it does not hear from).
pub(super) const MAX_JOB: Duration = Duration::from_secs(30 * 60);
/// Slack of a sleeping thread's promise.
const SLACK: Duration = Duration::from_secs(5);
/// Longest single sleep between rounds.
const MAX_SLEEP: Duration = Duration::from_secs(3600);

/// What the probe thread starts with.
pub(super) struct ProbeCtx<'a> {
    pub cfg: &'a Config,
    pub shared: &'a Shared,
    pub clock: HostClock,
    pub verbs: Option<&'a verbs::Node>,
}

/// Per peer: its coverage class, the class's segment name, and whether
/// the class is intra-switch.
#[derive(Clone, Debug)]
pub(super) struct PeerClass {
    pub id: ClassId,
    pub name: String,
    pub intra: bool,
}

/// What the thread knows of one target.
#[derive(Clone, Debug)]
struct TargetState {
    phase: PeerPhase,
    failures: u32,
    last_probe_unix_ns: Option<u64>,
    last_error: Option<String>,
    /// This transport's part of a full sweep for this purpose was
    /// published while another part of the pair's sweep was not (disturbed,
    /// or the session ended): the pair's next sweep for the same purpose
    /// leaves it out, until a sweep of the pair completes or the part is
    /// older than the sweeps' maximum age.
    held: Option<(Purpose, Instant)>,
}

/// Everything the thread keeps between rounds.
struct State<'a> {
    targets: &'a [Target],
    classes: &'a [PeerClass],
    /// What is published (own and class entries), to re-check against.
    known: HashMap<(String, Kind), EntryData>,
    /// Where each of them was measured (restored or published).
    provenance: HashMap<(String, Kind), Provenance>,
    /// What each of them read in its latest quiet sessions.
    spread: HashMap<(String, Kind), SessionSpread>,
    per_target: Vec<TargetState>,
    costs: Costs,
    /// A full sweep was found to outlast a round (said once).
    warned_long: bool,
    /// When the next conflict probe is due (unix s): it rides on the
    /// node's next fan-out round from then on.
    next_contention_s: f64,
    tx: &'a Sender<Publish>,
}

impl State<'_> {
    fn kinds_of(&self, peer: usize) -> Vec<(usize, Kind)> {
        self.targets
            .iter()
            .enumerate()
            .filter(|(_, t)| t.peer == peer)
            .map(|(i, t)| (i, t.kind))
            .collect()
    }

    fn publish(&mut self, e: EntryData, kind: Kind, provenance: Provenance, event: Event) {
        let key = (e.peer.clone(), kind);
        self.spread
            .entry(key.clone())
            .or_default()
            .record_entry(&e, &recheck_plan().sizes_bytes);
        self.known.insert(key.clone(), e.clone());
        self.provenance.insert(key, provenance.clone());
        let _ = self
            .tx
            .send(Publish::Publish(Box::new(e), provenance, event));
    }

    /// Forget the entries of `peer` over `kind` (its own, not its class's):
    /// they no longer describe the link; the publisher drops them.
    fn drop_entry(&mut self, peer: &str, kind: Kind, why: String) {
        let key = (peer.to_string(), kind);
        self.known.remove(&key);
        self.provenance.remove(&key);
        self.spread.remove(&key);
        let _ = self.tx.send(Publish::Dropped {
            peer: peer.to_string(),
            transport: kind.name().to_string(),
            why,
        });
    }
}

pub(super) fn probe_loop(
    pctx: &ProbeCtx<'_>,
    key: ClusterKey,
    targets: &[Target],
    classes: &[PeerClass],
    restored: &HashMap<(String, String), Stored>,
    tx: &Sender<Publish>,
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
    let max_kinds = (0..shared.peers.len())
        .map(|p| targets.iter().filter(|t| t.peer == p).count())
        .max()
        .unwrap_or(1);
    let mut st = State {
        targets,
        classes,
        known: HashMap::new(),
        spread: HashMap::new(),
        provenance: HashMap::new(),
        per_target: targets
            .iter()
            .map(|_| TargetState {
                phase: PeerPhase::New,
                failures: 0,
                last_probe_unix_ns: None,
                last_error: None,
                held: None,
            })
            .collect(),
        costs: Costs::new(cfg, max_kinds),
        warned_long: false,
        // The first after one interval: pair sweeps and fan-outs first.
        next_contention_s: unix_now_s() + cfg.contention.interval_s,
        tx,
    };
    learn_restored(shared, &mut st, restored);
    shared.schedule().set_costs(st.costs.table());
    let ctx = JobCtx {
        cfg,
        cc: &cc,
        clock,
        shared,
        verbs: verbs_node,
    };
    while !shared.shutdown.is_set() {
        alive.promise(MAX_JOB);
        let now = unix_now_s();
        let quiet = shared.quiet.load(Ordering::Relaxed);
        let (slot, plan) = {
            let mut sched = shared.schedule();
            // Old runs leave the estimates as time passes, not only when a
            // job is recorded.
            sched.set_costs(st.costs.table());
            sched.plan(now, quiet)
        };
        match plan {
            Plan::Drive { partner, job, .. } => {
                drive(&ctx, &mut st, slot.round, partner, job);
            }
            Plan::Fanout { chunk, .. } => drive_fanout(&ctx, &mut st, slot.round, chunk),
            Plan::Serve { partner, .. } => {
                tracing::debug!("round {}: serving member {partner}", slot.round)
            }
            Plan::Idle(why) => {
                if why != crate::cluster::schedule::Idle::Planned {
                    tracing::debug!("round {}: {}", slot.round, why.name());
                }
            }
        }
        publish_status(shared, &st, quiet);
        // Asleep until the next round starts (or the shutdown wakes it),
        // promising the watchdog to be back by then.
        let next = shared.schedule().rounds().slot(slot.round + 1).start_s;
        let wait =
            Duration::from_secs_f64((next - unix_now_s()).clamp(0.001, MAX_SLEEP.as_secs_f64()));
        alive.promise(wait + SLACK);
        shared.shutdown.wait(wait);
    }
}

/// Entries restored from the state file are the references of re-checks
/// and tell the schedule which pairs and classes are measured; where they
/// were measured is checked when their peer is next met.
fn learn_restored(
    shared: &Shared,
    st: &mut State<'_>,
    restored: &HashMap<(String, String), Stored>,
) {
    let mut sched = shared.schedule();
    // Each peer's oldest restored sweep over the transports it was made on.
    let mut pair_at: HashMap<usize, f64> = HashMap::new();
    for s in restored.values() {
        let e = &s.entry;
        let Ok(kind) = e.transport.parse::<Kind>() else {
            continue;
        };
        let at_s = e.measured_unix_ns as f64 * 1e-9;
        if e.peer.starts_with('@') {
            if let Some(c) = st.classes.iter().find(|c| c.name == e.peer) {
                sched.node_mut().learn_class(c.id, at_s);
            }
        } else if let Ok(p) = shared
            .peers
            .binary_search_by(|p| p.name.as_str().cmp(&e.peer))
        {
            let at = pair_at.entry(p).or_insert(at_s);
            *at = at.min(at_s);
            for (i, t) in st.targets.iter().enumerate() {
                if t.peer == p && t.kind == kind {
                    st.per_target[i].phase = PeerPhase::Known;
                }
            }
        }
        st.spread
            .entry((e.peer.clone(), kind))
            .or_default()
            .record_entry(e, &recheck_plan().sizes_bytes);
        st.known.insert((e.peer.clone(), kind), e.clone());
        st.provenance
            .insert((e.peer.clone(), kind), s.provenance.clone());
    }
    // A pair counts as swept only when every transport this node probes it
    // over was restored: a transport added since gets the pair's full sweep
    // at the next meeting, not re-checks with nothing to compare against.
    for (p, at_s) in pair_at {
        let name = &shared.peers[p].name;
        let all = st
            .targets
            .iter()
            .filter(|t| t.peer == p)
            .all(|t| st.known.contains_key(&(name.clone(), t.kind)));
        if all {
            sched.node_mut().learn_pair(shared.peers[p].member, at_s);
        }
    }
}

/// A meeting with `partner` (a member index) in `round`, from `first` on.
fn drive(ctx: &JobCtx<'_>, st: &mut State<'_>, round: u64, partner: u32, first: Job) {
    let shared = ctx.shared;
    let Some(peer) = shared.peer_of_member(partner) else {
        shared
            .schedule()
            .record(Outcome::Declined(Decline::NotExpected), unix_now_s());
        return;
    };
    let name = shared.peers[peer].name.clone();
    // This node still serves a session (one that outlasted its round):
    // not the partner's fault.
    if let Err(e) = super::admission::DriveClaim::could_take(shared) {
        tracing::debug!("round {round}: {name} not met: {e}");
        shared
            .schedule()
            .record(Outcome::Declined(Decline::Busy), unix_now_s());
        return;
    }
    let mut m = match connect(ctx, peer) {
        Ok(m) => m,
        Err(e) => {
            unreachable(ctx, st, peer, &e);
            return;
        }
    };
    moved_away(ctx, st, &m);
    let claim = match super::admission::DriveClaim::take(shared) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!("round {round}: {name} not met: {e}");
            shared
                .schedule()
                .record(Outcome::Declined(Decline::Busy), unix_now_s());
            m.done(round);
            return;
        }
    };
    let mut job = first;
    loop {
        let started = Instant::now();
        let before = m.bytes;
        let (outcome, whole) = match m.ask(&shared.node, round, job) {
            Err(e) => {
                unreachable(ctx, st, peer, &e);
                break;
            }
            Ok(Some(reason)) => {
                tracing::debug!(
                    "round {round}: {name} declined the {}: {reason:?}",
                    job.name()
                );
                (Outcome::Declined(decline_of(&reason)), false)
            }
            Ok(None) => {
                tracing::debug!("round {round}: driving the {} with {name}", job.name());
                let ran = run_job(ctx, st, &mut m, job);
                (ran.outcome, ran.whole)
            }
        };
        if whole && !matches!(outcome, Outcome::Declined(_)) {
            let cost = Cost {
                bytes: m.bytes - before,
                seconds: started.elapsed().as_secs_f64(),
            };
            st.costs.record(st.classes[peer].intra, job.kind(), cost);
        }
        let table = st.costs.table();
        let round_s = ctx.cfg.schedule.round_s;
        let longest = table.intra.full.seconds.max(table.inter.full.seconds);
        if longest > round_s && !st.warned_long {
            st.warned_long = true;
            tracing::warn!(
                "a full sweep takes up to {longest:.1} s here, longer than a round ({round_s} s): meetings with pairs already swept run re-checks instead while the recent sweeps' median outlasts a round (raise [schedule] round_s, or lower max_size_bytes, max_reps)"
            );
        }
        let mut sched = shared.schedule();
        sched.set_costs(table);
        match sched.record(outcome, unix_now_s()) {
            Some(next) => {
                drop(sched);
                tracing::debug!("round {round}: {name}: then a {}", next.name());
                job = next;
            }
            None => break,
        }
    }
    drop(claim);
    m.done(round);
}

/// Entries of the partner measured at another address, or (raw) toward
/// another MAC, than the partner is now met at or announces: they no
/// longer describe the link and are dropped (then measured again) before
/// anything is measured.
fn moved_away(ctx: &JobCtx<'_>, st: &mut State<'_>, m: &Meeting) {
    let name = ctx.shared.peers[m.peer].name.clone();
    for (_, kind) in st.kinds_of(m.peer) {
        let Some(p) = st.provenance.get(&(name.clone(), kind)) else {
            continue;
        };
        let raw = kind.descriptor().endpoint == PeerEndpoint::MacOnLink;
        let why = if p.peer_address.ip() != m.address().ip() {
            format!(
                "{name} is now at {}, the values were measured toward {}",
                m.address().ip(),
                p.peer_address.ip()
            )
        } else {
            match (raw, p.peer_mac, m.announced_mac()) {
                (true, Some(want), Some(now)) if want != now => format!(
                    "{name} now announces MAC {}, the values were measured toward {}",
                    crate::transport::raw_eth::format_mac(&now),
                    crate::transport::raw_eth::format_mac(&want)
                ),
                _ => continue,
            }
        };
        tracing::info!("{why}; measuring again");
        st.drop_entry(&name, kind, why);
    }
}

/// The partner could not be reached: the schedule backs off, its entries
/// go stale.
fn unreachable(ctx: &JobCtx<'_>, st: &mut State<'_>, peer: usize, e: &JobError) {
    let name = &ctx.shared.peers[peer].name;
    tracing::info!("{name} unreachable: {e}");
    ctx.shared
        .schedule()
        .record(Outcome::Unreachable, unix_now_s());
    failed(st, name, peer, &e.to_string());
}

/// Mark the targets of `peer` failing and their published entries stale.
fn failed(st: &mut State<'_>, name: &str, peer: usize, why: &str) {
    for (i, kind) in st.kinds_of(peer) {
        let t = &mut st.per_target[i];
        t.phase = PeerPhase::Failing;
        t.failures += 1;
        t.last_error = Some(why.to_string());
        if st.known.contains_key(&(name.to_string(), kind)) {
            let _ = st.tx.send(Publish::Stale {
                peer: name.to_string(),
                transport: kind.name().to_string(),
            });
        }
    }
}

/// A fan-out round this node drives over the other members of `chunk`.
fn drive_fanout(ctx: &JobCtx<'_>, st: &mut State<'_>, round: u64, chunk: u32) {
    let shared = ctx.shared;
    let members = shared.schedule().fanout_peers(chunk);
    let record = |o: Outcome| {
        shared.schedule().record(o, unix_now_s());
    };
    if super::admission::DriveClaim::could_take(shared).is_err() {
        return record(Outcome::FannedOut { peers: 0, bytes: 0 });
    }
    let started = Instant::now();
    let mut meetings: Vec<Meeting> = Vec::new();
    for member in members {
        let Some(peer) = shared.peer_of_member(member) else {
            continue;
        };
        let mut m = match connect(ctx, peer) {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!("fan-out: {} unreachable: {e}", shared.peers[peer].name);
                continue;
            }
        };
        match m.ask(&shared.node, round, Job::Fanout) {
            Ok(None) => meetings.push(m),
            Ok(Some(why)) => {
                tracing::debug!("fan-out: {} declined: {why:?}", shared.peers[peer].name);
                m.done(round);
            }
            Err(e) => tracing::debug!("fan-out: {}: {e}", shared.peers[peer].name),
        }
    }
    let accepted: Vec<usize> = meetings.iter().map(|m| m.peer).collect();
    let plan = fanout_plan(&accepted, |p, k| {
        st.known.contains_key(&(shared.peers[p].name.clone(), k))
    });
    let mut bytes = 0;
    let mut fanned = 0;
    if !plan.is_empty() {
        match super::admission::DriveClaim::take(shared) {
            Ok(_claim) => {
                for (kind, peers) in &plan {
                    let subset = measured_first(&mut meetings, peers);
                    match job::fanout(ctx, *kind, subset) {
                        Ok(job::Fanned {
                            fit,
                            ci95,
                            bytes: b,
                        }) => {
                            bytes += b;
                            fanned = fanned.max(peers.len());
                            let names = peers
                                .iter()
                                .map(|&p| shared.peers[p].name.clone())
                                .collect();
                            let _ = st.tx.send(Publish::Logfp {
                                peers: names,
                                transport: kind.name().to_string(),
                                fit,
                                ci95,
                            });
                        }
                        Err(e) => tracing::warn!(
                            "LogfP fan-out over {kind} across {} peers failed: {e}",
                            peers.len()
                        ),
                    }
                }
            }
            Err(e) => tracing::debug!("fan-out not run: {e}"),
        }
    }
    let n = fanned as u32;
    if n > 0 {
        st.costs.record(
            false,
            JobKind::Fanout,
            Cost {
                bytes,
                seconds: started.elapsed().as_secs_f64(),
            },
        );
        shared.schedule().set_costs(st.costs.table());
        let tx = st.tx;
        bytes += conflict_probe(
            ctx,
            &mut meetings,
            &plan,
            &mut st.next_contention_s,
            |kind, fit| {
                let _ = tx.send(Publish::Contention {
                    transport: kind.name().to_string(),
                    fit: Box::new(fit),
                });
            },
        );
    }
    for m in meetings {
        m.done(round);
    }
    record(Outcome::FannedOut { peers: n, bytes });
}

/// The targets' and the schedule's status as the status file shows them.
fn publish_status(shared: &Shared, st: &State<'_>, quiet: bool) {
    let peers: Vec<PeerStatus> = st
        .targets
        .iter()
        .zip(&st.per_target)
        .map(|(t, s)| PeerStatus {
            name: shared.peers[t.peer].name.clone(),
            phase: s.phase,
            transport: t.kind.name().into(),
            failures: s.failures,
            last_probe_unix_ns: s.last_probe_unix_ns,
            last_error: s.last_error.clone(),
        })
        .collect();
    {
        let mut held = shared.status.lock().unwrap_or_else(|e| e.into_inner());
        if *held != peers {
            *held = peers;
            shared.status_version.fetch_add(1, Ordering::Relaxed);
        }
    }
    let sched = shared.schedule().status(unix_now_s(), quiet);
    shared
        .spent_bytes
        .store(sched.stats.bytes, Ordering::Relaxed);
    let mut held = shared
        .sched_status
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if held.as_ref() != Some(&sched) {
        *held = Some(sched);
        shared.status_version.fetch_add(1, Ordering::Relaxed);
    }
}
