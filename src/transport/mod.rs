//! Transports: one file per transport, all behind [`Transport`].
//!
//! Contract (DESIGN.md): blocking, busy-polling, allocation-free on the hot
//! path, every wait bounded by a deadline. A lost message is a
//! [`TransportError::Timeout`], never a hang.

use std::time::Duration;

pub mod dgram;
/// The datagram transports' frame header: another name for [`dgram::wire`].
pub use dgram::wire as frame;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod multi;
pub mod raw_eth;
#[cfg(feature = "verbs")]
pub mod rdma_write;
pub mod sim;
pub mod sys;
pub mod udp;
#[cfg(feature = "verbs")]
pub mod verbs_msg;

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
    /// (the server puts its receive overhead o_r here on its answer).
    pub report_ns: u32,
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
