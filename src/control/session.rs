//! Probe-session roles: who drives, and one session at a time per pair.
//!
//! Rule: of two nodes, the one whose name sorts lower (byte-wise) always
//! drives their sessions ([`driver_for`]). Either node may *ask* for a
//! session (the higher one asks the lower one to drive it), but the request
//! must name the lower node as driver, so two daemons can never both drive.
//!
//! [`SessionGate`] keeps one slot per peer: empty, requested by us, or
//! active. A request that meets an occupied slot is refused as
//! [`RejectReason::Busy`] — except when both nodes asked at the same time
//! (our slot holds our own outstanding request): then the request of the
//! driver wins, so a crossing pair of requests settles in one round instead
//! of both being refused.

use std::collections::HashMap;
use std::sync::Mutex;

use super::msg::{ProbeAccept, ProbeReject, ProbeRequest, RejectReason, SizePlan, TransportKind};
use super::Msg;

/// The node of the pair `{a, b}` that drives their probe sessions.
pub fn driver_for<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.as_bytes() <= b.as_bytes() {
        a
    } else {
        b
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Requested(u64),
    Active(u64),
}

/// One probe session at a time per peer, with the role rule applied.
#[derive(Debug)]
pub struct SessionGate {
    me: String,
    slots: Mutex<HashMap<String, Slot>>,
}

impl SessionGate {
    pub fn new(me: &str) -> Self {
        SessionGate {
            me: me.to_owned(),
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        // A panic elsewhere while holding the lock leaves a consistent map.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserve the slot for `peer` and build the request to send it.
    /// `Err(Busy)` if a session with `peer` is requested or active.
    pub fn request(
        &self,
        peer: &str,
        session_nonce: u64,
        transport: TransportKind,
        sizes: SizePlan,
    ) -> Result<ProbeRequest, RejectReason> {
        let mut slots = self.slots();
        if slots.contains_key(peer) {
            return Err(RejectReason::Busy);
        }
        slots.insert(peer.to_owned(), Slot::Requested(session_nonce));
        Ok(ProbeRequest {
            session_nonce,
            transport,
            sizes,
            driver: driver_for(&self.me, peer).to_owned(),
        })
    }

    /// Answer a request received from `from`: [`Msg::ProbeAccept`] (the
    /// session is then active) or [`Msg::ProbeReject`]. `supported` says
    /// whether this node can run the requested transport.
    pub fn on_request(&self, from: &str, req: &ProbeRequest, supported: bool) -> Msg {
        let reject = |reason| {
            Msg::ProbeReject(ProbeReject {
                session_nonce: req.session_nonce,
                reason,
            })
        };
        if req.driver != driver_for(&self.me, from) || from == self.me {
            return reject(RejectReason::WrongDriver);
        }
        if !supported {
            return reject(RejectReason::Transport);
        }
        let mut slots = self.slots();
        match slots.get(from) {
            None => {}
            // Crossing requests: the driver's request wins.
            Some(Slot::Requested(_)) if from == req.driver => {}
            Some(_) => return reject(RejectReason::Busy),
        }
        slots.insert(from.to_owned(), Slot::Active(req.session_nonce));
        Msg::ProbeAccept(ProbeAccept {
            session_nonce: req.session_nonce,
        })
    }

    /// Record the answer to our request to `peer`. Returns true if the
    /// session is now active (accepted, and our slot still holds it).
    pub fn on_reply(&self, peer: &str, reply: &Msg) -> bool {
        let mut slots = self.slots();
        match (slots.get(peer).copied(), reply) {
            (Some(Slot::Requested(n)), Msg::ProbeAccept(a)) if a.session_nonce == n => {
                slots.insert(peer.to_owned(), Slot::Active(n));
                true
            }
            (Some(Slot::Requested(n)), Msg::ProbeReject(r)) if r.session_nonce == n => {
                slots.remove(peer);
                false
            }
            _ => false,
        }
    }

    /// End the session `session_nonce` with `peer` (on [`Msg::ProbeDone`],
    /// a deadline, or no answer to our request). Returns true if it was the
    /// one held.
    pub fn finish(&self, peer: &str, session_nonce: u64) -> bool {
        let mut slots = self.slots();
        match slots.get(peer) {
            Some(Slot::Requested(n)) | Some(Slot::Active(n)) if *n == session_nonce => {
                slots.remove(peer);
                true
            }
            _ => false,
        }
    }

    /// The active session with `peer`, if any.
    pub fn active(&self, peer: &str) -> Option<u64> {
        match self.slots().get(peer) {
            Some(Slot::Active(n)) => Some(*n),
            _ => None,
        }
    }

    /// Whether this node drives sessions with `peer`.
    pub fn drives(&self, peer: &str) -> bool {
        driver_for(&self.me, peer) == self.me
    }
}
