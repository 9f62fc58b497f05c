//! ngctl's flags per subcommand and the conversions into the option
//! structs of `netgauged::ops` (beside ngctl.rs, which keeps the top-level
//! definition and the dispatch). Help lines name their unit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use netgauge::select::{self, Collective};
use netgauged::clock::ClockChoice;
use netgauged::export::{self, Format};
use netgauged::ops::{self, OpsError, ProbeArgs, RawArgs, Schedule, ServeArgs, VerbsArgs};
use netgauged::predict;
use netgauged::transport::raw_eth::RxMode;
use netgauged::transport::Kind;

/// `--transport`: the names of the transport list, with its summaries.
pub fn kind_parser() -> impl TypedValueParser<Value = Kind> {
    let value = |k: &Kind| PossibleValue::new(k.name()).help(k.descriptor().summary);
    PossibleValuesParser::new(Kind::ALL.iter().map(value)).try_map(|s| s.parse::<Kind>())
}

pub fn clock_parser() -> impl TypedValueParser<Value = ClockChoice> {
    PossibleValuesParser::new(ClockChoice::ALL.map(ClockChoice::name)).try_map(|s| s.parse())
}

pub fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(Format::ALL.map(Format::name)).try_map(|s| s.parse::<Format>())
}

/// Options of `--transport raw`.
#[derive(clap::Args)]
pub struct RawFlags {
    /// Network interface for `--transport raw`.
    #[arg(long)]
    pub interface: Option<String>,
    /// Receive path of `--transport raw`: ring (PACKET_MMAP) or recv.
    #[arg(long, default_value = "ring")]
    pub raw_rx: RxMode,
}

/// Flags of the verbs transports (rdma, msg).
#[derive(clap::Args, Clone, Debug)]
pub struct VerbsFlags {
    /// RDMA device (e.g. rxe0, mlx5_0).
    #[arg(long)]
    pub device: Option<String>,
    /// GID index (RoCE); default: the first RoCE v2 GID (IPv4-mapped preferred).
    #[arg(long)]
    pub gid_index: Option<u32>,
    /// msg: largest eager message; larger ones use the rendezvous.
    #[arg(long, default_value_t = 16 * 1024)]
    pub eager_max: usize,
    /// rdma: largest inline write. Default: 0 on software devices (rxe, siw:
    /// their inline path is a copy in the kernel, and perftest turns it off
    /// there too), 256 B otherwise.
    #[arg(long)]
    pub inline_max: Option<u32>,
}

/// A library option struct from parsed flags: the fields of the same name,
/// then the others.
#[macro_export]
macro_rules! options {
    ($f:ident => $T:ident { $($same:ident),* ; $($field:ident: $e:expr),* $(,)? }) => {
        $T { $($same: $f.$same,)* $($field: $e,)* }
    };
}

impl From<RawFlags> for RawArgs {
    fn from(r: RawFlags) -> RawArgs {
        options!(r => RawArgs { interface; rx: r.raw_rx })
    }
}

impl From<VerbsFlags> for VerbsArgs {
    fn from(v: VerbsFlags) -> VerbsArgs {
        options!(v => VerbsArgs { device, gid_index; eager_max_bytes: v.eager_max, inline_max_bytes: v.inline_max })
    }
}

#[derive(clap::Args)]
pub struct SegmentFlags {
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    pub shm: Option<String>,
}

#[derive(clap::Args)]
pub struct HistoryFlags {
    /// The peer (as the daemon names it; a coverage class as @name).
    pub peer: String,
    /// Only this transport (udp, raw, rdma, msg); default every one.
    #[arg(long)]
    pub transport: Option<String>,
    /// Only records of this last while (90s, 15m, 2h, 1d).
    #[arg(long, value_parser = netgauged::ops::parse_duration)]
    pub since: Option<std::time::Duration>,
    /// Segment file whose daemon's history is read (default
    /// $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    pub shm: Option<String>,
    /// The history file itself, instead of the one the daemon's status
    /// file names.
    #[arg(long)]
    pub file: Option<std::path::PathBuf>,
}

#[derive(clap::Args)]
pub struct FitFlags {
    /// The saved `ngctl probe --json --raw` output ("-": stdin).
    pub file: String,
    /// Write the re-fitted entry into the shared-memory segment.
    #[arg(long)]
    pub publish: bool,
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    pub shm: Option<String>,
    /// Peer name of the published entry.
    #[arg(long, default_value = "refit")]
    pub peer: String,
    /// Transport name of the published entry.
    #[arg(long, default_value = "mpi")]
    pub transport: String,
}

#[derive(clap::Args)]
pub struct ServeFlags {
    /// Transport to answer.
    #[arg(long, value_parser = kind_parser())]
    pub transport: Kind,
    /// Address and port to listen on.
    #[arg(long, default_value = "0.0.0.0:7470")]
    pub listen: SocketAddr,
    /// Exit after this many seconds without a message (0: never).
    #[arg(long, default_value_t = 0)]
    pub idle_exit_s: u64,
    #[command(flatten)]
    pub verbs: VerbsFlags,
    /// rdma/msg: largest message accepted, bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_size: u64,
    #[command(flatten)]
    pub raw: RawFlags,
    #[arg(long, help = "Pin the responder to a CPU (off the prober's)")]
    pub cpu: Option<usize>,
}

impl ServeFlags {
    pub fn args(self, choice: ClockChoice) -> ServeArgs {
        let f = self;
        options!(f => ServeArgs { listen, cpu; kind: f.transport, clock: choice, verbs: f.verbs.into(),
            idle_exit: (f.idle_exit_s > 0).then(|| Duration::from_secs(f.idle_exit_s)),
            max_size_bytes: f.max_size, raw: f.raw.into() })
    }
}

#[derive(clap::Args)]
pub struct ProbeFlags {
    /// Transport to measure.
    #[arg(long, value_parser = kind_parser())]
    pub transport: Kind,
    /// HOST:PORT of an `ngctl serve` (udp); rdma/msg: one or several, comma-separated.
    #[arg(long)]
    pub peer: Option<String>,
    /// MAC of the `ngctl serve --transport raw` interface (raw).
    #[arg(long)]
    pub peer_mac: Option<String>,
    #[command(flatten)]
    pub raw_args: RawFlags,
    /// Ground truth of the sim transport (ns, ns/B, bytes), e.g.
    /// L=1100,o=300,g=450,G=0.08,S=16384
    #[arg(long)]
    pub model: Option<String>,
    /// Largest message size, bytes.
    #[arg(long, default_value_t = 128 * 1024)]
    pub max_size: u64,
    /// Smallest message size, bytes (at most --max-size).
    #[arg(long, default_value_t = 1)]
    pub min_size: u64,
    /// LogfP 1:P−P:1 up to this many peers (sim: default 16; rdma/msg: P queue pairs
    /// round robin over the servers of --peer, default one per server; not udp/raw).
    #[arg(long)]
    pub fanout_peers: Option<usize>,
    /// Deadline of every wait for an answer, in ms.
    #[arg(long, default_value_t = 250)]
    pub timeout_ms: u64,
    /// Sizes and repetitions: adaptive or netgauge (Netgauge's fixed schedule).
    #[arg(long, default_value = "adaptive")]
    pub schedule: String,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 200)]
    pub resamples: usize,
    /// Include the raw samples in the JSON.
    #[arg(long)]
    pub raw: bool,
    /// Write the result into the shared-memory segment.
    #[arg(long)]
    pub publish: bool,
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    pub shm: Option<String>,
    #[command(flatten)]
    pub verbs: VerbsFlags,
    /// Most repetitions per size (fewer: a quicker, rougher sweep).
    #[arg(long)]
    pub max_reps: Option<u32>,
    /// Fewest repetitions per size, also for large sizes that the byte budget would cut
    /// (more: a steadier fit where traffic is free, e.g. MPI over shared memory).
    #[arg(long)]
    pub min_reps: Option<u32>,
    #[arg(long, help = "Pin the probe to a CPU (off the responder's)")]
    pub cpu: Option<usize>,
    /// Round trips per size of the latency run after the sweep (1 B and up
    /// to three more sizes up to 64 B), for the half round trip's
    /// percentiles; 0: none.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub latency_samples: u32,
    /// Also show the latency run's histogram (log-spaced bins).
    #[arg(long)]
    pub histogram: bool,
}

impl ProbeFlags {
    pub fn args(self, choice: ClockChoice) -> Result<ProbeArgs> {
        let f = self;
        Ok(
            options!(f => ProbeArgs { peer, peer_mac, model, fanout_peers, resamples, max_reps, min_reps, cpu, latency_samples, histogram;
            kind: f.transport, clock: choice, raw: f.raw_args.into(),
            max_size_bytes: f.max_size, min_size_bytes: f.min_size,
            timeout: Duration::from_millis(f.timeout_ms), schedule: f.schedule.parse::<Schedule>()?,
            verbs: f.verbs.into(), publish: f.publish.then(|| ops::shm_path(f.shm.as_deref())) }),
        )
    }
}

/// Which segment entry a command reads.
#[derive(clap::Args, Clone, Debug)]
pub struct EntryFlags {
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    pub shm: Option<PathBuf>,
    /// Peer of the segment entry (default: the only entry; else they are listed).
    #[arg(long)]
    pub peer: Option<String>,
    /// Transport of the segment entry (default: the only entry's).
    #[arg(long)]
    pub transport: Option<String>,
}

impl EntryFlags {
    /// The entry these flags name.
    pub fn load(&self) -> Result<netgauge::EntryData, OpsError> {
        predict::load_entry(
            self.shm.as_deref(),
            self.peer.as_deref(),
            self.transport.as_deref(),
        )
    }
}

#[derive(clap::Args, Clone, Debug)]
pub struct PredictFlags {
    /// The collective: bcast, reduce, allreduce, allgather, alltoall, barrier.
    pub collective: Collective,
    /// Number of processes P.
    #[arg(long)]
    pub ranks: usize,
    /// Message size, bytes (not for barrier).
    #[arg(long, default_value_t = 0)]
    pub bytes: u64,
    #[command(flatten)]
    pub entry: EntryFlags,
    /// Cost of combining one byte in a reduction, ns per byte.
    #[arg(long, default_value_t = select::DEFAULT_GAMMA_NS_PER_BYTE)]
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: at least one core per rank). With fewer cores
    /// than ranks, steps in which more ranks move bytes than there are cores take
    /// proportionally longer per byte.
    #[arg(long, default_value_t = 0)]
    pub cores: usize,
}

#[derive(clap::Args, Clone, Debug)]
pub struct ExportFlags {
    /// Format: loggopsim, netgauge (loggp.out), smpi (SimGrid platform), ompi-rules, mpich-json.
    #[arg(long, value_parser = format_parser())]
    pub format: Format,
    #[command(flatten)]
    pub entry: EntryFlags,
    /// Communicator sizes of the ompi-rules / mpich-json tables (at most
    /// 1024; the largest size's rules serve larger communicators).
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64,128")]
    pub comm_sizes: Vec<u32>,
    /// Largest message size the rule tables consider, bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub max_bytes: u64,
    /// Cost of combining one byte in a reduction, ns per byte.
    #[arg(long, default_value_t = select::DEFAULT_GAMMA_NS_PER_BYTE)]
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: one per rank), as for `ngctl predict`.
    #[arg(long, default_value_t = 0)]
    pub cores: usize,
    /// ompi-rules / mpich-json: the lead over the library's own choice ours
    /// need, a fraction (0.1: 10 % faster).
    #[arg(long, default_value_t = 0.1)]
    pub margin: f64,
    /// LogGOPSim time unit: auto (the first of ns, ps, 100fs, 10fs, fs, 100ps,
    /// 10ps in which nothing rounds away), or one of them.
    #[arg(long, default_value = "auto")]
    pub loggopsim_unit: export::loggopsim::Unit,
    /// LogGOPSim: only the flags of the set for this message size, bytes.
    #[arg(long)]
    pub bytes: Option<u64>,
    /// SMPI: hosts of the platform's cluster (default: the largest of
    /// --comm-sizes).
    #[arg(long)]
    pub hosts: Option<u32>,
    /// ompi-rules / mpich-json: a libngcoll NETGAUGE_COLL=log output (the
    /// classes its trials measured faster with the library's own are left
    /// to it, those its plan gave to it name none of ours), or, for
    /// ompi-rules, a verification run of the file (bench/ngcoll_bench.c
    /// --rules FILE --rule-sizes: the sizes whose rule lost are left to the
    /// fixed decision). May repeat.
    #[arg(long)]
    pub trials: Vec<std::path::PathBuf>,
}
