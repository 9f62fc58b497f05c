//! netgauged: keeps the segment current for every configured peer.
//!
//! Threads (docs/ARCHITECTURE.md, "The daemon"):
//! - **control** (`control::ControlServer`, answers in [`control`]):
//!   authenticated TCP; answers `Hello`, `Endpoints`,
//!   `ProbeRequest`/`ProbeAlive`/`ProbeDone` (one session at a time, see
//!   [`admission`]; the responders only admit the nonce of the accepted
//!   session) and `Status`;
//! - **responders** ([`responders`], [`verbs`]): the link layer's PRTT
//!   responder on the UDP port, on each raw Ethernet interface a peer wants
//!   raw on, and with a `[verbs]` device one rdma or msg session at a time;
//!   all pinned with the probe thread to `probe_cpu` (`sys::spawn_busy`);
//! - **probe** ([`probe_thread`], jobs in [`job`]): optionally SCHED_FIFO;
//!   asks the scheduler what to do, drives the sweep, sends results over a
//!   crossbeam channel; the only thread that sends systemd watchdog
//!   keep-alives;
//! - **publisher** (the main thread, [`publisher`]): owns the segment
//!   writer, beats the heartbeat, writes the state and [`status`] files.
//!
//! This module wires them together.

mod admission;
pub mod config;
mod contention;
mod control;
mod job;
mod probe_thread;
mod publisher;
mod responders;
pub mod sched;
pub mod state;
pub mod status;
pub mod sys;
mod verbs;

pub use status::{status_path, PeerStatus, StatusFile};

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::HostClock;
use crate::control::{self as control_plane, ControlServer, ServerConfig};
use crate::link::{Kind, OpenError};
use admission::Activity;
use config::Config;
use control::ControlHandler;
use probe_thread::{probe_loop, ProbeCtx};
use publisher::{open_segment, publish_loop, Outcome};

/// The kind every node serves (unprivileged, no device: a UDP responder at
/// the port its `Endpoints` name): it stands in for a transport this node
/// cannot run toward a peer.
const FALLBACK: Kind = Kind::Udp;
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
    Key(#[from] crate::control::KeyError),
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
    Responder(OpenError),
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

/// State the threads share (none of it on a hot path).
struct Shared {
    node: String,
    generation: u64,
    started: Instant,
    udp_port: u16,
    /// The nonce the responders admit (0: none).
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
    /// The quiet hook (see `Shared::quiet`).
    quiet: AtomicBool,
    /// What flow sessions of others may still carry through this node.
    flow_budget: Mutex<contention::FlowBudget>,
    /// Flow bytes consented and not yet charged to the scheduler.
    flow_bytes: AtomicU64,
    /// What the control plane needs to carry out an operator's stream
    /// order and publish a bisection result (set once at start).
    operator: OnceLock<Operator>,
}

/// What a stream order runs with, as a probe job does.
struct Operator {
    cfg: Config,
    cc: crate::control::ConnConfig,
    clock: HostClock,
    verbs: Option<Arc<verbs::Node>>,
    outcomes: crossbeam_channel::Sender<Outcome>,
}

/// Run until `shutdown` is set (SIGTERM/SIGINT). Returns after a clean stop.
pub fn run(cfg: Config, shutdown: Arc<AtomicBool>) -> Result<(), DaemonError> {
    cfg.validate()?;
    let key = crate::control::load_key(&cfg.key_file)?;
    let node = cfg.node_name();

    // The segment first: readers get values from the state file at once.
    let clock = HostClock::choose(cfg.clock).map_err(DaemonError::Clock)?;
    let clock_desc = format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
    let capacity = (cfg.peers.len() * Kind::daemon_kinds().count()).max(16);
    let (mut writer, mut entries) = open_segment(&cfg, &node, &clock_desc, capacity)?;

    let gate = Arc::new(AtomicU64::new(0));
    let raw = responders::start_raw(&cfg, clock, &gate, &shutdown)?;
    let verbs_node = open_verbs(&cfg, clock);
    let targets = job::make_targets(&cfg, &raw.toward, verbs_node.is_some());

    let shared = Arc::new(Shared {
        node: node.clone(),
        generation: writer.generation(),
        started: Instant::now(),
        udp_port: cfg.udp_port,
        gate,
        activity: Mutex::new(Activity::default()),
        status: Mutex::new(Vec::new()),
        raw_toward: raw.toward,
        spent_bytes: AtomicU64::new(0),
        budget_bytes_per_s: cfg.budget_bytes_per_s,
        shutdown: shutdown.clone(),
        verbs: OnceLock::new(),
        quiet: AtomicBool::new(false),
        flow_budget: Mutex::new(contention::FlowBudget::new(
            cfg.budget_bytes_per_s,
            Instant::now(),
        )),
        flow_bytes: AtomicU64::new(0),
        operator: OnceLock::new(),
    });
    let (tx, rx) = crossbeam_channel::bounded::<Outcome>(64);
    let _ = shared.operator.set(Operator {
        cfg: cfg.clone(),
        cc: crate::control::ConnConfig::new(&node, key.clone()),
        clock,
        verbs: verbs_node.clone(),
        outcomes: tx.clone(),
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
                move |nonce| {
                    // The responder ended the session on its own (quiet,
                    // error): free the node for the next one.
                    ended_shared.end_serving_if(|s| s.nonce == nonce);
                },
            )
            .map_err(thread_error("verbs responder"))?;
            let _ = shared.verbs.set(serving);
            Ok::<_, DaemonError>(h)
        })
        .transpose()?;

    // The UDP responder.
    let udp_addr = SocketAddr::new(cfg.listen.ip(), cfg.udp_port);
    let udp = responders::start_udp(&cfg, udp_addr, clock, &shared.gate, &shutdown)?;

    // The control plane.
    let listener = TcpListener::bind(cfg.listen).map_err(|source| DaemonError::Listen {
        addr: cfg.listen.to_string(),
        source,
    })?;
    let mut scfg = ServerConfig::new(&node, key.clone());
    // The peers, and the operators' tools on this node and on the peers
    // (`ngctl ebb` orders streams and hands results to publish).
    let names = cfg.peers.iter().map(|p| p.name.as_str());
    let operators = names
        .clone()
        .chain([node.as_str()])
        .map(control_plane::operator_name);
    scfg.allowed_peers = Some(names.map(str::to_string).chain(operators).collect());
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
    let known: Vec<bool> = targets
        .iter()
        .map(|t| entries.contains_key(&(cfg.peers[t.peer].name.clone(), t.kind.name().to_string())))
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
    let sessions = udp.join().unwrap_or(0);
    for t in raw.threads {
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

/// This node's verbs device, if one is configured and works. Peers that
/// want a device kind without one: one line, and they keep their other
/// transports.
fn open_verbs(cfg: &Config, clock: HostClock) -> Option<Arc<verbs::Node>> {
    let wanting: Vec<&str> = cfg
        .peers
        .iter()
        .filter(|p| Kind::daemon_kinds().any(|k| k.descriptor().device && p.wants(k)))
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
                "verbs device {} port {} ready ({}; eager ≤ {} B)",
                v.device,
                v.port,
                n.kinds(),
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

#[cfg(test)]
mod tests;
