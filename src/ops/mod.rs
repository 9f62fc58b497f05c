//! The operator's operations (`ngctl`'s subcommands) as library functions
//! over plain option structs: the binary parses flags into them, calls
//! these, and prints what [`crate::report`] makes of the results. Nothing
//! here parses a command line or prints; progress and notes (what `ngctl`
//! writes to stderr as it goes) are handed to the caller's callbacks as
//! [`Note`]s.

mod cluster;
mod contention;
mod ebb;
mod history;
mod overlap;
mod probe;
mod segment;
mod serve;

pub use crate::probe::contention::ContentionOptions;
pub use crate::probe::overlap::OverlapOptions;
pub use cluster::{matrix, parse_duration, quiet, resume, MatrixArgs, MatrixData, MATRIX_TIMEOUT};
pub use contention::{contention, default_options, parse_schemes, ContentionArgs, Servers};
pub use ebb::{ebb, matching, Distribution, EbbArgs, EbbPair, EbbResult, EbbRound};
pub use history::{history, HistoryArgs, HistoryView};
pub use overlap::{overlap, OverlapArgs};
pub use probe::{probe, ProbeArgs, ProbeOutput, Schedule};
pub use segment::{
    clock, dump, load_probe, publish_contention, publish_result, refit, shm_path, status, DumpData,
    FitArgs, LoadedProbe, StatusData,
};
pub use serve::{serve, ServeArgs};

use std::net::SocketAddr;

use crate::link::{Kind, LinkSpec, OpenError, SessionEvent};
use crate::transport::raw_eth::RxMode;

/// The verbs transports' flags (rdma, msg).
#[derive(Clone, Debug, Default)]
pub struct VerbsArgs {
    /// RDMA device (e.g. rxe0, mlx5_0).
    pub device: Option<String>,
    /// GID index (RoCE); None: the first RoCE v2 GID.
    pub gid_index: Option<u32>,
    /// msg: largest eager message.
    pub eager_max_bytes: usize,
    /// rdma: largest inline write (None: 0 on software devices).
    pub inline_max_bytes: Option<u32>,
}

impl VerbsArgs {
    /// The device a queue-pair link of `kind` opens.
    fn device_for(&self, kind: Kind) -> Result<String, OpsError> {
        self.device
            .clone()
            .ok_or_else(|| usage(required_text("--device DEV", kind) + " (see `ibv_devices`)"))
    }

    /// Sets the queue-pair options of `spec`: the largest message, GID
    /// index, eager and inline limits.
    fn apply(&self, spec: &mut LinkSpec, max_msg_bytes: usize) {
        spec.options.max_msg_bytes = Some(max_msg_bytes);
        spec.options.verbs.gid_index = self.gid_index;
        spec.options.verbs.eager_max_bytes = self.eager_max_bytes;
        spec.options.verbs.inline_max_bytes = self.inline_max_bytes;
    }
}

/// The raw Ethernet transport's flags.
#[derive(Clone, Debug)]
pub struct RawArgs {
    /// The local interface.
    pub interface: Option<String>,
    /// How the interface receives.
    pub rx: RxMode,
}

impl RawArgs {
    /// Sets `spec` (of `spec.kind`) to open the interface with the receive
    /// path asked for; the interface's name.
    fn apply(&self, spec: &mut LinkSpec) -> Result<String, OpsError> {
        let ifname = self
            .interface
            .clone()
            .ok_or_else(|| required("--interface IF", spec.kind))?;
        spec.device = Some(ifname.clone());
        spec.options.raw_rx = Some(self.rx);
        Ok(ifname)
    }
}

/// Something an operation reports while it runs (stderr in `ngctl`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// A responder is ready: `kind` probes answered at `at`.
    Listening { kind: Kind, at: String },
    /// A standing responder stopped after its idle limit.
    Idle { messages: u64, answers: u64 },
    /// A session responder's news.
    Session(SessionEvent),
    /// Frames a link received and did not use (`who`: "probe" or "serve").
    Ignored { who: &'static str, frames: String },
    /// An entry went into a segment.
    Published {
        peer: String,
        transport: String,
        path: String,
    },
    /// The MPI exchange sweep failed on `rank` (0: the prober, whose pair
    /// probe stands without it).
    ExchangeFailed { rank: usize, error: String },
}

/// Why an operation failed. Each variant that wraps another error says
/// what was being done; the cause is its `source`.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// A flag the operation needs is missing or wrong.
    #[error("{0}")]
    Usage(String),
    #[error("cannot resolve {peer}")]
    Resolve {
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{peer} resolves to no address")]
    NoAddress { peer: String },
    #[error("{what}")]
    Open {
        what: String,
        #[source]
        source: OpenError,
    },
    #[error("probe of {who} failed")]
    Probe {
        who: String,
        #[source]
        source: crate::sweep::SweepError,
    },
    #[error("cannot pin to CPU {cpu}")]
    Pin {
        cpu: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("`serve` answers real transports; {0} needs no server")]
    NoServer(Kind),
    #[error("cannot listen on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("bad --model")]
    Model(#[source] crate::transport::sim::SimParamError),
    #[error("cannot open the segment {path}")]
    SegmentCreate {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot publish into {path}")]
    Publish {
        path: String,
        #[source]
        source: netgauge::SegmentError,
    },
    #[error("cannot read the segment {path}: {reason}")]
    SegmentRead { path: String, reason: String },
    #[error("the segment {path} is not valid: {reason}")]
    SegmentInvalid { path: String, reason: String },
    #[error("cannot open segment {path}")]
    SegmentOpen {
        path: String,
        #[source]
        source: netgauge::ReaderError,
    },
    #[error("cannot read segment {path}: {reason}")]
    Snapshot { path: String, reason: String },
    #[error("cannot read {what}")]
    Read {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {what}")]
    Write {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} is not the JSON of `ngctl probe --json --raw`")]
    NotProbeJson {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file} has no raw samples (save the probe with `ngctl probe --json --raw`)")]
    NoRawSamples { file: String },
    #[error("{file} holds no samples to fit ({what})")]
    NothingToFit { file: String, what: &'static str },
    #[error("the daemon writing {path} is not running")]
    NotRunning { path: String },
    #[error(
        "no segment at {path} (netgauged not started? --shm or $NETGAUGE_SEGMENT names another)"
    )]
    NoSegment { path: String },
    /// Several entries could be meant: the caller must name one.
    #[error("{what}; name one with --peer and --transport:\n{list}")]
    Ambiguous { what: String, list: String },
    #[error("no entry for peer {peer} over {transport} in {path}")]
    NoEntry {
        peer: String,
        transport: String,
        path: String,
    },
    #[error("history file {path}: {reason}")]
    History { path: String, reason: String },
    #[error("no history of {peer}{what} in {path}; it holds: {kept}")]
    NoHistory {
        peer: String,
        what: String,
        path: String,
        kept: String,
    },
    #[error(transparent)]
    Select(#[from] netgauge::select::SelectError),
    #[error(transparent)]
    Lookup(#[from] netgauge::LookupError),
    #[error(transparent)]
    Clock(#[from] crate::clock::ClockError),
    #[error(transparent)]
    Transport(#[from] crate::transport::TransportError),
    #[error(transparent)]
    Link(#[from] OpenError),
    #[error(transparent)]
    NotBuilt(#[from] crate::transport::kind::NotBuilt),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Quiet(#[from] crate::daemon::quiet::QuietError),
    #[cfg(feature = "mpi")]
    #[error(transparent)]
    Mpi(#[from] crate::probe::ranks::MpiProbeError),
    #[cfg(feature = "mpi")]
    #[error("MPI is already initialized")]
    MpiInitialized,
}

/// `ngctl`'s exit codes, one per kind of failure a script may want to
/// tell apart (README, "Exit codes"; `ngctl --help`).
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// The operation failed (measurement, I/O, a peer, …).
    pub const FAILURE: u8 = 1;
    /// The command line is wrong (clap's own code for unknown flags too).
    pub const USAGE: u8 = 2;
    /// The segment is there but the daemon writing it is not running.
    pub const NOT_RUNNING: u8 = 3;
    /// There is no segment to read.
    pub const NO_SEGMENT: u8 = 4;
    /// The segment has no entry for what was asked (or several, and the
    /// command needs one named).
    pub const NO_ENTRY: u8 = 5;
}

impl OpsError {
    /// The exit code of `ngctl` for this error ([`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            OpsError::Usage(_) | OpsError::Model(_) => exit::USAGE,
            OpsError::NotRunning { .. } => exit::NOT_RUNNING,
            OpsError::NoSegment { .. } => exit::NO_SEGMENT,
            OpsError::SegmentOpen {
                source: netgauge::ReaderError::Io(e),
                ..
            } if e.kind() == std::io::ErrorKind::NotFound => exit::NO_SEGMENT,
            OpsError::NoEntry { .. } | OpsError::Ambiguous { .. } | OpsError::NoHistory { .. } => {
                exit::NO_ENTRY
            }
            _ => exit::FAILURE,
        }
    }
}

fn usage(s: impl Into<String>) -> OpsError {
    OpsError::Usage(s.into())
}

/// The usage error of a flag missing that `kind` cannot go without.
fn required(flag: &str, kind: Kind) -> OpsError {
    usage(required_text(flag, kind))
}

/// What [`required`] says.
fn required_text(flag: &str, kind: Kind) -> String {
    format!("{flag} is required for {}", kind.with_same_endpoint())
}

/// A probe's largest size as the largest message a link takes.
fn max_msg_bytes(max_size_bytes: u64) -> Result<usize, OpsError> {
    usize::try_from(max_size_bytes).map_err(|_| usage("--max-size too large"))
}

/// Resolve `HOST:PORT`.
fn resolve(peer: &str) -> Result<SocketAddr, OpsError> {
    use std::net::ToSocketAddrs;
    peer.to_socket_addrs()
        .map_err(|source| OpsError::Resolve {
            peer: peer.to_string(),
            source,
        })?
        .next()
        .ok_or_else(|| OpsError::NoAddress {
            peer: peer.to_string(),
        })
}

/// This host's name (the node name of a segment `ngctl` creates).
fn node_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}
