//! The session layer: which frames belong to the session, and who may open
//! one.
//!
//! A client opens a session with a Hello carrying a random nonce (or the
//! nonce the control plane agreed on) and waits for the HelloAck that
//! echoes it, retrying. A server adopts the session of the latest Hello it
//! admits — a new Hello takes over — and acknowledges every Hello (a
//! retried one only again). Every later frame carries the nonce. A frame
//! from another address than the session peer is a stranger's; one from the
//! peer with another nonce belongs to another session; both are ignored
//! and counted. Bye ends the session.
//!
//! [`classify`] is that decision for one received frame, a pure function of
//! the role, the session and the gate; the endpoint acts on its verdict.

use std::sync::atomic::{AtomicU64, Ordering};

use super::phy::{Route, RxFrame};
use super::wire::{Header, Kind};

/// Which end of a session this endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Opens the session (the prober).
    Client,
    /// Adopts sessions (the responder).
    Server,
}

/// The current session.
#[derive(Clone, Copy, Debug)]
pub struct Session<A, D> {
    pub nonce: u64,
    pub peer: A,
    pub route: Route<D>,
}

/// Decides whether a Hello may open a session on a server.
///
/// The control plane authenticates a peer before it lets it probe; the gate
/// is how that decision reaches the responder. It sees the Hello's nonce
/// and its source address, so a gate can bind the session to the address
/// the control plane authenticated as well as to the nonce it agreed.
pub trait HelloGate<A>: Send + Sync {
    fn admits(&self, nonce: u64, src: &A) -> bool;
}

/// The nonce the control plane accepted (0: none): only a Hello carrying it
/// opens a session, from any source.
impl<A> HelloGate<A> for AtomicU64 {
    fn admits(&self, nonce: u64, _src: &A) -> bool {
        let allowed = self.load(Ordering::Acquire);
        allowed != 0 && allowed == nonce
    }
}

/// A session nonce: `given`, or a random one; never 0 (0 means "none").
pub fn fresh_nonce(given: Option<u64>) -> u64 {
    match given.unwrap_or_else(rand::random::<u64>) {
        0 => 1,
        n => n,
    }
}

/// Why a frame was ignored (a field of
/// [`IgnoredFrames`](super::IgnoredFrames)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Did not decode, wrong length, or inconsistent with its message.
    Malformed,
    /// From the session peer, with another session's nonce; or a Hello the
    /// gate did not admit.
    WrongNonce,
    /// Not from the session peer, or no session.
    Stranger,
    /// A valid frame of a kind this role does not expect here.
    Unexpected,
}

/// What a received frame is to this endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<A> {
    Ignore(Reason),
    /// Server: an admitted Hello from `src`.
    Hello {
        src: A,
        nonce: u64,
    },
    /// The session's HelloAck.
    HelloAck,
    /// A data fragment of the session.
    Data(Header),
    /// The session peer said Bye.
    Bye,
}

/// Classify one received frame for an endpoint in `role` whose session (if
/// any) is with `session.0` under nonce `session.1`.
pub fn classify<A: Copy + Eq>(
    role: Role,
    session: Option<(A, u64)>,
    gate: Option<&dyn HelloGate<A>>,
    f: &RxFrame<A>,
) -> Verdict<A> {
    let Some(h) = f.header else {
        return Verdict::Ignore(Reason::Malformed);
    };
    if role == Role::Server && h.kind == Kind::Hello {
        let Some(src) = f.src else {
            return Verdict::Ignore(Reason::Malformed);
        };
        if gate.is_some_and(|g| !g.admits(h.nonce, &src)) {
            return Verdict::Ignore(Reason::WrongNonce);
        }
        return Verdict::Hello {
            src,
            nonce: h.nonce,
        };
    }
    let Some((peer, nonce)) = session else {
        return Verdict::Ignore(Reason::Stranger);
    };
    if f.src != Some(peer) {
        return Verdict::Ignore(Reason::Stranger);
    }
    if h.nonce != nonce {
        return Verdict::Ignore(Reason::WrongNonce);
    }
    match (h.kind, role) {
        (Kind::Data, _) => Verdict::Data(h),
        (Kind::Bye, _) => Verdict::Bye,
        (Kind::HelloAck, Role::Client) => Verdict::HelloAck,
        (Kind::Hello, _) | (Kind::HelloAck, Role::Server) => Verdict::Ignore(Reason::Unexpected),
    }
}
