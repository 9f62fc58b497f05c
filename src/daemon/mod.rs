//! netgauged: keeps the segment current for every configured peer.
//!
//! Threads (DESIGN.md "daemon/"):
//! - **control** (`control::ControlServer`): authenticated TCP; answers
//!   `Hello`, `Endpoints`, `ProbeRequest`/`ProbeAlive`/`ProbeDone` (one session at a time;
//!   the UDP responder only admits the nonce of the accepted session) and
//!   `Status`;
//! - **responder**: the UDP mirror server (`pattern::prtt::serve`), one raw
//!   Ethernet responder per interface, and with a `[verbs]` device the
//!   verbs responder (one rdma or msg session at a time, see `verbs.rs`);
//!   all pinned with the probe thread to `probe_cpu` (`sys::spawn_busy`);
//! - **probe**: optionally SCHED_FIFO; asks the scheduler what to
//!   do, drives the sweep, sends results over a crossbeam channel; it is the
//!   only thread that sends systemd watchdog keep-alives, so a wedged probe
//!   loop gets the daemon restarted;
//! - **publisher** (the main thread): owns the segment writer; publishes
//!   whole results only (a failed probe publishes nothing and marks the
//!   entry stale), beats the heartbeat, writes the state and status files.

pub mod config;
pub mod sched;
pub mod state;
pub mod sys;
#[cfg(feature = "verbs")]
mod verbs;
#[cfg(not(feature = "verbs"))]
#[path = "verbs_stub.rs"]
mod verbs;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use netgauge::{EntryData, SegmentWriter};
use serde::Serialize;

use crate::clock::HostClock;
use crate::control::{
    self, ClusterKey, ConnConfig, ConnId, Connection, ControlServer, Msg, ProbeAccept, ProbeDone,
    ProbeReject, ProbeRequest, RejectReason, ServerConfig, SizePlan, TransportKind,
};
use crate::model::{self, LogfpFit};
use crate::probe::{self, ProbeOptions};
use crate::sweep::{self, SweepConfig};
use crate::transport::multi::Multi;
use crate::transport::raw_eth::{self, RawEthOptions, RawEthTransport};
use crate::transport::udp::{UdpOptions, UdpTransport};
use crate::transport::Transport;
use config::{Config, PeerConfig};
use sched::{Job, PeerPhase, Scheduler};

/// A responder session not closed by `ProbeDone` expires after this long.
const SESSION_TTL: Duration = Duration::from_secs(120);
/// How often a driver tells its responder that a session is still in use.
const KEEP_ALIVE: Duration = Duration::from_secs(30);
/// Deadline of every control request.
const CONTROL_DEADLINE: Duration = Duration::from_secs(3);
/// Sizes of a cheap re-check (besides the EEL size 1).
const RECHECK_SIZES: [u64; 3] = [1, 1024, 16384];
/// A re-check disagrees when a point is off the published model by more
/// than this fraction (and outside the published interval).
const RECHECK_TOLERANCE: f64 = 0.15;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Config(#[from] config::ConfigError),
    #[error("cluster key: {0}")]
    Key(#[from] control::KeyError),
    #[error("segment {path}: {source}")]
    Segment {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: String,
        source: std::io::Error,
    },
    #[error("UDP responder: {0}")]
    Responder(crate::transport::TransportError),
    #[error("clock = \"tsc\" in the configuration: {0}")]
    Clock(crate::clock::ClockError),
    #[error("cannot start the {name} thread: {source}")]
    Thread {
        name: &'static str,
        source: std::io::Error,
    },
}

fn thread_error(name: &'static str) -> impl FnOnce(std::io::Error) -> DaemonError {
    move |source| DaemonError::Thread { name, source }
}

/// A responder's thread body: mirror PRTT rounds until shutdown.
fn serve_until_shutdown<T: Transport>(t: &mut T, stop: &AtomicBool, what: &str) {
    let r = crate::pattern::prtt::serve(t, Duration::from_millis(200), |_| {
        !stop.load(Ordering::Relaxed)
    });
    if let Err(e) = r {
        tracing::error!("{what} responder stopped: {e}");
    }
}

/// A transport the daemon probes peers over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tx {
    Udp,
    Raw,
    /// One-sided RDMA write (needs a `[verbs]` device on both nodes).
    Rdma,
    /// Two-sided verbs messages, eager and rendezvous.
    Msg,
}

impl Tx {
    pub fn name(self) -> &'static str {
        match self {
            Tx::Udp => "udp",
            Tx::Raw => "raw",
            Tx::Rdma => "rdma",
            Tx::Msg => "msg",
        }
    }
    fn kind(self) -> TransportKind {
        match self {
            Tx::Udp => TransportKind::Udp,
            Tx::Raw => TransportKind::RawEth,
            Tx::Rdma => TransportKind::RdmaWrite,
            Tx::Msg => TransportKind::VerbsMsg,
        }
    }
}

/// One (peer, transport) the scheduler keeps current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Target {
    peer: usize,
    tx: Tx,
}

/// The session this node serves (at most one). It ends on `ProbeDone`, when
/// the driver's control connection that asked for it ends (a killed
/// driver's kernel closes it at once), when the verbs responder gives up on
/// it, or `SESSION_TTL` after it was granted or last extended (the driver
/// sends `ProbeAlive` every `KEEP_ALIVE` while it measures).
#[derive(Default)]
struct Session {
    nonce: u64,
    driver: String,
    conn: ConnId,
    until: Option<Instant>,
    transport: Option<TransportKind>,
}

/// What this node's probing is busy with. A node either drives (one session
/// or one fan-out) or serves one session, never both at once: two sessions
/// through one node share its link and its CPU, and each would measure the
/// other. Checks and claims happen under one lock, so a request that
/// crosses our own in flight is refused instead of slipping in between.
#[derive(Default)]
struct Activity {
    serving: Session,
    driving: bool,
}

impl Activity {
    fn serving_live(&self, now: Instant) -> bool {
        self.serving.until.is_some_and(|u| u > now)
    }
}

/// This node's claim to drive, held for a whole job; dropping it frees the
/// node for sessions from its peers.
struct DriveClaim<'a>(&'a Shared);

impl<'a> DriveClaim<'a> {
    /// `Err(Occupied)` while this node serves a live session.
    fn take(shared: &'a Shared) -> Result<Self, JobError> {
        let mut a = shared.activity();
        Self::free(&a)?;
        a.driving = true;
        Ok(DriveClaim(shared))
    }

    /// Whether a claim could be taken now, without taking it: checked
    /// before a job connects to its peers, so a node that serves a session
    /// does not open (and handshake) a control connection to its driver
    /// every retry, which that driver's measurement would pay for. The
    /// claim itself is still taken only once the peers have answered.
    fn could_take(shared: &Shared) -> Result<(), JobError> {
        Self::free(&shared.activity())
    }

    fn free(a: &Activity) -> Result<(), JobError> {
        if a.serving_live(Instant::now()) {
            return Err(JobError::Occupied(a.serving.driver.clone()));
        }
        Ok(())
    }
}

impl Drop for DriveClaim<'_> {
    fn drop(&mut self) {
        self.0.activity().driving = false;
    }
}

/// State the threads share (none of it on a hot path).
struct Shared {
    node: String,
    generation: u64,
    started: Instant,
    udp_port: u16,
    /// The nonce the UDP responder admits (0: none).
    gate: Arc<AtomicU64>,
    activity: Mutex<Activity>,
    status: Mutex<Vec<PeerStatus>>,
    /// Per peer name: the local interface toward it and its MAC, when a raw
    /// responder runs there (what `Endpoints` tells that peer).
    raw_toward: HashMap<String, (String, [u8; 6])>,
    spent_bytes: AtomicU64,
    budget_bytes_per_s: u64,
    shutdown: Arc<AtomicBool>,
    /// The verbs responder, when this node's `[verbs]` device opened.
    verbs: OnceLock<verbs::Serving>,
}

impl Shared {
    fn activity(&self) -> std::sync::MutexGuard<'_, Activity> {
        // Every writer leaves the state consistent, so a poisoned lock's
        // contents are still good.
        self.activity.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// End the served session, and close the responders' gate, if `which`
    /// says it is the one meant. True if it ended.
    fn end_serving_if(&self, which: impl FnOnce(&Session) -> bool) -> bool {
        let mut a = self.activity();
        if !which(&a.serving) {
            return false;
        }
        a.serving = Session::default();
        self.gate.store(0, Ordering::Release);
        true
    }

    /// The driver of the served session says it is still measuring: the
    /// session lasts another `SESSION_TTL` from now. Only the session's own
    /// connection can extend it. True if it did.
    fn extend_serving(&self, conn: ConnId, peer: &str, nonce: u64) -> bool {
        let mut a = self.activity();
        let s = &mut a.serving;
        if s.until.is_none() || s.conn != conn || s.nonce != nonce || s.driver != peer {
            return false;
        }
        s.until = Some(Instant::now() + SESSION_TTL);
        true
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PeerStatus {
    pub name: String,
    pub phase: PeerPhase,
    pub transport: String,
    pub failures: u32,
    pub last_probe_unix_ns: Option<u64>,
    pub last_error: Option<String>,
}

/// What `ngctl status` reads (`<shm>.status`, replaced atomically each second).
#[derive(Clone, Debug, Serialize)]
pub struct StatusFile {
    pub node: String,
    pub pid: u32,
    pub generation: u64,
    pub uptime_s: f64,
    pub updated_unix_ns: u64,
    pub peers: Vec<PeerStatus>,
    pub budget_bytes_per_s: u64,
    pub spent_bytes: u64,
    pub spent_bytes_per_s: f64,
    pub control_rejects: control::RejectSnapshot,
    pub responder_sessions: u64,
}

/// What the probe thread hands the publisher.
enum Outcome {
    Publish(Box<EntryData>),
    Stale {
        peer: String,
        transport: String,
    },
    Logfp {
        peers: Vec<String>,
        transport: String,
        fit: LogfpFit,
    },
}

pub fn status_path(shm: &Path) -> PathBuf {
    let mut s = shm.as_os_str().to_owned();
    s.push(".status");
    PathBuf::from(s)
}

/// Run until `shutdown` is set (SIGTERM/SIGINT). Returns after a clean stop.
pub fn run(cfg: Config, shutdown: Arc<AtomicBool>) -> Result<(), DaemonError> {
    cfg.validate()?;
    let key = control::load_key(&cfg.key_file)?;
    let node = cfg.node_name();

    // The segment first: readers get values from the state file at once.
    let clock = HostClock::choose(cfg.clock).map_err(DaemonError::Clock)?;
    let clock_desc = format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
    let capacity = (cfg.peers.len() * config::KNOWN_TRANSPORTS.len()).max(16);
    let mut writer = SegmentWriter::create_or_open(&cfg.shm, capacity, &node, &clock_desc)
        .map_err(|source| DaemonError::Segment {
            path: cfg.shm.clone(),
            source,
        })?;
    let loaded = match state::load(&cfg.state_file) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("{e}; starting without stored parameters");
            Vec::new()
        }
    };
    let mut entries: HashMap<(String, String), EntryData> = HashMap::new();
    for e in loaded {
        if cfg.peers.iter().any(|p| p.name == e.peer) {
            if let Err(err) = writer.upsert(&e) {
                tracing::warn!(
                    "stored entry {}/{} not restored: {err}",
                    e.peer,
                    e.transport
                );
                continue;
            }
            entries.insert((e.peer.clone(), e.transport.clone()), e);
        }
    }
    writer.heartbeat();
    tracing::info!(
        "segment {} ready: {} entries restored, generation {:016x}",
        cfg.shm.display(),
        entries.len(),
        writer.generation()
    ); // Raw Ethernet responders, one per interface named by a peer that
       // wants raw. Without CAP_NET_RAW: one line, and those peers use udp.
    let mut raw_responders: Vec<RawEthTransport> = Vec::new();
    let mut raw_toward: HashMap<String, (String, [u8; 6])> = HashMap::new();
    let mut raw_ifaces: HashMap<String, [u8; 6]> = HashMap::new();
    let mut raw_denied = false;
    for p in &cfg.peers {
        let Some(ifname) = p.interface.as_deref().filter(|_| wants(p, Tx::Raw)) else {
            continue;
        };
        if raw_denied {
            continue;
        }
        if let Some(mac) = raw_ifaces.get(ifname) {
            raw_toward.insert(p.name.clone(), (ifname.to_string(), *mac));
            continue;
        }
        match RawEthTransport::listen(ifname, RawEthOptions::default()) {
            Ok(t) => {
                let mac = t.interface().mac;
                raw_ifaces.insert(ifname.to_string(), mac);
                raw_toward.insert(p.name.clone(), (ifname.to_string(), mac));
                raw_responders.push(t);
            }
            Err(e) if raw_eth::needs_cap_net_raw(&e) => {
                tracing::warn!("raw Ethernet unavailable (no CAP_NET_RAW): peers use udp");
                raw_denied = true;
            }
            Err(e) => tracing::warn!(
                "raw Ethernet on {ifname} unavailable ({e}): {} uses udp",
                p.name
            ),
        }
    }
    let verbs_node = open_verbs(&cfg, clock);
    let targets = make_targets(&cfg, &raw_toward, verbs_node.is_some());

    let shared = Arc::new(Shared {
        node: node.clone(),
        generation: writer.generation(),
        started: Instant::now(),
        udp_port: cfg.udp_port,
        gate: Arc::new(AtomicU64::new(0)),
        activity: Mutex::new(Activity::default()),
        status: Mutex::new(Vec::new()),
        raw_toward,
        spent_bytes: AtomicU64::new(0),
        budget_bytes_per_s: cfg.budget_bytes_per_s,
        shutdown: shutdown.clone(),
        verbs: OnceLock::new(),
    });

    // The verbs responder: one rdma or msg session at a time.
    let verbs_thread = verbs_node
        .clone()
        .map(|node| {
            let ended_shared = shared.clone();
            let (serving, h) = verbs::spawn_responder(
                node,
                shared.gate.clone(),
                shutdown.clone(),
                cfg.probe_cpu,
                move |nonce| end_session(&ended_shared, nonce),
            )
            .map_err(thread_error("verbs responder"))?;
            let _ = shared.verbs.set(serving);
            Ok::<_, DaemonError>(h)
        })
        .transpose()?;

    // The UDP responder.
    let udp_addr = SocketAddr::new(cfg.listen.ip(), cfg.udp_port);
    let mut responder =
        UdpTransport::listen(udp_addr, UdpOptions::default()).map_err(DaemonError::Responder)?;
    responder.gate_hellos(shared.gate.clone());
    let responder_thread = {
        let stop = shutdown.clone();
        sys::spawn_busy("ng-responder", cfg.probe_cpu, move || {
            serve_until_shutdown(&mut responder, &stop, "UDP");
            responder.sessions_started()
        })
        .map_err(thread_error("UDP responder"))?
    };
    let raw_threads = raw_responders
        .into_iter()
        .map(|mut t| {
            t.gate_hellos(shared.gate.clone());
            let stop = shutdown.clone();
            sys::spawn_busy("ng-raw-responder", cfg.probe_cpu, move || {
                serve_until_shutdown(&mut t, &stop, "raw")
            })
            .map_err(thread_error("raw responder"))
        })
        .collect::<Result<Vec<_>, _>>()?;

    // The control plane.
    let listener = TcpListener::bind(cfg.listen).map_err(|source| DaemonError::Listen {
        addr: cfg.listen.to_string(),
        source,
    })?;
    let mut scfg = ServerConfig::new(&node, key.clone());
    scfg.allowed_peers = Some(cfg.peers.iter().map(|p| p.name.clone()).collect());
    // A driver keeps its session's connection open for the whole sweep and
    // ends it with ProbeDone: the connection must outlive a long sweep.
    scfg.idle = SESSION_TTL;
    let server =
        ControlServer::spawn(listener, scfg, ControlHandler(shared.clone())).map_err(|source| {
            DaemonError::Listen {
                addr: cfg.listen.to_string(),
                source,
            }
        })?;

    // The probe thread.
    let (tx, rx) = crossbeam_channel::bounded::<Outcome>(64);
    let known: Vec<bool> = targets
        .iter()
        .map(|t| entries.contains_key(&(cfg.peers[t.peer].name.clone(), t.tx.name().to_string())))
        .collect();
    let probe_thread = {
        let cfg = cfg.clone();
        let shared = shared.clone();
        let key = key.clone();
        let verbs_node = verbs_node.clone();
        sys::spawn_busy("ng-probe", cfg.probe_cpu, move || {
            let ctx = ProbeCtx {
                cfg: &cfg,
                shared: &shared,
                clock,
                verbs: verbs_node.as_deref(),
            };
            probe_loop(&ctx, key, &targets, &known, &tx)
        })
        .map_err(thread_error("probe"))?
    };

    sys::notify(&[sd_notify::NotifyState::Ready]);
    tracing::info!(
        "netgauged {node} up: control {}, udp {udp_addr}, {} peers",
        cfg.listen,
        cfg.peers.len()
    );

    publish_loop(&cfg, &shared, &mut writer, &mut entries, &rx, &server);

    sys::notify(&[sd_notify::NotifyState::Stopping]);
    let _ = probe_thread.join();
    let sessions = responder_thread.join().unwrap_or(0);
    for t in raw_threads {
        let _ = t.join();
    }
    if let Some(t) = verbs_thread {
        let _ = t.join();
    }
    drop(server);
    tracing::info!("netgauged stopped ({sessions} responder sessions served)");
    writer.shutdown();
    Ok(())
}

/// Does the configuration ask for `tx` toward `p`? (Default: raw where an
/// interface is given, and udp; rdma and msg only when listed.)
fn wants(p: &PeerConfig, tx: Tx) -> bool {
    match &p.transports {
        Some(list) => list.iter().any(|t| t == tx.name()),
        None => tx == Tx::Udp || (tx == Tx::Raw && p.interface.is_some()),
    }
}

/// The (peer, transport) pairs to keep current: those asked for that this
/// node can run. udp also stands in for an unavailable raw, and for a
/// peer left with nothing else.
fn make_targets(
    cfg: &Config,
    raw_toward: &HashMap<String, (String, [u8; 6])>,
    verbs_ok: bool,
) -> Vec<Target> {
    let mut out = Vec::new();
    for (i, p) in cfg.peers.iter().enumerate() {
        let mut v = Vec::new();
        if raw_toward.contains_key(&p.name) {
            v.push(Tx::Raw);
        }
        if verbs_ok {
            v.extend([Tx::Rdma, Tx::Msg].into_iter().filter(|&t| wants(p, t)));
        }
        let raw_missing = wants(p, Tx::Raw) && !v.contains(&Tx::Raw);
        if wants(p, Tx::Udp) || raw_missing || v.is_empty() {
            v.push(Tx::Udp);
        }
        out.extend(v.into_iter().map(|tx| Target { peer: i, tx }));
    }
    out
}

/// This node's verbs device, if one is configured and works. Peers that
/// want rdma or msg without one: one line, and they keep their other
/// transports.
fn open_verbs(cfg: &Config, clock: HostClock) -> Option<Arc<verbs::Node>> {
    let wanting: Vec<&str> = cfg
        .peers
        .iter()
        .filter(|p| wants(p, Tx::Rdma) || wants(p, Tx::Msg))
        .map(|p| p.name.as_str())
        .collect();
    let skipped = if wanting.is_empty() {
        String::new()
    } else {
        format!("; rdma/msg toward {} skipped", wanting.join(", "))
    };
    let Some(v) = &cfg.verbs else {
        if !wanting.is_empty() {
            tracing::warn!("no [verbs] device configured{skipped}; other transports unaffected");
        }
        return None;
    };
    match verbs::Node::open(v, cfg.max_size_bytes, clock) {
        Ok(n) => {
            tracing::info!(
                "verbs device {} port {} ready (rdma, msg; eager ≤ {} B)",
                v.device,
                v.port,
                v.eager_max_bytes
            );
            Some(Arc::new(n))
        }
        Err(why) => {
            tracing::warn!(
                "verbs device {} unavailable ({why}){skipped}; other transports unaffected",
                v.device
            );
            None
        }
    }
}

/// The responder ended session `nonce` on its own (quiet, error): free the
/// node for the next one.
fn end_session(shared: &Shared, nonce: u64) {
    shared.end_serving_if(|s| s.nonce == nonce);
}

/// A rejection's free text, bounded as the control plane requires.
fn reject_text(why: &str) -> RejectReason {
    let mut s = format!("verbs: {why}");
    if s.len() > control::msg::MAX_TEXT_BYTES {
        let mut cut = control::msg::MAX_TEXT_BYTES;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    RejectReason::Other(s)
}

/// `Endpoints { verbs: Some(..) }`: the driver's queue pair for the session
/// this node accepted from it; answered with ours once it is connected.
fn answer_verbs(shared: &Shared, peer: &str, v: &control::VerbsEndpoint) -> Msg {
    let reject = |reason| {
        Msg::ProbeReject(ProbeReject {
            session_nonce: v.session_nonce,
            reason,
        })
    };
    let transport = {
        let a = shared.activity();
        let s = &a.serving;
        if !a.serving_live(Instant::now()) || s.nonce != v.session_nonce || s.driver != peer {
            return reject(RejectReason::Other("verbs: no such session".into()));
        }
        match s.transport {
            Some(t @ (TransportKind::RdmaWrite | TransportKind::VerbsMsg)) => t,
            _ => return reject(RejectReason::Transport),
        }
    };
    let Some(serving) = shared.verbs.get() else {
        return reject(RejectReason::Transport);
    };
    match verbs::answer(serving, transport, v) {
        Ok(mine) => Msg::Endpoints(control::Endpoints {
            node: shared.node.clone(),
            mac: [0; 6],
            ifindex: 0,
            udp_port: shared.udp_port,
            raw_ok: false,
            verbs: Some(mine),
        }),
        Err(why) => {
            tracing::warn!("verbs session from {peer} not set up: {why}");
            reject(reject_text(&why))
        }
    }
}

/// The control plane's answers, on the control server's threads.
struct ControlHandler(Arc<Shared>);

impl control::Handler for ControlHandler {
    fn handle(&self, peer: &str, msg: Msg) -> Option<Msg> {
        handle_control(&self.0, ConnId::default(), peer, msg)
    }
    fn handle_on(&self, conn: ConnId, peer: &str, msg: Msg) -> Option<Msg> {
        handle_control(&self.0, conn, peer, msg)
    }
    /// The connection a session was granted on ended: so did the session
    /// (its driver finished, or is gone).
    fn closed(&self, conn: ConnId, peer: &str) {
        if self
            .0
            .end_serving_if(|s| s.until.is_some() && s.conn == conn)
        {
            tracing::debug!("session from {peer} ended with its connection");
        }
    }
}

fn handle_control(shared: &Shared, conn: ConnId, peer: &str, msg: Msg) -> Option<Msg> {
    match msg {
        Msg::Hello(_) => Some(Msg::Hello(control::Hello {
            node: shared.node.clone(),
            generation: shared.generation,
            nonce: rand::random(),
            time_unix_ns: crate::publish::unix_now_ns(),
        })),
        Msg::Endpoints(control::Endpoints { verbs: Some(v), .. }) => {
            Some(answer_verbs(shared, peer, &v))
        }
        Msg::Endpoints(_) => {
            let raw = shared.raw_toward.get(peer);
            Some(Msg::Endpoints(control::Endpoints {
                node: shared.node.clone(),
                mac: raw.map_or([0; 6], |r| r.1),
                ifindex: 0,
                udp_port: shared.udp_port,
                raw_ok: raw.is_some(),
                verbs: None,
            }))
        }
        Msg::ProbeRequest(req) => Some(accept_session(shared, conn, peer, &req)),
        Msg::ProbeDone(ProbeDone { session_nonce }) => {
            shared.end_serving_if(|s| s.nonce == session_nonce && s.driver == peer);
            None
        }
        Msg::ProbeAlive(ProbeDone { session_nonce }) => {
            if shared.extend_serving(conn, peer, session_nonce) {
                tracing::debug!("session from {peer} extended by its keep-alive");
            } else {
                tracing::debug!("keep-alive from {peer} for a session not served here");
            }
            None
        }
        _ => None,
    }
}

/// One session at a time per node, and none while this node drives its own
/// (see [`Activity`]): two daemons never measure through each other.
fn accept_session(shared: &Shared, conn: ConnId, peer: &str, req: &ProbeRequest) -> Msg {
    let reject = |reason| {
        Msg::ProbeReject(ProbeReject {
            session_nonce: req.session_nonce,
            reason,
        })
    };
    if req.driver != peer {
        return reject(RejectReason::WrongDriver);
    }
    let raw_here = shared.raw_toward.contains_key(peer);
    match req.transport {
        TransportKind::Udp => {}
        TransportKind::RawEth if raw_here => {}
        TransportKind::RdmaWrite | TransportKind::VerbsMsg if shared.verbs.get().is_some() => {}
        _ => return reject(RejectReason::Transport),
    }
    let mut a = shared.activity();
    if a.driving {
        tracing::debug!("session from {peer} refused: this node is driving one");
        return reject(RejectReason::Busy);
    }
    let now = Instant::now();
    if a.serving_live(now) && a.serving.driver != peer {
        tracing::debug!("session from {peer} refused: serving {}", a.serving.driver);
        return reject(RejectReason::Busy);
    }
    a.serving = Session {
        nonce: req.session_nonce,
        driver: peer.to_string(),
        conn,
        until: Some(now + SESSION_TTL),
        transport: Some(req.transport),
    };
    shared.gate.store(req.session_nonce, Ordering::Release);
    Msg::ProbeAccept(ProbeAccept {
        session_nonce: req.session_nonce,
    })
}

/// Why one probe job failed.
#[derive(Debug, thiserror::Error)]
enum JobError {
    #[error("control plane: {0}")]
    Control(#[from] control::ControlError),
    #[error("{0} refused the session: {1:?}")]
    Refused(String, RejectReason),
    #[error("this node is serving a session driven by {0}")]
    Occupied(String),
    #[error("unexpected control answer {0}")]
    Unexpected(&'static str),
    #[error("transport: {0}")]
    Transport(#[from] crate::transport::TransportError),
    #[error("{0}")]
    Sweep(#[from] sweep::SweepError),
    #[cfg(feature = "verbs")]
    #[error("verbs: {0}")]
    Verbs(#[from] crate::verbs::VerbsError),
}

/// A negotiated probe session with one peer.
struct Negotiated {
    conn: Connection,
    nonce: u64,
    udp: SocketAddr,
    /// The peer's MAC on our link (raw), when it runs a raw responder there.
    mac: Option<[u8; 6]>,
}

/// A control connection to a peer whose endpoints are known, before any
/// session is asked for: opening it needs no claim to drive, so a peer that
/// is down or slow to answer never keeps this node from serving others.
struct Opened {
    conn: Connection,
    ep: control::Endpoints,
}

/// Connect to `peer` and learn its endpoints (every wait has a deadline).
fn open(peer: &PeerConfig, cc: &ConnConfig, node: &str) -> Result<Opened, JobError> {
    let mut conn = Connection::connect(peer.address, &peer.name, cc)?;
    let ep = match conn.request(
        &Msg::Endpoints(control::Endpoints {
            node: node.to_string(),
            mac: [0; 6],
            ifindex: 0,
            udp_port: 0,
            raw_ok: false,
            verbs: None,
        }),
        Instant::now() + CONTROL_DEADLINE,
    )? {
        Msg::Endpoints(e) => e,
        other => return Err(JobError::Unexpected(other.kind())),
    };
    Ok(Opened { conn, ep })
}

/// Ask an opened peer for a session. The caller holds its `DriveClaim`.
fn request_session(
    opened: Opened,
    peer: &PeerConfig,
    node: &str,
    plan: SizePlan,
    tx: Tx,
) -> Result<Negotiated, JobError> {
    let Opened { mut conn, ep } = opened;
    if tx == Tx::Raw && !ep.raw_ok {
        return Err(JobError::Refused(
            peer.name.clone(),
            RejectReason::Transport,
        ));
    }
    let nonce = loop {
        let n: u64 = rand::random();
        if n != 0 {
            break n;
        }
    };
    let req = ProbeRequest {
        session_nonce: nonce,
        transport: tx.kind(),
        sizes: plan,
        driver: node.to_string(),
    };
    match conn.request(&Msg::ProbeRequest(req), Instant::now() + CONTROL_DEADLINE)? {
        Msg::ProbeAccept(a) if a.session_nonce == nonce => {}
        Msg::ProbeReject(r) => return Err(JobError::Refused(peer.name.clone(), r.reason)),
        other => return Err(JobError::Unexpected(other.kind())),
    }
    Ok(Negotiated {
        conn,
        nonce,
        udp: SocketAddr::new(peer.address.ip(), ep.udp_port),
        mac: ep.raw_ok.then_some(ep.mac),
    })
}

fn finish(n: Negotiated) {
    let mut conn = n.conn;
    let _ = conn.send(&Msg::ProbeDone(ProbeDone {
        session_nonce: n.nonce,
    }));
    conn.close();
}

fn udp_link(n: &Negotiated, clock: HostClock) -> Result<UdpTransport, JobError> {
    Ok(UdpTransport::connect(
        n.udp,
        UdpOptions {
            session_nonce: Some(n.nonce),
            clock,
            ..UdpOptions::default()
        },
    )?)
}

/// What a job produced.
enum JobResult {
    Swept(Box<probe::ProbeResult>),
    Rechecked { agrees: bool, bytes: u64 },
}

/// What every job needs besides its target.
struct JobCtx<'a> {
    cfg: &'a Config,
    cc: &'a ConnConfig,
    clock: HostClock,
    shared: &'a Shared,
    verbs: Option<&'a verbs::Node>,
}

/// What the probe thread starts with.
struct ProbeCtx<'a> {
    cfg: &'a Config,
    shared: &'a Shared,
    clock: HostClock,
    verbs: Option<&'a verbs::Node>,
}

fn run_job(
    ctx: &JobCtx<'_>,
    peer: &PeerConfig,
    tx: Tx,
    job: Job,
    published: Option<&probe::ProbeResult>,
) -> Result<JobResult, JobError> {
    let plan = match job {
        Job::FullSweep => SizePlan::Full,
        Job::Recheck => SizePlan::Recheck(RECHECK_SIZES.to_vec()),
    };
    let JobCtx {
        cfg,
        cc,
        clock,
        shared,
        verbs: verbs_node,
    } = *ctx;
    DriveClaim::could_take(shared)?;
    let opened = open(peer, cc, &shared.node)?;
    let _claim = DriveClaim::take(shared)?;
    let mut n = request_session(opened, peer, &shared.node, plan, tx)?;
    // The sweep may outlast the session's TTL and the control server's idle
    // limit on the responder: the session's connection is kept alive.
    let alive = Msg::ProbeAlive(ProbeDone {
        session_nonce: n.nonce,
    });
    let result = match tx {
        Tx::Udp => udp_link(&n, clock).and_then(|mut l| {
            n.conn.keep_alive_during(&alive, KEEP_ALIVE, || {
                measure(&mut l, cfg, job, clock, published)
            })
        }),
        Tx::Raw => raw_link(peer, &n, clock).and_then(|mut l| {
            n.conn.keep_alive_during(&alive, KEEP_ALIVE, || {
                measure(&mut l, cfg, job, clock, published)
            })
        }),
        Tx::Rdma | Tx::Msg => match verbs_node {
            Some(node) => verbs::link(node, &mut n.conn, &peer.name, &shared.node, n.nonce, tx)
                .and_then(|mut l| {
                    n.conn.keep_alive_during(&alive, KEEP_ALIVE, || {
                        measure(&mut l, cfg, job, clock, published)
                    })
                }),
            None => Err(JobError::Refused(
                peer.name.clone(),
                RejectReason::Transport,
            )),
        },
    };
    finish(n);
    result
}

fn raw_link(
    peer: &PeerConfig,
    n: &Negotiated,
    clock: HostClock,
) -> Result<RawEthTransport, JobError> {
    let (Some(ifname), Some(mac)) = (peer.interface.as_deref(), n.mac) else {
        return Err(JobError::Refused(
            peer.name.clone(),
            RejectReason::Transport,
        ));
    };
    Ok(RawEthTransport::connect(
        ifname,
        mac,
        RawEthOptions {
            session_nonce: Some(n.nonce),
            clock,
            ..RawEthOptions::default()
        },
    )?)
}

/// A full sweep, or a cheap re-check against the published model.
fn measure<T: Transport>(
    link: &mut T,
    cfg: &Config,
    job: Job,
    clock: HostClock,
    published: Option<&probe::ProbeResult>,
) -> Result<JobResult, JobError> {
    match (job, published) {
        (Job::Recheck, Some(model)) => {
            let sc = SweepConfig {
                refine: false,
                max_reps: 12,
                ..SweepConfig::default()
            };
            let before = link.counters();
            let samples = sweep::measure_sizes(link, &clock, 0, &RECHECK_SIZES, &sc)?;
            let after = link.counters();
            let bytes =
                (after.sent_bytes - before.sent_bytes) + (after.recv_bytes - before.recv_bytes);
            Ok(JobResult::Rechecked {
                agrees: agrees_with(&samples, model),
                bytes,
            })
        }
        _ => {
            let mut opts = ProbeOptions::default();
            opts.sweep.max_size_bytes = cfg.max_size_bytes;
            if let Some(r) = cfg.max_reps {
                opts.sweep.max_reps = r;
                opts.sweep.min_reps = opts.sweep.min_reps.min(r);
            }
            let r = probe::run(link, &clock, 0, &opts, &mut ())?;
            Ok(JobResult::Swept(Box::new(r)))
        }
    }
}

/// Does a re-check agree with the published model?
fn agrees_with(samples: &[model::SizeSamples], published: &probe::ProbeResult) -> bool {
    let points = model::fit::size_points(samples);
    points.iter().all(|p| {
        let Some(r) = published
            .fit
            .ranges
            .iter()
            .find(|r| p.size_bytes >= r.from_bytes && p.size_bytes <= r.to_bytes)
            .or(published.fit.ranges.last())
        else {
            return false;
        };
        let want = r.g_ns + (p.size_bytes.saturating_sub(1)) as f64 * r.G_ns_per_byte;
        // Off by more than the tolerance *and* by more than the re-check's
        // own noise (3 × its 95 % half-width): a noisy host must not turn
        // every re-check into a full sweep.
        let noise = if p.gap_hw_ns.is_finite() {
            3.0 * p.gap_hw_ns
        } else {
            0.0
        };
        let gap_ok = (p.gap_ns - want).abs() <= (RECHECK_TOLERANCE * want.abs()).max(noise);
        let eel_ok = p.size_bytes != 1
            || (p.half_rtt_ns - published.fit.eel_ns).abs()
                <= RECHECK_TOLERANCE * published.fit.eel_ns;
        gap_ok && eel_ok
    })
}

fn probe_loop(
    pctx: &ProbeCtx<'_>,
    key: ClusterKey,
    targets: &[Target],
    known: &[bool],
    tx: &Sender<Outcome>,
) {
    let ProbeCtx {
        cfg,
        shared,
        clock,
        verbs: verbs_node,
    } = *pctx;
    if cfg.lock_memory {
        if let Err(e) = sys::lock_memory() {
            tracing::warn!(
                "memory not locked (mlockall: {e}); needs CAP_IPC_LOCK or LimitMEMLOCK=infinity"
            );
        }
    }
    if let Some(prio) = cfg.sched_fifo_priority {
        if let Err(e) = sys::sched_fifo(prio) {
            tracing::warn!("probe thread not SCHED_FIFO {prio}: {e} (needs CAP_SYS_NICE)");
        }
    }
    let watchdog = sys::watchdog_interval().map(|d| d / 2);
    let mut last_keepalive = Instant::now();
    let cc = ConnConfig::new(&shared.node, key);
    let t0 = Instant::now();
    let now_s = || t0.elapsed().as_secs_f64();
    let mut sched = Scheduler::new(
        known,
        cfg.recheck_interval_s,
        cfg.budget_bytes_per_s,
        0.0,
        rand::random(),
    );
    let mut published: HashMap<(usize, Tx), probe::ProbeResult> = HashMap::new();
    let mut errors: Vec<Option<String>> = vec![None; targets.len()];
    let mut next_fanout_s = 0.0;
    let ctx = JobCtx {
        cfg,
        cc: &cc,
        clock,
        shared,
        verbs: verbs_node,
    };
    while !shared.shutdown.load(Ordering::Relaxed) {
        if let Some(w) = watchdog {
            if last_keepalive.elapsed() >= w {
                sys::notify(&[sd_notify::NotifyState::Watchdog]);
                last_keepalive = Instant::now();
            }
        }
        publish_status(cfg, shared, targets, &sched, &errors, now_s());
        // LogfP over the known peers (udp: those all of whose targets are
        // known; rdma: those known over rdma), now and then, once every
        // target has been tried.
        let phases: Vec<PeerPhase> = (0..targets.len()).map(|i| sched.peer(i).phase).collect();
        let fanouts = if cfg.fanout_interval_s > 0.0
            && now_s() >= next_fanout_s
            && !phases.contains(&PeerPhase::New)
        {
            fanout_sets(cfg, targets, &phases)
        } else {
            Vec::new()
        };
        if !fanouts.is_empty() {
            next_fanout_s = now_s() + cfg.fanout_interval_s;
            for (ftx, peers) in &fanouts {
                match fanout_job(&ctx, *ftx, peers) {
                    Ok((fit, bytes)) => {
                        sched.charge(bytes, now_s());
                        let peers = peers.iter().map(|&i| cfg.peers[i].name.clone()).collect();
                        let _ = tx.send(Outcome::Logfp {
                            peers,
                            transport: ftx.name().to_string(),
                            fit,
                        });
                    }
                    Err(e @ (JobError::Refused(_, RejectReason::Busy) | JobError::Occupied(_))) => {
                        // A peer, or this node, is busy with another
                        // session: soon again.
                        tracing::debug!("LogfP fan-out over {}: {e}", ftx.name());
                        next_fanout_s = now_s() + 0.2 + rand::random::<f64>();
                        break;
                    }
                    Err(e) => tracing::warn!("LogfP fan-out over {} failed: {e}", ftx.name()),
                }
            }
            continue;
        }
        let (i, job) = match sched.next(now_s()) {
            Ok(j) => j,
            Err(wait) => {
                std::thread::sleep(wait.min(Duration::from_millis(200)));
                continue;
            }
        };
        let target = targets[i];
        let peer = &cfg.peers[target.peer];
        let key = (target.peer, target.tx);
        let job = if published.contains_key(&key) {
            job
        } else {
            Job::FullSweep
        };
        let started = Instant::now();
        match run_job(&ctx, peer, target.tx, job, published.get(&key)) {
            Ok(JobResult::Swept(r)) => {
                sched.charge(r.probe_bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                let entry = crate::publish::entry_from_probe(&peer.name, target.tx.name(), &r);
                tracing::info!(
                    "{} over {}: EEL {:.0} ns, g {:.0} ns, G {:.4} ns/B, S {:?} ({} B of probes in {:.1} s)",
                    peer.name,
                    target.tx.name(),
                    r.fit.eel_ns,
                    entry.ranges.first().map_or(f64::NAN, |x| x.g_ns),
                    entry.ranges.first().map_or(f64::NAN, |x| x.G_ns_per_byte),
                    r.fit.S_bytes,
                    r.probe_bytes,
                    started.elapsed().as_secs_f64()
                );
                let _ = tx.send(Outcome::Publish(Box::new(entry)));
                published.insert(key, *r);
                sched.swept(i, now_s());
                errors[i] = None;
            }
            Ok(JobResult::Rechecked { agrees, bytes }) => {
                sched.charge(bytes, now_s());
                shared
                    .spent_bytes
                    .store(sched.spent_bytes, Ordering::Relaxed);
                if !agrees {
                    tracing::info!(
                        "{}: re-check disagrees with the published model; full sweep",
                        peer.name
                    );
                }
                sched.rechecked(i, agrees, now_s());
                errors[i] = None;
            }
            Err(e @ (JobError::Refused(_, RejectReason::Busy) | JobError::Occupied(_))) => {
                // The peer is busy with another session (or driving one),
                // or this node serves one: not a failure; try again shortly.
                tracing::debug!("{}: {e}; retrying shortly", peer.name);
                sched.defer(i, now_s() + 0.2 + rand::random::<f64>());
            }
            Err(e) => {
                tracing::warn!("{}: probe failed: {e}", peer.name);
                sched.failed(i, now_s());
                errors[i] = Some(e.to_string());
                let _ = tx.send(Outcome::Stale {
                    peer: peer.name.clone(),
                    transport: target.tx.name().into(),
                });
            }
        }
    }
}

/// The fan-outs to run, given each target's phase: udp over the peers all
/// of whose targets are known (every node runs a UDP responder), and rdma
/// over the peers known over rdma; each needs at least two peers.
fn fanout_sets(cfg: &Config, targets: &[Target], phases: &[PeerPhase]) -> Vec<(Tx, Vec<usize>)> {
    let known = |t: &(&Target, &PeerPhase)| *t.1 == PeerPhase::Known;
    let mut out = Vec::new();
    let udp: Vec<usize> = (0..cfg.peers.len())
        .filter(|&i| {
            let mut of_i = targets.iter().zip(phases).filter(|(t, _)| t.peer == i);
            of_i.clone().next().is_some() && of_i.all(|x| known(&x))
        })
        .collect();
    if udp.len() >= 2 {
        out.push((Tx::Udp, udp));
    }
    let rdma: Vec<usize> = targets
        .iter()
        .zip(phases)
        .filter(|x| x.0.tx == Tx::Rdma && known(x))
        .map(|(t, _)| t.peer)
        .collect();
    if rdma.len() >= 2 {
        out.push((Tx::Rdma, rdma));
    }
    out
}

/// The 1:P−P:1 pattern across `peers` over `tx` (udp: their UDP
/// responders; rdma: one queue pair to each peer's verbs responder).
fn fanout_job(ctx: &JobCtx<'_>, tx: Tx, peers: &[usize]) -> Result<(LogfpFit, u64), JobError> {
    let JobCtx {
        cfg,
        cc,
        clock,
        shared,
        verbs: verbs_node,
    } = *ctx;
    if !matches!(tx, Tx::Udp | Tx::Rdma) {
        return Err(JobError::Unexpected("no fan-out over this transport"));
    }
    // Every peer is connected to before the claim, as in `run_job`.
    DriveClaim::could_take(shared)?;
    let mut opened = Vec::with_capacity(peers.len());
    for &i in peers {
        opened.push((i, open(&cfg.peers[i], cc, &shared.node)?));
    }
    let _claim = DriveClaim::take(shared)?;
    let mut sessions: Vec<Negotiated> = Vec::with_capacity(peers.len());
    let result = (|| match tx {
        Tx::Udp => {
            let mut links = Vec::with_capacity(peers.len());
            for (i, o) in opened {
                let plan = SizePlan::Recheck(vec![1]);
                sessions.push(request_session(o, &cfg.peers[i], &shared.node, plan, tx)?);
                links.push(udp_link(&sessions[sessions.len() - 1], clock)?);
            }
            fanout_run(&mut Multi::new(links), clock, cfg.max_reps)
        }
        Tx::Rdma => {
            let node = verbs_node.ok_or(JobError::Unexpected("rdma fan-out without a device"))?;
            let mut links = Vec::with_capacity(peers.len());
            for (i, o) in opened {
                let p = &cfg.peers[i];
                let plan = SizePlan::Recheck(vec![1]);
                sessions.push(request_session(o, p, &shared.node, plan, tx)?);
                let n = sessions.last_mut().expect("just pushed");
                links.push(verbs::link(
                    node,
                    &mut n.conn,
                    &p.name,
                    &shared.node,
                    n.nonce,
                    tx,
                )?);
            }
            fanout_run(&mut Multi::new(links), clock, cfg.max_reps)
        }
        Tx::Raw | Tx::Msg => Err(JobError::Unexpected("no fan-out over this transport")),
    })();
    for n in sessions {
        finish(n);
    }
    result
}

fn fanout_run<T: Transport>(
    multi: &mut Multi<T>,
    clock: HostClock,
    max_reps: Option<u32>,
) -> Result<(LogfpFit, u64), JobError> {
    let mut sc = SweepConfig::default();
    if let Some(r) = max_reps {
        sc.max_reps = r;
        sc.min_reps = sc.min_reps.min(r);
    }
    let peers = multi.caps().peers;
    let before = multi.counters();
    let samples = sweep::fanout_sweep(multi, &clock, peers, 1, &sc)?;
    let after = multi.counters();
    let bytes = (after.sent_bytes - before.sent_bytes) + (after.recv_bytes - before.recv_bytes);
    Ok((model::logfp::fit_logfp(&samples), bytes))
}

fn publish_status(
    cfg: &Config,
    shared: &Shared,
    targets: &[Target],
    sched: &Scheduler,
    errors: &[Option<String>],
    now_s: f64,
) {
    let mut st = shared.status.lock().unwrap_or_else(|e| e.into_inner());
    st.clear();
    let now_unix = crate::publish::unix_now_ns();
    for (i, t) in targets.iter().enumerate() {
        let s = sched.peer(i);
        st.push(PeerStatus {
            name: cfg.peers[t.peer].name.clone(),
            phase: s.phase,
            transport: t.tx.name().into(),
            failures: s.failures,
            last_probe_unix_ns: s
                .last_probe_s
                .map(|t| now_unix.saturating_sub(((now_s - t).max(0.0) * 1e9) as u64)),
            last_error: errors[i].clone(),
        });
    }
}

fn publish_loop(
    cfg: &Config,
    shared: &Shared,
    writer: &mut SegmentWriter,
    entries: &mut HashMap<(String, String), EntryData>,
    rx: &Receiver<Outcome>,
    server: &ControlServer,
) {
    // Per transport: the peers of the last fan-out and its fit.
    let mut logfp: HashMap<String, (Vec<String>, LogfpFit)> = HashMap::new();
    let mut last_beat = Instant::now() - Duration::from_secs(1);
    while !shared.shutdown.load(Ordering::Relaxed) {
        let mut dirty = false;
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(Outcome::Publish(mut e)) => {
                if let Some((peers, fit)) = logfp.get(&e.transport) {
                    if peers.contains(&e.peer) {
                        attach_logfp(&mut e, fit);
                    }
                }
                match writer.upsert(&e) {
                    Ok(_) => {
                        entries.insert((e.peer.clone(), e.transport.clone()), *e);
                        dirty = true;
                    }
                    Err(err) => tracing::error!("cannot publish {}/{}: {err}", e.peer, e.transport),
                }
            }
            Ok(Outcome::Stale { peer, transport }) => {
                if entries.contains_key(&(peer.clone(), transport.clone())) {
                    if let Err(err) = writer.mark_stale(&peer, &transport) {
                        tracing::warn!("cannot mark {peer}/{transport} stale: {err}");
                    }
                    if let Some(e) = entries.get_mut(&(peer, transport)) {
                        e.flags |= netgauge::flags::STALE;
                    }
                }
            }
            Ok(Outcome::Logfp {
                peers,
                transport,
                fit,
            }) => {
                for p in &peers {
                    if let Some(e) = entries.get_mut(&(p.clone(), transport.clone())) {
                        attach_logfp(e, &fit);
                        if let Err(err) = writer.upsert(e) {
                            tracing::error!("cannot publish LogfP for {p}: {err}");
                        }
                    }
                }
                tracing::info!(
                    "LogfP over {} peers ({transport}): f {:?}, o_min {:.0} ns, o_max {:.0} ns",
                    peers.len(),
                    fit.f,
                    fit.o_min_ns,
                    fit.o_max_ns
                );
                logfp.insert(transport, (peers, fit));
                dirty = true;
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
        if dirty {
            let all: Vec<EntryData> = entries.values().cloned().collect();
            if let Err(e) = state::save(&cfg.state_file, &shared.node, &all) {
                tracing::warn!("{e}");
            }
        }
        if last_beat.elapsed() >= Duration::from_secs(1) {
            last_beat = Instant::now();
            writer.heartbeat();
            expire_session(shared);
            write_status(cfg, shared, server);
        }
    }
}

fn attach_logfp(e: &mut EntryData, fit: &LogfpFit) {
    e.f = fit.f;
    e.o_min_ns = fit.o_min_ns;
    e.o_max_ns = fit.o_max_ns;
    e.g_f_ns = fit.g_ns;
    e.curve = fit
        .points
        .iter()
        .take(netgauge::layout::MAX_CURVE)
        .map(|p| (p.peers, p.o_ns, p.rtt_ns))
        .collect();
}

fn expire_session(shared: &Shared) {
    let now = Instant::now();
    if shared.end_serving_if(|s| s.until.is_some_and(|u| u <= now)) {
        tracing::info!("served session expired: no sign of its driver for {SESSION_TTL:?}");
    }
}

fn write_status(cfg: &Config, shared: &Shared, server: &ControlServer) {
    let uptime_s = shared.started.elapsed().as_secs_f64();
    let spent = shared.spent_bytes.load(Ordering::Relaxed);
    let st = StatusFile {
        node: shared.node.clone(),
        pid: std::process::id(),
        generation: shared.generation,
        uptime_s,
        updated_unix_ns: crate::publish::unix_now_ns(),
        peers: shared
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        budget_bytes_per_s: shared.budget_bytes_per_s,
        spent_bytes: spent,
        spent_bytes_per_s: spent as f64 / uptime_s.max(1.0),
        control_rejects: server.counters().snapshot(),
        responder_sessions: 0,
    };
    let path = status_path(&cfg.shm);
    let tmp = {
        let mut s = path.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let ok = serde_json::to_vec_pretty(&st)
        .map_err(std::io::Error::other)
        .and_then(|b| std::fs::write(&tmp, b))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = ok {
        tracing::debug!("status file {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(peers: &str) -> Config {
        let c: Config = toml::from_str(&format!("key_file = \"/k\"\n{peers}")).unwrap();
        c.validate().unwrap();
        c
    }

    fn peer(name: &str, extra: &str) -> String {
        format!("[[peer]]\nname = \"{name}\"\naddress = \"10.0.0.9:7470\"\n{extra}\n")
    }

    fn txs(t: &[Target], peer: usize) -> Vec<Tx> {
        t.iter().filter(|t| t.peer == peer).map(|t| t.tx).collect()
    }

    #[test]
    fn targets_follow_the_lists_and_what_works() {
        let c = cfg(&[
            peer("a", "transports = [\"rdma\", \"msg\"]"),
            peer("b", "transports = [\"udp\", \"rdma\"]"),
            peer("c", ""),
            peer("d", "interface = \"eth1\"\ntransports = [\"raw\"]"),
        ]
        .concat());
        let mut raw = HashMap::new();
        // With a verbs device, and raw toward d.
        raw.insert("d".to_string(), ("eth1".to_string(), [2, 0, 0, 0, 0, 1]));
        let t = make_targets(&c, &raw, true);
        assert_eq!(txs(&t, 0), [Tx::Rdma, Tx::Msg]);
        assert_eq!(txs(&t, 1), [Tx::Rdma, Tx::Udp]);
        assert_eq!(txs(&t, 2), [Tx::Udp]);
        assert_eq!(txs(&t, 3), [Tx::Raw]);
        // Without a device (or raw): the verbs targets go, udp stays or
        // stands in, as it does for raw.
        let t = make_targets(&c, &HashMap::new(), false);
        assert_eq!(txs(&t, 0), [Tx::Udp]);
        assert_eq!(txs(&t, 1), [Tx::Udp]);
        assert_eq!(txs(&t, 2), [Tx::Udp]);
        assert_eq!(txs(&t, 3), [Tx::Udp]);
    }

    #[test]
    fn fanouts_need_two_peers_per_transport() {
        let c = cfg(&[
            peer("a", "transports = [\"rdma\", \"msg\"]"),
            peer("b", "transports = [\"udp\", \"rdma\"]"),
            peer("c", "transports = [\"msg\"]"),
        ]
        .concat());
        let t = make_targets(&c, &HashMap::new(), true);
        let all_known = vec![PeerPhase::Known; t.len()];
        let f = fanout_sets(&c, &t, &all_known);
        assert_eq!(f, vec![(Tx::Udp, vec![0, 1, 2]), (Tx::Rdma, vec![0, 1])]);
        // A failing rdma target leaves its peer out of both (a has no udp
        // target: it is in the udp fan-out only while all of its are known).
        let mut phases = all_known.clone();
        phases[0] = PeerPhase::Failing; // a over rdma
        assert_eq!(fanout_sets(&c, &t, &phases), vec![(Tx::Udp, vec![1, 2])]);
        let c = cfg(&[peer("a", "transports = [\"rdma\"]"), peer("b", "")].concat());
        let t = make_targets(&c, &HashMap::new(), true);
        let all_known = vec![PeerPhase::Known; t.len()];
        assert_eq!(fanout_sets(&c, &t, &all_known), vec![(Tx::Udp, vec![0, 1])]);
        assert!(fanout_sets(&cfg(&peer("a", "")), &[], &[]).is_empty());
    }

    fn shared(node: &str) -> Shared {
        Shared {
            node: node.into(),
            generation: 1,
            started: Instant::now(),
            udp_port: 0,
            gate: Arc::new(AtomicU64::new(0)),
            activity: Mutex::new(Activity::default()),
            status: Mutex::new(Vec::new()),
            raw_toward: HashMap::new(),
            spent_bytes: AtomicU64::new(0),
            budget_bytes_per_s: 0,
            shutdown: Arc::new(AtomicBool::new(false)),
            verbs: OnceLock::new(),
        }
    }

    fn request(from: &str, nonce: u64) -> ProbeRequest {
        ProbeRequest {
            session_nonce: nonce,
            transport: TransportKind::Udp,
            sizes: SizePlan::Full,
            driver: from.into(),
        }
    }

    fn accept(s: &Shared, conn: u64, from: &str, nonce: u64) -> Msg {
        accept_session(s, ConnId(conn), from, &request(from, nonce))
    }

    #[test]
    fn a_node_drives_or_serves_never_both() {
        let s = shared("b");
        // Driving (from the claim on, before its own request is even
        // sent): every request is refused, the crossing one included.
        let claim = DriveClaim::take(&s).unwrap();
        for from in ["a", "c"] {
            match accept(&s, 1, from, 7) {
                Msg::ProbeReject(r) => assert_eq!(r.reason, RejectReason::Busy),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(s.gate.load(Ordering::Acquire), 0);
        drop(claim);
        // Free again: a request is accepted and opens the gate ...
        assert!(matches!(
            accept(&s, 2, "a", 9),
            Msg::ProbeAccept(ProbeAccept { session_nonce: 9 })
        ));
        assert_eq!(s.gate.load(Ordering::Acquire), 9);
        // ... and while it is served this node neither drives nor serves
        // another.
        assert!(matches!(DriveClaim::take(&s), Err(JobError::Occupied(d)) if d == "a"));
        assert!(matches!(accept(&s, 3, "c", 11), Msg::ProbeReject(_)));
        // The driver's ProbeDone frees it.
        let done = Msg::ProbeDone(ProbeDone { session_nonce: 9 });
        assert!(handle_control(&s, ConnId(2), "a", done).is_none());
        assert_eq!(s.gate.load(Ordering::Acquire), 0);
        assert!(DriveClaim::take(&s).is_ok());
    }

    #[test]
    fn a_session_ends_with_the_connection_that_asked_for_it() {
        use control::Handler;
        let h = ControlHandler(Arc::new(shared("b")));
        assert!(matches!(accept(&h.0, 4, "a", 9), Msg::ProbeAccept(_)));
        // Another connection of the same driver ending changes nothing ...
        h.closed(ConnId(3), "a");
        assert_eq!(h.0.gate.load(Ordering::Acquire), 9);
        assert!(DriveClaim::take(&h.0).is_err());
        // ... its own ending (a killed driver's kernel closes it) frees the
        // node at once instead of after the session's TTL.
        h.closed(ConnId(4), "a");
        assert_eq!(h.0.gate.load(Ordering::Acquire), 0);
        assert!(DriveClaim::take(&h.0).is_ok());
        assert!(matches!(accept(&h.0, 5, "c", 10), Msg::ProbeAccept(_)));
    }

    #[test]
    fn only_the_sessions_own_connection_extends_it() {
        let s = shared("b");
        assert!(matches!(accept(&s, 4, "a", 9), Msg::ProbeAccept(_)));
        let until = |s: &Shared| s.activity().serving.until.unwrap();
        let granted = until(&s);
        let alive = |conn, from, nonce| {
            let m = Msg::ProbeAlive(ProbeDone {
                session_nonce: nonce,
            });
            assert!(handle_control(&s, ConnId(conn), from, m).is_none());
        };
        // Another connection, another driver or another nonce: no effect.
        alive(3, "a", 9);
        alive(4, "c", 9);
        alive(4, "a", 8);
        assert_eq!(until(&s), granted);
        // The session's own: SESSION_TTL from now.
        std::thread::sleep(Duration::from_millis(5));
        alive(4, "a", 9);
        assert!(until(&s) > granted);
        // Nothing to extend once it is over.
        let done = Msg::ProbeDone(ProbeDone { session_nonce: 9 });
        assert!(handle_control(&s, ConnId(4), "a", done).is_none());
        assert!(!s.extend_serving(ConnId(4), "a", 9));
        assert!(s.activity().serving.until.is_none());
    }

    /// Node "b" with one peer "a" at `peer`'s address.
    fn node_b_with_peer_a(peer: &std::net::TcpListener) -> (Config, Shared, ConnConfig) {
        let c = cfg(&format!(
            "[[peer]]\nname = \"a\"\naddress = \"{}\"\n",
            peer.local_addr().unwrap()
        ));
        let cc = ConnConfig::new("b", ClusterKey::from_bytes(&[7u8; 32]).unwrap());
        (c, shared("b"), cc)
    }

    fn job_ctx<'a>(cfg: &'a Config, cc: &'a ConnConfig, shared: &'a Shared) -> JobCtx<'a> {
        JobCtx {
            cfg,
            cc,
            clock: HostClock::default(),
            shared,
            verbs: None,
        }
    }

    #[test]
    fn connecting_to_a_silent_peer_holds_no_claim_to_drive() {
        // A peer that accepts the TCP connection and never says Hello: the
        // job waits in its handshake. Until it has the peer's endpoints it
        // holds no claim, so this node still serves others meanwhile.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (c, s, cc) = node_b_with_peer_a(&silent);
        let ctx = job_ctx(&c, &cc, &s);
        std::thread::scope(|scope| {
            let job = scope.spawn(|| run_job(&ctx, &c.peers[0], Tx::Udp, Job::FullSweep, None));
            let (held, _) = silent.accept().unwrap();
            // The job is connected and waiting for a Hello that never comes.
            assert!(matches!(accept(&s, 1, "c", 5), Msg::ProbeAccept(_)));
            drop(held);
            let r = job.join().unwrap();
            assert!(matches!(r, Err(JobError::Control(_))), "{:?}", r.err());
        });
        // The served session is untouched by the failed job.
        assert_eq!(s.gate.load(Ordering::Acquire), 5);
    }

    #[test]
    fn a_serving_node_does_not_connect_to_drive() {
        // While this node serves a session, a job of its own fails at once
        // as Occupied: it does not connect to the peer, whose measurement
        // would otherwise pay for a control handshake every retry.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let (c, s, cc) = node_b_with_peer_a(&listener);
        let ctx = job_ctx(&c, &cc, &s);
        assert!(matches!(accept(&s, 1, "a", 5), Msg::ProbeAccept(_)));
        let r = run_job(&ctx, &c.peers[0], Tx::Udp, Job::FullSweep, None);
        assert!(
            matches!(&r, Err(JobError::Occupied(d)) if d == "a"),
            "{:?}",
            r.err()
        );
        let r = fanout_job(&ctx, Tx::Udp, &[0]);
        assert!(
            matches!(&r, Err(JobError::Occupied(d)) if d == "a"),
            "{:?}",
            r.err()
        );
        assert_eq!(
            listener.accept().map_err(|e| e.kind()).err(),
            Some(std::io::ErrorKind::WouldBlock),
            "the serving node connected to a peer"
        );
    }

    #[test]
    fn reject_text_is_bounded_on_a_char_boundary() {
        let long = "é".repeat(400);
        match reject_text(&long) {
            RejectReason::Other(s) => {
                assert!(s.len() <= control::msg::MAX_TEXT_BYTES);
                assert!(s.starts_with("verbs: é"));
            }
            other => panic!("{other:?}"),
        }
    }
}
