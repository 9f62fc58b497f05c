//! Whether each fitted parameter is identified (a value inside a 95 %
//! interval that stays clear of its physical bound) or, if not, why not:
//! the verdicts the segment stores per field ([`Identification`]) and the
//! report prints.
//!
//! Rules, per value with its bootstrap interval ([`Status::of_nonnegative`]
//! unless said otherwise):
//! - times, gaps and overheads cannot be negative: a negative value is
//!   `negative`, an interval reaching 0 `crosses_zero`, a value a
//!   constrained fit left at 0 `at_bound` (only an upper limit is known);
//! - o_r and O_r: `not_applicable` on a one-sided transport (the target's
//!   CPU takes no part), `not_measured` where the responder reports no
//!   receive overhead (every point 0);
//! - S: `not_applicable` on a transport without a rendezvous protocol,
//!   `not_measured` where none was found in the sizes swept;
//! - a range's g and G: `shaper` when a burst regime was recognised and the
//!   range holds both sizes whose bursts passed at the burst rate and sizes
//!   paced at the sustained rate (its line mixes two regimes);
//! - EEL: `unstable` when the samples say the driver shared its CPU
//!   ([`Instability::SharedCore`]) or fell into several modes;
//! - the bandwidth block's two G: the verdicts of [`super::bandwidth`];
//! - LogfP: o_min, o_max and g_f by the interval rule, f identified when
//!   found with a bounded interval.
//!
//! Without intervals (no bootstrap resamples) nothing is claimed
//! identified: values keep `not_assessed` unless a rule above needs no
//! interval (negative, not applicable, not measured).

use std::collections::BTreeMap;

use netgauge::ext::{Field, Identification, Instability, RangeField, Reason, Status};

use super::bandwidth::{BandwidthFit, REGIME_RATIO};
use super::{Interval, LinkTraits, LogGpFit, LogfpFit, Range, SizePoint};

fn ci_of(ci95: &BTreeMap<String, Interval>, key: &str) -> Option<Interval> {
    ci95.get(key).copied()
}

/// The verdict on a non-negative quantity; without an interval only a
/// negative value is judged.
fn judge(value: f64, ci: Option<Interval>) -> Status {
    match ci {
        Some((lo, hi)) => Status::of_nonnegative(value, lo, hi),
        None if value < 0.0 => Status::NotIdentified(Reason::Negative),
        None if !value.is_finite() => Status::NotIdentified(Reason::NotMeasured),
        None => Status::NotAssessed,
    }
}

/// Does range `r` (with the points `pts`) mix sizes whose bursts passed at
/// the burst rate with sizes paced at the sustained rate?
fn mixes_regimes(pts: &[SizePoint], bw: &BandwidthFit) -> bool {
    let (Some(burst), g) = (bw.burst, bw.sustained_G_ns_per_byte) else {
        return false;
    };
    if g.is_nan() || g <= 0.0 {
        return false;
    }
    let per_byte = |p: &SizePoint| p.gap_ns / p.size_bytes.max(1) as f64;
    let fast = pts.iter().any(|p| per_byte(p) * REGIME_RATIO < g);
    let paced = pts.iter().any(|p| {
        u64::from(p.n.max(1)) * p.size_bytes * 2 > burst.bytes && per_byte(p) * REGIME_RATIO >= g
    });
    fast && paced
}

/// The points of a range.
fn points_of<'a>(fit: &'a LogGpFit, r: &Range) -> &'a [SizePoint] {
    let a = fit.points.partition_point(|p| p.size_bytes < r.from_bytes);
    let b = fit.points.partition_point(|p| p.size_bytes <= r.to_bytes);
    &fit.points[a..b.max(a)]
}

/// The verdicts on a sweep's parameters.
///
/// `assessed`: the intervals were computed (bootstrap resamples > 0).
/// `instability`: the cause when the samples were found unstable.
pub fn identify(
    fit: &LogGpFit,
    ci95: &BTreeMap<String, Interval>,
    bw: &BandwidthFit,
    traits: &LinkTraits,
    instability: Instability,
    assessed: bool,
) -> Identification {
    let mut id = Identification::default();
    let ci = |k: &str| if assessed { ci_of(ci95, k) } else { None };
    let not = Status::NotIdentified;
    // EEL and L.
    let eel = match instability {
        Instability::SharedCore | Instability::MultiModal => not(Reason::Unstable),
        _ => judge(fit.eel_ns, ci("eel_ns")),
    };
    id.set(Field::Eel, eel);
    id.set(Field::L, judge(fit.L_ns, ci("L_ns")));
    // S.
    let s = match (traits.rendezvous, fit.S_bytes) {
        (false, _) => not(Reason::NotApplicable),
        (true, Some(_)) => Status::Identified,
        (true, None) => not(Reason::NotMeasured),
    };
    id.set(Field::S, s);
    // Receive overheads: measured at all?
    let o_r_measured = fit.points.iter().any(|p| p.o_r_ns != 0.0);
    for (i, r) in fit.ranges.iter().enumerate() {
        let key = |f: &str| format!("ranges[{i}].{f}");
        let shaped = mixes_regimes(points_of(fit, r), bw);
        let (g, big_g) = if shaped {
            (not(Reason::Shaper), not(Reason::Shaper))
        } else {
            (
                judge(r.g_ns, ci(&key("g_ns"))),
                judge(r.G_ns_per_byte, ci(&key("G_ns_per_byte"))),
            )
        };
        id.set_range(i, RangeField::Gap, g);
        id.set_range(i, RangeField::GapPerByte, big_g);
        id.set_range(i, RangeField::OSend, judge(r.o_s_ns, ci(&key("o_s_ns"))));
        id.set_range(
            i,
            RangeField::OSendPerByte,
            judge(r.O_s_ns_per_byte, ci(&key("O_s_ns_per_byte"))),
        );
        let (o_r, big_o_r) = if traits.one_sided {
            (not(Reason::NotApplicable), not(Reason::NotApplicable))
        } else if !traits.recv_overhead || !o_r_measured {
            (not(Reason::NotMeasured), not(Reason::NotMeasured))
        } else {
            (
                judge(r.o_r_ns, ci(&key("o_r_ns"))),
                judge(r.O_r_ns_per_byte, ci(&key("O_r_ns_per_byte"))),
            )
        };
        id.set_range(i, RangeField::ORecv, o_r);
        id.set_range(i, RangeField::ORecvPerByte, big_o_r);
    }
    // The bandwidth block.
    id.set(Field::SustainedG, bw.status);
    if let Some(b) = &bw.burst {
        id.set(Field::BurstG, b.status);
    }
    id
}

/// The verdicts on a LogfP fit (`ci95`: its `logfp.*` intervals; empty:
/// not assessed).
pub fn identify_logfp(id: &mut Identification, fit: &LogfpFit, ci95: &BTreeMap<String, Interval>) {
    let ci = |k: &str| ci_of(ci95, k);
    id.set(Field::OMin, judge(fit.o_min_ns, ci("logfp.o_min_ns")));
    id.set(Field::OMax, judge(fit.o_max_ns, ci("logfp.o_max_ns")));
    id.set(Field::Gf, judge(fit.g_ns, ci("logfp.g_ns")));
    let f = match (fit.f, ci("logfp.f")) {
        (None, _) => Status::NotIdentified(Reason::NotMeasured),
        (Some(_), Some((_, hi))) if hi.is_finite() => Status::Identified,
        (Some(_), Some(_)) => Status::NotIdentified(Reason::WideInterval),
        (Some(_), None) => Status::NotAssessed,
    };
    id.set(Field::F, f);
}

#[cfg(test)]
mod tests;
