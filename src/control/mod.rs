//! Control plane: authenticated TCP messages between netgauged daemons.
//!
//! Daemons exchange what a transport needs ([`Endpoints`]) and agree on probe
//! sessions ([`ProbeRequest`] → [`ProbeAccept`] / [`ProbeReject`],
//! [`ProbeDone`], kept alive during a long sweep by `Msg::ProbeAlive`);
//! `ngctl status` asks for a [`DaemonStatus`]. Messages are
//! serde types encoded with bincode 1 (fixed-width integers, little endian,
//! size limit, trailing bytes rejected) inside the frame described in
//! [`frame`].
//!
//! # Security design
//!
//! All daemons of a cluster share one secret, the *cluster key*
//! ([`load_key`]). It is never used directly on the wire:
//!
//! 1. **Handshake.** The connecting side sends a *client hello* naming
//!    itself, the node it means to reach and a fresh 32-byte random nonce
//!    `r_c`; the accepting side checks that it is the named node (and that
//!    the sender is an allowed peer, not itself) and answers with a *server
//!    hello* carrying its own fresh nonce `r_s`. Both hellos are tagged with
//!    a handshake key `HMAC(K, "netgauged v1 handshake")`, so a stranger
//!    without the key gets no answer at all. The client then sends a
//!    *client proof*, an empty frame tagged with its session key (below),
//!    which depends on `r_s`: only now does the server admit the
//!    connection. A captured client hello, replayed, earns a server hello
//!    with a new `r_s` and nothing more: without the key there is no
//!    proof, and the server drops it at the handshake deadline (1 s).
//! 2. **Session keys.** Each side then derives two keys from the cluster key
//!    and the transcript (client name, server name, `r_c`, `r_s`): one for
//!    client→server frames and one for server→client frames. Every later
//!    frame carries an HMAC-SHA256 tag under the key of its direction, over
//!    the length prefix, version, kind, sender, counter, timestamp and
//!    payload, checked in constant time.
//! 3. **Counters.** Data frames in each direction are numbered 1, 2, 3, …;
//!    the receiver accepts only the next number.
//!
//! What this rejects:
//! - *forged* or *tampered* frames, and frames under a *wrong key*: the tag
//!   does not verify ([`RejectKind::BadTag`]);
//! - a frame *replayed* within its connection: its counter is not the next
//!   one ([`RejectKind::Replay`]);
//! - a frame *from a previous connection* (or another pair of nodes): the
//!   receiver chose a fresh nonce for this connection, so the session key
//!   differs and the tag fails;
//! - a frame *reflected* back to its sender, on the same connection or on
//!   another one: its tag is under the other direction's key (and, checked
//!   after the tag for defence in depth, it names the receiver as sender);
//! - a relayed connection whose hello names another node as receiver
//!   ([`RejectKind::UnknownPeer`]);
//! - oversized frames, before any allocation ([`RejectKind::Oversize`]);
//!   anything that does not parse or decode, or breaks a bound
//!   ([`RejectKind::Malformed`]); other protocol versions
//!   ([`RejectKind::WrongVersion`]); peers that stall mid-frame or in the
//!   handshake, or send nothing within 200 ms of connecting
//!   ([`RejectKind::Timeout`]);
//! - strangers that hold connections open: handshakes run on one thread
//!   with a bounded table, and a new connection evicts the oldest pending
//!   one of its source (or of all) rather than being refused
//!   ([`RejectKind::Evicted`]; see [`server`]).
//!
//! Optionally ([`Timeouts::max_clock_skew`], off by default) frames whose
//! timestamp is too far from the local clock are rejected too; the
//! guarantees above do not depend on synchronised clocks.
//!
//! Any rejection is counted by kind in [`RejectCounters`] and poisons the
//! [`Connection`]: the server closes it (with a reset) and nothing else
//! changes — the receiver's state moves only when a frame passes every
//! check. Whoever holds the cluster key is trusted: the key authenticates
//! the cluster, not an individual node.
//!
//! # Use
//!
//! - Accepting side: [`ControlServer::spawn`] (callback) or
//!   [`ControlServer::spawn_channel`] (crossbeam channel of [`Incoming`]).
//! - Connecting side: [`Connection::connect`], then [`Connection::send`],
//!   [`Connection::recv`] or [`Connection::request`]. Send [`Msg::Hello`]
//!   first.
//! - Roles: the node that sends a [`ProbeRequest`] drives that session; the
//!   daemon decides whom it serves (`daemon::Activity`).

pub mod conn;
pub mod frame;
pub mod key;
pub mod msg;
pub mod server;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};

pub use conn::{ConnConfig, Connection, Timeouts};
pub use frame::PROTOCOL_VERSION;
pub use key::{load_key, ClusterKey, KeyError};
pub use msg::{
    BisectionReport, DaemonStatus, Endpoints, EntriesReply, EntriesRequest, Hello, Msg, PeerState,
    PeerStatus, ProbeAccept, ProbeDone, ProbeReject, ProbeRequest, RejectReason, RoundDone,
    RoundReply, RoundRequest, SizePlan, StreamOrder, StreamResult, VerbsEndpoint,
};

/// The name an operator's tool on `node` authenticates as (it holds the
/// cluster key, as the daemon does; the daemon never accepts frames that
/// name itself as sender, so the tool needs a name of its own). A daemon
/// admits the operators of itself and of its configured peers.
pub fn operator_name(node: &str) -> String {
    format!("ngctl@{node}")
}

/// The node an operator name speaks for, if it is one.
pub fn operator_of(name: &str) -> Option<&str> {
    name.strip_prefix("ngctl@").filter(|n| !n.is_empty())
}
pub use server::{ConnId, ControlServer, Handler, Incoming, ServerConfig};

/// Largest frame body accepted or sent, bytes (the length prefix is checked
/// against it before anything is allocated).
pub const MAX_FRAME_BYTES: usize = 64 * 1024;
/// Longest node name, bytes.
pub const MAX_NODE_NAME_BYTES: usize = 64;

/// Everything that can go wrong on a control connection.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
    #[error("frame of {len_bytes} bytes exceeds the limit of {MAX_FRAME_BYTES}")]
    Oversize { len_bytes: usize },
    #[error("authentication tag does not verify")]
    BadTag,
    #[error("replayed or out-of-order frame: counter {got}, expected {expected}")]
    Replay { expected: u64, got: u64 },
    #[error("reflected frame: it claims to come from this node")]
    Reflected,
    #[error("frame timestamp outside the allowed clock skew")]
    Stale,
    #[error("protocol version {got}, this node speaks {PROTOCOL_VERSION}")]
    WrongVersion { got: u16 },
    #[error("peer stalled: deadline passed mid-frame or in the handshake")]
    Timeout,
    #[error("unexpected or unknown peer {0:?}")]
    UnknownPeer(String),
    /// Nothing arrived before the deadline; the connection is still usable.
    #[error("no message before the deadline")]
    Idle,
    /// The peer closed the connection between frames.
    #[error("connection closed by peer")]
    Closed,
    /// An earlier error made this connection unusable.
    #[error("connection unusable after an earlier error")]
    Poisoned,
    #[error("cannot encode message: {0}")]
    Encode(String),
    #[error("control connection I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Kinds of rejected input, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectKind {
    Malformed,
    Oversize,
    BadTag,
    /// Replayed, reflected, out of order or (if configured) stale.
    Replay,
    WrongVersion,
    /// Stalled mid-frame or during the handshake.
    Timeout,
    /// Hello naming another receiver, a sender not allowed, or this node.
    UnknownPeer,
    /// Authenticated connection refused: every worker busy, queue full.
    Refused,
    /// Unauthenticated connection reset to make room for a newer one (its
    /// source, or the pre-authentication table, was at its limit).
    Evicted,
}

impl ControlError {
    /// How this error is counted, if it is a rejection of peer input.
    pub fn reject_kind(&self) -> Option<RejectKind> {
        Some(match self {
            ControlError::Malformed(_) => RejectKind::Malformed,
            ControlError::Oversize { .. } => RejectKind::Oversize,
            ControlError::BadTag => RejectKind::BadTag,
            ControlError::Replay { .. } | ControlError::Reflected | ControlError::Stale => {
                RejectKind::Replay
            }
            ControlError::WrongVersion { .. } => RejectKind::WrongVersion,
            ControlError::Timeout => RejectKind::Timeout,
            ControlError::UnknownPeer(_) => RejectKind::UnknownPeer,
            ControlError::Idle
            | ControlError::Closed
            | ControlError::Poisoned
            | ControlError::Encode(_)
            | ControlError::Io(_) => return None,
        })
    }
}

/// Rejection counters, shared by all connections of a server.
#[derive(Debug, Default)]
pub struct RejectCounters {
    malformed: AtomicU64,
    oversize: AtomicU64,
    bad_tag: AtomicU64,
    replay: AtomicU64,
    wrong_version: AtomicU64,
    timeout: AtomicU64,
    unknown_peer: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
}

/// A copy of [`RejectCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RejectSnapshot {
    pub malformed: u64,
    pub oversize: u64,
    pub bad_tag: u64,
    pub replay: u64,
    pub wrong_version: u64,
    pub timeout: u64,
    pub unknown_peer: u64,
    pub refused: u64,
    #[serde(default)]
    pub evicted: u64,
}

impl RejectSnapshot {
    /// Sum of all rejected messages (refused and evicted connections not
    /// included).
    pub fn rejected_messages(&self) -> u64 {
        self.malformed
            + self.oversize
            + self.bad_tag
            + self.replay
            + self.wrong_version
            + self.timeout
            + self.unknown_peer
    }
}

impl RejectCounters {
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, kind: RejectKind) -> &AtomicU64 {
        match kind {
            RejectKind::Malformed => &self.malformed,
            RejectKind::Oversize => &self.oversize,
            RejectKind::BadTag => &self.bad_tag,
            RejectKind::Replay => &self.replay,
            RejectKind::WrongVersion => &self.wrong_version,
            RejectKind::Timeout => &self.timeout,
            RejectKind::UnknownPeer => &self.unknown_peer,
            RejectKind::Refused => &self.refused,
            RejectKind::Evicted => &self.evicted,
        }
    }

    /// Count one rejection.
    pub fn record(&self, kind: RejectKind) {
        self.slot(kind).fetch_add(1, Ordering::Relaxed);
    }

    /// Count `err` if it is a rejection; returns its kind.
    pub fn record_error(&self, err: &ControlError) -> Option<RejectKind> {
        let kind = err.reject_kind()?;
        self.record(kind);
        Some(kind)
    }

    /// Current values.
    pub fn snapshot(&self) -> RejectSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RejectSnapshot {
            malformed: g(&self.malformed),
            oversize: g(&self.oversize),
            bad_tag: g(&self.bad_tag),
            replay: g(&self.replay),
            wrong_version: g(&self.wrong_version),
            timeout: g(&self.timeout),
            unknown_peer: g(&self.unknown_peer),
            refused: g(&self.refused),
            evicted: g(&self.evicted),
        }
    }
}
