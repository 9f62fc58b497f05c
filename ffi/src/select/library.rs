//! The MPI libraries' own choices, as the model prices them: Open MPI
//! 4.1's coll/tuned fixed decision functions and MPICH 4.0's default
//! selection (its built-in JSON trees), each mapped onto a [`Schedule`].
//!
//! Open MPI: the thresholds below are those of
//! `ompi/mca/coll/tuned/coll_tuned_decision_fixed.c` in v4.1.4 (the
//! branches for commutative operations), written out as data: per
//! communicator size (first rule that matches), the algorithm number for
//! the first message-size bound the size is below (`u64::MAX`: any). The
//! message size is the one coll/tuned decides on: count × type size
//! (allgather and alltoall: one rank's block). Its decision calls the
//! algorithms with segment size 0 and fan-out 0, which means unsegmented
//! and (chain, pipeline) a chain of fan-out 1; the k-nomial broadcast has
//! radix 4 (`coll_tuned_bcast_knomial_radix`).
//!
//! MPICH 4.0 (ch4 with its POSIX shared-memory module): for ranks on one
//! node, broadcast, reduce, allreduce and barrier take the shared-memory
//! release/gather algorithms (`maint/tuning/coll/ch4/generic.json` and
//! `posix_generic.json`); allgather and alltoall go through the generic
//! trees of `maint/tuning/coll/mpir/generic.json`, which also decide for
//! communicators spanning nodes. MPICH's waits spin: they never give the
//! core away, which matters when ranks share cores ([`Library::spins`]).

use super::schedule::Schedule;
use super::Collective;

/// Which communicator sizes a rule covers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Comm {
    Lt(u32),
    Eq(u32),
    Any,
}

/// One communicator-size rule: (message-size bound, algorithm) in order.
pub(super) type CommRule = (Comm, &'static [(u64, u8)]);

/// The MPI library whose own choice is the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Library {
    OpenMpi41,
    Mpich40,
}

impl Library {
    pub fn name(self) -> &'static str {
        match self {
            Library::OpenMpi41 => "Open MPI 4.1",
            Library::Mpich40 => "MPICH 4.0",
        }
    }

    /// The library's waits spin without giving the core away (MPICH);
    /// Open MPI yields when it runs oversubscribed.
    pub fn spins(self) -> bool {
        matches!(self, Library::Mpich40)
    }

    /// Calls of `sched` over `m` bytes back to back from one root never wait
    /// on a spinning rank: MPICH's intra-node release-gather broadcast
    /// keeps 4 cells of 8 KiB (`MPIR_CVAR_BCAST_INTRANODE_BUFFER_TOTAL_SIZE`
    /// 32 KiB over `MPIR_CVAR_BCAST_INTRANODE_NUM_CELLS` 4), so a root runs
    /// up to 4 calls ahead of its readers while a message fits one cell.
    pub fn root_runs_ahead(self, sched: Schedule, m: u64) -> bool {
        matches!(self, Library::Mpich40)
            && sched == Schedule::BcastShm
            && m <= MPICH_BCAST_CELL_BYTES
    }

    /// What the library runs when a rules file names the algorithm that
    /// `ours` is (an exported choice runs the library's implementation):
    /// Open MPI's binomial reduce allocates its buffers on every call.
    pub fn implementation(self, ours: Schedule) -> Schedule {
        match (self, ours) {
            (Library::OpenMpi41, Schedule::ReduceBinomial) => Schedule::ReduceBinomialAlloc,
            (Library::OpenMpi41, Schedule::ReduceRabenseifner) => Schedule::ReduceRabenseifnerAlloc,
            (_, s) => s,
        }
    }

    /// What the library runs for `coll` over `p` ranks and `bytes` (a
    /// commutative predefined operation; allgather, alltoall: the block of
    /// one rank). `one_node`: every rank shares one node.
    pub fn schedule(self, coll: Collective, p: usize, bytes: u64, one_node: bool) -> Schedule {
        match self {
            Library::OpenMpi41 => ompi(coll, p, bytes),
            Library::Mpich40 => mpich(coll, p, bytes, one_node),
        }
    }
}

/// One algorithm an Open MPI 4.1 rules file can name: its coll/tuned
/// number, fan-in/out and segment size as the file writes them, and the
/// schedule the model prices it by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleAlgorithm {
    pub number: u32,
    pub faninout: u32,
    pub segsize: u64,
    pub schedule: Schedule,
}

/// Open MPI 4.1.4's algorithms that return wrong data for some valid
/// calls, as (collective, coll/tuned number): the Bruck alltoall (3) lays
/// the send datatype over the receive buffer, so its result is wrong when
/// the two datatypes' type maps differ (bench/ngcoll.md). Neither a rules
/// file nor libngcoll chooses them; the library's own fixed decision may.
pub const OMPI_WRONG_DATA: [(Collective, u32); 1] = [(Collective::Alltoall, 3)];

/// The algorithms a rules file may name for `coll` over `p` ranks and `m`
/// bytes: [`ompi_tuned_algorithms`] less those of [`OMPI_WRONG_DATA`].
pub fn ompi_rule_algorithms(coll: Collective, p: usize, m: u64) -> Vec<RuleAlgorithm> {
    let mut v = ompi_tuned_algorithms(coll, p, m);
    v.retain(|r| !OMPI_WRONG_DATA.contains(&(coll, r.number)));
    v
}

/// The algorithms of Open MPI 4.1's coll/tuned that a rules file can make
/// it run for `coll` over `p` ranks and `m` bytes, each with the schedule
/// the model has for it (as [`Library::schedule`] prices the same numbers
/// in the fixed decision). Left out: what the model has no schedule for
/// (the chains of fan-out above 1, the split binary tree, the in-order
/// binary reduce, the double-ring barrier, the allreduce and allgather
/// built from other collectives, two-process algorithms), and the
/// algorithms that fall back to another below an element count, at sizes
/// where they might: the ring allreduce (fewer elements than ranks: to
/// recursive doubling), Rabenseifner's allreduce and reduce (fewer than
/// the largest power of two ≤ P: to the basic linear ones) and the
/// scatter-allgather broadcasts (fewer than P: to the linear one). A rule
/// holds from its size upwards, and the rules see bytes, not elements:
/// those algorithms are offered only from [`MAX_ELEMENT_BYTES`] × that
/// count on, where no type of 8 bytes or less has fewer elements (16- and
/// 32-byte types, long double and the complex ones, still may).
pub fn ompi_tuned_algorithms(coll: Collective, p: usize, m: u64) -> Vec<RuleAlgorithm> {
    // Whether every predefined type has at least `n` elements in m bytes.
    let holds = |n: usize| m >= MAX_ELEMENT_BYTES * n as u64;
    let pow2_floor = 1usize << p.max(1).ilog2();
    use Schedule::*;
    let plain = |number: u32, schedule: Schedule| RuleAlgorithm {
        number,
        faninout: 0,
        segsize: 0,
        schedule,
    };
    // A chain of fan-out 1, cut into segments of `seg` bytes (the whole
    // message: segment size 0).
    let chain = |number: u32, seg: u64, schedule: Schedule| RuleAlgorithm {
        number,
        faninout: 1,
        segsize: if seg >= m { 0 } else { seg },
        schedule,
    };
    let pow2 = p.is_power_of_two();
    match coll {
        Collective::Bcast => {
            let mut v = vec![
                plain(1, BcastLinear),
                plain(5, BcastBinary),
                plain(6, BcastBinomial),
                plain(7, BcastKnomial { radix: 4 }),
            ];
            if holds(p) {
                v.push(plain(9, BcastScatterRing));
                if pow2 {
                    v.push(plain(8, BcastScatterRd));
                }
            }
            v.extend(super::chain_segments(m).map(|s| chain(3, s, BcastChain { seg: s })));
            v
        }
        Collective::Reduce => {
            let mut v = vec![
                plain(1, ReduceLinear),
                plain(4, ReduceBinary),
                plain(5, ReduceBinomialAlloc),
            ];
            if holds(pow2_floor) {
                v.push(plain(7, ReduceRabenseifnerAlloc));
            }
            v.extend(super::chain_segments(m).map(|s| chain(2, s, ReduceChain { seg: s })));
            v
        }
        Collective::Allreduce => {
            let mut v = vec![plain(3, AllreduceRecursiveDoubling)];
            if holds(p) {
                v.push(plain(4, AllreduceRing));
            }
            if holds(pow2_floor) {
                v.push(plain(6, AllreduceRabenseifner));
            }
            v
        }
        Collective::Allgather => {
            let mut v = vec![plain(2, AllgatherBruck), plain(4, AllgatherRing)];
            if pow2 {
                v.push(plain(3, AllgatherRecursiveDoubling));
            }
            if p % 2 == 0 {
                v.push(plain(5, AllgatherNeighbor));
            }
            v
        }
        Collective::Alltoall => vec![
            plain(1, AlltoallLinear),
            plain(2, AlltoallPairwise),
            plain(3, AlltoallBruck),
        ],
        Collective::Barrier => vec![
            plain(1, BarrierLinear),
            plain(3, BarrierRecursiveDoubling),
            plain(4, BarrierDissemination),
            plain(6, BarrierTree),
        ],
    }
}

/// The largest element of a predefined type a collective is likely to
/// carry (double, 64-bit integers), bytes: below this many bytes per
/// element needed, an element-count fallback may be taken.
pub const MAX_ELEMENT_BYTES: u64 = 8;

/// The cell of MPICH 4.0's intra-node broadcast buffer (its defaults).
pub const MPICH_BCAST_CELL_BYTES: u64 = 8192;

/// The algorithm number of a table for (p, bytes).
fn lookup(table: &[CommRule], p: usize, bytes: u64) -> u8 {
    let p = u32::try_from(p).unwrap_or(u32::MAX);
    for &(c, sizes) in table {
        let hit = match c {
            Comm::Lt(n) => p < n,
            Comm::Eq(n) => p == n,
            Comm::Any => true,
        };
        if hit {
            for &(bound, alg) in sizes {
                if bytes < bound || bound == u64::MAX {
                    return alg;
                }
            }
        }
    }
    0
}

fn ompi(coll: Collective, p: usize, m: u64) -> Schedule {
    use Schedule::*;
    match coll {
        Collective::Bcast => match lookup(OMPI_BCAST, p, m) {
            1 => BcastLinear,
            2 | 3 => BcastChain { seg: m.max(1) },
            4 | 5 => BcastBinary,
            7 => BcastKnomial { radix: 4 },
            // The scatter-allgathers fall back to the linear broadcast for
            // fewer elements than ranks (elements of 4 bytes taken).
            8 | 9 if m / 4 < p as u64 => BcastLinear,
            8 => BcastScatterRd,
            9 => BcastScatterRing,
            _ => BcastBinomial,
        },
        Collective::Reduce => match lookup(OMPI_REDUCE, p, m) {
            1 => ReduceLinear,
            2 | 3 => ReduceChain { seg: m.max(1) },
            4 | 6 => ReduceBinary,
            // Rabenseifner's falls back to the linear reduce for fewer
            // elements than the largest power of two ≤ P.
            7 if m / 4 >= 1u64 << p.max(1).ilog2() => ReduceRabenseifnerAlloc,
            7 => ReduceLinear,
            _ => ReduceBinomialAlloc,
        },
        // The ring and the segmented ring fall back to recursive doubling
        // for fewer elements than ranks, Rabenseifner to the basic linear
        // reduce and broadcast for fewer than the largest power of two ≤ P
        // (elements of 4 bytes taken: the decision sees bytes only).
        Collective::Allreduce => match lookup(OMPI_ALLREDUCE, p, m) {
            1 | 2 => AllreduceReduceBcast,
            4 | 5 if m / 4 >= p as u64 => AllreduceRing,
            6 if m / 4 >= 1u64 << p.max(1).ilog2() => AllreduceRabenseifner,
            6 => AllreduceReduceBcast,
            _ => AllreduceRecursiveDoubling,
        },
        Collective::Allgather => match lookup(OMPI_ALLGATHER, p, m) {
            2 => AllgatherBruck,
            3 if p.is_power_of_two() => AllgatherRecursiveDoubling,
            3 => AllgatherBruck,
            5 if p % 2 == 0 => AllgatherNeighbor,
            _ => AllgatherRing,
        },
        Collective::Alltoall => match lookup(OMPI_ALLTOALL, p, m) {
            2 | 5 => AlltoallPairwise,
            3 => AlltoallBruck,
            _ => AlltoallLinear,
        },
        Collective::Barrier => match lookup(OMPI_BARRIER, p, 0) {
            1 | 2 => BarrierLinear,
            4 => BarrierDissemination,
            6 => BarrierTree,
            _ => BarrierRecursiveDoubling,
        },
    }
}

fn mpich(coll: Collective, p: usize, m: u64, one_node: bool) -> Schedule {
    use Schedule::*;
    let pow2 = p.is_power_of_two();
    match coll {
        Collective::Bcast if one_node => BcastShm,
        Collective::Reduce if one_node => ReduceShm,
        Collective::Allreduce if one_node => AllreduceShm,
        Collective::Barrier if one_node => BarrierShm,
        Collective::Bcast => {
            if p < 8 || m <= 12288 {
                BcastBinomial
            } else if pow2 && m <= 524_288 {
                BcastScatterRd
            } else {
                BcastScatterRing
            }
        }
        // The count condition ("count < pow2": fewer elements than ranks)
        // is taken as bytes < P.
        Collective::Reduce => {
            if m <= 2048 || m < p as u64 {
                ReduceBinomial
            } else {
                ReduceRabenseifner
            }
        }
        Collective::Allreduce => {
            if m <= 8 || m < p as u64 {
                AllreduceRecursiveDoubling
            } else {
                AllreduceRabenseifner
            }
        }
        Collective::Barrier => BarrierDissemination,
        Collective::Allgather => {
            let total = m.saturating_mul(p as u64);
            if pow2 {
                if total < 524_288 {
                    AllgatherRecursiveDoubling
                } else {
                    AllgatherRing
                }
            } else if total < 81_920 {
                AllgatherBruck
            } else {
                AllgatherRing
            }
        }
        Collective::Alltoall => {
            if p >= 8 && m <= 256 {
                AlltoallBruck
            } else if m <= 32_768 {
                AlltoallLinear
            } else {
                AlltoallPairwise
            }
        }
    }
}

// The tables: one communicator-size rule a line, as the branches of the C
// decision functions read (rustfmt would give every bound a line of its own).
#[rustfmt::skip]
pub(super) const OMPI_BCAST: &[CommRule] = &[
    (Comm::Lt(4), &[(32, 3), (256, 5), (512, 3), (1024, 7), (32768, 1), (131072, 5), (262144, 2), (524288, 1), (1048576, 6), (u64::MAX, 5)]),
    (Comm::Lt(8), &[(64, 5), (128, 6), (2048, 5), (8192, 6), (1048576, 1), (u64::MAX, 2)]),
    (Comm::Lt(16), &[(8, 7), (64, 5), (4096, 7), (16384, 5), (32768, 6), (u64::MAX, 1)]),
    (Comm::Lt(32), &[(4096, 7), (1048576, 6), (u64::MAX, 8)]),
    (Comm::Lt(64), &[(2048, 6), (u64::MAX, 7)]),
    (Comm::Lt(128), &[(u64::MAX, 7)]),
    (Comm::Lt(256), &[(2, 6), (16384, 5), (32768, 1), (65536, 5), (u64::MAX, 7)]),
    (Comm::Lt(1024), &[(16384, 7), (32768, 4), (u64::MAX, 7)]),
    (Comm::Lt(2048), &[(524288, 7), (u64::MAX, 8)]),
    (Comm::Lt(4096), &[(262144, 7), (u64::MAX, 8)]),
    (Comm::Any, &[(8192, 7), (16384, 5), (262144, 7), (u64::MAX, 8)]),
];
#[rustfmt::skip]
pub(super) const OMPI_REDUCE: &[CommRule] = &[
    (Comm::Lt(4), &[(8, 7), (16, 4), (32, 3), (262144, 1), (524288, 3), (1048576, 2), (u64::MAX, 3)]),
    (Comm::Lt(8), &[(4096, 4), (65536, 2), (262144, 5), (524288, 1), (1048576, 5), (u64::MAX, 1)]),
    (Comm::Lt(16), &[(8192, 4), (u64::MAX, 5)]),
    (Comm::Lt(32), &[(4096, 4), (u64::MAX, 5)]),
    (Comm::Lt(256), &[(u64::MAX, 5)]),
    (Comm::Lt(512), &[(8192, 5), (16384, 6), (u64::MAX, 5)]),
    (Comm::Lt(2048), &[(u64::MAX, 5)]),
    (Comm::Lt(4096), &[(512, 5), (1024, 6), (8192, 5), (16384, 6), (u64::MAX, 5)]),
    (Comm::Any, &[(16, 5), (32, 6), (1024, 5), (2048, 6), (8192, 5), (16384, 6), (u64::MAX, 5)]),
];
#[rustfmt::skip]
pub(super) const OMPI_ALLREDUCE: &[CommRule] = &[
    (Comm::Lt(4), &[(8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (u64::MAX, 6)]),
    (Comm::Lt(8), &[(16, 4), (8192, 3), (u64::MAX, 6)]),
    (Comm::Lt(16), &[(8192, 3), (u64::MAX, 6)]),
    (Comm::Lt(32), &[(64, 5), (4096, 3), (u64::MAX, 6)]),
    (Comm::Lt(64), &[(128, 5), (u64::MAX, 6)]),
    (Comm::Lt(128), &[(262144, 3), (u64::MAX, 6)]),
    (Comm::Lt(256), &[(131072, 2), (262144, 3), (u64::MAX, 6)]),
    (Comm::Lt(512), &[(4096, 2), (u64::MAX, 6)]),
    (Comm::Lt(2048), &[(2048, 2), (16384, 3), (u64::MAX, 6)]),
    (Comm::Lt(4096), &[(2048, 2), (4096, 5), (16384, 3), (u64::MAX, 6)]),
    (Comm::Any, &[(2048, 2), (16384, 5), (32768, 3), (u64::MAX, 6)]),
];
#[rustfmt::skip]
pub(super) const OMPI_ALLGATHER: &[CommRule] = &[
    (Comm::Eq(2), &[(u64::MAX, 6)]),
    (Comm::Lt(32), &[(u64::MAX, 3)]),
    (Comm::Lt(64), &[(1024, 3), (65536, 5), (u64::MAX, 4)]),
    (Comm::Lt(128), &[(512, 3), (65536, 5), (u64::MAX, 4)]),
    (Comm::Lt(256), &[(512, 3), (131072, 5), (524288, 4), (1048576, 5), (u64::MAX, 4)]),
    (Comm::Lt(512), &[(32, 3), (128, 2), (1024, 3), (131072, 5), (524288, 4), (1048576, 5), (u64::MAX, 4)]),
    (Comm::Lt(1024), &[(64, 3), (256, 2), (2048, 3), (u64::MAX, 5)]),
    (Comm::Lt(2048), &[(4, 3), (8, 2), (16, 3), (32, 2), (256, 3), (512, 2), (4096, 3), (u64::MAX, 5)]),
    (Comm::Lt(4096), &[(32, 2), (128, 3), (512, 2), (4096, 3), (u64::MAX, 5)]),
    (Comm::Any, &[(2, 3), (8, 2), (16, 3), (512, 2), (4096, 3), (u64::MAX, 5)]),
];
#[rustfmt::skip]
pub(super) const OMPI_ALLTOALL: &[CommRule] = &[
    (Comm::Eq(2), &[(2, 2), (4, 5), (16, 2), (64, 5), (256, 2), (4096, 5), (32768, 2), (262144, 4), (1048576, 5), (u64::MAX, 2)]),
    (Comm::Lt(8), &[(8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2), (u64::MAX, 1)]),
    (Comm::Lt(16), &[(262144, 4), (u64::MAX, 1)]),
    (Comm::Lt(32), &[(4, 4), (512, 3), (8192, 4), (32768, 1), (262144, 4), (524288, 1), (u64::MAX, 4)]),
    (Comm::Lt(64), &[(512, 3), (524288, 1), (u64::MAX, 4)]),
    (Comm::Lt(128), &[(1024, 3), (2048, 1), (4096, 4), (262144, 1), (u64::MAX, 2)]),
    (Comm::Lt(256), &[(1024, 3), (2048, 4), (262144, 1), (u64::MAX, 2)]),
    (Comm::Lt(512), &[(1024, 3), (8192, 4), (32768, 1), (u64::MAX, 2)]),
    (Comm::Lt(1024), &[(512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1), (u64::MAX, 2)]),
    (Comm::Lt(2048), &[(512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1), (u64::MAX, 4)]),
    (Comm::Lt(4096), &[(1024, 3), (4096, 4), (8192, 1), (131072, 4), (u64::MAX, 1)]),
    (Comm::Any, &[(2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1), (u64::MAX, 4)]),
];
#[rustfmt::skip]
pub(super) const OMPI_BARRIER: &[CommRule] = &[
    (Comm::Lt(4), &[(u64::MAX, 3)]),
    (Comm::Lt(8), &[(u64::MAX, 1)]),
    (Comm::Lt(64), &[(u64::MAX, 3)]),
    (Comm::Lt(256), &[(u64::MAX, 4)]),
    (Comm::Lt(512), &[(u64::MAX, 6)]),
    (Comm::Lt(1024), &[(u64::MAX, 4)]),
    (Comm::Lt(4096), &[(u64::MAX, 6)]),
    (Comm::Any, &[(u64::MAX, 4)]),
];
