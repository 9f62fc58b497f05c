//! One probe job: which (peer, transport) targets a node keeps current,
//! the session's negotiation on the control plane, opening the link
//! through the link layer, and the measurement (a full sweep, a cheap
//! re-check against the published model, or a LogfP fan-out over several
//! peers).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use super::admission::DriveClaim;
use super::config::{Config, PeerConfig};
use super::sched::{Job, PeerPhase};
use super::verbs::{self, ControlRendezvous, Waiting};
use super::{Shared, CONTROL_DEADLINE, FALLBACK, KEEP_ALIVE, RECHECK_SIZES, RECHECK_TOLERANCE};
use crate::clock::HostClock;
use crate::control::{
    self, ConnConfig, Connection, Msg, ProbeDone, ProbeRequest, RejectReason, SizePlan,
};
use crate::link::{self, Kind, LinkSpec, NoRendezvous, OpenError, Peer};
use crate::model::{self, LogfpFit};
use crate::probe::{self, ProbeOptions};
use crate::sweep::{self, SweepConfig};
use crate::transport::kind::PeerEndpoint;
use crate::transport::multi::Multi;
use crate::transport::Transport;
use netgauge::EntryData;

/// One (peer, transport) the scheduler keeps current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Target {
    pub peer: usize,
    pub kind: Kind,
}

/// The (peer, transport) pairs to keep current: those asked for that this
/// node can run (raw where a raw responder runs toward the peer, the
/// device kinds with a working device), and the fallback for a peer that
/// asked for it, whose raw is unavailable, or that is left with nothing.
pub(super) fn make_targets(
    cfg: &Config,
    raw_toward: &HashMap<String, (String, [u8; 6])>,
    verbs_ok: bool,
) -> Vec<Target> {
    let mut out = Vec::new();
    for (i, p) in cfg.peers.iter().enumerate() {
        let runs = |k: Kind| match k.descriptor().endpoint {
            PeerEndpoint::MacOnLink => raw_toward.contains_key(&p.name),
            PeerEndpoint::QueuePair { .. } => verbs_ok && p.wants(k),
            _ => false,
        };
        let mut v: Vec<Kind> = Kind::daemon_kinds().filter(|&k| runs(k)).collect();
        let raw_missing = Kind::daemon_kinds()
            .any(|k| k.descriptor().endpoint == PeerEndpoint::MacOnLink && p.wants(k) && !runs(k));
        if p.wants(FALLBACK) || raw_missing || v.is_empty() {
            v.push(FALLBACK);
        }
        out.extend(v.into_iter().map(|kind| Target { peer: i, kind }));
    }
    out
}

/// The fan-outs to run, given each target's phase: over the fallback kind
/// (every node runs its responder) the peers all of whose targets are
/// known, and over each other fan-out kind the peers known over it; each
/// needs at least two peers.
pub(super) fn fanout_sets(
    cfg: &Config,
    targets: &[Target],
    phases: &[PeerPhase],
) -> Vec<(Kind, Vec<usize>)> {
    let known = |t: &(&Target, &PeerPhase)| *t.1 == PeerPhase::Known;
    let mut out = Vec::new();
    for kind in Kind::daemon_kinds().filter(|k| k.descriptor().daemon_fanout) {
        let peers: Vec<usize> = if kind == FALLBACK {
            (0..cfg.peers.len())
                .filter(|&i| {
                    let mut of_i = targets.iter().zip(phases).filter(|(t, _)| t.peer == i);
                    of_i.clone().next().is_some() && of_i.all(|x| known(&x))
                })
                .collect()
        } else {
            targets
                .iter()
                .zip(phases)
                .filter(|x| x.0.kind == kind && known(x))
                .map(|(t, _)| t.peer)
                .collect()
        };
        if peers.len() >= 2 {
            out.push((kind, peers));
        }
    }
    out
}

/// Why one probe job failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum JobError {
    #[error("control plane: {0}")]
    Control(#[from] control::ControlError),
    #[error("{0} refused the session: {1:?}")]
    Refused(String, RejectReason),
    #[error("this node is serving a session driven by {0}")]
    Occupied(String),
    #[error("this node is quiet")]
    Quiet,
    #[error("unexpected control answer {0}")]
    Unexpected(&'static str),
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
    #[error("{0}")]
    Sweep(#[from] sweep::SweepError),
    #[error("{0}")]
    Open(#[from] OpenError),
    /// The peer is not where the published values were measured (its MAC
    /// changed): they no longer describe the link.
    #[error("{0}")]
    PeerChanged(String),
}

/// A negotiated probe session with one peer.
pub(super) struct Negotiated {
    pub conn: Connection,
    pub nonce: u64,
    ep: control::Endpoints,
}

/// A control connection to a peer whose endpoints are known, before any
/// session is asked for: opening it needs no claim to drive, so a peer that
/// is down or slow to answer never keeps this node from serving others.
pub(super) struct Opened {
    conn: Connection,
    ep: control::Endpoints,
}

/// Connect to `peer` and learn its endpoints (every wait has a deadline).
pub(super) fn open(peer: &PeerConfig, cc: &ConnConfig, node: &str) -> Result<Opened, JobError> {
    let mut conn = Connection::connect(peer.address, &peer.name, cc)?;
    let ep = match conn.request(
        &Msg::Endpoints(control::Endpoints {
            node: node.to_string(),
            mac: [0; 6],
            ifindex: 0,
            udp_port: 0,
            raw_ok: false,
            verbs: None,
        }),
        Instant::now() + CONTROL_DEADLINE,
    )? {
        Msg::Endpoints(e) => e,
        other => return Err(JobError::Unexpected(other.kind())),
    };
    Ok(Opened { conn, ep })
}

/// Ask an opened peer for a session. The caller holds its `DriveClaim`.
pub(super) fn request_session(
    opened: Opened,
    peer: &PeerConfig,
    shared: &Shared,
    plan: SizePlan,
    kind: Kind,
) -> Result<Negotiated, JobError> {
    let node = shared.node.as_str();
    let Opened { mut conn, ep } = opened;
    if kind.descriptor().endpoint == PeerEndpoint::MacOnLink && !ep.raw_ok {
        return Err(JobError::Refused(
            peer.name.clone(),
            RejectReason::Transport,
        ));
    }
    let nonce = loop {
        let n: u64 = rand::random();
        if n != 0 {
            break n;
        }
    };
    // raw: the MAC this node sends from toward the peer, which the peer's
    // gate then admits (with the nonce) and nothing else.
    let driver_mac = (kind.descriptor().endpoint == PeerEndpoint::MacOnLink)
        .then(|| shared.raw_toward.get(&peer.name).map(|r| r.1))
        .flatten();
    let req = ProbeRequest {
        session_nonce: nonce,
        transport: kind,
        sizes: plan,
        driver: node.to_string(),
        driver_mac,
    };
    match conn.request(&Msg::ProbeRequest(req), Instant::now() + CONTROL_DEADLINE)? {
        Msg::ProbeAccept(a) if a.session_nonce == nonce => {}
        Msg::ProbeReject(r) => return Err(JobError::Refused(peer.name.clone(), r.reason)),
        other => return Err(JobError::Unexpected(other.kind())),
    }
    Ok(Negotiated { conn, nonce, ep })
}

pub(super) fn finish(n: Negotiated) {
    let mut conn = n.conn;
    let _ = conn.send(&Msg::ProbeDone(ProbeDone {
        session_nonce: n.nonce,
    }));
    conn.close();
}

/// Open the driving link of a negotiated session of `kind` with `peer`:
/// at the UDP port or MAC its `Endpoints` named, or (verbs) through the
/// session's control connection.
pub(super) fn open_link(
    ctx: &JobCtx<'_>,
    peer: &PeerConfig,
    kind: Kind,
    n: &mut Negotiated,
) -> Result<Waiting, JobError> {
    let refused = || JobError::Refused(peer.name.clone(), RejectReason::Transport);
    let mut spec = match kind.descriptor().endpoint {
        PeerEndpoint::QueuePair { .. } => ctx
            .verbs
            .and_then(|v| v.spec(kind))
            .ok_or_else(refused)?
            .clone(),
        // The port the peer's `Endpoints` named: its UDP responder's.
        PeerEndpoint::Port if kind == FALLBACK => {
            let mut s = LinkSpec::new(kind);
            s.peer = Peer::Addr(SocketAddr::new(peer.address.ip(), n.ep.udp_port));
            s
        }
        PeerEndpoint::MacOnLink => {
            let (Some(ifname), true) = (peer.interface.as_deref(), n.ep.raw_ok) else {
                return Err(refused());
            };
            let mut s = LinkSpec::new(kind);
            s.device = Some(ifname.to_string());
            s.peer = Peer::Mac(n.ep.mac);
            s
        }
        _ => return Err(refused()),
    };
    spec.options.session_nonce = Some(n.nonce);
    spec.options.clock = ctx.clock;
    let link = match kind.descriptor().endpoint {
        PeerEndpoint::QueuePair { .. } => {
            let mut rdv = ControlRendezvous {
                conn: &mut n.conn,
                peer: &peer.name,
                me: &ctx.shared.node,
                nonce: n.nonce,
            };
            link::open_driver(&spec, &mut rdv)?
        }
        _ => link::open_driver(&spec, &mut NoRendezvous)?,
    };
    Ok(verbs::waiting(link))
}

/// What a job produced.
pub(super) enum JobResult {
    /// A full sweep, and (raw) the MAC the peer announced.
    Swept {
        result: Box<probe::ProbeResult>,
        peer_mac: Option<[u8; 6]>,
    },
    Rechecked {
        agrees: bool,
        bytes: u64,
    },
}

/// What every job needs besides its target.
pub(super) struct JobCtx<'a> {
    pub cfg: &'a Config,
    pub cc: &'a ConnConfig,
    pub clock: HostClock,
    pub shared: &'a Shared,
    pub verbs: Option<&'a verbs::Node>,
}

/// Run one job toward `peer` over `kind`. A re-check compares with
/// `published`; `expect_mac` (raw) is the MAC the published values were
/// measured toward: a peer announcing another one fails the job as
/// `PeerChanged` before anything is measured.
pub(super) fn run_job(
    ctx: &JobCtx<'_>,
    peer: &PeerConfig,
    kind: Kind,
    job: Job,
    published: Option<&EntryData>,
    expect_mac: Option<[u8; 6]>,
) -> Result<JobResult, JobError> {
    let plan = match job {
        Job::FullSweep => SizePlan::Full,
        Job::Recheck => SizePlan::Recheck(RECHECK_SIZES.to_vec()),
    };
    DriveClaim::could_take(ctx.shared)?;
    let opened = open(peer, ctx.cc, &ctx.shared.node)?;
    let raw = kind.descriptor().endpoint == PeerEndpoint::MacOnLink;
    if let (true, Some(want)) = (raw, expect_mac) {
        if opened.ep.raw_ok && opened.ep.mac != want {
            return Err(JobError::PeerChanged(format!(
                "{} now announces MAC {}, the values were measured toward {}",
                peer.name,
                crate::transport::raw_eth::format_mac(&opened.ep.mac),
                crate::transport::raw_eth::format_mac(&want)
            )));
        }
    }
    let peer_mac = (raw && opened.ep.raw_ok).then_some(opened.ep.mac);
    let _claim = DriveClaim::take(ctx.shared)?;
    let mut n = request_session(opened, peer, ctx.shared, plan, kind)?;
    tracing::debug!("driving a {job:?} over {kind} toward {}", peer.name);
    // The sweep may outlast the session's TTL and the control server's idle
    // limit on the responder: the session's connection is kept alive.
    let alive = Msg::ProbeAlive(ProbeDone {
        session_nonce: n.nonce,
    });
    let result = open_link(ctx, peer, kind, &mut n).and_then(|mut l| {
        n.conn.keep_alive_during(&alive, KEEP_ALIVE, || {
            measure(&mut l, ctx.cfg, kind, job, ctx.clock, published)
        })
    });
    finish(n);
    result.map(|r| match r {
        JobResult::Swept { result, .. } => JobResult::Swept { result, peer_mac },
        r => r,
    })
}

/// A full sweep, or a cheap re-check against the published model.
fn measure<T: Transport>(
    link: &mut T,
    cfg: &Config,
    kind: Kind,
    job: Job,
    clock: HostClock,
    published: Option<&EntryData>,
) -> Result<JobResult, JobError> {
    match (job, published) {
        (Job::Recheck, Some(model)) => {
            let sc = recheck_config();
            let before = link.counters();
            let samples = sweep::measure_sizes(link, &clock, 0, &RECHECK_SIZES, &sc)?;
            let after = link.counters();
            let bytes =
                (after.sent_bytes - before.sent_bytes) + (after.recv_bytes - before.recv_bytes);
            Ok(JobResult::Rechecked {
                agrees: agrees_with(&samples, model),
                bytes,
            })
        }
        _ => {
            let opts = full_config(cfg, kind);
            let r = probe::run(link, &clock, 0, &opts, &mut ())?;
            Ok(JobResult::Swept {
                result: Box::new(r),
                peer_mac: None,
            })
        }
    }
}

/// The sweep settings of a re-check: [`RECHECK_SIZES`] only, a few
/// repetitions each.
pub(super) fn recheck_config() -> SweepConfig {
    SweepConfig {
        refine: false,
        max_reps: 12,
        long_bursts: false,
        repeat_smallest: false,
        ..SweepConfig::default()
    }
}

/// The sweep settings of a full sweep.
pub(super) fn full_config(cfg: &Config, kind: Kind) -> ProbeOptions {
    let mut opts = ProbeOptions::for_kind(kind);
    opts.sweep.max_size_bytes = cfg.max_size_bytes;
    if let Some(r) = cfg.max_reps {
        opts.sweep.max_reps = r;
        opts.sweep.min_reps = opts.sweep.min_reps.min(r);
    }
    opts
}

/// Does a re-check agree with the published entry (measured now, or
/// restored from the state file)? A restored entry is held to the plain
/// tolerance: a re-check too noisy to tell does not make it current.
pub(super) fn agrees_with(samples: &[model::SizeSamples], published: &EntryData) -> bool {
    let restored = published.flags & netgauge::flags::RESTORED != 0;
    let points = model::fit::size_points(samples);
    points.iter().all(|p| {
        let Some(r) = published
            .ranges
            .iter()
            .find(|r| p.size_bytes >= r.from_bytes && p.size_bytes <= r.to_bytes)
            .or(published.ranges.last())
        else {
            return false;
        };
        let want = r.gap_ns(p.size_bytes);
        // Off by more than the tolerance *and* by more than the re-check's
        // own noise (3 × its 95 % half-width): a noisy host must not turn
        // every re-check into a full sweep.
        let noise = if p.gap_hw_ns.is_finite() && !restored {
            3.0 * p.gap_hw_ns
        } else {
            0.0
        };
        let gap_ok = (p.gap_ns - want).abs() <= (RECHECK_TOLERANCE * want.abs()).max(noise);
        let eel_ok = p.size_bytes != 1
            || (p.half_rtt_ns - published.eel_ns).abs() <= RECHECK_TOLERANCE * published.eel_ns;
        gap_ok && eel_ok
    })
}

/// Sessions negotiated with several peers at once; each ends (`ProbeDone`)
/// when this is dropped, after the links that use it.
pub(super) struct Sessions(pub Vec<Negotiated>);

impl Drop for Sessions {
    fn drop(&mut self) {
        for n in self.0.drain(..) {
            finish(n);
        }
    }
}

/// Sessions with every peer of `peers` at once over `kind` (each consents
/// through its own admission to `plan(i)`, i its place in `peers`), and a
/// link to each: what a multi-peer job (the LogfP fan-out, the conflict
/// probe) runs on. Every peer is connected to before the claim to drive,
/// as in `run_job`; the claim and the sessions end when dropped.
pub(super) fn open_sessions<'a>(
    ctx: &JobCtx<'a>,
    kind: Kind,
    peers: &[usize],
    plan: impl Fn(usize) -> SizePlan,
) -> Result<(DriveClaim<'a>, Sessions, Vec<Waiting>), JobError> {
    let (cfg, shared) = (ctx.cfg, ctx.shared);
    DriveClaim::could_take(shared)?;
    let mut opened = Vec::with_capacity(peers.len());
    for &i in peers {
        opened.push((i, open(&cfg.peers[i], ctx.cc, &shared.node)?));
    }
    let claim = DriveClaim::take(shared)?;
    let mut sessions = Sessions(Vec::with_capacity(peers.len()));
    let mut links = Vec::with_capacity(peers.len());
    for (j, (i, o)) in opened.into_iter().enumerate() {
        let p = &cfg.peers[i];
        sessions
            .0
            .push(request_session(o, p, shared, plan(j), kind)?);
        let n = sessions.0.last_mut().expect("just pushed");
        links.push(open_link(ctx, p, kind, n)?);
    }
    Ok((claim, sessions, links))
}

/// The 1:P−P:1 pattern across `peers` over `kind`: one link to each peer's
/// responder (udp: its standing responder; rdma: a queue pair to each).
pub(super) fn fanout_job(
    ctx: &JobCtx<'_>,
    kind: Kind,
    peers: &[usize],
) -> Result<Fanned, JobError> {
    if !kind.descriptor().daemon_fanout {
        return Err(JobError::Unexpected("no fan-out over this transport"));
    }
    let (_claim, _sessions, links) =
        open_sessions(ctx, kind, peers, |_| SizePlan::Recheck(vec![1]))?;
    fanout_run(&mut Multi::new(links), ctx.clock, ctx.cfg.max_reps)
}

/// A fan-out's fit, its intervals and the payload bytes it sent.
pub(super) struct Fanned {
    pub fit: LogfpFit,
    pub ci95: std::collections::BTreeMap<String, model::Interval>,
    pub bytes: u64,
}

/// Bootstrap resamples of a fan-out's intervals (as for a sweep's).
const FANOUT_RESAMPLES: usize = 200;

fn fanout_run<T: Transport>(
    multi: &mut Multi<T>,
    clock: HostClock,
    max_reps: Option<u32>,
) -> Result<Fanned, JobError> {
    let mut sc = SweepConfig::default();
    if let Some(r) = max_reps {
        sc.max_reps = r;
        sc.min_reps = sc.min_reps.min(r);
    }
    let peers = multi.caps().peers;
    let before = multi.counters();
    let samples = sweep::fanout_sweep(multi, &clock, peers, 1, &sc)?;
    let after = multi.counters();
    let bytes = (after.sent_bytes - before.sent_bytes) + (after.recv_bytes - before.recv_bytes);
    Ok(Fanned {
        fit: model::logfp::fit_logfp(&samples),
        ci95: model::logfp::ci95_logfp(&samples, FANOUT_RESAMPLES, rand::random()),
        bytes,
    })
}
