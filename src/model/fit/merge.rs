//! Merge steps after segmentation: changes that one line explains within
//! the points' own noise, and ranges narrower than an octave of sizes.

use super::lines::{line_or_mean, rel_weights, wsse};
use super::x_of;
use crate::model::SizePoint;

/// ranges within the points' own noise.
///
/// Both detectors assume Gaussian residuals; heavy-tailed jitter leaves a
/// median now and then far enough out to earn a split that no protocol
/// made (a "range" of a few small sizes with a meaningless G). So, greedily,
/// the pair of adjacent ranges whose merged (relatively weighted) line fits
/// every point of both best is merged, as long as each residual stays within
/// `MERGE_HW_FACTOR` × that point's 95 % half-width, or `MERGE_REL_FLOOR` of
/// its gap when the point is known more precisely than that.
pub(super) fn merge_insignificant(points: &[SizePoint], changes: &[usize]) -> Vec<usize> {
    let mut bounds: Vec<usize> = changes.to_vec();
    loop {
        let mut starts = vec![0];
        starts.extend(&bounds);
        starts.push(points.len());
        let mut best: Option<(usize, f64)> = None;
        for k in 0..bounds.len() {
            let pts = &points[starts[k]..starts[k + 2]];
            let xs: Vec<f64> = pts.iter().map(|p| x_of(p.size_bytes)).collect();
            let ys: Vec<f64> = pts.iter().map(|p| p.gap_ns).collect();
            let ws = rel_weights(ys.iter().copied());
            let line = line_or_mean(&xs, &ys, &ws);
            let worst = pts
                .iter()
                .zip(&xs)
                .map(|(p, &x)| {
                    // Too few repetitions for an interval: only the floor.
                    let hw = if p.gap_hw_ns.is_finite() {
                        p.gap_hw_ns
                    } else {
                        0.0
                    };
                    let allowed = (MERGE_HW_FACTOR * hw).max(MERGE_REL_FLOOR * p.gap_ns.abs());
                    (line.at(x) - p.gap_ns).abs() / allowed
                })
                .fold(0.0_f64, f64::max);
            if worst <= 1.0 && best.is_none_or(|(_, w)| worst < w) {
                best = Some((k, worst));
            }
        }
        match best {
            Some((k, _)) => {
                bounds.remove(k);
            }
            None => return bounds,
        }
    }
}

/// Ranges spanning less than [`MIN_RANGE_SPAN`] (largest size / smallest)
/// are merged into a neighbour: whichever's (relatively weighted) SSE grows
/// less by it, never across the rendezvous boundary `keep`.
///
/// The initial grid has two sizes per octave, so a range of at least
/// [`MIN_RANGE_POINTS`] grid sizes spans an octave; a narrower one is made
/// of the sizes a bisection placed around a change, i.e. the transition
/// itself, and its slope is noise multiplied by 1/(its width). Kept, such a
/// range hands every size in it a G that means nothing, and T(s) = EEL +
/// (s−1)·G multiplies that by s (a small message priced at a multiple of
/// its time; cases in bench/mpi.md, "narrow ranges"); behind a shaper, such
/// a range cuts the bandwidth-bound range short.
pub(super) fn merge_narrow(
    points: &[SizePoint],
    changes: &[usize],
    keep: Option<usize>,
) -> Vec<usize> {
    let mut c = changes.to_vec();
    let wsse_of = |a: usize, b: usize| {
        let pts = &points[a..b];
        let xs: Vec<f64> = pts.iter().map(|p| x_of(p.size_bytes)).collect();
        let ys: Vec<f64> = pts.iter().map(|p| p.gap_ns).collect();
        let ws = rel_weights(ys.iter().copied());
        let line = line_or_mean(&xs, &ys, &ws);
        wsse(&xs, &ys, &ws, line.intercept, line.slope)
    };
    loop {
        let mut bounds = vec![0];
        bounds.extend(&c);
        bounds.push(points.len());
        let narrow = (0..bounds.len() - 1).find(|&r| {
            let (a, b) = (bounds[r], bounds[r + 1]);
            let (lo, hi) = (points[a].size_bytes, points[b - 1].size_bytes);
            (hi as f64) < MIN_RANGE_SPAN * lo as f64
                && (r > 0 && Some(a) != keep || r + 2 < bounds.len() && Some(b) != keep)
        });
        let Some(r) = narrow else {
            return c;
        };
        let (a, b) = (bounds[r], bounds[r + 1]);
        // Merging into the left range removes the change at a (= c[r−1]),
        // into the right one the change at b (= c[r]).
        let left = (r > 0 && Some(a) != keep)
            .then(|| wsse_of(bounds[r - 1], b) - wsse_of(bounds[r - 1], a));
        let right = (r + 2 < bounds.len() && Some(b) != keep)
            .then(|| wsse_of(a, bounds[r + 2]) - wsse_of(b, bounds[r + 2]));
        match (left, right) {
            (Some(l), Some(rt)) if rt < l => c.remove(r),
            (Some(_), _) => c.remove(r - 1),
            (None, Some(_)) => c.remove(r),
            (None, None) => return c,
        };
    }
}

/// Narrowest range kept by [`merge_narrow`]: an octave of sizes.
const MIN_RANGE_SPAN: f64 = 2.0;

/// See [`merge_insignificant`].
const MERGE_HW_FACTOR: f64 = 2.5;
const MERGE_REL_FLOOR: f64 = 0.005;
