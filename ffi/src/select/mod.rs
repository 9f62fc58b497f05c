//! Model-based choice of MPI collective algorithms from measured LogGP(S) /
//! LogfP parameters, for Rust and (through `ng_select*`, header
//! `include/netgauge_select.h`) for C MPI libraries.
//!
//! Given the number of ranks P, the message size m and the parameters of the
//! network (one [`Params`] per protocol range, i.e. what
//! [`Reader::lookup`](crate::Reader::lookup) returns), every candidate
//! algorithm's completion time is predicted and the fastest returned.
//!
//! # The cost of one message and of a burst
//!
//! One message of s bytes, from the sender's first instruction to the
//! receiver having it, costs
//!
//! ```text
//! T(s) = EEL + (s−1)·G                               (LogGP)
//!      + 2·EEL                          if s > S     (LogGPS rendezvous)
//! ```
//!
//! EEL = PRTT(1,0,1)/2 = L + o_s + o_r is the measured one-byte message, and
//! this is LogGP's own single-message time L + 2o + (s−1)·G, the formula the
//! probe's method rests on (PRTT(1,0,s) = 2·(L + 2o + (s−1)·G)). G is the
//! per-byte time of the gap, measured from a stream of n messages in
//! flight, which passes every stage of the path: sender, channel and
//! receiver. So G is already the slowest stage's rate.
//!
//! LogGPS's per-byte overheads (o_x(s) = o_x + (s−1)·O_x) are left out of T
//! on purpose, although [`Params::predict_ns`] adds them as in the paper:
//! the probe measures o_s(s) as the sender's time per message of a burst,
//! o_r(s) as the receiver's time in its receive calls, and G from the gap.
//! Where the processors move the bytes themselves (shared memory: the copy
//! *is* the transfer) or a send completes only once the receiver has pulled
//! the data (rendezvous), these are three views of the same bytes moving,
//! and the sum o_s(s) + L + (s−1)·G + o_r(s) counts them up to three times.
//! Checked against the probe's own single-message round trips
//! (`bench/mpi_one_message.py`, results in bench/mpi.md). The per-size
//! overheads still cost what they are: CPU time. They bound how soon a
//! process can send again (`gap` below) and the period of a forwarding rank
//! in a pipeline, which pays both fixed overheads and the per-byte copy
//! once: o_s + o_r + (s−1)·max(O_s, O_r).
//!
//! The `+ 2·EEL` is the request-to-send / clear-to-send round trip a
//! rendezvous message waits for before its data moves. G and O are those of
//! the range that contains s (eager and rendezvous ranges differ), so every
//! size is looked up separately. Over several ranges the bytes of each range
//! cost its own G: T runs on continuously from the range below (plus the
//! handshake above S), so a narrow range's noisy slope or a G = 0 fitted over
//! a few disturbed large sizes costs only the bytes in that range.
//!
//! A process sending several messages in a row can start the next one
//! `gap(s) = max(g + (s−1)·G, o_s(s))` after the previous (LogGP: the NIC /
//! copy engine accepts one message per g + (s−1)G, the CPU one per o_s).
//! LogfP refines this for small messages: the first f messages of a burst
//! are injected without paying g, each costing only the per-message posting
//! overhead o(k) = o_min + o_max/k of a burst of k; messages beyond f pay the
//! LogfP gap g_f. It is used for messages of at most [`LOGFP_MAX_BYTES`]
//! when the parameters have f > 0.
//!
//! # Trees
//!
//! Tree algorithms are evaluated exactly over their tree instead of with a
//! closed form: a node that has its data at time `ready` issues its sends in
//! order, the j-th at `ready + Σ_{i<j} gap_i`, and the j-th child has the data
//! at `start_j + T(s_j)`. The result is the latest arrival. For a binomial
//! tree with equal sizes this reproduces the textbook ⌈log2 P⌉·T(m) when
//! gap ≥ T, and is tighter (the root's later sends overlap its children's
//! forwarding) when gap < T.
//!
//! # All-ranks steps
//!
//! The steps of recursive doubling and halving, of the ring and of the
//! allgathers have every rank send s bytes to one partner and receive s
//! bytes from one, all at once. Their cost X(s) is not the pair's T(s): the
//! ranks share cores, caches and memory bandwidth. When the MPI probe's
//! exchange sweep for P ranks is published (entry `<transport>-x<P>`, see
//! [`exchange_transport`]), X(s) is its measured step time
//! ([`Network::exchange_ns`]); otherwise T(s) stretched by the sharing of P
//! busy ranks ([`Sharing`]). Trees and chains are not all-ranks steps: their
//! hops keep the pair's T(s) under sharing.
//!
//! # Contention penalties
//!
//! Where the segment has the transport's contention record
//! ([`Network::penalty`], [`penalty_of`]), a step in which each rank has k
//! exchanges in flight (the linear alltoall: P − 1) has its bytes' part
//! stretched by the mixed penalty pen(k)/pen(1) (pen(k) over the pair's
//! T(s) where no exchange was measured); in the schedule simulation, other
//! transfers are stretched by the outgoing / incoming penalties only where
//! no copy lanes govern them; the simulation applies them to messages of
//! 64 KiB and more (the record is measured with large flows). Without a
//! record every price is unchanged (see `cost::exchange_step_k` and `sim`).
//!
//! # Working set and copy lanes (schedule simulation)
//!
//! A transfer's bytes move at least at the rate the pair (or the exchange)
//! shows at the size of the rank's buffers of the call: the sweeps reuse
//! buffers of one message's size, which stay in the caches where a ring's
//! blocks of a larger vector or a pipeline's segments do not. The node's
//! copy lanes (how many transfers it moves at once, from the exchange
//! against the pair) are one count for every size from 64 KiB: the least
//! over those sizes (see `sim`).
//!
//! # Layout
//!
//! - this module: the collectives, algorithms and choices, the options, and
//!   [`candidates`] / [`select`], which dispatch to one module per
//!   collective;
//! - `network`: [`Network`], the parameters as a function of the size
//!   (one range, a list of ranges, live reader lookups, measured snapshots)
//!   and the exchange entry's step time;
//! - `cost`: the point-to-point costs T(s), gap(s), forward(s), LogfP bursts
//!   and all-ranks steps;
//! - `tree`: binomial trees evaluated edge by edge;
//! - `bcast`, `allreduce`, `barrier`: each collective's candidates;
//! - `c_abi`: `ng_select`, `ng_select_lookup`, `ng_algorithm_name`.

mod allgather;
mod allreduce;
mod alltoall;
mod barrier;
mod bcast;
mod c_abi;
mod cost;
mod library;
mod network;
mod reduce;
pub mod schedule;
mod sim;
mod tree;
pub mod view;

pub use c_abi::{ng_algorithm_name, ng_select, ng_select_lookup};
pub use cost::one_message_ns;
pub use library::{
    ompi_rule_algorithms, ompi_tuned_algorithms, Library, RuleAlgorithm, OMPI_WRONG_DATA,
};
pub use network::{exchange_transport, penalty_of, Measured, Network, NoContention, ReaderNetwork};
pub use schedule::{chain_segment, Op, Schedule};
pub use sim::{release_scratch as release_sim_scratch, SimError, Work};
pub use view::{
    chain_segments, choose, choose_named, judge, view, Call, Decision, LibraryChoice, Priced, View,
    ViewOptions,
};

use crate::types::LookupError;

/// Messages up to this size use LogfP's burst model when f is known.
pub const LOGFP_MAX_BYTES: u64 = 256;

/// Default cost of combining one byte in a reduction (ns per byte), used when
/// the caller does not measure it. An MPI library's predefined operations
/// are vectorized loops over vectors that are in cache when a reduction
/// combines them (they were just received): a sum of floats costs a few
/// hundredths of a ns per byte on current x86 CPUs (bench/ngcoll.md:
/// 0.013–0.045 ns/byte for 64 KiB – 4 MiB), not the 0.1–0.3 of a stream
/// from memory.
pub const DEFAULT_GAMMA_NS_PER_BYTE: f64 = 0.03;

/// What first writing to freshly mapped memory costs on this host, ns per
/// byte: the best of 5 maps of 1 MiB, each written once and unmapped (the
/// page faults a buffer allocated for every call pays; see
/// [`schedule::FRESH_ALLOC_BYTES`]). 0 if memory cannot be mapped.
pub fn measure_fresh_ns_per_byte() -> f64 {
    const BYTES: usize = 1 << 20;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        // SAFETY: an anonymous private mapping of BYTES, written within its
        // length and unmapped once; no other reference to it exists.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return 0.0;
            }
            std::ptr::write_bytes(p as *mut u8, 1, BYTES);
            libc::munmap(p, BYTES);
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / BYTES as f64);
    }
    best
}

named_enum! {
    /// The collectives the selector knows; `ALL` is in C ABI order.
    pub enum Collective: u32 {
        Bcast = 0 => "bcast",
        Allreduce = 1 => "allreduce",
        Barrier = 2 => "barrier",
        Reduce = 3 => "reduce",
        /// msg_bytes: the block one rank contributes.
        Allgather = 4 => "allgather",
        /// msg_bytes: the block one rank sends to each rank.
        Alltoall = 5 => "alltoall",
    }
}

impl Collective {
    pub fn from_u32(v: u32) -> Option<Collective> {
        Self::ALL.into_iter().find(|c| *c as u32 == v)
    }

    /// The candidate algorithms of this collective.
    pub fn algorithms(self) -> &'static [Algorithm] {
        match self {
            Collective::Bcast => &[
                Algorithm::BcastBinomial,
                Algorithm::BcastScatterRdAllgather,
                Algorithm::BcastScatterRingAllgather,
                Algorithm::BcastChain,
            ],
            Collective::Allreduce => &[
                Algorithm::AllreduceRecursiveDoubling,
                Algorithm::AllreduceRabenseifner,
                Algorithm::AllreduceRing,
                Algorithm::AllreduceLinear,
            ],
            Collective::Barrier => &[Algorithm::BarrierDissemination, Algorithm::BarrierTree],
            Collective::Reduce => &[Algorithm::ReduceBinomial, Algorithm::ReduceRabenseifner],
            Collective::Allgather => &[
                Algorithm::AllgatherRecursiveDoubling,
                Algorithm::AllgatherRing,
                Algorithm::AllgatherLinear,
            ],
            Collective::Alltoall => &[Algorithm::AlltoallPairwise, Algorithm::AlltoallLinear],
        }
    }
}

impl std::str::FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let known = Self::ALL.map(Collective::name).join(", ");
                format!("unknown collective {s:?} ({known})")
            })
    }
}

named_enum! {
    /// Candidate algorithms (values are the C ABI's `NG_ALG_*`).
    pub enum Algorithm: u32 {
        BcastBinomial = 0 => "binomial",
        BcastScatterRdAllgather = 1 => "scatter_rd_allgather",
        BcastScatterRingAllgather = 2 => "scatter_ring_allgather",
        BcastChain = 3 => "pipelined_chain",
        AllreduceRecursiveDoubling = 10 => "recursive_doubling",
        AllreduceRabenseifner = 11 => "rabenseifner",
        AllreduceRing = 12 => "ring",
        /// Every rank sends its vector to every other rank and combines all P
        /// in one order, v0 ⊕ (v1 ⊕ (… ⊕ vP−1)), the same on every rank.
        AllreduceLinear = 13 => "linear",
        BarrierDissemination = 20 => "dissemination",
        BarrierTree = 21 => "tree",
        ReduceBinomial = 30 => "binomial",
        /// Reduce-scatter by recursive halving, then a binomial gather.
        ReduceRabenseifner = 31 => "rabenseifner",
        /// Power-of-two sizes only.
        AllgatherRecursiveDoubling = 40 => "recursive_doubling",
        AllgatherRing = 41 => "ring",
        /// Every rank sends its block to every other rank directly, all
        /// posted at once.
        AllgatherLinear = 42 => "linear",
        AlltoallPairwise = 50 => "pairwise",
        /// Every exchange posted at once.
        AlltoallLinear = 51 => "linear",
    }
}

impl Algorithm {
    pub fn from_u32(v: u32) -> Option<Algorithm> {
        Self::ALL.into_iter().find(|a| *a as u32 == v)
    }

    pub fn collective(self) -> Collective {
        match self as u32 {
            0..=9 => Collective::Bcast,
            10..=19 => Collective::Allreduce,
            20..=29 => Collective::Barrier,
            30..=39 => Collective::Reduce,
            40..=49 => Collective::Allgather,
            _ => Collective::Alltoall,
        }
    }
}

/// One prediction: C's `ng_choice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// An [`Algorithm`] value.
    pub algorithm: u32,
    pub reserved: u32,
    pub predicted_ns: f64,
    /// Segment size of a pipelined algorithm (0: not segmented).
    pub segment_bytes: u64,
}

const _: () = assert!(core::mem::size_of::<Choice>() == 24);

impl Choice {
    pub fn algorithm(&self) -> Option<Algorithm> {
        Algorithm::from_u32(self.algorithm)
    }
}

/// The most candidates one collective has (C's `NG_MAX_CANDIDATES`).
pub const MAX_CANDIDATES: usize = 4;

/// At most [`MAX_CANDIDATES`] candidates per collective, without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Candidates {
    items: [Choice; MAX_CANDIDATES],
    len: usize,
}

impl Candidates {
    /// The candidates `(algorithm, predicted time, segment size)` in
    /// order (at most [`MAX_CANDIDATES`]); for a single rank every prediction is 0 (there is
    /// nothing to send).
    fn new(ranks: usize, vals: &[(Algorithm, f64, u64)]) -> Candidates {
        let mut out = Candidates {
            items: [Choice {
                algorithm: 0,
                reserved: 0,
                predicted_ns: 0.0,
                segment_bytes: 0,
            }; MAX_CANDIDATES],
            len: vals.len().min(MAX_CANDIDATES),
        };
        for (item, &(a, t, s)) in out.items.iter_mut().zip(vals) {
            *item = Choice {
                algorithm: a as u32,
                reserved: 0,
                predicted_ns: if ranks <= 1 { 0.0 } else { t },
                segment_bytes: s,
            };
        }
        out
    }

    pub fn as_slice(&self) -> &[Choice] {
        &self.items[..self.len]
    }

    /// The fastest candidate (first on ties, in the order of
    /// [`Collective::algorithms`]).
    pub fn best(&self) -> Choice {
        let mut best = self.items[0];
        for c in &self.items[1..self.len] {
            if c.predicted_ns < best.predicted_ns {
                best = *c;
            }
        }
        best
    }
}

/// Options of a selection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SelectOptions {
    /// Cost of combining one byte in a reduction, ns.
    pub gamma_ns_per_byte: f64,
    /// Cores the job's ranks share (0: at least one per rank). See
    /// [`Sharing`].
    pub cores: usize,
}

impl Default for SelectOptions {
    fn default() -> Self {
        Self {
            gamma_ns_per_byte: DEFAULT_GAMMA_NS_PER_BYTE,
            cores: 0,
        }
    }
}

/// Ranks that share cores (an oversubscribed node).
///
/// The probe measures one pair of ranks exchanging messages while the other
/// ranks of the job wait inside MPI (they yield their core when idle), so its
/// EEL already holds the hand-over to a receiver that was not running. A
/// collective step in which k ranks all have work (each receives, copies,
/// forwards or combines) needs k processors: with C < k cores, processor
/// sharing gives each of them C/k of a core, and the whole step — its
/// messages and its combining — takes k/C times as long as measured for a
/// pair. (Vienne et al.'s sharing of k concurrent flows, with the share
/// fixed by the processor count rather than fitted.) With cores = 0, or
/// k ≤ C, nothing changes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sharing {
    cores: usize,
}

impl Sharing {
    pub fn new(cores: usize) -> Self {
        Self { cores }
    }

    /// Stretch of a step in which `flows` ranks have work at once (≥ 1).
    pub fn factor(self, flows: usize) -> f64 {
        if self.cores == 0 || flows <= self.cores {
            1.0
        } else {
            flows as f64 / self.cores as f64
        }
    }

    /// Σ factor(min(h, cap)) over h = 1..=hops, in closed form: the
    /// chain's hops while its first segment travels (a loop over the hops
    /// would cost the selection time linear in the communicator's size).
    pub fn factor_sum(self, hops: usize, cap: usize) -> f64 {
        let rising = hops.min(cap) as u128;
        let flat = (hops as u128).saturating_sub(rising) as f64;
        let c = self.cores as u128;
        let up = if c == 0 || rising <= c {
            rising as f64
        } else {
            // c steps of 1, then h / c for h = c+1..=rising.
            let tail = (rising * (rising + 1) - c * (c + 1)) / 2;
            c as f64 + tail as f64 / c as f64
        };
        up + flat * self.factor(hops.min(cap))
    }
}

/// Why a selection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelectError {
    /// P must be at least 1.
    NoRanks,
    Lookup(LookupError),
}

impl std::fmt::Display for SelectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SelectError::NoRanks => f.write_str("need at least one rank"),
            SelectError::Lookup(e) => write!(f, "parameter lookup failed: {e}"),
        }
    }
}

impl std::error::Error for SelectError {}

impl From<LookupError> for SelectError {
    fn from(e: LookupError) -> Self {
        SelectError::Lookup(e)
    }
}

/// Every candidate of `coll` for `ranks` ranks and `msg_bytes` (ignored
/// for the barrier; for allgather and alltoall the block of one rank, per
/// peer), priced for one synchronized call (every rank starts at once; the
/// time until the last rank is done). No allocation, no system call beyond
/// the network's lookups. [`view`] prices what a caller sees besides.
pub fn candidates<N: Network + ?Sized>(
    net: &N,
    coll: Collective,
    ranks: usize,
    msg_bytes: u64,
    opts: &SelectOptions,
) -> Result<Candidates, SelectError> {
    if ranks == 0 {
        return Err(SelectError::NoRanks);
    }
    let (sharing, gamma) = (Sharing::new(opts.cores), opts.gamma_ns_per_byte);
    Ok(match coll {
        Collective::Bcast => bcast::bcast(net, ranks, msg_bytes, sharing)?,
        Collective::Allreduce => allreduce::allreduce(net, ranks, msg_bytes, gamma, sharing)?,
        Collective::Barrier => barrier::barrier(net, ranks, sharing)?,
        Collective::Reduce => reduce::reduce(net, ranks, msg_bytes, gamma, sharing)?,
        Collective::Allgather => allgather::allgather(net, ranks, msg_bytes, sharing)?,
        Collective::Alltoall => alltoall::alltoall(net, ranks, msg_bytes, sharing)?,
    })
}

/// The fastest candidate and its predicted time.
pub fn select<N: Network + ?Sized>(
    net: &N,
    coll: Collective,
    ranks: usize,
    msg_bytes: u64,
    opts: &SelectOptions,
) -> Result<Choice, SelectError> {
    Ok(candidates(net, coll, ranks, msg_bytes, opts)?.best())
}

#[cfg(test)]
mod tests;
