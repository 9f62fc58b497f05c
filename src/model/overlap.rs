//! CPU overlap (Bell et al.): from rounds of post, computation, wait, the
//! fraction of a message's transfer time the sending and the receiving CPU
//! can spend computing, with bootstrap intervals. Pure: no I/O.
//!
//! A round without computation takes T0, of which the post holds the CPU
//! for t_post. With a computation c the round takes max(T0, t_post + c + r):
//! r is what the receive still needs of the CPU once the answer is there
//! (a copy out of the kernel, or a poll of memory the NIC wrote). Rounds
//! whose computation lies well past the knee give r = T − t_post − c; the
//! longest computation that leaves the round as it was is c* = W − r, W =
//! T0 − t_post the wait after the post.
//! - receive side: c* / W, the share of the wait the CPU may compute;
//! - send side: 1 − t_post / (T0 / 2), the share of a one-way transfer
//!   (half the round trip) the post does not hold the CPU.
//!
//! Both are clamped to [0, 1].

use serde::{Deserialize, Serialize};

use super::contention::Est;
use super::stats::{percentile_ci95, quantile, seeded_rng, Rng};

/// One timed round of `pattern::overlap`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlapSample {
    /// The computation inserted, ns.
    pub compute_ns: f64,
    /// From before the post to its return (the CPU the post holds), ns.
    pub post_ns: f64,
    /// From before the post to the answer's arrival, ns.
    pub total_ns: f64,
}

/// Computations of at least this many W lie past the knee.
pub const PAST_KNEE: f64 = 1.3;

/// The rounds of one message size.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OverlapRounds {
    pub size_bytes: u64,
    /// Rounds without computation.
    pub base: Vec<OverlapSample>,
    /// Rounds with a computation past the knee.
    pub past: Vec<OverlapSample>,
}

/// The overlap of one message size.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverlapPoint {
    pub size_bytes: u64,
    /// Median round without computation, and of its post, ns.
    pub round_ns: f64,
    pub post_ns: f64,
    /// What the receive needs of the CPU after the wait, ns.
    pub recv_cpu_ns: Est,
    pub send: Est,
    pub recv: Est,
}

struct Point {
    round_ns: f64,
    post_ns: f64,
    recv_cpu_ns: f64,
    send: f64,
    recv: f64,
}

fn point(base: &[OverlapSample], past: &[OverlapSample]) -> Point {
    let t0 = quantile(&base.iter().map(|s| s.total_ns).collect::<Vec<_>>(), 0.5);
    let post = quantile(&base.iter().map(|s| s.post_ns).collect::<Vec<_>>(), 0.5);
    let r: Vec<f64> = past
        .iter()
        .map(|s| s.total_ns - s.post_ns - s.compute_ns)
        .collect();
    let r = quantile(&r, 0.5).max(0.0);
    let wait = t0 - post;
    Point {
        round_ns: t0,
        post_ns: post,
        recv_cpu_ns: r,
        send: (1.0 - post / (t0 / 2.0)).clamp(0.0, 1.0),
        recv: if wait > 0.0 {
            ((wait - r) / wait).clamp(0.0, 1.0)
        } else {
            0.0
        },
    }
}

fn resample(xs: &[OverlapSample], rng: &mut Rng, into: &mut Vec<OverlapSample>) {
    use rand::Rng as _;
    into.clear();
    into.extend((0..xs.len()).map(|_| xs[rng.gen_range(0..xs.len())]));
}

/// The overlap of one size, with `resamples` bootstrap replicates (0: no
/// intervals). None without rounds of both kinds.
pub fn fit_overlap(r: &OverlapRounds, resamples: usize, seed: u64) -> Option<OverlapPoint> {
    if r.base.is_empty() || r.past.is_empty() {
        return None;
    }
    let p = point(&r.base, &r.past);
    let mut rng = seeded_rng(seed);
    let (mut b, mut q) = (Vec::new(), Vec::new());
    let mut reps: [Vec<f64>; 3] = Default::default();
    for _ in 0..resamples {
        resample(&r.base, &mut rng, &mut b);
        resample(&r.past, &mut rng, &mut q);
        let x = point(&b, &q);
        reps[0].push(x.recv_cpu_ns);
        reps[1].push(x.send);
        reps[2].push(x.recv);
    }
    let est = |value: f64, reps: &[f64]| {
        if reps.is_empty() {
            return Est {
                value,
                lo: f64::NAN,
                hi: f64::NAN,
            };
        }
        let (lo, hi) = percentile_ci95(reps);
        Est {
            value,
            lo: lo.min(value),
            hi: hi.max(value),
        }
    };
    Some(OverlapPoint {
        size_bytes: r.size_bytes,
        round_ns: p.round_ns,
        post_ns: p.post_ns,
        recv_cpu_ns: est(p.recv_cpu_ns, &reps[0]),
        send: est(p.send, &reps[1]),
        recv: est(p.recv, &reps[2]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(compute_ns: f64, post_ns: f64, total_ns: f64) -> OverlapSample {
        OverlapSample {
            compute_ns,
            post_ns,
            total_ns,
        }
    }

    /// T0 = 10 µs, post 1 µs, the receive needs 2 µs after the wait: the
    /// wait (9 µs) is 7/9 computable; the post holds 1 of the 5 µs of a
    /// one-way transfer.
    #[test]
    fn fractions_from_the_knee() {
        let r = OverlapRounds {
            size_bytes: 1000,
            base: (0..20)
                .map(|i| s(0.0, 1000.0, 10_000.0 + f64::from(i % 3)))
                .collect(),
            past: (0..20)
                .map(|i| s(12_000.0, 1000.0, 15_000.0 + f64::from(i % 5)))
                .collect(),
        };
        let p = fit_overlap(&r, 200, 1).unwrap();
        assert!((p.recv.value - 7.0 / 9.0).abs() < 1e-3, "{p:?}");
        assert!((p.send.value - 0.8).abs() < 1e-3, "{p:?}");
        assert!((p.recv_cpu_ns.value - 2000.0).abs() < 5.0, "{p:?}");
        assert!(p.recv.lo <= p.recv.value && p.recv.value <= p.recv.hi);
        assert!(p.recv.hi - p.recv.lo < 0.01, "{p:?}");
    }

    #[test]
    fn fractions_stay_in_range() {
        // A post longer than half the round, a receive longer than the wait.
        let r = OverlapRounds {
            size_bytes: 1,
            base: vec![s(0.0, 8000.0, 10_000.0)],
            past: vec![s(5000.0, 8000.0, 20_000.0)],
        };
        let p = fit_overlap(&r, 0, 1).unwrap();
        assert_eq!((p.send.value, p.recv.value), (0.0, 0.0));
        assert!(p.send.lo.is_nan());
        assert!(fit_overlap(&OverlapRounds::default(), 10, 1).is_none());
    }
}
