//! LogGP / LogGPS fit of one size sweep (Hoefler, Lichei & Rehm §3; LogGPS
//! overheads o' + (s−1)·O), with protocol ranges and bootstrap intervals.
//!
//! Pipeline: raw samples → per-size medians → [`SizePoint`]s → both change
//! detectors on (x = s − 1, y = gap) → the better segmentation → one
//! parameter set per range.
//!
//! Fitting choices (documented here once):
//! - Per range, g and G come from the least-squares line of gap against
//!   x = s − 1, so g = the line's value at s = 1 (the intercept over x) and G
//!   its slope, as in the paper's Table 2 (`f(s) = G·(s−1) + g`, for every
//!   range, also the ones that start far from s = 1).
//! - The lines are *weighted* least squares with weights 1/gap² for the gap
//!   and 1/half_rtt² for the overheads: the jitter of a median round trip
//!   grows with the round trip, so unweighted least squares would let the
//!   largest sizes decide the intercept (g, o') alone. On exact data the
//!   weights change nothing. This is the same variance model the segmenter
//!   uses (see `segment`).
//! - The gap line is made robust ([`robust_rel_line`]: Tukey's biweight on
//!   the relative residuals, from the Theil–Sen line), so a minority of
//!   medians caught in another mode (a token bucket's full/empty sizes)
//!   cannot tilt G. The overhead lines stay plain least squares.
//! - Ranges need at least [`MIN_RANGE_POINTS`] = 3 points (two points fit any
//!   line exactly and leave nothing to check it with): both detectors'
//!   change points are first thinned by
//!   [`segment::enforce_min_points`], which merges a short range into the
//!   range before it (into the next one if it is the first range).
//! - A range that still cannot be fitted with a line (one distinct size,
//!   only possible for sweeps of fewer than 3 sizes) gets its weighted mean
//!   and slope 0.
//!
//! Layout: `points` (raw samples → per-size points), `lines` (the robust
//! gap line and the constrained overhead lines), `ranges` (one parameter
//! set per range, EEL and L), `rendezvous` (the LogGPS threshold S),
//! `merge` (changes no protocol made are merged away), `bootstrap` (95 %
//! intervals); this module runs the segmentation and the whole fit.

mod bootstrap;
mod lines;
mod merge;
mod points;
mod ranges;
mod rendezvous;

pub use bootstrap::range_values;
pub use bootstrap::{ci95_loggp, ci95_loggp_with, FIRST_RANGE_KEYS, RANGE_KEYS};
pub(crate) use lines::{line_or_mean, non_negative, rel_weights};
pub use points::size_points;
pub use rendezvous::{
    rendezvous_threshold, RENDEZVOUS_LEFT_SPAN, RENDEZVOUS_PERSIST, RENDEZVOUS_STEP_EEL,
};

use merge::{merge_insignificant, merge_narrow};
use ranges::{eel_and_L, fit_ranges};
use rendezvous::rendezvous_index;

use super::segment;
use super::{LinkTraits, LogGpFit, Segmenter, SizePoint, SizeSamples};

/// Look-ahead x of the paper's detector.
pub const LOOKAHEAD_X: usize = 3;
/// pfact of the paper's detector.
pub const PFACT: f64 = 2.0;
/// Fewest points of a fitted range (and of an optimal-DP segment).
pub const MIN_RANGE_POINTS: usize = 3;

fn x_of(size_bytes: u64) -> f64 {
    size_bytes as f64 - 1.0
}

/// The protocol changes with a change at `at` (the rendezvous) added:
/// changes closer to it than [`MIN_RANGE_POINTS`] points are dropped so the
/// ranges on both sides keep enough points.
fn with_change_at(changes: &[usize], at: usize) -> Vec<usize> {
    let mut out: Vec<usize> = changes
        .iter()
        .copied()
        .filter(|&c| c + MIN_RANGE_POINTS <= at || c >= at + MIN_RANGE_POINTS)
        .collect();
    out.push(at);
    out.sort_unstable();
    out
}

/// The protocol ranges of a sweep: both detectors' raw change points, the
/// segmenter whose (thinned, merged) changes were used, those changes with
/// the rendezvous boundary added, and that boundary.
struct Segmentation {
    lookahead: Vec<usize>,
    optimal: Vec<usize>,
    segmenter: Segmenter,
    changes: Vec<usize>,
    rendezvous: Option<usize>,
}

/// Both detectors on the gaps, thinned to ≥ MIN_RANGE_POINTS per range, the
/// better one, its insignificant changes merged; then the rendezvous
/// boundary, which starts a range whether or not the gap alone split there.
/// A transport without a rendezvous protocol (`rendezvous` false: UDP,
/// raw Ethernet, RDMA write) has no S, and a step that looks like one
/// (a busy host slowing both the gap and the round trip from some size
/// on) is only what the gap's segmentation makes of it.
fn segment_points(points: &[SizePoint], rendezvous: bool) -> Segmentation {
    let xs: Vec<f64> = points.iter().map(|p| x_of(p.size_bytes)).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.gap_ns).collect();
    let n = points.len();
    let lookahead = segment::lookahead(&xs, &ys, LOOKAHEAD_X, PFACT);
    let optimal = segment::optimal_bic(&xs, &ys, MIN_RANGE_POINTS);
    let la_ok = segment::enforce_min_points(&lookahead, n, MIN_RANGE_POINTS);
    let opt_ok = segment::enforce_min_points(&optimal, n, MIN_RANGE_POINTS);
    let (segmenter, chosen) = segment::choose(&xs, &ys, &la_ok, &opt_ok);
    let merged = merge_insignificant(points, &chosen);
    let rendezvous = if rendezvous {
        rendezvous_index(points)
    } else {
        None
    };
    let changes = match rendezvous {
        Some(at) => with_change_at(&merged, at),
        None => merged,
    };
    let changes = merge_narrow(points, &changes, rendezvous);
    Segmentation {
        lookahead,
        optimal,
        segmenter,
        changes,
        rendezvous,
    }
}

/// The LogGP(S) fit of one sweep. See the module doc for the choices.
/// EEL = PRTT(1,0,s_min)/2 at the smallest sampled size (the caller samples
/// s = 1); L = EEL − o_s(s_min) − o_r(s_min) of the first range, flagged when
/// negative (Bell et al.: o and L overlap on modern NICs). An empty or
/// unusable sweep gives the default (no ranges, NaN EEL/L).
pub fn fit_loggp(samples: &[SizeSamples]) -> LogGpFit {
    fit_points(size_points(samples))
}

/// [`fit_loggp`] for a transport with `traits` (no S where it has no
/// rendezvous protocol).
pub fn fit_loggp_with(samples: &[SizeSamples], traits: &LinkTraits) -> LogGpFit {
    fit_points_with(size_points(samples), traits)
}

/// [`fit_loggp`] from the per-size points (sorted by size, as
/// [`size_points`] makes them).
pub fn fit_points(points: Vec<SizePoint>) -> LogGpFit {
    fit_points_with(points, &LinkTraits::default())
}

/// [`fit_points`] for a transport with `traits`.
#[allow(non_snake_case)]
pub fn fit_points_with(points: Vec<SizePoint>, traits: &LinkTraits) -> LogGpFit {
    if points.is_empty() {
        return LogGpFit {
            eel_ns: f64::NAN,
            L_ns: f64::NAN,
            ..LogGpFit::default()
        };
    }
    let seg = segment_points(&points, traits.rendezvous);
    let ranges = fit_ranges(&points, &seg.changes);
    let (eel_ns, L_ns) = eel_and_L(&points, &ranges);
    let to_sizes = |c: &[usize]| c.iter().map(|&i| points[i].size_bytes).collect();
    LogGpFit {
        eel_ns,
        L_ns,
        L_negative: L_ns < 0.0,
        S_bytes: seg.rendezvous.map(|i| points[i - 1].size_bytes),
        segmenter: Some(seg.segmenter),
        changes_lookahead: to_sizes(&seg.lookahead),
        changes_optimal: to_sizes(&seg.optimal),
        ranges,
        points,
    }
}

#[cfg(test)]
mod tests;
