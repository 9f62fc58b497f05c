//! A communicator's plan: for every collective and message-size class,
//! which algorithm to run (one of ours, or the library's own) and what the
//! model predicted for both.
//!
//! The plan is built once per communicator, at its first collective, by
//! its rank 0 from the segment ([`build`]), and broadcast to the others
//! ([`Plan::encode`] / [`Plan::decode`]): every rank must run the same
//! algorithm in the same call, and ranks on different nodes read
//! different segments (or one segment at different moments). A call then
//! costs one table lookup ([`Plan::get`], [`class_of`]): no lookup in the
//! segment, no system call.

use netgauge::select::{
    choose, exchange_transport, Algorithm, Collective, Library, Network, Schedule, SimError,
    ViewOptions,
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

/// One decision: the algorithm (an [`Algorithm`] value or [`LIBRARY`]),
/// the chain's segment, and the predictions (back-to-back, ns) of our best
/// candidate and of the library's own choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slot {
    pub alg: u32,
    pub seg_bytes: u32,
    /// Our best candidate (chosen or not) and the library's own, as the
    /// model prices them (synchronized call, back to back), ns.
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

    /// Our algorithm, or None for the library's own.
    #[inline]
    pub fn algorithm(&self) -> Option<Algorithm> {
        Algorithm::from_u32(self.alg)
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
}

/// Bytes of an encoded plan.
pub const PLAN_BYTES: usize = COLLECTIVES * CLASSES * SLOT_BYTES;

impl Plan {
    /// Everything to the library (no parameters, or the plan could not be
    /// built).
    pub fn library() -> Plan {
        Plan {
            slots: [[Slot::library(); CLASSES]; COLLECTIVES],
        }
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

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![0u8; PLAN_BYTES];
        for (i, s) in self.slots.iter().flatten().enumerate() {
            s.encode(&mut out[i * SLOT_BYTES..(i + 1) * SLOT_BYTES]);
        }
        out
    }

    pub fn decode(b: &[u8]) -> Option<Plan> {
        if b.len() != PLAN_BYTES {
            return None;
        }
        let mut p = Plan::library();
        for (i, s) in p.slots.iter_mut().flatten().enumerate() {
            *s = Slot::decode(&b[i * SLOT_BYTES..(i + 1) * SLOT_BYTES]);
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
#[derive(Clone, Copy, Debug)]
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

/// Builds the plan from `net` (every decision by `select::choose`).
pub fn build<N: Network + ?Sized>(net: &N, s: &Setup) -> Result<Plan, SimError> {
    let mut plan = Plan::library();
    let ours = runnable(s.ranks);
    let top = class_of(s.max_bytes);
    for coll in Collective::ALL {
        let classes = if coll == Collective::Barrier {
            1
        } else {
            top + 1
        };
        for c in 0..classes {
            let m = if coll == Collective::Barrier {
                0
            } else {
                class_size(c)
            };
            let d = choose(
                net, s.lib, coll, s.ranks, m, s.one_node, &ours, &s.view, s.margin,
            )?;
            let mut slot = Slot::library();
            slot.lib_sync_ns = d.library_view.sync_ns as f32;
            slot.lib_b2b_ns = d.library_view.back_to_back_ns as f32;
            slot.lib_sched = lib_index(d.library);
            if let Some(b) = d.best_ours {
                slot.best_ours = b.algorithm as u32;
                slot.ours_sync_ns = b.view.sync_ns as f32;
                slot.ours_b2b_ns = b.view.back_to_back_ns as f32;
            }
            if let Some(o) = d.ours {
                slot.alg = o.algorithm as u32;
                slot.seg_bytes = u32::try_from(o.segment_bytes).unwrap_or(u32::MAX);
                slot.ours_sync_ns = o.view.sync_ns as f32;
                slot.ours_b2b_ns = o.view.back_to_back_ns as f32;
            }
            plan.slots[coll as usize][c] = slot;
        }
        let last = plan.slots[coll as usize][if coll == Collective::Barrier { 0 } else { top }];
        let from = if coll == Collective::Barrier {
            1
        } else {
            top + 1
        };
        for c in from..CLASSES {
            plan.slots[coll as usize][c] = last;
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_once() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(1), 1);
        let mut prev = 0;
        for c in 1..CLASSES {
            let (lo, hi) = class_bounds(c);
            assert!(lo <= hi, "{c}");
            assert_eq!(class_of(lo), c, "lo of {c}");
            assert_eq!(class_of(hi), c, "hi of {c}");
            if c > 1 {
                assert_eq!(lo, prev + 1, "{c} starts after {prev}");
            }
            prev = hi;
            let m = class_size(c);
            assert!(lo <= m && m <= hi, "{c}: {m} in [{lo}, {hi}]");
        }
        assert_eq!(class_of(u64::MAX), CLASSES - 1);
        assert_eq!(class_of(3 << 20), class_of((3 << 20) + 1));
        assert_ne!(class_of(4 << 20), class_of((4 << 20) - 1));
    }

    #[test]
    fn plan_round_trips() {
        let mut p = Plan::library();
        p.slots[2][7] = Slot {
            alg: Algorithm::AllreduceRing as u32,
            seg_bytes: 4096,
            ours_sync_ns: 1.5,
            ours_b2b_ns: 2.5,
            lib_sync_ns: 3.5,
            lib_b2b_ns: 4.5,
            best_ours: Algorithm::AllreduceRing as u32,
            lib_sched: 3,
        };
        let b = p.encode();
        assert_eq!(b.len(), PLAN_BYTES);
        let q = Plan::decode(&b).unwrap();
        // NaN != NaN: compare the encodings.
        assert_eq!(q.encode(), b);
        assert_eq!(q.slots[2][7].alg, Algorithm::AllreduceRing as u32);
        assert!(Plan::decode(&b[1..]).is_none());
    }
}
