//! A communicator's plan: for every collective and message-size class,
//! which algorithm to run (one of ours, or the library's own) and what the
//! model predicted for both.
//!
//! The plan is built once per communicator shape, at the first collective,
//! from rank 0's segment: every rank must run the same algorithm in the
//! same call, and ranks on different nodes read different segments (or
//! one segment at different moments). Rank 0 sends what it read, every
//! rank decides a share of the plan and all assemble the same one
//! ([`share`]); a plan rank 0 has already built for the same shape it
//! broadcasts whole ([`Plan::encode`] / [`Plan::decode`]). A call then
//! costs one table lookup ([`Plan::get`], [`class_of`]): no lookup in the
//! segment, no system call.

use netgauge::select::{
    exchange_transport, ompi_tuned_algorithms, Algorithm, Collective, Library, Network,
    RuleAlgorithm, Schedule, SimError, ViewOptions,
};
use netgauge::{EntryData, Params};

/// The all-ranks exchange measured with `ranks` ranks beside `entry` (the
/// same peer's `<transport>-x<ranks>`, not stale) as ranges; empty without
/// one.
pub fn exchange_ranges(entries: &[EntryData], entry: &EntryData, ranks: usize) -> Vec<Params> {
    let mut name = [0u8; netgauge::layout::TRANSPORT_MAX_BYTES];
    exchange_transport(&entry.transport, ranks, &mut name)
        .and_then(|x| {
            entries.iter().find(|e| {
                e.transport == x && e.peer == entry.peer && e.flags & netgauge::flags::STALE == 0
            })
        })
        .map(EntryData::params)
        .unwrap_or_default()
}

/// Size classes: 0 bytes, 1 byte, then two per octave ([2^j, 1.5·2^j) and
/// [1.5·2^j, 2^(j+1))) up to 2^32 (larger sizes share the last class).
pub const CLASSES: usize = 2 + 2 * 31;

/// The collectives of a plan, in [`Collective::ALL`] order.
pub const COLLECTIVES: usize = 6;

/// "Run the library's own collective".
pub const LIBRARY: u32 = u32::MAX;

/// A slot's `alg` from this value on names another of the library's own
/// algorithms: entry `alg - LIBRARY_ALG` of the plan's [`Plan::alts`].
pub const LIBRARY_ALG: u32 = 0x4000_0000;

/// Most of the library's other algorithms one plan runs: each is a
/// communicator of its own (a duplicate made with it forced), per
/// communicator the plan serves.
pub const MAX_ALTS: usize = 8;

/// One of the library's own algorithms, other than its own choice, that a
/// plan runs: Open MPI's coll/tuned number, fan-in/out and segment size
/// for `coll` (forced on a duplicate of the communicator), and the index
/// of the schedule the model prices it by in [`LIB_SCHEDULES`] (names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alt {
    pub coll: Collective,
    pub number: u32,
    pub faninout: u32,
    pub segsize: u32,
    pub sched: u32,
}

const ALT_BYTES: usize = 20;

impl Alt {
    fn of(coll: Collective, r: &RuleAlgorithm) -> Alt {
        Alt {
            coll,
            number: r.number,
            faninout: r.faninout,
            segsize: u32::try_from(r.segsize).unwrap_or(u32::MAX),
            sched: lib_index(r.schedule),
        }
    }

    /// Algorithm `number` of `coll` with its fan-in/out and segment size,
    /// as `NETGAUGE_COLL_FORCE` names it, over `p` ranks (its schedule, for
    /// the log, where the model has one).
    pub fn forced(coll: Collective, p: usize, number: u32, faninout: u32, segsize: u32) -> Alt {
        let sched = ompi_tuned_algorithms(coll, p, 1 << 30)
            .iter()
            .find(|r| r.number == number)
            .map_or(u32::MAX, |r| lib_index(r.schedule));
        Alt {
            coll,
            number,
            faninout,
            segsize,
            sched,
        }
    }

    /// The MPI_T control variables (Open MPI 4.1's coll/tuned) that force
    /// this algorithm on a communicator duplicated after they are written:
    /// the algorithm, and where the collective has them its segment size
    /// and fan-outs.
    pub fn cvars(&self) -> Vec<(String, i32)> {
        let c = self.coll.name();
        let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let mut v = vec![(format!("coll_tuned_{c}_algorithm"), int(self.number))];
        if self.coll != Collective::Barrier {
            v.push((
                format!("coll_tuned_{c}_algorithm_segmentsize"),
                int(self.segsize),
            ));
        }
        if matches!(self.coll, Collective::Bcast | Collective::Reduce) {
            for f in ["chain_fanout", "tree_fanout"] {
                // Fan-out 0 is not a tree: the library's default (4) for
                // the algorithms that take none.
                let fan = if self.faninout == 0 { 4 } else { self.faninout };
                v.push((format!("coll_tuned_{c}_algorithm_{f}"), int(fan)));
            }
        }
        v
    }

    /// How the log names it.
    pub fn name(&self) -> String {
        let mut s = format!("{} (#{}", lib_sched_name(self.sched), self.number);
        if self.segsize > 0 {
            s.push_str(&format!(", {} B segments", self.segsize));
        }
        s.push(')');
        s
    }

    fn encode(&self, out: &mut [u8]) {
        let words = [
            self.coll as u32,
            self.number,
            self.faninout,
            self.segsize,
            self.sched,
        ];
        for (o, w) in out.chunks_exact_mut(4).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
    }

    fn decode(b: &[u8]) -> Option<Alt> {
        let w = |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        Some(Alt {
            coll: Collective::from_u32(w(0))?,
            number: w(1),
            faninout: w(2),
            segsize: w(3),
            sched: w(4),
        })
    }
}

/// The class of a message of `bytes`.
#[inline]
pub fn class_of(bytes: u64) -> usize {
    if bytes <= 1 {
        return bytes as usize;
    }
    let j = 63 - bytes.leading_zeros() as usize;
    let half = ((bytes >> (j - 1)) & 1) as usize;
    (2 * j + half).min(CLASSES - 1)
}

/// The sizes a class spans, [lo, hi].
pub fn class_bounds(c: usize) -> (u64, u64) {
    if c <= 1 {
        return (c as u64, c as u64);
    }
    let (j, half) = (c / 2, c % 2);
    let lo = (1u64 << j) + half as u64 * (1u64 << (j - 1));
    (lo, lo + (1u64 << (j - 1)) - 1)
}

/// The size a class is decided at: the geometric middle of its bounds.
pub fn class_size(c: usize) -> u64 {
    let (lo, hi) = class_bounds(c);
    if lo <= 1 {
        return lo;
    }
    ((lo as f64 * hi as f64).sqrt()).round() as u64
}

/// One decision: the algorithm (an [`Algorithm`] value, [`LIBRARY`], or
/// from [`LIBRARY_ALG`] another of the library's algorithms),
/// the chain's segment, and the predictions (back-to-back, ns) of our best
/// candidate and of the library's own choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    pub alg: u32,
    pub seg_bytes: u32,
    /// Our best candidate (chosen or not; where the slot names another of
    /// the library's algorithms, that one) and the library's own choice, as
    /// the model prices them (synchronized call, back to back), ns.
    pub ours_sync_ns: f32,
    pub ours_b2b_ns: f32,
    pub lib_sync_ns: f32,
    pub lib_b2b_ns: f32,
    /// Our best candidate's algorithm, chosen or not.
    pub best_ours: u32,
    /// What the library runs, as an index into [`LIB_SCHEDULES`].
    pub lib_sched: u32,
}

const SLOT_BYTES: usize = 32;

impl Slot {
    pub const fn library() -> Slot {
        Slot {
            alg: LIBRARY,
            seg_bytes: 0,
            ours_sync_ns: f32::NAN,
            ours_b2b_ns: f32::NAN,
            lib_sync_ns: f32::NAN,
            lib_b2b_ns: f32::NAN,
            best_ours: LIBRARY,
            lib_sched: u32::MAX,
        }
    }

    /// Our algorithm, or None (the library's own choice, or another of
    /// its algorithms).
    #[inline]
    pub fn algorithm(&self) -> Option<Algorithm> {
        Algorithm::from_u32(self.alg)
    }

    /// The index in [`Plan::alts`] of the library's algorithm this slot
    /// runs instead of the library's own choice, or None.
    #[inline]
    pub fn alt(&self) -> Option<usize> {
        self.alg
            .checked_sub(LIBRARY_ALG)
            .map(|k| k as usize)
            .filter(|&k| k < MAX_ALTS)
    }

    /// The plan replaces the library's own choice here: one of ours, or
    /// another of the library's algorithms (either is tried against it).
    #[inline]
    pub fn replaces_library(&self) -> bool {
        self.algorithm().is_some() || self.alt().is_some()
    }

    fn encode(&self, out: &mut [u8]) {
        let words = [
            self.alg,
            self.seg_bytes,
            self.ours_sync_ns.to_bits(),
            self.ours_b2b_ns.to_bits(),
            self.lib_sync_ns.to_bits(),
            self.lib_b2b_ns.to_bits(),
            self.best_ours,
            self.lib_sched,
        ];
        for (o, w) in out.chunks_exact_mut(4).zip(words) {
            o.copy_from_slice(&w.to_le_bytes());
        }
    }

    fn decode(b: &[u8]) -> Slot {
        let w = |i: usize| u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        Slot {
            alg: w(0),
            seg_bytes: w(1),
            ours_sync_ns: f32::from_bits(w(2)),
            ours_b2b_ns: f32::from_bits(w(3)),
            lib_sync_ns: f32::from_bits(w(4)),
            lib_b2b_ns: f32::from_bits(w(5)),
            best_ours: w(6),
            lib_sched: w(7),
        }
    }
}

/// The plan of one communicator.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    slots: [[Slot; CLASSES]; COLLECTIVES],
    /// The library's other algorithms the slots name, in the order every
    /// rank duplicates their communicators.
    alts: Vec<Alt>,
}

/// Bytes of an encoded plan: the slots, the number of alternatives, and
/// room for [`MAX_ALTS`] of them.
pub const PLAN_BYTES: usize = COLLECTIVES * CLASSES * SLOT_BYTES + 4 + MAX_ALTS * ALT_BYTES;

impl Plan {
    /// Everything to the library (no parameters, or the plan could not be
    /// built).
    pub fn library() -> Plan {
        Plan {
            slots: [[Slot::library(); CLASSES]; COLLECTIVES],
            alts: Vec::new(),
        }
    }

    /// The library's other algorithms this plan runs ([`Slot::alt`]
    /// indexes them).
    pub fn alts(&self) -> &[Alt] {
        &self.alts
    }

    /// This plan without the library's other algorithms: their classes
    /// back to the library's own choice (the alternatives are off).
    pub fn without_alts(&self) -> Plan {
        let mut p = self.clone();
        for s in p.slots.iter_mut().flatten() {
            if s.alt().is_some() {
                s.alg = LIBRARY;
                s.seg_bytes = 0;
            }
        }
        p.alts.clear();
        p
    }

    /// Every class of each of `forced`'s collectives to it
    /// (`NETGAUGE_COLL_FORCE`): those collectives' own choices go, and
    /// where the table has no room for them all, the plan's other entries
    /// give their classes back to the library's own choice, last first.
    pub fn force_alts(&mut self, forced: &[Alt]) {
        let forced = &forced[..forced.len().min(MAX_ALTS)];
        for a in forced {
            for s in self.slots[a.coll as usize].iter_mut() {
                *s = Slot {
                    alg: LIBRARY,
                    seg_bytes: 0,
                    ..*s
                };
            }
        }
        self.compact();
        while !self.alts.is_empty() && self.alts.len() + forced.len() > MAX_ALTS {
            let last = self.alts.len() - 1;
            for s in self.slots.iter_mut().flatten() {
                if s.alt() == Some(last) {
                    s.alg = LIBRARY;
                }
            }
            self.alts.pop();
        }
        for a in forced {
            self.force_alt(*a);
        }
    }

    /// Drops the entries no slot names, keeping the others' order.
    fn compact(&mut self) {
        let mut map = vec![None; self.alts.len()];
        let mut kept = Vec::new();
        for (k, a) in self.alts.iter().enumerate() {
            if self.slots.iter().flatten().any(|s| s.alt() == Some(k)) {
                map[k] = Some(kept.len() as u32);
                kept.push(*a);
            }
        }
        for s in self.slots.iter_mut().flatten() {
            if let Some(k) = s.alt() {
                s.alg = map[k].map_or(LIBRARY, |n| LIBRARY_ALG + n);
            }
        }
        self.alts = kept;
    }

    /// Every class of `alt`'s collective to `alt` (a forced choice), if
    /// the table has room.
    fn force_alt(&mut self, alt: Alt) {
        if let Some(k) = self.alt_index(alt) {
            for s in self.slots[alt.coll as usize].iter_mut() {
                s.alg = LIBRARY_ALG + k as u32;
                s.seg_bytes = 0;
            }
        }
    }

    /// The index of `alt` in the table, added if new and there is room.
    fn alt_index(&mut self, alt: Alt) -> Option<usize> {
        if let Some(k) = self.alts.iter().position(|a| *a == alt) {
            return Some(k);
        }
        if self.alts.len() == MAX_ALTS {
            return None;
        }
        self.alts.push(alt);
        Some(self.alts.len() - 1)
    }

    #[inline]
    pub fn get(&self, coll: Collective, bytes: u64) -> &Slot {
        &self.slots[coll as usize][class_of(bytes)]
    }

    pub fn slot(&self, coll: Collective, class: usize) -> &Slot {
        &self.slots[coll as usize][class]
    }

    /// Sets one decision (tests of what depends on a plan).
    #[cfg(test)]
    pub(crate) fn set(&mut self, coll: Collective, class: usize, slot: Slot) {
        self.slots[coll as usize][class] = slot;
    }

    /// Class `class` of `coll` to the library's algorithm `number`, if the
    /// table has room (tests).
    #[cfg(test)]
    pub(crate) fn force_alt_at(&mut self, coll: Collective, class: usize, number: u32) {
        if let Some(k) = self.alt_index(Alt::forced(coll, 4, number, 0, 0)) {
            self.slots[coll as usize][class].alg = LIBRARY_ALG + k as u32;
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; PLAN_BYTES];
        for (i, s) in self.slots.iter().flatten().enumerate() {
            s.encode(&mut out[i * SLOT_BYTES..(i + 1) * SLOT_BYTES]);
        }
        let at = COLLECTIVES * CLASSES * SLOT_BYTES;
        out[at..at + 4].copy_from_slice(&(self.alts.len() as u32).to_le_bytes());
        for (k, a) in self.alts.iter().enumerate() {
            let o = at + 4 + k * ALT_BYTES;
            a.encode(&mut out[o..o + ALT_BYTES]);
        }
        out
    }

    /// The plan `encode` wrote, or None for anything else (a wrong length,
    /// more alternatives than fit, an unknown collective, a slot naming an
    /// alternative the table does not have).
    pub fn decode(b: &[u8]) -> Option<Plan> {
        if b.len() != PLAN_BYTES {
            return None;
        }
        let mut p = Plan::library();
        for (i, s) in p.slots.iter_mut().flatten().enumerate() {
            *s = Slot::decode(&b[i * SLOT_BYTES..(i + 1) * SLOT_BYTES]);
        }
        let at = COLLECTIVES * CLASSES * SLOT_BYTES;
        let n = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
        if n > MAX_ALTS {
            return None;
        }
        for k in 0..n {
            let o = at + 4 + k * ALT_BYTES;
            p.alts.push(Alt::decode(&b[o..o + ALT_BYTES])?);
        }
        for (coll, row) in Collective::ALL.iter().zip(&p.slots) {
            for s in row {
                match s.alt() {
                    Some(k) if k >= n || p.alts[k].coll != *coll => return None,
                    None if s.alg >= LIBRARY_ALG && s.alg != LIBRARY => return None,
                    _ => {}
                }
            }
        }
        Some(p)
    }
}

/// The library schedules a plan can name (its `lib_sched` indexes this
/// list; the logs print their names).
pub const LIB_SCHEDULES: &[Schedule] = &[
    Schedule::BcastBinomial,
    Schedule::BcastScatterRd,
    Schedule::BcastScatterRing,
    Schedule::BcastLinear,
    Schedule::BcastBinary,
    Schedule::BcastKnomial { radix: 4 },
    Schedule::BcastShm,
    Schedule::ReduceBinomial,
    Schedule::ReduceBinomialAlloc,
    Schedule::ReduceRabenseifner,
    Schedule::ReduceRabenseifnerAlloc,
    Schedule::ReduceLinear,
    Schedule::ReduceBinary,
    Schedule::ReduceShm,
    Schedule::AllreduceRecursiveDoubling,
    Schedule::AllreduceRabenseifner,
    Schedule::AllreduceRing,
    Schedule::AllreduceReduceBcast,
    Schedule::AllreduceShm,
    Schedule::AllgatherRecursiveDoubling,
    Schedule::AllgatherRing,
    Schedule::AllgatherBruck,
    Schedule::AllgatherNeighbor,
    Schedule::AlltoallPairwise,
    Schedule::AlltoallLinear,
    Schedule::AlltoallBruck,
    Schedule::BarrierDissemination,
    Schedule::BarrierTree,
    Schedule::BarrierLinear,
    Schedule::BarrierRecursiveDoubling,
    Schedule::BarrierShm,
];

/// Index of `s` in [`LIB_SCHEDULES`] (segmented chains by kind).
fn lib_index(s: Schedule) -> u32 {
    let key = |x: Schedule| match x {
        Schedule::BcastChain { .. } => Schedule::BcastChain { seg: 0 },
        Schedule::ReduceChain { .. } => Schedule::ReduceChain { seg: 0 },
        o => o,
    };
    LIB_SCHEDULES
        .iter()
        .position(|&x| key(x) == key(s))
        .map_or_else(
            || match s {
                Schedule::BcastChain { .. } => 1000,
                Schedule::ReduceChain { .. } => 1001,
                _ => u32::MAX,
            },
            |i| i as u32,
        )
}

/// The name of a plan's library schedule index.
pub fn lib_sched_name(i: u32) -> &'static str {
    match i {
        1000 | 1001 => "chain",
        _ => LIB_SCHEDULES.get(i as usize).map_or("?", |s| s.name()),
    }
}

/// What [`build`] needs to know besides the network.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Setup {
    pub lib: Library,
    /// Ranks of the communicator.
    pub ranks: usize,
    /// Every rank on one node.
    pub one_node: bool,
    pub view: ViewOptions,
    /// How much faster (every view) one of ours must be predicted to be
    /// chosen over the library's own.
    pub margin: f64,
    /// Largest message size decided; larger classes keep this one's
    /// decision.
    pub max_bytes: u64,
    /// The library's other algorithms are candidates too (Open MPI, whose
    /// coll/tuned takes a forced algorithm per communicator).
    pub library_algorithms: bool,
}

/// The algorithms ngcoll runs for a communicator of `p` ranks (the
/// recursive-doubling allgathers only for powers of two).
pub fn runnable(p: usize) -> Vec<Algorithm> {
    Algorithm::ALL
        .into_iter()
        .filter(|a| {
            p.is_power_of_two()
                || !matches!(
                    a,
                    Algorithm::AllgatherRecursiveDoubling | Algorithm::BcastScatterRdAllgather
                )
        })
        .collect()
}

/// A network of the shape the test machine's MPI probe publishes (4 ranks
/// sharing 2 cores, shared memory: L 1 µs, o 400 ns, g 300 ns, G 0.3 ns/B,
/// no rendezvous), where the model prices one of Open MPI's other
/// algorithms below ours and below its own choice: what the plan tests and
/// `benches/plan_build.rs` build plans for.
pub fn reference_shared_memory() -> Params {
    Params {
        eel_ns: 1800.0,
        L_ns: 1000.0,
        o_s_ns: 400.0,
        o_r_ns: 400.0,
        g_ns: 300.0,
        G_ns_per_byte: 0.3,
        S_bytes: u64::MAX,
        range_from_bytes: 0,
        range_to_bytes: u64::MAX,
        ..Params::default()
    }
}

/// Builds the plan from `net` in this process: every item decided
/// ([`share::decide`]) and assembled ([`share::assemble`]) in order.
pub fn build<N: Network + ?Sized>(net: &N, s: &Setup) -> Result<Plan, SimError> {
    let ours = runnable(s.ranks);
    let decided = share::items(s)
        .into_iter()
        .map(|(coll, c)| share::decide(net, s, &ours, coll, c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(share::assemble(s, &decided).expect("one decision per item"))
}

pub mod share;

#[cfg(test)]
mod tests;
