//! The large-message bandwidth: the sustained per-byte gap G from the long
//! bursts of the sweep's last stage ([`BurstSamples`]), whether a burst
//! regime (a token bucket, a credit window) lets short bursts pass faster,
//! and whether the value is identified.
//!
//! ## The sustained rate
//! PRTT(n, 0, s) of a burst longer than any allowance of the path grows by
//! the time the path takes per message: a burst that has used up a token
//! bucket's tokens (or a credit window) is paced at the sustained rate, so
//! between two such burst lengths n₁ < n₂
//!
//!   m = (PRTT(n₂, 0, s) − PRTT(n₁, 0, s)) / (n₂ − n₁)
//!
//! is the sustained time per message, whatever the bucket held at the start
//! of the rounds (it cancels) and whatever the single answer costs. The
//! sweep doubles n until the last two such increments agree ("settled": the
//! first burst beyond the allowance is paced through and through).
//!
//! Each burst length is represented by the least round time of its
//! repetitions that a second round confirms ([`confirmed_least`]). On a
//! host shared with other work a round is mostly made longer (a
//! descheduled driver or responder, a delayed soft interrupt) and on a
//! busy two-core machine most rounds of a few milliseconds are: their
//! medians read the scheduler, their minima the link (bench/shaper.md).
//! Behind a large token bucket a round is also made shorter, once in a
//! while, by a pause before it that let the bucket fill further than
//! before the others: a lone least round is such a one, not the path's
//! time, and two rounds that agree are. Clean rounds still jitter by some
//! microseconds (the shaper's own timer). The confirmed time of a length
//! is taken to be known within the distance to the round confirming it
//! (with no two rounds agreeing, the least round within the distance to
//! its second least: a single clean round, its next one lifted by a
//! millisecond, is not known at all), and the 95 % interval of m is
//! ±[`JITTER_Z`] times the two lengths' such distances combined. A
//! bootstrap of the minima was
//! tried first: it reads far too wide when only two of twelve rounds were
//! clean (a resample misses both one time in nine) and too narrow when
//! many were (the least of many is tighter than the jitter).
//!
//! Clean rounds that repeat to a few microseconds still do not fix m that
//! closely: what the bucket holds when a burst starts and what the host's
//! other work takes from a burst move a whole length's time, every round
//! alike. The increment before m estimates the same sustained time from
//! other lengths, so their difference is added to the interval (in
//! quadrature with the jitter): a rate that two increments agree on to
//! 0.2 % is known to 0.2 %, one they put 3 % apart is known to about 3 %.
//!
//! ## G from m
//! A stream paced by the path spends s·G per message; its per-message
//! costs (system calls, headers) overlap the transfer. A stream that the
//! hosts limit (no shaper: the copies are the bottleneck) spends
//! g + (s − 1)·G, the line of the sweep's largest range. So
//! G = (m − g)/(s − 1) with g the largest range's (clamped at 0; its
//! interval widens G's) when that range's line at s is the long bursts' time (within
//! [`HOST_LINE_TOLERANCE`]): the stream goes as fast as the sweep's own
//! messages did. Otherwise the stream is paced by the path, and G = m / s:
//! when a burst regime was recognised, and when the largest range's line
//! misses m (a shaper whose bucket the sweep's own traffic kept empty
//! shows no burst regime, and the line it fitted across the bucket's edge
//! has an intercept of a hundred microseconds that is no per-message
//! cost).
//!
//! ## A burst regime
//! Recognised when a size's short bursts (the sweep's PRTT(n, 0, s), n of
//! 4–64) passed at less than 1/[`REGIME_RATIO`] of the sustained time per
//! byte, beyond their own interval and the sustained time's (the lower
//! bound of its interval), and only once the sustained time settled (a
//! host whose other work slows the long bursts' copies looks like a
//! shaper whose allowance is still running out): such bursts ran at a
//! rate the path
//! cannot sustain. Unshaped links show no such size (their gap per byte
//! falls towards the sustained G as s grows), so no regime is invented
//! there. The burst G is that fastest per-byte gap, the burst bytes the
//! largest burst (n·s) seen at such a rate: what the probe's bursts found
//! free, a lower bound of the bucket.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{BurstSamples, Interval, LinkTraits, LogGpFit};
use netgauge::ext::{Reason, Status};

/// Two burst increments agree ("settled") within this fraction.
pub const SETTLE_TOLERANCE: f64 = 0.05;
/// A burst regime is recognised when short bursts ran at least this many
/// times faster per byte than the sustained rate.
pub const REGIME_RATIO: f64 = 1.5;
/// The sustained G is identified when its 95 % interval lies within this
/// fraction of the value on both sides.
pub const IDENTIFIED_REL_HALFWIDTH: f64 = 0.05;
/// Multiple of the least rounds' jitter the interval of m spans at least
/// on each side.
pub const JITTER_Z: f64 = 3.0;
/// The largest range's line g + (s − 1)·G at the long bursts' size is the
/// sustained time per message (the hosts limit the stream) when it is
/// within this fraction of it.
pub const HOST_LINE_TOLERANCE: f64 = 0.1;

/// Where the sustained G comes from.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    /// The long bursts at `size_bytes`, from `from_messages` to
    /// `to_messages` messages per burst.
    LongBursts {
        size_bytes: u64,
        from_messages: u32,
        to_messages: u32,
    },
    /// The G of the sweep's protocol range `index` (no long bursts ran).
    Range { index: usize },
    /// Nothing to fit it from.
    None,
}

/// A recognised burst regime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BurstKind {
    /// Tokens refill with time (a shaper's token bucket).
    TokenBucket,
    /// A window of messages passes at once, the rest as credits return.
    Credit,
}

/// The burst part of a regime.
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Burst {
    pub kind: BurstKind,
    /// ns per byte of the fastest short bursts, with its 95 % interval.
    pub G_ns_per_byte: f64,
    pub ci95: Interval,
    pub status: Status,
    /// The largest burst (n·s) seen at a burst rate.
    pub bytes: u64,
    /// The message size of the fastest burst.
    pub at_size_bytes: u64,
}

/// The sustained time per message of the long bursts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sustained {
    pub size_bytes: u64,
    /// m and its 95 % interval (NaN bounds without resamples).
    pub per_message_ns: f64,
    pub ci95: Interval,
    /// The two burst lengths m is taken between.
    pub from_messages: u32,
    pub to_messages: u32,
    /// The increment before agreed with m: the bursts were paced through.
    pub settled: bool,
    /// The increment before m, per message (NaN with two lengths only).
    pub previous_ns: f64,
}

impl Sustained {
    /// Half the interval's width relative to m (∞ without an interval).
    pub fn rel_halfwidth(&self) -> f64 {
        let (lo, hi) = self.ci95;
        if lo.is_finite() && hi.is_finite() && self.per_message_ns > 0.0 {
            (hi - lo) / 2.0 / self.per_message_ns
        } else {
            f64::INFINITY
        }
    }
}

/// Two round times within this fraction (or [`CONFIRM_NS`]) of each other
/// confirm the lesser.
pub const CONFIRM_REL: f64 = 0.005;
pub const CONFIRM_NS: f64 = 5e3;

/// The least round time of `xs` that another round confirms (one within
/// [`CONFIRM_REL`] or [`CONFIRM_NS`] above it), with the distance to that
/// confirming round; None when no two rounds agree. A single round below
/// every confirmed one is passed over: a burst that found the bucket fuller
/// than the others did (after a longer pause) is a time the path does not
/// repeat. No allocation: it runs between a sweep's rounds.
pub fn confirmed_least(xs: &[f64]) -> Option<(f64, f64)> {
    let mut best: Option<(f64, f64)> = None;
    for (i, &x) in xs.iter().enumerate() {
        if best.is_some_and(|(b, _)| b <= x) {
            continue;
        }
        let tol = (CONFIRM_REL * x).max(CONFIRM_NS);
        let partner = xs
            .iter()
            .enumerate()
            .filter(|&(j, &y)| j != i && y >= x && y - x <= tol)
            .map(|(_, &y)| y - x)
            .fold(f64::INFINITY, f64::min);
        if partner.is_finite() {
            best = Some((x, partner));
        }
    }
    best
}

/// The two least of `xs` (∞ for what is missing).
pub fn two_least(xs: &[f64]) -> (f64, f64) {
    let (mut a, mut b) = (f64::INFINITY, f64::INFINITY);
    for &x in xs {
        if x < a {
            (a, b) = (x, a);
        } else if x < b {
            b = x;
        }
    }
    (a, b)
}

/// The time of each burst length with samples, by increasing n, with how
/// closely it is known: its confirmed least round and the distance to the
/// round confirming it, or else its least round and the distance to its
/// second least (∞ with one round).
fn minima(b: &BurstSamples) -> Vec<(u32, f64, f64)> {
    let mut v: Vec<(u32, f64, f64)> = b
        .lengths
        .iter()
        .filter(|l| l.n >= 1 && !l.prtt_ns.is_empty())
        .map(|l| {
            let (t, spread) = confirmed_least(&l.prtt_ns).unwrap_or_else(|| {
                let (a, b) = two_least(&l.prtt_ns);
                (a, b - a)
            });
            (l.n, t, spread)
        })
        .collect();
    v.sort_by_key(|x| x.0);
    v.dedup_by_key(|x| x.0);
    v
}

/// The sustained time per message between the two longest bursts, and
/// whether the increment before agrees; None with fewer than two lengths.
/// `resamples` = 0: no interval (as for the bootstrap intervals).
pub fn sustained(b: &BurstSamples, resamples: usize) -> Option<Sustained> {
    let mins = minima(b);
    let k = mins.len();
    if k < 2 {
        return None;
    }
    let (na, ta, spread_a) = mins[k - 2];
    let (nb, tb, spread_b) = mins[k - 1];
    let m = (tb - ta) / f64::from(nb - na);
    let previous_ns = if k >= 3 {
        let (np, tp, _) = mins[k - 3];
        (ta - tp) / f64::from(na - np)
    } else {
        f64::NAN
    };
    let settled = previous_ns.is_finite() && (m - previous_ns).abs() <= SETTLE_TOLERANCE * m.abs();
    let ci95 = if resamples > 0 {
        let jitter = spread_a.hypot(spread_b) / f64::from(nb - na);
        let hw = JITTER_Z * jitter;
        let hw = if previous_ns.is_finite() {
            hw.hypot(m - previous_ns)
        } else {
            hw
        };
        (m - hw, m + hw)
    } else {
        (f64::NAN, f64::NAN)
    };
    Some(Sustained {
        size_bytes: b.size_bytes,
        per_message_ns: m,
        ci95,
        from_messages: na,
        to_messages: nb,
        settled,
        previous_ns,
    })
}

/// The large-message bandwidth of a sweep.
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BandwidthFit {
    /// The sustained G, ns per byte (the bandwidth is its inverse), with its
    /// 95 % interval and its verdict.
    pub sustained_G_ns_per_byte: f64,
    pub ci95: Interval,
    pub status: Status,
    pub source: Source,
    /// The recognised burst regime, if any.
    pub burst: Option<Burst>,
    /// The protocol range whose G is the sustained G (within its interval
    /// or 10 %), if one is.
    pub range_index: Option<usize>,
    /// The sustained time per message of the long bursts, and the one
    /// before it (ns; NaN when not measured).
    pub per_message_ns: f64,
    pub previous_per_message_ns: f64,
    /// Why the long bursts stopped early, if they did.
    pub stopped: Option<String>,
}

impl Default for BandwidthFit {
    fn default() -> Self {
        Self {
            sustained_G_ns_per_byte: f64::NAN,
            ci95: (f64::NAN, f64::NAN),
            status: Status::NotIdentified(Reason::NotMeasured),
            source: Source::None,
            burst: None,
            range_index: None,
            per_message_ns: f64::NAN,
            previous_per_message_ns: f64::NAN,
            stopped: None,
        }
    }
}

impl BandwidthFit {
    /// The sustained bandwidth in bytes per second (NaN when G is not a
    /// positive number).
    pub fn bytes_per_s(&self) -> f64 {
        bytes_per_s(self.sustained_G_ns_per_byte)
    }
}

/// 1/G in bytes per second, NaN unless G is a positive number.
pub fn bytes_per_s(g_ns_per_byte: f64) -> f64 {
    if g_ns_per_byte > 0.0 && g_ns_per_byte.is_finite() {
        1e9 / g_ns_per_byte
    } else {
        f64::NAN
    }
}

/// The verdict on a sustained (or burst) G: [`Status::of_nonnegative`], and
/// an interval wider than ±[`IDENTIFIED_REL_HALFWIDTH`] is not enough.
pub fn verdict(g: f64, (lo, hi): Interval) -> Status {
    match Status::of_nonnegative(g, lo, hi) {
        Status::Identified if (hi - lo) / 2.0 > IDENTIFIED_REL_HALFWIDTH * g => {
            Status::NotIdentified(Reason::WideInterval)
        }
        s => s,
    }
}

/// The interval of a key, or NaNs.
fn ci_of(ci95: &BTreeMap<String, Interval>, key: &str) -> Interval {
    ci95.get(key).copied().unwrap_or((f64::NAN, f64::NAN))
}

/// The large-message bandwidth from the sweep's fit (`fit`, its intervals
/// `ci95`) and its long bursts (`bursts`, None when the stage did not run).
pub fn fit_bandwidth(
    fit: &LogGpFit,
    ci95: &BTreeMap<String, Interval>,
    bursts: Option<&BurstSamples>,
    traits: &LinkTraits,
    resamples: usize,
) -> BandwidthFit {
    let last = fit.ranges.len().checked_sub(1);
    let est = bursts.and_then(|b| sustained(b, resamples));
    let Some(est) = est.filter(|e| e.per_message_ns.is_finite() && e.size_bytes > 1) else {
        // No long bursts: the largest range's G, as the sweep fitted it.
        let Some(k) = last else {
            return BandwidthFit {
                stopped: bursts.and_then(|b| b.stopped.clone()),
                ..BandwidthFit::default()
            };
        };
        let g = fit.ranges[k].G_ns_per_byte;
        let ci = ci_of(ci95, &format!("ranges[{k}].G_ns_per_byte"));
        return BandwidthFit {
            sustained_G_ns_per_byte: g,
            ci95: ci,
            status: if resamples == 0 && !ci.0.is_finite() {
                Status::NotAssessed
            } else {
                verdict(g, ci)
            },
            source: Source::Range { index: k },
            range_index: Some(k),
            stopped: bursts.and_then(|b| b.stopped.clone()),
            ..BandwidthFit::default()
        };
    };
    let s = est.size_bytes as f64;
    // Short bursts that ran faster than the path sustains.
    // ... beyond their own interval and the sustained time's, once it
    // settled: a noisy or still growing estimate invents no regime.
    let per_byte = if est.ci95.0.is_finite() {
        est.ci95.0.min(est.per_message_ns) / s
    } else {
        est.per_message_ns / s
    };
    let burst = fit
        .points
        .iter()
        .filter(|_| est.settled)
        .filter(|p| p.size_bytes > 0 && p.gap_ns > 0.0)
        .filter(|p| {
            let hw = if p.gap_hw_ns.is_finite() {
                p.gap_hw_ns
            } else {
                0.0
            };
            (p.gap_ns + hw) / p.size_bytes as f64 * REGIME_RATIO < per_byte
        })
        .fold(None::<Burst>, |acc, p| {
            let g = p.gap_ns / p.size_bytes as f64;
            let hw = if p.gap_hw_ns.is_finite() {
                p.gap_hw_ns / p.size_bytes as f64
            } else {
                f64::NAN
            };
            let bytes = u64::from(p.n.max(1)) * p.size_bytes;
            match acc {
                Some(mut b) => {
                    b.bytes = b.bytes.max(bytes);
                    if g < b.G_ns_per_byte {
                        b.G_ns_per_byte = g;
                        b.ci95 = (g - hw, g + hw);
                        b.at_size_bytes = p.size_bytes;
                    }
                    Some(b)
                }
                None => Some(Burst {
                    kind: if traits.credit {
                        BurstKind::Credit
                    } else {
                        BurstKind::TokenBucket
                    },
                    G_ns_per_byte: g,
                    ci95: (g - hw, g + hw),
                    status: Status::NotAssessed,
                    bytes,
                    at_size_bytes: p.size_bytes,
                }),
            }
        })
        .map(|mut b| {
            b.status = Status::of_nonnegative(b.G_ns_per_byte, b.ci95.0, b.ci95.1);
            b
        });
    // The per-message constant of a host-limited stream (none when paced):
    // the largest range's line at s is the sustained time.
    let host_line = last.filter(|&k| {
        let line = fit.ranges[k].gap_ns(est.size_bytes);
        burst.is_none()
            && (line - est.per_message_ns).abs() <= HOST_LINE_TOLERANCE * est.per_message_ns
    });
    let (g0, g0_ci) = match host_line {
        Some(k) => {
            let g = fit.ranges[k].g_ns.max(0.0);
            let (lo, hi) = ci_of(ci95, &format!("ranges[{k}].g_ns"));
            (g, (lo.max(0.0), hi.max(0.0)))
        }
        None => (0.0, (0.0, 0.0)),
    };
    let den = if host_line.is_some() { s - 1.0 } else { s };
    let g_value = (est.per_message_ns - g0) / den;
    let ci = if est.ci95.0.is_finite() && g0_ci.0.is_finite() && g0_ci.1.is_finite() {
        ((est.ci95.0 - g0_ci.1) / den, (est.ci95.1 - g0_ci.0) / den)
    } else {
        (f64::NAN, f64::NAN)
    };
    let status = if !est.settled {
        // Still slowing down at the longest burst: an allowance larger
        // than the bursts; speeding up: noise between the lengths.
        if est.per_message_ns > est.previous_ns || est.previous_ns.is_nan() {
            Status::NotIdentified(Reason::Shaper)
        } else {
            Status::NotIdentified(Reason::Unstable)
        }
    } else if resamples == 0 && !ci.0.is_finite() {
        Status::NotAssessed
    } else {
        verdict(g_value, ci)
    };
    let range_index = last.filter(|&k| {
        let r = &fit.ranges[k];
        let (lo, hi) = ci_of(ci95, &format!("ranges[{k}].G_ns_per_byte"));
        let within = |x: f64| (x - g_value).abs() <= 0.1 * g_value;
        within(r.G_ns_per_byte) || (lo <= g_value && g_value <= hi)
    });
    BandwidthFit {
        sustained_G_ns_per_byte: g_value,
        ci95: ci,
        status,
        source: Source::LongBursts {
            size_bytes: est.size_bytes,
            from_messages: est.from_messages,
            to_messages: est.to_messages,
        },
        burst,
        range_index,
        per_message_ns: est.per_message_ns,
        previous_per_message_ns: est.previous_ns,
        stopped: bursts.and_then(|b| b.stopped.clone()),
    }
}

#[cfg(test)]
mod tests;
