//! The daemon's verbs transports (`rdma`, `msg`): the node's device, the
//! queue-pair exchange over the authenticated control plane, and the
//! responder thread that serves one verbs session at a time.
//!
//! Session (driver D, responder R), all on D's authenticated connection:
//!
//! 1. D → R `ProbeRequest { transport: rdma | msg }`; R accepts only if
//!    its device opened at start (else `Transport`).
//! 2. D opens its end (device, PD, CQs, RC QP, pinned and registered
//!    buffers) and sends `Endpoints { verbs: Some(qp of D, session nonce) }`
//!    ([`ControlRendezvous`]).
//! 3. R's control worker hands that to R's verbs responder thread
//!    ([`answer`]), which opens its end, connects its QP (RTR, RTS: ready
//!    to receive) and only then answers with its own endpoint; D connects
//!    and measures. Nothing is sent before the receiving QP is ready, so no
//!    side channel and no readiness byte are needed.
//! 4. The session ends on `ProbeDone`, on the session TTL, after
//!    [`QUIET_END`] without a message (a driver that died), on an error
//!    completion, or at shutdown: the responder drops its end, which
//!    destroys the QP and deregisters and unmaps the buffers.
//!
//! Pinned memory is allocated per session (one end per side), sized by the
//! daemon's `max_size_bytes`; [`Node::open`] registers every verbs kind's
//! buffers once at start, so a device, port, GID or `RLIMIT_MEMLOCK`
//! problem is one log line then, not a failure per probe. Links are opened
//! through the link layer; a build without the `verbs` feature has no
//! device to open and says so in that line.

use crate::transport::dgram::SessionGate;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::config::VerbsConfig;
use super::{recheck_plan, CONTROL_DEADLINE};
use crate::clock::HostClock;
use crate::control::{self, Connection, Msg, VerbsEndpoint};
use crate::link::{
    self, Kind, Link, LinkSpec, OpenError, QpEndpoint, Rendezvous, ServePolicy, SpinThenYield,
};

/// A responder session with no message for this long is over (its driver
/// died or lost the control connection before `ProbeDone`).
pub const QUIET_END: Duration = Duration::from_secs(10);
/// Granularity of the responder's checks (session still current, quiet).
const SERVE_IDLE: Duration = Duration::from_millis(200);
/// How long a control worker waits for the responder to set up its end.
const SETUP_WAIT: Duration = Duration::from_millis(2500);
/// A wait for a message spins this long, then yields the CPU between
/// [`SPIN_SLICE`]s (see [`SpinThenYield`]).
const SPIN_FIRST: Duration = Duration::from_millis(2);
const SPIN_SLICE: Duration = Duration::from_millis(1);
/// Deadline of a send's local completion (a healthy one takes µs).
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// A verbs link as the daemon runs it: its waits yield (see
/// [`SpinThenYield`]) on a device; other kinds' pass straight through.
pub type Waiting = SpinThenYield<Link>;

/// Wrap `link` with the waits its kind needs.
pub fn waiting(link: Link) -> Waiting {
    if link.kind().descriptor().device {
        SpinThenYield::new(link, SPIN_FIRST, SPIN_SLICE)
    } else {
        SpinThenYield::plain(link)
    }
}

/// The node's verbs device, checked at start: one link spec per verbs kind.
pub struct Node {
    specs: Vec<LinkSpec>,
}

impl Node {
    /// Check the device, port and GID, and register every verbs kind's
    /// buffers once (then release them): the reason of a failure, in one
    /// line, or a usable node.
    pub fn open(v: &VerbsConfig, max_size_bytes: u64, clock: HostClock) -> Result<Node, String> {
        // Re-checks probe their sizes whatever the sweep's maximum.
        let recheck_max = recheck_plan().sizes_bytes.into_iter().max().unwrap_or(1);
        let max = max_size_bytes.max(recheck_max);
        let max = usize::try_from(max).map_err(|_| "max_size_bytes too large".to_string())?;
        let mut specs = Vec::new();
        for kind in Kind::daemon_kinds().filter(|k| k.descriptor().device) {
            let mut s = LinkSpec::new(kind);
            s.device = Some(v.device.clone());
            s.options.clock = clock;
            s.options.max_msg_bytes = Some(max);
            s.options.verbs.port = v.port;
            s.options.verbs.gid_index = v.gid_index;
            s.options.verbs.inline_max_bytes = v.inline_max_bytes;
            s.options.verbs.eager_max_bytes =
                usize::try_from(v.eager_max_bytes).unwrap_or(usize::MAX);
            s.options.verbs.exchange_timeout = Some(CONTROL_DEADLINE);
            s.options.verbs.send_timeout = Some(SEND_TIMEOUT);
            link::check(&s).map_err(|e| e.to_string())?;
            specs.push(s);
        }
        Ok(Node { specs })
    }

    /// The spec of a session of `kind` on this node's device.
    pub fn spec(&self, kind: Kind) -> Option<&LinkSpec> {
        self.specs.iter().find(|s| s.kind == kind)
    }

    /// The kinds this node's device serves, by name.
    pub fn kinds(&self) -> String {
        let names: Vec<&str> = self.specs.iter().map(|s| s.kind.name()).collect();
        names.join(", ")
    }
}

/// Our endpoint as the control plane carries it.
fn to_wire(e: &QpEndpoint, session_nonce: u64) -> VerbsEndpoint {
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
fn from_wire(v: &VerbsEndpoint, kind: Kind) -> QpEndpoint {
    QpEndpoint {
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

/// The driver's rendezvous: the session's own control connection, after
/// `ProbeAccept`.
pub struct ControlRendezvous<'a> {
    pub conn: &'a mut Connection,
    pub peer: &'a str,
    pub me: &'a str,
    pub nonce: u64,
}

impl Rendezvous for ControlRendezvous<'_> {
    fn exchange(&mut self, mine: &QpEndpoint) -> Result<QpEndpoint, OpenError> {
        let ask = Msg::Endpoints(control::Endpoints {
            node: self.me.to_string(),
            mac: [0; 6],
            ifindex: 0,
            udp_port: 0,
            raw_ok: false,
            verbs: Some(to_wire(mine, self.nonce)),
        });
        let fail = |why: String| OpenError::Rendezvous(why);
        match self.conn.request(&ask, Instant::now() + CONTROL_DEADLINE) {
            Ok(Msg::Endpoints(control::Endpoints { verbs: Some(v), .. }))
                if v.session_nonce == self.nonce =>
            {
                Ok(from_wire(&v, mine.kind))
            }
            Ok(Msg::ProbeReject(r)) => Err(fail(format!(
                "{} refused the session: {:?}",
                self.peer, r.reason
            ))),
            Ok(other) => Err(fail(format!("unexpected control answer {}", other.kind()))),
            Err(e) => Err(fail(format!("control plane: {e}"))),
        }
    }
    fn peer_endpoint(&mut self, _: Kind) -> Result<QpEndpoint, OpenError> {
        Err(OpenError::Rendezvous(
            "a driver asks, it is not asked".into(),
        ))
    }
    fn answer(&mut self, _: &QpEndpoint) -> Result<(), OpenError> {
        Err(OpenError::Rendezvous(
            "a driver asks, it is not asked".into(),
        ))
    }
}

/// The responder's rendezvous: the driver's endpoint came with the
/// request; our answer goes back to the control worker that waits for it.
struct Answering {
    peer: QpEndpoint,
    reply: Option<Sender<Result<QpEndpoint, String>>>,
}

/// The control worker stopped waiting for our endpoint.
const GAVE_UP: &str = "the control worker gave up waiting";

impl Rendezvous for Answering {
    fn exchange(&mut self, _: &QpEndpoint) -> Result<QpEndpoint, OpenError> {
        Err(OpenError::Rendezvous(
            "a responder is asked, it does not ask".into(),
        ))
    }
    fn peer_endpoint(&mut self, kind: Kind) -> Result<QpEndpoint, OpenError> {
        if self.peer.kind != kind {
            return Err(OpenError::Rendezvous(format!(
                "peer runs the {} transport, this side {kind}",
                self.peer.kind
            )));
        }
        Ok(self.peer)
    }
    fn answer(&mut self, mine: &QpEndpoint) -> Result<(), OpenError> {
        match self.reply.take().map(|r| r.send(Ok(*mine))) {
            Some(Ok(())) => Ok(()),
            _ => Err(OpenError::Rendezvous(GAVE_UP.into())),
        }
    }
}

/// A request to the responder thread: set up the answering end of session
/// `nonce` toward `peer`'s endpoint; the reply is our endpoint.
struct SetupRequest {
    nonce: u64,
    peer: QpEndpoint,
    reply: Sender<Result<QpEndpoint, String>>,
}

/// The control plane's handle on the responder thread.
pub struct Serving {
    tx: Sender<SetupRequest>,
    kinds: Vec<Kind>,
}

impl Serving {
    /// Does this node answer sessions of `kind`?
    pub fn serves(&self, kind: Kind) -> bool {
        self.kinds.contains(&kind)
    }
}

/// Control worker, on `Endpoints { verbs: Some(..) }` of the accepted
/// session of `kind`: have the responder set up and connect its end; our
/// endpoint, or why not (sent back as a rejection).
pub fn answer(
    serving: &Serving,
    kind: Kind,
    peer: &VerbsEndpoint,
) -> Result<VerbsEndpoint, String> {
    if !serving.serves(kind) {
        return Err("not a verbs session".into());
    }
    let (reply, rx) = bounded(1);
    let req = SetupRequest {
        nonce: peer.session_nonce,
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
    gate: Arc<SessionGate>,
    shutdown: Arc<super::Shutdown>,
    cpu: Option<usize>,
    ended: impl Fn(u64) + Send + 'static,
) -> std::io::Result<(Serving, JoinHandle<()>)> {
    let (tx, rx) = bounded::<SetupRequest>(1);
    let kinds = node.specs.iter().map(|s| s.kind).collect();
    let h = super::sys::spawn_busy("ng-verbs-responder", cpu, move || {
        responder(&node, &rx, &gate, &shutdown, &ended)
    })?;
    Ok((Serving { tx, kinds }, h))
}

fn responder(
    node: &Node,
    rx: &Receiver<SetupRequest>,
    gate: &SessionGate,
    shutdown: &super::Shutdown,
    ended: &dyn Fn(u64),
) {
    while !shutdown.is_set() {
        // Asleep between sessions until a request or the shutdown.
        let req = crossbeam_channel::select! {
            recv(rx) -> r => match r {
                Ok(r) => r,
                Err(_) => return,
            },
            recv(shutdown.receiver()) -> _ => return,
        };
        if gate.nonce() != req.nonce {
            let _ = req
                .reply
                .send(Err("the session is no longer active".into()));
            continue;
        }
        let Some(spec) = node.spec(req.peer.kind) else {
            let _ = req.reply.send(Err("not a verbs session".into()));
            continue;
        };
        // Our end: set up, connect (ready to receive), then answer.
        let mut rdv = Answering {
            peer: req.peer,
            reply: Some(req.reply),
        };
        let mut link = match link::open_responder(spec, &mut rdv) {
            Ok(link) => waiting(link),
            Err(OpenError::Rendezvous(why)) if why == GAVE_UP => {
                // The driver will not use this QP.
                ended(req.nonce);
                continue;
            }
            Err(e) => {
                tracing::warn!("verbs responder: cannot set up a session: {e}");
                if let Some(reply) = rdv.reply.take() {
                    let _ = reply.send(Err(e.to_string()));
                }
                continue;
            }
        };
        let mut policy = ServePolicy::new(SERVE_IDLE);
        policy.stop = Some(shutdown.flag());
        policy.gate = Some((gate.nonce_word(), req.nonce));
        policy.until_session_end = true;
        policy.idle_exit = Some(QUIET_END);
        let served = link::serve(&mut link, policy);
        let why = match &served {
            Ok(s) => s.ended.describe(),
            Err(e) => {
                tracing::debug!("verbs responder: {e}");
                "error"
            }
        };
        tracing::debug!("verbs responder: session {:016x} over: {why}", req.nonce);
        // Dropping the link destroys the QP and releases the pinned buffers.
        drop(link);
        if !matches!(served, Ok(s) if s.ended == link::Ended::GateClosed) {
            ended(req.nonce);
        }
    }
}
