//! The daemon's answers on the control plane, on the control server's
//! threads: who it is, its endpoints, rounds admitted by the schedule and
//! settled, sessions granted and ended, the queue pair of an accepted
//! verbs session, and the node's published view (`ngctl matrix`).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::admission::{accept_session, RoundAdmit};
use super::config::OPERATOR_NAME;
use super::job::JobCtx;
use super::publisher::Outcome;
use super::{contention, unix_now_s, verbs, Shared};
use crate::cluster::schedule::Decline;
use crate::control::msg::MAX_ENTRIES_PER_REPLY;
use crate::control::{
    self, ConnId, EntriesReply, Msg, ProbeDone, ProbeReject, RejectReason, RoundReply,
};
use crate::transport::kind::PeerEndpoint;

/// The control plane's answers.
pub(super) struct ControlHandler(pub std::sync::Arc<Shared>);

/// The address a message came from when the server does not say.
const NO_ADDR: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::UNSPECIFIED,
    0,
));

impl control::Handler for ControlHandler {
    fn handle(&self, peer: &str, msg: Msg) -> Option<Msg> {
        handle_control(&self.0, ConnId::default(), NO_ADDR, peer, msg)
    }
    fn handle_on(&self, conn: ConnId, peer: &str, msg: Msg) -> Option<Msg> {
        handle_control(&self.0, conn, NO_ADDR, peer, msg)
    }
    fn handle_from(&self, conn: ConnId, addr: SocketAddr, peer: &str, msg: Msg) -> Option<Msg> {
        handle_control(&self.0, conn, addr, peer, msg)
    }
    /// The connection a session was granted on ended: so did the session
    /// (its driver finished, or is gone).
    fn closed(&self, conn: ConnId, peer: &str) {
        if self
            .0
            .end_serving_if(|s| s.until.is_some() && s.conn == conn)
        {
            tracing::debug!("session from {peer} ended with its connection");
        }
        // A round admitted on it and never settled: its estimate stands.
        let ended = {
            let mut a = self.0.activity();
            let mine = a.round.as_ref().is_some_and(|r| r.conn == conn);
            if mine {
                a.round = None;
            }
            mine
        };
        if ended {
            self.0.schedule().served_as_charged();
        }
    }
}

/// The schedule's decline on the wire.
fn reason_of(d: Decline) -> RejectReason {
    match d {
        Decline::Quiet => RejectReason::Quiet,
        Decline::Budget => RejectReason::Budget,
        Decline::Busy => RejectReason::Busy,
        Decline::NotExpected => RejectReason::NotExpected,
    }
}

/// `RoundRequest` at `now_s`: does the schedule admit `peer`'s job in that
/// round?
pub(super) fn admit_round(
    shared: &Shared,
    conn: ConnId,
    peer: &str,
    r: &control::RoundRequest,
    now_s: f64,
) -> Msg {
    let reply = |declined| {
        Msg::RoundReply(RoundReply {
            round: r.round,
            declined,
        })
    };
    if r.driver != peer {
        return reply(Some(RejectReason::WrongDriver));
    }
    {
        let a = shared.activity();
        // A meeting of this node's own, or a session it serves, outlasted
        // its round.
        let serving_other = a.serving_live(Instant::now()) && a.serving.driver != peer;
        if a.driving || serving_other {
            tracing::debug!(
                "round {} from {peer} declined: this node is {}",
                r.round,
                if a.driving { "driving" } else { "serving" }
            );
            return reply(Some(RejectReason::Busy));
        }
    }
    let quiet = shared.quiet.load(Ordering::Relaxed);
    let admitted = shared.schedule().admit(peer, r.round, r.job, now_s, quiet);
    match admitted {
        Ok(()) => {
            shared.activity().round = Some(RoundAdmit {
                driver: peer.to_string(),
                round: r.round,
                conn,
            });
            reply(None)
        }
        Err(d) => {
            tracing::debug!(
                "round {} from {peer}: {} declined ({d:?})",
                r.round,
                r.job.name()
            );
            reply(Some(reason_of(d)))
        }
    }
}

/// `Entries`: a page of the node's view.
fn entries_page(shared: &Shared, offset: u32, max: u32) -> Msg {
    let view = shared
        .view
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let from = (offset as usize).min(view.len());
    let to = (from + (max as usize).min(MAX_ENTRIES_PER_REPLY)).min(view.len());
    Msg::EntriesReply(EntriesReply {
        node: shared.node.clone(),
        total: view.len() as u32,
        offset: from as u32,
        entries: view[from..to].to_vec(),
    })
}

pub(super) fn handle_control(
    shared: &Shared,
    conn: ConnId,
    from: SocketAddr,
    peer: &str,
    msg: Msg,
) -> Option<Msg> {
    // The reader's tool (`ngctl matrix`) reads; it takes part in nothing.
    if peer == OPERATOR_NAME {
        return match msg {
            Msg::Entries(r) => Some(entries_page(shared, r.offset, r.max)),
            Msg::Status => Some(Msg::StatusReply(daemon_status(shared))),
            _ => None,
        };
    }
    match msg {
        Msg::RoundRequest(r) => Some(admit_round(shared, conn, peer, &r, unix_now_s())),
        Msg::RoundDone(d) => {
            let settled = {
                let mut a = shared.activity();
                let mine = a
                    .round
                    .as_ref()
                    .is_some_and(|r| r.conn == conn && r.driver == peer && r.round == d.round);
                if mine {
                    a.round = None;
                }
                mine
            };
            if settled {
                shared.schedule().served(d.bytes);
            }
            None
        }
        Msg::Entries(r) => Some(entries_page(shared, r.offset, r.max)),
        Msg::Hello(_) => Some(Msg::Hello(control::Hello {
            node: shared.node.clone(),
            generation: shared.generation,
            nonce: rand::random(),
            time_unix_ns: crate::publish::unix_now_ns(),
        })),
        Msg::Endpoints(control::Endpoints { verbs: Some(v), .. }) => {
            Some(answer_verbs(shared, peer, &v))
        }
        Msg::Endpoints(_) => {
            let raw = shared.raw_toward.get(peer);
            Some(Msg::Endpoints(control::Endpoints {
                node: shared.node.clone(),
                mac: raw.map_or([0; 6], |r| r.1),
                ifindex: 0,
                udp_port: shared.udp_port,
                raw_ok: raw.is_some(),
                verbs: None,
            }))
        }
        Msg::ProbeRequest(req) => Some(accept_session(shared, conn, from, peer, &req)),
        Msg::ProbeDone(ProbeDone { session_nonce }) => {
            shared.end_serving_if(|s| s.nonce == session_nonce && s.driver == peer);
            None
        }
        Msg::StreamOrder(o) => Some(Msg::StreamResult(match shared.operator.get() {
            Some(op) => {
                let ctx = JobCtx {
                    cfg: &op.cfg,
                    cc: &op.cc,
                    clock: op.clock,
                    shared,
                    verbs: op.verbs.as_deref(),
                };
                contention::stream_order(&ctx, peer, &o)
            }
            None => control::StreamResult {
                nonce: o.nonce,
                out_bytes_per_s: f64::NAN,
                in_bytes_per_s: f64::NAN,
                rounds: 0,
                bytes: 0,
                error: Some("this node takes no orders yet".into()),
            },
        })),
        // Only this node's own operator hands it results to publish.
        Msg::Bisection(b) if control::operator_of(peer) == Some(shared.node.as_str()) => {
            let op = shared.operator.get()?;
            let _ = op.outcomes.try_send(Outcome::Bisection(b.clone()));
            Some(Msg::Bisection(b))
        }
        Msg::ProbeAlive(ProbeDone { session_nonce }) => {
            if shared.extend_serving(conn, peer, session_nonce) {
                tracing::debug!("session from {peer} extended by its keep-alive");
            } else {
                tracing::debug!("keep-alive from {peer} for a session not served here");
            }
            None
        }
        Msg::Status => Some(Msg::StatusReply(daemon_status(shared))),
        _ => None,
    }
}

/// Peers a `StatusReply` lists at most: their encoding stays well inside
/// one frame (a peer takes at most about 100 bytes).
const STATUS_REPLY_PEERS: usize = 512;

/// What `Msg::Status` answers: the status file's content, bounded.
fn daemon_status(shared: &Shared) -> control::DaemonStatus {
    use super::sched::PeerPhase;
    let peers = shared
        .status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .take(STATUS_REPLY_PEERS)
        .map(|p| control::PeerStatus {
            name: p.name.clone(),
            state: match p.phase {
                PeerPhase::New => control::PeerState::New,
                PeerPhase::Known => control::PeerState::Current,
                PeerPhase::Suspect => control::PeerState::Stale,
                PeerPhase::Failing => control::PeerState::Down,
            },
            last_probe_unix_ns: p.last_probe_unix_ns,
            last_transport: p.transport.parse().ok(),
            failures: p.failures,
        })
        .collect();
    let uptime = shared.started.elapsed();
    let spent = shared
        .spent_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    control::DaemonStatus {
        node: shared.node.clone(),
        generation: shared.generation,
        uptime_ns: uptime.as_nanos().min(u128::from(u64::MAX)) as u64,
        peers,
        budget_bytes_per_s: shared.budget_bytes_per_s,
        budget_used_bytes_per_s: (spent as f64 / uptime.as_secs_f64().max(1.0)) as u64,
        rejects: shared
            .rejects
            .get()
            .map(|r| r.snapshot())
            .unwrap_or_default(),
    }
}

/// A rejection's free text, bounded as the control plane requires.
pub(super) fn reject_text(why: &str) -> RejectReason {
    let mut s = format!("verbs: {why}");
    if s.len() > control::msg::MAX_TEXT_BYTES {
        let mut cut = control::msg::MAX_TEXT_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    RejectReason::Other(s)
}

/// `Endpoints { verbs: Some(..) }`: the driver's queue pair for the session
/// this node accepted from it; answered with ours once it is connected.
fn answer_verbs(shared: &Shared, peer: &str, v: &control::VerbsEndpoint) -> Msg {
    let reject = |reason| {
        Msg::ProbeReject(ProbeReject {
            session_nonce: v.session_nonce,
            reason,
        })
    };
    let kind = {
        let a = shared.activity();
        let s = &a.serving;
        if !a.serving_live(Instant::now()) || s.nonce != v.session_nonce || s.driver != peer {
            return reject(RejectReason::Other("verbs: no such session".into()));
        }
        match s.transport {
            Some(k) if matches!(k.descriptor().endpoint, PeerEndpoint::QueuePair { .. }) => k,
            _ => return reject(RejectReason::Transport),
        }
    };
    let Some(serving) = shared.verbs.get() else {
        return reject(RejectReason::Transport);
    };
    match verbs::answer(serving, kind, v) {
        Ok(mine) => Msg::Endpoints(control::Endpoints {
            node: shared.node.clone(),
            mac: [0; 6],
            ifindex: 0,
            udp_port: shared.udp_port,
            raw_ok: false,
            verbs: Some(mine),
        }),
        Err(why) => {
            tracing::warn!("verbs session from {peer} not set up: {why}");
            reject(reject_text(&why))
        }
    }
}
