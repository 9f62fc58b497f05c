//! Who may drive and who may serve: a node either drives (one session, or
//! one LogfP fan-out) or serves one session, never both at once. Two
//! sessions through one node share its link and its CPU, and each would
//! measure the other. Checks and claims happen under one lock, so a
//! request that crosses our own in flight is refused instead of slipping
//! in between.
//!
//! A session is served only within a round the schedule admitted for its
//! driver on the same control connection ([`RoundAdmit`], set by the
//! control handler on `RoundRequest`): the schedule, not the order of
//! arrival, decides whom a node serves. The one exception is a flow
//! session outside the rounds (an operator's stream order): it is served
//! on its own consent (not quiet, within the flow budget).

use std::net::SocketAddr;
use std::time::Instant;

use super::contention::Rounds;
use super::job::JobError;
use super::{Shared, SESSION_TTL};
use crate::control::{ConnId, Msg, ProbeAccept, ProbeReject, ProbeRequest, RejectReason, SizePlan};
use crate::transport::dgram::GateSource;
use crate::transport::kind::PeerEndpoint;
use crate::transport::Kind;

/// The session this node serves (at most one). It ends on `ProbeDone`, when
/// the driver's control connection that asked for it ends (a killed
/// driver's kernel closes it at once), when the verbs responder gives up on
/// it, or `SESSION_TTL` after it was granted or last extended (the driver
/// sends `ProbeAlive` every `KEEP_ALIVE` while it measures).
#[derive(Default)]
pub(super) struct Session {
    pub nonce: u64,
    pub driver: String,
    pub conn: ConnId,
    pub until: Option<Instant>,
    pub transport: Option<Kind>,
}

/// A round's job the schedule admitted for `driver` on connection `conn`;
/// its sessions may follow on that connection until `RoundDone` or its
/// end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct RoundAdmit {
    pub driver: String,
    pub round: u64,
    pub conn: ConnId,
}

/// What this node's probing is busy with.
#[derive(Default)]
pub(super) struct Activity {
    pub serving: Session,
    pub driving: bool,
    /// The round admitted last (its sessions are served).
    pub round: Option<RoundAdmit>,
}

impl Activity {
    pub fn serving_live(&self, now: Instant) -> bool {
        self.serving.until.is_some_and(|u| u > now)
    }
}

/// This node's claim to drive, held for a whole job; dropping it frees the
/// node for sessions from its peers.
pub(super) struct DriveClaim<'a>(&'a Shared);

impl<'a> DriveClaim<'a> {
    /// `Err(Occupied)` while this node serves a live session.
    pub fn take(shared: &'a Shared) -> Result<Self, JobError> {
        let mut a = shared.activity();
        Self::free(&a)?;
        a.driving = true;
        Ok(DriveClaim(shared))
    }

    /// Whether a claim could be taken now, without taking it: checked
    /// before a job connects to its peers, so a node that serves a session
    /// does not open (and handshake) a control connection to its driver
    /// every retry, which that driver's measurement would pay for. The
    /// claim itself is still taken only once the peers have answered.
    pub fn could_take(shared: &Shared) -> Result<(), JobError> {
        Self::free(&shared.activity())
    }

    fn free(a: &Activity) -> Result<(), JobError> {
        if a.serving_live(Instant::now()) {
            return Err(JobError::Occupied(a.serving.driver.clone()));
        }
        Ok(())
    }
}

impl Drop for DriveClaim<'_> {
    fn drop(&mut self) {
        self.0.activity().driving = false;
    }
}

impl Shared {
    pub(super) fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        // Every writer leaves the state consistent, so a poisoned lock's
        // contents are still good.
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// End the served session, and close the responders' gate, if `which`
    /// says it is the one meant. True if it ended.
    pub(super) fn end_serving_if(&self, which: impl FnOnce(&Session) -> bool) -> bool {
        let mut a = self.activity();
        if !which(&a.serving) {
            return false;
        }
        a.serving = Session::default();
        self.gate.close();
        true
    }

    /// The driver of the served session says it is still measuring: the
    /// session lasts another `SESSION_TTL` from now. Only the session's own
    /// connection can extend it. True if it did.
    pub(super) fn extend_serving(&self, conn: ConnId, peer: &str, nonce: u64) -> bool {
        let mut a = self.activity();
        let s = &mut a.serving;
        if s.until.is_none() || s.conn != conn || s.nonce != nonce || s.driver != peer {
            return false;
        }
        s.until = Some(Instant::now() + SESSION_TTL);
        true
    }

    /// Can this node answer a session of `kind` from `peer`? Every node
    /// runs a UDP responder; a raw one where it has an interface toward
    /// the peer; verbs sessions with a working device.
    fn serves(&self, kind: Kind, peer: &str) -> bool {
        kind.descriptor().daemon
            && match kind.descriptor().endpoint {
                PeerEndpoint::Port => kind == super::FALLBACK,
                PeerEndpoint::MacOnLink => self.raw_toward.contains_key(peer),
                PeerEndpoint::QueuePair { .. } => self.verbs.get().is_some_and(|v| v.serves(kind)),
                PeerEndpoint::None => false,
            }
    }
}

/// One session at a time per node, and none while this node drives its own
/// (see [`Activity`]): two daemons never measure through each other. The
/// responders' gate then admits the session's nonce from the driver alone:
/// from the IP address its authenticated control connection came from
/// (udp), or from the MAC its authenticated request named (raw).
pub(super) fn accept_session(
    shared: &Shared,
    conn: ConnId,
    from: SocketAddr,
    peer: &str,
    req: &ProbeRequest,
) -> Msg {
    let reject = |reason| {
        Msg::ProbeReject(ProbeReject {
            session_nonce: req.session_nonce,
            reason,
        })
    };
    if req.driver != peer {
        return reject(RejectReason::WrongDriver);
    }
    if !shared.serves(req.transport, peer) {
        return reject(RejectReason::Transport);
    }
    let source = match req.transport.descriptor().endpoint {
        PeerEndpoint::Port => GateSource::Ip(from.ip()),
        PeerEndpoint::MacOnLink => match req.driver_mac {
            Some(m) => GateSource::Mac(m),
            None => return reject(RejectReason::Other("raw: the request names no MAC".into())),
        },
        // Queue pairs are bound to the endpoints exchanged on this
        // authenticated connection; the gate's nonce ends the session, and
        // admits no datagram Hello.
        PeerEndpoint::QueuePair { .. } | PeerEndpoint::None => GateSource::Elsewhere,
    };
    let mut a = shared.activity();
    let in_round = a
        .round
        .as_ref()
        .is_some_and(|r| r.driver == peer && r.conn == conn);
    // A flow session (an operator's stream order) runs outside the rounds,
    // on its own consent below.
    let flow = matches!(req.sizes, SizePlan::Flow { .. });
    if !in_round && !flow {
        tracing::debug!("session from {peer} refused: no round admitted for it");
        return reject(RejectReason::NotExpected);
    }
    if a.driving {
        tracing::debug!("session from {peer} refused: this node is driving one");
        return reject(RejectReason::Busy);
    }
    let now = Instant::now();
    if a.serving_live(now) && a.serving.driver != peer {
        tracing::debug!("session from {peer} refused: serving {}", a.serving.driver);
        return reject(RejectReason::Busy);
    }
    // A flow of someone's contention or bisection measurement: only when
    // not quiet and within this node's budget (see daemon::contention).
    if let SizePlan::Flow { bytes } = req.sizes {
        let rounds = if in_round {
            Rounds::Within
        } else {
            Rounds::Outside
        };
        if let Err(why) = shared.consent_flow(bytes, rounds) {
            tracing::info!("flow session from {peer} ({bytes} B) refused: {why:?}");
            return reject(why);
        }
        tracing::info!("flow session from {peer} ({bytes} B) consented");
    }
    a.serving = Session {
        nonce: req.session_nonce,
        driver: peer.to_string(),
        conn,
        until: Some(now + SESSION_TTL),
        transport: Some(req.transport),
    };
    shared.gate.open(req.session_nonce, source);
    tracing::debug!(
        "serving a {} session for {peer} (nonce {:016x}, from {source:?})",
        req.transport,
        req.session_nonce
    );
    Msg::ProbeAccept(ProbeAccept {
        session_nonce: req.session_nonce,
    })
}

/// End the served session once its TTL has passed.
pub(super) fn expire_session(shared: &Shared) {
    let now = Instant::now();
    if shared.end_serving_if(|s| s.until.is_some_and(|u| u <= now)) {
        tracing::info!("served session expired: no sign of its driver for {SESSION_TTL:?}");
    }
}
