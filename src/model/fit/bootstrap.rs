//! Bootstrap percentile 95 % intervals of every reported parameter.

use std::collections::BTreeMap;

use super::points::{point, size_points, usable};
use super::ranges::{eel_and_L, fit_ranges};
use super::segment_points;
use crate::model::stats::{self, Rng};
use crate::model::{Interval, LinkTraits, Range, SizeSamples};

/// The keys of the top-level parameters: EEL, L and the first range's
/// o_s, o_r, g and G, as `ngctl probe --json` names them (and their
/// intervals).
pub const FIRST_RANGE_KEYS: [&str; 6] = [
    "eel_ns",
    "L_ns",
    "o_s_ns",
    "o_r_ns",
    "g_ns",
    "G_ns_per_byte",
];

/// [`FIRST_RANGE_KEYS`], then `ranges[i].{g_ns, G_ns_per_byte, o_s_ns,
/// o_r_ns, O_s_ns_per_byte, O_r_ns_per_byte}` for every range.
/// The keys of a range's parameters, as `ranges[i].<key>` names them (in
/// the segment's `RangeField` order).
pub const RANGE_KEYS: [&str; 6] = [
    "g_ns",
    "G_ns_per_byte",
    "o_s_ns",
    "o_r_ns",
    "O_s_ns_per_byte",
    "O_r_ns_per_byte",
];

fn param_keys(n_ranges: usize) -> Vec<String> {
    let mut k: Vec<String> = FIRST_RANGE_KEYS.iter().map(|s| s.to_string()).collect();
    for i in 0..n_ranges {
        for f in RANGE_KEYS {
            k.push(format!("ranges[{i}].{f}"));
        }
    }
    k
}

/// Values in the order of [`param_keys`].
#[allow(non_snake_case)]
fn param_values(eel: f64, L: f64, ranges: &[Range], out: &mut Vec<f64>) {
    out.clear();
    let r0 = &ranges[0];
    out.extend([eel, L, r0.o_s_ns, r0.o_r_ns, r0.g_ns, r0.G_ns_per_byte]);
    for r in ranges {
        out.extend(range_values(r));
    }
}

/// A range's values in the order of [`RANGE_KEYS`].
pub fn range_values(r: &Range) -> [f64; 6] {
    [
        r.g_ns,
        r.G_ns_per_byte,
        r.o_s_ns,
        r.o_r_ns,
        r.O_s_ns_per_byte,
        r.O_r_ns_per_byte,
    ]
}

/// Bootstrap percentile 95 % intervals of every reported parameter.
///
/// Each resample draws, per size, every raw vector (PRTT(1,0,s), PRTT(n,0,s),
/// PRTT(n,d,s), server o_r) with replacement, recomputes the medians and
/// refits the ranges with the change points of the point fit held fixed (a
/// re-segmented resample would fit different ranges, and "the interval of
/// range 2's g" would mix parameters of different protocols). Keys:
/// `eel_ns`, `L_ns`, `o_s_ns`, `o_r_ns`, `g_ns`, `G_ns_per_byte` (first
/// range) and `ranges[i].{g_ns, G_ns_per_byte, o_s_ns, o_r_ns,
/// O_s_ns_per_byte, O_r_ns_per_byte}`. Empty map for `resamples` = 0 or no
/// usable size.
pub fn ci95_loggp(
    samples: &[SizeSamples],
    resamples: usize,
    seed: u64,
) -> BTreeMap<String, Interval> {
    ci95_loggp_with(samples, resamples, seed, &LinkTraits::default())
}

/// [`ci95_loggp`] with the ranges [`super::fit_loggp_with`] fits for a
/// transport with `traits`.
pub fn ci95_loggp_with(
    samples: &[SizeSamples],
    resamples: usize,
    seed: u64,
    traits: &LinkTraits,
) -> BTreeMap<String, Interval> {
    let mut out = BTreeMap::new();
    let sizes = usable(samples);
    if resamples == 0 || sizes.is_empty() {
        return out;
    }
    let points = size_points(samples);
    let changes = segment_points(&points, traits.rendezvous).changes;
    let n_ranges = fit_ranges(&points, &changes).len();
    let keys = param_keys(n_ranges);
    let mut reps: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); keys.len()];
    let mut rng: Rng = stats::seeded_rng(seed);
    let mut scratch = Vec::new();
    let mut pts_b = Vec::with_capacity(sizes.len());
    let mut vals = Vec::with_capacity(keys.len());
    for _ in 0..resamples {
        pts_b.clear();
        for s in &sizes {
            let m1 = stats::resample_median(&s.prtt1_ns, &mut rng, &mut scratch);
            let mn = stats::resample_median(&s.prttn_ns, &mut rng, &mut scratch);
            let md = stats::resample_median(&s.prttd_ns, &mut rng, &mut scratch);
            let or = stats::resample_median(&s.o_r_ns, &mut rng, &mut scratch);
            pts_b.push(point(s, m1, mn, md, or));
        }
        let ranges = fit_ranges(&pts_b, &changes);
        let (eel, l) = eel_and_L(&pts_b, &ranges);
        param_values(eel, l, &ranges, &mut vals);
        for (r, v) in reps.iter_mut().zip(&vals) {
            r.push(*v);
        }
    }
    for (k, r) in keys.into_iter().zip(reps) {
        out.insert(k, stats::percentile_ci95(&r));
    }
    out
}
