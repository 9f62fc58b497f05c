//! The daemon's configuration: a TOML file (see `systemd/netgauged.toml`),
//! overridden by command-line flags.
//!
//! Peers come from any of: `peers` (a Slurm hostlist expression),
//! `peers_file` (one hostlist expression or host per line) and `[[peer]]`
//! entries (a name with its address; beside a list they give a listed name
//! its own address). `topology_file` (Slurm's topology.conf) groups them
//! by leaf switch. Every node must read the same member list (its own name
//! included): the rounds of the cluster schedule are derived from it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cluster::schedule::ScheduleConfig;
use crate::transport::kind::PeerEndpoint;
use crate::transport::Kind;

/// The name `ngctl` authenticates as on the control plane (read-only
/// requests); no node may be called so.
pub const OPERATOR_NAME: &str = "ngctl";

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's name (as peers know it). Default: the host name.
    #[serde(default)]
    pub node: Option<String>,
    /// Control plane address (TCP), also the UDP responder's address.
    /// Default: this node's address on the cluster network — the local
    /// address the kernel routes the first peer's address from — at port
    /// 7470; never every interface unless asked for (0.0.0.0).
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// UDP port the probe responder answers on. Default 7471.
    #[serde(default = "default_udp_port")]
    pub udp_port: u16,
    /// Where the segment, its lock and the status file live: a directory
    /// owned by the daemon's user that nobody else may write. Default
    /// `$RUNTIME_DIRECTORY` (systemd `RuntimeDirectory=netgauged`), else
    /// /run/netgauged.
    #[serde(default)]
    pub runtime_dir: Option<PathBuf>,
    /// The segment. Default `<runtime_dir>/segment`; its directory must be
    /// the daemon's own, as for `runtime_dir`.
    #[serde(default)]
    pub shm: Option<PathBuf>,
    /// Pre-shared cluster key (≥ 32 bytes), readable only by the daemon's user.
    pub key_file: PathBuf,
    /// Where the state file lives (the daemon's own directory, as for
    /// `runtime_dir`). Default `$STATE_DIRECTORY` (systemd
    /// `StateDirectory=netgauged`), else /var/lib/netgauged.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// Last good parameters, written by atomic rename, loaded at start.
    /// Default `<state_dir>/<node>.json`; locked while the daemon runs, so
    /// two daemons never share one.
    #[serde(default)]
    pub state_file: Option<PathBuf>,
    /// Records kept per (peer, transport) in the history file (beside the
    /// state file): a record per published sweep, re-check and staleness.
    #[serde(default = "default_history_records")]
    pub history_max_records: usize,
    /// Records older than this many seconds leave the history.
    #[serde(default = "default_history_age")]
    pub history_max_age_s: f64,
    /// The history file's largest size, all pairs together: past it the
    /// oldest records of the whole node leave first.
    #[serde(default = "default_history_bytes")]
    pub history_max_bytes: u64,
    /// Probe traffic budget of this node, payload bytes per second, driving
    /// and serving together.
    #[serde(default = "default_budget")]
    pub budget_bytes_per_s: u64,
    /// A measured pair is not re-checked sooner than this, seconds.
    #[serde(default = "default_interval")]
    pub recheck_interval_s: f64,
    /// Largest message size of a full sweep.
    #[serde(default = "default_max_size")]
    pub max_size_bytes: u64,
    /// Most repetitions per size of a full sweep and a fan-out (default 40;
    /// fewer: a quicker, rougher sweep, e.g. on an emulated test rig).
    #[serde(default)]
    pub max_reps: Option<u32>,
    /// Timed round trips per size of a full sweep's latency run, whose
    /// halves are published as percentiles (0: none). Default 200: p99 is
    /// the second largest sample, p99.9 the largest.
    #[serde(default = "default_latency_samples")]
    pub latency_samples: u32,
    /// CPU the probe thread and the responders are pinned to (none: not
    /// pinned). A node drives or serves, never both, so they share it.
    #[serde(default)]
    pub probe_cpu: Option<usize>,
    /// Run the probe thread SCHED_FIFO at this priority (needs CAP_SYS_NICE).
    #[serde(default)]
    pub sched_fifo_priority: Option<i32>,
    /// Lock all memory (mlockall); needs CAP_IPC_LOCK or a large RLIMIT_MEMLOCK.
    #[serde(default = "yes")]
    pub lock_memory: bool,
    /// The clock probes are timed with: "auto" (default: the TSC when the
    /// CPU flags it invariant, else CLOCK_MONOTONIC_RAW), "tsc" (also a TSC
    /// the CPU does not flag, as virtual machines often hide the flag, once
    /// two calibrations agree; the daemon does not start otherwise) or
    /// "monotonic-raw". What `ngctl --clock` takes.
    #[serde(default)]
    pub clock: crate::clock::ClockChoice,
    /// A LogfP fan-out round every this many seconds (0: never): each
    /// node drives one in turn, over the other members of its chunk.
    #[serde(default = "default_fanout_interval")]
    pub fanout_interval_s: f64,
    /// This node's RDMA device, for peers probed over `rdma` or `msg`.
    #[serde(default)]
    pub verbs: Option<VerbsConfig>,
    /// The cluster's members as a Slurm hostlist expression, e.g.
    /// "node[001-128,130]" (this node among them).
    #[serde(default, rename = "peers")]
    pub hostlist: Option<String>,
    /// A file of members: one hostlist expression or host per line, `#`
    /// comments.
    #[serde(default)]
    pub peers_file: Option<PathBuf>,
    /// Slurm topology.conf: members grouped by leaf switch (coverage
    /// classes).
    #[serde(default)]
    pub topology_file: Option<PathBuf>,
    /// Control port of members named by `peers` or `peers_file` (default:
    /// the port of `listen`).
    #[serde(default)]
    pub peer_port: Option<u16>,
    /// Local interface toward listed members, for raw Ethernet.
    #[serde(default)]
    pub interface: Option<String>,
    /// Transports toward listed members (default: udp, and raw where
    /// `interface` is set).
    #[serde(default)]
    pub transports: Option<Vec<String>>,
    /// Deadline of one name resolution, seconds; a name that does not
    /// resolve is logged once and tried again every `resolve_retry_s`.
    #[serde(default = "default_resolve_timeout")]
    pub resolve_timeout_s: f64,
    #[serde(default = "default_resolve_retry")]
    pub resolve_retry_s: f64,
    /// The rounds of the cluster schedule (every node the same).
    #[serde(default)]
    pub schedule: ScheduleSection,
    /// `[contention]`: the bandwidth-sharing (conflict) probe.
    #[serde(default)]
    pub contention: ContentionConfig,
    #[serde(default, rename = "peer")]
    pub peers: Vec<PeerConfig>,
    /// Serve the Prometheus text exposition at `GET /metrics` on this
    /// address (default: off). Unauthenticated and read-only: name an
    /// address the monitoring network reaches, not every interface.
    #[serde(default)]
    pub metrics_listen: Option<SocketAddr>,
    /// Write the same exposition to this file (its name ends in `.prom`)
    /// after every publication and at least every 30 s, replaced
    /// atomically, for node_exporter's textfile collector (default: off).
    /// Its directory must exist, owned by the daemon's user or root and
    /// writable by nobody else (or sticky).
    #[serde(default)]
    pub metrics_textfile: Option<PathBuf>,
    /// Tests of the systemd watchdog only (`netgauged`'s hidden flag
    /// `--test-stall-publisher-after-s`, never read from the file): the
    /// publisher stalls this many seconds after the start.
    #[serde(skip)]
    pub test_stall_publisher_after_s: Option<f64>,
}

/// `[schedule]`: the rounds every node derives alone. `round_s`,
/// `coverage_pass_s`, `seed`, `fanout_interval_s` (top level) and
/// `fanout_max_peers`, `mesh_pairs_per_round` must be the same on every
/// node.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleSection {
    /// Length of a round: at most one session per node per round.
    pub round_s: f64,
    /// One pass over every coverage class in about this time.
    pub coverage_pass_s: f64,
    /// Token bucket capacity in seconds of budget.
    pub burst_s: f64,
    /// A full sweep standing for a class, or of a pair, is repeated when
    /// older than this.
    pub full_sweep_max_age_s: f64,
    /// Backoff after an unreachable partner, doubling from the minimum.
    pub backoff_min_s: f64,
    pub backoff_max_s: f64,
    /// Clock difference between nodes tolerated at a round's edges.
    pub skew_s: f64,
    /// Seed of the pairing, shared by the cluster.
    pub seed: u64,
    /// Peers of one fan-out at most.
    pub fanout_max_peers: u32,
    /// Mesh sessions at once over the whole cluster, at most (0: no cap).
    pub mesh_pairs_per_round: u32,
}

impl Default for ScheduleSection {
    fn default() -> Self {
        let d = ScheduleConfig::default();
        ScheduleSection {
            round_s: d.round_s,
            coverage_pass_s: d.coverage_pass_s,
            burst_s: d.burst_s,
            full_sweep_max_age_s: d.full_sweep_max_age_s,
            backoff_min_s: d.backoff_min_s,
            backoff_max_s: d.backoff_max_s,
            skew_s: d.skew_s,
            seed: d.seed,
            fanout_max_peers: d.fanout_max_peers,
            mesh_pairs_per_round: d.mesh_pairs_per_round,
        }
    }
}

/// `[verbs]`: the device the `rdma` and `msg` transports use.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VerbsConfig {
    /// RDMA device name (`ibv_devices`), e.g. "mlx5_0" or "rxe0".
    pub device: String,
    /// 1-based port of the device. Default 1.
    #[serde(default = "default_port")]
    pub port: u8,
    /// GID index (RoCE). Default: the first RoCE v2 GID, IPv4-mapped
    /// preferred; InfiniBand uses the LID.
    #[serde(default)]
    pub gid_index: Option<u32>,
    /// msg: largest eager message; larger ones use the rendezvous.
    #[serde(default = "default_eager_max")]
    pub eager_max_bytes: u64,
    /// rdma: largest inline write. Default: 0 on software devices (rxe,
    /// siw), 256 otherwise.
    #[serde(default)]
    pub inline_max_bytes: Option<u32>,
}

/// `[contention]`: how often and how thoroughly this node measures the
/// bandwidth sharing of its own link (k flows out, in, both; over the
/// transports the LogfP fan-out runs on, with up to 8 known peers).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ContentionConfig {
    /// Seconds between conflict probes (0: never).
    pub interval_s: f64,
    /// Message size of every flow (at most `max_size_bytes`).
    pub size_bytes: u64,
    /// Messages per flow in a burst round.
    pub burst: u32,
    /// Repetitions of every (scheme, k).
    pub rounds: u32,
    /// Largest k (at most 8, and the peers available).
    pub max_k: u32,
}

impl Default for ContentionConfig {
    fn default() -> Self {
        ContentionConfig {
            interval_s: 6.0 * 3600.0,
            size_bytes: 64 * 1024,
            burst: 16,
            rounds: 12,
            max_k: 8,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub name: String,
    /// The peer's control plane, ADDR:PORT.
    pub address: SocketAddr,
    /// Local interface toward this peer, for raw Ethernet.
    #[serde(default)]
    pub interface: Option<String>,
    /// Transports to probe, by name; default: udp, and raw where an
    /// interface is given.
    #[serde(default)]
    pub transports: Option<Vec<String>>,
}

impl PeerConfig {
    /// Does the configuration ask for `kind` toward this peer?
    pub fn wants(&self, kind: Kind) -> bool {
        wants_transport(self.transports.as_deref(), self.interface.is_some(), kind)
    }
}

/// Whether a peer's `transports` ask for `kind`: by name, or without a
/// list, the fallback and, where the peer has an interface, raw Ethernet.
pub(in crate::daemon) fn wants_transport(
    transports: Option<&[String]>,
    has_interface: bool,
    kind: Kind,
) -> bool {
    match transports {
        Some(list) => list.iter().any(|t| t == kind.name()),
        None => {
            kind == super::FALLBACK
                || (kind.descriptor().endpoint == PeerEndpoint::MacOnLink && has_interface)
        }
    }
}

/// The control plane's port when `listen` is not given.
pub const DEFAULT_CONTROL_PORT: u16 = 7470;
/// Default runtime directory (systemd `RuntimeDirectory=netgauged`).
pub const DEFAULT_RUNTIME_DIR: &str = "/run/netgauged";
/// Default state directory (systemd `StateDirectory=netgauged`).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/netgauged";
/// File name of the segment in the runtime directory.
pub const SEGMENT_NAME: &str = "segment";

/// Bounds of the configuration values (each one checked in `validate`).
pub mod limits {
    /// Peers of one daemon: each takes up to 4 entries of a segment of at
    /// most 65 536.
    pub const MAX_PEERS: usize = 8192;
    /// Largest message size of a full sweep: 64 MiB.
    pub const MAX_SIZE_BYTES: u64 = 64 << 20;
    /// Most repetitions per size.
    pub const MAX_REPS: u32 = 10_000;
    /// Most round trips per size of the latency run.
    pub const MAX_LATENCY_SAMPLES: u32 = 100_000;
    /// Longest re-check interval: a day.
    pub const MAX_RECHECK_INTERVAL_S: f64 = 86_400.0;
    /// Most history records per (peer, transport).
    pub const MAX_HISTORY_RECORDS: usize = 100_000;
    /// Longest history: ten years.
    pub const MAX_HISTORY_AGE_S: f64 = 3650.0 * 86_400.0;
    /// History file size bounds: 64 KiB to 1 GiB.
    pub const MIN_HISTORY_BYTES: u64 = 64 << 10;
    pub const MAX_HISTORY_BYTES: u64 = 1 << 30;
    /// Longest fan-out interval: a week.
    pub const MAX_FANOUT_INTERVAL_S: f64 = 604_800.0;
    /// Largest traffic budget: 100 GB/s.
    pub const MAX_BUDGET_BYTES_PER_S: u64 = 100_000_000_000;
    /// Largest inline write and eager message of the verbs transports.
    pub const MAX_INLINE_BYTES: u32 = 1 << 20;
    pub const MAX_EAGER_BYTES: u64 = 1 << 30;
}

fn default_udp_port() -> u16 {
    7471
}
fn default_budget() -> u64 {
    // 4 MB/s: 0.13 % of a 25 Gbit/s link, and enough that a new peer's
    // first sweeps over udp and raw Ethernet (up to about 170 MB each on a
    // 1 Gbit/s link, `sweep::cost::plan`) both publish within a minute
    // (tests/sweep_cost.rs).
    4_000_000
}
fn default_interval() -> f64 {
    ScheduleConfig::default().pair_recheck_s
}
fn default_history_records() -> usize {
    // Several weeks of a pair re-checked hourly, or a day at a 5 min
    // re-check interval.
    512
}
fn default_history_age() -> f64 {
    // 90 days.
    90.0 * 86_400.0
}
fn default_history_bytes() -> u64 {
    // 64 MiB: 4096 peers over two transports keep their last ~30 records
    // each (a record takes about 250 bytes of JSON); a node with few
    // peers is bounded by the record count instead.
    64 << 20
}
fn default_resolve_timeout() -> f64 {
    2.0
}
fn default_resolve_retry() -> f64 {
    60.0
}
fn default_max_size() -> u64 {
    128 * 1024
}
fn default_latency_samples() -> u32 {
    200
}
fn default_fanout_interval() -> f64 {
    ScheduleConfig::default().fanout_interval_s
}
fn default_port() -> u8 {
    1
}
fn default_eager_max() -> u64 {
    16 * 1024
}
fn yes() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let cfg: Config = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The cluster schedule's settings.
    pub fn schedule_config(&self) -> ScheduleConfig {
        let s = &self.schedule;
        ScheduleConfig {
            round_s: s.round_s,
            coverage_pass_s: s.coverage_pass_s,
            budget_bytes_per_s: self.budget_bytes_per_s,
            burst_s: s.burst_s,
            pair_recheck_s: self.recheck_interval_s,
            full_sweep_max_age_s: s.full_sweep_max_age_s,
            backoff_min_s: s.backoff_min_s,
            backoff_max_s: s.backoff_max_s,
            skew_s: s.skew_s,
            seed: s.seed,
            fanout_interval_s: self.fanout_interval_s,
            fanout_max_peers: s.fanout_max_peers,
            mesh_pairs_per_round: s.mesh_pairs_per_round,
        }
    }

    /// The control port of listed members.
    pub fn peer_port(&self) -> u16 {
        self.peer_port
            .unwrap_or(self.listen.map_or(DEFAULT_CONTROL_PORT, |a| a.port()))
    }

    /// This node's name: the configured one or the host name.
    pub fn node_name(&self) -> String {
        self.node.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "localhost".into())
        })
    }
}

mod locate;
mod validate;

#[cfg(test)]
mod tests;
