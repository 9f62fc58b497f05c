//! The cheap re-check's verdicts, pure over explicit inputs: does a
//! re-check agree with the entry it checks, and does a full sweep's data
//! show that the link or a host was disturbed while it ran.
//!
//! A re-check ([`super::jobs::RecheckPlan`]: a few sizes, a fixed number of
//! repetitions, under 1 MB) measures the half round trip PRTT(1,0,s)/2 and
//! the gap g + (s−1)·G at its sizes. [`compare`] holds them against the
//! published entry: the half round trip at 1 byte against EEL, the gap at
//! each size against the line of the entry's range that holds the size. A
//! value agrees when it is within the policy's relative tolerance of the
//! reference, or within its absolute floor, or within `k` times the two
//! measurements' own 95 % half-widths (the re-check's and, when the entry
//! carries it, the reference's): a noisy host widens its own tolerance
//! instead of turning every re-check into a full sweep, while a real
//! change (a link at half its rate, a latency doubled) stands out of all
//! three. Within the spread the pair's own quiet sessions showed
//! ([`SessionSpread`], within a factor of two) a value agrees too: a link that settles at
//! one of two levels from one session to the next is not changed when a
//! re-check finds the other one. The widening of a gap's tolerance stops at `max_gap_rel_tol` of
//! the reference: the entry's interval of g is that of a parameter a
//! bandwidth-bound size barely shows (wide, or not identified at all on a
//! shaped link), and without the bound it would hide a link at half or a
//! quarter of its rate behind it. The schedule confirms a disagreement with a second re-check
//! before it pays a repair sweep.
//!
//! [`disturbed`] judges a full sweep before it is published: a sweep whose
//! single-message round trips spread far beyond a quiet path's (the host
//! descheduled, the link shared), that lost many rounds, or whose fit is
//! physically impossible (no finite positive EEL, a negative gap beyond
//! the EEL) is retried at the pair's next meeting and not published.
//! [`recheck_disturbed`] holds a re-check to the same rules before it is
//! compared: a disturbed re-check is neither agreement nor disagreement.

use netgauge::{EntryData, RangeData};

use crate::model::{stats, SizePoint, SizeSamples};
use crate::probe::ProbeResult;

/// How close a re-check must come to its reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecheckPolicy {
    /// Agree within this fraction of the reference value.
    pub rel_tol: f64,
    /// Agree within this many ns whatever the reference (timer and
    /// scheduler noise of a kernel stack).
    pub abs_tol_ns: f64,
    /// Agree within this multiple of the sum of the two 95 % half-widths.
    pub k_hw: f64,
    /// ... but a gap whose half-widths say more than this fraction of the
    /// reference is held to this fraction (a gap at twice or half the
    /// reference never agrees).
    pub max_gap_rel_tol: f64,
    /// Agree within this multiple of the spread the pair's own quiet
    /// sessions showed ([`SessionSpread`]) ...
    pub k_spread: f64,
    /// ... but only where the larger of the two values is less than this
    /// multiple of the smaller (a link at twice or half its latency or
    /// rate never agrees by the spread).
    pub max_spread_ratio: f64,
}

impl Default for RecheckPolicy {
    fn default() -> Self {
        Self {
            rel_tol: 0.25,
            abs_tol_ns: 500.0,
            k_hw: 3.0,
            max_gap_rel_tol: 0.5,
            k_spread: 1.25,
            max_spread_ratio: 2.0,
        }
    }
}

/// What one comparison looked at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Quantity {
    /// PRTT(1,0,1)/2 against EEL.
    Eel,
    /// g + (s−1)·G at a size against the entry's range line.
    Gap,
}

/// One comparison of a re-check.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Check {
    pub size_bytes: u64,
    pub quantity: Quantity,
    pub measured_ns: f64,
    pub reference_ns: f64,
    /// The largest difference that agrees.
    pub tolerance_ns: f64,
    pub agrees: bool,
}

/// A re-check's verdict.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// Every comparison agrees (and there was at least one).
    pub agrees: bool,
    pub checks: Vec<Check>,
}

/// The 95 % half-width of `name` in the entry's intervals, if it has one.
fn entry_hw(e: &EntryData, name: &str) -> f64 {
    e.ci95
        .iter()
        .find(|(n, lo, hi)| n == name && lo.is_finite() && hi.is_finite())
        .map_or(0.0, |(_, lo, hi)| (hi - lo).abs() / 2.0)
}

/// The range of `e` whose sizes hold `size` (the last one beyond them,
/// whose line holds on; the first one below them).
fn range_of(e: &EntryData, size: u64) -> Option<&RangeData> {
    e.ranges
        .iter()
        .find(|r| size >= r.from_bytes && size <= r.to_bytes)
        .or_else(|| e.ranges.iter().rev().find(|r| size > r.to_bytes))
        .or(e.ranges.first())
}

#[allow(clippy::too_many_arguments)]
fn check(
    p: &RecheckPolicy,
    size_bytes: u64,
    quantity: Quantity,
    measured_ns: f64,
    measured_hw_ns: f64,
    reference_ns: f64,
    reference_hw_ns: f64,
    spread_ns: f64,
) -> Check {
    let hw = |x: f64| if x.is_finite() { x } else { 0.0 };
    let mut widened = p.k_hw * (hw(measured_hw_ns) + hw(reference_hw_ns));
    if quantity == Quantity::Gap {
        widened = widened.min(p.max_gap_rel_tol * reference_ns.abs());
    }
    let (lo, hi) = (
        reference_ns.abs().min(measured_ns.abs()),
        reference_ns.abs().max(measured_ns.abs()),
    );
    let by_spread = if hi < p.max_spread_ratio * lo {
        p.k_spread * hw(spread_ns)
    } else {
        0.0
    };
    let tolerance_ns = (p.rel_tol * reference_ns.abs())
        .max(p.abs_tol_ns)
        .max(widened)
        .max(by_spread);
    let agrees = measured_ns.is_finite()
        && reference_ns.is_finite()
        && (measured_ns - reference_ns).abs() <= tolerance_ns;
    Check {
        size_bytes,
        quantity,
        measured_ns,
        reference_ns,
        tolerance_ns,
        agrees,
    }
}

/// Hold a re-check's points against the entry `reference`, with the
/// spread the pair's quiet sessions showed so far (`spread`; empty: none
/// known).
pub fn compare(
    points: &[SizePoint],
    reference: &EntryData,
    policy: &RecheckPolicy,
    spread: &SessionSpread,
) -> Verdict {
    let mut checks = Vec::with_capacity(2 * points.len());
    for pt in points {
        if pt.size_bytes == 1 {
            checks.push(check(
                policy,
                1,
                Quantity::Eel,
                pt.half_rtt_ns,
                pt.half_rtt_hw_ns,
                reference.eel_ns,
                entry_hw(reference, "eel_ns"),
                spread.spread_ns(Quantity::Eel, 1),
            ));
        }
        if let Some(r) = range_of(reference, pt.size_bytes) {
            // The entry's interval of g is that of its first range only.
            let ref_hw = if std::ptr::eq(r, &reference.ranges[0]) {
                entry_hw(reference, "g_ns")
            } else {
                0.0
            };
            checks.push(check(
                policy,
                pt.size_bytes,
                Quantity::Gap,
                pt.gap_ns,
                pt.gap_hw_ns,
                r.gap_ns(pt.size_bytes),
                ref_hw,
                spread.spread_ns(Quantity::Gap, pt.size_bytes),
            ));
        }
    }
    Verdict {
        agrees: !checks.is_empty() && checks.iter().all(|c| c.agrees),
        checks,
    }
}

/// How many of a pair's latest sessions [`SessionSpread`] keeps.
pub const SPREAD_SESSIONS: usize = 8;

/// The values one quantity took in a pair's latest sessions (a ring).
#[derive(Clone, Debug, Default, PartialEq)]
struct Ring {
    values: [f64; SPREAD_SESSIONS],
    len: usize,
    next: usize,
}

impl Ring {
    fn push(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        self.values[self.next] = x;
        self.next = (self.next + 1) % SPREAD_SESSIONS;
        self.len = (self.len + 1).min(SPREAD_SESSIONS);
    }

    /// Largest minus smallest; 0 with fewer than two values.
    fn spread(&self) -> f64 {
        if self.len < 2 {
            return 0.0;
        }
        let v = &self.values[..self.len];
        let (lo, hi) = v
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        hi - lo
    }
}

/// What a pair's quiet sessions read at the re-check's points, session
/// after session: the EEL and the gap at each re-check size of every
/// published sweep and of every re-check that agreed.
///
/// A quiet link need not come back to the same value in every session: a
/// host can hold a link at one of several levels for a second or more, in
/// re-checks and full sweeps alike (bench/cluster_rig.md). One session's
/// half-widths cannot see that; the spread between sessions can. [`compare`] widens its
/// tolerance to it, only within [`RecheckPolicy::max_spread_ratio`] of the
/// reference, so that a link at half or twice its rate never agrees. A disagreeing re-check is
/// not recorded (a change must not widen the tolerance that should catch
/// it); the repair sweep it leads to is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionSpread {
    eel: Ring,
    gaps: Vec<(u64, Ring)>,
}

impl SessionSpread {
    fn gap_ring(&mut self, size_bytes: u64) -> &mut Ring {
        let i = match self.gaps.iter().position(|(s, _)| *s == size_bytes) {
            Some(i) => i,
            None => {
                self.gaps.push((size_bytes, Ring::default()));
                self.gaps.len() - 1
            }
        };
        &mut self.gaps[i].1
    }

    /// Record a published entry: its EEL and its gap lines at `sizes`.
    pub fn record_entry(&mut self, e: &EntryData, sizes: &[u64]) {
        self.eel.push(e.eel_ns);
        for &s in sizes {
            if let Some(r) = range_of(e, s) {
                self.gap_ring(s).push(r.gap_ns(s));
            }
        }
    }

    /// Record an agreeing re-check's points.
    pub fn record_points(&mut self, points: &[SizePoint]) {
        for p in points {
            if p.size_bytes == 1 {
                self.eel.push(p.half_rtt_ns);
            }
            self.gap_ring(p.size_bytes).push(p.gap_ns);
        }
    }

    /// How far the recorded sessions spread at `quantity` and `size_bytes`
    /// (largest minus smallest, ns; 0 with fewer than two sessions).
    pub fn spread_ns(&self, quantity: Quantity, size_bytes: u64) -> f64 {
        match quantity {
            Quantity::Eel => self.eel.spread(),
            Quantity::Gap => self
                .gaps
                .iter()
                .find(|(s, _)| *s == size_bytes)
                .map_or(0.0, |(_, r)| r.spread()),
        }
    }
}

/// When a full sweep's data count as disturbed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DisturbancePolicy {
    /// The median single-message round trip of a size may exceed its
    /// fastest one by this factor, as a median over the sizes ...
    pub spread_median: f64,
    /// ... and at 1 byte (where EEL comes from) by this factor.
    pub spread_eel: f64,
    /// Differences below this many ns are never a disturbance (timer
    /// resolution, a fast path's tiny round trips).
    pub floor_ns: f64,
    /// Lost rounds a sweep may have.
    pub max_lost_rounds: u32,
}

impl Default for DisturbancePolicy {
    fn default() -> Self {
        Self {
            spread_median: 2.0,
            spread_eel: 3.0,
            floor_ns: 5_000.0,
            max_lost_rounds: 8,
        }
    }
}

/// Why a sweep is not published.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Disturbance {
    /// The fit has no finite positive EEL.
    NoLatency,
    /// A range's gap line is negative beyond an EEL at its first size.
    NegativeGap { from_bytes: u64, g_ns: f64 },
    /// Round trips at 1 byte spread by this factor (median / fastest).
    EelSpread(f64),
    /// Round trips spread by this factor, median over the sizes.
    Spread(f64),
    /// Rounds lost and retried.
    Losses(u32),
    /// The gap falls by more than half where one range meets the next:
    /// larger messages cannot leave faster than smaller ones, so one side
    /// of the boundary was held up.
    GapDrop {
        at_bytes: u64,
        before_ns: f64,
        after_ns: f64,
    },
}

impl std::fmt::Display for Disturbance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Disturbance::NoLatency => write!(f, "no finite positive EEL"),
            Disturbance::NegativeGap { from_bytes, g_ns } => write!(
                f,
                "the gap line from {from_bytes} B is negative ({g_ns:.0} ns)"
            ),
            Disturbance::EelSpread(x) => write!(
                f,
                "single-message round trips at 1 B spread {x:.1}x (median / fastest)"
            ),
            Disturbance::Spread(x) => write!(
                f,
                "single-message round trips spread {x:.1}x (median / fastest, median over sizes)"
            ),
            Disturbance::Losses(n) => write!(f, "{n} rounds lost"),
            Disturbance::GapDrop {
                at_bytes,
                before_ns,
                after_ns,
            } => write!(
                f,
                "the gap falls from {before_ns:.0} ns to {after_ns:.0} ns at {at_bytes} B"
            ),
        }
    }
}

/// How far the round trips of one size spread: median / fastest, or 1
/// when the difference is below the floor.
fn spread(s: &SizeSamples, floor_ns: f64) -> Option<f64> {
    let fastest = s.prtt1_ns.iter().copied().fold(f64::INFINITY, f64::min);
    if !(fastest.is_finite() && fastest > 0.0) {
        return None;
    }
    let med = stats::median(&s.prtt1_ns);
    Some(if med - fastest < floor_ns {
        1.0
    } else {
        med / fastest
    })
}

/// Whether a full sweep's data show a disturbed link or host.
pub fn disturbed(r: &ProbeResult, policy: &DisturbancePolicy) -> Option<Disturbance> {
    let eel = r.fit.eel_ns;
    if !(eel.is_finite() && eel > 0.0) {
        return Some(Disturbance::NoLatency);
    }
    if r.lost_rounds > policy.max_lost_rounds {
        return Some(Disturbance::Losses(r.lost_rounds));
    }
    for range in &r.fit.ranges {
        let g = range.gap_ns(range.from_bytes);
        if g < -eel {
            return Some(Disturbance::NegativeGap {
                from_bytes: range.from_bytes,
                g_ns: g,
            });
        }
    }
    for pair in r.fit.ranges.windows(2) {
        let before = pair[0].gap_ns(pair[0].to_bytes);
        let after = pair[1].gap_ns(pair[1].from_bytes);
        if after < before / 2.0 && before - after > policy.floor_ns {
            return Some(Disturbance::GapDrop {
                at_bytes: pair[1].from_bytes,
                before_ns: before,
                after_ns: after,
            });
        }
    }
    spread_disturbance(&r.samples, policy)
}

/// Whether the round trips of `samples` spread as only a disturbed host or
/// link spreads them (the part of [`disturbed`] that needs no fit).
fn spread_disturbance(samples: &[SizeSamples], policy: &DisturbancePolicy) -> Option<Disturbance> {
    if let Some(x) = samples
        .iter()
        .filter(|s| s.size_bytes == 1)
        .filter_map(|s| spread(s, policy.floor_ns))
        .reduce(f64::max)
    {
        if x > policy.spread_eel {
            return Some(Disturbance::EelSpread(x));
        }
    }
    let spreads: Vec<f64> = samples
        .iter()
        .filter_map(|s| spread(s, policy.floor_ns))
        .collect();
    if !spreads.is_empty() {
        let m = stats::median(&spreads);
        if m > policy.spread_median {
            return Some(Disturbance::Spread(m));
        }
    }
    None
}

/// Whether a re-check's own data show a disturbed link or host: its round
/// trips spread as [`disturbed`] judges a sweep's, or a gap it measured is
/// negative beyond its half round trip at 1 byte (n messages back to back
/// cannot take less time than one: the single ones were held up). Such a
/// re-check says nothing about the entry, for or against; the pair is
/// re-checked at its next meeting.
pub fn recheck_disturbed(
    samples: &[SizeSamples],
    points: &[SizePoint],
    policy: &DisturbancePolicy,
) -> Option<Disturbance> {
    let eel = points
        .iter()
        .find(|p| p.size_bytes == 1)
        .map(|p| p.half_rtt_ns);
    match eel {
        Some(e) if e.is_finite() && e > 0.0 => {
            if let Some(p) = points.iter().find(|p| p.gap_ns < -e) {
                return Some(Disturbance::NegativeGap {
                    from_bytes: p.size_bytes,
                    g_ns: p.gap_ns,
                });
            }
        }
        _ => return Some(Disturbance::NoLatency),
    }
    spread_disturbance(samples, policy)
}
