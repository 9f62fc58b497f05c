//! The all-ranks exchange step.
//!
//! A pair probe measures two ranks while the rest of the job waits. The steps
//! of recursive doubling and halving, of the ring and of the allgathers are
//! different: every rank of the job sends s bytes to a partner and receives
//! s bytes from one, all at once. On a node whose ranks share cores and
//! caches, such a step is not the pair's T(s) stretched by a constant: its
//! per-byte cost grows with s once the ranks' buffers together outgrow the
//! caches (several times the pair's per-byte cost from 1 MiB on; figures in
//! bench/mpi.md, "the all-ranks exchange"), and its rendezvous step sits
//! where the pair's does whether or not the pair fit found it.
//!
//! So the MPI probe also measures that step directly: every rank exchanges
//! s bytes with rank ⊕ 1, `k` times back to back after a barrier, and the
//! round's value is the slowest rank's mean step time (back-to-back steps of
//! one rank depend on each other, as the steps of a collective do). This
//! module turns those rounds into points (median and its 95 % interval) and
//! the points into at most [`MAX_RANGES`] straight ranges,
//! `step(s) = step_ns + (s − 1)·G`, with the same segmentation criterion as
//! the pair's gap ([`segment::optimal_bic_at_most`], relative residuals).
//! Each range has its own intercept, so a step at the rendezvous switch is
//! a step here too.

use serde::{Deserialize, Serialize};

use super::fit::{line_or_mean, non_negative, rel_weights};
use super::segment;
use super::stats;

/// Ranges an exchange fit may have (the segment's ranges per entry).
pub const MAX_RANGES: usize = netgauge::layout::MAX_RANGES;
/// Fewest points per range.
pub const MIN_RANGE_POINTS: usize = 3;

/// The rounds measured at one size: one value per round, the slowest rank's
/// mean time of one exchange step, ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExchangeSamples {
    pub size_bytes: u64,
    /// Exchanges back to back in one round.
    pub steps_per_round: u32,
    pub step_ns: Vec<f64>,
}

/// The raw exchange sweep of `ranks` ranks, as `ngctl probe --json --raw`
/// saves it (and `ngctl fit` reads it back).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExchangeRaw {
    pub ranks: usize,
    pub sizes: Vec<ExchangeSamples>,
}

/// One size: the median step time and the half-width of its 95 % interval
/// (+∞ with too few rounds for one).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExchangePoint {
    pub size_bytes: u64,
    pub step_ns: f64,
    pub hw_ns: f64,
}

/// One range: step(s) = step_ns + (s − 1)·G for from_bytes ≤ s ≤ to_bytes.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[allow(non_snake_case)]
pub struct ExchangeRange {
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub step_ns: f64,
    pub G_ns_per_byte: f64,
}

impl ExchangeRange {
    /// The range's line at `size_bytes`.
    pub fn at(&self, size_bytes: u64) -> f64 {
        netgauge::line_ns(self.step_ns, self.G_ns_per_byte, size_bytes).max(0.0)
    }
}

/// What the exchange sweep of `ranks` ranks measured, fitted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ExchangeFit {
    pub ranks: usize,
    pub points: Vec<ExchangePoint>,
    pub ranges: Vec<ExchangeRange>,
}

impl ExchangeFit {
    /// The fitted step time at `size_bytes` (the range containing it; below
    /// the first range the first, above the last the last). None without
    /// ranges.
    pub fn step_ns(&self, size_bytes: u64) -> Option<f64> {
        let r = self
            .ranges
            .iter()
            .rev()
            .find(|r| r.from_bytes <= size_bytes)
            .or(self.ranges.first())?;
        Some(r.at(size_bytes))
    }
}

/// Median and 95 % half-width of every size with at least one finite
/// round, sorted by size.
pub fn exchange_points(samples: &[ExchangeSamples]) -> Vec<ExchangePoint> {
    let mut pts: Vec<ExchangePoint> = samples
        .iter()
        .filter_map(|s| {
            let v = stats::times(&s.step_ns);
            if v.is_empty() {
                return None;
            }
            let (lo, hi) = stats::median_ci95(&v);
            Some(ExchangePoint {
                size_bytes: s.size_bytes,
                step_ns: stats::median(&v),
                hw_ns: (hi - lo) / 2.0,
            })
        })
        .collect();
    pts.sort_by_key(|p| p.size_bytes);
    pts.dedup_by_key(|p| p.size_bytes);
    pts
}

/// Fit the exchange sweep of `ranks` ranks. None without points.
pub fn fit_exchange(ranks: usize, samples: &[ExchangeSamples]) -> Option<ExchangeFit> {
    let points = exchange_points(samples);
    if points.is_empty() {
        return None;
    }
    let xs: Vec<f64> = points
        .iter()
        .map(|p| p.size_bytes.saturating_sub(1) as f64)
        .collect();
    let ys: Vec<f64> = points.iter().map(|p| p.step_ns).collect();
    let changes = segment::optimal_bic_at_most(&xs, &ys, MIN_RANGE_POINTS, MAX_RANGES);
    let mut bounds = Vec::with_capacity(changes.len() + 2);
    bounds.push(0);
    bounds.extend(changes);
    bounds.push(points.len());
    let ranges = bounds
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            let ws = rel_weights(ys[a..b].iter().copied());
            // A range above the first is only used over its own sizes, so
            // its intercept at s = 1 may be negative (a knee); a falling
            // line is noise and becomes the weighted mean.
            let mut line = line_or_mean(&xs[a..b], &ys[a..b], &ws);
            if line.slope < 0.0 || (a == 0 && line.intercept < 0.0) {
                line = non_negative(line, &xs[a..b], &ys[a..b], &ws);
            }
            ExchangeRange {
                from_bytes: if a == 0 { 1 } else { points[a].size_bytes },
                to_bytes: if b == points.len() {
                    points[b - 1].size_bytes
                } else {
                    points[b].size_bytes - 1
                },
                step_ns: line.intercept,
                G_ns_per_byte: line.slope,
            }
        })
        .collect();
    Some(ExchangeFit {
        ranks,
        points,
        ranges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(f: impl Fn(u64) -> f64, jitter: f64) -> Vec<ExchangeSamples> {
        let mut rng = stats::seeded_rng(7);
        let mut sizes = vec![1u64];
        while *sizes.last().unwrap() < 4 << 20 {
            let s = *sizes.last().unwrap();
            sizes.push(((s as f64) * std::f64::consts::SQRT_2).ceil() as u64);
        }
        sizes
            .into_iter()
            .map(|s| ExchangeSamples {
                size_bytes: s,
                steps_per_round: 1,
                step_ns: (0..21)
                    .map(|_| f(s) * (1.0 + jitter * stats::standard_normal(&mut rng)))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn recovers_a_rendezvous_step_and_a_cache_knee() {
        // Eager 3 µs + 0.3 ns/B to 4 KiB; rendezvous 12 µs + 0.15 ns/B to
        // 1 MiB; beyond, 0.35 ns/B (buffers out of cache), continuous.
        let f = |s: u64| {
            let x = (s - 1) as f64;
            if s <= 4096 {
                3000.0 + 0.3 * x
            } else if s <= 1 << 20 {
                12_000.0 + 0.15 * x
            } else {
                12_000.0 + 0.15 * (1 << 20) as f64 + 0.35 * (x - (1 << 20) as f64)
            }
        };
        let fit = fit_exchange(4, &sweep(f, 0.02)).unwrap();
        assert!(fit.ranges.len() >= 3, "{:?}", fit.ranges);
        for s in [8u64, 512, 4096, 8192, 65536, 1 << 20, 2 << 20, 4 << 20] {
            let got = fit.step_ns(s).unwrap();
            let err = (got - f(s)).abs() / f(s);
            assert!(err < 0.1, "{s} B: fitted {got:.0} ns, true {:.0} ns", f(s));
        }
        // The step is a range boundary: 4096 eager, the next size above not.
        let first_rdv = fit
            .ranges
            .iter()
            .find(|r| r.from_bytes > 4096)
            .expect("a range above 4 KiB");
        assert!(first_rdv.from_bytes <= 5793, "{:?}", fit.ranges);
        assert!(fit.ranges.len() <= MAX_RANGES);
    }

    #[test]
    fn one_line_stays_one_range() {
        let fit = fit_exchange(4, &sweep(|s| 2000.0 + 0.2 * (s - 1) as f64, 0.02)).unwrap();
        assert_eq!(fit.ranges.len(), 1, "{:?}", fit.ranges);
        let r = fit.ranges[0];
        assert!((r.G_ns_per_byte - 0.2).abs() < 0.01, "{r:?}");
        assert_eq!(r.from_bytes, 1);
        assert_eq!(r.to_bytes, fit.points.last().unwrap().size_bytes);
    }

    #[test]
    fn rounds_that_are_not_numbers_are_dropped() {
        let s = [
            ExchangeSamples {
                size_bytes: 8,
                steps_per_round: 4,
                step_ns: vec![f64::NAN, 100.0, 110.0, -1.0, 105.0],
            },
            ExchangeSamples {
                size_bytes: 16,
                steps_per_round: 4,
                step_ns: vec![f64::INFINITY],
            },
        ];
        let p = exchange_points(&s);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].step_ns, 105.0);
        assert!(fit_exchange(4, &[]).is_none());
    }
}
