//! Algorithms as schedules: the sequence of sends, receives, waits and
//! local work one rank performs in one call. [`super::sim`] runs them on the
//! LogGP(S) network to price what each rank sees; the same schedules
//! describe ngcoll's own algorithms and the ones an MPI library runs when
//! left to itself (`library`), so both are priced by one model.
//!
//! Ranks are relative to the root (`v = (r − root) mod P`); peers are
//! emitted as real ranks.

mod parts;

/// One step of one rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// Post a send of `bytes` to `to`. `exchange`: a step in which every
    /// rank sends to and receives from a partner at once (priced at the
    /// measured all-ranks step X(s) when the segment has it).
    Send {
        to: usize,
        bytes: u64,
        exchange: bool,
    },
    /// Post a receive of `bytes` from `from`.
    Recv { from: usize, bytes: u64 },
    /// Wait for everything posted so far.
    Wait,
    /// Wait for the receives posted so far (sends stay in flight).
    WaitRecvs,
    /// Combine `bytes` (γ per byte).
    Reduce { bytes: u64 },
    /// Copy `bytes` in memory (through a shared-memory buffer, or a local
    /// rotation).
    Copy { bytes: u64 },
    /// First writes to `bytes` of freshly mapped memory (page faults: a
    /// buffer allocated for the call and given back to the kernel after
    /// it).
    Touch { bytes: u64 },
}

/// Allocations of at least this many bytes come from fresh mappings that
/// are given back when freed (glibc's default `M_MMAP_THRESHOLD`), so a
/// buffer of that size allocated on every call is first touched on every
/// call.
pub const FRESH_ALLOC_BYTES: u64 = 128 * 1024;

/// An algorithm as the model runs it. The first group are ngcoll's own
/// (see [`super::Algorithm`]); the rest are what Open MPI's coll/tuned and
/// MPICH run by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Schedule {
    BcastBinomial,
    BcastScatterRd,
    BcastScatterRing,
    /// Segmented chain (`seg` = the message: unsegmented).
    BcastChain {
        seg: u64,
    },
    /// The root sends to every rank itself.
    BcastLinear,
    /// Binary tree (heap order), unsegmented.
    BcastBinary,
    /// k-nomial tree.
    BcastKnomial {
        radix: u32,
    },
    /// A shared-memory broadcast (MPICH's release/gather): the root copies
    /// the message into a buffer every rank maps, flags it, every other
    /// rank copies it out and acknowledges.
    BcastShm,

    ReduceBinomial,
    /// The binomial tree as Open MPI's coll/base runs it
    /// (`ompi_coll_base_reduce_generic`): every rank with children
    /// allocates its accumulation and receive buffers on every call.
    ReduceBinomialAlloc,
    ReduceRabenseifner,
    /// Rabenseifner's reduce as Open MPI's coll/base runs it
    /// (`ompi_coll_base_reduce_intra_redscat_gather`): a receive buffer
    /// allocated on every call, and at every rank but the root a copy of
    /// its vector into another.
    ReduceRabenseifnerAlloc,
    /// The root receives and combines every other rank's vector in turn.
    ReduceLinear,
    /// Binary tree (heap order), as Open MPI's coll/base runs it (buffers
    /// allocated per call, as [`Schedule::ReduceBinomialAlloc`]).
    ReduceBinary,
    /// Chain towards the root, segmented by `seg`, as Open MPI's coll/base
    /// runs it (buffers allocated per call).
    ReduceChain {
        seg: u64,
    },
    /// Shared-memory reduce (MPICH's release/gather): every rank copies its
    /// vector into the shared buffer, the root combines them.
    ReduceShm,

    AllreduceRecursiveDoubling,
    AllreduceRabenseifner,
    AllreduceRing,
    /// Reduce to rank 0 (binomial), then broadcast (binomial).
    AllreduceReduceBcast,
    /// Every rank sends its vector to every other rank, all posted at
    /// once, then combines the P vectors.
    AllreduceLinear,
    /// Shared-memory reduce, then shared-memory broadcast.
    AllreduceShm,

    AllgatherRecursiveDoubling,
    AllgatherRing,
    AllgatherBruck,
    /// Neighbour exchange (even sizes): P/2 steps.
    AllgatherNeighbor,
    /// Every rank sends its block to every other rank, all posted at once.
    AllgatherLinear,

    AlltoallPairwise,
    AlltoallLinear,
    AlltoallBruck,

    BarrierDissemination,
    BarrierTree,
    /// Everyone notifies rank 0, which releases everyone.
    BarrierLinear,
    BarrierRecursiveDoubling,
    /// Shared-memory barrier (flags through the shared buffer).
    BarrierShm,
}

/// The segment a chain of `m` bytes is cut into when asked for `seg`-byte
/// segments: 0 is the whole message in one, and no segment exceeds the
/// message. The model's chain and libngcoll's both cut by it.
pub fn chain_segment(seg: u64, m: u64) -> u64 {
    if seg == 0 {
        m.max(1)
    } else {
        seg.min(m.max(1))
    }
}

impl Schedule {
    /// The schedule of one of ngcoll's algorithms (`seg` for the chain).
    pub fn of(a: super::Algorithm, seg: u64) -> Schedule {
        use super::Algorithm as A;
        match a {
            A::BcastBinomial => Schedule::BcastBinomial,
            A::BcastScatterRdAllgather => Schedule::BcastScatterRd,
            A::BcastScatterRingAllgather => Schedule::BcastScatterRing,
            A::BcastChain => Schedule::BcastChain { seg },
            A::AllreduceRecursiveDoubling => Schedule::AllreduceRecursiveDoubling,
            A::AllreduceRabenseifner => Schedule::AllreduceRabenseifner,
            A::AllreduceRing => Schedule::AllreduceRing,
            A::AllreduceLinear => Schedule::AllreduceLinear,
            A::BarrierDissemination => Schedule::BarrierDissemination,
            A::BarrierTree => Schedule::BarrierTree,
            A::ReduceBinomial => Schedule::ReduceBinomial,
            A::ReduceRabenseifner => Schedule::ReduceRabenseifner,
            A::AllgatherRecursiveDoubling => Schedule::AllgatherRecursiveDoubling,
            A::AllgatherRing => Schedule::AllgatherRing,
            A::AllgatherLinear => Schedule::AllgatherLinear,
            A::AlltoallPairwise => Schedule::AlltoallPairwise,
            A::AlltoallLinear => Schedule::AlltoallLinear,
        }
    }

    /// Whether a call of this schedule has a root (which rotates in the
    /// "rotating root" view).
    pub fn rooted(self) -> bool {
        use Schedule::*;
        matches!(
            self,
            BcastBinomial
                | BcastScatterRd
                | BcastScatterRing
                | BcastChain { .. }
                | BcastLinear
                | BcastBinary
                | BcastKnomial { .. }
                | BcastShm
                | ReduceBinomial
                | ReduceBinomialAlloc
                | ReduceRabenseifner
                | ReduceRabenseifnerAlloc
                | ReduceLinear
                | ReduceBinary
                | ReduceChain { .. }
                | ReduceShm
        )
    }

    /// The bytes one rank's buffers of a call over `p` ranks and `m` bytes
    /// span: the vector (broadcast, reduce, allreduce), or the P blocks of
    /// allgather and alltoall (`m` is one block there) and the P vectors
    /// of the linear allreduce.
    pub fn working_set(self, p: usize, m: u64) -> u64 {
        use Schedule::*;
        match self {
            AllgatherRecursiveDoubling
            | AllgatherRing
            | AllgatherBruck
            | AllgatherNeighbor
            | AllgatherLinear
            | AlltoallPairwise
            | AlltoallLinear
            | AlltoallBruck
            // Every other rank's vector lands in a slot of its own.
            | AllreduceLinear => m.saturating_mul(p as u64),
            _ => m,
        }
    }

    /// A short name for logs and tables.
    pub fn name(self) -> &'static str {
        use Schedule::*;
        match self {
            BcastBinomial | ReduceBinomial | ReduceBinomialAlloc => "binomial",
            BcastScatterRd => "scatter_rd_allgather",
            BcastScatterRing => "scatter_ring_allgather",
            BcastChain { .. } => "chain",
            BcastLinear | ReduceLinear | BarrierLinear => "linear",
            BcastBinary | ReduceBinary => "binary_tree",
            BcastKnomial { .. } => "knomial",
            BcastShm | ReduceShm | AllreduceShm | BarrierShm => "shm_release_gather",
            ReduceRabenseifner | ReduceRabenseifnerAlloc | AllreduceRabenseifner => "rabenseifner",
            ReduceChain { .. } => "chain",
            AllreduceRecursiveDoubling | AllgatherRecursiveDoubling | BarrierRecursiveDoubling => {
                "recursive_doubling"
            }
            AllreduceRing | AllgatherRing => "ring",
            AllreduceReduceBcast => "reduce_bcast",
            AllreduceLinear => "linear",
            AllgatherBruck | AlltoallBruck => "bruck",
            AllgatherNeighbor => "neighbor_exchange",
            AlltoallPairwise => "pairwise",
            AlltoallLinear | AllgatherLinear => "linear",
            BarrierDissemination => "dissemination",
            BarrierTree => "tree",
        }
    }

    /// Emit rank `r`'s ops for one call over `p` ranks, root `root`, `m`
    /// bytes (allgather, alltoall: the block per rank).
    pub fn emit(self, p: usize, r: usize, root: usize, m: u64, out: &mut Vec<Op>) {
        let e = Emit { p, r, root, out };
        e.run(self, m);
    }
}

struct Emit<'a> {
    p: usize,
    r: usize,
    root: usize,
    out: &'a mut Vec<Op>,
}

fn lowbit(v: usize) -> usize {
    v & v.wrapping_neg()
}

fn pof2_floor(p: usize) -> usize {
    1 << (usize::BITS - 1 - p.max(1).leading_zeros())
}

/// Bytes of `k` blocks of ⌈m/p⌉ starting at block `first` (clipped to m).
fn bbytes(m: u64, p: usize, first: usize, k: usize) -> u64 {
    let c = m.div_ceil(p as u64);
    let lo = (first as u64 * c).min(m);
    let hi = ((first + k) as u64 * c).min(m);
    hi - lo
}

impl Emit<'_> {
    fn real(&self, v: usize) -> usize {
        (v + self.root) % self.p
    }
    fn v(&self) -> usize {
        (self.r + self.p - self.root) % self.p
    }
    fn send(&mut self, v: usize, bytes: u64) {
        self.send_as(v, bytes, false);
    }
    /// A send that is one step of an all-ranks exchange.
    fn xsend(&mut self, v: usize, bytes: u64) {
        self.send_as(v, bytes, true);
    }
    fn send_as(&mut self, v: usize, bytes: u64, exchange: bool) {
        let to = self.real(v);
        self.out.push(Op::Send {
            to,
            bytes,
            exchange,
        });
    }
    fn recv(&mut self, v: usize, bytes: u64) {
        let from = self.real(v);
        self.out.push(Op::Recv { from, bytes });
    }
    fn op(&mut self, op: Op) {
        self.out.push(op);
    }
    /// An exchange with `v` (send `s`, receive `r` bytes), then wait.
    fn exchange(&mut self, v: usize, s: u64, r: u64) {
        self.recv(v, r);
        self.xsend(v, s);
        self.op(Op::Wait);
    }

    fn run(mut self, s: Schedule, m: u64) {
        use Schedule::*;
        let p = self.p;
        if p <= 1 {
            return;
        }
        match s {
            BcastBinomial => self.binomial_bcast(m),
            BcastScatterRd | BcastScatterRing => {
                self.scatter(m);
                if s == BcastScatterRd && p.is_power_of_two() {
                    let v = self.v();
                    let mut mask = 1;
                    while mask < p {
                        let partner = v ^ mask;
                        let sb = bbytes(m, p, v & !(mask - 1), mask);
                        let rb = bbytes(m, p, partner & !(mask - 1), mask);
                        self.exchange(partner, sb, rb);
                        mask <<= 1;
                    }
                } else {
                    let v = self.v();
                    for i in 0..p - 1 {
                        let sb = bbytes(m, p, (v + p - i) % p, 1);
                        let rb = bbytes(m, p, (v + 2 * p - i - 1) % p, 1);
                        self.recv((v + p - 1) % p, rb);
                        self.xsend((v + 1) % p, sb);
                        self.op(Op::Wait);
                    }
                }
            }
            BcastChain { seg } => {
                let v = self.v();
                let (up, down) = ((v != 0).then(|| v - 1), (v + 1 < p).then_some(v + 1));
                self.chain(m, seg, up, down, None);
            }
            BcastLinear => {
                let v = self.v();
                if v == 0 {
                    for c in 1..p {
                        self.send(c, m);
                    }
                } else {
                    self.recv(0, m);
                }
                self.op(Op::Wait);
            }
            BcastBinary => {
                let v = self.v();
                if v != 0 {
                    self.recv((v - 1) / 2, m);
                    self.op(Op::Wait);
                }
                for c in [2 * v + 1, 2 * v + 2] {
                    if c < p {
                        self.send(c, m);
                    }
                }
                self.op(Op::Wait);
            }
            BcastKnomial { radix } => self.knomial_bcast(m, radix.max(2) as usize),
            BcastShm => {
                let v = self.v();
                if v == 0 {
                    self.op(Op::Copy { bytes: m });
                    for c in 1..p {
                        self.send(c, 0);
                    }
                    for c in 1..p {
                        self.recv(c, 0);
                    }
                } else {
                    self.recv(0, 0);
                    self.op(Op::Wait);
                    self.op(Op::Copy { bytes: m });
                    self.send(0, 0);
                }
                self.op(Op::Wait);
            }

            ReduceBinomial | ReduceBinomialAlloc => {
                let v = self.v();
                let alloc = s == ReduceBinomialAlloc;
                let (mut mask, mut child) = (1, 0);
                while mask < p {
                    if v & mask != 0 {
                        self.send(v - mask, m);
                        self.op(Op::Wait);
                        return;
                    }
                    if v + mask < p {
                        self.recv(v + mask, m);
                        self.op(Op::Wait);
                        self.fresh_receive(alloc, v, child, m, m);
                        self.op(Op::Reduce { bytes: m });
                        child += 1;
                    }
                    mask <<= 1;
                }
            }
            ReduceRabenseifner => self.rabenseifner(m, true, false),
            ReduceRabenseifnerAlloc => self.rabenseifner(m, true, true),
            ReduceLinear => {
                let v = self.v();
                if v == 0 {
                    for c in (1..p).rev() {
                        self.recv(c, m);
                        self.op(Op::Wait);
                        self.op(Op::Reduce { bytes: m });
                    }
                } else {
                    self.send(0, m);
                    self.op(Op::Wait);
                }
            }
            ReduceBinary => {
                let v = self.v();
                for (child, c) in [2 * v + 1, 2 * v + 2].into_iter().enumerate() {
                    if c < p {
                        self.recv(c, m);
                        self.op(Op::Wait);
                        self.fresh_receive(true, v, child, m, m);
                        self.op(Op::Reduce { bytes: m });
                    }
                }
                if v != 0 {
                    self.send((v - 1) / 2, m);
                    self.op(Op::Wait);
                }
            }
            ReduceChain { seg } => {
                // Towards the root: v = P−1 starts, v = 0 ends.
                let v = self.v();
                let (up, down) = ((v + 1 < p).then_some(v + 1), (v != 0).then(|| v - 1));
                let fresh = v != 0 && m >= FRESH_ALLOC_BYTES;
                self.chain(m, seg, up, down, Some(fresh));
            }
            ReduceShm => self.shm_reduce(m),

            AllreduceRecursiveDoubling => {
                let Some(nr) = self.fold_in(m) else {
                    self.fold_out(m);
                    return;
                };
                let pof2 = pof2_floor(p);
                let rem = p - pof2;
                let mut mask = 1;
                while mask < pof2 {
                    let partner = old_rank(nr ^ mask, rem);
                    self.exchange(partner, m, m);
                    self.op(Op::Reduce { bytes: m });
                    mask <<= 1;
                }
                self.fold_out(m);
            }
            AllreduceRabenseifner => self.rabenseifner(m, false, false),
            AllreduceRing => {
                let b = m.div_ceil(p as u64);
                let v = self.v();
                for _ in 0..p - 1 {
                    self.recv((v + p - 1) % p, b);
                    self.xsend((v + 1) % p, b);
                    self.op(Op::Wait);
                    self.op(Op::Reduce { bytes: b });
                }
                for _ in 0..p - 1 {
                    self.recv((v + p - 1) % p, b);
                    self.xsend((v + 1) % p, b);
                    self.op(Op::Wait);
                }
            }
            AllreduceReduceBcast => {
                self.run_sub(ReduceBinomial, m);
                self.run_sub(BcastBinomial, m);
            }
            AllreduceLinear => {
                // The exchange of alltoall's linear one (its copy is the
                // accumulator's copy into the receive buffer), then P − 1
                // combinings.
                self.run_sub(AlltoallLinear, m);
                for _ in 1..p {
                    self.op(Op::Reduce { bytes: m });
                }
            }
            AllreduceShm => {
                self.shm_reduce(m);
                self.run_sub(BcastShm, m);
            }

            AllgatherRecursiveDoubling if p.is_power_of_two() => {
                let v = self.v();
                let mut mask = 1;
                while mask < p {
                    let b = mask as u64 * m;
                    self.exchange(v ^ mask, b, b);
                    mask <<= 1;
                }
            }
            AllgatherRecursiveDoubling | AllgatherBruck => {
                let v = self.v();
                let mut k = 1;
                while k < p {
                    let b = k.min(p - k) as u64 * m;
                    self.recv((v + k) % p, b);
                    self.xsend((v + p - k) % p, b);
                    self.op(Op::Wait);
                    k <<= 1;
                }
                self.op(Op::Copy {
                    bytes: p as u64 * m,
                });
            }
            AllgatherRing => {
                let v = self.v();
                for _ in 0..p - 1 {
                    self.recv((v + p - 1) % p, m);
                    self.xsend((v + 1) % p, m);
                    self.op(Op::Wait);
                }
            }
            AllgatherNeighbor => {
                if p % 2 == 1 {
                    return self.run_sub(AllgatherRing, m);
                }
                let v = self.v();
                let (a, b) = if v % 2 == 0 {
                    ((v + 1) % p, (v + p - 1) % p)
                } else {
                    ((v + p - 1) % p, (v + 1) % p)
                };
                self.exchange(a, m, m);
                for i in 1..p / 2 {
                    let n = if i % 2 == 1 { b } else { a };
                    self.exchange(n, 2 * m, 2 * m);
                }
            }
            AllgatherLinear => {
                // As alltoall's linear exchange, every block the same.
                self.run_sub(AlltoallLinear, m);
            }

            AlltoallPairwise => {
                let v = self.v();
                self.op(Op::Copy { bytes: m });
                for k in 1..p {
                    self.recv((v + p - k) % p, m);
                    self.xsend((v + k) % p, m);
                    self.op(Op::Wait);
                }
            }
            AlltoallLinear => {
                let v = self.v();
                self.op(Op::Copy { bytes: m });
                for k in 1..p {
                    self.recv((v + p - k) % p, m);
                }
                for k in 1..p {
                    self.xsend((v + k) % p, m);
                }
                self.op(Op::Wait);
            }
            AlltoallBruck => {
                let v = self.v();
                self.op(Op::Copy {
                    bytes: p as u64 * m,
                });
                let mut k = 1;
                while k < p {
                    // The blocks whose index has bit k set: about half.
                    let n = (0..p).filter(|i| i & k != 0).count() as u64;
                    self.op(Op::Copy { bytes: n * m });
                    self.recv((v + p - k) % p, n * m);
                    self.xsend((v + k) % p, n * m);
                    self.op(Op::Wait);
                    self.op(Op::Copy { bytes: n * m });
                    k <<= 1;
                }
                self.op(Op::Copy {
                    bytes: p as u64 * m,
                });
            }

            BarrierDissemination => {
                let v = self.v();
                let mut k = 1;
                while k < p {
                    self.recv((v + p - k) % p, 0);
                    self.xsend((v + k) % p, 0);
                    self.op(Op::Wait);
                    k <<= 1;
                }
            }
            BarrierTree => {
                let v = self.v();
                for c in self.children() {
                    self.recv(c, 0);
                }
                self.op(Op::Wait);
                if v != 0 {
                    let parent = v - lowbit(v);
                    self.recv(parent, 0);
                    self.send(parent, 0);
                    self.op(Op::Wait);
                }
                for c in self.children() {
                    self.send(c, 0);
                }
                self.op(Op::Wait);
            }
            BarrierLinear | BarrierShm => {
                let v = self.v();
                if v == 0 {
                    for c in 1..p {
                        self.recv(c, 0);
                    }
                    self.op(Op::Wait);
                    for c in 1..p {
                        self.send(c, 0);
                    }
                } else {
                    self.send(0, 0);
                    self.recv(0, 0);
                }
                self.op(Op::Wait);
            }
            BarrierRecursiveDoubling => {
                let Some(nr) = self.fold_in(0) else {
                    self.fold_out(0);
                    return;
                };
                let pof2 = pof2_floor(p);
                let rem = p - pof2;
                let mut mask = 1;
                while mask < pof2 {
                    self.exchange(old_rank(nr ^ mask, rem), 0, 0);
                    mask <<= 1;
                }
                self.fold_out(0);
            }
        }
    }

    fn run_sub(&mut self, s: Schedule, m: u64) {
        let e = Emit {
            p: self.p,
            r: self.r,
            root: self.root,
            out: self.out,
        };
        e.run(s, m);
    }
}

/// The relative rank of new rank `nr` after folding (see `fold_in`).
fn old_rank(nr: usize, rem: usize) -> usize {
    if nr < rem {
        2 * nr
    } else {
        nr + rem
    }
}
