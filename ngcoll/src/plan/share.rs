//! A plan built by all the ranks of its communicator, each deciding a
//! share of it.
//!
//! A plan is one decision per item, an item being a collective and a
//! message-size class ([`items`]); each decision ([`decide`]) simulates
//! the candidates on the network alone, so any rank can make any of them.
//! Rank 0 reads its segment and sends what the plan is built from
//! ([`Inputs`]: the network's ranges, its all-ranks exchange and
//! contention record, and the [`Setup`]); rank r decides items r, r + P,
//! r + 2P, … ([`decide_share`]); one allgather hands every rank every
//! share, and each assembles the same plan ([`assemble_shares`]). The
//! plan is the one [`build`](super::build) makes in one process: it
//! assembles its decisions the same way ([`assemble`]), in the same
//! order, which fixes the table of the library's other algorithms.
//!
//! The simulations of one item grow with the square of the ranks (a ring
//! over P ranks moves P² messages); sharing the items divides the time
//! the communicator's first collective waits for its plan by up to P.

use netgauge::ext::TransportExt;
use netgauge::select::release_sim_scratch;
use netgauge::select::{
    choose, choose_named, judge, ompi_rule_algorithms, Algorithm, Call, Collective, Library,
    LibraryChoice, Measured, Network, RuleAlgorithm, Schedule, SimError, View,
};
use netgauge::Params;
use serde::{Deserialize, Serialize};

use super::{
    class_of, class_size, lib_index, runnable, Alt, Plan, Setup, Slot, ALT_BYTES, CLASSES,
    COLLECTIVES, LIBRARY_ALG, SLOT_BYTES,
};

/// What a plan is built from, as rank 0 sends it to the others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    pub setup: Setup,
    /// The pair's ranges (the segment entry's).
    pub pair: Vec<Params>,
    /// The all-ranks exchange measured with `setup.ranks` ranks (empty:
    /// none).
    pub exchange: Vec<Params>,
    /// The transport's contention record, if the segment has one.
    pub contention: Option<TransportExt>,
}

/// Largest encoded [`Inputs`] a rank decodes: far above what a segment
/// entry holds (its ranges are bounded by the segment layout).
pub const MAX_INPUT_BYTES: u64 = 1 << 20;

fn codec() -> impl bincode::Options {
    use bincode::Options;
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .with_limit(MAX_INPUT_BYTES)
}

impl Inputs {
    /// The network the plan is priced on.
    pub fn network(&self) -> Measured<'_> {
        Measured {
            pair: &self.pair,
            exchange: &self.exchange,
            exchange_ranks: self.setup.ranks,
            contention: self.contention.as_ref(),
        }
    }

    /// The bytes rank 0 broadcasts (None: larger than [`MAX_INPUT_BYTES`]).
    pub fn encode(&self) -> Option<Vec<u8>> {
        use bincode::Options;
        codec().serialize(self).ok()
    }

    /// The inputs [`encode`](Self::encode) wrote, or None for anything else
    /// (more than [`MAX_INPUT_BYTES`] included; a length inside that lies
    /// runs into the end of the bytes, serde allocating as it reads).
    pub fn decode(b: &[u8]) -> Option<Inputs> {
        use bincode::Options;
        if b.len() as u64 > MAX_INPUT_BYTES {
            return None;
        }
        codec().deserialize(b).ok()
    }
}

/// The items of a plan in the order [`assemble`] takes them: every
/// collective in [`Collective::ALL`] order, each with its classes up to
/// that of `s.max_bytes` (barrier: its one).
pub fn items(s: &Setup) -> Vec<(Collective, usize)> {
    let top = class_of(s.max_bytes);
    Collective::ALL
        .into_iter()
        .flat_map(|coll| {
            let classes = if coll == Collective::Barrier {
                1
            } else {
                top + 1
            };
            (0..classes).map(move |c| (coll, c))
        })
        .collect()
}

/// One item decided: its slot with our algorithm if one is chosen, and
/// the best of the library's other algorithms if one beats both the
/// library's own choice and ours (it takes the slot where the plan's table
/// of them has room, [`assemble`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decided {
    pub slot: Slot,
    /// The algorithm and its synchronized and back-to-back prices, ns.
    pub alt: Option<(Alt, f32, f32)>,
}

/// Bytes of one [`Decided`] in a share: the slot, whether an alternative
/// follows, the alternative and its two prices.
const DECIDED_BYTES: usize = SLOT_BYTES + 1 + ALT_BYTES + 8;

impl Decided {
    fn encode(&self, out: &mut [u8]) {
        self.slot.encode(&mut out[..SLOT_BYTES]);
        if let Some((alt, sync, b2b)) = self.alt {
            out[SLOT_BYTES] = 1;
            let at = SLOT_BYTES + 1;
            alt.encode(&mut out[at..at + ALT_BYTES]);
            out[at + ALT_BYTES..at + ALT_BYTES + 4].copy_from_slice(&sync.to_le_bytes());
            out[at + ALT_BYTES + 4..at + ALT_BYTES + 8].copy_from_slice(&b2b.to_le_bytes());
        }
    }

    fn decode(b: &[u8]) -> Option<Decided> {
        let slot = Slot::decode(&b[..SLOT_BYTES]);
        let at = SLOT_BYTES + 1;
        let f = |o: usize| f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let alt = match b[SLOT_BYTES] {
            0 => None,
            1 => Some((
                Alt::decode(&b[at..at + ALT_BYTES])?,
                f(at + ALT_BYTES),
                f(at + ALT_BYTES + 4),
            )),
            _ => return None,
        };
        Some(Decided { slot, alt })
    }
}

/// Decides one item: `select::choose` among `ours` and the library's own
/// choice, and where the library takes a forced algorithm, the best of its
/// other algorithms (`select::choose_named`) if it stands better than ours.
pub fn decide<N: Network + ?Sized>(
    net: &N,
    s: &Setup,
    ours: &[Algorithm],
    coll: Collective,
    class: usize,
) -> Result<Decided, SimError> {
    let m = if coll == Collective::Barrier {
        0
    } else {
        class_size(class)
    };
    let d = choose(
        net, s.lib, coll, s.ranks, m, s.one_node, ours, &s.view, s.margin,
    )?;
    let mut slot = Slot::library();
    slot.lib_sync_ns = d.library.view.sync_ns as f32;
    slot.lib_b2b_ns = d.library.view.back_to_back_ns as f32;
    slot.lib_sched = lib_index(d.library.schedule);
    if let Some(b) = d.best_ours {
        slot.best_ours = b.algorithm as u32;
        slot.ours_sync_ns = b.view.sync_ns as f32;
        slot.ours_b2b_ns = b.view.back_to_back_ns as f32;
    }
    let lib_prices = d.library.view.prices();
    let ours_score = d.ours.map(|o| judge(&o.view, &lib_prices).0);
    let alt = best_library_alg(net, s, coll, m, &d.library)?
        .filter(|(score, ..)| ours_score.map_or(true, |o| *score < o))
        .map(|(_, r, v)| {
            (
                Alt::of(coll, &r),
                v.sync_ns as f32,
                v.back_to_back_ns as f32,
            )
        });
    if let Some(o) = d.ours {
        slot.alg = o.algorithm as u32;
        slot.seg_bytes = u32::try_from(o.segment_bytes).unwrap_or(u32::MAX);
        slot.ours_sync_ns = o.view.sync_ns as f32;
        slot.ours_b2b_ns = o.view.back_to_back_ns as f32;
    }
    Ok(Decided { slot, alt })
}

/// The best of the library's other algorithms for `coll` over `m` bytes,
/// by `select::choose_named` against the library's own choice as
/// `select::choose` priced it, with its standing against that choice
/// (None: none beats it, or the library takes no forced algorithm).
fn best_library_alg<N: Network + ?Sized>(
    net: &N,
    s: &Setup,
    coll: Collective,
    m: u64,
    library: &LibraryChoice,
) -> Result<Option<(f64, RuleAlgorithm, View)>, SimError> {
    if !s.library_algorithms || s.lib != Library::OpenMpi41 {
        return Ok(None);
    }
    let candidates: Vec<(RuleAlgorithm, Schedule)> = ompi_rule_algorithms(coll, s.ranks, m)
        .into_iter()
        .map(|r| (r, r.schedule))
        .collect();
    let call = Call {
        lib: s.lib,
        coll,
        ranks: s.ranks,
        bytes: m,
        one_node: s.one_node,
    };
    let lib_prices = library.view.prices();
    Ok(
        choose_named(net, &call, library, &candidates, &s.view, s.margin)?
            .map(|(r, v)| (judge(&v, &lib_prices).0, r, v)),
    )
}

/// The plan of the decisions of [`items`]`(s)`, in their order: an
/// alternative takes its slot if the plan's table of the library's other
/// algorithms has it or room for it (else our choice stands), and the
/// classes above the last decided keep its decision. None if `decided`
/// is not one decision per item.
pub fn assemble(s: &Setup, decided: &[Decided]) -> Option<Plan> {
    let items = items(s);
    if decided.len() != items.len() {
        return None;
    }
    let mut plan = Plan::library();
    for (&(coll, c), d) in items.iter().zip(decided) {
        let mut slot = d.slot;
        if let Some((alt, sync, b2b)) = d.alt {
            if let Some(k) = plan.alt_index(alt) {
                slot.alg = LIBRARY_ALG + k as u32;
                slot.seg_bytes = Slot::library().seg_bytes;
                slot.ours_sync_ns = sync;
                slot.ours_b2b_ns = b2b;
            }
        }
        plan.slots[coll as usize][c] = slot;
    }
    for coll in Collective::ALL {
        let last = items.iter().filter(|(c, _)| *c == coll).count();
        let kept = plan.slots[coll as usize][last - 1];
        for slot in &mut plan.slots[coll as usize][last..CLASSES] {
            *slot = kept;
        }
    }
    Some(plan)
}

/// Bytes of one rank's share among `ranks`: whether it decided, then its
/// decisions (items rank, rank + ranks, …), room for the largest share.
pub fn share_bytes(s: &Setup, ranks: usize) -> usize {
    1 + items(s).len().div_ceil(ranks.max(1)) * DECIDED_BYTES
}

/// The largest share: one rank deciding every item of a plan.
pub const MAX_SHARE_BYTES: usize = 1 + COLLECTIVES * CLASSES * DECIDED_BYTES;

/// Rank `rank`'s share of the plan among `ranks`, in
/// [`share_bytes`]`(s, ranks)` bytes; its first byte 0 if a decision
/// failed (every rank then takes the library's own).
pub fn decide_share<N: Network + ?Sized>(net: &N, s: &Setup, rank: usize, ranks: usize) -> Vec<u8> {
    let mut out = vec![0u8; share_bytes(s, ranks)];
    let ours = runnable(s.ranks);
    let mine = items(s).into_iter().skip(rank).step_by(ranks.max(1));
    let decided = mine.enumerate().try_for_each(|(j, (coll, c))| {
        let at = 1 + j * DECIDED_BYTES;
        decide(net, s, &ours, coll, c).map(|d| d.encode(&mut out[at..at + DECIDED_BYTES]))
    });
    release_sim_scratch();
    out[0] = u8::from(decided.is_ok());
    out
}

/// The plan from every rank's share (`all`: the shares of ranks 0..ranks
/// in order, each [`share_bytes`]`(s, ranks)` long), or None if one is
/// missing, failed or malformed.
pub fn assemble_shares(s: &Setup, all: &[u8], ranks: usize) -> Option<Plan> {
    let len = share_bytes(s, ranks);
    if ranks == 0 || all.len() != len * ranks {
        return None;
    }
    let shares: Vec<&[u8]> = all.chunks(len).collect();
    if shares.iter().any(|sh| sh[0] != 1) {
        return None;
    }
    let decided = (0..items(s).len())
        .map(|i| {
            let at = 1 + (i / ranks) * DECIDED_BYTES;
            Decided::decode(&shares[i % ranks][at..at + DECIDED_BYTES])
        })
        .collect::<Option<Vec<_>>>()?;
    // Checked as a plan sent whole is: a slot names an alternative the
    // table has, of its own collective.
    Plan::decode(&assemble(s, &decided)?.encode())
}

#[cfg(test)]
mod tests;
