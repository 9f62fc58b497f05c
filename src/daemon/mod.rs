//! netgauged: keeps the segment current for the cluster's members, in the
//! rounds of the cluster schedule (`cluster::schedule`).
//!
//! Threads (docs/ARCHITECTURE.md, "The daemon"):
//! - **control** (`control::ControlServer`, answers in [`control`]):
//!   authenticated TCP; answers `Hello`, `Endpoints`, `RoundRequest` (the
//!   schedule admits a partner's job of a round, or declines: quiet,
//!   budget, not expected, busy), `RoundDone`,
//!   `ProbeRequest`/`ProbeAlive`/`ProbeDone` (one session at a time, only
//!   within an admitted round, see [`admission`]; the responders only
//!   admit the nonce of the accepted session), `Entries` (the node's
//!   published view, for `ngctl matrix`) and `Status`;
//! - **responders** ([`responders`], [`verbs`]): the link layer's PRTT
//!   responder on the UDP port, on each raw Ethernet interface a peer wants
//!   raw on, and with a `[verbs]` device one rdma or msg session at a time;
//!   all pinned with the probe thread to `probe_cpu` (`sys::spawn_busy`);
//! - **probe** ([`probe_thread`], jobs in [`job`]): optionally SCHED_FIFO;
//!   plans each round with the schedule, drives its meetings, sends
//!   results over a crossbeam channel; the only thread that sends systemd
//!   watchdog keep-alives;
//! - **resolver** ([`cluster`]): turns peer names into control addresses,
//!   each lookup with a deadline, failures retried;
//! - **publisher** (the main thread, [`publisher`]): owns the segment
//!   writer, beats the heartbeat, watches the [`quiet`] file, writes the
//!   state and [`status`] files.
//!
//! This module wires them together.

mod admission;
mod cluster;
pub mod config;
mod control;
mod job;
mod probe_thread;
mod publisher;
pub mod quiet;
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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::clock::HostClock;
use crate::cluster::matrix::EntrySummary;
use crate::cluster::schedule::{CostTable, RecheckPlan, Schedule, ScheduleStatus};
use crate::control::{ControlServer, ServerConfig};
use crate::link::{Kind, OpenError};
use admission::Activity;
use cluster::{Addresses, ClusterPeers, Peer};
use config::Config;
use control::ControlHandler;
use probe_thread::{probe_loop, PeerClass, ProbeCtx};
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

/// The cheap re-check every node runs (a few sizes, under 1 MB).
fn recheck_plan() -> RecheckPlan {
    RecheckPlan::default()
}

/// Wall-clock now, seconds since the Unix epoch: the clock the rounds are
/// cut from (every node's own; they may differ by the schedule's skew).
fn unix_now_s() -> f64 {
    crate::publish::unix_now_ns() as f64 * 1e-9
}

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
    #[error("peers: {0}")]
    Cluster(#[from] cluster::ClusterError),
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
    /// Every member but this node, sorted by name, and their addresses.
    peers: Vec<Peer>,
    addresses: Addresses,
    /// This node's schedule: planned and recorded by the probe thread,
    /// admitted and settled by the control handler (never held across
    /// I/O).
    schedule: Mutex<Schedule>,
    /// Held quiet (see [`quiet`]): set by the publisher from the file.
    quiet: AtomicBool,
    quiet_status: Mutex<quiet::QuietStatus>,
    sched_status: Mutex<Option<ScheduleStatus>>,
    /// What a reader of this node's segment gets per peer and transport,
    /// for `Entries` requests (rebuilt by the publisher on change).
    view: Mutex<Arc<Vec<EntrySummary>>>,
}

impl Shared {
    fn schedule(&self) -> MutexGuard<'_, Schedule> {
        // Every holder leaves the schedule consistent between calls.
        self.schedule.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The peer that is member `m`.
    fn peer_of_member(&self, m: u32) -> Option<usize> {
        self.peers.iter().position(|p| p.member == m)
    }
}

/// Run until `shutdown` is set (SIGTERM/SIGINT). Returns after a clean stop.
pub fn run(cfg: Config, shutdown: Arc<AtomicBool>) -> Result<(), DaemonError> {
    cfg.validate()?;
    let key = crate::control::load_key(&cfg.key_file)?;
    let node = cfg.node_name();
    let cluster = ClusterPeers::load(&cfg, &node)?;
    let me = cluster
        .membership
        .index_of(&node)
        .ok_or_else(|| cluster::ClusterError::NotListed(node.clone()))?;
    // Per peer: its coverage class and the class's segment name.
    let classes: Vec<PeerClass> = cluster
        .peers
        .iter()
        .map(|p| {
            let id = cluster.membership.class_of(me, p.member);
            PeerClass {
                id,
                name: cluster::class_name(&cluster.membership, id),
                intra: cluster.membership.is_intra(id),
            }
        })
        .collect();

    // The segment first: readers get values from the state file at once.
    let clock = HostClock::choose(cfg.clock).map_err(DaemonError::Clock)?;
    let clock_desc = format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
    let (mut writer, mut entries) =
        open_segment(&cfg, &node, &clock_desc, &cluster.peers, &classes)?;
    let restored: Vec<netgauge::EntryData> = entries.values().cloned().collect();

    let gate = Arc::new(AtomicU64::new(0));
    let raw = responders::start_raw(&cluster.peers, clock, &gate, &shutdown, cfg.probe_cpu)?;
    let verbs_node = open_verbs(&cfg, &cluster.peers, clock);
    let targets = job::make_targets(&cluster.peers, &raw.toward, verbs_node.is_some());
    let schedule = Schedule::new(
        cluster.membership.clone(),
        &node,
        &cfg.schedule_config(),
        CostTable::default(),
        unix_now_s(),
    )
    .map_err(cluster::ClusterError::from)?;
    let members = cluster.membership.names().to_vec();

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
        addresses: Addresses::new(&cluster.peers),
        peers: cluster.peers,
        schedule: Mutex::new(schedule),
        quiet: AtomicBool::new(false),
        quiet_status: Mutex::new(quiet::QuietStatus::default()),
        sched_status: Mutex::new(None),
        view: Mutex::new(Arc::new(Vec::new())),
    });

    // Names to addresses, in the background.
    let resolver = {
        let shared = shared.clone();
        let (port, timeout, retry) = (
            cluster.port,
            Duration::from_secs_f64(cfg.resolve_timeout_s),
            Duration::from_secs_f64(cfg.resolve_retry_s),
        );
        std::thread::Builder::new()
            .name("ng-resolver".into())
            .spawn(move || {
                cluster::resolver_loop(
                    &shared.peers,
                    port,
                    &shared.addresses,
                    timeout,
                    retry,
                    &shared.shutdown,
                )
            })
            .map_err(thread_error("resolver"))?
    };

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
    // The members, and the operator's read-only requests (`ngctl matrix`).
    let mut allowed = members;
    allowed.push(config::OPERATOR_NAME.to_string());
    scfg.allowed_peers = Some(allowed);
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
            probe_loop(&ctx, key, &targets, &classes, restored, &tx)
        })
        .map_err(thread_error("probe"))?
    };

    sys::notify(&[sd_notify::NotifyState::Ready]);
    {
        let sched = shared.schedule();
        let r = sched.rounds();
        tracing::info!(
            "netgauged {node} up: control {}, udp {udp_addr}; {} members in {} group(s), rounds of {} s, a cycle {:.0} s",
            cfg.listen,
            sched.membership().len(),
            sched.membership().groups().len(),
            r.round_s(),
            r.cycle_s()
        );
    }

    publish_loop(&cfg, &shared, &mut writer, &mut entries, &rx, &server);

    sys::notify(&[sd_notify::NotifyState::Stopping]);
    let _ = probe_thread.join();
    let _ = resolver.join();
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
fn open_verbs(cfg: &Config, peers: &[Peer], clock: HostClock) -> Option<Arc<verbs::Node>> {
    let wanting: Vec<&str> = peers
        .iter()
        .filter(|p| Kind::daemon_kinds().any(|k| k.descriptor().device && p.wants(k)))
        .map(|p| p.name.as_str())
        .collect();
    let skipped = match wanting.len() {
        0 => String::new(),
        n if n <= 8 => format!("; rdma/msg toward {} skipped", wanting.join(", ")),
        n => format!(
            "; rdma/msg toward {n} peers skipped ({}, …)",
            wanting[..4].join(", ")
        ),
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
