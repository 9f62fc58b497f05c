//! One meeting of the cluster schedule, on the control plane and the
//! links: which (peer, transport) targets a node keeps current, the
//! control connection of a meeting (its round admitted by the partner's
//! schedule, then one session per transport on the same connection), the
//! link of each session through the link layer, and the measurements (a
//! full sweep, a cheap re-check, a LogfP fan-out over several peers).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Instant;

use super::cluster::Peer;
use super::config::Config;
use super::verbs::{self, ControlRendezvous, Waiting};
use super::{recheck_plan, Shared, CONTROL_DEADLINE, FALLBACK, KEEP_ALIVE};
use crate::clock::HostClock;
use crate::cluster::schedule::{Decline, Job};
use crate::control::{
    self, ConnConfig, Connection, Msg, ProbeDone, ProbeRequest, RejectReason, RoundDone,
    RoundRequest, SizePlan,
};
use crate::link::{self, Kind, LinkSpec, NoRendezvous, OpenError, Peer as LinkPeer};
use crate::model::{self, LogfpFit, SizeSamples};
use crate::probe::{self, ProbeOptions};
use crate::sweep::{self, SweepConfig};
use crate::transport::kind::PeerEndpoint;
use crate::transport::multi::Multi;
use crate::transport::Transport;

/// One (peer, transport) the schedule keeps current.
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
    peers: &[Peer],
    raw_toward: &HashMap<String, (String, [u8; 6])>,
    verbs_ok: bool,
) -> Vec<Target> {
    let mut out = Vec::new();
    for (i, p) in peers.iter().enumerate() {
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

/// What a fan-out over the accepted `peers` runs: per fan-out kind, the
/// peers measured over it (`measured`: a published entry of the pair over
/// the kind). A peer never met over a kind, or that serves no session of
/// it, would fail the whole pattern; a kind needs two peers.
pub(super) fn fanout_plan(
    peers: &[usize],
    measured: impl Fn(usize, Kind) -> bool,
) -> Vec<(Kind, Vec<usize>)> {
    Kind::daemon_kinds()
        .filter(|k| k.descriptor().daemon_fanout)
        .map(|k| {
            (
                k,
                peers.iter().copied().filter(|&p| measured(p, k)).collect(),
            )
        })
        .filter(|(_, p): &(Kind, Vec<usize>)| p.len() >= 2)
        .collect()
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
    #[error("{0}'s address is not known (its name did not resolve)")]
    NoAddress(String),
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
    #[error("{0}")]
    Sweep(#[from] sweep::SweepError),
    #[error("{0}")]
    Open(#[from] OpenError),
}

impl JobError {
    /// The partner cannot run the transport (or this node toward it): the
    /// kind is skipped, not a failure of the pair.
    pub fn refused_transport(&self) -> bool {
        matches!(self, JobError::Refused(_, RejectReason::Transport))
    }

    /// The partner answered and declined the session (busy with another,
    /// quiet, over budget, not expecting it): no failure of the pair.
    pub fn declined(&self) -> Option<Decline> {
        match self {
            JobError::Refused(
                _,
                r @ (RejectReason::Busy
                | RejectReason::Quiet
                | RejectReason::Budget
                | RejectReason::NotExpected),
            ) => Some(decline_of(r)),
            JobError::Occupied(_) => Some(Decline::Busy),
            _ => None,
        }
    }
}

/// The schedule's reading of a decline.
pub(super) fn decline_of(r: &RejectReason) -> Decline {
    match r {
        RejectReason::Quiet => Decline::Quiet,
        RejectReason::Budget => Decline::Budget,
        RejectReason::Busy => Decline::Busy,
        _ => Decline::NotExpected,
    }
}

/// A control connection to one peer for one meeting: its endpoints are
/// known, its round may be asked for, and its sessions follow one another
/// on it.
pub(super) struct Meeting {
    pub peer: usize,
    conn: Connection,
    addr: SocketAddr,
    ep: control::Endpoints,
    /// Payload bytes of the sessions so far (both directions).
    pub bytes: u64,
}

/// What every job needs besides its target.
pub(super) struct JobCtx<'a> {
    pub cfg: &'a Config,
    pub cc: &'a ConnConfig,
    pub clock: HostClock,
    pub shared: &'a Shared,
    pub verbs: Option<&'a verbs::Node>,
}

/// Connect to `peer` and learn its endpoints (every wait has a deadline).
/// Needs no claim to drive: a peer that is down or slow to answer never
/// keeps this node from serving others.
pub(super) fn connect(ctx: &JobCtx<'_>, peer: usize) -> Result<Meeting, JobError> {
    let p = &ctx.shared.peers[peer];
    let addr = ctx
        .shared
        .addresses
        .get(peer)
        .ok_or_else(|| JobError::NoAddress(p.name.clone()))?;
    let mut conn = Connection::connect(addr, &p.name, ctx.cc)?;
    let ep = match conn.request(
        &Msg::Endpoints(control::Endpoints {
            node: ctx.shared.node.clone(),
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
    Ok(Meeting {
        peer,
        conn,
        addr,
        ep,
        bytes: 0,
    })
}

impl Meeting {
    /// The control address the partner was met at.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }

    /// The MAC the partner announced for raw Ethernet, if it serves raw.
    pub fn announced_mac(&self) -> Option<[u8; 6]> {
        self.ep.raw_ok.then_some(self.ep.mac)
    }

    /// Ask the partner to admit `job` in `round`: None when it does, else
    /// why not.
    pub fn ask(
        &mut self,
        node: &str,
        round: u64,
        job: Job,
    ) -> Result<Option<RejectReason>, JobError> {
        let req = Msg::RoundRequest(RoundRequest {
            driver: node.to_string(),
            round,
            job,
        });
        match self.conn.request(&req, Instant::now() + CONTROL_DEADLINE)? {
            Msg::RoundReply(r) if r.round == round => Ok(r.declined),
            other => Err(JobError::Unexpected(other.kind())),
        }
    }

    /// The round's jobs are over: tell the partner what they cost, close.
    pub fn done(mut self, round: u64) {
        let _ = self.conn.send(&Msg::RoundDone(RoundDone {
            round,
            bytes: self.bytes,
        }));
        self.conn.close();
    }

    /// One session of `kind` on this connection: ask for it, open the
    /// link, run `f` on it (the connection kept alive meanwhile), end it.
    pub fn session<R>(
        &mut self,
        ctx: &JobCtx<'_>,
        kind: Kind,
        plan: SizePlan,
        f: impl FnOnce(&mut Waiting) -> Result<R, JobError>,
    ) -> Result<R, JobError> {
        let nonce = self.request(ctx, kind, plan)?;
        // The sweep may outlast the session's TTL and the control server's
        // idle limit on the responder: the session's connection is kept
        // alive.
        let alive = Msg::ProbeAlive(ProbeDone {
            session_nonce: nonce,
        });
        let result = self.open_link(ctx, kind, nonce).and_then(|mut l| {
            self.conn
                .keep_alive_during(&alive, KEEP_ALIVE, || f(&mut l))
        });
        let _ = self.conn.send(&Msg::ProbeDone(ProbeDone {
            session_nonce: nonce,
        }));
        result
    }

    /// Ask for a session of `kind`; its nonce.
    fn request(&mut self, ctx: &JobCtx<'_>, kind: Kind, plan: SizePlan) -> Result<u64, JobError> {
        let name = ctx.shared.peers[self.peer].name.clone();
        if kind.descriptor().endpoint == PeerEndpoint::MacOnLink && !self.ep.raw_ok {
            return Err(JobError::Refused(name, RejectReason::Transport));
        }
        // raw: the MAC this node sends from toward the peer, which the
        // peer's gate then admits (with the nonce) and nothing else.
        let driver_mac = (kind.descriptor().endpoint == PeerEndpoint::MacOnLink)
            .then(|| ctx.shared.raw_toward.get(&name).map(|r| r.1))
            .flatten();
        let nonce = loop {
            let n: u64 = rand::random();
            if n != 0 {
                break n;
            }
        };
        let req = ProbeRequest {
            session_nonce: nonce,
            transport: kind,
            sizes: plan,
            driver: ctx.shared.node.clone(),
            driver_mac,
        };
        match self
            .conn
            .request(&Msg::ProbeRequest(req), Instant::now() + CONTROL_DEADLINE)?
        {
            Msg::ProbeAccept(a) if a.session_nonce == nonce => Ok(nonce),
            Msg::ProbeReject(r) => Err(JobError::Refused(name, r.reason)),
            other => Err(JobError::Unexpected(other.kind())),
        }
    }

    /// Open the driving link of an accepted session of `kind`: at the UDP
    /// port or MAC the peer's `Endpoints` named, or (verbs) through the
    /// session's control connection.
    fn open_link(&mut self, ctx: &JobCtx<'_>, kind: Kind, nonce: u64) -> Result<Waiting, JobError> {
        let peer = &ctx.shared.peers[self.peer];
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
                s.peer = LinkPeer::Addr(SocketAddr::new(self.addr.ip(), self.ep.udp_port));
                s
            }
            PeerEndpoint::MacOnLink => {
                let (Some(ifname), true) = (peer.interface.as_deref(), self.ep.raw_ok) else {
                    return Err(refused());
                };
                let mut s = LinkSpec::new(kind);
                s.device = Some(ifname.to_string());
                s.peer = LinkPeer::Mac(self.ep.mac);
                s
            }
            _ => return Err(refused()),
        };
        spec.options.session_nonce = Some(nonce);
        spec.options.clock = ctx.clock;
        let link = match kind.descriptor().endpoint {
            PeerEndpoint::QueuePair { .. } => {
                let mut rdv = ControlRendezvous {
                    conn: &mut self.conn,
                    peer: &peer.name,
                    me: &ctx.shared.node,
                    nonce,
                };
                link::open_driver(&spec, &mut rdv)?
            }
            _ => link::open_driver(&spec, &mut NoRendezvous)?,
        };
        Ok(verbs::waiting(link))
    }
}

/// The full sweep's options over `kind` from the configuration.
pub(super) fn sweep_options(cfg: &Config, kind: Kind) -> ProbeOptions {
    let mut opts = ProbeOptions::for_kind(kind);
    opts.sweep.max_size_bytes = cfg.max_size_bytes;
    opts.sweep.latency_samples = cfg.latency_samples;
    if let Some(r) = cfg.max_reps {
        opts.sweep.max_reps = r;
        opts.sweep.min_reps = opts.sweep.min_reps.min(r);
    }
    opts
}

/// A full sweep over `link`.
pub(super) fn full_sweep<T: Transport>(
    link: &mut T,
    cfg: &Config,
    kind: Kind,
    clock: HostClock,
) -> Result<probe::ProbeResult, JobError> {
    Ok(probe::run(
        link,
        &clock,
        0,
        &sweep_options(cfg, kind),
        &mut (),
    )?)
}

/// A cheap re-check over `link`: its samples and the bytes it sent.
pub(super) fn recheck<T: Transport>(
    link: &mut T,
    cfg: &Config,
    clock: HostClock,
) -> Result<(Vec<SizeSamples>, u64), JobError> {
    let plan = recheck_plan();
    let sc = plan.sweep_config(&sweep_options(cfg, FALLBACK).sweep);
    let before = link.counters();
    let samples = sweep::measure_sizes(link, &clock, 0, &plan.sizes_bytes, &sc)?;
    Ok((samples, link.counters().bytes_since(&before)))
}

/// The sizes a re-check asks the responder for.
pub(super) fn recheck_sizes() -> SizePlan {
    SizePlan::Recheck(recheck_plan().sizes_bytes)
}

/// Sessions of `kind` with every meeting at once, each asked for
/// `plan(j)` (j: its place in `meetings`): `work` runs on their links with
/// every session's connection kept alive, then every session ends. The
/// payload bytes `work` reports are added to the meetings' counts in equal
/// shares. What a multi-peer job (the LogfP fan-out, the conflict probe)
/// runs on; the caller holds the claim to drive.
pub(super) fn sessions_with<R>(
    ctx: &JobCtx<'_>,
    kind: Kind,
    meetings: &mut [Meeting],
    plan: impl Fn(usize) -> SizePlan,
    work: impl FnOnce(Vec<Waiting>) -> Result<(R, u64), JobError>,
) -> Result<R, JobError> {
    let mut nonces = Vec::with_capacity(meetings.len());
    let result = (|| {
        let mut links = Vec::with_capacity(meetings.len());
        for (j, m) in meetings.iter_mut().enumerate() {
            let nonce = m.request(ctx, kind, plan(j))?;
            nonces.push(nonce);
            links.push(m.open_link(ctx, kind, nonce)?);
        }
        let mut alive: Vec<(&mut Connection, u64)> = meetings
            .iter_mut()
            .zip(&nonces)
            .map(|(m, &n)| (&mut m.conn, n))
            .collect();
        keep_alive(&mut alive, || work(links))
    })();
    for (m, &nonce) in meetings.iter_mut().zip(&nonces) {
        let _ = m.conn.send(&Msg::ProbeDone(ProbeDone {
            session_nonce: nonce,
        }));
    }
    let (r, bytes) = result?;
    let share = bytes / meetings.len().max(1) as u64;
    for m in meetings.iter_mut() {
        m.bytes += share;
    }
    Ok(r)
}

/// Run `work` while every session's connection is kept alive (the
/// responders' session TTL and idle limit may be shorter than the job):
/// one keep-alive per connection, nested.
fn keep_alive<R>(conns: &mut [(&mut Connection, u64)], work: impl FnOnce() -> R) -> R {
    match conns.split_first_mut() {
        None => work(),
        Some(((conn, nonce), rest)) => {
            let alive = Msg::ProbeAlive(ProbeDone {
                session_nonce: *nonce,
            });
            conn.keep_alive_during(&alive, KEEP_ALIVE, || keep_alive(rest, work))
        }
    }
}

/// Put the meetings of `peers` first (in their order) and return them.
pub(super) fn measured_first<'m>(
    meetings: &'m mut [Meeting],
    peers: &[usize],
) -> &'m mut [Meeting] {
    meetings.sort_by_key(|m| {
        peers
            .iter()
            .position(|&p| p == m.peer)
            .unwrap_or(usize::MAX)
    });
    &mut meetings[..peers.len()]
}

/// The 1:P−P:1 pattern over `kind` across the accepted meetings: one
/// session with each (udp: its standing responder; rdma: a queue pair to
/// each). The caller holds the claim to drive.
pub(super) fn fanout(
    ctx: &JobCtx<'_>,
    kind: Kind,
    meetings: &mut [Meeting],
) -> Result<Fanned, JobError> {
    if !kind.descriptor().daemon_fanout || meetings.len() < 2 {
        return Err(JobError::Unexpected("no fan-out over this transport"));
    }
    let plan = |_| SizePlan::Recheck(vec![1]);
    sessions_with(ctx, kind, meetings, plan, |links| {
        let f = fanout_run(&mut Multi::new(links), ctx.clock, ctx.cfg.max_reps)?;
        let bytes = f.bytes;
        Ok((f, bytes))
    })
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
    let bytes = multi.counters().bytes_since(&before);
    Ok(Fanned {
        fit: model::logfp::fit_logfp(&samples),
        ci95: model::logfp::ci95_logfp(&samples, FANOUT_RESAMPLES, rand::random()),
        bytes,
    })
}
