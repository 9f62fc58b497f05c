//! The phy layer: what the datagram core needs from a device.
//!
//! A device moves whole frames — the [`wire`](super::wire) header and a
//! payload — between this host and addresses of its own kind (a UDP
//! `SocketAddr`, an Ethernet MAC). It knows nothing of sessions, nonces or
//! fragments: the core above it ([`Endpoint`](super::Endpoint)) does all of
//! that once for every device. Implementations keep their system calls in
//! `transport::sys`.

use std::fmt;
use std::time::Duration;

use super::wire::{Header, HEADER_LEN};
use crate::clock::Clock;
use crate::transport::TransportError;

/// Where frames for one peer go, fixed for the life of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<D> {
    /// What [`Phy::send`] takes to reach the peer (a socket address, a MAC,
    /// or nothing on a connected socket).
    pub dest: D,
    /// MTU towards the peer.
    pub mtu_bytes: usize,
    /// Payload bytes one frame may carry towards the peer (the MTU less
    /// every header below and the frame header).
    pub max_frag_bytes: usize,
}

/// One frame to send: the encoded header, then the payload (sent from
/// where it lies, not copied).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    pub header: &'a [u8; HEADER_LEN],
    pub payload: &'a [u8],
}

/// One frame the device received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxFrame<A> {
    /// Its source, `None` when the device could not tell.
    pub src: Option<A>,
    /// Its decoded header, `None` when it is not a well-formed frame of ours
    /// (see [`wire::decode_exact`](super::wire::decode_exact)).
    pub header: Option<Header>,
    /// Clock ticks of the successful receive steps that delivered it (the
    /// receive call, or reading and returning a ring slot): its share of the
    /// receive overhead o_r.
    pub cost_ticks: u64,
}

/// A datagram device under the core. Every method returns at once, except
/// [`Phy::wait_readable`], which sleeps at most its timeout.
pub trait Phy {
    /// A peer's address as received frames carry it.
    type Addr: Copy + Eq + fmt::Debug;
    /// What [`Phy::send`] needs to reach a peer, prepared once per session.
    type Dest: Copy;
    /// Short name for log lines.
    const NAME: &'static str;

    /// Prepare sending to `peer`: its destination and the fragment size
    /// towards it. Called when a session starts.
    fn route(&mut self, peer: &Self::Addr) -> Result<Route<Self::Dest>, TransportError>;

    /// Send one frame without blocking. `Ok(false)`: the transmit queue is
    /// full, nothing was sent (the core retries until its send deadline). A
    /// peer known to be gone (an ICMP port unreachable) is
    /// [`TransportError::PeerGone`].
    fn send(&mut self, dest: &Self::Dest, frame: Frame<'_>) -> Result<bool, TransportError>;

    /// Look once for a received frame, without blocking, timing the receive
    /// steps on `clock`. `Ok(None)`: nothing has arrived. A connected device
    /// whose peer is known to be gone returns [`TransportError::PeerGone`].
    fn poll<C: Clock>(&mut self, clock: &C) -> Result<Option<RxFrame<Self::Addr>>, TransportError>;

    /// Sleep until a frame may have arrived, or at most `timeout`.
    fn wait_readable(&mut self, timeout: Duration);

    /// Write `addr` for people (error messages, logs).
    fn fmt_addr(addr: &Self::Addr, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// An address of device `P`, displayed by [`Phy::fmt_addr`].
pub struct Shown<'a, P: Phy>(pub &'a P::Addr);

impl<P: Phy> fmt::Display for Shown<'_, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        P::fmt_addr(self.0, f)
    }
}
