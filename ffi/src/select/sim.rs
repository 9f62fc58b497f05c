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

use super::cost::{
    bytes_part_ns, contention, copy_lanes, in_working_set, msg, node_copy_lanes, send_overhead_ns,
    Msg, NODE_LANES_FROM_BYTES,
};
use super::schedule::{Op, Schedule};
use super::Network;
use crate::ext::Scheme;
use crate::types::{LookupError, Params};

/// Unconsumed messages a sender may have in flight to one receiver.
pub const EAGER_CREDITS: usize = 8;

/// The contention penalties stretch transfers of at least this many bytes.
/// They are bandwidth sharing measured with large flows: where a message's
/// time is its fixed part and an eager copy through the library's queues,
/// they do not say what k of them at once cost, and the measured all-ranks
/// step X(s) (one exchange per rank, at this size) or the pair's T(s)
/// prices it.
pub const PENALTY_FROM_BYTES: u64 = 64 * 1024;

/// The costs of one message size, looked up once per simulation.
#[derive(Clone, Copy, Debug)]
struct Cost {
    t_ns: f64,
    x_ns: f64,
    /// Whether `x_ns` is the measured all-ranks step (else T(s)).
    x_measured: bool,
    /// The part of `x_ns` that moves the bytes (X(s) − X(1), or T(s) −
    /// T(1)): what the penalties stretch.
    x_bytes_ns: f64,
    gap_ns: f64,
    o_s_ns: f64,
    /// Busy CPU of the two ends: the smallest message's send and receive
    /// overheads (a call's own work) and the bytes' one copy at the gap's
    /// per-byte rate G, split between sender and receiver. Not o_s(s) and
    /// o_r(s) of the message's range: a burst's time per message holds the
    /// waits of a sender whose receiver was not running, which is no work
    /// a shared core does.
    cpu_send_ns: f64,
    cpu_recv_ns: f64,
    copy_ns: f64,
    /// The part of T(s) that moves the bytes (T(s) − T(1), the
    /// handshake left out): what holds a copy lane.
    bytes_ns: f64,
    eager: bool,
    /// Transfers of this size the node moves at once (None: no limit).
    lanes: Option<usize>,
}

/// Cost lookups by size (a simulation uses a handful of sizes).
struct Costs<'a, N: Network + ?Sized> {
    net: &'a N,
    p: usize,
    /// The bytes one rank's buffers of the call span
    /// ([`Schedule::working_set`]): every transfer's bytes move at least at
    /// the rate measured at this size (`cost::in_working_set`).
    ws: u64,
    /// The node's copy lanes for large transfers, once looked up.
    node_lanes: Option<Option<usize>>,
    cache: Vec<(u64, Cost)>,
    lanes: Lanes,
    /// Lane time reserved, over the number of lanes (ns).
    lane_ns: f64,
    /// Contention factors looked up: (scheme, k, relative, factor).
    factors: Vec<(Scheme, usize, bool, Option<f64>)>,
}

impl<N: Network + ?Sized> Costs<'_, N> {
    /// `cost::contention`, looked up once per (scheme, k, relative).
    fn factor(&mut self, scheme: Scheme, k: usize, relative: bool) -> Option<f64> {
        let key = (scheme, k, relative);
        if let Some(f) = self.factors.iter().find(|f| (f.0, f.1, f.2) == key) {
            return f.3;
        }
        let f = contention(self.net, scheme, k, relative);
        self.factors.push((scheme, k, relative, f));
        f
    }

    /// Transfers of `bytes` the node moves at once: the node's one count
    /// from [`NODE_LANES_FROM_BYTES`] (`cost::node_copy_lanes`), the
    /// count measured at the size below it.
    fn lanes(&mut self, bytes: u64) -> Result<Option<usize>, LookupError> {
        if bytes < NODE_LANES_FROM_BYTES {
            return copy_lanes(self.net, self.p, bytes);
        }
        if let Some(n) = self.node_lanes {
            return Ok(n);
        }
        let n = node_copy_lanes(self.net, self.p)?;
        self.node_lanes = Some(n);
        Ok(n)
    }

    fn get(&mut self, bytes: u64) -> Result<Cost, LookupError> {
        if let Some((_, c)) = self.cache.iter().find(|(b, _)| *b == bytes) {
            return Ok(*c);
        }
        let ws = self.ws;
        let m: Msg = msg(self.net, bytes)?;
        let p: Params = self.net.at(bytes)?;
        let o_s = send_overhead_ns(&p, bytes, m.t_ns);
        let small = self.net.at(1)?;
        // The fixed overheads of one message, each at most the one-byte
        // message's whole time (see `send_overhead_ns`).
        let one = msg(self.net, 1)?.t_ns;
        let (o_s1, o_r1) = (
            send_overhead_ns(&small, 1, one),
            small.o_r_ns.clamp(0.0, one.max(0.0)),
        );
        let copy = 0.5 * bytes as f64 * p.G_ns_per_byte.max(0.0);
        let eager = p.S_bytes == u64::MAX || bytes <= p.S_bytes;
        // The bytes' parts at this size and, in a larger working set, at
        // the rate measured at the working set's size.
        let own_bytes = bytes_part_ns(self.net, bytes)?;
        let bytes_ns = if ws > bytes {
            in_working_set(own_bytes, bytes_part_ns(self.net, ws)?, bytes, ws)
        } else {
            own_bytes
        };
        let t_ns = m.t_ns + (bytes_ns - own_bytes);
        let x = self.net.exchange_ns(self.p, bytes);
        let (x_ns, x_bytes_ns) = match (x, self.net.exchange_ns(self.p, 1)) {
            (Some(x), Some(x1)) => {
                let own = (x - x1).max(0.0);
                let wide = match self.net.exchange_ns(self.p, ws) {
                    Some(xw) if ws > bytes => in_working_set(own, (xw - x1).max(0.0), bytes, ws),
                    _ => own,
                };
                (x + (wide - own), wide)
            }
            (Some(x), None) => (x, 0.0),
            (None, _) => (t_ns, bytes_ns),
        };
        let c = Cost {
            t_ns,
            x_ns,
            x_measured: x.is_some(),
            x_bytes_ns,
            gap_ns: m.gap_ns,
            o_s_ns: o_s,
            cpu_send_ns: o_s1 + copy,
            cpu_recv_ns: o_r1 + copy,
            // A memory copy runs at about the per-byte gap of shared memory.
            copy_ns: bytes as f64 * p.G_ns_per_byte.max(0.0),
            bytes_ns,
            eager,
            lanes: self.lanes(bytes)?,
        };
        self.cache.push((bytes, c));
        Ok(c)
    }
}

/// One message on a pair: when it was posted (sent) and when its receive
/// was posted, once known.
#[derive(Clone, Copy, Debug, Default)]
struct MsgState {
    sent: Option<(f64, u64, bool)>,
    recv_posted: Option<f64>,
    /// Its arrival, once computed (a transfer reserves a lane then, so it
    /// is computed once).
    arrived: Option<f64>,
    /// Distinct peers the sender had sends to in flight with it, and the
    /// receiver receives from (see [`in_flight_peers`]).
    k_out: usize,
    k_in: usize,
}

/// The node's copy lanes: per lane, the intervals reserved by transfers,
/// in order and disjoint. A transfer takes the earliest interval, on any
/// lane, that starts no earlier than it is ready and overlaps no reserved
/// one.
#[derive(Debug, Default)]
struct Lanes {
    busy: Vec<Vec<(f64, f64)>>,
}

impl Lanes {
    /// Reserves `dur_ns` from `ready` on one of `n` lanes; returns when the
    /// transfer starts.
    fn reserve(&mut self, n: usize, ready: f64, dur_ns: f64) -> f64 {
        if self.busy.len() < n {
            self.busy.resize(n, Vec::new());
        }
        let mut best: Option<(usize, f64)> = None;
        for (i, lane) in self.busy[..n].iter().enumerate() {
            let mut t = ready;
            // Intervals that end by `ready` cannot be in the way.
            let first = lane.partition_point(|&(_, b)| b <= ready);
            for &(a, b) in &lane[first..] {
                if t + dur_ns <= a {
                    break;
                }
                t = t.max(b);
            }
            if best.map_or(true, |(_, bt)| t < bt) {
                best = Some((i, t));
            }
        }
        let (i, t) = best.unwrap_or((0, ready));
        let lane = &mut self.busy[i];
        let at = lane.partition_point(|&(a, _)| a < t);
        lane.insert(at, (t, t + dur_ns));
        t
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

/// Simulates `sched` over `p` ranks with message size `m`.
pub fn run<N: Network + ?Sized>(
    net: &N,
    sched: Schedule,
    p: usize,
    m: u64,
    work: Work,
    issue: Issue,
) -> Result<Run, SimError> {
    let gamma_ns_per_byte = work.gamma_ns_per_byte;
    let Issue::BackToBack { calls, rotate } = issue;
    let mut costs = Costs {
        net,
        p,
        ws: sched.working_set(p, m),
        node_lanes: None,
        cache: Vec::new(),
        lanes: Lanes::default(),
        lane_ns: 0.0,
        factors: Vec::new(),
    };
    let pairs = p * p;
    // Messages per directed pair (src * p + dst), in posting order.
    let mut chan: Vec<Vec<MsgState>> = vec![Vec::new(); pairs];
    // Sends and receives posted per pair (index of the next one).
    let mut send_next: Vec<usize> = vec![0; pairs];
    let mut recv_next: Vec<usize> = vec![0; pairs];
    let mut ranks: Vec<Rank> = (0..p)
        .map(|_| Rank {
            sent_to: PeerSet::new(p),
            received_from: PeerSet::new(p),
            ..Rank::default()
        })
        .collect();
    let mut ahead = PeerSet::new(p);
    let root_of = |call: usize| if rotate { call % p } else { 0 };
    for (r, st) in ranks.iter_mut().enumerate() {
        sched.emit(p, r, root_of(0), m, &mut st.ops);
    }
    let mut done = 0;
    // Each pass advances every rank as far as it can; a pass without
    // progress means the schedule deadlocks (a bug in a schedule).
    let mut guard = 0usize;
    while done < p {
        let mut progress = false;
        // The rank index also names its channels; the rank is borrowed
        // anew around every call that needs the channels.
        #[allow(clippy::needless_range_loop)]
        for r in 0..p {
            loop {
                let st = &mut ranks[r];
                if st.call >= calls {
                    break;
                }
                if st.pc == st.ops.len() {
                    // End of a call: an implicit wait for everything.
                    if !try_wait(&mut ranks[r], &mut chan, &mut costs, true)? {
                        break;
                    }
                    let st = &mut ranks[r];
                    st.finish.push(st.t);
                    st.call += 1;
                    st.pc = 0;
                    st.ops.clear();
                    progress = true;
                    if st.call < calls {
                        let root = root_of(st.call);
                        sched.emit(p, r, root, m, &mut st.ops);
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
                        let pair = r * p + to;
                        let idx = send_next[pair];
                        // Credits: the receiver must have posted the
                        // receive of the message EAGER_CREDITS back and
                        // that message must have arrived.
                        let mut ready = st.t.max(st.next_send);
                        let mut ok = true;
                        if idx >= EAGER_CREDITS {
                            match consumed_at(&mut chan[pair][idx - EAGER_CREDITS], &mut costs)? {
                                Some(t) => ready = ready.max(t),
                                None => ok = false,
                            }
                        }
                        if ok {
                            let k_out = in_flight_peers(st, &mut ahead, true);
                            let c = costs.get(bytes)?;
                            let st = &mut ranks[r];
                            st.next_send = ready + c.gap_ns;
                            st.t = ready + c.o_s_ns;
                            st.cpu_ns += c.cpu_send_ns;
                            send_next[pair] += 1;
                            if chan[pair].len() <= idx {
                                chan[pair].resize(idx + 1, MsgState::default());
                            }
                            chan[pair][idx].sent = Some((ready, bytes, exchange));
                            chan[pair][idx].k_out = k_out;
                            st.sends.push((pair, idx));
                            st.sent_to.insert(to);
                            st.pc += 1;
                        }
                        ok
                    }
                    Op::Recv { from, bytes } => {
                        let pair = from * p + r;
                        let idx = recv_next[pair];
                        recv_next[pair] += 1;
                        if chan[pair].len() <= idx {
                            chan[pair].resize(idx + 1, MsgState::default());
                        }
                        chan[pair][idx].recv_posted = Some(st.t);
                        chan[pair][idx].k_in = in_flight_peers(st, &mut ahead, false);
                        let c = costs.get(bytes)?;
                        let st = &mut ranks[r];
                        st.cpu_ns += c.cpu_recv_ns;
                        st.recvs.push((pair, idx));
                        st.received_from.insert(from);
                        st.pc += 1;
                        true
                    }
                    Op::Wait | Op::WaitRecvs => {
                        let all = matches!(op, Op::Wait);
                        if try_wait(&mut ranks[r], &mut chan, &mut costs, all)? {
                            ranks[r].pc += 1;
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
                        let st = &mut ranks[r];
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
fn arrival<N: Network + ?Sized>(
    m: &mut MsgState,
    costs: &mut Costs<N>,
) -> Result<Option<f64>, LookupError> {
    if let Some(t) = m.arrived {
        return Ok(Some(t));
    }
    let (Some((sent, bytes, exchange)), Some(posted)) = (m.sent, m.recv_posted) else {
        // An eager message arrives whenever its receive is posted: its
        // arrival needs the receive too (for when the wait completes).
        return Ok(None);
    };
    let c = costs.get(bytes)?;
    let t = if exchange {
        let f = if bytes >= PENALTY_FROM_BYTES {
            costs.factor(Scheme::Mixed, m.k_out, c.x_measured)
        } else {
            None
        };
        c.x_ns + c.x_bytes_ns * (f.unwrap_or(1.0) - 1.0)
    } else if c.lanes.is_none() && bytes >= PENALTY_FROM_BYTES {
        let out = costs.factor(Scheme::Outgoing, m.k_out, true);
        let inc = costs.factor(Scheme::Incoming, m.k_in, true);
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
    m.arrived = Some(at);
    Ok(Some(at))
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
    fn new(p: usize) -> PeerSet {
        PeerSet {
            bits: vec![0; p.div_ceil(64)],
            len: 0,
            ranks: p,
        }
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

    fn clear(&mut self) {
        if self.len > 0 {
            self.bits.fill(0);
            self.len = 0;
        }
    }
}

/// When the receiver has consumed the message (for the sender's credits).
fn consumed_at<N: Network + ?Sized>(
    m: &mut MsgState,
    costs: &mut Costs<N>,
) -> Result<Option<f64>, SimError> {
    Ok(arrival(m, costs)?)
}

/// Completes the rank's pending requests (all, or only the receives) if
/// every one of them can be resolved now; false if one needs the other end
/// to get further first.
fn try_wait<N: Network + ?Sized>(
    st: &mut Rank,
    chan: &mut [Vec<MsgState>],
    costs: &mut Costs<N>,
    all: bool,
) -> Result<bool, SimError> {
    let mut t = st.t;
    for &(pair, idx) in &st.recvs {
        match arrival(&mut chan[pair][idx], costs)? {
            Some(a) => t = t.max(a),
            None => return Ok(false),
        }
    }
    if all {
        for &(pair, idx) in &st.sends {
            let m = &mut chan[pair][idx];
            let (sent, bytes, _) = m.sent.expect("a posted send has its time");
            let c = costs.get(bytes)?;
            if c.eager {
                t = t.max(sent + c.o_s_ns);
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
