//! Transports: one file per transport, all behind [`Transport`]; the one
//! list of them is [`kind`], and how each opens is [`open::Open`],
//! implemented in the transport's own file.
//!
//! Contract (docs/ARCHITECTURE.md): blocking, busy-polling,
//! allocation-free on the hot path, every wait bounded by a deadline. A
//! lost message is a [`TransportError::Timeout`], never a hang. A
//! transport moves bytes: it imports no other transport (shared code sits
//! in modules that are not transports: `frame`, `qp`), and no pattern,
//! sweep or probe.

use std::time::{Duration, Instant};

pub mod dgram;
/// The datagram transports' frame header: another name for [`dgram::wire`].
pub use dgram::wire as frame;
pub mod kind;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod multi;
pub mod open;
#[cfg(feature = "verbs")]
pub mod qp;
pub mod raw_eth;
#[cfg(feature = "verbs")]
pub mod rdma_write;
pub mod sim;
pub mod sys;
pub mod udp;
#[cfg(feature = "verbs")]
pub mod verbs_msg;

pub use kind::Kind;

/// Index of a peer as the transport numbers them (0..caps().peers).
pub type PeerId = usize;

/// What a transport can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// Largest payload one message may carry.
    pub max_msg_bytes: usize,
    /// One-sided (RDMA write): the target's CPU takes no part, o_r = 0.
    pub one_sided: bool,
    /// The receiver pays a measurable receive overhead o_r.
    pub has_recv_overhead: bool,
    /// How many peers this transport reaches (fan-out needs more than one).
    pub peers: usize,
}

/// Per-message metadata every transport carries with a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The receiver must answer this message with one message of the same
    /// size (the n-th message of a PRTT burst; every message of a fan-out).
    pub answer: bool,
    /// A measurement the sender reports to the receiver, in nanoseconds
    /// (the server puts its receive overhead o_r here on its answer). On a
    /// client's message that asks for an answer, 2 or more asks for that
    /// many answers ([`Meta::answers`]).
    pub report_ns: u32,
}

impl Meta {
    /// Most answers one request may ask for.
    pub const MAX_ANSWERS: u32 = 4096;

    /// A request for `n` answers of the request's size (n ≥ 1; more than
    /// [`Meta::MAX_ANSWERS`] is that many).
    pub fn asking(n: u32) -> Meta {
        Meta {
            answer: true,
            report_ns: if n <= 1 { 0 } else { n.min(Self::MAX_ANSWERS) },
        }
    }

    /// How many answers a message wants from a mirror server: none unless
    /// it asks for an answer; then its `report_ns` when that is 2 or more
    /// (a *reverse burst*: the server streams that many messages of the
    /// request's size back, so the client times flows into itself on its
    /// own clock — the incoming conflict and the receive-side overlap
    /// patterns), else one. The PRTT and fan-out clients send 0; a server
    /// that predates reverse bursts answers once, which a reverse-burst
    /// client sees as a lost round.
    #[inline]
    pub fn answers(self) -> u32 {
        if self.answer {
            self.report_ns.clamp(1, Self::MAX_ANSWERS)
        } else {
            0
        }
    }
}

/// A message that has fully arrived.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Received {
    pub peer: PeerId,
    pub bytes: usize,
    pub meta: Meta,
    /// CPU time this endpoint spent receiving the message once its first
    /// byte was visible (the receive overhead o_r as this transport sees it:
    /// the successful receive calls for a socket, the simulated busy time for
    /// `sim`, 0 for a one-sided RDMA write). Nanoseconds.
    pub overhead_ns: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("timed out after {0:?} waiting for the peer")]
    Timeout(Duration),
    #[error("message of {bytes} bytes exceeds the transport maximum of {max} bytes")]
    TooLarge { bytes: usize, max: usize },
    #[error("no such peer {0}")]
    NoPeer(PeerId),
    #[error("peer closed the session: {0}")]
    PeerGone(String),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// One small trait for every transport.
pub trait Transport {
    fn caps(&self) -> Caps;

    /// Post `bytes` payload bytes to `peer` and wait for local completion.
    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError>;

    /// Wait until one message has fully arrived, from `from` or (None) from
    /// any peer, for at most `timeout`.
    fn recv(&mut self, from: Option<PeerId>, timeout: Duration)
        -> Result<Received, TransportError>;

    /// Payload bytes and messages this endpoint has sent and received so far
    /// (probe economy accounting).
    fn counters(&self) -> Counters;
}

/// Traffic accounting, in payload bytes and messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub sent_bytes: u64,
    pub sent_messages: u64,
    pub recv_bytes: u64,
    pub recv_messages: u64,
}

impl Counters {
    /// One message of `bytes` sent.
    #[inline]
    pub fn sent(&mut self, bytes: usize) {
        self.sent_bytes += bytes as u64;
        self.sent_messages += 1;
    }
    /// One message of `bytes` received.
    #[inline]
    pub fn received(&mut self, bytes: usize) {
        self.recv_bytes += bytes as u64;
        self.recv_messages += 1;
    }
    /// Payload bytes sent and received since `before`, an earlier reading
    /// of the same counters.
    #[inline]
    pub fn bytes_since(&self, before: &Counters) -> u64 {
        (self.sent_bytes - before.sent_bytes) + (self.recv_bytes - before.recv_bytes)
    }
    /// Messages sent and received since `before`, an earlier reading of
    /// the same counters.
    #[inline]
    pub fn messages_since(&self, before: &Counters) -> u64 {
        (self.sent_messages - before.sent_messages) + (self.recv_messages - before.recv_messages)
    }
}

impl Caps {
    /// A link of `kind` to one peer, carrying messages up to
    /// `max_msg_bytes`: one-sidedness and receive overhead as the kind's
    /// descriptor says.
    pub fn single(kind: Kind, max_msg_bytes: usize) -> Caps {
        let d = kind.descriptor();
        Caps {
            max_msg_bytes,
            one_sided: d.one_sided,
            has_recv_overhead: d.recv_overhead,
            peers: 1,
        }
    }
}

/// A single-peer link's check of a send: to peer 0, at most `max_bytes`.
#[inline]
pub fn check_send(peer: PeerId, bytes: usize, max_bytes: usize) -> Result<(), TransportError> {
    if peer != 0 {
        return Err(TransportError::NoPeer(peer));
    }
    if bytes > max_bytes {
        return Err(TransportError::TooLarge {
            bytes,
            max: max_bytes,
        });
    }
    Ok(())
}

/// A single-peer link's check of a receive: from any peer or peer 0.
#[inline]
pub fn check_from(from: Option<PeerId>) -> Result<(), TransportError> {
    match from {
        Some(p) if p != 0 => Err(TransportError::NoPeer(p)),
        _ => Ok(()),
    }
}

/// A transport over every rank of a job: the collective steps the
/// all-ranks exchange pattern (`pattern::exchange`) is written over. Every
/// call has a deadline; ranks are numbered 0..ranks().
pub trait AllRanks {
    fn rank(&self) -> usize;
    fn ranks(&self) -> usize;
    /// All ranks have arrived.
    fn barrier(&mut self, deadline: Instant) -> Result<(), TransportError>;
    /// Send `bytes` to rank `partner` and receive `bytes` from it, at once.
    fn exchange(
        &mut self,
        partner: usize,
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError>;
    /// Receive `bytes` from each rank of `from` and send `bytes` to each
    /// of `to`, all posted at once, then wait for all: one step of a
    /// conflict probe. Transports without it: a protocol error.
    fn concurrent(
        &mut self,
        to: &[usize],
        from: &[usize],
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let _ = (to, from, bytes, deadline);
        Err(TransportError::Protocol(
            "concurrent transfers are not supported".into(),
        ))
    }
    /// The element-wise maximum of `vals` over all ranks, on every rank.
    fn max_over_ranks(
        &mut self,
        vals: Vec<f64>,
        deadline: Instant,
    ) -> Result<Vec<f64>, TransportError>;
}

#[cfg(test)]
mod tests {
    use super::Counters;

    #[test]
    fn traffic_since_an_earlier_reading_counts_both_directions() {
        let mut c = Counters::default();
        c.sent(100);
        c.received(7);
        let before = c;
        c.sent(1000);
        c.received(24);
        c.received(0);
        assert_eq!(c.bytes_since(&before), 1024);
        assert_eq!(c.messages_since(&before), 3);
        assert_eq!(c.bytes_since(&c), 0);
    }
}
