//! One LogGP(S) parameter set per protocol range, and EEL and L.

use super::lines::{line_or_mean, non_decreasing, non_negative, rel_weights, robust_rel_line};
use super::x_of;
use crate::model::{Range, SizePoint};

/// One range's parameter set from its points (non-empty).
#[allow(non_snake_case)]
fn fit_range(pts: &[SizePoint]) -> Range {
    let xs: Vec<f64> = pts.iter().map(|p| x_of(p.size_bytes)).collect();
    let gap: Vec<f64> = pts.iter().map(|p| p.gap_ns).collect();
    let o_s: Vec<f64> = pts.iter().map(|p| p.o_s_ns).collect();
    let o_r: Vec<f64> = pts.iter().map(|p| p.o_r_ns).collect();
    let w_gap = rel_weights(gap.iter().copied());
    let w_rtt = rel_weights(pts.iter().map(|p| p.half_rtt_ns));
    let g = non_decreasing(robust_rel_line(&xs, &gap), &gap, &w_gap);
    let os = non_negative(line_or_mean(&xs, &o_s, &w_rtt), &xs, &o_s, &w_rtt);
    let or = non_negative(line_or_mean(&xs, &o_r, &w_rtt), &xs, &o_r, &w_rtt);
    Range {
        from_bytes: pts[0].size_bytes,
        to_bytes: pts[pts.len() - 1].size_bytes,
        g_ns: g.intercept,
        G_ns_per_byte: g.slope,
        o_s_ns: os.intercept,
        o_r_ns: or.intercept,
        O_s_ns_per_byte: os.slope,
        O_r_ns_per_byte: or.slope,
    }
}

/// Ranges for fixed change points (indices into `points`).
pub(super) fn fit_ranges(points: &[SizePoint], changes: &[usize]) -> Vec<Range> {
    let mut bounds = vec![0];
    bounds.extend(
        changes
            .iter()
            .copied()
            .filter(|&c| c > 0 && c < points.len()),
    );
    bounds.push(points.len());
    bounds
        .windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| fit_range(&points[w[0]..w[1]]))
        .collect()
}

/// EEL, L (= EEL − o_s(s_min) − o_r(s_min) of the first range) from the
/// points and the ranges.
#[allow(non_snake_case)]
pub(super) fn eel_and_L(points: &[SizePoint], ranges: &[Range]) -> (f64, f64) {
    let (Some(p0), Some(r0)) = (points.first(), ranges.first()) else {
        return (f64::NAN, f64::NAN);
    };
    let x0 = x_of(p0.size_bytes);
    let eel = p0.half_rtt_ns;
    let o_s = r0.o_s_ns + x0 * r0.O_s_ns_per_byte;
    let o_r = r0.o_r_ns + x0 * r0.O_r_ns_per_byte;
    (eel, eel - o_s - o_r)
}
