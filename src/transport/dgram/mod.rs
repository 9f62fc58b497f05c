//! The datagram core under the UDP and raw Ethernet transports, written
//! once and generic over the device.
//!
//! Layered like smoltcp, bottom up:
//! - [`wire`] — the frame header: bytes ↔ [`wire::Header`], every bound
//!   checked. No state.
//! - [`phy`] — the [`Phy`] trait a device implements: send one frame to an
//!   address, poll for one received frame (its source and what receiving it
//!   cost), sleep until readable, the route and fragment size towards a
//!   peer. `udp.rs` (`SocketAddr`) and `raw_eth.rs` (MAC on one interface)
//!   implement it over the system calls in [`super::sys`].
//! - [`reasm`] — reassembly of one fragmented message at a time.
//! - [`session`] — the Hello/HelloAck/Bye session: which frames belong to
//!   it ([`session::classify`]), and the gate that decides who may open one.
//! - [`idle`] — the one idle policy of every wait: spin, yield, sleep.
//! - [`endpoint`] — the socket layer: [`Endpoint`], a
//!   [`Transport`](super::Transport) over any [`Phy`]: client handshake,
//!   server adoption, fragmentation, send and receive with deadlines on the
//!   transport's clock, the receive overhead, counters of ignored frames.
//!
//! The hot path — `send`, `recv` and everything under them — allocates
//! nothing, takes no lock and makes no system call beyond the device's own
//! send and receive (and, once a wait has been idle for a while, the
//! yield and poll(2) of the idle policy).

pub mod endpoint;
pub mod idle;
pub mod phy;
pub mod reasm;
pub mod session;
pub mod wire;

pub(crate) use endpoint::{default_options, endpoint_config};
pub use endpoint::{Endpoint, EndpointConfig};
pub use idle::IdlePolicy;
pub use phy::{Phy, Route, RxFrame};
pub use session::{GateSource, HelloGate, Role, SessionGate};

/// Smallest fragment payload accepted from a peer; bounds the reassembly
/// bitmap (`max_msg_bytes / MIN_FRAG_BYTES` bits).
pub const MIN_FRAG_BYTES: usize = 64;

/// Frames this endpoint received and did not use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IgnoredFrames {
    /// Did not decode, wrong datagram length, or inconsistent with the other
    /// fragments of their message.
    pub malformed: u64,
    /// From the session peer but with another session's nonce (or a Hello
    /// the gate did not admit).
    pub wrong_nonce: u64,
    /// From an address that is not the session peer (or before any session).
    pub stranger: u64,
    /// Fragments of a message older than the newest one seen.
    pub stale: u64,
    /// Fragments already received.
    pub duplicate: u64,
    /// Messages larger than `max_msg_bytes` or in too many fragments.
    pub oversize: u64,
    /// Valid frames of a kind this role does not expect (e.g. a Hello at the
    /// client, a repeated HelloAck).
    pub unexpected: u64,
    /// Incomplete messages dropped because a newer one started.
    pub dropped_incomplete: u64,
}

impl IgnoredFrames {
    fn count(&mut self, why: session::Reason) {
        use session::Reason;
        match why {
            Reason::Malformed => self.malformed += 1,
            Reason::WrongNonce => self.wrong_nonce += 1,
            Reason::Stranger => self.stranger += 1,
            Reason::Unexpected => self.unexpected += 1,
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
