//! ngctl: the operator's tool. Thin: flags into the option structs of
//! `netgauged::ops`, the operation, and the strings `netgauged::report`
//! makes of its result, printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Parser, Subcommand};
use netgauge::select::{self, Collective};
use netgauged::clock::ClockChoice;
use netgauged::export::{self, ExportArgs, Format};
use netgauged::ops::{self, FitArgs, ProbeArgs, Schedule, ServeArgs, VerbsArgs};
use netgauged::predict::{self, PredictArgs};
use netgauged::report;
use netgauged::transport::raw_eth::RxMode;
use netgauged::transport::Kind;

#[path = "ngctl/contention.rs"]
mod contention;
#[path = "ngctl/progress.rs"]
mod progress;
use progress::{note, progress_bar};

#[derive(Parser)]
#[command(name = "ngctl", version, about = "netgauged operator tool")]
struct Cli {
    /// Clock to time with: auto (the TSC when flagged invariant), tsc, monotonic-raw.
    #[arg(long, global = true, default_value = "auto", value_parser = clock_parser())]
    clock: ClockChoice,
    #[command(subcommand)]
    cmd: Cmd,
}

/// `--transport`: the names of the transport list, with its summaries.
fn kind_parser() -> impl TypedValueParser<Value = Kind> {
    let value = |k: &Kind| PossibleValue::new(k.name()).help(k.descriptor().summary);
    PossibleValuesParser::new(Kind::ALL.iter().map(value)).try_map(|s| s.parse::<Kind>())
}

fn clock_parser() -> impl TypedValueParser<Value = ClockChoice> {
    PossibleValuesParser::new(ClockChoice::ALL.map(ClockChoice::name)).try_map(|s| s.parse())
}

fn format_parser() -> impl TypedValueParser<Value = Format> {
    PossibleValuesParser::new(Format::ALL.map(Format::name)).try_map(|s| s.parse::<Format>())
}

/// Options of `--transport raw`.
#[derive(clap::Args)]
struct RawArgs {
    /// Network interface for `--transport raw`.
    #[arg(long)]
    interface: Option<String>,
    /// Receive path of `--transport raw`: ring (PACKET_MMAP) or recv.
    #[arg(long, default_value = "ring")]
    raw_rx: RxMode,
}

/// Flags of the verbs transports (rdma, msg).
#[derive(clap::Args, Clone, Debug)]
struct VerbsFlags {
    /// RDMA device (e.g. rxe0, mlx5_0).
    #[arg(long)]
    device: Option<String>,
    /// GID index (RoCE); default: the first RoCE v2 GID (IPv4-mapped preferred).
    #[arg(long)]
    gid_index: Option<u32>,
    /// msg: largest eager message; larger ones use the rendezvous.
    #[arg(long, default_value_t = 16 * 1024)]
    eager_max: usize,
    /// rdma: largest inline write. Default: 0 on software devices (rxe, siw:
    /// their inline path is a copy in the kernel, and perftest turns it off
    /// there too), 256 B otherwise.
    #[arg(long)]
    inline_max: Option<u32>,
}

/// A library option struct from parsed flags: the fields of the same name,
/// then the others.
macro_rules! options {
    ($f:ident => $T:ident { $($same:ident),* ; $($field:ident: $e:expr),* $(,)? }) => {
        $T { $($same: $f.$same,)* $($field: $e,)* }
    };
}

impl From<VerbsFlags> for VerbsArgs {
    fn from(v: VerbsFlags) -> VerbsArgs {
        options!(v => VerbsArgs { device, gid_index; eager_max_bytes: v.eager_max, inline_max_bytes: v.inline_max })
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Show the probe clock: source, rate, read cost, agreement with the kernel.
    Clock {
        #[arg(long)]
        json: bool,
        /// Also calibrate for 2 s against CLOCK_MONOTONIC_RAW.
        #[arg(long)]
        long: bool,
    },
    /// Answer probes (the mirror server).
    Serve(ServeFlags),
    /// Re-fit the raw samples of a saved `ngctl probe --json --raw` with this estimator.
    Fit(FitFlags),
    /// Measure once, like Netgauge, without the daemon.
    Probe(ProbeFlags),
    /// Is the daemon alive, and what is it doing?
    Status(SegmentFlags),
    /// Predict collective algorithms from the segment and choose the fastest.
    Predict(PredictFlags),
    /// Export the segment's parameters for simulators and MPI libraries.
    Export(ExportFlags),
    /// Show every entry of the shared-memory segment.
    Dump(SegmentFlags),
    /// Bandwidth sharing once: penalties of k flows out, in and both at once.
    Contention(contention::ContentionFlags),
    /// Effective bisection bandwidth of the daemons' nodes (random matchings).
    Ebb(contention::EbbFlags),
    /// CPU overlap once: how much of a transfer the CPU can compute (Bell et al.).
    Overlap(contention::OverlapFlags),
}

#[derive(clap::Args)]
struct SegmentFlags {
    #[arg(long)]
    shm: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct FitFlags {
    /// The saved `ngctl probe --json --raw` output ("-": stdin).
    file: String,
    #[arg(long)]
    json: bool,
    /// Write the re-fitted entry into the shared-memory segment.
    #[arg(long)]
    publish: bool,
    /// Segment path (default /run/netgauged/segment, or $NETGAUGE_SEGMENT).
    #[arg(long)]
    shm: Option<String>,
    /// Peer and transport names of the published entry.
    #[arg(long, default_value = "refit")]
    peer: String,
    #[arg(long, default_value = "mpi")]
    transport: String,
}

#[derive(clap::Args)]
struct ServeFlags {
    #[arg(long, value_parser = kind_parser())]
    transport: Kind,
    #[arg(long, default_value = "0.0.0.0:7470")]
    listen: SocketAddr,
    /// Exit after this many seconds without a message (0: never).
    #[arg(long, default_value_t = 0)]
    idle_exit_s: u64,
    #[command(flatten)]
    verbs: VerbsFlags,
    /// rdma/msg: largest message accepted.
    #[arg(long, default_value_t = 1 << 20)]
    max_size: u64,
    #[command(flatten)]
    raw: RawArgs,
    #[arg(long, help = "Pin the responder to a CPU (off the prober's)")]
    cpu: Option<usize>,
}

impl ServeFlags {
    fn args(self, choice: ClockChoice) -> ServeArgs {
        let f = self;
        options!(f => ServeArgs { listen, cpu; kind: f.transport, clock: choice, verbs: f.verbs.into(),
            idle_exit: (f.idle_exit_s > 0).then(|| Duration::from_secs(f.idle_exit_s)),
            max_size_bytes: f.max_size, interface: f.raw.interface, raw_rx: f.raw.raw_rx })
    }
}

#[derive(clap::Args)]
struct ProbeFlags {
    #[arg(long, value_parser = kind_parser())]
    transport: Kind,
    /// HOST:PORT of an `ngctl serve` (udp); rdma/msg: one or several, comma-separated.
    #[arg(long)]
    peer: Option<String>,
    /// MAC of the `ngctl serve --transport raw` interface (raw).
    #[arg(long)]
    peer_mac: Option<String>,
    #[command(flatten)]
    raw_args: RawArgs,
    /// Ground truth of the sim transport, e.g. L=1100,o=300,g=450,G=0.08,S=16384
    #[arg(long)]
    model: Option<String>,
    #[arg(long, default_value_t = 128 * 1024)]
    max_size: u64,
    #[arg(long, default_value_t = 1)]
    min_size: u64,
    /// LogfP 1:P−P:1 up to this many peers (sim: default 16; udp: 0; rdma/msg: P queue
    /// pairs, spread round robin over the servers of --peer, default one per server).
    #[arg(long)]
    fanout_peers: Option<usize>,
    /// Deadline of every wait for an answer, in ms.
    #[arg(long, default_value_t = 250)]
    timeout_ms: u64,
    /// Sizes and repetitions: adaptive (default) or Netgauge's fixed schedule.
    #[arg(long, default_value = "adaptive")]
    schedule: String,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 200)]
    resamples: usize,
    #[arg(long)]
    json: bool,
    /// Include the raw samples in the JSON.
    #[arg(long)]
    raw: bool,
    /// Write the result into the shared-memory segment.
    #[arg(long)]
    publish: bool,
    /// Segment path (default /run/netgauged/segment, or $NETGAUGE_SEGMENT).
    #[arg(long)]
    shm: Option<String>,
    #[command(flatten)]
    verbs: VerbsFlags,
    /// Most repetitions per size (fewer: a quicker, rougher sweep).
    #[arg(long)]
    max_reps: Option<u32>,
    /// Fewest repetitions per size, also for large sizes that the byte budget would cut
    /// (more: a steadier fit where traffic is free, e.g. MPI over shared memory).
    #[arg(long)]
    min_reps: Option<u32>,
    #[arg(long, help = "Pin the probe to a CPU (off the responder's)")]
    cpu: Option<usize>,
}

impl ProbeFlags {
    fn args(self, choice: ClockChoice) -> Result<ProbeArgs> {
        let f = self;
        Ok(
            options!(f => ProbeArgs { peer, peer_mac, model, fanout_peers, resamples, max_reps, min_reps, cpu;
            kind: f.transport, clock: choice, interface: f.raw_args.interface, raw_rx: f.raw_args.raw_rx,
            max_size_bytes: f.max_size, min_size_bytes: f.min_size,
            timeout: Duration::from_millis(f.timeout_ms), schedule: f.schedule.parse::<Schedule>()?,
            verbs: f.verbs.into(), publish: f.publish.then(|| ops::shm_path(f.shm.as_deref())) }),
        )
    }
}

#[derive(clap::Args, Clone, Debug)]
struct PredictFlags {
    /// bcast, allreduce or barrier.
    collective: Collective,
    /// Number of processes P.
    #[arg(long)]
    ranks: usize,
    /// Message size in bytes (ignored for barrier).
    #[arg(long, default_value_t = 0)]
    bytes: u64,
    /// Peer name of the segment entry (default: the first of the transport).
    #[arg(long)]
    peer: Option<String>,
    #[arg(long, default_value = "mpi")]
    transport: String,
    /// Segment file (default $NETGAUGE_SEGMENT or /run/netgauged/segment).
    #[arg(long)]
    shm: Option<PathBuf>,
    /// Cost of combining one byte in a reduction.
    #[arg(long, default_value_t = select::DEFAULT_GAMMA_NS_PER_BYTE)]
    gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: at least one core per rank). With fewer cores
    /// than ranks, steps in which more ranks move bytes than there are cores take
    /// proportionally longer per byte.
    #[arg(long, default_value_t = 0)]
    cores: usize,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Clone, Debug)]
struct ExportFlags {
    #[arg(long, value_parser = format_parser())]
    format: Format,
    /// Segment file (default $NETGAUGE_SEGMENT or /run/netgauged/segment).
    #[arg(long)]
    shm: Option<PathBuf>,
    /// Peer of the entry (default: the first of the transport).
    #[arg(long)]
    peer: Option<String>,
    #[arg(long, default_value = "mpi")]
    transport: String,
    /// Communicator sizes of the ompi-rules / mpich-json tables.
    #[arg(long, value_delimiter = ',', default_value = "2,4,8,16,32,64,128")]
    comm_sizes: Vec<u32>,
    /// Largest message size the rule tables consider.
    #[arg(long, default_value_t = 4 << 20)]
    max_bytes: u64,
    #[arg(long, default_value_t = select::DEFAULT_GAMMA_NS_PER_BYTE)]
    gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: one per rank), as for `ngctl predict`.
    #[arg(long, default_value_t = 0)]
    cores: usize,
    /// ompi-rules / mpich-json: the lead over the library's own choice ours need.
    #[arg(long, default_value_t = 0.1)]
    margin: f64,
    /// LogGOPSim time unit: auto (the coarsest in which nothing rounds away), ns, ps, fs.
    #[arg(long, default_value = "auto")]
    loggopsim_unit: export::loggopsim::Unit,
    /// LogGOPSim: only the flags of the set for this message size, bytes.
    #[arg(long)]
    bytes: Option<u64>,
}

fn main() -> ExitCode {
    // A reader that stops early (`ngctl dump | head`) ends ngctl quietly, as
    // it does any Unix filter, instead of a panic in println!.
    // SAFETY: called before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ngctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let clock = cli.clock;
    match cli.cmd {
        Cmd::Clock { json, long } => print!("{}", report::clock(&ops::clock(clock, long)?, json)?),
        Cmd::Serve(f) => ops::serve(&f.args(clock), &mut |n| note(&n))?,
        Cmd::Probe(f) => {
            let (json, raw) = (f.json, f.raw);
            let a = f.args(clock)?;
            let (mut bar, mut note) = progress_bar(json);
            let out = ops::probe(&a, &mut bar, &mut note);
            bar.0.finish_and_clear();
            if let Some(o) = out? {
                print!("{}", report::probe(&o, json, raw)?);
            }
        }
        Cmd::Fit(f) => {
            let to = (ops::shm_path(f.shm.as_deref()), f.peer, f.transport);
            let a = options!(f => FitArgs { file; publish: f.publish.then_some(to) });
            let (r, x, sizes) = ops::refit(&a, &mut |n| note(&n))?;
            print!("{}", report::refit(&r, x.as_ref(), &a.file, sizes, f.json)?);
        }
        Cmd::Dump(f) => {
            let d = ops::dump(&ops::shm_path(f.shm.as_deref()))?;
            print!("{}", report::dump(&d, f.json)?);
        }
        Cmd::Status(f) => {
            let st = ops::status(&ops::shm_path(f.shm.as_deref()))?;
            print!("{}", report::status(&st, f.json)?);
            st.check_alive()?;
        }
        Cmd::Predict(f) => {
            let json = f.json;
            let a = options!(f => PredictArgs { collective, ranks, bytes, peer, transport, shm, gamma_ns_per_byte, cores; });
            print!("{}", report::predict(&predict::run(&a)?, json)?);
        }
        Cmd::Contention(f) => f.run(clock)?,
        Cmd::Ebb(f) => f.run()?,
        Cmd::Overlap(f) => f.run(clock)?,
        Cmd::Export(f) => {
            let a = options!(f => ExportArgs { format, shm, peer, transport, comm_sizes, max_bytes, gamma_ns_per_byte, cores, margin, loggopsim_unit, bytes; });
            print!("{}", export::run(&a)?);
        }
    }
    Ok(())
}
