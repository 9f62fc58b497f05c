//! The LogGPS rendezvous threshold S, found on its own from the gap and the
//! single message's half round trip (not read off the ranges).

use super::x_of;
use crate::model::lsq;
use crate::model::SizePoint;

/// A rendezvous is a step of at least this many EEL in the gap and in the
/// single message's half round trip (the handshake costs a small-message
/// round trip, ≈ 2L + 4o = 2·EEL, on a single message; a quarter of that
/// leaves room for overlap with the transfer and for noise).
pub const RENDEZVOUS_STEP_EEL: f64 = 0.5;
/// ... over this many consecutive sizes from the first one above S.
pub const RENDEZVOUS_PERSIST: usize = 3;
/// The line below a candidate S reaches down to 1/this of the size below it.
pub const RENDEZVOUS_LEFT_SPAN: f64 = 8.0;

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
///   step between the same two sizes: a device can step the gap a few
///   sizes before the single message, an effect of the device, not a
///   handshake; bench/verbs.md has such a case);
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
pub(super) fn rendezvous_index(points: &[SizePoint]) -> Option<usize> {
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
