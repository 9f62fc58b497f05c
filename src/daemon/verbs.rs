//! The daemon's verbs transports (`rdma`, `msg`): the node's device, the
//! queue-pair exchange over the authenticated control plane, and the
//! responder thread that serves one verbs session at a time.
//!
//! Session (driver D, responder R), all on D's authenticated connection:
//!
//! 1. D → R `ProbeRequest { transport: RdmaWrite | VerbsMsg }`; R accepts
//!    only if its device opened at start (else `Transport`).
//! 2. D opens its end (device, PD, CQs, RC QP, pinned and registered
//!    buffers) and sends `Endpoints { verbs: Some(qp of D, session nonce) }`.
//! 3. R's control worker hands that to R's verbs responder thread, which
//!    opens its end, connects its QP (RTR, RTS: ready to receive) and only
//!    then answers with its own endpoint; D connects and measures. Nothing
//!    is sent before the receiving QP is ready, so no side channel and no
//!    readiness byte are needed.
//! 4. The session ends on `ProbeDone`, on the session TTL, after
//!    [`QUIET_END`] without a message (a driver that died), on an error
//!    completion, or at shutdown: the responder drops its end, which
//!    destroys the QP and deregisters and unmaps the buffers.
//!
//! Pinned memory is allocated per session (one end per side), sized by the
//! daemon's `max_size_bytes`; [`Node::open`] registers both transports'
//! buffers once at start, so a device, port, GID or `RLIMIT_MEMLOCK`
//! problem is one log line then, not a failure per probe.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::config::VerbsConfig;
use super::{JobError, Tx, CONTROL_DEADLINE};
use crate::clock::HostClock;
use crate::control::{self, Connection, Msg, TransportKind, VerbsEndpoint};
use crate::pattern::prtt;
use crate::transport::rdma_write::{RdmaWriteSetup, RdmaWriteTransport, VerbsOptions};
use crate::transport::verbs_msg::{MsgOptions, MsgSetup, VerbsMsgTransport};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};
use crate::verbs::exchange::{Endpoint, EndpointKind};

/// A responder session with no message for this long is over (its driver
/// died or lost the control connection before `ProbeDone`).
pub const QUIET_END: Duration = Duration::from_secs(10);
/// Granularity of the responder's checks (session still current, quiet).
const SERVE_IDLE: Duration = Duration::from_millis(200);
/// How long a control worker waits for the responder to set up its end.
const SETUP_WAIT: Duration = Duration::from_millis(2500);
/// A wait for a message spins this long, then yields the CPU between
/// [`SPIN_SLICE`]s (see [`Link`]).
const SPIN_FIRST: Duration = Duration::from_millis(2);
const SPIN_SLICE: Duration = Duration::from_millis(1);
/// Deadline of a send's local completion (a healthy one takes µs).
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// The node's verbs device, checked at start.
pub struct Node {
    pub rdma: VerbsOptions,
    pub msg: MsgOptions,
}

impl Node {
    /// Check the device, port and GID, and register both transports'
    /// buffers once (then release them): the reason of a failure, in one
    /// line, or a usable node.
    pub fn open(v: &VerbsConfig, max_size_bytes: u64, clock: HostClock) -> Result<Node, String> {
        let mut o = VerbsOptions::new(&v.device);
        o.link.port = v.port;
        o.link.gid_index = v.gid_index;
        let software = v.device.starts_with("rxe") || v.device.starts_with("siw");
        o.link.max_inline_bytes =
            v.inline_max_bytes
                .unwrap_or(if software { 0 } else { o.link.max_inline_bytes });
        // Re-checks probe up to 16 KiB whatever the sweep's maximum.
        let max = max_size_bytes.max(super::RECHECK_SIZES[super::RECHECK_SIZES.len() - 1]);
        o.max_msg_bytes =
            usize::try_from(max).map_err(|_| "max_size_bytes too large".to_string())?;
        o.exchange_timeout = CONTROL_DEADLINE;
        o.send_timeout = SEND_TIMEOUT;
        o.clock = clock;
        let msg = MsgOptions {
            verbs: o.clone(),
            eager_max_bytes: usize::try_from(v.eager_max_bytes).unwrap_or(usize::MAX),
        };
        drop(RdmaWriteSetup::new(&o).map_err(|e| e.to_string())?);
        drop(MsgSetup::new(&msg).map_err(|e| e.to_string())?);
        Ok(Node { rdma: o, msg })
    }
}

fn kind_of(t: TransportKind) -> Option<EndpointKind> {
    match t {
        TransportKind::RdmaWrite => Some(EndpointKind::RdmaWrite),
        TransportKind::VerbsMsg => Some(EndpointKind::Msg),
        _ => None,
    }
}

/// Our endpoint as the control plane carries it.
pub fn to_wire(e: &Endpoint, session_nonce: u64) -> VerbsEndpoint {
    VerbsEndpoint {
        session_nonce,
        qpn: e.qpn,
        psn: e.psn,
        gid: e.gid,
        lid: e.lid,
        mtu: e.mtu,
        rkey: e.rkey,
        addr: e.addr,
        len_bytes: e.size_bytes,
        max_inline_bytes: e.max_inline_bytes,
        tokens: e.tokens,
        token_bytes: e.token_bytes,
        eager_max_bytes: e.eager_max_bytes,
        max_msg_bytes: e.max_msg_bytes,
    }
}

/// A peer's endpoint from the control plane (already bounds-checked by
/// `Msg::validate`).
pub fn from_wire(v: &VerbsEndpoint, kind: EndpointKind) -> Endpoint {
    Endpoint {
        kind,
        mtu: v.mtu,
        qpn: v.qpn,
        psn: v.psn,
        gid: v.gid,
        lid: v.lid,
        rkey: v.rkey,
        addr: v.addr,
        size_bytes: v.len_bytes,
        max_inline_bytes: v.max_inline_bytes,
        tokens: v.tokens,
        token_bytes: v.token_bytes,
        eager_max_bytes: v.eager_max_bytes,
        max_msg_bytes: v.max_msg_bytes,
    }
}

/// One connected verbs end, either transport.
///
/// Its `recv` spins for the first [`SPIN_FIRST`] of a wait (every answer of
/// a healthy path arrives well within it), then yields the CPU between
/// spins of [`SPIN_SLICE`]: on a probe CPU of its own `sched_yield` returns
/// at once, but where the probe shares CPUs with the device's own work (a
/// software RDMA device such as rxe processes packets in kernel softirqs)
/// a wait that only spins starves the very work it waits for.
// At most a handful exist at a time; boxing the larger one would put a
// pointer chase into every probe call.
#[allow(clippy::large_enum_variant)]
pub enum Link {
    Rdma(RdmaWriteTransport),
    Msg(VerbsMsgTransport),
}

impl Link {
    #[inline]
    fn recv_once(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        match self {
            Link::Rdma(t) => t.recv(from, timeout),
            Link::Msg(t) => t.recv(from, timeout),
        }
    }
}

impl Transport for Link {
    fn caps(&self) -> Caps {
        match self {
            Link::Rdma(t) => t.caps(),
            Link::Msg(t) => t.caps(),
        }
    }
    #[inline]
    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        match self {
            Link::Rdma(t) => t.send(peer, bytes, meta),
            Link::Msg(t) => t.send(peer, bytes, meta),
        }
    }
    #[inline]
    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        let first = timeout.min(SPIN_FIRST);
        match self.recv_once(from, first) {
            Err(TransportError::Timeout(_)) if timeout > first => {}
            r => return r,
        }
        let deadline = Instant::now() + (timeout - first);
        loop {
            std::thread::yield_now();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv_once(from, left.min(SPIN_SLICE)) {
                Err(TransportError::Timeout(_)) if left.is_zero() => {
                    return Err(TransportError::Timeout(timeout))
                }
                Err(TransportError::Timeout(_)) => {}
                r => return r,
            }
        }
    }
    fn counters(&self) -> Counters {
        match self {
            Link::Rdma(t) => t.counters(),
            Link::Msg(t) => t.counters(),
        }
    }
}

/// Driver side, after `ProbeAccept`: open our end, send its endpoint on the
/// session's control connection, connect to the responder's answer.
pub fn link(
    node: &Node,
    conn: &mut Connection,
    peer: &str,
    me: &str,
    nonce: u64,
    tx: Tx,
) -> Result<Link, JobError> {
    enum Setup {
        Rdma(RdmaWriteSetup),
        Msg(MsgSetup),
    }
    let (setup, mine, kind) = match tx {
        Tx::Rdma => {
            let s = RdmaWriteSetup::new(&node.rdma)?;
            let e = s.endpoint(&node.rdma);
            (Setup::Rdma(s), e, EndpointKind::RdmaWrite)
        }
        Tx::Msg => {
            let s = MsgSetup::new(&node.msg)?;
            let e = s.endpoint();
            (Setup::Msg(s), e, EndpointKind::Msg)
        }
        _ => return Err(JobError::Unexpected("a verbs link for a socket transport")),
    };
    let ask = Msg::Endpoints(control::Endpoints {
        node: me.to_string(),
        mac: [0; 6],
        ifindex: 0,
        udp_port: 0,
        raw_ok: false,
        verbs: Some(to_wire(&mine, nonce)),
    });
    let theirs = match conn.request(&ask, Instant::now() + CONTROL_DEADLINE)? {
        Msg::Endpoints(control::Endpoints { verbs: Some(v), .. }) if v.session_nonce == nonce => {
            from_wire(&v, kind)
        }
        Msg::ProbeReject(r) => return Err(JobError::Refused(peer.to_string(), r.reason)),
        other => return Err(JobError::Unexpected(other.kind())),
    };
    Ok(match setup {
        Setup::Rdma(s) => Link::Rdma(s.connect(theirs, &node.rdma)?),
        Setup::Msg(s) => Link::Msg(s.connect(theirs, &node.msg)?),
    })
}

/// A request to the responder thread: set up the answering end of session
/// `nonce` toward `peer`'s endpoint; the reply is our endpoint.
struct SetupRequest {
    nonce: u64,
    kind: EndpointKind,
    peer: Endpoint,
    reply: Sender<Result<Endpoint, String>>,
}

/// The control plane's handle on the responder thread.
pub struct Serving {
    tx: Sender<SetupRequest>,
}

/// Control worker, on `Endpoints { verbs: Some(..) }` of the accepted
/// session: have the responder set up and connect its end; our endpoint,
/// or why not (sent back as a rejection).
pub fn answer(
    serving: &Serving,
    transport: TransportKind,
    peer: &VerbsEndpoint,
) -> Result<VerbsEndpoint, String> {
    let kind = kind_of(transport).ok_or("not a verbs session")?;
    let (reply, rx) = bounded(1);
    let req = SetupRequest {
        nonce: peer.session_nonce,
        kind,
        peer: from_wire(peer, kind),
        reply,
    };
    serving
        .tx
        .send_timeout(req, SETUP_WAIT)
        .map_err(|_| "the verbs responder is busy".to_string())?;
    match rx.recv_timeout(SETUP_WAIT) {
        Ok(Ok(e)) => Ok(to_wire(&e, peer.session_nonce)),
        Ok(Err(why)) => Err(why),
        Err(_) => Err("the verbs responder did not set up in time".into()),
    }
}

/// Start the responder thread. `gate` holds the nonce of the node's current
/// session (0: none); `ended(nonce)` is called when the responder ends a
/// session on its own (quiet, error), so the node accepts the next one.
/// Pinned to `cpu` like the daemon's other busy-polling threads.
pub fn spawn_responder(
    node: Arc<Node>,
    gate: Arc<AtomicU64>,
    shutdown: Arc<AtomicBool>,
    cpu: Option<usize>,
    ended: impl Fn(u64) + Send + 'static,
) -> std::io::Result<(Serving, JoinHandle<()>)> {
    let (tx, rx) = bounded::<SetupRequest>(1);
    let h = super::sys::spawn_busy("ng-verbs-responder", cpu, move || {
        responder(&node, &rx, &gate, &shutdown, &ended)
    })?;
    Ok((Serving { tx }, h))
}

fn responder(
    node: &Node,
    rx: &Receiver<SetupRequest>,
    gate: &AtomicU64,
    shutdown: &AtomicBool,
    ended: &dyn Fn(u64),
) {
    while !shutdown.load(Ordering::Relaxed) {
        let req = match rx.recv_timeout(SERVE_IDLE) {
            Ok(r) => r,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        };
        if gate.load(Ordering::Acquire) != req.nonce {
            let _ = req
                .reply
                .send(Err("the session is no longer active".into()));
            continue;
        }
        // Our end: set up, connect (ready to receive), then answer.
        let made = match req.kind {
            EndpointKind::RdmaWrite => RdmaWriteSetup::new(&node.rdma).and_then(|s| {
                let e = s.endpoint(&node.rdma);
                Ok((Link::Rdma(s.connect(req.peer, &node.rdma)?), e))
            }),
            EndpointKind::Msg => MsgSetup::answering(&req.peer, &node.msg).and_then(|s| {
                let e = s.endpoint();
                Ok((Link::Msg(s.connect(req.peer, &node.msg)?), e))
            }),
        };
        let mut link = match made {
            Ok((link, e)) => {
                if req.reply.send(Ok(e)).is_err() {
                    // The control worker gave up waiting: the driver will
                    // not use this QP.
                    ended(req.nonce);
                    continue;
                }
                link
            }
            Err(e) => {
                tracing::warn!("verbs responder: cannot set up a session: {e}");
                let _ = req.reply.send(Err(e.to_string()));
                continue;
            }
        };
        let why = serve(&mut link, req.nonce, gate, shutdown);
        tracing::debug!("verbs responder: session {:016x} over: {why}", req.nonce);
        // Dropping the link destroys the QP and releases the pinned buffers.
        drop(link);
        if why != "done" {
            ended(req.nonce);
        }
    }
}

/// Answer PRTT bursts until the session is over; says why it ended.
fn serve(link: &mut Link, nonce: u64, gate: &AtomicU64, shutdown: &AtomicBool) -> &'static str {
    let quiet_limit = (QUIET_END.as_millis() / SERVE_IDLE.as_millis()).max(1) as u64;
    let mut why = "done";
    let mut quiet = 0u64;
    let mut seen = (0u64, 0u64);
    let r = prtt::serve(link, SERVE_IDLE, |st| {
        if shutdown.load(Ordering::Relaxed) {
            why = "shutdown";
            return false;
        }
        if gate.load(Ordering::Relaxed) != nonce {
            return false; // ProbeDone, TTL, or a newer session
        }
        if st.sessions_ended > 0 {
            why = "the peer's QP failed";
            return false;
        }
        if (st.messages, st.timeouts) != seen {
            if st.messages == seen.0 {
                quiet += 1;
            } else {
                quiet = 0;
            }
            seen = (st.messages, st.timeouts);
        }
        if quiet >= quiet_limit {
            why = "quiet (driver gone?)";
            return false;
        }
        true
    });
    if let Err(e) = r {
        tracing::debug!("verbs responder: {e}");
        why = "error";
    }
    why
}
