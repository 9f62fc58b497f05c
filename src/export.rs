//! `ngctl export`: the segment's parameters in the formats simulators and
//! MPI libraries already read.
//!
//! - `loggopsim`: LogGOPSim's command-line flags `-L -o -g -G -O -S`
//!   (simulator.ggo: all `int`; times in ns, G and O in ns per byte, S in
//!   bytes). G of a fast network is below 1 ns/byte and would round to 0,
//!   so `--loggopsim-unit ps` scales every time to picoseconds (then the
//!   schedule's compute times must be in ps too).
//! - `netgauge`: the columns of Netgauge's `loggp.out` (`# size n PRTT(1,0,s)
//!   PRTT(n,0,s) PRTT(n,PRTT(1,0,s),s) L o_s o_r g G lsqu(g,G)`, times in µs),
//!   the rows generated from the fitted model at sizes spanning each range.
//! - `smpi`: SimGrid SMPI `--cfg=` options: `smpi/os` and `smpi/or` as
//!   piecewise `size:offset:factor;…` (seconds, seconds per byte),
//!   `smpi/async-small-thresh` and `smpi/send-is-detached-thresh` = S.
//! - `ompi-rules`: an Open MPI coll/tuned dynamic rules file, classic format
//!   (format 1 of 5.0; the only one of 4.1), for allgather (collective id
//!   0), allreduce (2), alltoall (3), barrier (6), bcast (7) and reduce
//!   (11), one block per communicator size; our choices mapped onto
//!   coll/tuned's algorithm numbers.
//! - `mpich-json`: an MPICH collective-selection tree
//!   (`MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE`) for the same six
//!   collectives. MPICH 4.0 replaces its whole built-in tree with the file
//!   and asserts when a collective has no entry, so a program that calls
//!   any other collective cannot use it.
//!
//! Both rule exports make the choice libngcoll makes
//! (`netgauge::select::choose`): one of our algorithms only where it is
//! predicted faster than the library's own choice by more than `--margin`
//! (and slower in no view by more than half of it); elsewhere the library's own: algorithm 0 (coll/tuned's
//! fixed decision) in the Open MPI file, MPICH's default algorithm in the
//! JSON (the file has to name one). Only algorithms the library has are
//! candidates (MPICH has no plain chain broadcast nor a tree barrier).

use std::fmt::Write as _;
use std::path::PathBuf;

use netgauge::select::{self, Algorithm, Collective, Measured, Network, SelectOptions};
use netgauge::{EntryData, Params};

use crate::ops::OpsError;
use crate::predict::{exchange_of, find_entry, load_entries};

type Result<T> = std::result::Result<T, OpsError>;

fn bad(s: String) -> OpsError {
    OpsError::Usage(s)
}

/// Open MPI's COLLTYPE ids (ompi/mca/coll/base/coll_base_functions.h).
pub const OMPI_ALLGATHER: u32 = 0;
pub const OMPI_ALLREDUCE: u32 = 2;
pub const OMPI_ALLTOALL: u32 = 3;
pub const OMPI_BARRIER: u32 = 6;
pub const OMPI_BCAST: u32 = 7;
pub const OMPI_REDUCE: u32 = 11;
/// Number of COLLTYPEs (COLLCOUNT) in Open MPI 4.1: the reader rejects a
/// collective id at or above it.
pub const OMPI_COLLCOUNT: u32 = 22;

/// Open MPI coll/tuned algorithm numbers (`ompi_info --param coll tuned
/// --level 9`, 4.1).
pub mod ompi_alg {
    pub const BCAST_BASIC_LINEAR: u32 = 1;
    pub const BCAST_CHAIN: u32 = 2;
    pub const BCAST_PIPELINE: u32 = 3;
    pub const BCAST_BINOMIAL: u32 = 6;
    pub const BCAST_SCATTER_ALLGATHER: u32 = 8;
    pub const BCAST_SCATTER_ALLGATHER_RING: u32 = 9;
    pub const ALLREDUCE_RECURSIVE_DOUBLING: u32 = 3;
    pub const ALLREDUCE_RING: u32 = 4;
    pub const ALLREDUCE_RABENSEIFNER: u32 = 6;
    pub const BARRIER_BRUCK: u32 = 4;
    pub const BARRIER_TREE: u32 = 6;
    pub const REDUCE_BINOMIAL: u32 = 5;
    pub const REDUCE_RABENSEIFNER: u32 = 7;
    pub const ALLGATHER_RECURSIVE_DOUBLING: u32 = 3;
    pub const ALLGATHER_RING: u32 = 4;
    pub const ALLTOALL_LINEAR: u32 = 1;
    pub const ALLTOALL_PAIRWISE: u32 = 2;
}

/// (Open MPI algorithm, fan-in/out, segment size) for one of our choices.
pub fn ompi_mapping(c: &select::Choice) -> (u32, u32, u64) {
    use ompi_alg::*;
    match c.algorithm() {
        Some(Algorithm::BcastBinomial) => (BCAST_BINOMIAL, 0, 0),
        Some(Algorithm::BcastScatterRdAllgather) => (BCAST_SCATTER_ALLGATHER, 0, 0),
        Some(Algorithm::BcastScatterRingAllgather) => (BCAST_SCATTER_ALLGATHER_RING, 0, 0),
        // coll/tuned's pipeline is a chain of fan-out 1, segmented.
        Some(Algorithm::BcastChain) => (BCAST_PIPELINE, 1, c.segment_bytes),
        Some(Algorithm::AllreduceRecursiveDoubling) => (ALLREDUCE_RECURSIVE_DOUBLING, 0, 0),
        Some(Algorithm::AllreduceRabenseifner) => (ALLREDUCE_RABENSEIFNER, 0, 0),
        Some(Algorithm::AllreduceRing) => (ALLREDUCE_RING, 0, 0),
        // Bruck's barrier is the dissemination barrier.
        Some(Algorithm::BarrierDissemination) => (BARRIER_BRUCK, 0, 0),
        Some(Algorithm::BarrierTree) => (BARRIER_TREE, 0, 0),
        Some(Algorithm::ReduceBinomial) => (REDUCE_BINOMIAL, 0, 0),
        Some(Algorithm::ReduceRabenseifner) => (REDUCE_RABENSEIFNER, 0, 0),
        Some(Algorithm::AllgatherRecursiveDoubling) => (ALLGATHER_RECURSIVE_DOUBLING, 0, 0),
        Some(Algorithm::AllgatherRing) => (ALLGATHER_RING, 0, 0),
        Some(Algorithm::AlltoallLinear) => (ALLTOALL_LINEAR, 0, 0),
        Some(Algorithm::AlltoallPairwise) => (ALLTOALL_PAIRWISE, 0, 0),
        None => (0, 0, 0),
    }
}

/// MPICH algorithm container names. MPICH has no plain chain broadcast
/// (its pipelined tree needs version-specific parameters) nor a tree
/// barrier: those map to the nearest algorithm it has.
pub fn mpich_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::BcastBinomial => "MPIR_Bcast_intra_binomial",
        Algorithm::BcastScatterRdAllgather => {
            "MPIR_Bcast_intra_scatter_recursive_doubling_allgather"
        }
        Algorithm::BcastScatterRingAllgather | Algorithm::BcastChain => {
            "MPIR_Bcast_intra_scatter_ring_allgather"
        }
        Algorithm::AllreduceRecursiveDoubling => "MPIR_Allreduce_intra_recursive_doubling",
        Algorithm::AllreduceRabenseifner => "MPIR_Allreduce_intra_reduce_scatter_allgather",
        Algorithm::AllreduceRing => "MPIR_Allreduce_intra_ring",
        Algorithm::BarrierDissemination | Algorithm::BarrierTree => {
            "MPIR_Barrier_intra_dissemination"
        }
        Algorithm::ReduceBinomial => "MPIR_Reduce_intra_binomial",
        Algorithm::ReduceRabenseifner => "MPIR_Reduce_intra_reduce_scatter_gather",
        Algorithm::AllgatherRecursiveDoubling => "MPIR_Allgather_intra_recursive_doubling",
        Algorithm::AllgatherRing => "MPIR_Allgather_intra_ring",
        Algorithm::AlltoallPairwise => "MPIR_Alltoall_intra_pairwise",
        Algorithm::AlltoallLinear => "MPIR_Alltoall_intra_scattered",
    }
}

/// One message-size rule: from `msg_bytes` upwards use `alg`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OmpiMsgRule {
    pub msg_bytes: u64,
    pub alg: u32,
    pub faninout: u32,
    pub segsize: u64,
}

/// The rules of one collective for one communicator size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OmpiCommRule {
    pub comm_size: u32,
    pub msgs: Vec<OmpiMsgRule>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OmpiCollRule {
    pub coll_id: u32,
    pub comms: Vec<OmpiCommRule>,
}

/// A whole coll/tuned dynamic rules file.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct OmpiRules {
    pub colls: Vec<OmpiCollRule>,
}

impl OmpiRules {
    /// The text Open MPI reads: numbers separated by white space; `#`
    /// starts a comment to the end of the line (the reader skips any
    /// non-numeric character, and `#` with the rest of its line). No number
    /// has a leading zero (`%li` would read it as octal).
    pub fn render(&self, header: &str) -> String {
        let mut s = String::new();
        for line in header.lines() {
            let _ = writeln!(s, "# {line}");
        }
        let _ = writeln!(s, "{} # number of collectives", self.colls.len());
        for c in &self.colls {
            let _ = writeln!(s, "{} # collective id", c.coll_id);
            let _ = writeln!(s, "{} # number of communicator sizes", c.comms.len());
            for cs in &c.comms {
                let _ = writeln!(s, "{} # communicator size", cs.comm_size);
                let _ = writeln!(s, "{} # number of message sizes", cs.msgs.len());
                for m in &cs.msgs {
                    let _ = writeln!(
                        s,
                        "{} {} {} {} # message size, algorithm, fan in/out, segment size",
                        m.msg_bytes, m.alg, m.faninout, m.segsize
                    );
                }
            }
        }
        s
    }
}

/// Sizes at which the choice is evaluated: 0 and powers of two up to
/// `max_bytes`, plus S and S + 1 (the protocol switch).
pub fn size_grid(max_bytes: u64, s_bytes: Option<u64>) -> Vec<u64> {
    let mut v = vec![0u64];
    let mut k = 1u64;
    while k <= max_bytes {
        v.push(k);
        k *= 2;
    }
    if let Some(s) = s_bytes {
        if s < max_bytes {
            v.push(s);
            v.push(s + 1);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The scheduler time slice the MPICH export assumes for its spinning
/// waits (the kernel's is not known where the export runs), ns.
const SPIN_SLICE_NS: f64 = 3e6;

/// How the rule exports decide.
#[derive(Clone, Copy, Debug)]
pub struct RuleOptions {
    pub select: SelectOptions,
    /// See [`ExportArgs::margin`].
    pub margin: f64,
    /// The parameters are of ranks on one node (an MPI probe's entry)
    /// rather than between nodes.
    pub one_node: bool,
}

/// The choice over the size grid as (first size, choice) runs: our
/// algorithm, or None for the library's own (see the module
/// documentation). `ours`: the algorithms the target library can run.
pub fn choice_runs<N: Network + ?Sized>(
    net: &N,
    lib: select::Library,
    coll: Collective,
    ranks: usize,
    grid: &[u64],
    ours: &[Algorithm],
    opts: &RuleOptions,
) -> Result<Vec<(u64, Option<select::Choice>)>> {
    let view = select::ViewOptions {
        gamma_ns_per_byte: opts.select.gamma_ns_per_byte,
        cores: opts.select.cores,
        spin_slice_ns: SPIN_SLICE_NS,
    };
    let mut runs: Vec<(u64, Option<select::Choice>)> = Vec::new();
    for &m in grid {
        let d = select::choose(
            net,
            lib,
            coll,
            ranks,
            m,
            opts.one_node,
            ours,
            &view,
            opts.margin,
        )
        .map_err(|e| bad(e.to_string()))?;
        let c = d.ours.map(|o| select::Choice {
            algorithm: o.algorithm as u32,
            reserved: 0,
            predicted_ns: o.view.back_to_back_ns,
            segment_bytes: o.segment_bytes,
        });
        let same = runs.last().is_some_and(|(_, prev)| match (prev, &c) {
            (None, None) => true,
            (Some(a), Some(b)) => a.algorithm == b.algorithm && a.segment_bytes == b.segment_bytes,
            _ => false,
        });
        if !same {
            runs.push((m, c));
        }
        if coll == Collective::Barrier {
            break;
        }
    }
    Ok(runs)
}

/// The algorithms of ours a library can be told to run.
fn exportable(lib: select::Library, ranks: usize) -> Vec<Algorithm> {
    Algorithm::ALL
        .into_iter()
        .filter(|a| match lib {
            select::Library::OpenMpi41 => true,
            select::Library::Mpich40 => {
                !matches!(a, Algorithm::BcastChain | Algorithm::BarrierTree)
            }
        })
        .filter(|a| {
            ranks.is_power_of_two()
                || !matches!(
                    a,
                    Algorithm::AllgatherRecursiveDoubling | Algorithm::BcastScatterRdAllgather
                )
        })
        .collect()
}

/// The rules file's message size of a grid size: allgather and alltoall
/// rules are looked up by the whole exchange, block × communicator size
/// (coll_tuned_decision_dynamic.c), the others by the message.
fn rule_bytes(coll: Collective, m: u64, p: u32) -> u64 {
    match coll {
        Collective::Allgather | Collective::Alltoall => m.saturating_mul(u64::from(p)),
        _ => m,
    }
}

/// MPICH's default MPIR algorithm at (coll, ranks, m): what its built-in
/// tree picks (`select::Library::schedule` between nodes), by name.
fn mpich_default(coll: Collective, ranks: usize, m: u64) -> &'static str {
    use select::Schedule as S;
    match select::Library::Mpich40.schedule(coll, ranks, m, false) {
        S::BcastScatterRd => "MPIR_Bcast_intra_scatter_recursive_doubling_allgather",
        S::BcastScatterRing => "MPIR_Bcast_intra_scatter_ring_allgather",
        S::ReduceRabenseifner => "MPIR_Reduce_intra_reduce_scatter_gather",
        S::ReduceBinomial => "MPIR_Reduce_intra_binomial",
        S::AllreduceRabenseifner => "MPIR_Allreduce_intra_reduce_scatter_allgather",
        S::AllreduceRecursiveDoubling => "MPIR_Allreduce_intra_recursive_doubling",
        S::AllgatherRecursiveDoubling => "MPIR_Allgather_intra_recursive_doubling",
        S::AllgatherBruck => "MPIR_Allgather_intra_brucks",
        S::AllgatherRing => "MPIR_Allgather_intra_ring",
        S::AlltoallBruck => "MPIR_Alltoall_intra_brucks",
        S::AlltoallLinear => "MPIR_Alltoall_intra_scattered",
        S::AlltoallPairwise => "MPIR_Alltoall_intra_pairwise",
        S::BarrierDissemination => "MPIR_Barrier_intra_dissemination",
        _ => match coll {
            Collective::Bcast => "MPIR_Bcast_intra_binomial",
            Collective::Reduce => "MPIR_Reduce_intra_binomial",
            Collective::Allreduce => "MPIR_Allreduce_intra_recursive_doubling",
            Collective::Allgather => "MPIR_Allgather_intra_ring",
            Collective::Alltoall => "MPIR_Alltoall_intra_pairwise",
            Collective::Barrier => "MPIR_Barrier_intra_dissemination",
        },
    }
}

/// The all-ranks exchange ranges measured for one communicator size (see
/// [`crate::predict::exchange_of`]).
pub type Exchanges = [(u32, Vec<Params>)];

/// The network the selector sees for `p` ranks: the pair's ranges, with the
/// exchange measured for `p` ranks if there is one.
fn network_for<'a>(net: &'a [Params], exchanges: &'a Exchanges, p: u32) -> Measured<'a> {
    Measured {
        pair: net,
        exchange: exchanges
            .iter()
            .find(|(q, _)| *q == p)
            .map_or(&[][..], |(_, x)| x.as_slice()),
        exchange_ranks: p as usize,
    }
}

/// Build the coll/tuned rules for the given communicator sizes.
pub fn ompi_rules(
    net: &[Params],
    exchanges: &Exchanges,
    comm_sizes: &[u32],
    max_bytes: u64,
    opts: &RuleOptions,
) -> Result<OmpiRules> {
    let s_bytes = net.at(max_bytes)?.S_bytes;
    let grid = size_grid(max_bytes, (s_bytes != u64::MAX).then_some(s_bytes));
    let lib = select::Library::OpenMpi41;
    let mut rules = OmpiRules::default();
    for (coll, id) in [
        (Collective::Allgather, OMPI_ALLGATHER),
        (Collective::Allreduce, OMPI_ALLREDUCE),
        (Collective::Alltoall, OMPI_ALLTOALL),
        (Collective::Barrier, OMPI_BARRIER),
        (Collective::Bcast, OMPI_BCAST),
        (Collective::Reduce, OMPI_REDUCE),
    ] {
        let mut comms = Vec::new();
        for &p in comm_sizes {
            let n = network_for(net, exchanges, p);
            let ours = exportable(lib, p as usize);
            let runs = choice_runs(&n, lib, coll, p as usize, &grid, &ours, opts)?;
            let mut msgs: Vec<OmpiMsgRule> = Vec::new();
            for (m, c) in runs {
                let (alg, faninout, segsize) = c.as_ref().map_or((0, 0, 0), ompi_mapping);
                // Adjacent choices may map onto the same Open MPI rule.
                if msgs
                    .last()
                    .is_some_and(|r| r.alg == alg && r.faninout == faninout && r.segsize == segsize)
                {
                    continue;
                }
                msgs.push(OmpiMsgRule {
                    msg_bytes: if msgs.is_empty() {
                        0
                    } else {
                        rule_bytes(coll, m, p)
                    },
                    alg,
                    faninout,
                    segsize,
                });
            }
            comms.push(OmpiCommRule { comm_size: p, msgs });
        }
        rules.colls.push(OmpiCollRule { coll_id: id, comms });
    }
    Ok(rules)
}

/// MPICH selection JSON for the given communicator sizes.
pub fn mpich_json(
    net: &[Params],
    exchanges: &Exchanges,
    comm_sizes: &[u32],
    max_bytes: u64,
    opts: &RuleOptions,
) -> Result<serde_json::Value> {
    use serde_json::{Map, Value};
    let s_bytes = net.at(max_bytes)?.S_bytes;
    let grid = size_grid(max_bytes, (s_bytes != u64::MAX).then_some(s_bytes));
    let lib = select::Library::Mpich40;
    let leaf = |name: &str| {
        let mut m = Map::new();
        m.insert(format!("algorithm={name}"), Value::Object(Map::new()));
        Value::Object(m)
    };
    let obj = |v: Value| match v {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut root = Map::new();
    for coll in Collective::ALL {
        let mut by_size = Map::new();
        let n = comm_sizes.len();
        for (i, &p) in comm_sizes.iter().enumerate() {
            let nw = network_for(net, exchanges, p);
            let ours = exportable(lib, p as usize);
            let runs = choice_runs(&nw, lib, coll, p as usize, &grid, &ours, opts)?;
            let name = |m: u64, c: &Option<select::Choice>| {
                c.as_ref()
                    .and_then(|c| c.algorithm())
                    .map_or_else(|| mpich_default(coll, p as usize, m), mpich_name)
            };
            let mut by_msg = Map::new();
            if coll == Collective::Barrier {
                by_msg = obj(leaf(name(0, &runs[0].1)));
            } else {
                // Allgather trees are keyed by the whole exchange, the
                // others by one rank's message.
                let key = if coll == Collective::Allgather {
                    "total_msg_size"
                } else {
                    "avg_msg_size"
                };
                // Run j covers [start_j, start_{j+1} − 1]; the last is "any".
                for (j, (start, c)) in runs.iter().enumerate() {
                    let k = match runs.get(j + 1) {
                        Some((next, _)) => format!("{key}<={}", rule_bytes(coll, *next, p) - 1),
                        None => format!("{key}=any"),
                    };
                    by_msg.insert(k, leaf(name(*start, c)));
                }
            }
            // What the chosen algorithms cannot do stays MPICH's: in-place
            // alltoall, non-commutative reductions.
            match coll {
                Collective::Alltoall => {
                    let mut g = Map::new();
                    g.insert(
                        "is_sendbuf_inplace=yes".into(),
                        leaf("MPIR_Alltoall_intra_pairwise_sendrecv_replace"),
                    );
                    g.insert("is_sendbuf_inplace=no".into(), Value::Object(by_msg));
                    by_msg = g;
                }
                Collective::Allreduce | Collective::Reduce => {
                    let safe = if coll == Collective::Reduce {
                        "MPIR_Reduce_intra_binomial"
                    } else {
                        "MPIR_Allreduce_intra_recursive_doubling"
                    };
                    let mut g = Map::new();
                    g.insert("is_commutative=no".into(), leaf(safe));
                    g.insert("is_commutative=yes".into(), Value::Object(by_msg));
                    by_msg = g;
                }
                _ => {}
            }
            let key = if i + 1 == n {
                "comm_size=any".to_string()
            } else {
                format!("comm_size<={p}")
            };
            by_size.insert(key, Value::Object(by_msg));
        }
        let inter = match coll {
            Collective::Bcast => "MPIR_Bcast_inter_remote_send_local_bcast",
            Collective::Allreduce => "MPIR_Allreduce_inter_reduce_exchange_bcast",
            Collective::Barrier => "MPIR_Barrier_inter_bcast",
            Collective::Reduce => "MPIR_Reduce_inter_local_reduce_remote_send",
            Collective::Allgather => "MPIR_Allgather_inter_local_gather_remote_bcast",
            Collective::Alltoall => "MPIR_Alltoall_inter_pairwise_exchange",
        };
        let mut kinds = Map::new();
        kinds.insert("comm_type=intra".into(), Value::Object(by_size));
        kinds.insert("comm_type=inter".into(), leaf(inter));
        root.insert(format!("collective={}", coll.name()), Value::Object(kinds));
    }
    Ok(Value::Object(root))
}

/// LogGOPSim flags. `picoseconds` scales every time by 1000.
pub fn loggopsim(e: &EntryData, picoseconds: bool) -> String {
    let first = e.ranges.first().cloned().unwrap_or_default();
    // The bandwidth that matters most for a simulation is that of large
    // messages: the last range's G.
    let last = e.ranges.last().cloned().unwrap_or_default();
    let scale = if picoseconds { 1000.0 } else { 1.0 };
    let r = |x: f64| (x * scale).round().max(0.0) as i64;
    let o = 0.5 * (first.o_s_ns + first.o_r_ns);
    let s = e.S_bytes.unwrap_or(i32::MAX as u64).min(i32::MAX as u64);
    format!(
        "-L {} -o {} -g {} -G {} -O {} -S {}",
        r(e.L_ns.max(0.0)),
        r(o),
        r(first.g_ns),
        r(last.G_ns_per_byte),
        r(0.5 * (last.O_s_ns_per_byte + last.O_r_ns_per_byte)),
        s
    )
}

/// Netgauge loggp.out rows (n = 10) synthesized from the fit.
pub fn netgauge_out(e: &EntryData) -> String {
    let n = 10u32;
    let nets = e.params();
    let mut s = String::from(
        "# size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,PRTT(1,0,s),s) L o_s o_r g G lsqu(g,G)\n",
    );
    s.push_str("# to get o: plot \"./loggp.out\" using 1:(($5-$3)/($2-1)-$3)\n");
    s.push_str("# to get g,G: plot \"./loggp.out\" using 1:($4-$3)/($2-1)\n");
    let _ = writeln!(
        s,
        "# generated by netgauged from the fitted model of {} over {} (times in us)",
        e.peer, e.transport
    );
    let max = e.ranges.last().map_or(1, |r| r.to_bytes.max(1));
    let mut sizes = vec![1u64];
    let mut k = 2u64;
    while k <= max {
        sizes.push(k);
        k *= 2;
    }
    for r in &e.ranges {
        sizes.push(r.from_bytes.max(1));
        sizes.push(r.to_bytes.max(1));
    }
    sizes.sort_unstable();
    sizes.dedup();
    let us = |ns: f64| ns / 1000.0;
    for size in sizes {
        let Ok(p) = nets[..].at(size) else { continue };
        let k = (size - 1) as f64;
        let o_s = netgauge::line_ns(p.o_s_ns, p.O_s_ns_per_byte, size);
        let o_r = netgauge::line_ns(p.o_r_ns, p.O_r_ns_per_byte, size);
        let rndv = if p.S_bytes != u64::MAX && size > p.S_bytes {
            2.0 * p.eel_ns
        } else {
            0.0
        };
        let prtt1 = 2.0 * (p.L_ns + o_s + o_r + k * p.G_ns_per_byte + rndv);
        let gap = p.gap_ns(size);
        let prttn = prtt1 + f64::from(n - 1) * gap;
        let prttd = prtt1 + f64::from(n - 1) * (o_s + prtt1);
        let _ = writeln!(
            s,
            "{} {} {:.6} {:.6} {:.6} {:.6} {:.6} {:.6} {:.6} {:.9} {:.6}",
            size,
            n,
            us(prtt1),
            us(prttn),
            us(prttd),
            us(p.L_ns),
            us(o_s),
            us(o_r),
            us(p.g_ns),
            us(p.G_ns_per_byte),
            0.0
        );
    }
    s
}

/// SimGrid SMPI `--cfg=` options.
pub fn smpi(e: &EntryData) -> String {
    let sec = |ns: f64| ns * 1e-9;
    let piece = |o: fn(&netgauge::RangeData) -> (f64, f64)| {
        e.ranges
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let (at1, slope) = o(r);
                // SMPI: overhead(s) = offset + s·factor for s ≥ size. Our
                // o(s) = o' + (s−1)·O, so offset = o' − O.
                let from = if i == 0 { 0 } else { r.from_bytes };
                format!(
                    "{}:{:e}:{:e}",
                    from,
                    sec((at1 - slope).max(0.0)),
                    sec(slope.max(0.0))
                )
            })
            .collect::<Vec<_>>()
            .join(";")
    };
    let os = piece(|r| (r.o_s_ns, r.O_s_ns_per_byte));
    let or = piece(|r| (r.o_r_ns, r.O_r_ns_per_byte));
    let mut s = String::new();
    let _ = writeln!(s, "--cfg=smpi/os:{os}");
    let _ = writeln!(s, "--cfg=smpi/or:{or}");
    if let Some(th) = e.S_bytes {
        let _ = writeln!(s, "--cfg=smpi/async-small-thresh:{th}");
        let _ = writeln!(s, "--cfg=smpi/send-is-detached-thresh:{th}");
    }
    s
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
    /// Peer of the entry (None: the first of the transport).
    pub peer: Option<String>,
    pub transport: String,
    /// Communicator sizes of the ompi-rules / mpich-json tables.
    pub comm_sizes: Vec<u32>,
    /// Largest message size the rule tables consider.
    pub max_bytes: u64,
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node, as for `ngctl predict` (0: one per
    /// rank). The rule tables then assume this many cores per communicator.
    pub cores: usize,
    /// ompi-rules / mpich-json: how much faster one of our choices must be
    /// predicted to replace the library's own (see `select::choose`).
    pub margin: f64,
    /// LogGOPSim time unit: "ns" (its defaults) or "ps" (for G below 1
    /// ns/byte).
    pub loggopsim_unit: String,
}

/// Render one export of `entry` (with the exchange ranges measured for some
/// communicator sizes, which the rule exports use for those sizes).
pub fn render(args: &ExportArgs, entry: &EntryData, exchanges: &Exchanges) -> Result<String> {
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
    };
    let mut sizes = args.comm_sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    sizes.retain(|&p| p >= 1);
    if sizes.is_empty() {
        return Err(bad("--comm-sizes needs at least one size ≥ 1".into()));
    }
    Ok(match args.format {
        Format::Loggopsim => {
            let ps = match args.loggopsim_unit.as_str() {
                "ns" => false,
                "ps" => true,
                u => return Err(bad(format!("unknown --loggopsim-unit {u:?} (ns or ps)"))),
            };
            format!("{}\n", loggopsim(entry, ps))
        }
        Format::Netgauge => netgauge_out(entry),
        Format::Smpi => smpi(entry),
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

/// The export of the segment's entry that `args` names.
pub fn run(args: &ExportArgs) -> Result<String> {
    let shm = args.shm.as_deref();
    let entries = load_entries(shm)?;
    let entry = find_entry(&entries, shm, args.peer.as_deref(), &args.transport)?;
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
    render(args, &entry, &exchanges)
}
