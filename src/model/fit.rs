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

use std::collections::BTreeMap;

use super::lsq::{self, fit_line_weighted, Line};
use super::segment;
use super::stats::{self, Rng};
use super::{Interval, LogGpFit, Range, Segmenter, SizePoint, SizeSamples};

/// Look-ahead x of the paper's detector.
pub const LOOKAHEAD_X: usize = 3;
/// pfact of the paper's detector.
pub const PFACT: f64 = 2.0;
/// Fewest points of a fitted range (and of an optimal-DP segment).
pub const MIN_RANGE_POINTS: usize = 3;
/// A rendezvous is a step of at least this many EEL in the gap and in the
/// single message's half round trip (the handshake costs a small-message
/// round trip, ≈ 2L + 4o = 2·EEL, on a single message; a quarter of that
/// leaves room for overlap with the transfer and for noise).
pub const RENDEZVOUS_STEP_EEL: f64 = 0.5;
/// ... over this many consecutive sizes from the first one above S.
pub const RENDEZVOUS_PERSIST: usize = 3;
/// The line below a candidate S reaches down to 1/this of the size below it.
pub const RENDEZVOUS_LEFT_SPAN: f64 = 8.0;

fn x_of(size_bytes: u64) -> f64 {
    size_bytes as f64 - 1.0
}

/// Sizes with enough data for a point: n ≥ 2, the three PRTT vectors
/// non-empty, d finite. Sorted by size (stable, so equal sizes keep their
/// order).
fn usable(samples: &[SizeSamples]) -> Vec<&SizeSamples> {
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
fn point(s: &SizeSamples, m1: f64, mn: f64, md: f64, o_r: f64) -> SizePoint {
    let k = f64::from(s.n - 1);
    SizePoint {
        size_bytes: s.size_bytes,
        gap_ns: (mn - m1) / k,
        o_s_ns: (md - m1) / k - s.d_ns,
        o_r_ns: if o_r.is_nan() { 0.0 } else { o_r },
        half_rtt_ns: m1 / 2.0,
        gap_hw_ns: 0.0,
        half_rtt_hw_ns: 0.0,
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
/// rounds and empty in others, and their medians land at either (5.6 µs or
/// 16 µs at 800 B behind 400 Mbit/s with a 16 KiB bucket). Least squares
/// lets the few that fall into a range with the bandwidth-bound sizes tilt
/// its line (G 22.3 against 20.2 ns/B, 1 MiB predicted 11 % slow), and so
/// does Huber's estimate, whose weights only fall as 1/residual; the
/// biweight gives a median more than ~5 MADs off the line no weight. It
/// starts from Theil–Sen, not from least squares: relative weights let the
/// low medians pull the least-squares line through themselves (intercept
/// −12 µs), and from there most bandwidth-bound sizes look like the
/// outliers. On data that fits the line exactly it is the least-squares
/// line.
pub(crate) fn robust_rel_line(xs: &[f64], ys: &[f64]) -> Line {
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
fn wsse(xs: &[f64], ys: &[f64], ws: &[f64], intercept: f64, slope: f64) -> f64 {
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
fn non_decreasing(line: Line, ys: &[f64], ws: &[f64]) -> Line {
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
/// noise of a few percent becomes −100 µs. With a steep noisy O the
/// line can even go below zero inside the range (o' = −27 µs, O = 3.2 ns/B
/// gave o_s(4096) < 0). So the fit is the weighted least-squares line over
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
fn fit_ranges(points: &[SizePoint], changes: &[usize]) -> Vec<Range> {
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
fn eel_and_L(points: &[SizePoint], ranges: &[Range]) -> (f64, f64) {
    let (Some(p0), Some(r0)) = (points.first(), ranges.first()) else {
        return (f64::NAN, f64::NAN);
    };
    let x0 = x_of(p0.size_bytes);
    let eel = p0.half_rtt_ns;
    let o_s = r0.o_s_ns + x0 * r0.O_s_ns_per_byte;
    let o_r = r0.o_r_ns + x0 * r0.O_r_ns_per_byte;
    (eel, eel - o_s - o_r)
}

/// Where a rendezvous protocol starts: the index of the first point above S
/// (S is the size of the point before it), or None.
///
/// A rendezvous adds a handshake, a small-message round trip, to every
/// message above S, the single message included. So at S, and only there:
/// - the first size above S is slower than the line of the sizes below it
///   extrapolated, by at least [`RENDEZVOUS_STEP_EEL`]·EEL, both in the gap
///   and in the single message's half round trip, and so are the next
///   [`RENDEZVOUS_PERSIST`] − 1 sizes (one late median is interference, not a
///   protocol), while the last size below S is still on that line (both
///   step between the same two sizes: on Soft-RoCE the RDMA write's gap
///   steps at 3796 B and its single message only at 4096 B, a device
///   effect, not a handshake);
/// - both steps exceed the larger 95 % half-width of the two medians they
///   separate (large messages on a busy host jitter by more than an EEL;
///   skipped where the repetitions are too few for an interval);
/// - the cost added is a constant, not a per-byte one: the lines of both
///   sides taken at s = 1 differ by that much too, for the gap and for the
///   single message. A bandwidth change, even an abrupt one, leaves that
///   intercept in place; a token-bucket shaper changes the gap of a burst
///   but not a single message.
///
/// The lines are Theil–Sen (robust to the odd late median): the left one
/// over the sizes below the boundary down to an eighth of the last one
/// ([`RENDEZVOUS_LEFT_SPAN`], at least 3 points: wide enough that its slope,
/// and so its value at s = 1, is not at the mercy of a few dense bisection
/// sizes), the right one over every size above. The first boundary that
/// passes every test is S.
fn rendezvous_index(points: &[SizePoint]) -> Option<usize> {
    let n = points.len();
    let eel = points.first()?.half_rtt_ns;
    let step = RENDEZVOUS_STEP_EEL * eel;
    if !(step.is_finite() && step > 0.0) {
        return None;
    }
    let xs: Vec<f64> = points.iter().map(|p| x_of(p.size_bytes)).collect();
    let gap: Vec<f64> = points.iter().map(|p| p.gap_ns).collect();
    let half: Vec<f64> = points.iter().map(|p| p.half_rtt_ns).collect();
    // Too few repetitions for an interval: the step tests alone.
    let finite = |hw: f64| if hw.is_finite() { hw } else { 0.0 };
    let hw_gap = |i: usize| finite(points[i].gap_hw_ns);
    let hw_half = |i: usize| finite(points[i].half_rtt_hw_ns);
    (3..n.saturating_sub(RENDEZVOUS_PERSIST - 1)).find(|&i| {
        let mut lo = i - 1;
        while lo > 0 && (i - lo < 3 || xs[lo - 1] * RENDEZVOUS_LEFT_SPAN >= xs[i - 1]) {
            lo -= 1;
        }
        let sides = |ys: &[f64]| {
            Some((
                lsq::theil_sen(&xs[lo..i], &ys[lo..i])?,
                lsq::theil_sen(&xs[i..], &ys[i..])?,
            ))
        };
        let (Some((lg, rg)), Some((lh, rh))) = (sides(&gap), sides(&half)) else {
            return false;
        };
        let persists = (i..i + RENDEZVOUS_PERSIST)
            .all(|j| gap[j] - lg.at(xs[j]) >= step && half[j] - lh.at(xs[j]) >= step);
        let a = i - 1;
        let sharp = gap[a] - lg.at(xs[a]) < step && half[a] - lh.at(xs[a]) < step;
        let significant = gap[i] - lg.at(xs[i]) >= hw_gap(i - 1).max(hw_gap(i))
            && half[i] - lh.at(xs[i]) >= hw_half(i - 1).max(hw_half(i));
        let constant = rg.intercept - lg.intercept >= step && rh.intercept - lh.intercept >= step;
        sharp && persists && significant && constant
    })
}

/// LogGPS S of measured points (see [`rendezvous_index`]): the largest
/// eager size, or None when no size pays a rendezvous handshake.
pub fn rendezvous_threshold(points: &[SizePoint]) -> Option<u64> {
    rendezvous_index(points).map(|i| points[i - 1].size_bytes)
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
fn segment_points(points: &[SizePoint]) -> Segmentation {
    let xs: Vec<f64> = points.iter().map(|p| x_of(p.size_bytes)).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.gap_ns).collect();
    let n = points.len();
    let lookahead = segment::lookahead(&xs, &ys, LOOKAHEAD_X, PFACT);
    let optimal = segment::optimal_bic(&xs, &ys, MIN_RANGE_POINTS);
    let la_ok = segment::enforce_min_points(&lookahead, n, MIN_RANGE_POINTS);
    let opt_ok = segment::enforce_min_points(&optimal, n, MIN_RANGE_POINTS);
    let (segmenter, chosen) = segment::choose(&xs, &ys, &la_ok, &opt_ok);
    let merged = merge_insignificant(points, &chosen);
    let rendezvous = rendezvous_index(points);
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

/// A change is kept only where one line cannot explain both neighbouring
/// ranges within the points' own noise.
///
/// Both detectors assume Gaussian residuals; heavy-tailed jitter leaves a
/// median now and then far enough out to earn a split that no protocol
/// made (a "range" of a few small sizes with a meaningless G). So, greedily,
/// the pair of adjacent ranges whose merged (relatively weighted) line fits
/// every point of both best is merged, as long as each residual stays within
/// `MERGE_HW_FACTOR` × that point's 95 % half-width, or `MERGE_REL_FLOOR` of
/// its gap when the point is known more precisely than that.
fn merge_insignificant(points: &[SizePoint], changes: &[usize]) -> Vec<usize> {
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
/// (s−1)·G multiplies that by s: an MPI probe had a range 61–64 B with
/// G = 50 ns/B (the 64 B message predicted at twice its time), another
/// 3636–3796 B with G = 2.4 ns/B (×4); the shaper test a range 16387–19777 B
/// that cut the bandwidth-bound range short.
fn merge_narrow(points: &[SizePoint], changes: &[usize], keep: Option<usize>) -> Vec<usize> {
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

/// The LogGP(S) fit of one sweep. See the module doc for the choices.
/// EEL = PRTT(1,0,s_min)/2 at the smallest sampled size (the caller samples
/// s = 1); L = EEL − o_s(s_min) − o_r(s_min) of the first range, flagged when
/// negative (Bell et al.: o and L overlap on modern NICs). An empty or
/// unusable sweep gives the default (no ranges, NaN EEL/L).
pub fn fit_loggp(samples: &[SizeSamples]) -> LogGpFit {
    fit_points(size_points(samples))
}

/// [`fit_loggp`] from the per-size points (sorted by size, as
/// [`size_points`] makes them).
#[allow(non_snake_case)]
pub fn fit_points(points: Vec<SizePoint>) -> LogGpFit {
    if points.is_empty() {
        return LogGpFit {
            eel_ns: f64::NAN,
            L_ns: f64::NAN,
            ..LogGpFit::default()
        };
    }
    let seg = segment_points(&points);
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

fn param_keys(n_ranges: usize) -> Vec<String> {
    let mut k: Vec<String> = [
        "eel_ns",
        "L_ns",
        "o_s_ns",
        "o_r_ns",
        "g_ns",
        "G_ns_per_byte",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..n_ranges {
        for f in [
            "g_ns",
            "G_ns_per_byte",
            "o_s_ns",
            "o_r_ns",
            "O_s_ns_per_byte",
            "O_r_ns_per_byte",
        ] {
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
        out.extend([
            r.g_ns,
            r.G_ns_per_byte,
            r.o_s_ns,
            r.o_r_ns,
            r.O_s_ns_per_byte,
            r.O_r_ns_per_byte,
        ]);
    }
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
    let mut out = BTreeMap::new();
    let sizes = usable(samples);
    if resamples == 0 || sizes.is_empty() {
        return out;
    }
    let points = size_points(samples);
    let changes = segment_points(&points).changes;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stats::{seeded_rng, standard_normal};

    /// Ground truth: LogGP with o_s = o_r = o and per-range (first size, g, G).
    struct Truth {
        l_ns: f64,
        o_ns: f64,
        ranges: Vec<(u64, f64, f64)>,
        n: u32,
        /// Sizes from here on pay a rendezvous handshake (2L + 4o) per
        /// message, a single one too (both the request and the answer).
        handshake_from: Option<u64>,
    }

    /// Paper Table 2, Open MPI/openib (µs → ns).
    fn openib() -> Truth {
        Truth {
            l_ns: 5960.0,
            o_ns: 4720.0,
            ranges: vec![(1, 5140.0, 0.73), (12289, 21390.0, 1.03)],
            n: 16,
            handshake_from: Some(12289),
        }
    }

    /// Geometric grid 1..=1 MiB, two sizes per octave from 4 on, plus the
    /// protocol boundary 12288/12289.
    fn sizes() -> Vec<u64> {
        let mut s = vec![1, 2];
        for k in 2..=20 {
            s.push(1 << k);
            if k < 20 {
                s.push(3 << (k - 1));
            }
        }
        s.extend([12288, 12289]);
        s.sort_unstable();
        s.dedup();
        s
    }

    /// PRTT samples from the LogGP equations (1), (2), (5) with d = PRTT(1,0,s)
    /// and median-one multiplicative log-normal noise of `sigma`.
    fn generate(t: &Truth, reps: usize, sigma: f64, seed: u64) -> Vec<SizeSamples> {
        let mut rng = seeded_rng(seed);
        let noisy = |v: f64, rng: &mut Rng| v * (sigma * standard_normal(rng)).exp();
        sizes()
            .into_iter()
            .map(|s| {
                let &(_, g, big_g) = t.ranges.iter().rev().find(|r| r.0 <= s).unwrap();
                let x = (s - 1) as f64;
                let g_all = g + x * big_g;
                let handshake = match t.handshake_from {
                    Some(from) if s >= from => 2.0 * (2.0 * t.l_ns + 4.0 * t.o_ns),
                    _ => 0.0,
                };
                let prtt1 = 2.0 * (t.l_ns + 2.0 * t.o_ns + x * big_g) + handshake;
                let d = prtt1;
                let k = f64::from(t.n - 1);
                let prttn = prtt1 + k * g_all;
                let prttd = prtt1 + k * (t.o_ns + d).max(g_all);
                SizeSamples {
                    size_bytes: s,
                    n: t.n,
                    d_ns: d,
                    prtt1_ns: (0..reps).map(|_| noisy(prtt1, &mut rng)).collect(),
                    prttn_ns: (0..reps).map(|_| noisy(prttn, &mut rng)).collect(),
                    prttd_ns: (0..reps).map(|_| noisy(prttd, &mut rng)).collect(),
                    o_r_ns: (0..reps).map(|_| noisy(t.o_ns, &mut rng)).collect(),
                }
            })
            .collect()
    }

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn a_minority_of_bucket_medians_does_not_tilt_the_gap_line() {
        // The shape of a 400 Mbit/s token bucket's sweep: from 2 KiB on, the
        // gap is 20.2 ns/B plus a small constant; around 0.8–1.4 KiB the
        // medians land in either mode (bucket full: ~5.5 µs; empty: on the
        // line). Sizes as the sweep's bisection places them.
        let on_line = |s: f64| 1500.0 + 20.2 * (s - 1.0);
        let mut sizes = vec![799.0, 836.0, 855.0, 864.0, 869.0, 871.0, 1024.0, 1448.0];
        let low = [true, true, true, false, true, true, true, false];
        let mut ys: Vec<f64> = sizes
            .iter()
            .zip(low)
            .map(|(&s, l)| if l { 5500.0 } else { on_line(s) })
            .collect();
        let mut s = 2048.0;
        while s <= 1048576.0 {
            sizes.push(s);
            ys.push(on_line(s) * if sizes.len() % 2 == 0 { 1.004 } else { 0.996 });
            s *= std::f64::consts::SQRT_2;
        }
        let xs: Vec<f64> = sizes.iter().map(|s| s - 1.0).collect();
        let ws = rel_weights(ys.iter().copied());
        let ls = line_or_mean(&xs, &ys, &ws);
        let robust = robust_rel_line(&xs, &ys);
        // Least squares is pulled off by more than 3 %; the biweight stays within
        // 1 % of the slope and of the 1 MiB gap.
        assert!((ls.slope / 20.2 - 1.0).abs() > 0.03, "{ls:?}");
        assert!((robust.slope / 20.2 - 1.0).abs() < 0.01, "{robust:?}");
        let x = 1048575.0;
        assert!((robust.at(x) / on_line(1048576.0) - 1.0).abs() < 0.01);
        // Medians that all fit within the noise floor: exactly least squares.
        let ys: Vec<f64> = xs.iter().map(|&x| on_line(x + 1.0)).collect();
        let ws = rel_weights(ys.iter().copied());
        let (a, b) = (line_or_mean(&xs, &ys, &ws), robust_rel_line(&xs, &ys));
        assert_eq!((a.intercept, a.slope), (b.intercept, b.slope));
    }

    #[test]
    fn fitted_times_are_never_negative() {
        // A range far from s = 1 whose points rise faster than proportionally:
        // the free line has a large negative intercept (o' < 0).
        let xs = [2.0e6, 3.0e6, 4.0e6];
        let ys = [250e3, 430e3, 810e3];
        let ws = rel_weights(ys.iter().copied());
        let free = line_or_mean(&xs, &ys, &ws);
        assert!(free.intercept < -100e3, "{free:?}");
        let c = non_negative(free, &xs, &ys, &ws);
        assert!(c.intercept >= 0.0 && c.slope >= 0.0, "{c:?}");
        // The constrained line is the best non-negative one: no grid point of
        // the quadrant does better.
        let best = wsse(&xs, &ys, &ws, c.intercept, c.slope);
        for i in 0..=40 {
            for j in 0..=40 {
                let (a, b) = (f64::from(i) * 10e3, f64::from(j) * 0.01);
                assert!(wsse(&xs, &ys, &ws, a, b) >= best * (1.0 - 1e-9), "{a} {b}");
            }
        }
        // A falling line (negative slope) becomes the weighted mean.
        let ys = [5.0, 4.0, 3.0];
        let ws = [1.0, 1.0, 1.0];
        let c = non_negative(line_or_mean(&xs, &ys, &ws), &xs, &ys, &ws);
        assert_eq!((c.intercept, c.slope), (4.0, 0.0));
        // A line that already fits the model is untouched.
        let ys = [
            2.0e6 * 0.5 + 100.0,
            3.0e6 * 0.5 + 100.0,
            4.0e6 * 0.5 + 100.0,
        ];
        let free = line_or_mean(&xs, &ys, &ws);
        let c = non_negative(free, &xs, &ys, &ws);
        assert_eq!((c.intercept, c.slope), (free.intercept, free.slope));
    }

    #[test]
    fn points_from_medians() {
        let s = SizeSamples {
            size_bytes: 64,
            n: 3,
            d_ns: 100.0,
            prtt1_ns: vec![10.0, 1000.0, 12.0, 11.0, 9.0],
            prttn_ns: vec![30.0, 31.0, 29.0],
            prttd_ns: vec![240.0, 250.0, 260.0],
            o_r_ns: vec![],
        };
        let p = size_points(std::slice::from_ref(&s));
        assert_eq!(p.len(), 1);
        // median PRTT1 = 11 (the outlier 1000 does not matter)
        assert!((p[0].half_rtt_ns - 5.5).abs() < 1e-12);
        assert!((p[0].gap_ns - 9.5).abs() < 1e-12); // (30 − 11)/2
        assert!((p[0].o_s_ns - 19.5).abs() < 1e-12); // (250−11)/2 − 100
        assert_eq!(p[0].o_r_ns, 0.0);
        // unusable sizes are skipped, order is by size
        let mut a = s.clone();
        a.size_bytes = 8;
        let mut bad = s.clone();
        bad.prttn_ns.clear();
        let p = size_points(&[s, bad, a]);
        assert_eq!(
            p.iter().map(|p| p.size_bytes).collect::<Vec<_>>(),
            vec![8, 64]
        );
    }

    #[test]
    fn exact_openib_recovered() {
        let t = openib();
        let fit = fit_loggp(&generate(&t, 5, 0.0, 1));
        assert_eq!(fit.changes_lookahead, vec![12289]);
        assert_eq!(fit.changes_optimal, vec![12289]);
        assert_eq!(fit.ranges.len(), 2);
        for (r, &(from, g, big_g)) in fit.ranges.iter().zip(&t.ranges) {
            assert_eq!(r.from_bytes, from);
            assert!(rel(r.g_ns, g) < 0.01, "{r:?}");
            assert!(rel(r.G_ns_per_byte, big_g) < 0.01, "{r:?}");
            assert!(rel(r.o_s_ns, t.o_ns) < 0.01, "{r:?}");
            assert!(rel(r.o_r_ns, t.o_ns) < 0.01, "{r:?}");
            assert!(r.O_s_ns_per_byte.abs() < 1e-6 && r.O_r_ns_per_byte.abs() < 1e-6);
        }
        assert_eq!(fit.ranges[0].to_bytes, 12288);
        assert_eq!(fit.ranges[1].to_bytes, 1 << 20);
        assert_eq!(fit.S_bytes, Some(12288));
        assert!(rel(fit.eel_ns, t.l_ns + 2.0 * t.o_ns) < 1e-9);
        assert!(rel(fit.L_ns, t.l_ns) < 0.01, "{}", fit.L_ns);
        assert!(!fit.L_negative);
        assert_eq!(fit.segmenter, Some(Segmenter::Lookahead)); // both agree
        assert_eq!(fit.points.len(), sizes().len());
    }

    #[test]
    fn noisy_openib_recovered_without_spurious_changes() {
        let t = openib();
        for seed in 0..10 {
            let fit = fit_loggp(&generate(&t, 30, 0.02, 1000 + seed));
            let froms: Vec<u64> = fit.ranges.iter().map(|r| r.from_bytes).collect();
            assert_eq!(
                froms,
                vec![1, 12289],
                "seed {seed}: {:?}",
                fit.changes_optimal
            );
            assert_eq!(fit.S_bytes, Some(12288), "seed {seed}");
            for (r, &(_, g, big_g)) in fit.ranges.iter().zip(&t.ranges) {
                assert!(rel(r.g_ns, g) < 0.03, "seed {seed}: {r:?}");
                assert!(rel(r.G_ns_per_byte, big_g) < 0.03, "seed {seed}: {r:?}");
            }
            assert!(rel(fit.eel_ns, t.l_ns + 2.0 * t.o_ns) < 0.03);
            assert!(
                rel(fit.ranges[0].o_s_ns, t.o_ns) < 0.05,
                "{:?}",
                fit.ranges[0]
            );
            assert!(rel(fit.L_ns, t.l_ns) < 0.05, "seed {seed}: L {}", fit.L_ns);
        }
    }

    /// Every PRTT sample of `size` scaled by `factor` (a burst of
    /// interference over that size).
    fn slow_down(samples: &mut [SizeSamples], size: u64, factor: f64) {
        let s = samples.iter_mut().find(|s| s.size_bytes == size).unwrap();
        for v in s
            .prtt1_ns
            .iter_mut()
            .chain(&mut s.prttn_ns)
            .chain(&mut s.prttd_ns)
        {
            *v *= factor;
        }
    }

    #[test]
    fn late_medians_on_either_side_do_not_move_s() {
        // One late size in the rendezvous range bends its line (the ranges
        // may split there); one late eager size below S. S stays 12288 and
        // the rendezvous range starts right above it.
        let mut s = generate(&openib(), 30, 0.01, 7);
        slow_down(&mut s, 24576, 1.8);
        slow_down(&mut s, 6144, 1.6);
        let fit = fit_loggp(&s);
        assert_eq!(fit.S_bytes, Some(12288), "{:?}", fit.ranges);
        assert!(
            fit.ranges.iter().any(|r| r.from_bytes == 12289),
            "{:?}",
            fit.ranges
        );
        assert!(
            fit.ranges.iter().any(|r| r.to_bytes == 12288),
            "{:?}",
            fit.ranges
        );
    }

    #[test]
    fn two_late_sizes_right_below_s_are_not_s() {
        // The two sizes just below S slowed by a handshake's worth: the step
        // does not persist over three sizes there, so S stays where it is.
        let mut s = generate(&openib(), 30, 0.01, 8);
        slow_down(&mut s, 6144, 2.0);
        slow_down(&mut s, 8192, 2.0);
        assert_eq!(fit_loggp(&s).S_bytes, Some(12288));
    }

    #[test]
    fn narrow_ranges_merge_but_not_across_s() {
        let sizes = [1u64, 2, 4, 8, 16, 32, 61, 62, 63, 64, 128, 256, 512, 1024];
        let points: Vec<SizePoint> = sizes
            .iter()
            .map(|&s| SizePoint {
                size_bytes: s,
                gap_ns: match s {
                    0..=32 => 400.0,
                    33..=64 => 300.0 + s as f64,
                    _ => 500.0 + 2.0 * s as f64,
                },
                half_rtt_ns: 1000.0,
                ..SizePoint::default()
            })
            .collect();
        // 61–64 B spans less than an octave: merged into one neighbour.
        let merged = merge_narrow(&points, &[6, 10], None);
        assert_eq!(merged.len(), 1, "{merged:?}");
        // Not across a rendezvous boundary at either of its ends.
        assert_eq!(merge_narrow(&points, &[6, 10], Some(6)), vec![6]);
        assert_eq!(merge_narrow(&points, &[6, 10], Some(10)), vec![10]);
        // Wide ranges stay.
        assert_eq!(merge_narrow(&points, &[6], None), vec![6]);
    }

    #[test]
    fn rendezvous_change_replaces_changes_next_to_it() {
        assert_eq!(with_change_at(&[4, 10, 20], 11), vec![4, 11, 20]);
        assert_eq!(with_change_at(&[4, 12, 20], 10), vec![4, 10, 20]);
        assert_eq!(with_change_at(&[8, 13], 10), vec![10, 13]);
        assert_eq!(with_change_at(&[], 5), vec![5]);
        assert_eq!(with_change_at(&[5], 5), vec![5]);
    }

    #[test]
    fn single_protocol_has_no_s() {
        let t = Truth {
            l_ns: 2000.0,
            o_ns: 500.0,
            ranges: vec![(1, 800.0, 0.1)],
            n: 8,
            handshake_from: None,
        };
        let fit = fit_loggp(&generate(&t, 30, 0.01, 5));
        assert_eq!(fit.ranges.len(), 1, "{:?}", fit.changes_optimal);
        assert_eq!(fit.S_bytes, None);
        assert!(rel(fit.ranges[0].g_ns, 800.0) < 0.03);
    }

    #[test]
    fn small_change_is_not_rendezvous() {
        // A bandwidth change (G doubles) with a small g step: a protocol
        // range, but no rendezvous threshold.
        let t = Truth {
            l_ns: 2000.0,
            o_ns: 500.0,
            ranges: vec![(1, 800.0, 0.1), (65537, 1000.0, 0.2)],
            n: 8,
            handshake_from: None,
        };
        let fit = fit_loggp(&generate(&t, 5, 0.0, 5));
        assert_eq!(fit.ranges.len(), 2);
        assert_eq!(fit.ranges[1].from_bytes, 65537 + 32767); // first sampled size above
        assert_eq!(fit.S_bytes, None);
    }

    #[test]
    fn negative_l_is_flagged() {
        // o_s measured larger than EEL allows (overlap of o and L).
        let mut s = generate(&openib(), 5, 0.0, 1);
        for x in &mut s {
            x.o_r_ns.iter_mut().for_each(|v| *v *= 3.0);
        }
        let fit = fit_loggp(&s);
        assert!(fit.L_ns < 0.0 && fit.L_negative);
    }

    #[test]
    fn degenerate_sweeps_do_not_panic() {
        let f = fit_loggp(&[]);
        assert!(f.ranges.is_empty() && f.eel_ns.is_nan());
        let one = generate(&openib(), 3, 0.0, 1).remove(0);
        let f = fit_loggp(std::slice::from_ref(&one));
        assert_eq!(f.ranges.len(), 1);
        assert!(rel(f.ranges[0].g_ns, 5140.0) < 1e-9);
        assert!(ci95_loggp(&[], 10, 1).is_empty());
        assert!(ci95_loggp(&[one], 0, 1).is_empty());
    }

    const BOOT_TRUTH: [(&str, f64); 7] = [
        ("eel_ns", 5960.0 + 2.0 * 4720.0),
        ("g_ns", 5140.0),
        ("G_ns_per_byte", 0.73),
        ("ranges[1].g_ns", 21390.0),
        ("ranges[1].G_ns_per_byte", 1.03),
        ("o_r_ns", 4720.0),
        ("L_ns", 5960.0),
    ];

    #[test]
    fn bootstrap_covers_truth() {
        // Coverage over 20 independent noisy sweeps (nominal 95 %; the
        // bootstrap of a median from 20 repetitions runs a little under).
        let t = openib();
        let mut hits = [0usize; BOOT_TRUTH.len()];
        for seed in 0..20 {
            let ci = ci95_loggp(&generate(&t, 20, 0.03, 500 + seed), 200, seed);
            for (h, (k, v)) in hits.iter_mut().zip(BOOT_TRUTH) {
                let (lo, hi) = ci[k];
                assert!(lo < hi, "{k}: [{lo}, {hi}]");
                if lo <= v && v <= hi {
                    *h += 1;
                }
            }
        }
        for (h, (k, _)) in hits.iter().zip(BOOT_TRUTH) {
            assert!(*h >= 16, "{k}: covered {h} of 20");
        }
    }

    #[test]
    fn bootstrap_shrinks_with_repetitions() {
        let t = openib();
        // Widths summed over 4 sweeps each (one sweep's bootstrap of a median
        // from few repetitions is lumpy: its width follows the spacing of the
        // middle order statistics it happened to draw).
        let width = |reps: usize, seed: u64| {
            let ci = ci95_loggp(&generate(&t, reps, 0.03, seed), 200, seed);
            BOOT_TRUTH.map(|(k, _)| ci[k].1 - ci[k].0)
        };
        let (mut w_few, mut w_many) = ([0.0; BOOT_TRUTH.len()], [0.0; BOOT_TRUTH.len()]);
        for seed in 0..4 {
            for (acc, w) in w_few.iter_mut().zip(width(16, 70 + seed)) {
                *acc += w;
            }
            for (acc, w) in w_many.iter_mut().zip(width(128, 80 + seed)) {
                *acc += w;
            }
        }
        for (i, (k, _)) in BOOT_TRUTH.iter().enumerate() {
            // 8× the repetitions: ~√8 ≈ 2.8× narrower
            assert!(
                w_many[i] < 0.6 * w_few[i],
                "{k}: {} vs {}",
                w_many[i],
                w_few[i]
            );
        }
        let ci_few = ci95_loggp(&generate(&t, 12, 0.03, 77), 20, 9);
        assert_eq!(ci_few.len(), 6 + 2 * 6);
        assert!(ci_few.contains_key("ranges[0].O_r_ns_per_byte"));
        // reproducible
        let few = generate(&t, 12, 0.03, 77);
        assert_eq!(ci95_loggp(&few, 50, 3), ci95_loggp(&few, 50, 3));
    }
}
