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

use crate::layout::TRANSPORT_MAX_BYTES;
use crate::types::{LookupError, Params};
use crate::Reader;

/// Messages up to this size use LogfP's burst model when f is known.
pub const LOGFP_MAX_BYTES: u64 = 256;

/// Default cost of combining one byte in a reduction (ns per byte), used when
/// the caller does not measure it. Summing doubles streams at several GB/s
/// on current CPUs: 0.1–0.3 ns/byte.
pub const DEFAULT_GAMMA_NS_PER_BYTE: f64 = 0.2;

/// The collectives the selector knows.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    Bcast = 0,
    Allreduce = 1,
    Barrier = 2,
}

impl Collective {
    pub fn from_u32(v: u32) -> Option<Collective> {
        match v {
            0 => Some(Collective::Bcast),
            1 => Some(Collective::Allreduce),
            2 => Some(Collective::Barrier),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Allreduce => "allreduce",
            Collective::Barrier => "barrier",
        }
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
            ],
            Collective::Barrier => &[Algorithm::BarrierDissemination, Algorithm::BarrierTree],
        }
    }
}

impl std::str::FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "bcast" => Ok(Collective::Bcast),
            "allreduce" => Ok(Collective::Allreduce),
            "barrier" => Ok(Collective::Barrier),
            _ => Err(format!(
                "unknown collective {s:?} (bcast, allreduce, barrier)"
            )),
        }
    }
}

/// Candidate algorithms (values are the C ABI's `NG_ALG_*`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    BcastBinomial = 0,
    BcastScatterRdAllgather = 1,
    BcastScatterRingAllgather = 2,
    BcastChain = 3,
    AllreduceRecursiveDoubling = 10,
    AllreduceRabenseifner = 11,
    AllreduceRing = 12,
    BarrierDissemination = 20,
    BarrierTree = 21,
}

impl Algorithm {
    pub const ALL: [Algorithm; 9] = [
        Algorithm::BcastBinomial,
        Algorithm::BcastScatterRdAllgather,
        Algorithm::BcastScatterRingAllgather,
        Algorithm::BcastChain,
        Algorithm::AllreduceRecursiveDoubling,
        Algorithm::AllreduceRabenseifner,
        Algorithm::AllreduceRing,
        Algorithm::BarrierDissemination,
        Algorithm::BarrierTree,
    ];

    pub fn from_u32(v: u32) -> Option<Algorithm> {
        Self::ALL.into_iter().find(|a| *a as u32 == v)
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::BcastBinomial => "binomial",
            Algorithm::BcastScatterRdAllgather => "scatter_rd_allgather",
            Algorithm::BcastScatterRingAllgather => "scatter_ring_allgather",
            Algorithm::BcastChain => "pipelined_chain",
            Algorithm::AllreduceRecursiveDoubling => "recursive_doubling",
            Algorithm::AllreduceRabenseifner => "rabenseifner",
            Algorithm::AllreduceRing => "ring",
            Algorithm::BarrierDissemination => "dissemination",
            Algorithm::BarrierTree => "tree",
        }
    }

    pub fn collective(self) -> Collective {
        match self as u32 {
            0..=9 => Collective::Bcast,
            10..=19 => Collective::Allreduce,
            _ => Collective::Barrier,
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

/// At most 4 candidates per collective, without allocating.
#[derive(Clone, Copy, Debug)]
pub struct Candidates {
    items: [Choice; 4],
    len: usize,
}

impl Candidates {
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

/// Parameters as a function of the message size.
pub trait Network {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError>;

    /// The measured time of one step in which all `ranks` ranks exchange
    /// `msg_bytes` with a partner at once (the MPI probe's exchange sweep,
    /// published as the entry [`exchange_transport`] names), if there is
    /// one for this many ranks. Without it the selector stretches the pair's
    /// T(s) by the sharing of P busy ranks ([`Sharing`]).
    fn exchange_ns(&self, _ranks: usize, _msg_bytes: u64) -> Option<f64> {
        None
    }
}

/// The transport name of the exchange entry of `ranks` ranks measured over
/// `transport`: "mpi" and 4 ranks give "mpi-x4". Written into `buf` (no
/// allocation: reader lookups use it); None if it would not fit a
/// transport name.
pub fn exchange_transport<'b>(
    transport: &str,
    ranks: usize,
    buf: &'b mut [u8; TRANSPORT_MAX_BYTES],
) -> Option<&'b str> {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut r = ranks;
    loop {
        digits[n] = b'0' + (r % 10) as u8;
        n += 1;
        r /= 10;
        if r == 0 {
            break;
        }
    }
    let len = transport.len() + 2 + n;
    if len > buf.len() {
        return None;
    }
    buf[..transport.len()].copy_from_slice(transport.as_bytes());
    buf[transport.len()..transport.len() + 2].copy_from_slice(b"-x");
    for i in 0..n {
        buf[transport.len() + 2 + i] = digits[n - 1 - i];
    }
    std::str::from_utf8(&buf[..len]).ok()
}

/// An exchange entry's step time at `bytes`: its range's line
/// g + (s − 1)·G (see `model::exchange` of the daemon crate).
fn exchange_line(p: &Params, bytes: u64) -> f64 {
    (p.g_ns + bytes.saturating_sub(1) as f64 * p.G_ns_per_byte).max(0.0)
}

impl Network for Params {
    fn at(&self, _msg_bytes: u64) -> Result<Params, LookupError> {
        Ok(*self)
    }
}

/// One [`Params`] per protocol range (as lookups of sizes in each range
/// return them); the range containing the size is used, the nearest one
/// outside all ranges.
impl Network for [Params] {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        let first = self.first().ok_or(LookupError::NotFound)?;
        let mut best = *first;
        for p in self {
            if msg_bytes >= p.range_from_bytes && msg_bytes <= p.range_to_bytes {
                return Ok(*p);
            }
            if msg_bytes > p.range_to_bytes {
                best = *p;
            }
        }
        Ok(best)
    }
}

/// Live lookups of one (peer, transport) entry of a segment.
#[derive(Clone, Copy, Debug)]
pub struct ReaderNetwork<'a> {
    pub reader: &'a Reader,
    pub peer: &'a str,
    pub transport: &'a str,
}

impl Network for ReaderNetwork<'_> {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        self.reader.lookup(self.peer, self.transport, msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        let mut buf = [0u8; TRANSPORT_MAX_BYTES];
        let name = exchange_transport(self.transport, ranks, &mut buf)?;
        let p = self.reader.lookup(self.peer, name, msg_bytes).ok()?;
        Some(exchange_line(&p, msg_bytes))
    }
}

/// A pair's ranges and the exchange ranges measured with `exchange_ranks`
/// ranks (a snapshot of both entries, as `ngctl predict` reads them).
#[derive(Clone, Copy, Debug)]
pub struct Measured<'a> {
    pub pair: &'a [Params],
    pub exchange: &'a [Params],
    pub exchange_ranks: usize,
}

impl Network for Measured<'_> {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        self.pair.at(msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        if ranks != self.exchange_ranks || self.exchange.is_empty() {
            return None;
        }
        let p = self.exchange.at(msg_bytes).ok()?;
        Some(exchange_line(&p, msg_bytes))
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

/// The point-to-point costs of the model at one size.
struct Msg {
    /// T(s): one message end to end, rendezvous included.
    t_ns: f64,
    /// gap(s): earliest start of the sender's next message.
    gap_ns: f64,
    /// CPU time of a rank that receives the message and sends it on:
    /// o_s + o_r + (s−1)·max(O_s, O_r). Both ends' per-byte overheads
    /// contain the one copy of the bytes per hop (module doc), so it is
    /// counted once; o_s(s) + o_r(s) counted it twice (at 512 KiB on 4
    /// ranks: 90 µs against a gap and a T(s) of 44 µs).
    forward_ns: f64,
}

/// T(s) of the module documentation for one parameter set: the one-byte
/// end-to-end latency plus (s−1)·G, plus the rendezvous handshake. Without
/// a measured EEL (0 or not finite) its LogGP value L + o_s + o_r.
pub fn one_message_ns(p: &Params, msg_bytes: u64) -> f64 {
    // One Params is a network of one range: the lookup cannot fail.
    one_message_on(p, msg_bytes).unwrap_or(f64::NAN)
}

/// T(s) over a network of ranges: the bytes of each range cost that range's
/// G, so T is continuous across ranges except for the rendezvous handshake
/// above S. The first range's message is EEL + (s−1)·G; a later range's
/// starts where the range below ends, T(from − 1), and adds (s − from + 1)·G
/// (sizes between two ranges count at the lower one's G). One range's
/// `EEL + (s−1)·G` with its own G from s = 1 is what [`one_message_ns`] gives:
/// across ranges it puts the line of a narrow range (61–64 B fitted G =
/// 50 ns/B) or of a few disturbed large sizes (G = 0 from 2 MiB) under every
/// byte of the message, so that a 64 B message costs twice EEL, or 4 MiB
/// costs EEL.
fn one_message_on<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    let p = net.at(bytes)?;
    let handshake = if p.S_bytes != u64::MAX && bytes > p.S_bytes {
        2.0 * eel_of(&p)
    } else {
        0.0
    };
    Ok((bytes_time(net, bytes)? + handshake).max(0.0))
}

/// T(s) without the handshake (see [`one_message_on`]).
fn bytes_time<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    let p = net.at(bytes)?;
    let big_g = p.G_ns_per_byte.max(0.0);
    let from = p.range_from_bytes;
    if from > 1 && from <= bytes {
        let below = net.at(from - 1)?;
        if below.range_from_bytes < from {
            return Ok(bytes_time(net, from - 1)? + (bytes - from + 1) as f64 * big_g);
        }
    }
    Ok(eel_of(&p) + bytes.saturating_sub(1) as f64 * big_g)
}

/// The measured EEL, or without one (0 or not finite) L + o_s + o_r.
fn eel_of(p: &Params) -> f64 {
    if p.eel_ns.is_finite() && p.eel_ns > 0.0 {
        p.eel_ns
    } else {
        p.L_ns + p.o_s_ns + p.o_r_ns
    }
}

fn msg<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<Msg, LookupError> {
    let p = net.at(bytes)?;
    let k = bytes.saturating_sub(1) as f64;
    let o_s_ns = (p.o_s_ns + k * p.O_s_ns_per_byte).max(0.0);
    let t_ns = one_message_on(net, bytes)?;
    let gap_ns = (p.g_ns + k * p.G_ns_per_byte).max(o_s_ns).max(0.0);
    let forward_ns = (p.o_s_ns + p.o_r_ns + k * p.O_s_ns_per_byte.max(p.O_r_ns_per_byte)).max(0.0);
    Ok(Msg {
        t_ns,
        gap_ns,
        forward_ns,
    })
}

/// Gap before the (j+1)-th of a burst of `burst` sends of `bytes`, LogfP
/// for small messages: the first f messages pay only the posting overhead
/// o(burst) = o_min + o_max / burst, later ones the LogfP gap g_f.
impl Msg {
    /// T(s) in a step stretched by processor sharing.
    fn t_shared(&self, stretch: f64) -> f64 {
        self.t_ns * stretch
    }
}

fn burst_gap<N: Network + ?Sized>(
    net: &N,
    bytes: u64,
    j: usize,
    burst: usize,
    m: &Msg,
) -> Result<f64, LookupError> {
    if bytes <= LOGFP_MAX_BYTES {
        let p = net.at(bytes)?;
        if p.f > 0 && (p.o_min_ns > 0.0 || p.o_max_ns > 0.0) {
            let o_burst = p.o_min_ns + p.o_max_ns / burst.max(1) as f64;
            return Ok(if j < p.f as usize {
                o_burst
            } else {
                p.g_f_ns.max(o_burst)
            });
        }
    }
    Ok(m.gap_ns)
}

/// One step in which all P ranks exchange `bytes` with a partner at once:
/// measured ([`Network::exchange_ns`]), or the pair's T(bytes) stretched by
/// the sharing of P busy ranks.
fn exchange_step<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bytes: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    match net.exchange_ns(p, bytes) {
        Some(t) => Ok(t),
        None => Ok(msg(net, bytes)?.t_shared(sh.factor(p))),
    }
}

/// Children of `rel` (relative rank) in the binomial tree over `p` ranks,
/// in send order (largest subtree first), with the size of each subtree.
/// Node r's parent is r − lowbit(r); its children are r + 2^k for
/// 2^k < lowbit(r) (all k for the root).
fn binomial_children(rel: usize, p: usize, out: &mut [(usize, usize); 64]) -> usize {
    let limit = if rel == 0 {
        p.next_power_of_two()
    } else {
        rel & rel.wrapping_neg()
    };
    let mut n = 0;
    let mut mask = limit >> 1;
    while mask > 0 {
        let child = rel + mask;
        if child < p {
            out[n] = (child, mask.min(p - child));
            n += 1;
        }
        mask >>= 1;
    }
    n
}

/// Completion time of a binomial-tree broadcast (or scatter when
/// `per_rank_bytes` > 0: each edge carries its subtree's share) from the
/// root: evaluated node by node as described in the module documentation.
///
/// Sharing: the edge from r to r + d belongs to the round in which the
/// ranks holding data are those of stride 2d, so P' / (2d) edges (P' = P
/// rounded up to a power of two) carry bytes at once.
fn binomial_tree<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bcast_bytes: u64,
    per_rank_bytes: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    // ready[r]: when relative rank r holds its data. Parents have smaller
    // ranks than their children, so one pass in rank order suffices.
    let mut ready = [0f64; 1024];
    if p > ready.len() {
        // Beyond 1024 ranks: the closed form ⌈log2 P⌉·T(m) (bcast) or
        // Σ_k T(m/2^k) (scatter).
        let rounds = usize::BITS - (p - 1).leading_zeros();
        let mut t = 0.0;
        for k in 1..=rounds {
            let s = if per_rank_bytes > 0 {
                per_rank_bytes * (p as u64 >> k).max(1)
            } else {
                bcast_bytes
            };
            t += msg(net, s)?.t_shared(sh.factor(1 << (k - 1)));
        }
        return Ok(t);
    }
    let mut kids = [(0usize, 0usize); 64];
    let mut finish: f64 = 0.0;
    for r in 0..p {
        let n = binomial_children(r, p, &mut kids);
        let mut start = ready[r];
        for (j, &(child, subtree)) in kids[..n].iter().enumerate() {
            let s = if per_rank_bytes > 0 {
                per_rank_bytes * subtree as u64
            } else {
                bcast_bytes
            };
            let m = msg(net, s)?;
            let flows = (p.next_power_of_two() / (2 * (child - r))).max(1);
            ready[child] = start + m.t_shared(sh.factor(flows));
            finish = finish.max(ready[child]);
            start += burst_gap(net, s, j, n, &m)?;
        }
    }
    Ok(finish)
}

fn ceil_log2(p: usize) -> u32 {
    usize::BITS - (p.max(1) - 1).leading_zeros()
}

/// The pipelined chain of `m` bytes in segments of `k` over P − 1 hops (see
/// [`bcast`]). Sharing: while the first segment crosses hop h (1-based),
/// the segments behind it occupy the hops before it, so min(h, n) links
/// carry a segment at once; in steady state min(n, P − 1) do, and the
/// period stretches with that many busy forwarding ranks.
fn chain_time<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    k: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    let segs = m.div_ceil(k.max(1)).max(1);
    let in_flight = usize::try_from(segs).unwrap_or(usize::MAX);
    let x = msg(net, k)?;
    let mut t = 0.0;
    for hop in 1..p {
        t += x.t_shared(sh.factor(hop.min(in_flight)));
    }
    let busy = sh.factor((p - 1).min(in_flight));
    Ok(t + (segs as f64 - 1.0) * x.gap_ns.max(x.forward_ns) * busy)
}

/// Broadcast candidates. Root holds m bytes; c = ⌈m/P⌉ is one rank's share.
fn bcast<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    let c = m.div_ceil(p as u64).max(1);
    let rounds = ceil_log2(p);

    // Binomial tree: every edge carries all m bytes (tree evaluation).
    let binomial = binomial_tree(net, p, m, 0, sh)?;

    // Scatter + allgather (van de Geijn): a binomial scatter (the edge to a
    // subtree of k ranks carries k·c bytes) then an allgather of the P
    // shares.
    let scatter = binomial_tree(net, p, 0, c, sh)?;
    // Both allgathers keep every rank busy in every step: each step is an
    // all-ranks exchange (exchange_step).
    // Recursive-doubling allgather: in step k = 0..log2 P − 1 every rank
    // exchanges the 2^k·c bytes it has with rank ⊕ 2^k; send and receive
    // overlap, so a step costs X(2^k·c). Non-powers of two need one more
    // step of the largest size (the ranks beyond the power of two are folded
    // in and out).
    let mut rd = 0.0;
    for k in 0..rounds {
        rd += exchange_step(net, p, c << k, sh)?;
    }
    if !p.is_power_of_two() {
        rd += exchange_step(net, p, c << rounds.saturating_sub(1), sh)?;
    }
    // Ring allgather: P − 1 steps, each passes one share of c bytes to the
    // right neighbour while receiving one from the left: (P−1)·X(c).
    let ring = (p as f64 - 1.0) * exchange_step(net, p, c, sh)?;

    // Pipelined chain with segments of k bytes, n = ⌈m/k⌉ segments over
    // P − 1 hops. The first segment reaches the last rank after
    // (P−1)·T(k); every later one follows a pipeline period behind. The
    // period is the slowest stage: a link accepts one segment per gap(k); an
    // inner rank spends forward(k) = o_s + o_r + (k−1)·max(O_s, O_r) of CPU
    // per segment (receive, then send on; the segment's one copy per hop
    // counted once). T = (P−1)·T(k) + (n−1)·max(gap(k), forward(k)), with
    // the hops and periods stretched by the ranks that share cores
    // ([`chain_time`]).
    // The optimal k (d T / d k = 0 gives k* = sqrt(m·a / ((P−2)·G)) for
    // T(k) ≈ a + k·G) is found by evaluating powers of two and S, since the
    // range boundaries make T non-smooth.
    let (chain, seg) = if p <= 1 {
        (0.0, m)
    } else {
        let mut best = (f64::INFINITY, m);
        let mut k = 64u64.min(m.max(1));
        let mut candidates = [0u64; 48];
        let mut n = 0;
        while n < 40 {
            candidates[n] = k.min(m.max(1));
            n += 1;
            if k >= m {
                break;
            }
            k *= 2;
        }
        let s_bytes = net.at(m)?.S_bytes;
        if s_bytes != u64::MAX && s_bytes > 0 && s_bytes < m {
            candidates[n] = s_bytes;
            n += 1;
        }
        for &k in &candidates[..n] {
            let t = chain_time(net, p, m, k, sh)?;
            if t < best.0 {
                best = (t, k);
            }
        }
        best
    };

    let mut out = Candidates {
        items: [Choice {
            algorithm: 0,
            reserved: 0,
            predicted_ns: 0.0,
            segment_bytes: 0,
        }; 4],
        len: 4,
    };
    let vals = [
        (Algorithm::BcastBinomial, binomial, 0),
        (Algorithm::BcastScatterRdAllgather, scatter + rd, 0),
        (Algorithm::BcastScatterRingAllgather, scatter + ring, 0),
        (Algorithm::BcastChain, chain, seg),
    ];
    for (i, (a, t, s)) in vals.into_iter().enumerate() {
        out.items[i] = Choice {
            algorithm: a as u32,
            reserved: 0,
            predicted_ns: if p <= 1 { 0.0 } else { t },
            segment_bytes: s,
        };
    }
    Ok(out)
}

/// Allreduce candidates over m bytes, combining at γ ns per byte.
fn allreduce<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    gamma: f64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    // Every step of all three keeps every rank busy (P transfers, P ranks
    // combining).
    let all = sh.factor(p);
    let gamma = gamma * all;
    let rounds = ceil_log2(p);
    let pow2 = p.is_power_of_two();
    let mf = m as f64;

    // Each exchange of s bytes is an all-ranks step X(s) (exchange_step).
    // Recursive doubling: log2 P steps, each exchanges all m bytes with
    // rank ⊕ 2^k and combines them: log2 P·(X(m) + γ·m). A non-power of two
    // adds a fold-in step before and a fold-out step after: +2·X(m) + γ·m.
    let tm = exchange_step(net, p, m, sh)?;
    let mut rd = f64::from(rounds) * (tm + gamma * mf);
    if !pow2 {
        rd = f64::from(rounds - 1) * (tm + gamma * mf) + 2.0 * tm + gamma * mf;
    }

    // Rabenseifner: reduce-scatter by recursive halving (step k exchanges
    // and combines m/2^k bytes), then allgather by recursive doubling (the
    // same sizes in reverse, without combining):
    // Σ_{k=1..log2 P} [2·X(m/2^k) + γ·m/2^k]; non-powers of two fold in and
    // out like recursive doubling (+2·X(m) + γ·m).
    let q = if pow2 { p } else { p.next_power_of_two() / 2 };
    let q_rounds = ceil_log2(q);
    let mut rab = 0.0;
    for k in 1..=q_rounds {
        let s = (m >> k).max(1);
        rab += 2.0 * exchange_step(net, p, s, sh)? + gamma * s as f64;
    }
    if !pow2 {
        rab += 2.0 * tm + gamma * mf;
    }

    // Ring: a reduce-scatter of P − 1 steps (pass one block of m/P to the
    // right, combine the one from the left) and an allgather of P − 1
    // steps: 2(P−1)·X(m/P) + (P−1)·γ·m/P.
    let b = m.div_ceil(p as u64).max(1);
    let ring = 2.0 * (p as f64 - 1.0) * exchange_step(net, p, b, sh)?
        + (p as f64 - 1.0) * gamma * b as f64;

    let mut out = Candidates {
        items: [Choice {
            algorithm: 0,
            reserved: 0,
            predicted_ns: 0.0,
            segment_bytes: 0,
        }; 4],
        len: 3,
    };
    let vals = [
        (Algorithm::AllreduceRecursiveDoubling, rd),
        (Algorithm::AllreduceRabenseifner, rab),
        (Algorithm::AllreduceRing, ring),
    ];
    for (i, (a, t)) in vals.into_iter().enumerate() {
        out.items[i] = Choice {
            algorithm: a as u32,
            reserved: 0,
            predicted_ns: if p <= 1 { 0.0 } else { t },
            segment_bytes: 0,
        };
    }
    Ok(out)
}

/// Barrier candidates (messages of 0 bytes; LogfP applies).
fn barrier<N: Network + ?Sized>(net: &N, p: usize, sh: Sharing) -> Result<Candidates, LookupError> {
    // Dissemination: ⌈log2 P⌉ rounds; in round k rank r notifies r + 2^k
    // and waits for r − 2^k. Sends and receives overlap: ⌈log2 P⌉·T(0),
    // every rank busy in every round.
    let dis = f64::from(ceil_log2(p)) * exchange_step(net, p, 0, sh)?;
    // Tree: a binomial fan-in to the root and a binomial fan-out back. The
    // fan-in is the fan-out run backwards (the root receives where it would
    // send), so it takes as long: 2 × binomial broadcast of 0 bytes.
    let tree = 2.0 * binomial_tree(net, p, 0, 0, sh)?;
    let mut out = Candidates {
        items: [Choice {
            algorithm: 0,
            reserved: 0,
            predicted_ns: 0.0,
            segment_bytes: 0,
        }; 4],
        len: 2,
    };
    out.items[0] = Choice {
        algorithm: Algorithm::BarrierDissemination as u32,
        reserved: 0,
        predicted_ns: if p <= 1 { 0.0 } else { dis },
        segment_bytes: 0,
    };
    out.items[1] = Choice {
        algorithm: Algorithm::BarrierTree as u32,
        reserved: 0,
        predicted_ns: if p <= 1 { 0.0 } else { tree },
        segment_bytes: 0,
    };
    Ok(out)
}

/// Predict every candidate algorithm of `coll` for `ranks` processes and
/// `msg_bytes` (ignored for the barrier). No allocation, no system call
/// beyond the network's lookups.
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
    Ok(match coll {
        Collective::Bcast => bcast(net, ranks, msg_bytes, Sharing::new(opts.cores))?,
        Collective::Allreduce => allreduce(
            net,
            ranks,
            msg_bytes,
            opts.gamma_ns_per_byte,
            Sharing::new(opts.cores),
        )?,
        Collective::Barrier => barrier(net, ranks, Sharing::new(opts.cores))?,
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

// ---------------------------------------------------------------- C ABI

fn write_choices(
    c: &Candidates,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) {
    if !best.is_null() {
        // SAFETY: the caller passes a valid, writable ng_choice or NULL.
        unsafe { *best = c.best() };
    }
    let items = c.as_slice();
    if !all.is_null() {
        for (i, item) in items.iter().take(all_cap).enumerate() {
            // SAFETY: the caller guarantees `all` has `all_cap` elements.
            unsafe { *all.add(i) = *item };
        }
    }
    if !n_all.is_null() {
        // SAFETY: valid, writable size_t or NULL.
        unsafe { *n_all = items.len() };
    }
}

fn select_errno(e: SelectError) -> i32 {
    match e {
        SelectError::NoRanks => -libc::EINVAL,
        SelectError::Lookup(l) => l.errno(),
    }
}

/// C: `ng_select`. `ranges` points to `n_ranges` parameter sets (one per
/// protocol range, or a single lookup result). Writes the fastest choice to
/// `best` and up to `all_cap` candidates to `all` (either may be NULL), the
/// number of candidates to `n_all`. Returns 0 or a negative errno.
///
/// # Safety
/// `ranges` must point to `n_ranges` valid `ng_params`; `best`, `n_all`
/// must be NULL or valid; `all` NULL or valid for `all_cap` elements.
#[no_mangle]
pub unsafe extern "C" fn ng_select(
    ranges: *const Params,
    n_ranges: usize,
    collective: u32,
    ranks: u32,
    msg_bytes: u64,
    gamma_ns_per_byte: f64,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) -> i32 {
    let Some(coll) = Collective::from_u32(collective) else {
        return -libc::EINVAL;
    };
    if ranges.is_null() || n_ranges == 0 {
        return -libc::EINVAL;
    }
    // SAFETY: the caller guarantees `n_ranges` valid elements.
    let net = unsafe { std::slice::from_raw_parts(ranges, n_ranges) };
    let opts = SelectOptions {
        gamma_ns_per_byte: if gamma_ns_per_byte.is_finite() && gamma_ns_per_byte >= 0.0 {
            gamma_ns_per_byte
        } else {
            DEFAULT_GAMMA_NS_PER_BYTE
        },
        cores: 0,
    };
    match candidates(net, coll, ranks as usize, msg_bytes, &opts) {
        Ok(c) => {
            write_choices(&c, best, all, all_cap, n_all);
            0
        }
        Err(e) => select_errno(e),
    }
}

/// C: `ng_select_lookup`: like [`ng_select`] with the parameters of
/// (peer, transport) looked up in a mapped segment size by size.
///
/// # Safety
/// `r` from `ng_open`; `peer`, `transport` NUL-terminated strings; output
/// pointers as for [`ng_select`].
#[no_mangle]
pub unsafe extern "C" fn ng_select_lookup(
    r: *const Reader,
    peer: *const libc::c_char,
    transport: *const libc::c_char,
    collective: u32,
    ranks: u32,
    msg_bytes: u64,
    gamma_ns_per_byte: f64,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) -> i32 {
    if r.is_null() || peer.is_null() || transport.is_null() {
        return -libc::EINVAL;
    }
    let Some(coll) = Collective::from_u32(collective) else {
        return -libc::EINVAL;
    };
    // SAFETY: checked non-null; the caller passes NUL-terminated strings.
    let (peer, transport) = unsafe {
        (
            std::ffi::CStr::from_ptr(peer).to_str(),
            std::ffi::CStr::from_ptr(transport).to_str(),
        )
    };
    let (Ok(peer), Ok(transport)) = (peer, transport) else {
        return -libc::EINVAL;
    };
    // SAFETY: `r` came from ng_open and is not freed while in use.
    let reader = unsafe { &*r };
    let net = ReaderNetwork {
        reader,
        peer,
        transport,
    };
    let opts = SelectOptions {
        gamma_ns_per_byte: if gamma_ns_per_byte.is_finite() && gamma_ns_per_byte >= 0.0 {
            gamma_ns_per_byte
        } else {
            DEFAULT_GAMMA_NS_PER_BYTE
        },
        cores: 0,
    };
    match candidates(&net, coll, ranks as usize, msg_bytes, &opts) {
        Ok(c) => {
            write_choices(&c, best, all, all_cap, n_all);
            0
        }
        Err(e) => select_errno(e),
    }
}

/// C: `ng_algorithm_name`: a static NUL-terminated name, or NULL.
#[no_mangle]
pub extern "C" fn ng_algorithm_name(algorithm: u32) -> *const libc::c_char {
    let s: &'static [u8] = match Algorithm::from_u32(algorithm) {
        Some(Algorithm::BcastBinomial) => b"binomial\0",
        Some(Algorithm::BcastScatterRdAllgather) => b"scatter_rd_allgather\0",
        Some(Algorithm::BcastScatterRingAllgather) => b"scatter_ring_allgather\0",
        Some(Algorithm::BcastChain) => b"pipelined_chain\0",
        Some(Algorithm::AllreduceRecursiveDoubling) => b"recursive_doubling\0",
        Some(Algorithm::AllreduceRabenseifner) => b"rabenseifner\0",
        Some(Algorithm::AllreduceRing) => b"ring\0",
        Some(Algorithm::BarrierDissemination) => b"dissemination\0",
        Some(Algorithm::BarrierTree) => b"tree\0",
        None => return std::ptr::null(),
    };
    s.as_ptr() as *const libc::c_char
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A LogGP network without S or LogfP.
    fn net(l: f64, o: f64, g: f64, big_g: f64) -> Params {
        Params {
            eel_ns: l + 2.0 * o,
            L_ns: l,
            o_s_ns: o,
            o_r_ns: o,
            g_ns: g,
            G_ns_per_byte: big_g,
            S_bytes: u64::MAX,
            range_from_bytes: 0,
            range_to_bytes: u64::MAX,
            ..Params::default()
        }
    }

    #[test]
    fn each_range_prices_its_own_bytes() {
        let mut a = net(1000.0, 500.0, 800.0, 0.1);
        a.range_from_bytes = 1;
        a.range_to_bytes = 1 << 20;
        let mut b = a;
        b.range_from_bytes = (1 << 20) + 1;
        b.range_to_bytes = 4 << 20;
        b.g_ns = 500_000.0;
        b.G_ns_per_byte = 0.0;
        let end_of_a = one_message_ns(&a, 1 << 20);
        // A last range of a few large sizes fitted G = 0: its bytes cost
        // nothing more, the message still costs what 1 MiB did (its own
        // EEL + (s−1)·G would be EEL).
        let t = one_message_on(&[a, b][..], 4 << 20).unwrap();
        assert!((t - end_of_a).abs() < 1e-6, "{t} vs {end_of_a}");
        assert!(one_message_ns(&b, 4 << 20) < 0.1 * end_of_a);
        // A slower second range: its bytes at its G, continuous at the
        // boundary.
        b.G_ns_per_byte = 0.3;
        let t = one_message_on(&[a, b][..], 4 << 20).unwrap();
        let want = end_of_a + (3 << 20) as f64 * 0.3;
        assert!((t - want).abs() < 1e-6, "{t} vs {want}");
        // A narrow first range with a wild slope costs only its own bytes.
        let mut narrow = a;
        narrow.range_from_bytes = 61;
        narrow.range_to_bytes = 64;
        narrow.G_ns_per_byte = 50.0;
        let mut small = a;
        small.range_to_bytes = 60;
        let mut rest = a;
        rest.range_from_bytes = 65;
        let t = one_message_on(&[small, narrow, rest][..], 1024).unwrap();
        let want = one_message_ns(&a, 60) + 4.0 * 50.0 + (1024 - 64) as f64 * 0.1;
        assert!((t - want).abs() < 1e-6, "{t} vs {want}");
        // The handshake above S, once.
        let mut s = a;
        s.S_bytes = 4096;
        let ranges = [s];
        assert!(
            (one_message_on(&ranges[..], 8192).unwrap() - one_message_ns(&s, 8192)).abs() < 1e-6
        );
        // One Params (no ranges to look back on): its own value.
        assert!((one_message_on(&a, 4 << 20).unwrap() - one_message_ns(&a, 4 << 20)).abs() < 1e-9);
    }

    #[test]
    fn one_message_counts_the_bytes_once() {
        // LogGP (no per-byte overheads): T(s) is the paper's L + 2o + (s−1)G.
        let p = net(1000.0, 300.0, 400.0, 0.25);
        for s in [1u64, 64, 4096, 1 << 20] {
            assert!(
                (one_message_ns(&p, s) - p.predict_ns(s)).abs() < 1e-6,
                "{s}"
            );
        }
        // Shared memory: the copy shows up as G (the gap), O_s (the sender's
        // busy time) and O_r (the receiver's): it is paid once, not three
        // times.
        let mut shm = net(200.0, 150.0, 400.0, 0.10);
        shm.O_s_ns_per_byte = 0.10;
        shm.O_r_ns_per_byte = 0.09;
        let m = 1u64 << 20;
        let t = one_message_ns(&shm, m);
        assert!((t - (shm.eel_ns + (m - 1) as f64 * 0.10)).abs() < 1e-6);
        assert!(shm.predict_ns(m) > 2.5 * t);
        // The handshake above S, and no EEL: its LogGP value.
        shm.S_bytes = 4096;
        assert!((one_message_ns(&shm, m) - t - 2.0 * shm.eel_ns).abs() < 1e-6);
        shm.eel_ns = f64::NAN;
        assert!((one_message_ns(&shm, 1) - 500.0).abs() < 1e-9);
    }

    #[test]
    fn shared_cores_stretch_steps_with_more_busy_ranks_than_cores() {
        let p = net(1000.0, 200.0, 300.0, 0.25);
        let m = 1u64 << 20;
        let alone = SelectOptions::default();
        let two = SelectOptions { cores: 2, ..alone };
        let rd = |c: &Candidates| c.as_slice()[0].predicted_ns;
        // Recursive doubling on 4 ranks, 2 cores: every step has 4 busy
        // ranks, so all of it takes twice as long, small or large.
        for bytes in [8u64, m] {
            let a = candidates(&p, Collective::Allreduce, 4, bytes, &alone).unwrap();
            let b = candidates(&p, Collective::Allreduce, 4, bytes, &two).unwrap();
            assert!(
                (rd(&b) - 2.0 * rd(&a)).abs() < 1e-6,
                "{} {}",
                rd(&a),
                rd(&b)
            );
        }
        // Binomial broadcast on 4 ranks never has more than 2 transfers at once.
        let a = candidates(&p, Collective::Bcast, 4, m, &alone).unwrap();
        let b = candidates(&p, Collective::Bcast, 4, m, &two).unwrap();
        assert_eq!(a.as_slice()[0].predicted_ns, b.as_slice()[0].predicted_ns);
        // ... but on 8 ranks its last round has 4.
        let a = candidates(&p, Collective::Bcast, 8, m, &alone).unwrap();
        let b = candidates(&p, Collective::Bcast, 8, m, &two).unwrap();
        assert!(b.as_slice()[0].predicted_ns > a.as_slice()[0].predicted_ns);
        // Enough cores: identical.
        let many = SelectOptions { cores: 8, ..alone };
        let c = candidates(&p, Collective::Allreduce, 8, m, &many).unwrap();
        let d = candidates(&p, Collective::Allreduce, 8, m, &alone).unwrap();
        assert_eq!(c.as_slice(), d.as_slice());
    }

    #[test]
    fn exchange_transport_names() {
        let mut buf = [0u8; TRANSPORT_MAX_BYTES];
        assert_eq!(exchange_transport("mpi", 4, &mut buf), Some("mpi-x4"));
        assert_eq!(exchange_transport("mpi", 1024, &mut buf), Some("mpi-x1024"));
        assert_eq!(exchange_transport("msg", 0, &mut buf), Some("msg-x0"));
        // 15 bytes fit, 16 do not.
        assert_eq!(
            exchange_transport("abcdefghij", 123, &mut buf),
            Some("abcdefghij-x123")
        );
        assert_eq!(exchange_transport("abcdefghij", 1234, &mut buf), None);
    }

    /// A pair and an exchange entry's ranges (g + (s−1)·G per range,
    /// measured with 4 ranks).
    fn pair_and_exchange() -> ([Params; 1], Vec<Params>) {
        ([net(1000.0, 200.0, 300.0, 0.08)], exchange_ranges())
    }

    /// An exchange entry's ranges: g + (s−1)·G per range.
    fn exchange_ranges() -> Vec<Params> {
        let eager = Params {
            range_from_bytes: 1,
            range_to_bytes: 4095,
            g_ns: 3000.0,
            G_ns_per_byte: 1.0,
            ..Params::default()
        };
        let rdv = Params {
            range_from_bytes: 4096,
            range_to_bytes: 4 << 20,
            g_ns: 10_000.0,
            G_ns_per_byte: 0.25,
            ..Params::default()
        };
        vec![eager, rdv]
    }

    #[test]
    fn measured_exchange_prices_the_all_ranks_steps() {
        let (pair, x) = pair_and_exchange();
        let measured = Measured {
            pair: &pair,
            exchange: &x,
            exchange_ranks: 4,
        };
        let line = |s: u64| {
            let p = x.as_slice().at(s).unwrap();
            p.g_ns + (s - 1) as f64 * p.G_ns_per_byte
        };
        assert_eq!(measured.exchange_ns(4, 4096), Some(line(4096)));
        assert_eq!(
            measured.exchange_ns(8, 4096),
            None,
            "measured for 4 ranks only"
        );
        let opts = SelectOptions {
            gamma_ns_per_byte: 0.0,
            cores: 0,
        };
        let m = 1u64 << 20;
        let c = candidates(&measured, Collective::Allreduce, 4, m, &opts).unwrap();
        let [rd, rab, ring] = [0, 1, 2].map(|i| c.as_slice()[i].predicted_ns);
        // γ = 0: recursive doubling is 2·X(m), Rabenseifner 2·X(m/2) +
        // 2·X(m/4), the ring 6·X(m/4), each X from the exchange ranges.
        assert!((rd - 2.0 * line(m)).abs() < 1e-6, "{rd}");
        assert!((rab - 2.0 * line(m / 2) - 2.0 * line(m / 4)).abs() < 1e-6);
        assert!((ring - 6.0 * line(m / 4)).abs() < 1e-6);
        // The barrier's dissemination: 2 rounds of X(0) (the first range).
        let b = candidates(&measured, Collective::Barrier, 4, 0, &opts).unwrap();
        assert!((b.as_slice()[0].predicted_ns - 2.0 * 3000.0).abs() < 1e-6);
        // Other rank counts keep the pair model.
        let p8 = candidates(&measured, Collective::Allreduce, 8, m, &opts).unwrap();
        let p8_pair = candidates(&pair[..], Collective::Allreduce, 8, m, &opts).unwrap();
        assert_eq!(p8.as_slice(), p8_pair.as_slice());
    }

    #[test]
    fn tree_hops_keep_the_pair_model_beside_an_exchange() {
        let (pair, x) = pair_and_exchange();
        let measured = Measured {
            pair: &pair,
            exchange: &x,
            exchange_ranks: 4,
        };
        let pair_only = Measured {
            pair: &pair,
            exchange: &[],
            exchange_ranks: 4,
        };
        let opts = SelectOptions {
            gamma_ns_per_byte: 0.0,
            cores: 2,
        };
        let m = 1u64 << 20;
        let a = candidates(&measured, Collective::Bcast, 4, m, &opts).unwrap();
        let b = candidates(&pair_only, Collective::Bcast, 4, m, &opts).unwrap();
        // Binomial and chain: the same; the allgathers: priced by X.
        assert_eq!(a.as_slice()[0], b.as_slice()[0]);
        assert_eq!(a.as_slice()[3], b.as_slice()[3]);
        assert_ne!(a.as_slice()[1], b.as_slice()[1]);
    }

    #[test]
    fn chain_fill_shares_cores_only_with_the_segments_in_flight() {
        // 4 ranks on 2 cores, a message of exactly 2 segments: while the
        // first segment crosses hops 1, 2, 3 at most 2 links are busy, so
        // no hop is stretched: 3·T(k) + 1 period (2 busy ranks).
        let p = net(1000.0, 200.0, 300.0, 0.25);
        let m = 2 * 65536;
        let k = m / 2;
        let x = msg(&p, k).unwrap();
        let want = 3.0 * x.t_ns + x.gap_ns.max(x.forward_ns);
        let got = chain_time(&p, 4, m, k, Sharing::new(2)).unwrap();
        assert!((got - want).abs() < 1e-6, "{got} vs {want}");
        assert_eq!(got, chain_time(&p, 4, m, k, Sharing::new(0)).unwrap());
        // Many segments: the third hop and the steady state have 3 busy
        // ranks (stretch 1.5), so sharing costs something.
        let big = 64 * k;
        let shared = chain_time(&p, 4, big, k, Sharing::new(2)).unwrap();
        let own = chain_time(&p, 4, big, k, Sharing::new(0)).unwrap();
        // 2 unstretched hops, then 1 hop and 63 periods at 1.5.
        let want = 2.0 * x.t_ns + 1.5 * (x.t_ns + 63.0 * x.gap_ns.max(x.forward_ns));
        assert!((shared - want).abs() < 1e-6 * want, "{shared} vs {want}");
        assert!(shared > 1.2 * own);
    }

    #[test]
    fn forwarding_rank_pays_each_hop_copy_once() {
        // Shared memory, single copy: both ends' per-byte overheads are the
        // one copy (O_s = 0.08, O_r = 0.075 ns/B), G = 0.077 ns/B.
        let p = Params {
            O_s_ns_per_byte: 0.08,
            O_r_ns_per_byte: 0.075,
            ..net(1000.0, 500.0, 600.0, 0.077)
        };
        let k = 512 * 1024;
        let x = msg(&p, k).unwrap();
        let once = 500.0 + 500.0 + (k - 1) as f64 * 0.08;
        assert!((x.forward_ns - once).abs() < 1e-6, "{}", x.forward_ns);
        // The period is the larger of the gap and that: 42.5 µs, not the
        // 81.7 µs of o_s(k) + o_r(k).
        let t = chain_time(&p, 3, 4 * k, k, Sharing::new(0)).unwrap();
        let want = 2.0 * x.t_ns + 3.0 * x.gap_ns.max(once);
        assert!((t - want).abs() < 1e-6 * want, "{t} vs {want}");
        assert!(once < 0.6 * (1000.0 + (k - 1) as f64 * 0.155));
    }

    #[test]
    fn binomial_tree_shape() {
        let mut kids = [(0, 0); 64];
        let n = binomial_children(0, 8, &mut kids);
        assert_eq!(&kids[..n], &[(4, 4), (2, 2), (1, 1)]);
        let n = binomial_children(4, 8, &mut kids);
        assert_eq!(&kids[..n], &[(6, 2), (5, 1)]);
        let n = binomial_children(5, 8, &mut kids);
        assert_eq!(n, 0);
        let n = binomial_children(0, 5, &mut kids);
        assert_eq!(&kids[..n], &[(4, 1), (2, 2), (1, 1)]);
    }

    #[test]
    fn binomial_matches_closed_form_when_gap_dominates() {
        // gap = T: the root's sends do not overlap its children's, and the
        // evaluation gives the textbook log2 P · T for P = 8 (root: 3 sends;
        // its last child, rank 1, receives at 2·gap + T = 3T).
        let p = net(1000.0, 500.0, 2000.0, 0.0);
        let t = p.predict_ns(8);
        assert!((t - 2000.0).abs() < 1e-9);
        let got = binomial_tree(&p, 8, 8, 0, Sharing::new(0)).unwrap();
        assert!((got - 3.0 * t).abs() < 1e-6, "{got}");
    }

    #[test]
    fn binomial_overlaps_with_small_gap() {
        // gap = o = 100 < T = 1200: the root's sends are 100 ns apart; rank 4
        // gets the data at T, forwards to 6 at T + T, and 6 to 7 at 3T; rank
        // 7 is last at 3T; rank 1 at 2·gap + T. So 3T total.
        let p = net(1000.0, 100.0, 100.0, 0.0);
        let t = p.predict_ns(1);
        let got = binomial_tree(&p, 8, 1, 0, Sharing::new(0)).unwrap();
        assert!((got - 3.0 * t).abs() < 1e-6);
        // P = 3: root sends to 2 then 1: 1 receives at gap + T.
        let got = binomial_tree(&p, 3, 1, 0, Sharing::new(0)).unwrap();
        assert!((got - (100.0 + t)).abs() < 1e-6, "{got}");
    }

    #[test]
    fn bandwidth_bound_bcast_prefers_pipelines() {
        let p = net(1000.0, 300.0, 400.0, 0.1); // 10 GB/s
        let opts = SelectOptions::default();
        let c = candidates(&p, Collective::Bcast, 16, 4 << 20, &opts).unwrap();
        let best = c.best();
        assert_ne!(best.algorithm, Algorithm::BcastBinomial as u32);
        let binom = c.as_slice()[0].predicted_ns;
        // Binomial on 16 ranks moves m four times along the critical path.
        assert!(binom > 4.0 * 0.1 * (4u64 << 20) as f64 * 0.99);
        assert!(best.predicted_ns < binom / 1.5);
        // Small message: latency bound, binomial wins.
        let c = candidates(&p, Collective::Bcast, 16, 8, &opts).unwrap();
        assert_eq!(c.best().algorithm, Algorithm::BcastBinomial as u32);
    }

    #[test]
    fn chain_segment_is_optimal_among_powers() {
        let p = net(2000.0, 200.0, 300.0, 0.2);
        let m = 1u64 << 20;
        let c = bcast(&p, 4, m, Sharing::new(0)).unwrap();
        let chain = c.as_slice()[3];
        assert!(chain.segment_bytes > 64 && chain.segment_bytes < m);
        // Closed form with the chosen k, and neighbours are not better.
        let eval = |k: u64| {
            let x = msg(&p, k).unwrap();
            3.0 * x.t_ns + (m.div_ceil(k) as f64 - 1.0) * x.gap_ns.max(x.forward_ns)
        };
        let k = chain.segment_bytes;
        assert!((eval(k) - chain.predicted_ns).abs() < 1e-6);
        assert!(eval(k * 2) >= chain.predicted_ns && eval(k / 2) >= chain.predicted_ns);
    }

    #[test]
    fn rendezvous_threshold_changes_the_cost() {
        let mut p = net(1000.0, 200.0, 300.0, 0.2);
        let without = candidates(&p, Collective::Bcast, 4, 8192, &SelectOptions::default())
            .unwrap()
            .as_slice()[0]
            .predicted_ns;
        p.S_bytes = 4096;
        let with = candidates(&p, Collective::Bcast, 4, 8192, &SelectOptions::default())
            .unwrap()
            .as_slice()[0]
            .predicted_ns;
        // Binomial on 4 ranks: 2 rounds on the critical path, each +2·EEL.
        assert!((with - without - 2.0 * 2.0 * p.eel_ns).abs() < 1e-6);
    }

    #[test]
    fn allreduce_formulas() {
        let p = net(1000.0, 200.0, 300.0, 0.25);
        let gamma = 0.5;
        let opts = SelectOptions {
            gamma_ns_per_byte: gamma,
            cores: 0,
        };
        let m = 1u64 << 16;
        let c = candidates(&p, Collective::Allreduce, 8, m, &opts).unwrap();
        let t = |s: u64| p.predict_ns(s);
        let rd = 3.0 * (t(m) + gamma * m as f64);
        assert!((c.as_slice()[0].predicted_ns - rd).abs() < 1e-6);
        let rab: f64 = (1..=3)
            .map(|k| 2.0 * t(m >> k) + gamma * (m >> k) as f64)
            .sum();
        assert!((c.as_slice()[1].predicted_ns - rab).abs() < 1e-6);
        let ring = 14.0 * t(m / 8) + 7.0 * gamma * (m / 8) as f64;
        assert!((c.as_slice()[2].predicted_ns - ring).abs() < 1e-6);
        // Small: recursive doubling; large: Rabenseifner beats doubling.
        let small = candidates(&p, Collective::Allreduce, 8, 8, &opts)
            .unwrap()
            .best();
        assert_eq!(
            small.algorithm,
            Algorithm::AllreduceRecursiveDoubling as u32
        );
        let large = candidates(&p, Collective::Allreduce, 8, 4 << 20, &opts)
            .unwrap()
            .best();
        assert_ne!(
            large.algorithm,
            Algorithm::AllreduceRecursiveDoubling as u32
        );
    }

    #[test]
    fn logfp_makes_tree_fan_out_cheaper() {
        let mut p = net(1000.0, 300.0, 2000.0, 0.0);
        let plain = binomial_tree(&p, 16, 1, 0, Sharing::new(0)).unwrap();
        p.f = 8;
        p.o_min_ns = 100.0;
        p.o_max_ns = 200.0;
        p.g_f_ns = 2000.0;
        let logfp = binomial_tree(&p, 16, 1, 0, Sharing::new(0)).unwrap();
        assert!(logfp < plain, "{logfp} vs {plain}");
        // Big messages ignore LogfP.
        let big_plain = binomial_tree(
            &net(1000.0, 300.0, 2000.0, 0.0),
            16,
            4096,
            0,
            Sharing::new(0),
        )
        .unwrap();
        assert!(
            (binomial_tree(&p, 16, 4096, 0, Sharing::new(0)).unwrap() - big_plain).abs() < 1e-9
        );
    }

    #[test]
    fn ranges_pick_the_containing_one() {
        let mut a = net(1000.0, 200.0, 300.0, 0.1);
        a.range_from_bytes = 1;
        a.range_to_bytes = 4096;
        let mut b = a;
        b.range_from_bytes = 4097;
        b.range_to_bytes = 1 << 20;
        b.G_ns_per_byte = 0.05;
        let set = [a, b];
        assert_eq!(set[..].at(100).unwrap().G_ns_per_byte, 0.1);
        assert_eq!(set[..].at(10_000).unwrap().G_ns_per_byte, 0.05);
        assert_eq!(set[..].at(1 << 30).unwrap().G_ns_per_byte, 0.05);
        assert_eq!(set[..].at(0).unwrap().G_ns_per_byte, 0.1);
    }

    #[test]
    fn c_abi_select() {
        let p = net(1000.0, 200.0, 300.0, 0.1);
        let mut best = Choice {
            algorithm: 99,
            reserved: 0,
            predicted_ns: 0.0,
            segment_bytes: 0,
        };
        let mut all = [best; 4];
        let mut n = 0usize;
        // SAFETY: valid pointers to locals.
        let rc = unsafe { ng_select(&p, 1, 2, 8, 0, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
        assert_eq!(rc, 0);
        assert_eq!(n, 2);
        assert!(best.predicted_ns > 0.0);
        assert_eq!(
            best.predicted_ns,
            all[0].predicted_ns.min(all[1].predicted_ns)
        );
        // SAFETY: as above.
        let bad = unsafe { ng_select(&p, 1, 7, 8, 0, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
        assert_eq!(bad, -libc::EINVAL);
        // SAFETY: as above.
        let zero =
            unsafe { ng_select(&p, 1, 0, 0, 8, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
        assert_eq!(zero, -libc::EINVAL);
        let name = ng_algorithm_name(Algorithm::BcastChain as u32);
        // SAFETY: a static NUL-terminated string.
        assert_eq!(
            unsafe { std::ffi::CStr::from_ptr(name) }.to_str().unwrap(),
            "pipelined_chain"
        );
        assert!(ng_algorithm_name(5).is_null());
    }
}
