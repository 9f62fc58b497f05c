//! The lines of a range: relative weights, the robust gap line (Tukey's
//! biweight from Theil–Sen), and the constrained lines (G ≥ 0; o' ≥ 0 and
//! O ≥ 0).

use super::MIN_RANGE_POINTS;
use crate::model::lsq::{self, fit_line_weighted, Line};
use crate::model::stats;

/// Weights 1/v² with a floor of 10⁻⁶ of the largest |v| (never 1/0).
pub(crate) fn rel_weights(vs: impl Iterator<Item = f64> + Clone) -> Vec<f64> {
    let scale = vs.clone().fold(0.0_f64, |m, v| m.max(v.abs()));
    let floor = (1e-6 * scale).max(1e-300);
    vs.map(|v| 1.0 / v.abs().max(floor).powi(2)).collect()
}

/// Scale floor of [`robust_rel_line`]'s relative residuals: below half a
/// percent, a median's deviation from its range's line is noise.
const ROBUST_REL_FLOOR: f64 = 0.005;
/// Tukey's biweight constant (95 % efficiency on Gaussian residuals).
const BIWEIGHT_C: f64 = 4.685;

/// The relatively weighted line of `ys` against `xs`, made robust with
/// Tukey's biweight on the relative residuals (y − line)/y, scaled by their
/// MAD, floored at [`ROBUST_REL_FLOOR`]: iteratively reweighted least
/// squares, started from the Theil–Sen line.
///
/// A range's medians are not all of one mode: behind a token-bucket shaper
/// the sizes around a message's share of the bucket find it full in some
/// rounds and empty in others, and their medians land at either of two
/// levels a factor of about three apart. Least squares lets the few that
/// fall into a range with the bandwidth-bound sizes tilt its line, and so
/// does Huber's estimate, whose weights only fall as 1/residual; the
/// biweight gives a median more than ~5 MADs off the line no weight. It
/// starts from Theil–Sen, not from least squares: relative weights let the
/// low medians pull the least-squares line through themselves (to a
/// negative intercept), and from there most bandwidth-bound sizes look like
/// the outliers. On data that fits the line exactly it is the least-squares
/// line. The shaper's figures are in bench/shaper.md.
pub(super) fn robust_rel_line(xs: &[f64], ys: &[f64]) -> Line {
    let base = rel_weights(ys.iter().copied());
    let mut line = lsq::theil_sen(xs, ys).unwrap_or_else(|| line_or_mean(xs, ys, &base));
    let n = ys.len();
    let (mut rel, mut kx, mut ky, mut kw) = (
        vec![0.0; n],
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for _ in 0..50 {
        for ((r, &x), &y) in rel.iter_mut().zip(xs).zip(ys) {
            *r = ((y - line.at(x)) / y.abs().max(f64::MIN_POSITIVE)).abs();
        }
        let cut = BIWEIGHT_C * (stats::median(&rel) / 0.6745).max(ROBUST_REL_FLOOR);
        kx.clear();
        ky.clear();
        kw.clear();
        for i in 0..n {
            if rel[i] < cut {
                kx.push(xs[i]);
                ky.push(ys[i]);
                kw.push(base[i] * (1.0 - (rel[i] / cut).powi(2)).powi(2));
            }
        }
        // At least half the points are kept (they are within one MAD);
        // fewer than a range's minimum leaves nothing to weigh them with.
        if kx.len() < MIN_RANGE_POINTS {
            break;
        }
        let next = line_or_mean(&kx, &ky, &kw);
        let settled = (next.intercept - line.intercept).abs()
            <= 1e-9 * line.intercept.abs().max(1.0)
            && (next.slope - line.slope).abs() <= 1e-9 * line.slope.abs().max(1e-12);
        line = next;
        if settled {
            break;
        }
    }
    // Every point's SSE under the plain relative weights, so the line
    // compares with least-squares ones.
    line.sse = wsse(xs, ys, &base, line.intercept, line.slope);
    line.n = n;
    line
}

/// Weighted line, or the weighted mean with slope 0 when no line fits.
pub(crate) fn line_or_mean(xs: &[f64], ys: &[f64], ws: &[f64]) -> Line {
    fit_line_weighted(xs, ys, ws).unwrap_or_else(|| {
        let sw: f64 = ws.iter().sum();
        let mean = if sw > 0.0 {
            ys.iter().zip(ws).map(|(y, w)| y * w).sum::<f64>() / sw
        } else {
            f64::NAN
        };
        Line {
            intercept: mean,
            slope: 0.0,
            sse: 0.0,
            n: ys.len(),
        }
    })
}

/// Sum of weighted squared residuals of `intercept + slope·x`.
pub(super) fn wsse(xs: &[f64], ys: &[f64], ws: &[f64], intercept: f64, slope: f64) -> f64 {
    xs.iter()
        .zip(ys)
        .zip(ws)
        .map(|((x, y), w)| w * (y - intercept - slope * x).powi(2))
        .sum()
}

/// Time per message cannot fall as messages grow: a negative fitted G (noise
/// in a short or flat range) is replaced by the best constant, G = 0. The
/// intercept g stays free: a range's gap line may legitimately run below
/// zero at s = 1 (a token-bucket shaper: the bucket's bytes are free, the
/// rest is paced, gap(s) = (s − bucket)·G).
pub(super) fn non_decreasing(line: Line, ys: &[f64], ws: &[f64]) -> Line {
    if line.slope >= 0.0 {
        return line;
    }
    let sw: f64 = ws.iter().sum();
    let mean = ys.iter().zip(ws).map(|(y, w)| y * w).sum::<f64>() / sw;
    Line {
        intercept: mean,
        slope: 0.0,
        sse: ys.iter().zip(ws).map(|(y, w)| w * (y - mean).powi(2)).sum(),
        n: ys.len(),
    }
}

/// Overhead lines: least squares restricted to a non-negative intercept and
/// slope.
///
/// An overhead is CPU time spent per message: o' (its value at s = 1) and O
/// (ns per byte) cannot be negative. A negative o' comes from the
/// extrapolation, not from the machine: a range that starts far from s = 1
/// (a rendezvous range from 2 MiB on, say) fixes its slope from its own
/// points, and its intercept is then the line run back to s = 1, where slope
/// noise of a few percent becomes a large negative o'. With a steep noisy O
/// the line can even go below zero inside the range. So the fit is the
/// weighted least-squares line over
/// the quadrant intercept ≥ 0, slope ≥ 0: the free line when it lies in
/// it, else the better of the two boundary fits, which is where a convex
/// quadratic's minimum over the quadrant lies when the free minimum is
/// outside. The two boundary fits are through the origin (intercept 0,
/// slope Σwxy/Σwx²) and constant (slope 0, the weighted mean). On data that
/// satisfy the model nothing changes.
pub(crate) fn non_negative(line: Line, xs: &[f64], ys: &[f64], ws: &[f64]) -> Line {
    if line.slope >= 0.0 && line.intercept >= 0.0 {
        return line;
    }
    let sw: f64 = ws.iter().sum();
    let mean = (ys.iter().zip(ws).map(|(y, w)| y * w).sum::<f64>() / sw).max(0.0);
    let sxx: f64 = xs.iter().zip(ws).map(|(x, w)| w * x * x).sum();
    let sxy: f64 = xs.iter().zip(ys).zip(ws).map(|((x, y), w)| w * x * y).sum();
    let through_origin = if sxx > 0.0 { (sxy / sxx).max(0.0) } else { 0.0 };
    let flat = (mean, 0.0, wsse(xs, ys, ws, mean, 0.0));
    let origin = (0.0, through_origin, wsse(xs, ys, ws, 0.0, through_origin));
    let (intercept, slope, sse) = if origin.2 < flat.2 { origin } else { flat };
    Line {
        intercept,
        slope,
        sse,
        n: ys.len(),
    }
}
