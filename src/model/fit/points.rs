//! Per-size points from raw samples: the medians of PRTT(1,0,s),
//! PRTT(n,0,s), PRTT(n,d,s) and the server's o_r reports, and the 95 %
//! half-widths of the gap and of the half round trip.

use crate::model::stats;
use crate::model::{SizePoint, SizeSamples};

/// Sizes with enough data for a point: n ≥ 2, the three PRTT vectors
/// non-empty, d finite. Sorted by size (stable, so equal sizes keep their
/// order).
pub(super) fn usable(samples: &[SizeSamples]) -> Vec<&SizeSamples> {
    let mut v: Vec<&SizeSamples> = samples
        .iter()
        .filter(|s| {
            s.n >= 2
                && s.d_ns.is_finite()
                && !s.prtt1_ns.is_empty()
                && !s.prttn_ns.is_empty()
                && !s.prttd_ns.is_empty()
        })
        .collect();
    v.sort_by_key(|s| s.size_bytes);
    v
}

/// The point at one size from the four medians (eqs. 6 and 7).
pub(super) fn point(s: &SizeSamples, m1: f64, mn: f64, md: f64, o_r: f64) -> SizePoint {
    let k = f64::from(s.n - 1);
    SizePoint {
        size_bytes: s.size_bytes,
        gap_ns: (mn - m1) / k,
        o_s_ns: (md - m1) / k - s.d_ns,
        o_r_ns: if o_r.is_nan() { 0.0 } else { o_r },
        half_rtt_ns: m1 / 2.0,
        gap_hw_ns: 0.0,
        half_rtt_hw_ns: 0.0,
        n: s.n,
    }
}

/// Half-width of a median's 95 % order-statistic interval.
fn median_hw(xs: &[f64]) -> f64 {
    let (lo, hi) = stats::median_ci95(xs);
    (hi - lo) / 2.0
}

/// Per-size points from medians: gap = (med PRTT(n,0,s) − med PRTT(1,0,s))
/// /(n−1); o_s = (med PRTT(n,d,s) − med PRTT(1,0,s))/(n−1) − d; o_r = median
/// of the server reports (0 if none); half_rtt = med PRTT(1,0,s)/2. Sorted by
/// size. Sizes with n < 2 or an empty PRTT vector are skipped.
pub fn size_points(samples: &[SizeSamples]) -> Vec<SizePoint> {
    usable(samples)
        .into_iter()
        .map(|s| {
            let mut p = point(
                s,
                stats::median(&s.prtt1_ns),
                stats::median(&s.prttn_ns),
                stats::median(&s.prttd_ns),
                stats::median(&s.o_r_ns),
            );
            p.gap_hw_ns = (median_hw(&s.prtt1_ns) + median_hw(&s.prttn_ns)) / f64::from(s.n - 1);
            p.half_rtt_hw_ns = median_hw(&s.prtt1_ns) / 2.0;
            p
        })
        .collect()
}
