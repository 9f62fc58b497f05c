//! Runs schedules on the LogGP(S) network of a [`Network`], rank by rank,
//! for one call or for calls issued back to back, and returns when every
//! rank finished every call.
//!
//! The model of one message of s bytes is that of the module
//! documentation: the sender posts it no earlier than gap(s) after its
//! previous send and is busy o_s(s); an eager message (s ≤ S) is at the
//! receiver T(s) after it was posted, whenever the receiver posts its
//! receive; a rendezvous message (s > S) moves only once both sides have
//! posted: max(post, receive posted) + T(s), T including the handshake,
//! and the sender's request completes then. A send of an all-ranks step
//! costs the measured exchange step X(s) instead of T(s) when the network
//! has it.
//!
//! Back to back, a rank starts its next call as soon as it returned from
//! the previous one. A real library throttles a sender that runs ahead
//! (eager credits, bounded shared-memory queues); the model allows at most
//! [`EAGER_CREDITS`] unconsumed messages per pair, and a send beyond them
//! waits until the receiver has taken the oldest.
//!
//! Every rank also counts its busy CPU time (overheads, combining,
//! copies), which bounds the time of ranks that share cores (see
//! `view`).
//!
//! Every transfer's bytes move at least at the per-byte rate its network
//! shows at the size of the rank's buffers of the call (the schedule's
//! working set: the vector, or allgather's and alltoall's P blocks;
//! `cost::in_working_set`): a probe's sweep reuses buffers of one
//! message's size, which stay in the caches where a ring's blocks of a
//! larger vector or a pipeline's segments do not.
//!
//! The bytes of the messages on one node move through a limited number of
//! copy lanes ([`copy_lanes`]): where the node's all-ranks exchange was
//! measured, it says how many transfers the node moves at once (from 64
//! KiB one count for every size, [`node_copy_lanes`]), and a transfer that
//! finds every lane busy waits for one. (A
//! single-copy transfer between processes of one node, such as Open MPI's
//! CMA `process_vm_readv`, can serialize with every other one: two pairs at
//! once then take as long as one after the other, and a tree whose pairs
//! send at once gains nothing over a root receiving in turn.) The messages
//! of an all-ranks step are priced at the measured step X(s), which holds
//! that contention already, and take no lane.
//!
//! The transport's contention penalties (`cost::contention`), where the
//! segment has them, price a rank's concurrent transfers; one model
//! governs each message, never both (the penalties only messages of at
//! least [`PENALTY_FROM_BYTES`]):
//!
//! - a send of an all-ranks step whose rank has k exchanges in flight to
//!   distinct peers (linear alltoall: P − 1) takes X(s) with its bytes'
//!   part X(s) − X(1) stretched by pen_mixed(k) / pen_mixed(1), or T(s)
//!   with T(s) − T(1) stretched by pen_mixed(k) where X was not measured;
//!   the lanes do not apply to it (as without a record);
//! - any other message: the copy lanes govern where the node's exchange
//!   was measured (they are node-wide: they hold every rank's transfers);
//!   where it was not, its bytes are stretched by the larger of
//!   pen_out(k_out)/pen_out(1) of the sender's k_out sends in flight to
//!   distinct peers and pen_in(k_in)/pen_in(1) of the receiver's k_in
//!   receives.
//!
//! Without a record every message is priced as before.

use super::schedule::{Op, Schedule};
use super::Network;
use crate::ext::Scheme;
use crate::types::LookupError;
use costs::{Cost, Costs, Lanes};
use std::cell::Cell;

mod costs;

/// Unconsumed messages a sender may have in flight to one receiver.
pub const EAGER_CREDITS: usize = 8;

/// The contention penalties stretch transfers of at least this many bytes.
/// They are bandwidth sharing measured with large flows: where a message's
/// time is its fixed part and an eager copy through the library's queues,
/// they do not say what k of them at once cost, and the measured all-ranks
/// step X(s) (one exchange per rank, at this size) or the pair's T(s)
/// prices it.
pub const PENALTY_FROM_BYTES: u64 = 64 * 1024;

/// One message on a pair: when it was posted (sent) and when its receive
/// was posted, once known. The times are valid where `flags` says so.
#[derive(Clone, Copy, Debug, Default)]
struct MsgState {
    sent: f64,
    recv_posted: f64,
    /// Its arrival, once computed (a transfer reserves a lane then, so it
    /// is computed once).
    arrived: f64,
    /// The sender's size as an index into the cost cache ([`Costs::at`]).
    cost: u32,
    /// Distinct peers the sender had sends to in flight with it, and the
    /// receiver receives from (see [`in_flight_peers`]); `k_out` is counted
    /// only for messages the penalties may price ([`PENALTY_FROM_BYTES`]).
    k_out: u32,
    k_in: u32,
    flags: u8,
}

impl MsgState {
    const SENT: u8 = 1;
    const EXCHANGE: u8 = 2;
    const RECV_POSTED: u8 = 4;
    const ARRIVED: u8 = 8;

    fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The messages of one directed pair, in posting order, and the sends and
/// receives posted on it (the index of the next one).
#[derive(Debug, Default)]
struct Pair {
    msgs: Vec<MsgState>,
    send_next: usize,
    recv_next: usize,
}

impl Pair {
    /// Message `idx`, made if neither end posted it yet (each end posts
    /// its messages in order, so a new one is the next).
    #[inline]
    fn msg(&mut self, idx: usize) -> &mut MsgState {
        if self.msgs.len() == idx {
            self.msgs.push(MsgState::default());
        }
        &mut self.msgs[idx]
    }
}

/// What one rank is doing.
#[derive(Debug, Default)]
struct Rank {
    t: f64,
    next_send: f64,
    ops: Vec<Op>,
    pc: usize,
    call: usize,
    /// Posted and not yet waited for: (pair, message index), sends and
    /// receives apart (a pipeline waits for its receives only, while its
    /// sends pile up).
    sends: Vec<(usize, usize)>,
    recvs: Vec<(usize, usize)>,
    /// When the rank returned from each call.
    finish: Vec<f64>,
    cpu_ns: f64,
    /// Waits that had to wait for another rank.
    blocked: u32,
    /// The distinct peers of `sends` and of `recvs`.
    sent_to: PeerSet,
    received_from: PeerSet,
    /// [`in_flight_peers`] of sends and of receives, once counted: it
    /// stays the same until the rank's next wait (posting an op moves its
    /// peer from the ops ahead to those posted), which clears it.
    flows: [Option<usize>; 2],
    /// What `ops` holds: (schedule, ranks, size, root) of its emission.
    /// The ops of one call depend on nothing else, so a call with the same
    /// root (every call unless the root rotates, and the first call of the
    /// next run of one view) runs them again without emitting them anew.
    emitted: Option<(Schedule, usize, u64, usize)>,
}

impl Rank {
    /// The rank at the start of a run of `p` ranks (its ops kept).
    fn reset(&mut self, p: usize) {
        self.t = 0.0;
        self.next_send = 0.0;
        self.pc = 0;
        self.call = 0;
        self.sends.clear();
        self.recvs.clear();
        self.finish.clear();
        self.cpu_ns = 0.0;
        self.blocked = 0;
        self.sent_to.reset(p);
        self.received_from.reset(p);
        self.flows = [None, None];
    }

    /// Makes `ops` the ops of one call with root `root`.
    fn emit(&mut self, sched: Schedule, p: usize, r: usize, root: usize, m: u64) {
        let key = Some((sched, p, m, root));
        if self.emitted != key {
            self.ops.clear();
            sched.emit(p, r, root, m, &mut self.ops);
            self.emitted = key;
        }
    }
}

/// When every rank finished every call, and each rank's busy CPU time.
#[derive(Clone, Debug)]
pub struct Run {
    /// finish[call][rank], ns from the first call's start.
    pub finish: Vec<Vec<f64>>,
    /// Busy CPU time of each rank over all calls, ns.
    pub cpu_ns: Vec<f64>,
    /// Waits of each rank over all calls that waited for another rank.
    pub blocked: Vec<u32>,
    /// The node's copy-lane time over all calls, per lane (ns): calls back
    /// to back take at least this per call, however far ranks run ahead.
    pub lane_ns: f64,
}

/// What local work costs: combining (γ) and first touching freshly mapped
/// memory, ns per byte.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub gamma_ns_per_byte: f64,
    pub fresh_ns_per_byte: f64,
}

/// How the calls are issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issue {
    /// `calls` calls, each rank starting the next as soon as it returned;
    /// the root is `root` every time, or rotates (call k: root k mod P).
    BackToBack { calls: usize, rotate: bool },
}

/// What a run allocates, kept for the thread's next run: the pairs'
/// message lists (p² of them), the ranks' lists and the cost caches would
/// otherwise be allocated, zeroed and freed by every run, and a plan's
/// build makes thousands of runs.
#[derive(Debug, Default)]
struct Scratch {
    /// Per directed pair (src * p + dst); those not in `touched` are empty.
    pairs: Vec<Pair>,
    /// The pairs posted on since they were last emptied.
    touched: Vec<usize>,
    ranks: Vec<Rank>,
    ahead: PeerSet,
    cache: Vec<(u64, Cost)>,
    factors: Vec<(Scheme, usize, bool, Option<f64>)>,
    lanes: Vec<Vec<(f64, f64)>>,
}

/// Runs of at most this many ranks keep their [`Scratch`] for the thread's
/// next run (it holds p² pairs, each with its messages' capacity: tens of
/// MB at this size), until [`release_scratch`].
const KEEP_SCRATCH_RANKS: usize = 256;

thread_local! {
    static SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// Frees what this thread's runs kept for the next one: a caller that
/// lives on after its simulations (libngcoll in an MPI program, once its
/// plan is built) gives the memory back.
pub fn release_scratch() {
    let _ = SCRATCH.try_with(Cell::take);
}

/// Simulates `sched` over `p` ranks with message size `m`.
pub fn run<N: Network + ?Sized>(
    net: &N,
    sched: Schedule,
    p: usize,
    m: u64,
    work: Work,
    issue: Issue,
) -> Result<Run, SimError> {
    // Taken out while it runs: a run during the thread's exit gets a
    // scratch of its own.
    let mut scratch = SCRATCH
        .try_with(Cell::take)
        .ok()
        .flatten()
        .unwrap_or_default();
    let mut costs = Costs {
        net,
        p,
        ws: sched.working_set(p, m),
        node_lanes: None,
        cache: std::mem::take(&mut scratch.cache),
        last: 0,
        lanes: Lanes {
            busy: std::mem::take(&mut scratch.lanes),
        },
        lane_ns: 0.0,
        factors: std::mem::take(&mut scratch.factors),
    };
    costs.cache.clear();
    costs.factors.clear();
    costs.lanes.busy.clear();
    let out = simulate(&mut scratch, &mut costs, sched, p, m, work, issue);
    scratch.cache = costs.cache;
    scratch.factors = costs.factors;
    scratch.lanes = costs.lanes.busy;
    if p <= KEEP_SCRATCH_RANKS {
        let _ = SCRATCH.try_with(|s| s.set(Some(scratch)));
    }
    out
}

/// [`run`] over the scratch's lists.
fn simulate<N: Network + ?Sized>(
    scratch: &mut Scratch,
    costs: &mut Costs<N>,
    sched: Schedule,
    p: usize,
    m: u64,
    work: Work,
    issue: Issue,
) -> Result<Run, SimError> {
    let gamma_ns_per_byte = work.gamma_ns_per_byte;
    let Issue::BackToBack { calls, rotate } = issue;
    let Scratch {
        pairs,
        touched,
        ranks,
        ahead,
        ..
    } = scratch;
    for &i in touched.iter() {
        let pair = &mut pairs[i];
        pair.msgs.clear();
        pair.send_next = 0;
        pair.recv_next = 0;
    }
    touched.clear();
    if pairs.len() < p * p {
        pairs.resize_with(p * p, Pair::default);
    }
    ranks.resize_with(p, Rank::default);
    ahead.reset(p);
    let root_of = |call: usize| if rotate { call % p } else { 0 };
    for (r, st) in ranks.iter_mut().enumerate() {
        st.reset(p);
        st.emit(sched, p, r, root_of(0), m);
    }
    let mut done = 0;
    // Each pass advances every rank as far as it can; a pass without
    // progress means the schedule deadlocks (a bug in a schedule).
    let mut guard = 0usize;
    while done < p {
        let mut progress = false;
        // The rank index also names its pairs; the rank is borrowed anew
        // around every call that needs the pairs.
        #[allow(clippy::needless_range_loop)]
        for r in 0..p {
            loop {
                let st = &mut ranks[r];
                if st.call >= calls {
                    break;
                }
                if st.pc == st.ops.len() {
                    // End of a call: an implicit wait for everything.
                    if !try_wait(&mut ranks[r], pairs, costs, true)? {
                        break;
                    }
                    let st = &mut ranks[r];
                    st.finish.push(st.t);
                    st.call += 1;
                    st.pc = 0;
                    progress = true;
                    if st.call < calls {
                        st.emit(sched, p, r, root_of(st.call), m);
                    } else {
                        done += 1;
                    }
                    continue;
                }
                let op = st.ops[st.pc];
                let advanced = match op {
                    Op::Send {
                        to,
                        bytes,
                        exchange,
                    } => {
                        let pair = &mut pairs[r * p + to];
                        let idx = pair.send_next;
                        // Credits: the receiver must have posted the
                        // receive of the message EAGER_CREDITS back and
                        // that message must have arrived.
                        let mut ready = st.t.max(st.next_send);
                        let mut ok = true;
                        if idx >= EAGER_CREDITS {
                            match arrival(&mut pair.msgs[idx - EAGER_CREDITS], costs)? {
                                Some(t) => ready = ready.max(t),
                                None => ok = false,
                            }
                        }
                        if ok {
                            // The penalties price only large messages; the
                            // tests count every message's peers (to check
                            // the count).
                            let k_out = if bytes >= PENALTY_FROM_BYTES || cfg!(test) {
                                in_flight_peers(st, ahead, true)
                            } else {
                                0
                            };
                            let ci = costs.index(bytes)?;
                            let c = costs.at(ci);
                            st.next_send = ready + c.gap_ns;
                            st.t = ready + c.o_s_ns;
                            st.cpu_ns += c.cpu_send_ns;
                            if pair.msgs.is_empty() {
                                touched.push(r * p + to);
                            }
                            pair.send_next += 1;
                            let msg = pair.msg(idx);
                            msg.sent = ready;
                            msg.cost = ci;
                            msg.flags |= MsgState::SENT;
                            if exchange {
                                msg.flags |= MsgState::EXCHANGE;
                            }
                            msg.k_out = k_out as u32;
                            st.sends.push((r * p + to, idx));
                            st.sent_to.insert(to);
                            st.pc += 1;
                        }
                        ok
                    }
                    Op::Recv { from, bytes } => {
                        let pair = &mut pairs[from * p + r];
                        let idx = pair.recv_next;
                        if pair.msgs.is_empty() {
                            touched.push(from * p + r);
                        }
                        pair.recv_next += 1;
                        // Counted for every receive: the penalties price
                        // a message by the sender's size, unknown here.
                        let k_in = in_flight_peers(st, ahead, false);
                        let msg = pair.msg(idx);
                        msg.recv_posted = st.t;
                        msg.flags |= MsgState::RECV_POSTED;
                        msg.k_in = k_in as u32;
                        st.cpu_ns += costs.get(bytes)?.cpu_recv_ns;
                        st.recvs.push((from * p + r, idx));
                        st.received_from.insert(from);
                        st.pc += 1;
                        true
                    }
                    Op::Wait | Op::WaitRecvs => {
                        let all = matches!(op, Op::Wait);
                        if try_wait(st, pairs, costs, all)? {
                            st.pc += 1;
                            true
                        } else {
                            false
                        }
                    }
                    Op::Reduce { bytes } => {
                        let w = gamma_ns_per_byte * bytes as f64;
                        st.t += w;
                        st.cpu_ns += w;
                        st.pc += 1;
                        true
                    }
                    Op::Touch { bytes } => {
                        let w = work.fresh_ns_per_byte.max(0.0) * bytes as f64;
                        st.t += w;
                        st.cpu_ns += w;
                        st.pc += 1;
                        true
                    }
                    Op::Copy { bytes } => {
                        let w = if bytes == 0 {
                            0.0
                        } else {
                            costs.get(bytes)?.copy_ns
                        };
                        st.t += w;
                        st.cpu_ns += w;
                        st.pc += 1;
                        true
                    }
                };
                if !advanced {
                    break;
                }
                progress = true;
            }
        }
        if !progress {
            return Err(SimError::Deadlock);
        }
        guard += 1;
        if guard > 1_000_000 {
            return Err(SimError::Deadlock);
        }
    }
    let mut finish = vec![vec![0.0; p]; calls];
    for (r, st) in ranks.iter().enumerate() {
        for (c, &t) in st.finish.iter().enumerate() {
            finish[c][r] = t;
        }
    }
    Ok(Run {
        finish,
        cpu_ns: ranks.iter().map(|r| r.cpu_ns).collect(),
        blocked: ranks.iter().map(|r| r.blocked).collect(),
        lane_ns: costs.lane_ns,
    })
}

/// When the message's data is in the receiver's buffer, if both ends have
/// posted (None otherwise). Computed once per message: a transfer reserves
/// a copy lane when its arrival is first asked for.
#[inline]
fn arrival<N: Network + ?Sized>(
    m: &mut MsgState,
    costs: &mut Costs<N>,
) -> Result<Option<f64>, LookupError> {
    const BOTH: u8 = MsgState::SENT | MsgState::RECV_POSTED;
    if m.has(MsgState::ARRIVED) {
        Ok(Some(m.arrived))
    } else if m.flags & BOTH != BOTH {
        // An eager message arrives whenever its receive is posted: its
        // arrival needs the receive too (for when the wait completes).
        Ok(None)
    } else {
        first_arrival(m, costs).map(Some)
    }
}

/// [`arrival`] of a message both ends posted, the first time it is asked.
fn first_arrival<N: Network + ?Sized>(
    m: &mut MsgState,
    costs: &mut Costs<N>,
) -> Result<f64, LookupError> {
    let (sent, posted, exchange) = (m.sent, m.recv_posted, m.has(MsgState::EXCHANGE));
    let c = *costs.at(m.cost);
    let bytes = costs.cache[m.cost as usize].0;
    let t = if exchange {
        let f = if bytes >= PENALTY_FROM_BYTES {
            costs.factor(Scheme::Mixed, m.k_out as usize, c.x_measured)
        } else {
            None
        };
        c.x_ns + c.x_bytes_ns * (f.unwrap_or(1.0) - 1.0)
    } else if c.lanes.is_none() && bytes >= PENALTY_FROM_BYTES {
        let out = costs.factor(Scheme::Outgoing, m.k_out as usize, true);
        let inc = costs.factor(Scheme::Incoming, m.k_in as usize, true);
        let f = out.into_iter().chain(inc).fold(1.0, f64::max);
        c.t_ns + c.bytes_ns * (f - 1.0)
    } else {
        c.t_ns
    };
    // An eager message moves as soon as it is sent, a rendezvous message
    // once both ends have posted; its fixed part (latency, handshake)
    // first, then its bytes once a copy lane is free.
    let ready = if c.eager { sent } else { sent.max(posted) };
    let moved = match c.lanes.filter(|_| !exchange) {
        Some(n) => {
            costs.lane_ns += c.bytes_ns / n as f64;
            costs.lanes.reserve(n, ready + t - c.bytes_ns, c.bytes_ns) + c.bytes_ns
        }
        None => ready + t,
    };
    let at = moved.max(posted);
    m.arrived = at;
    m.flags |= MsgState::ARRIVED;
    Ok(at)
}

/// The distinct peers a rank has sends (`sends`) or receives in flight to
/// or from once its current op is posted: those posted and not yet waited
/// for, and those its ops post before the next wait. Several messages to
/// one peer (a pipeline's segments) are one flow. Counted once per wait
/// ([`Rank::flows`]).
fn in_flight_peers(st: &mut Rank, ahead: &mut PeerSet, sends: bool) -> usize {
    let k = usize::from(!sends);
    if let Some(n) = st.flows[k] {
        // Every simulation in ffi's tests checks each count, kept or made,
        // against one made from scratch.
        #[cfg(test)]
        assert_eq!(
            n,
            recount(st, ahead.ranks, sends),
            "flows kept past a change"
        );
        return n;
    }
    let posted = if sends {
        &st.sent_to
    } else {
        &st.received_from
    };
    // The peers of the ops ahead that are not posted already.
    ahead.clear();
    for op in &st.ops[st.pc..] {
        let peer = match *op {
            Op::Send { to, .. } if sends => to,
            Op::Recv { from, .. } if !sends => from,
            Op::Wait | Op::WaitRecvs => break,
            _ => continue,
        };
        if !posted.contains(peer) {
            ahead.insert(peer);
        }
    }
    let n = (posted.len() + ahead.len()).max(1);
    #[cfg(test)]
    assert_eq!(n, recount(st, ahead.ranks, sends), "flows counted wrong");
    st.flows[k] = Some(n);
    n
}

/// [`in_flight_peers`] counted from scratch: the distinct peers of the
/// posted list and of the ops up to the next wait.
#[cfg(test)]
fn recount(st: &Rank, p: usize, sends: bool) -> usize {
    let posted = if sends { &st.sends } else { &st.recvs };
    let mut peers: Vec<usize> = posted
        .iter()
        .map(|&(pair, _)| if sends { pair % p } else { pair / p })
        .collect();
    for op in &st.ops[st.pc..] {
        match *op {
            Op::Send { to, .. } if sends => peers.push(to),
            Op::Recv { from, .. } if !sends => peers.push(from),
            Op::Wait | Op::WaitRecvs => break,
            _ => {}
        }
    }
    peers.sort_unstable();
    peers.dedup();
    peers.len().max(1)
}

/// A set of the ranks 0..`ranks` as a bit set, with its size.
#[derive(Debug, Default)]
struct PeerSet {
    bits: Vec<u64>,
    len: usize,
    ranks: usize,
}

impl PeerSet {
    #[cfg(test)]
    fn new(p: usize) -> PeerSet {
        PeerSet {
            bits: vec![0; p.div_ceil(64)],
            len: 0,
            ranks: p,
        }
    }

    /// Empties the set and makes it hold the ranks 0..`p`.
    fn reset(&mut self, p: usize) {
        self.bits.clear();
        self.bits.resize(p.div_ceil(64), 0);
        self.len = 0;
        self.ranks = p;
    }

    fn contains(&self, rank: usize) -> bool {
        debug_assert!(rank < self.ranks);
        self.bits[rank / 64] & (1 << (rank % 64)) != 0
    }

    fn insert(&mut self, rank: usize) {
        debug_assert!(rank < self.ranks);
        let (w, b) = (rank / 64, 1u64 << (rank % 64));
        if self.bits[w] & b == 0 {
            self.bits[w] |= b;
            self.len += 1;
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn clear(&mut self) {
        if self.len > 0 {
            self.bits.fill(0);
            self.len = 0;
        }
    }
}

/// Completes the rank's pending requests (all, or only the receives) if
/// every one of them can be resolved now; false if one needs the other end
/// to get further first.
fn try_wait<N: Network + ?Sized>(
    st: &mut Rank,
    pairs: &mut [Pair],
    costs: &mut Costs<N>,
    all: bool,
) -> Result<bool, SimError> {
    let mut t = st.t;
    for &(pair, idx) in &st.recvs {
        match arrival(&mut pairs[pair].msgs[idx], costs)? {
            Some(a) => t = t.max(a),
            None => return Ok(false),
        }
    }
    if all {
        for &(pair, idx) in &st.sends {
            let m = &mut pairs[pair].msgs[idx];
            debug_assert!(m.has(MsgState::SENT), "a posted send has its time");
            let c = costs.at(m.cost);
            if c.eager {
                t = t.max(m.sent + c.o_s_ns);
            } else {
                match arrival(m, costs)? {
                    Some(a) => t = t.max(a),
                    None => return Ok(false),
                }
            }
        }
    }
    if t > st.t + 1e-9 {
        st.blocked += 1;
    }
    st.t = t;
    st.recvs.clear();
    st.received_from.clear();
    if all {
        st.sends.clear();
        st.sent_to.clear();
    }
    st.flows = [None, None];
    Ok(true)
}

/// Why a simulation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimError {
    Lookup(LookupError),
    /// The schedule waits for a message no rank sends.
    Deadlock,
}

impl From<LookupError> for SimError {
    fn from(e: LookupError) -> Self {
        SimError::Lookup(e)
    }
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Lookup(e) => write!(f, "parameter lookup failed: {e}"),
            SimError::Deadlock => f.write_str("schedule deadlocks"),
        }
    }
}

impl std::error::Error for SimError {}

#[cfg(test)]
mod tests;
