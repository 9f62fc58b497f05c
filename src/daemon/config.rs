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
use crate::transport::kind::{known, PeerEndpoint};
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
    /// Control plane address (TCP). Default 0.0.0.0:7470.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// UDP port the probe responder answers on. Default 7471.
    #[serde(default = "default_udp_port")]
    pub udp_port: u16,
    /// The segment. Default /dev/shm/netgauged.
    #[serde(default = "default_shm")]
    pub shm: PathBuf,
    /// Pre-shared cluster key (≥ 32 bytes), readable only by the daemon's user.
    pub key_file: PathBuf,
    /// Last good parameters, written by atomic rename, loaded at start.
    #[serde(default = "default_state")]
    pub state_file: PathBuf,
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
    #[serde(default, rename = "peer")]
    pub peers: Vec<PeerConfig>,
}

/// `[schedule]`: the rounds every node derives alone. `round_s`,
/// `coverage_pass_s`, `seed`, `fanout_interval_s` (top level) and
/// `fanout_max_peers` must be the same on every node.
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
        match &self.transports {
            Some(list) => list.iter().any(|t| t == kind.name()),
            None => {
                kind == super::FALLBACK
                    || (kind.descriptor().endpoint == PeerEndpoint::MacOnLink
                        && self.interface.is_some())
            }
        }
    }
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 7470))
}
fn default_udp_port() -> u16 {
    7471
}
fn default_shm() -> PathBuf {
    PathBuf::from(netgauge::DEFAULT_PATH)
}
fn default_state() -> PathBuf {
    PathBuf::from("/var/lib/netgauged/state.json")
}
fn default_budget() -> u64 {
    // 2 MB/s: well under 0.1 % of a 25 Gbit/s link.
    2_000_000
}
fn default_interval() -> f64 {
    ScheduleConfig::default().pair_recheck_s
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

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.budget_bytes_per_s == 0 {
            return bad("budget_bytes_per_s must be positive".into());
        }
        if self.recheck_interval_s.is_nan() || self.recheck_interval_s < 0.0 {
            return bad("recheck_interval_s must not be negative".into());
        }
        if !(self.resolve_timeout_s > 0.0 && self.resolve_retry_s > 0.0) {
            return bad("resolve_timeout_s and resolve_retry_s must be positive".into());
        }
        self.schedule_config()
            .validate()
            .or_else(|e| bad(e.to_string()))?;
        if self.hostlist.is_none() && self.peers_file.is_none() && self.peers.is_empty() {
            return bad(
                "no peers: set peers = \"HOSTLIST\", peers_file or [[peer]] entries".into(),
            );
        }
        for t in self.transports.iter().flatten() {
            if !t.parse::<Kind>().is_ok_and(|k| k.descriptor().daemon) {
                return bad(format!(
                    "transports: unknown transport {t:?} (known: {})",
                    known(|k| k.descriptor().daemon)
                ));
            }
        }
        if self.node.as_deref() == Some(OPERATOR_NAME) {
            return bad(format!("node: {OPERATOR_NAME:?} is the operator's name"));
        }
        if self.max_size_bytes == 0 {
            return bad("max_size_bytes must be positive".into());
        }
        if self.max_reps == Some(0) {
            return bad("max_reps must be positive".into());
        }
        if let Some(v) = &self.verbs {
            if v.device.is_empty() || v.port == 0 {
                return bad("[verbs]: device must be named and port is 1-based".into());
            }
            if v.eager_max_bytes == 0 || v.eager_max_bytes > u64::from(u32::MAX) {
                return bad("[verbs]: eager_max_bytes out of range".into());
            }
        }
        let mut names = std::collections::HashSet::new();
        for p in &self.peers {
            if p.name.is_empty() || p.name.len() > netgauge::layout::PEER_MAX_BYTES {
                return bad(format!("peer name {:?}: 1 to 63 bytes", p.name));
            }
            if !names.insert(&p.name) {
                return bad(format!("peer {:?} is listed twice", p.name));
            }
            for t in p.transports.iter().flatten() {
                if !t.parse::<Kind>().is_ok_and(|k| k.descriptor().daemon) {
                    return bad(format!(
                        "peer {}: unknown transport {t:?} (known: {})",
                        p.name,
                        known(|k| k.descriptor().daemon)
                    ));
                }
            }
        }
        Ok(())
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
        }
    }

    /// The control port of listed members.
    pub fn peer_port(&self) -> u16 {
        self.peer_port.unwrap_or(self.listen.port())
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

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../systemd/netgauged.toml");

    #[test]
    fn the_sample_config_parses_and_validates() {
        let c: Config = toml::from_str(SAMPLE).expect("sample parses");
        c.validate().expect("sample is valid");
        assert_eq!(c.peers.len(), 2);
        assert_eq!(c.clock, crate::clock::ClockChoice::Auto);
        assert_eq!(
            c.peers[0].transports.as_deref(),
            Some(&["raw".to_string(), "udp".to_string()][..])
        );
    }

    #[test]
    fn mistakes_are_named() {
        let base = "key_file = \"/k\"\n";
        let e = toml::from_str::<Config>(&format!("{base}bogus = 1\n")).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let c: Config = toml::from_str(&format!(
            "{base}[[peer]]\nname = \"a\"\naddress = \"10.0.0.1:7470\"\ntransports = [\"tcp\"]\n"
        ))
        .unwrap();
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("unknown transport \"tcp\""), "{e}");
        let c: Config = toml::from_str(&format!(
            "{base}[[peer]]\nname = \"a\"\naddress = \"10.0.0.1:7470\"\n[[peer]]\nname = \"a\"\naddress = \"10.0.0.2:7470\"\n"
        ))
        .unwrap();
        assert!(c.validate().unwrap_err().to_string().contains("twice"));
        let c: Config = toml::from_str(&format!("{base}budget_bytes_per_s = 0\n")).unwrap();
        assert!(c.validate().is_err());
        let e = toml::from_str::<Config>(&format!("{base}[verbs]\ndevice = \"rxe0\"\ngid = 1\n"))
            .unwrap_err();
        assert!(e.to_string().contains("gid"), "{e}");
        let c: Config =
            toml::from_str(&format!("{base}[verbs]\ndevice = \"rxe0\"\nport = 0\n")).unwrap();
        assert!(c.validate().is_err());
        let e = toml::from_str::<Config>(&format!("{base}clock = \"hpet\"\n")).unwrap_err();
        assert!(e.to_string().contains("hpet"), "{e}");
        let c: Config = toml::from_str(&format!("{base}clock = \"monotonic-raw\"\n")).unwrap();
        assert_eq!(c.clock, crate::clock::ClockChoice::MonotonicRaw);
    }

    #[test]
    fn verbs_section() {
        let c: Config = toml::from_str(
            "key_file = \"/k\"\n[verbs]\ndevice = \"rxe0\"\ngid_index = 1\n[[peer]]\nname = \"b\"\naddress = \"10.0.0.2:7470\"\ntransports = [\"rdma\", \"msg\"]\n",
        )
        .unwrap();
        c.validate().unwrap();
        let v = c.verbs.unwrap();
        assert_eq!(
            (v.device.as_str(), v.port, v.gid_index, v.eager_max_bytes),
            ("rxe0", 1, Some(1), 16384)
        );
    }
}
