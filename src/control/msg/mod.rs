//! Control-plane messages and their bincode encoding.
//!
//! Every message travels inside an authenticated frame (see [`super::frame`]);
//! the frame carries the protocol version, so the messages themselves do not.
//! Decoding is bounded (size limit, no trailing bytes) and every decoded
//! message is validated ([`Msg::validate`]) before the daemon sees it.

use serde::{Deserialize, Serialize};

use super::{ControlError, RejectSnapshot, MAX_FRAME_BYTES, MAX_NODE_NAME_BYTES};
use crate::cluster::matrix::EntrySummary;
use crate::cluster::schedule::Job;
use crate::transport::Kind;

mod stream;
pub use stream::{BisectionReport, StreamOrder, StreamResult, MAX_STREAM_MSG_BYTES, MAX_STREAM_NS};

/// Longest list of sizes in a [`SizePlan::Recheck`].
pub const MAX_RECHECK_SIZES: usize = 256;
/// Longest free-text reason or transport name carried in a message.
pub const MAX_TEXT_BYTES: usize = 256;
/// Most peers listed in one [`DaemonStatus`].
pub const MAX_STATUS_PEERS: usize = 1024;
/// Most entries in one [`EntriesReply`] (each at most ~170 bytes encoded:
/// a page fits a frame with room to spare).
pub const MAX_ENTRIES_PER_REPLY: usize = 256;

/// One control-plane message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Msg {
    /// First message on a connection from each side: who I am, which daemon
    /// incarnation (generation), a random nonce and my wall-clock time.
    Hello(Hello),
    /// What a transport needs to reach me.
    Endpoints(Endpoints),
    /// Ask the peer for a probe session.
    ProbeRequest(ProbeRequest),
    /// The peer agrees to the session named by the nonce.
    ProbeAccept(ProbeAccept),
    /// The peer refuses the session.
    ProbeReject(ProbeReject),
    /// The session named by the nonce is over (either side may send it).
    ProbeDone(ProbeDone),
    /// Ask for the daemon's status (`ngctl status`).
    Status,
    /// The answer to [`Msg::Status`].
    StatusReply(DaemonStatus),
    /// Orderly end of the connection.
    Bye,
    /// The session named by the nonce is still being measured (its driver
    /// sends this during a long sweep): the responder extends the session.
    ProbeAlive(ProbeDone),
    /// An operator (`ngctl ebb`) asks this node to stream to a partner over
    /// a time window, all pairs of a matching at once; answered with
    /// [`Msg::StreamResult`] when the window is over.
    StreamOrder(StreamOrder),
    /// The answer to a [`Msg::StreamOrder`].
    StreamResult(StreamResult),
    /// The local operator hands this node the effective bisection bandwidth
    /// it measured, to publish in the transport's record of the segment.
    Bisection(BisectionReport),
    /// Ask the peer, its partner in a round of the cluster schedule, to
    /// admit a job of that round (its schedule charges the job's cost):
    /// answered by [`Msg::RoundReply`]. The job's sessions (one
    /// [`Msg::ProbeRequest`] per transport) follow on the same connection.
    RoundRequest(RoundRequest),
    /// The answer to [`Msg::RoundRequest`].
    RoundReply(RoundReply),
    /// The round's jobs on this connection are over; the payload bytes
    /// they put on the wire (both directions), which the responder's
    /// budget is settled with.
    RoundDone(RoundDone),
    /// Ask for the node's published view (`ngctl matrix`): what a reader
    /// of its segment gets for each peer and transport, a page at a time.
    Entries(EntriesRequest),
    /// The answer to [`Msg::Entries`].
    EntriesReply(EntriesReply),
}

/// See [`Msg::RoundRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundRequest {
    /// The requester: it drives the round's sessions.
    pub driver: String,
    /// The round, ⌊t / round_s⌋ on the shared clock.
    pub round: u64,
    pub job: Job,
}

/// See [`Msg::RoundReply`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundReply {
    pub round: u64,
    /// None: admitted; else why not.
    pub declined: Option<RejectReason>,
}

/// See [`Msg::RoundDone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundDone {
    pub round: u64,
    pub bytes: u64,
}

/// See [`Msg::Entries`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntriesRequest {
    /// First entry of the page, and the most it may hold (at most
    /// [`MAX_ENTRIES_PER_REPLY`]).
    pub offset: u32,
    pub max: u32,
}

/// See [`Msg::EntriesReply`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntriesReply {
    pub node: String,
    /// Entries in the whole view; this page starts at `offset`.
    pub total: u32,
    pub offset: u32,
    pub entries: Vec<EntrySummary>,
}

/// See [`Msg::Hello`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub node: String,
    /// Random per daemon start (the same number as in the segment header).
    pub generation: u64,
    pub nonce: u64,
    /// Sender's wall clock, nanoseconds since the Unix epoch.
    pub time_unix_ns: u64,
}

/// See [`Msg::Endpoints`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    pub node: String,
    /// MAC address of the probe interface (raw Ethernet).
    pub mac: [u8; 6],
    /// Interface index of the probe interface on the sender.
    pub ifindex: u32,
    /// UDP port the sender's probe responder listens on.
    pub udp_port: u16,
    /// Whether the sender can use raw Ethernet (has CAP_NET_RAW).
    pub raw_ok: bool,
    /// The queue pair of an accepted verbs session (rdma, msg): sent by the
    /// driver after [`Msg::ProbeAccept`], answered by the responder with its
    /// own once its queue pair is ready to receive. None in the first
    /// exchange of every session.
    pub verbs: Option<VerbsEndpoint>,
}

/// What an RDMA peer needs: queue pair, addressing and the target buffer,
/// plus the message transport's token terms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerbsEndpoint {
    /// The accepted session this queue pair belongs to.
    pub session_nonce: u64,
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
    pub lid: u16,
    /// `ibv_mtu` value of the sender's port (1 = 256 B … 5 = 4096 B).
    pub mtu: u8,
    pub rkey: u32,
    /// Remote virtual address of the registered target buffer.
    pub addr: u64,
    pub len_bytes: u64,
    pub max_inline_bytes: u32,
    /// msg: receive tokens posted for the peer and the bytes each holds.
    pub tokens: u32,
    pub token_bytes: u32,
    /// msg: the eager/rendezvous threshold.
    pub eager_max_bytes: u32,
    /// Largest message the sender accepts.
    pub max_msg_bytes: u64,
}

impl VerbsEndpoint {
    /// The bounds a decoded endpoint must respect (24-bit QPN and PSN, a
    /// known MTU, a buffer that does not wrap the address space).
    pub fn check(&self) -> Result<(), &'static str> {
        if self.qpn >= 1 << 24 {
            return Err("endpoints: QPN beyond 24 bits");
        }
        if self.psn >= 1 << 24 {
            return Err("endpoints: PSN beyond 24 bits");
        }
        if !(1..=5).contains(&self.mtu) {
            return Err("endpoints: unknown MTU");
        }
        if self.addr.checked_add(self.len_bytes).is_none() {
            return Err("endpoints: buffer wraps the address space");
        }
        if self.session_nonce == 0 {
            return Err("endpoints: no session");
        }
        Ok(())
    }
}

/// Which sizes a probe session covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizePlan {
    /// A full sweep.
    Full,
    /// A cheap re-check of these message sizes (bytes).
    Recheck(Vec<u64>),
    /// One flow of a contention or bisection measurement, in which the
    /// driver runs several flows at once (through this node and others):
    /// the session carries at most this many payload bytes, sent and
    /// received. The serving node consents only when its budget can pay
    /// them and it is not quiet.
    Flow { bytes: u64 },
}

/// See [`Msg::ProbeRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeRequest {
    /// Random, names the session; also stamped into every probe frame.
    pub session_nonce: u64,
    /// Which transport the session uses (encoded as the kind's place in
    /// the transport list).
    pub transport: Kind,
    pub sizes: SizePlan,
    /// The node that drives the session: always the requester (a request
    /// naming another node is refused as `WrongDriver`).
    pub driver: String,
    /// raw Ethernet: the MAC the driver sends from. The responder's gate
    /// admits the session's frames from it alone (with the nonce); for UDP
    /// the gate takes the address this control connection came from.
    pub driver_mac: Option<[u8; 6]>,
}

/// See [`Msg::ProbeAccept`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeAccept {
    pub session_nonce: u64,
}

/// Why a probe session was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RejectReason {
    /// A session with this peer is already active or requested.
    Busy,
    /// The request names a driver other than the one the role rule picks.
    WrongDriver,
    /// The receiver cannot run this transport.
    Transport,
    /// Anything else, in words.
    Other(String),
    /// The receiver is quiet (a job runs on it): no probes.
    Quiet,
    /// The receiver's traffic budget cannot carry what the session asks.
    Budget,
    /// The requester is not the receiver's partner in that round (or the
    /// round is over), or the request needs a round it did not admit.
    NotExpected,
}

/// See [`Msg::ProbeReject`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReject {
    pub session_nonce: u64,
    pub reason: RejectReason,
}

/// See [`Msg::ProbeDone`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeDone {
    pub session_nonce: u64,
}

/// State of one peer as the daemon sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerState {
    /// Configured, never reached.
    New,
    /// A probe session is running.
    Probing,
    /// Parameters published and current.
    Current,
    /// Parameters published but too old, or the peer stopped answering.
    Stale,
    /// Unreachable; retried with backoff.
    Down,
}

/// One peer in a [`DaemonStatus`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub name: String,
    pub state: PeerState,
    /// Wall-clock end of the last successful probe session, if any.
    pub last_probe_unix_ns: Option<u64>,
    /// Transport of the last session, if any.
    pub last_transport: Option<Kind>,
    /// Consecutive failed attempts (drives the backoff).
    pub failures: u32,
}

/// What `ngctl status` shows; filled by the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub node: String,
    pub generation: u64,
    pub uptime_ns: u64,
    pub peers: Vec<PeerStatus>,
    /// Probe traffic budget, bytes per second.
    pub budget_bytes_per_s: u64,
    /// Probe traffic actually used over the budget window, bytes per second.
    pub budget_used_bytes_per_s: u64,
    /// Control messages rejected since start, by kind.
    pub rejects: RejectSnapshot,
}

fn codec() -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_little_endian()
        .with_limit(MAX_FRAME_BYTES as u64)
        .reject_trailing_bytes()
}

/// Encode any serde value with the control plane's bincode options.
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, ControlError> {
    use bincode::Options;
    codec()
        .serialize(value)
        .map_err(|e| ControlError::Encode(e.to_string()))
}

/// Decode a serde value; any failure (including trailing bytes) is `Malformed`.
pub(crate) fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ControlError> {
    use bincode::Options;
    codec()
        .deserialize(bytes)
        .map_err(|_| ControlError::Malformed("payload does not decode"))
}

fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NODE_NAME_BYTES && !name.chars().any(char::is_control)
}

impl Msg {
    /// Short name of the variant (for logs and counters).
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello(_) => "hello",
            Msg::Endpoints(_) => "endpoints",
            Msg::ProbeRequest(_) => "probe_request",
            Msg::ProbeAccept(_) => "probe_accept",
            Msg::ProbeReject(_) => "probe_reject",
            Msg::ProbeDone(_) => "probe_done",
            Msg::Status => "status",
            Msg::StatusReply(_) => "status_reply",
            Msg::Bye => "bye",
            Msg::ProbeAlive(_) => "probe_alive",
            Msg::StreamOrder(_) => "stream_order",
            Msg::StreamResult(_) => "stream_result",
            Msg::Bisection(_) => "bisection",
            Msg::RoundRequest(_) => "round_request",
            Msg::RoundReply(_) => "round_reply",
            Msg::RoundDone(_) => "round_done",
            Msg::Entries(_) => "entries",
            Msg::EntriesReply(_) => "entries_reply",
        }
    }

    /// Check the bounds a decoded message must respect (names, list lengths).
    pub fn validate(&self) -> Result<(), ControlError> {
        let bad = |what| Err(ControlError::Malformed(what));
        match self {
            Msg::Hello(h) if !name_ok(&h.node) => bad("hello: bad node name"),
            Msg::Endpoints(e) if !name_ok(&e.node) => bad("endpoints: bad node name"),
            Msg::Endpoints(Endpoints { verbs: Some(v), .. }) => v.check().or_else(bad),
            Msg::ProbeRequest(r) => {
                if !name_ok(&r.driver) {
                    return bad("probe_request: bad driver name");
                }
                if let SizePlan::Recheck(sizes) = &r.sizes {
                    if sizes.is_empty() || sizes.len() > MAX_RECHECK_SIZES {
                        return bad("probe_request: recheck size list empty or too long");
                    }
                }
                Ok(())
            }
            Msg::ProbeReject(ProbeReject {
                reason: RejectReason::Other(s),
                ..
            }) if s.len() > MAX_TEXT_BYTES => bad("probe_reject: reason too long"),
            Msg::StreamOrder(o) => o.check().or_else(bad),
            Msg::StreamResult(r) if r.error.as_ref().is_some_and(|e| e.len() > MAX_TEXT_BYTES) => {
                bad("stream_result: error text too long")
            }
            Msg::Bisection(b) => b.check().or_else(bad),
            Msg::StatusReply(s) => {
                if !name_ok(&s.node) {
                    return bad("status_reply: bad node name");
                }
                if s.peers.len() > MAX_STATUS_PEERS || s.peers.iter().any(|p| !name_ok(&p.name)) {
                    return bad("status_reply: bad peer list");
                }
                Ok(())
            }
            Msg::RoundRequest(r) if !name_ok(&r.driver) => bad("round_request: bad driver name"),
            Msg::RoundReply(RoundReply {
                declined: Some(RejectReason::Other(s)),
                ..
            }) if s.len() > MAX_TEXT_BYTES => bad("round_reply: reason too long"),
            Msg::Entries(r) if r.max as usize > MAX_ENTRIES_PER_REPLY => {
                bad("entries: page too large")
            }
            Msg::EntriesReply(r) => {
                if !name_ok(&r.node) {
                    return bad("entries_reply: bad node name");
                }
                let entry_ok = |e: &EntrySummary| {
                    name_ok(&e.peer)
                        && !e.transport.is_empty()
                        && e.transport.len() <= MAX_TEXT_BYTES
                        && e.class.as_deref().is_none_or(name_ok)
                };
                if r.entries.len() > MAX_ENTRIES_PER_REPLY
                    || r.entries.len() as u64 + u64::from(r.offset) > u64::from(r.total)
                    || !r.entries.iter().all(entry_ok)
                {
                    return bad("entries_reply: bad entry list");
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
