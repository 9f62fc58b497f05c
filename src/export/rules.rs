//! The rule exports: Open MPI coll/tuned's dynamic rules file and MPICH's
//! collective-selection JSON (see the module documentation of
//! [`crate::export`]).

use std::fmt::Write as _;

use netgauge::select::{self, Algorithm, Collective, Measured, Network, SelectOptions};
use netgauge::Params;

use super::{bad, Result};

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

/// The MPICH 4.0 algorithm container of one of ours, None where MPICH has
/// no such algorithm: its selection asserts on a name it does not know
/// (`unrecognized key`), so a close relative is never written in its place.
/// MPICH 4.0 has no ring allreduce, no plain chain broadcast, no tree
/// barrier and no linear allgather or allreduce.
pub fn mpich_name(a: Algorithm) -> Option<&'static str> {
    Some(match a {
        Algorithm::BcastBinomial => "MPIR_Bcast_intra_binomial",
        Algorithm::BcastScatterRdAllgather => {
            "MPIR_Bcast_intra_scatter_recursive_doubling_allgather"
        }
        Algorithm::BcastScatterRingAllgather => "MPIR_Bcast_intra_scatter_ring_allgather",
        Algorithm::AllreduceRecursiveDoubling => "MPIR_Allreduce_intra_recursive_doubling",
        Algorithm::AllreduceRabenseifner => "MPIR_Allreduce_intra_reduce_scatter_allgather",
        Algorithm::BarrierDissemination => "MPIR_Barrier_intra_dissemination",
        Algorithm::ReduceBinomial => "MPIR_Reduce_intra_binomial",
        Algorithm::ReduceRabenseifner => "MPIR_Reduce_intra_reduce_scatter_gather",
        Algorithm::AllgatherRecursiveDoubling => "MPIR_Allgather_intra_recursive_doubling",
        Algorithm::AllgatherRing => "MPIR_Allgather_intra_ring",
        Algorithm::AlltoallPairwise => "MPIR_Alltoall_intra_pairwise",
        Algorithm::AlltoallLinear => "MPIR_Alltoall_intra_scattered",
        Algorithm::BcastChain
        | Algorithm::AllreduceRing
        | Algorithm::BarrierTree
        | Algorithm::AllgatherLinear
        | Algorithm::AllreduceLinear => return None,
    })
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
pub struct RuleOptions<'a> {
    pub select: SelectOptions,
    /// See [`ExportArgs::margin`].
    pub margin: f64,
    /// The parameters are of ranks on one node (an MPI probe's entry)
    /// rather than between nodes.
    pub one_node: bool,
    /// First writes to freshly mapped memory, ns per byte (the buffers a
    /// library allocates per call; measured on the exporting host).
    pub fresh_ns_per_byte: f64,
    /// The transport's contention record (penalties the selector uses),
    /// if the segment has one.
    pub contention: Option<netgauge::TransportExt>,
    /// Classes libngcoll's trials gave back to the library's own: left to
    /// it whatever the model predicts ([`super::verdicts`]).
    pub vetoes: &'a super::verdicts::Verdicts,
}

/// The model's view options for a library running what a rules file names.
fn run_by(lib: select::Library, opts: &RuleOptions) -> select::ViewOptions {
    select::ViewOptions {
        gamma_ns_per_byte: opts.select.gamma_ns_per_byte,
        cores: opts.select.cores,
        spin_slice_ns: SPIN_SLICE_NS,
        fresh_ns_per_byte: opts.fresh_ns_per_byte,
        ours_run_by: Some(lib),
        path_ns: 0.0,
    }
}

/// The size grid with the bounds of every vetoed class of (`coll`,
/// `ranks`) added, so that the library's own covers that class exactly:
/// not a class between two grid sizes missed, nor its neighbour up to the
/// next grid size taken with it. `verified`: the classes of verification
/// runs too (for the Open MPI file they measured).
fn grid_with_vetoes(
    grid: &[u64],
    coll: Collective,
    ranks: usize,
    opts: &RuleOptions,
    verified: bool,
) -> Vec<u64> {
    let top = grid.last().copied().unwrap_or(0);
    let mut grid = grid.to_vec();
    grid.extend(
        opts.vetoes
            .bounds(coll, ranks, opts.one_node, verified)
            .filter(|&b| b <= top),
    );
    grid.sort_unstable();
    grid.dedup();
    grid
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
    // A rules file makes the library run the algorithm it names: ours are
    // priced as the library's implementation of them.
    let view = run_by(lib, opts);
    let mut runs: Vec<(u64, Option<select::Choice>)> = Vec::new();
    for m in grid_with_vetoes(grid, coll, ranks, opts, false) {
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
        let measured_slower = opts.vetoes.vetoes(coll, ranks, opts.one_node, m);
        let c = d.ours.filter(|_| !measured_slower).map(|o| select::Choice {
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

/// Whether libngcoll runs a schedule of this kind as one of ours (any
/// segment size): its trials then measured it against the library's own,
/// and a class whose trial kept the library's own vetoes it.
fn libngcoll_runs(lib: select::Library, s: select::Schedule) -> bool {
    Algorithm::ALL.iter().any(|&a| {
        std::mem::discriminant(&lib.implementation(select::Schedule::of(a, 0)))
            == std::mem::discriminant(&s)
    })
}

/// What an Open MPI rule names: (algorithm, fan-in/out, segment size).
type OmpiAlg = (u32, u32, u64);

/// Open MPI's rules over the size grid as (first size, (algorithm,
/// fan-in/out, segment size)) runs, (0, 0, 0) for its own fixed decision:
/// at every size the best of the algorithms a rules file can name
/// ([`select::ompi_rule_algorithms`]) where the model predicts it clearly
/// faster than the fixed decision ([`select::choose_named`]). A class where
/// the library's own was measured faster (a libngcoll trial, a
/// verification run) is left to the fixed decision; one libngcoll's plan
/// gave to the library loses the algorithms libngcoll runs as ours
/// ([`super::verdicts`]).
fn ompi_runs<N: Network + ?Sized>(
    net: &N,
    coll: Collective,
    ranks: usize,
    grid: &[u64],
    opts: &RuleOptions,
) -> Result<Vec<(u64, OmpiAlg)>> {
    let lib = select::Library::OpenMpi41;
    let view = run_by(lib, opts);
    let mut runs: Vec<(u64, OmpiAlg)> = Vec::new();
    for m in grid_with_vetoes(grid, coll, ranks, opts, true) {
        // Measured slower there: the fixed decision. Given to the library
        // by libngcoll's plan: not the algorithms libngcoll runs as ours.
        let measured = opts.vetoes.measured(coll, ranks, opts.one_node, m);
        let planned = opts.vetoes.vetoes(coll, ranks, opts.one_node, m);
        let candidates: Vec<(OmpiAlg, select::Schedule)> = if measured {
            Vec::new()
        } else {
            select::ompi_rule_algorithms(coll, ranks, m)
                .into_iter()
                .filter(|r| !(planned && libngcoll_runs(lib, r.schedule)))
                .map(|r| ((r.number, r.faninout, r.segsize), r.schedule))
                .collect()
        };
        let call = select::Call {
            lib,
            coll,
            ranks,
            bytes: m,
            one_node: opts.one_node,
        };
        let library =
            select::LibraryChoice::of(net, &call, &view).map_err(|e| bad(e.to_string()))?;
        let chosen = select::choose_named(net, &call, &library, &candidates, &view, opts.margin)
            .map_err(|e| bad(e.to_string()))?
            .map_or((0, 0, 0), |(rule, _)| rule);
        if runs.last().is_none_or(|(_, prev)| *prev != chosen) {
            runs.push((m, chosen));
        }
        if coll == Collective::Barrier {
            break;
        }
    }
    Ok(runs)
}

/// The algorithms of ours MPICH can be told to run.
fn mpich_exportable(ranks: usize) -> Vec<Algorithm> {
    Algorithm::ALL
        .into_iter()
        .filter(|a| mpich_name(*a).is_some())
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
fn network_for<'a>(
    net: &'a [Params],
    exchanges: &'a Exchanges,
    p: u32,
    contention: Option<&'a netgauge::TransportExt>,
) -> Measured<'a> {
    Measured {
        contention,
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
            let n = network_for(net, exchanges, p, opts.contention.as_ref());
            let runs = ompi_runs(&n, coll, p as usize, &grid, opts)?;
            let mut msgs: Vec<OmpiMsgRule> = Vec::new();
            for (m, (alg, faninout, segsize)) in runs {
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

/// The MPICH leaves of one (collective, communicator size) as (first
/// size, algorithm name), adjacent equal names merged. Where the choice is
/// MPICH's own, its default changes at its own thresholds, which need not
/// be on the grid: each run of the library's own choice is split where
/// the default's name changes (found by bisection between grid sizes).
fn mpich_leaves(
    runs: &[(u64, Option<select::Choice>)],
    max_bytes: u64,
    name: impl Fn(u64, &Option<select::Choice>) -> &'static str,
) -> Vec<(u64, &'static str)> {
    let mut out: Vec<(u64, &'static str)> = Vec::new();
    let mut push = |m: u64, n: &'static str| {
        if out.last().is_none_or(|(_, prev)| *prev != n) {
            out.push((m, n));
        }
    };
    for (j, (start, c)) in runs.iter().enumerate() {
        let end = runs.get(j + 1).map_or(max_bytes.saturating_add(1), |r| r.0);
        let mut at = *start;
        push(at, name(at, c));
        // The first size in (at, end) whose name differs, while there is one.
        while at < end && name(end - 1, c) != name(at, c) {
            let (mut lo, mut hi) = (at, end - 1);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if name(mid, c) == name(at, c) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            at = hi;
            push(at, name(at, c));
        }
    }
    out
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
            let nw = network_for(net, exchanges, p, opts.contention.as_ref());
            let ours = mpich_exportable(p as usize);
            let runs = choice_runs(&nw, lib, coll, p as usize, &grid, &ours, opts)?;
            let name = |m: u64, c: &Option<select::Choice>| {
                c.as_ref()
                    .and_then(|c| c.algorithm())
                    .and_then(mpich_name)
                    .unwrap_or_else(|| mpich_default(coll, p as usize, m))
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
                // Leaf j covers [start_j, start_{j+1} − 1]; the last is "any".
                let leaves = mpich_leaves(&runs, max_bytes, |m, c| name(m, c));
                for (j, (_, alg)) in leaves.iter().enumerate() {
                    let k = match leaves.get(j + 1) {
                        Some((next, _)) => {
                            let bound = rule_bytes(coll, *next, p) - 1;
                            if bound > i32::MAX as u64 {
                                return Err(bad(format!(
                                    "MPICH reads message sizes as int: {key}<={bound} is too \
                                     large (lower --max-bytes or --comm-sizes)"
                                )));
                            }
                            format!("{key}<={bound}")
                        }
                        None => format!("{key}=any"),
                    };
                    by_msg.insert(k, leaf(alg));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_is_told_only_what_it_can_run() {
        for p in [3, 4, 8] {
            let ours = mpich_exportable(p);
            for a in [Algorithm::AllgatherLinear, Algorithm::AllreduceLinear] {
                assert!(!ours.contains(&a), "{p} {a:?}");
            }
            for a in ours {
                assert!(mpich_name(a).is_some(), "MPICH cannot run {a:?}");
            }
            // Open MPI: every algorithm a rules file may name is one of
            // coll/tuned's numbers for that collective, with a fan-in/out
            // only on the chains and a segment smaller than the message.
            for coll in Collective::ALL {
                for m in [0u64, 4, 4096, 1 << 20] {
                    for r in select::ompi_rule_algorithms(coll, p, m) {
                        let top = match coll {
                            Collective::Bcast => 9,
                            Collective::Reduce => 7,
                            Collective::Allreduce => 6,
                            Collective::Allgather => 5,
                            Collective::Alltoall => 3,
                            Collective::Barrier => 6,
                        };
                        assert!((1..=top).contains(&r.number), "{coll:?} {r:?}");
                        assert!(r.segsize < m.max(1), "{coll:?} {m} {r:?}");
                        let chain = matches!(
                            r.schedule,
                            select::Schedule::BcastChain { .. }
                                | select::Schedule::ReduceChain { .. }
                        );
                        assert_eq!(r.faninout, u32::from(chain), "{coll:?} {r:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn libngcoll_runs_the_schedules_of_ours_only() {
        use select::Schedule as S;
        let lib = select::Library::OpenMpi41;
        for s in [
            S::BcastBinomial,
            S::BcastChain { seg: 8192 },
            S::ReduceBinomialAlloc,
            S::AllgatherRing,
        ] {
            assert!(libngcoll_runs(lib, s), "{s:?}");
        }
        for s in [
            S::BcastLinear,
            S::BcastBinary,
            S::ReduceLinear,
            S::ReduceChain { seg: 1024 },
            S::AlltoallBruck,
        ] {
            assert!(!libngcoll_runs(lib, s), "{s:?}");
        }
    }
}
