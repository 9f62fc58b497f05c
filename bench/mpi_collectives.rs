//! Collective algorithms written with MPI point-to-point calls, measured
//! over a size sweep and compared with the model-based selector's
//! predictions and with the MPI library's own MPI_Bcast / MPI_Allreduce.
//!
//! ```text
//! cargo build --release --features mpi --example mpi_collectives
//! mpirun --oversubscribe -np 4 target/release/ngctl probe --transport mpi --publish --shm /tmp/ng.seg
//! mpirun --oversubscribe -np 4 target/release/examples/mpi_collectives --shm /tmp/ng.seg [--cores N]
//! ```
//!
//! Without `--shm` (or if the segment has no mpi entry) the program runs the
//! MPI probe itself first (rank 0 against rank 1). Rank 0 prints Markdown.
//! Every algorithm's result is checked (bcast: the root's bytes everywhere;
//! allreduce: the exact sum), and a wrong result makes the program fail.

use std::ffi::{c_int, c_void};
use std::time::Duration;

use mpi::ffi;
use netgauge::select::{self, Algorithm, Collective, Measured, SelectOptions};
use netgauge::Params;
use netgauged::clock::HostClock;
use netgauged::predict::{exchange_of, find_entry, load_entries, load_transport_ext};
use netgauged::probe::{ranks, ProbeOptions};
use netgauged::sweep::SweepConfig;
use netgauged::transport::mpi as tmpi;

const TAG: c_int = 77;

struct Comm {
    comm: ffi::MPI_Comm,
    rank: usize,
    size: usize,
}

impl Comm {
    fn isend(&self, buf: &[u8], dest: usize) -> ffi::MPI_Request {
        // SAFETY: a plain handle value.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `buf` outlives the request: every caller waits on it before
        // the buffer is touched again.
        unsafe {
            ffi::MPI_Isend(
                buf.as_ptr() as *const c_void,
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                TAG,
                self.comm,
                &mut req,
            )
        };
        req
    }

    fn send(&self, buf: &[u8], dest: usize) {
        // SAFETY: valid buffer for its length; blocking send.
        unsafe {
            ffi::MPI_Send(
                buf.as_ptr() as *const c_void,
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                TAG,
                self.comm,
            )
        };
    }

    fn recv(&self, buf: &mut [u8], src: usize) {
        // SAFETY: valid writable buffer for its length.
        unsafe {
            ffi::MPI_Recv(
                buf.as_mut_ptr() as *mut c_void,
                buf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                src as c_int,
                TAG,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
    }

    fn sendrecv(&self, sbuf: &[u8], dest: usize, rbuf: &mut [u8], src: usize) {
        // SAFETY: both buffers valid for their lengths and distinct.
        unsafe {
            ffi::MPI_Sendrecv(
                sbuf.as_ptr() as *const c_void,
                sbuf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                dest as c_int,
                TAG,
                rbuf.as_mut_ptr() as *mut c_void,
                rbuf.len() as c_int,
                ffi::RSMPI_UINT8_T,
                src as c_int,
                TAG,
                self.comm,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
    }

    fn waitall(&self, reqs: &mut Vec<ffi::MPI_Request>) {
        if reqs.is_empty() {
            return;
        }
        // SAFETY: the requests are active requests of ours.
        unsafe {
            ffi::MPI_Waitall(
                reqs.len() as c_int,
                reqs.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        reqs.clear();
    }

    fn barrier(&self) {
        // SAFETY: collective on our communicator.
        unsafe { ffi::MPI_Barrier(self.comm) };
    }

    fn max_f64(&self, v: f64) -> f64 {
        let mut out = 0f64;
        // SAFETY: one double in, one out.
        unsafe {
            ffi::MPI_Allreduce(
                &v as *const f64 as *const c_void,
                &mut out as *mut f64 as *mut c_void,
                1,
                ffi::RSMPI_DOUBLE,
                ffi::RSMPI_MAX,
                self.comm,
            )
        };
        out
    }
}

/// Two disjoint ranges of one buffer, one to read and one to write (the
/// algorithms send one block of their buffer while receiving another, with
/// no copy in between: a copy per step is work the model does not have).
fn split_pair<T>(buf: &mut [T], send: (usize, usize), recv: (usize, usize)) -> (&[T], &mut [T]) {
    assert!(send.1 <= recv.0 || recv.1 <= send.0, "overlapping blocks");
    if send.1 <= recv.0 {
        let (a, b) = buf.split_at_mut(recv.0);
        (&a[send.0..send.1], &mut b[..recv.1 - recv.0])
    } else {
        let (a, b) = buf.split_at_mut(send.0);
        (&b[..send.1 - send.0], &mut a[recv.0..recv.1])
    }
}

fn lowbit(r: usize) -> usize {
    r & r.wrapping_neg()
}

/// Children of `r` in the binomial tree over `p` ranks, largest subtree
/// first, with their subtree sizes (same tree as the selector's).
fn children(r: usize, p: usize) -> Vec<(usize, usize)> {
    let limit = if r == 0 {
        p.next_power_of_two()
    } else {
        lowbit(r)
    };
    let mut v = Vec::new();
    let mut mask = limit >> 1;
    while mask > 0 {
        if r + mask < p {
            v.push((r + mask, mask.min(p - r - mask)));
        }
        mask >>= 1;
    }
    v
}

fn bcast_binomial(c: &Comm, buf: &mut [u8]) {
    let r = c.rank;
    if r != 0 {
        c.recv(buf, r - lowbit(r));
    }
    let mut reqs = Vec::new();
    for (child, _) in children(r, c.size) {
        reqs.push(c.isend(buf, child));
    }
    c.waitall(&mut reqs);
}

fn block(m: usize, p: usize, i: usize) -> (usize, usize) {
    let b = m.div_ceil(p);
    ((i * b).min(m), ((i + 1) * b).min(m))
}

/// The bytes of blocks `first .. first + count` (consecutive, so one range).
fn blocks(m: usize, p: usize, first: usize, count: usize) -> (usize, usize) {
    (block(m, p, first).0, block(m, p, first + count - 1).1)
}

/// Binomial scatter of the root's blocks: afterwards rank r holds at least
/// its own block r (and its subtree's).
fn scatter_binomial(c: &Comm, buf: &mut [u8]) {
    let (r, p, m) = (c.rank, c.size, buf.len());
    if r != 0 {
        let (lo, hi) = blocks(m, p, r, lowbit(r).min(p - r));
        c.recv(&mut buf[lo..hi], r - lowbit(r));
    }
    let mut reqs = Vec::new();
    for (child, sub) in children(r, p) {
        let (lo, hi) = blocks(m, p, child, sub);
        reqs.push(c.isend(&buf[lo..hi], child));
    }
    c.waitall(&mut reqs);
}

fn allgather_rd(c: &Comm, buf: &mut [u8]) {
    let (r, p, m) = (c.rank, c.size, buf.len());
    let mut k = 1;
    while k < p {
        let partner = r ^ k;
        let mine = r & !(k - 1);
        let theirs = partner & !(k - 1);
        let (sbuf, rbuf) = split_pair(buf, blocks(m, p, mine, k), blocks(m, p, theirs, k));
        c.sendrecv(sbuf, partner, rbuf, partner);
        k <<= 1;
    }
}

fn allgather_ring(c: &Comm, buf: &mut [u8]) {
    let (r, p, m) = (c.rank, c.size, buf.len());
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    for i in 0..p - 1 {
        let sb = (r + p - i) % p;
        let rb = (r + p - i - 1) % p;
        let (sbuf, rbuf) = split_pair(buf, block(m, p, sb), block(m, p, rb));
        c.sendrecv(sbuf, right, rbuf, left);
    }
}

fn bcast_chain(c: &Comm, buf: &mut [u8], seg: usize) {
    let (r, p) = (c.rank, c.size);
    let seg = seg.max(1);
    let mut reqs = Vec::new();
    let n = buf.len().div_ceil(seg).max(1);
    for s in 0..n {
        let lo = (s * seg).min(buf.len());
        let hi = ((s + 1) * seg).min(buf.len());
        if r != 0 {
            c.recv(&mut buf[lo..hi], r - 1);
        }
        if r + 1 < p {
            reqs.push(c.isend(&buf[lo..hi], r + 1));
        }
    }
    c.waitall(&mut reqs);
}

fn as_bytes(v: &[f64]) -> &[u8] {
    // SAFETY: f64 has no padding; the byte view covers the same memory.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn as_bytes_mut(v: &mut [f64]) -> &mut [u8] {
    // SAFETY: as above; any byte pattern is a valid f64.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

fn allreduce_rd(c: &Comm, v: &mut [f64], tmp: &mut [f64]) {
    let (r, p) = (c.rank, c.size);
    let mut k = 1;
    while k < p {
        let partner = r ^ k;
        let n = v.len();
        c.sendrecv(as_bytes(v), partner, as_bytes_mut(&mut tmp[..n]), partner);
        for (a, b) in v.iter_mut().zip(tmp.iter()) {
            *a += *b;
        }
        k <<= 1;
    }
}

/// Every rank sends its vector to every other and sums all P in rank order
/// (`got`: P vectors' room).
fn allreduce_linear(c: &Comm, v: &mut [f64], got: &mut [f64]) {
    let (r, p, n) = (c.rank, c.size, v.len());
    let mut reqs: Vec<_> = (1..p).map(|k| c.isend(as_bytes(v), (r + k) % p)).collect();
    for k in 1..p {
        let from = (r + p - k) % p;
        c.recv(as_bytes_mut(&mut got[from * n..(from + 1) * n]), from);
    }
    c.waitall(&mut reqs);
    got[r * n..(r + 1) * n].copy_from_slice(v);
    for (i, x) in v.iter_mut().enumerate() {
        *x = (0..p).map(|q| got[q * n + i]).sum();
    }
}

fn allreduce_rabenseifner(c: &Comm, v: &mut [f64], tmp: &mut [f64]) {
    let (r, p) = (c.rank, c.size);
    let (mut lo, mut hi) = (0usize, v.len());
    let mut windows = Vec::new();
    let mut d = p / 2;
    // Reduce-scatter by recursive halving.
    while d >= 1 {
        let partner = r ^ d;
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if r & d == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let n = keep.1 - keep.0;
        c.sendrecv(
            as_bytes(&v[give.0..give.1]),
            partner,
            as_bytes_mut(&mut tmp[..n]),
            partner,
        );
        for (a, b) in v[keep.0..keep.1].iter_mut().zip(tmp.iter()) {
            *a += *b;
        }
        windows.push((lo, hi));
        lo = keep.0;
        hi = keep.1;
        d /= 2;
    }
    // Allgather by recursive doubling, undoing the halving.
    let mut d = 1;
    while let Some((plo, phi)) = windows.pop() {
        let partner = r ^ d;
        let (olo, ohi) = if lo == plo { (hi, phi) } else { (plo, lo) };
        let (sbuf, rbuf) = split_pair(v, (lo, hi), (olo, ohi));
        c.sendrecv(as_bytes(sbuf), partner, as_bytes_mut(rbuf), partner);
        lo = plo;
        hi = phi;
        d *= 2;
    }
}

fn allreduce_ring(c: &Comm, v: &mut [f64], tmp: &mut [f64]) {
    let (r, p, n) = (c.rank, c.size, v.len());
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    for i in 0..p - 1 {
        let (slo, shi) = block(n, p, (r + p - i) % p);
        let (rlo, rhi) = block(n, p, (r + p - i - 1) % p);
        c.sendrecv(
            as_bytes(&v[slo..shi]),
            right,
            as_bytes_mut(&mut tmp[..rhi - rlo]),
            left,
        );
        for (a, b) in v[rlo..rhi].iter_mut().zip(tmp.iter()) {
            *a += *b;
        }
    }
    for i in 0..p - 1 {
        let (slo, shi) = block(n, p, (r + 1 + p - i) % p);
        let (rlo, rhi) = block(n, p, (r + p - i) % p);
        let (sbuf, rbuf) = split_pair(v, (slo, shi), (rlo, rhi));
        c.sendrecv(as_bytes(sbuf), right, as_bytes_mut(rbuf), left);
    }
}

fn barrier_dissemination(c: &Comm) {
    let (r, p) = (c.rank, c.size);
    let mut k = 1;
    let mut z = [0u8; 0];
    while k < p {
        c.sendrecv(&[], (r + k) % p, &mut z, (r + p - k) % p);
        k <<= 1;
    }
}

fn barrier_tree(c: &Comm) {
    let r = c.rank;
    let mut z = [0u8; 0];
    for (child, _) in children(r, c.size).into_iter().rev() {
        c.recv(&mut z, child);
    }
    if r != 0 {
        c.send(&[], r - lowbit(r));
    }
    bcast_binomial(c, &mut z);
}

/// What one timed run executes.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Run {
    Alg(Algorithm, usize),
    MpiBcast,
    MpiAllreduce,
    MpiBarrier,
}

impl Run {
    /// The MPI library's own algorithm for `coll` (this bench measures
    /// broadcast, allreduce and barrier; bench/ngcoll.md the others).
    fn library(coll: Collective) -> Option<Run> {
        match coll {
            Collective::Bcast => Some(Run::MpiBcast),
            Collective::Allreduce => Some(Run::MpiAllreduce),
            Collective::Barrier => Some(Run::MpiBarrier),
            Collective::Reduce | Collective::Allgather | Collective::Alltoall => None,
        }
    }

    fn collective(self) -> Collective {
        match self {
            Run::Alg(a, _) => a.collective(),
            Run::MpiBcast => Collective::Bcast,
            Run::MpiAllreduce => Collective::Allreduce,
            Run::MpiBarrier => Collective::Barrier,
        }
    }
}

struct Bufs {
    bytes: Vec<u8>,
    v: Vec<f64>,
    tmp: Vec<f64>,
}

fn fill(c: &Comm, b: &mut Bufs, m: usize) {
    for (i, x) in b.bytes[..m].iter_mut().enumerate() {
        *x = if c.rank == 0 { (i * 7 + 3) as u8 } else { 0 };
    }
    let n = (m / 8).max(1);
    for (i, x) in b.v[..n].iter_mut().enumerate() {
        *x = (c.rank * 1000 + i % 1000) as f64;
    }
}

/// Run once; true if the result is right.
fn run_once(c: &Comm, run: Run, b: &mut Bufs, m: usize, check: bool) -> bool {
    if check {
        fill(c, b, m);
    }
    let n = (m / 8).max(1);
    let t: &mut [f64] = &mut b.tmp;
    match run {
        Run::Alg(Algorithm::BcastBinomial, _) => bcast_binomial(c, &mut b.bytes[..m]),
        Run::Alg(Algorithm::BcastScatterRdAllgather, _) => {
            scatter_binomial(c, &mut b.bytes[..m]);
            allgather_rd(c, &mut b.bytes[..m]);
        }
        Run::Alg(Algorithm::BcastScatterRingAllgather, _) => {
            scatter_binomial(c, &mut b.bytes[..m]);
            allgather_ring(c, &mut b.bytes[..m]);
        }
        Run::Alg(Algorithm::BcastChain, seg) => bcast_chain(c, &mut b.bytes[..m], seg),
        Run::Alg(Algorithm::AllreduceRecursiveDoubling, _) => allreduce_rd(c, &mut b.v[..n], t),
        Run::Alg(Algorithm::AllreduceRabenseifner, _) => {
            allreduce_rabenseifner(c, &mut b.v[..n], t)
        }
        Run::Alg(Algorithm::AllreduceRing, _) => allreduce_ring(c, &mut b.v[..n], t),
        Run::Alg(Algorithm::AllreduceLinear, _) => allreduce_linear(c, &mut b.v[..n], t),
        Run::Alg(Algorithm::BarrierDissemination, _) => barrier_dissemination(c),
        Run::Alg(Algorithm::BarrierTree, _) => barrier_tree(c),
        // Not measured by this bench (bench/ngcoll.md measures them).
        Run::Alg(
            Algorithm::ReduceBinomial
            | Algorithm::ReduceRabenseifner
            | Algorithm::AllgatherRecursiveDoubling
            | Algorithm::AllgatherRing
            | Algorithm::AllgatherLinear
            | Algorithm::AlltoallPairwise
            | Algorithm::AlltoallLinear,
            _,
        ) => {}
        Run::MpiBcast => {
            // SAFETY: m bytes valid; collective on our communicator.
            unsafe {
                ffi::MPI_Bcast(
                    b.bytes.as_mut_ptr() as *mut c_void,
                    m as c_int,
                    ffi::RSMPI_UINT8_T,
                    0,
                    c.comm,
                )
            };
        }
        Run::MpiAllreduce => {
            t[..n].copy_from_slice(&b.v[..n]);
            // SAFETY: n doubles in and out, distinct buffers.
            unsafe {
                ffi::MPI_Allreduce(
                    t.as_ptr() as *const c_void,
                    b.v.as_mut_ptr() as *mut c_void,
                    n as c_int,
                    ffi::RSMPI_DOUBLE,
                    ffi::RSMPI_SUM,
                    c.comm,
                )
            };
        }
        Run::MpiBarrier => c.barrier(),
    }
    if !check {
        return true;
    }
    match run.collective() {
        Collective::Bcast => b.bytes[..m]
            .iter()
            .enumerate()
            .all(|(i, &x)| x == (i * 7 + 3) as u8),
        Collective::Allreduce => check_sum(&b.v[..n], c.size),
        Collective::Barrier | Collective::Reduce | Collective::Allgather | Collective::Alltoall => {
            true
        }
    }
}

fn check_sum(v: &[f64], p: usize) -> bool {
    let ranks: f64 = (0..p).map(|r| (r * 1000) as f64).sum();
    v.iter()
        .enumerate()
        .all(|(i, &x)| x == ranks + (p * (i % 1000)) as f64)
}

/// CLOCK_MONOTONIC in ns. One clock for every process of a machine, so the
/// ranks' start and end times can be compared directly (the bench runs its
/// ranks on one node).
fn now_ns() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// How one repetition is timed.
///
/// The model predicts a collective that every rank enters at the same
/// instant, from that instant until the last rank is done. So every
/// repetition starts at a common time t0 on the machine's clock, agreed a
/// margin ahead (the largest of the ranks' "now + margin"); each rank waits
/// for t0 (yielding, as Open MPI's progress loop does when oversubscribed),
/// runs the collective and takes its end time; the repetition's time is the
/// latest end − t0. Timing each rank's own duration instead (and taking the
/// slowest) misses the skew with which ranks leave the preceding barrier: a
/// receiver that leaves it late finds its broadcast data already there and
/// reports a few hundred ns for an operation that took microseconds.
#[derive(Clone, Copy, Debug)]
struct Timing {
    margin_ns: f64,
}

/// Runs waiting for their start time, and how late (max over ranks) they
/// started on average: reported so that a start skew is visible.
#[derive(Default)]
struct Lateness {
    sum_ns: f64,
    reps: u64,
}

fn timed_rep(c: &Comm, run: Run, b: &mut Bufs, m: usize, tm: Timing, late: &mut Lateness) -> f64 {
    c.barrier();
    let t0 = c.max_f64(now_ns() + tm.margin_ns);
    loop {
        if now_ns() >= t0 {
            break;
        }
        // SAFETY: no arguments; gives the core to another runnable process.
        unsafe { libc::sched_yield() };
    }
    let started = now_ns();
    run_once(c, run, b, m, false);
    let end = now_ns();
    let v = c.max_f64(end);
    late.sum_ns += c.max_f64(started - t0);
    late.reps += 1;
    v - t0
}

/// The margin: a few times the agreement's own time (an MPI_Allreduce of
/// one double), so that every rank normally waits for t0, not the reverse.
fn calibrate(c: &Comm) -> Timing {
    let mut t = Vec::new();
    for _ in 0..21 {
        c.barrier();
        let a = now_ns();
        c.max_f64(a);
        t.push(c.max_f64(now_ns() - a));
    }
    t.sort_by(f64::total_cmp);
    Timing {
        margin_ns: (4.0 * t[t.len() / 2]).max(20e3),
    }
}

/// Per algorithm of one (collective, size) point: the sorted sample times.
///
/// Robust against a machine shared with other work: the runs of a point are
/// interleaved (round r runs every algorithm, in an order rotated by r, a
/// few repetitions each), so a burst of outside load falls on all of them
/// rather than on one; each algorithm gets ROUNDS × reps repetitions of
/// about ROUND_BUDGET_NS each round, and its time is the median.
fn measure_point(
    c: &Comm,
    runs: &[Run],
    b: &mut Bufs,
    m: usize,
    tm: Timing,
    ok: &mut bool,
    late: &mut Lateness,
) -> Vec<Vec<f64>> {
    const ROUNDS: usize = 11;
    const ROUND_BUDGET_NS: f64 = 3e6;
    const MAX_REPS_PER_ROUND: usize = 16;
    let mut reps = Vec::with_capacity(runs.len());
    for &run in runs {
        // Correctness, then a warm-up, then one timed run to size the rounds.
        *ok &= c.max_f64(if run_once(c, run, b, m, true) {
            0.0
        } else {
            1.0
        }) == 0.0;
        run_once(c, run, b, m, false);
        let one = timed_rep(c, run, b, m, tm, late);
        reps.push(((ROUND_BUDGET_NS / (one + tm.margin_ns)) as usize).clamp(1, MAX_REPS_PER_ROUND));
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); runs.len()];
    for round in 0..ROUNDS {
        for j in 0..runs.len() {
            let i = (j + round) % runs.len();
            for _ in 0..reps[i] {
                samples[i].push(timed_rep(c, runs[i], b, m, tm, late));
            }
        }
    }
    for s in &mut samples {
        s.sort_by(f64::total_cmp);
    }
    samples
}

fn median_sorted(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Half the interquartile range relative to the median, %.
fn spread_pct(v: &[f64]) -> f64 {
    if v.len() < 4 {
        return f64::NAN;
    }
    let q = |f: f64| v[((v.len() - 1) as f64 * f).round() as usize];
    100.0 * (q(0.75) - q(0.25)) / 2.0 / median_sorted(v)
}

/// γ: ns per byte to add two arrays of doubles (as the reductions do).
fn measure_gamma() -> f64 {
    let n = 1 << 19;
    let mut a = vec![1.0f64; n];
    let b = vec![2.0f64; n];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = mpi::time();
        for (x, y) in a.iter_mut().zip(b.iter()) {
            *x += *y;
        }
        std::hint::black_box(&a);
        best = best.min((mpi::time() - t0) * 1e9 / (8 * n) as f64);
    }
    best
}

struct Meas {
    alg: Algorithm,
    predicted_ns: f64,
    /// Median of the samples.
    measured_ns: f64,
    spread_pct: f64,
    segment_bytes: u64,
    samples: usize,
}

struct Row {
    coll: Collective,
    bytes: usize,
    algs: Vec<Meas>,
    choice: Algorithm,
    mpi_ns: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let shm = flag_value(&args, "--shm").map(std::path::PathBuf::from);
    let Some(universe) = tmpi::initialize() else {
        eprintln!("mpi_collectives: MPI already initialized");
        std::process::exit(2);
    };
    let (rank, size) = tmpi::world_rank_size();
    if size < 2 || !size.is_power_of_two() {
        // Recursive doubling / halving are written for powers of two here.
        eprintln!("mpi_collectives: run with a power-of-two number of ranks ≥ 2 (got {size})");
        std::process::exit(2);
    }
    // SAFETY: a plain handle value, then a dup of MPI_COMM_WORLD.
    let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: MPI is initialized; valid out-pointer.
    unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm) };
    let c = Comm { comm, rank, size };

    // Parameters: the segment's mpi entry, or a probe of our own.
    // With the pair entry, the all-ranks exchange measured with this many
    // ranks if the probe published one.
    let from_segment = if rank == 0 {
        shm.as_deref()
            .and_then(|p| {
                let entries = load_entries(Some(p)).ok()?;
                let e = find_entry(&entries, Some(p), None, Some("mpi")).ok()?;
                Some((entries, e))
            })
            .map(|(entries, e)| {
                let x = exchange_of(&entries, &e.peer, &e.transport, size);
                let what = if x.is_empty() {
                    "pair only"
                } else {
                    "pair and all-ranks exchange"
                };
                (
                    (e.params(), x),
                    format!("segment {} ({what})", p_display(&shm)),
                )
            })
    } else {
        None
    };
    let have = c.max_f64(if from_segment.is_some() { 1.0 } else { 0.0 }) > 0.0;
    // The transport's contention penalties, if the segment has them (rank
    // 0 predicts).
    let record = if rank == 0 {
        shm.as_deref()
            .and_then(|p| load_transport_ext(Some(p), "mpi"))
    } else {
        None
    };
    let ((net, exchange), source): ((Vec<Params>, Vec<Params>), String) = if have {
        from_segment.unwrap_or_default()
    } else {
        let mut sweep = SweepConfig {
            max_size_bytes: 1 << 20,
            ..SweepConfig::default()
        };
        sweep.timeout = Duration::from_millis(500);
        let opts = ProbeOptions {
            sweep,
            resamples: 0,
            ..ProbeOptions::default()
        };
        match ranks::run(&opts, HostClock::detect(), &mut ()).map(ranks::RankOutcome::into_probe) {
            Ok(Some(p)) => {
                let e = netgauged::publish::entry_from_probe(&p.peer_name, "mpi", &p.result);
                (
                    (e.params(), Vec::new()),
                    "own probe (rank 0 ↔ rank 1)".into(),
                )
            }
            Ok(None) => ((Vec::new(), Vec::new()), String::new()),
            Err(e) => {
                eprintln!("mpi_collectives: probe failed: {e}");
                // SAFETY: MPI is initialized.
                unsafe { ffi::MPI_Abort(ffi::RSMPI_COMM_WORLD, 3) };
                return;
            }
        }
    };
    let gamma = c.max_f64(measure_gamma());
    let timing = calibrate(&c);
    let mut late = Lateness::default();
    // The ranks share this node's cores (one machine, no binding when
    // oversubscribed): the selector's sharing term gets their number.
    let cores = flag_value(&args, "--cores")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(0, |n| n.get()));
    let opts = SelectOptions {
        gamma_ns_per_byte: gamma,
        cores,
    };

    let sizes: Vec<usize> = vec![8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20];
    let max = 4 << 20;
    let mut b = Bufs {
        bytes: vec![0; max],
        v: vec![0.0; max / 8],
        // The linear allreduce receives every rank's vector.
        tmp: vec![0.0; max / 8 * size],
    };
    let mut all_ok = true;
    let mut rows = Vec::new();
    let points: Vec<(Collective, usize)> = sizes
        .iter()
        .map(|&m| (Collective::Bcast, m))
        .chain(sizes.iter().map(|&m| (Collective::Allreduce, m)))
        .chain(std::iter::once((Collective::Barrier, 0)))
        .collect();
    for (coll, m) in points {
        // Rank 0 predicts; the chain's segment size is shared with all.
        let mut cands: Vec<(Algorithm, f64, u64)> = Vec::new();
        let mut choice = coll.algorithms()[0];
        if rank == 0 {
            let measured = Measured {
                pair: &net,
                exchange: &exchange,
                exchange_ranks: size,
                contention: record.as_ref(),
            };
            match select::candidates(&measured, coll, size, m as u64, &opts) {
                Ok(cs) => {
                    for ch in cs.as_slice() {
                        if let Some(a) = ch.algorithm() {
                            cands.push((a, ch.predicted_ns, ch.segment_bytes));
                        }
                    }
                    choice = cs.best().algorithm().unwrap_or(choice);
                }
                Err(e) => eprintln!("selector failed: {e}"),
            }
        }
        let seg = c.max_f64(
            cands
                .iter()
                .find(|x| x.0 == Algorithm::BcastChain)
                .map_or(0.0, |x| x.2 as f64),
        ) as usize;
        let seg = if seg == 0 { m.max(1) } else { seg };
        let Some(lib) = Run::library(coll) else {
            continue;
        };
        let mut runs: Vec<Run> = coll
            .algorithms()
            .iter()
            .map(|&a| Run::Alg(a, seg))
            .collect();
        runs.push(lib);
        let samples = measure_point(&c, &runs, &mut b, m, timing, &mut all_ok, &mut late);
        let mut algs = Vec::new();
        for (i, &a) in coll.algorithms().iter().enumerate() {
            let (pred, s) = cands.get(i).map_or((f64::NAN, 0), |x| (x.1, x.2));
            algs.push(Meas {
                alg: a,
                predicted_ns: pred,
                measured_ns: median_sorted(&samples[i]),
                spread_pct: spread_pct(&samples[i]),
                segment_bytes: s,
                samples: samples[i].len(),
            });
        }
        let mpi_ns = median_sorted(&samples[runs.len() - 1]);
        rows.push(Row {
            coll,
            bytes: m,
            algs,
            choice,
            mpi_ns,
        });
    }
    if rank == 0 {
        let late_ns = late.sum_ns / late.reps.max(1) as f64;
        report(&rows, size, cores, &source, gamma, all_ok, timing, late_ns);
    }
    let mut comm = c.comm;
    // SAFETY: our duplicate communicator, freed once before MPI_Finalize.
    unsafe { ffi::MPI_Comm_free(&mut comm) };
    drop(universe);
    if !all_ok {
        std::process::exit(1);
    }
}

/// The argument after `flag` (`--shm PATH`, `--cores N`), if any.
fn flag_value<'a>(args: &'a [String], flag: &str) -> Option<&'a String> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
}

fn p_display(p: &Option<std::path::PathBuf>) -> String {
    p.as_ref()
        .map_or(String::new(), |p| p.display().to_string())
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    rows: &[Row],
    ranks: usize,
    cores: usize,
    source: &str,
    gamma: f64,
    all_ok: bool,
    timing: Timing,
    late_ns: f64,
) {
    println!(
        "ranks: {ranks} on {cores} cores; parameters: {source}; γ = {gamma:.3} ns/B (measured)"
    );
    println!(
        "timing: common start {} ahead, mean start lateness (slowest rank) {}",
        fmt_ns(timing.margin_ns),
        fmt_ns(late_ns)
    );
    println!("results correct: {}", if all_ok { "yes" } else { "NO" });
    println!();
    println!(
        "| collective | bytes | algorithm | predicted | measured (median) | ± % | n | error % | |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|---:|---|");
    let mut hits = 0;
    let mut errors: Vec<(Algorithm, Vec<f64>)> = Vec::new();
    let mut beats = Vec::new();
    let mut loses = Vec::new();
    for r in rows {
        let fastest = r
            .algs
            .iter()
            .min_by(|a, b| a.measured_ns.total_cmp(&b.measured_ns))
            .map(|x| (x.alg, x.measured_ns))
            .unwrap_or((r.choice, f64::NAN));
        let chosen_t = r
            .algs
            .iter()
            .find(|x| x.alg == r.choice)
            .map_or(f64::NAN, |x| x.measured_ns);
        let within = chosen_t <= 1.10 * fastest.1;
        if within {
            hits += 1;
        }
        for x in &r.algs {
            let (a, pred, meas, seg) = (x.alg, x.predicted_ns, x.measured_ns, x.segment_bytes);
            let err = 100.0 * (pred - meas) / meas;
            match errors.iter_mut().find(|e| e.0 == a) {
                Some(e) => e.1.push(err.abs()),
                None => errors.push((a, vec![err.abs()])),
            }
            let mut mark = String::new();
            if a == r.choice {
                mark.push_str("**choice**");
            }
            if a == fastest.0 {
                mark.push_str(" fastest");
            }
            let name = if a == Algorithm::BcastChain {
                format!("{} (seg {} B)", a.name(), seg)
            } else {
                a.name().to_string()
            };
            println!(
                "| {} | {} | {} | {} | {} | {:.0} | {} | {:+.0} | {} |",
                r.coll.name(),
                r.bytes,
                name,
                fmt_ns(pred),
                fmt_ns(meas),
                x.spread_pct,
                x.samples,
                err,
                mark.trim()
            );
        }
        let lib = match r.coll {
            Collective::Bcast => "MPI_Bcast",
            Collective::Allreduce => "MPI_Allreduce",
            Collective::Barrier => "MPI_Barrier",
            Collective::Reduce => "MPI_Reduce",
            Collective::Allgather => "MPI_Allgather",
            Collective::Alltoall => "MPI_Alltoall",
        };
        println!(
            "| {} | {} | *{}* (Open MPI) | | {} | | | | choice {} fastest: {} |",
            r.coll.name(),
            r.bytes,
            lib,
            fmt_ns(r.mpi_ns),
            if within {
                "within 10 % of"
            } else {
                "NOT within 10 % of"
            },
            fmt_ns(fastest.1)
        );
        let ratio = r.mpi_ns / chosen_t;
        if ratio > 1.10 {
            beats.push(format!("{} {} B: {:.2}×", r.coll.name(), r.bytes, ratio));
        } else if ratio < 1.0 / 1.10 {
            loses.push(format!(
                "{} {} B: {:.2}×",
                r.coll.name(),
                r.bytes,
                1.0 / ratio
            ));
        }
    }
    println!();
    println!(
        "choice within 10 % of the measured fastest: {hits}/{} points ({:.0} %)",
        rows.len(),
        100.0 * hits as f64 / rows.len() as f64
    );
    println!();
    println!("| algorithm | median \\|error\\| % | points |");
    println!("|---|---:|---:|");
    for (a, mut e) in errors {
        e.sort_by(f64::total_cmp);
        let med = if e.is_empty() {
            f64::NAN
        } else {
            e[e.len() / 2]
        };
        println!("| {} | {:.0} | {} |", a.name(), med, e.len());
    }
    println!();
    println!(
        "our choice faster than Open MPI by > 10 %: {}",
        join_or_none(&beats)
    );
    println!(
        "our choice slower than Open MPI by > 10 %: {}",
        join_or_none(&loses)
    );
}

fn join_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join("; ")
    }
}
