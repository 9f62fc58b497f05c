//! netgauged: keeps the segment current for the cluster's members, in the
//! rounds of the cluster schedule (`cluster::schedule`).
//!
//! Threads (docs/ARCHITECTURE.md, "The daemon"):
//! - **control** (`control::ControlServer`, answers in [`control`]): one
//!   pre-authentication thread for every stranger, workers for
//!   authenticated peers only; answers `Hello`, `Endpoints`,
//!   `RoundRequest` (the schedule admits a partner's job of a round, or
//!   declines: quiet, budget, not expected, busy), `RoundDone`,
//!   `ProbeRequest`/`ProbeAlive`/`ProbeDone` (one session at a time, only
//!   within an admitted round, see [`admission`]; the responders admit
//!   only the nonce of the accepted session, from the address or MAC the
//!   control plane authenticated), `Entries` (the node's published view,
//!   for `ngctl matrix`) and `Status`;
//! - **responders** ([`responders`], [`verbs`]): the link layer's PRTT
//!   responder on the UDP port, on each raw Ethernet interface a peer wants
//!   raw on, and with a `[verbs]` device one rdma or msg session at a time;
//!   all pinned with the probe thread to `probe_cpu` (`sys::spawn_busy`);
//!   idle, they sleep in poll(2) until a frame arrives;
//! - **probe** ([`probe_thread`], jobs in [`job`]): optionally SCHED_FIFO;
//!   sleeps until its next round starts (or the shutdown wakes it), plans
//!   the round with the schedule, drives its meetings, sends results over
//!   a crossbeam channel;
//! - **resolver** ([`cluster`]): turns peer names into control addresses,
//!   each lookup with a deadline, failures retried;
//! - **publisher** (the main thread, [`publisher`]): owns the segment
//!   writer, beats the heartbeat every second, watches the [`quiet`] file
//!   on the same beat, writes the state file on change and the [`status`]
//!   file on change (and every 30 s), and feeds the systemd watchdog only
//!   while the control plane and the probe thread keep their liveness
//!   promises ([`lifecycle`]);
//! - **metrics** ([`metrics::server`], with `metrics_listen`): asleep in
//!   poll(2) until a scraper connects; renders the Prometheus exposition
//!   from the segment and the status-file view (the publisher writes
//!   `metrics_textfile` itself);
//! - **signals** ([`lifecycle::spawn_signal_thread`]): SIGTERM wakes every
//!   sleeping thread at once, and the process is gone within 2 s.
//!
//! Every file lives in a directory the daemon owns ([`paths`]).
//!
//! This module wires them together.

mod admission;
mod cluster;
pub mod config;
mod contention;
mod control;
mod costs;
#[cfg(test)]
mod fixtures;
pub mod history;
mod job;
pub mod json_file;
pub mod lifecycle;
pub mod metrics;
mod paths;
mod probe_thread;
mod publisher;
pub mod quiet;
mod responders;
pub mod sched;
pub mod state;
pub mod status;
pub mod sys;
mod verbs;

pub use lifecycle::{spawn_signal_thread, Shutdown};
pub use status::{status_path, PeerStatus, StatusFile};

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::HostClock;
use crate::cluster::matrix::EntrySummary;
use crate::cluster::schedule::{CostTable, RecheckPlan, Schedule, ScheduleStatus};
use crate::control::{self as control_plane, ControlServer, RejectCounters, ServerConfig};
use crate::link::{Kind, OpenError};
use crate::transport::dgram::SessionGate;
use admission::Activity;
use cluster::{Addresses, ClusterPeers, Peer};
use config::Config;
use control::ControlHandler;
use lifecycle::Liveness;
use paths::DaemonFiles;
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

/// The control plane's pre-authentication thread checks in at least this
/// often (its liveness for the watchdog).
const CONTROL_BEAT: Duration = Duration::from_secs(5);
/// How long the stop waits for a thread after the shutdown before it
/// leaves it behind (the process exits anyway).
const JOIN_WAIT: Duration = Duration::from_millis(1000);

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
    #[error("{what} {path}: {source}")]
    Files {
        what: &'static str,
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
    /// The probe clock, as the segment describes it.
    clock_desc: String,
    started: Instant,
    udp_port: u16,
    /// This node's control-plane address (where its entries are measured
    /// from, for the state file).
    local_ip: IpAddr,
    /// The session the responders admit: nonce and authenticated source.
    gate: Arc<SessionGate>,
    activity: Mutex<Activity>,
    status: Mutex<Vec<PeerStatus>>,
    /// Bumped whenever `status` changes: the status file is rewritten then.
    status_version: AtomicU64,
    /// Per peer name: the local interface toward it and its MAC, when a raw
    /// responder runs there (what `Endpoints` tells that peer).
    raw_toward: HashMap<String, (String, [u8; 6])>,
    spent_bytes: AtomicU64,
    budget_bytes_per_s: u64,
    shutdown: Arc<Shutdown>,
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
    /// What flow sessions of others may still carry through this node.
    flow_budget: Mutex<contention::FlowBudget>,
    /// What the control plane needs to carry out an operator's stream
    /// order and publish a bisection result (set once at start).
    operator: OnceLock<Operator>,
    /// The control server's rejection counters (for `Msg::Status`).
    rejects: OnceLock<Arc<RejectCounters>>,
    /// The probe thread's promise to check in (the watchdog's view).
    probe_alive: Liveness,
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

/// What a stream order runs with, as a probe job does.
struct Operator {
    cfg: Config,
    cc: crate::control::ConnConfig,
    clock: HostClock,
    verbs: Option<Arc<verbs::Node>>,
    outcomes: crossbeam_channel::Sender<Outcome>,
}

/// Wait for `h` until `deadline`; a thread still busy then is left behind
/// (it ends with the process), with one line saying so.
fn join_by<T>(h: JoinHandle<T>, deadline: Instant, name: &str) -> Option<T> {
    while !h.is_finished() {
        if Instant::now() >= deadline {
            tracing::warn!("{name} thread still busy at shutdown; not waiting for it");
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    h.join().ok()
}

/// Run until `shutdown` is triggered (SIGTERM/SIGINT through
/// [`spawn_signal_thread`]). Returns after a clean stop.
pub fn run(cfg: Config, shutdown: Arc<Shutdown>) -> Result<(), DaemonError> {
    cfg.validate()?;
    let node = cfg.node_name();
    if node.is_empty()
        || node.len() > netgauge::layout::PEER_MAX_BYTES
        || node.chars().any(char::is_control)
    {
        return Err(config::ConfigError::Invalid(format!(
            "node name {node:?} (from the host name): set node = \"…\", 1 to 63 bytes"
        ))
        .into());
    }
    let listen = cfg.listen_addr()?;
    let key = crate::control::load_key(&cfg.key_file)?;
    let files = DaemonFiles::open(&cfg, &node)?;
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

    // The metrics endpoint: its address taken before anything starts.
    let metrics_listener = cfg
        .metrics_listen
        .map(|addr| {
            TcpListener::bind(addr).map_err(|source| DaemonError::Listen {
                addr: format!("{addr} (metrics_listen)"),
                source,
            })
        })
        .transpose()?;

    // The segment first: readers get values from the state file at once
    // (flagged RESTORED until a re-check agrees).
    let clock = HostClock::choose(cfg.clock).map_err(DaemonError::Clock)?;
    let clock_desc = format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
    let (mut writer, mut entries) = open_segment(
        &files,
        &node,
        &clock_desc,
        &cluster.peers,
        &classes,
        listen.ip(),
    )?;

    let gate = Arc::new(SessionGate::new());
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
        clock_desc: clock_desc.clone(),
        started: Instant::now(),
        udp_port: cfg.udp_port,
        local_ip: listen.ip(),
        gate,
        activity: Mutex::new(Activity::default()),
        status: Mutex::new(Vec::new()),
        status_version: AtomicU64::new(0),
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
        flow_budget: Mutex::new(contention::FlowBudget::new(
            cfg.budget_bytes_per_s,
            Instant::now(),
        )),
        operator: OnceLock::new(),
        rejects: OnceLock::new(),
        probe_alive: Liveness::new(),
    });
    let (tx, rx) = crossbeam_channel::bounded::<Outcome>(64);
    let _ = shared.operator.set(Operator {
        cfg: cfg.clone(),
        cc: crate::control::ConnConfig::new(&node, key.clone()),
        clock,
        verbs: verbs_node.clone(),
        outcomes: tx.clone(),
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

    // The UDP responder, on the control plane's address.
    let udp_addr = SocketAddr::new(listen.ip(), cfg.udp_port);
    let udp = responders::start_udp(&cfg, udp_addr, clock, &shared.gate, &shutdown)?;

    // The control plane.
    let listener = TcpListener::bind(listen).map_err(|source| DaemonError::Listen {
        addr: listen.to_string(),
        source,
    })?;
    let mut scfg = ServerConfig::new(&node, key.clone());
    // At most a quarter of the descriptors for strangers' connections (the
    // default table, 1024, wants a limit of 4096; systemd's soft default is
    // 1024, its hard one far higher).
    match sys::raise_open_files() {
        Ok(n) => scfg.max_pending = scfg.max_pending.min((n / 4).max(16) as usize),
        Err(e) => tracing::warn!("RLIMIT_NOFILE not read: {e}"),
    }
    // The members, the operators' tools on this node and on the members
    // (`ngctl ebb` orders streams and hands results to publish), and the
    // readers' tool (`ngctl matrix`, read-only).
    let operators: Vec<String> = members
        .iter()
        .map(String::as_str)
        .chain([node.as_str()])
        .map(control_plane::operator_name)
        .collect();
    let mut allowed = members;
    allowed.extend(operators);
    allowed.push(config::OPERATOR_NAME.to_string());
    scfg.allowed_peers = Some(allowed);
    // A driver keeps its session's connection open for the whole sweep and
    // ends it with ProbeDone: the connection must outlive a long sweep.
    scfg.idle = SESSION_TTL;
    scfg.beat = CONTROL_BEAT;
    let server =
        ControlServer::spawn(listener, scfg, ControlHandler(shared.clone())).map_err(|source| {
            DaemonError::Listen {
                addr: listen.to_string(),
                source,
            }
        })?;
    let _ = shared.rejects.set(server.counters());

    // The metrics endpoint, when configured.
    let metrics_server = metrics_listener
        .map(|l| spawn_metrics(l, &shared, files.segment_path()))
        .transpose()?;

    // The probe thread.
    let restored: HashMap<(String, String), state::Stored> = entries
        .iter()
        .filter(|(_, s)| s.entry.flags & netgauge::flags::RESTORED != 0)
        .map(|(k, s)| (k.clone(), s.clone()))
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
            probe_loop(&ctx, key, &targets, &classes, &restored, &tx)
        })
        .map_err(thread_error("probe"))?
    };

    sys::notify(&[sd_notify::NotifyState::Ready]);
    {
        let sched = shared.schedule();
        let r = sched.rounds();
        tracing::info!(
            "netgauged {node} up: control {listen}, udp {udp_addr}, segment {}; {} members in {} group(s), rounds of {} s, a cycle {:.0} s",
            cfg.shm_path().display(),
            sched.membership().len(),
            sched.membership().groups().len(),
            r.round_s(),
            r.cycle_s()
        );
    }

    publish_loop(
        &cfg,
        &files,
        &shared,
        &mut writer,
        &mut entries,
        &rx,
        &server,
    );

    // Readers learn at once that the daemon is gone (heartbeat 0), then
    // every thread is woken and given a bounded time to end.
    writer.shutdown();
    shutdown.trigger();
    sys::notify(&[sd_notify::NotifyState::Stopping]);
    let deadline = Instant::now() + JOIN_WAIT;
    drop(server);
    drop(metrics_server);
    tracing::debug!("stopping: control plane and metrics endpoint closed");
    let _ = join_by(probe_thread, deadline, "probe");
    tracing::debug!("stopping: probe thread done");
    let _ = join_by(resolver, deadline, "resolver");
    let sessions = join_by(udp, deadline, "UDP responder").unwrap_or(0);
    tracing::debug!("stopping: UDP responder done");
    for t in raw.threads {
        let _ = join_by(t, deadline, "raw responder");
    }
    if let Some(t) = verbs_thread {
        let _ = join_by(t, deadline, "verbs responder");
    }
    tracing::info!("netgauged stopped ({sessions} responder sessions served)");
    Ok(())
}

/// Serve the exposition on `listener`: each scrape reads the segment at
/// `segment` (opened on the first scrape, again after a failure) and the
/// status-file view of the daemon.
fn spawn_metrics(
    listener: TcpListener,
    shared: &Arc<Shared>,
    segment: PathBuf,
) -> Result<metrics::server::MetricsServer, DaemonError> {
    let addr = listener
        .local_addr()
        .map_or_else(|_| "metrics_listen".to_string(), |a| a.to_string());
    let shared = shared.clone();
    let reader: Mutex<Option<netgauge::Reader>> = Mutex::new(None);
    let render = move |counters: &metrics::server::Counters| {
        let mut held = reader.lock().unwrap_or_else(|e| e.into_inner());
        if held.is_none() {
            match netgauge::Reader::open(&segment) {
                Ok(r) => *held = Some(r),
                Err(e) => tracing::debug!("metrics: segment {}: {e}", segment.display()),
            }
        }
        let read = held.as_ref().map(|r| (r.snapshot(), r.info()));
        let (entries, info) = match read {
            Some((Ok(e), Ok(i))) => (Some(e), Some(i)),
            _ => {
                *held = None;
                (None, None)
            }
        };
        drop(held);
        let rejects = shared
            .rejects
            .get()
            .map(|r| r.snapshot())
            .unwrap_or_default();
        let st = publisher::status_snapshot(&shared, rejects);
        let http = counters.rejects();
        metrics::render(&metrics::Snapshot {
            entries: entries.as_deref(),
            heartbeat_unix_ns: info.as_ref().map(|i| i.heartbeat_unix_ns),
            clock: &shared.clock_desc,
            status: &st,
            now_unix_ns: crate::publish::unix_now_ns(),
            with_ages: true,
            http_rejects: &http,
        })
    };
    let server = metrics::server::MetricsServer::spawn(
        listener,
        metrics::server::Limits::default(),
        Box::new(render),
    )
    .map_err(thread_error("metrics"))?;
    tracing::info!("metrics: Prometheus exposition at http://{addr}/metrics");
    Ok(server)
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
