//! `ngctl export`: the segment's parameters in the formats simulators and
//! MPI libraries already read.
//!
//! - `loggopsim`: LogGOPSim's command-line flags `-L -o -g -G -O -S`, one
//!   set per piece of the model's T(s), in a unit in which nothing rounds
//!   away ([`loggopsim`]).
//! - `netgauge`: the columns of Netgauge's `loggp.out` (`# size n PRTT(1,0,s)
//!   PRTT(n,0,s) PRTT(n,PRTT(1,0,s),s) L o_s o_r g G lsqu(g,G)`, times in µs),
//!   the rows generated from the fitted model ([`model`]) at sizes spanning
//!   each range.
//! - `smpi`: a SimGrid platform file for `smpirun -platform`: a cluster of
//!   `--hosts` hosts whose SMPI options (in its `<config>`) and links give a
//!   simulated message the model's T(s), and whose link sharing carries the
//!   transport's measured contention ([`smpi`]).
//! - `ompi-rules`: an Open MPI coll/tuned dynamic rules file, classic format
//!   (format 1 of 5.0; the only one of 4.1), for allgather (collective id
//!   0), allreduce (2), alltoall (3), barrier (6), bcast (7) and reduce
//!   (11), one block per communicator size, naming coll/tuned's own
//!   algorithms by number.
//! - `mpich-json`: an MPICH collective-selection tree
//!   (`MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE`) for the same six
//!   collectives. MPICH 4.0 replaces its whole built-in tree with the file
//!   and asserts when a collective has no entry, so a program that calls
//!   any other collective cannot use it.
//!
//! Both rule exports leave the library's own choice wherever nothing is
//! predicted faster than it by more than `--margin` (and slower in no view
//! by more than half of it). The Open MPI file chooses among every
//! algorithm of coll/tuned the model has a schedule for
//! (`netgauge::select::ompi_rule_algorithms`, chosen by
//! `netgauge::select::choose_named`): its linear, chain, tree and k-nomial
//! broadcasts and reduces, not only the ones libngcoll runs as ours; the
//! library's own is algorithm 0, coll/tuned's fixed decision. The MPICH
//! tree chooses among ours that MPICH has (`netgauge::select::choose`: it
//! has no ring allreduce, plain chain broadcast nor tree barrier) and
//! otherwise names MPICH's default algorithm (the file has to name one).
//! What libngcoll decided and measured in the runs `--trials` names
//! overrides the model ([`verdicts`]): a class a libngcoll trial measured
//! slower than the library's own stays the library's, and so does, in the
//! Open MPI file, a size a verification run of that file measured its rule
//! slower at; one libngcoll's plan gave to the library names none of
//! libngcoll's algorithms. The MPICH keys stand in the order MPICH
//! evaluates them: it takes the first sibling that matches, in file order,
//! so communicator and message sizes ascend numerically, `any` last.

pub mod loggopsim;
pub mod model;
mod rules;
mod simulators;
pub mod smpi;
pub mod verdicts;

use std::path::PathBuf;

use netgauge::select::SelectOptions;
use netgauge::{EntryData, Params, Reader, TransportExt};

pub use rules::*;
pub use simulators::*;

use crate::ops::OpsError;
use crate::predict::{exchange_of, find_entry, load_entries};

pub(crate) type Result<T> = std::result::Result<T, OpsError>;

pub(crate) fn bad(s: String) -> OpsError {
    OpsError::Usage(s)
}

/// The export formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Loggopsim,
    Netgauge,
    Smpi,
    OmpiRules,
    MpichJson,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Loggopsim,
        Format::Netgauge,
        Format::Smpi,
        Format::OmpiRules,
        Format::MpichJson,
    ];

    /// The name `--format` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Loggopsim => "loggopsim",
            Format::Netgauge => "netgauge",
            Format::Smpi => "smpi",
            Format::OmpiRules => "ompi-rules",
            Format::MpichJson => "mpich-json",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown format {s:?}"))
    }
}

/// What `ngctl export` is asked.
#[derive(Clone, Debug)]
pub struct ExportArgs {
    pub format: Format,
    /// Segment file (None: $NETGAUGE_SEGMENT or the default).
    pub shm: Option<PathBuf>,
    /// Peer of the entry (None: the only one that fits).
    pub peer: Option<String>,
    /// Transport of the entry (None: the only one that fits).
    pub transport: Option<String>,
    /// Communicator sizes of the ompi-rules / mpich-json tables.
    pub comm_sizes: Vec<u32>,
    /// Largest message size the rule tables consider.
    pub max_bytes: u64,
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node, as for `ngctl predict` (0: one per
    /// rank). The rule tables then assume this many cores per communicator.
    pub cores: usize,
    /// ompi-rules / mpich-json: how much faster a named algorithm must be
    /// predicted to replace the library's own (see `select::choose`).
    pub margin: f64,
    /// LogGOPSim time unit ([`loggopsim::Unit::Auto`]: the first that
    /// carries the model).
    pub loggopsim_unit: loggopsim::Unit,
    /// LogGOPSim: the flags of the set for this message size alone.
    pub bytes: Option<u64>,
    /// SMPI: hosts of the platform's cluster (None: the largest of
    /// `comm_sizes`).
    pub hosts: Option<u32>,
    /// ompi-rules / mpich-json: libngcoll `NETGAUGE_COLL=log` outputs, and
    /// verification runs of an Open MPI file, that gave classes back to
    /// the library's own ([`verdicts`]).
    pub trials: Vec<PathBuf>,
}

/// Render one export of `entry` (with the exchange ranges measured for some
/// communicator sizes, which the rule exports use for those sizes, and the
/// transport's contention record, which the SMPI platform carries). The
/// rule exports read the logs and runs of `args.trials` and leave the
/// classes they gave back to the library's own to it ([`verdicts`]).
pub fn render(
    args: &ExportArgs,
    entry: &EntryData,
    exchanges: &Exchanges,
    record: Option<&TransportExt>,
) -> Result<String> {
    check(args)?;
    let vetoes = verdicts::Verdicts::read(&args.trials)?;
    let net = entry.params();
    if net.is_empty() {
        return Err(bad("the entry has no protocol ranges".into()));
    }
    if !(0.0..1.0).contains(&args.margin) {
        return Err(bad("--margin must be at least 0 and below 1".into()));
    }
    let opts = SelectOptions {
        gamma_ns_per_byte: args.gamma_ns_per_byte,
        cores: args.cores,
    };
    // An MPI probe's entry describes ranks on one node; the daemon's
    // (udp, raw, rdma, msg) a pair of nodes.
    let rule_opts = RuleOptions {
        select: opts,
        margin: args.margin,
        one_node: entry.transport.starts_with("mpi"),
        fresh_ns_per_byte: netgauge::select::measure_fresh_ns_per_byte(),
        contention: record.copied(),
        vetoes: &vetoes,
    };
    let mut sizes = args.comm_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    sizes.retain(|&p| p >= 1);
    if sizes.is_empty() {
        return Err(bad("--comm-sizes needs at least one size ≥ 1".into()));
    }
    Ok(match args.format {
        Format::Loggopsim => loggopsim::render(entry, args.loggopsim_unit, args.bytes)?,
        Format::Netgauge => netgauge_out(entry),
        Format::Smpi => smpi::smpi_platform(
            entry,
            args.hosts.unwrap_or(sizes[sizes.len() - 1]),
            args.max_bytes,
            record.and_then(smpi::sharing_of).as_ref(),
        )?,
        Format::OmpiRules => ompi_rules(&net, exchanges, &sizes, args.max_bytes, &rule_opts)?.render(&format!(
            "Open MPI coll/tuned dynamic rules from netgauged ({} over {})\n\
             use: --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename FILE",
            entry.peer, entry.transport
        )),
        Format::MpichJson => {
            serde_json::to_string_pretty(&mpich_json(
                &net,
                exchanges,
                &sizes,
                args.max_bytes,
                &rule_opts,
            )?)? + "\n"
        }
    })
}

/// Flags that contradict each other, refused before anything is read.
fn check(args: &ExportArgs) -> Result<()> {
    if args.bytes.is_some() && args.format != Format::Loggopsim {
        return Err(bad(
            "--bytes selects a LogGOPSim parameter set: only with --format loggopsim".into(),
        ));
    }
    if !args.trials.is_empty() && !matches!(args.format, Format::OmpiRules | Format::MpichJson) {
        return Err(bad(
            "--trials tells a rules file what libngcoll measured: only with --format ompi-rules or mpich-json"
                .into(),
        ));
    }
    if args.hosts.is_some() && args.format != Format::Smpi {
        return Err(bad(
            "--hosts sizes the SimGrid platform: only with --format smpi".into(),
        ));
    }
    let largest = args.comm_sizes.iter().copied().max().unwrap_or(0);
    if matches!(args.format, Format::OmpiRules | Format::MpichJson) && largest > MAX_RULE_RANKS {
        return Err(bad(format!(
            "--comm-sizes {largest}: the rule tables simulate every pair of ranks (their time and \
             memory grow as P²), at most {MAX_RULE_RANKS}; the largest size's rules serve larger \
             communicators"
        )));
    }
    Ok(())
}

/// The largest communicator the rule tables are built for (`--comm-sizes`):
/// the model simulates every pair of ranks, so a table's time and memory
/// grow as P² (bench/ngcoll.md); Open MPI takes a file's rules for the
/// largest size it names for every larger communicator.
pub const MAX_RULE_RANKS: u32 = 1024;

/// The export of the segment's entry that `args` names.
pub fn run(args: &ExportArgs) -> Result<String> {
    check(args)?;
    let shm = args.shm.as_deref();
    let entries = load_entries(shm)?;
    let entry = find_entry(
        &entries,
        shm,
        args.peer.as_deref(),
        args.transport.as_deref(),
    )?;
    let exchanges: Vec<(u32, Vec<Params>)> = args
        .comm_sizes
        .iter()
        .map(|&p| {
            (
                p,
                exchange_of(&entries, &entry.peer, &entry.transport, p as usize),
            )
        })
        .filter(|(_, x)| !x.is_empty())
        .collect();
    // The transport's contention record, when the segment has one.
    let record = Reader::open(crate::predict::segment_path(shm))
        .ok()
        .and_then(|r| r.transport_ext(&entry.transport).ok());
    render(args, &entry, &exchanges, record.as_ref())
}
