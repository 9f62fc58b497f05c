//! What a sweep will cost before it runs: payload bytes (both directions,
//! as the transports count them) and duration, from the sweep's plan
//! ([`SweepConfig`]) and what is known of the link ([`LinkEstimate`]).
//! Pure: a scheduler charges the estimate to its budget before the sweep
//! and settles it against the counted bytes after.
//!
//! The estimate follows the sweep's own rules: every size of the initial
//! grid with its warm-up, its n (from the link's round trip and gap, as
//! `measure_size` chooses it) and its most repetitions (the byte budget
//! above 16 KiB included), the session warm-up, an allowance for the
//! bisection of [`CHANGES_ALLOWED`] changes in the top octave, the repeated
//! smallest sizes (those measured together), the latency run (its round trips at each of its sizes)
//! and the long-burst stage at its most repetitions. It is an
//! upper bound of the bytes in all but pathological sweeps (more changes
//! than allowed, lost rounds): the repetitions are the most the sweep
//! allows, and a sweep usually stops earlier.

use super::burst::{
    burst_size, may_double, DISCOVERY_MAX_REPS, FIRST_LENGTH, MAX_REPS as BURST_REPS,
};
use super::{
    rep_limits, settle_for, warmup_for, SweepConfig, BISECT_REL, SESSION_WARMUP_TOP_ROUNDS,
};
use crate::sweep::loss::PACE_MIN_BYTES;

/// What is known of a link before sweeping it: its sustained gap per byte
/// and the round trip of a small message. [`LinkEstimate::default`] is a
/// 1 Gbit/s link with a 100 µs round trip, for a peer never measured.
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkEstimate {
    pub G_ns_per_byte: f64,
    pub rtt_ns: f64,
    /// The largest message the transport carries.
    pub max_msg_bytes: usize,
}

impl Default for LinkEstimate {
    fn default() -> Self {
        Self {
            G_ns_per_byte: 8.0,
            rtt_ns: 100e3,
            max_msg_bytes: 4 << 20,
        }
    }
}

/// A sweep's planned cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SweepCost {
    /// Payload bytes sent by both sides.
    pub bytes: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

impl std::ops::Add for SweepCost {
    type Output = SweepCost;
    fn add(self, o: SweepCost) -> SweepCost {
        SweepCost {
            bytes: self.bytes + o.bytes,
            seconds: self.seconds + o.seconds,
        }
    }
}

/// Changes the estimate allows for in the bisection.
pub const CHANGES_ALLOWED: u32 = 2;

/// Bytes and time of `rounds` PRTT(n, ·, s) rounds: n messages out, one
/// back each.
fn rounds(link: &LinkEstimate, count: f64, n: u32, s: u64) -> (f64, f64) {
    let bytes = count * f64::from(n + 1) * s as f64;
    let secs = count * (link.rtt_ns + bytes / count * link.G_ns_per_byte) * 1e-9;
    (bytes, secs)
}

/// The n the sweep chooses for size `s` on this link (see
/// `measure_size`: the n − 1 gaps add up to about two round trips).
fn n_for(cfg: &SweepConfig, link: &LinkEstimate, s: u64) -> u32 {
    if cfg.n_max <= cfg.n_min {
        return cfg.n.max(2);
    }
    let sg = s as f64 * link.G_ns_per_byte;
    let prtt1 = link.rtt_ns + 2.0 * sg;
    // The gap of a small message is a fraction of the round trip.
    let gap = (link.rtt_ns / 10.0).max(sg).max(1.0);
    let want = 1.0 + (2.0 * prtt1 / gap).ceil();
    (want.min(f64::from(super::burst_cap(cfg, s))) as u32)
        .max(cfg.n_min)
        .max(2)
}

/// One size as `measure_size` measures it at most: warm-up, then its most
/// repetitions of settle rounds, PRTT(1,0,s), PRTT(n,0,s), PRTT(n,d,s).
fn size_cost(cfg: &SweepConfig, link: &LinkEstimate, s: u64) -> (f64, f64) {
    let n = n_for(cfg, link, s);
    let (w, warm_n) = warmup_for(cfg, s);
    let w = f64::from(w);
    let reps = f64::from(rep_limits(cfg, s, n).1);
    let parts = [
        rounds(link, w, 1, s),
        rounds(link, w, warm_n, s),
        rounds(link, reps * f64::from(settle_for(cfg, s) + 1), 1, s),
        rounds(link, 2.0 * reps, n, s),
    ];
    let bytes = parts.iter().map(|p| p.0).sum();
    // PRTT(n,d,s) also spins d ≥ PRTT(1,0,s) between its messages.
    let d_secs = reps * f64::from(n) * (link.rtt_ns + 2.0 * s as f64 * link.G_ns_per_byte) * 1e-9;
    let secs = parts.iter().map(|p| p.1).sum::<f64>() + d_secs;
    (bytes, secs)
}

/// The session warm-up up to `top`: the smallest size for its span, the
/// doubling ramp, the largest size a few times.
fn warmup_cost(cfg: &SweepConfig, link: &LinkEstimate, top: u64) -> (f64, f64) {
    if cfg.session_warmup.is_zero() {
        return (0.0, 0.0);
    }
    let span = cfg.session_warmup.as_secs_f64();
    let small = (span * 1e9 / link.rtt_ns).max(f64::from(super::SESSION_WARMUP_ROUNDS));
    let mut parts = vec![rounds(link, small, 1, cfg.min_size_bytes.max(1))];
    let mut ramp = PACE_MIN_BYTES as u64;
    while ramp < top {
        parts.push(rounds(link, 1.0, 1, ramp));
        ramp *= 2;
    }
    parts.push(rounds(link, f64::from(SESSION_WARMUP_TOP_ROUNDS), 1, top));
    parts
        .iter()
        .fold((0.0, 0.0), |(b, t), p| (b + p.0, t + p.1))
}

/// The planned cost of a full sweep with `cfg` over a link like `link`.
pub fn plan(cfg: &SweepConfig, link: &LinkEstimate) -> SweepCost {
    let top = cfg.max_size_bytes.min(link.max_msg_bytes as u64).max(1);
    let mut parts = vec![warmup_cost(cfg, link, top)];
    let mut grid = cfg.clone();
    grid.max_size_bytes = top;
    for s in grid.initial_sizes() {
        parts.push(size_cost(cfg, link, s));
    }
    // Bisections: in the top octave, the worst case for bytes.
    if cfg.refine {
        let per_change = if cfg.traits.rendezvous {
            // Down to the byte from a half-octave step, plus the two
            // confirmations.
            (top as f64 * 0.3).log2().ceil().max(1.0) + 2.0
        } else {
            (0.41 / BISECT_REL).log2().ceil().max(1.0)
        };
        let steps = f64::from(CHANGES_ALLOWED) * per_change;
        let (b, t) = size_cost(cfg, link, top);
        parts.push((steps * b, steps * t));
    }
    if cfg.repeat_smallest {
        let sizes = grid.initial_sizes();
        for &s in &sizes[..super::interleaved_len(cfg, &sizes)] {
            parts.push(size_cost(cfg, link, s));
        }
    }
    for s in super::latency_sizes(cfg) {
        if s <= top {
            let count = f64::from(cfg.latency_samples.min(super::MAX_LATENCY_SAMPLES))
                + f64::from(super::LATENCY_WARMUP_ROUNDS);
            parts.push(rounds(link, count, 1, s));
        }
    }
    if cfg.long_bursts {
        let s = burst_size(cfg, link.max_msg_bytes);
        let mut n = FIRST_LENGTH;
        let mut last = (1u32, 1u32);
        let mut measured = 0;
        loop {
            parts.push(rounds(link, f64::from(DISCOVERY_MAX_REPS), n, s));
            last = (last.1, n);
            measured += 1;
            if !may_double(n, s, measured, rounds(link, 1.0, n, s).1 * 1e9) {
                break;
            }
            n *= 2;
        }
        let more = f64::from(BURST_REPS.saturating_sub(DISCOVERY_MAX_REPS));
        // The two longest lengths, and the one before while they settle.
        parts.push(rounds(link, more, (last.0 / 2).max(1), s));
        parts.push(rounds(link, more, last.0, s));
        parts.push(rounds(link, more, last.1, s));
    }
    total(&parts)
}

fn total(parts: &[(f64, f64)]) -> SweepCost {
    let (b, t) = parts
        .iter()
        .fold((0.0, 0.0), |(b, t), p| (b + p.0, t + p.1));
    SweepCost {
        bytes: b.ceil() as u64,
        seconds: t,
    }
}

/// The planned cost of measuring exactly `sizes` with `cfg` (a re-check:
/// the session warm-up and the sizes, nothing else).
pub fn plan_sizes(cfg: &SweepConfig, sizes: &[u64], link: &LinkEstimate) -> SweepCost {
    let top = cfg.max_size_bytes.min(link.max_msg_bytes as u64).max(1);
    let mut parts = vec![warmup_cost(cfg, link, top)];
    parts.extend(sizes.iter().map(|&s| size_cost(cfg, link, s)));
    total(&parts)
}

#[cfg(test)]
mod tests;
