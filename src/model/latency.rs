//! The distribution of the half round trip PRTT(1,0,s)/2 at a few small
//! sizes: nearest-rank percentiles (what the segment publishes) and a
//! log-spaced histogram (what `ngctl probe --histogram` shows).
//!
//! Nearest rank: the p-th percentile of n sorted samples is the sample of
//! rank ⌈p/100 · n⌉ (1-based), so every percentile is a measured value and
//! a percentile beyond the samples' resolution is the maximum (p99.9 of
//! fewer than 1000 samples is the largest sample). The sample count is
//! published beside the percentiles so a reader can tell.

use netgauge::ext::LatencyPercentiles;
use serde::{Deserialize, Serialize};

/// The half round trips of one size, ns, in the order measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LatencySamples {
    pub size_bytes: u64,
    /// PRTT(1,0,s)/2 of every timed round trip.
    pub half_rtt_ns: Vec<f64>,
}

/// The nearest-rank percentile of ascending `sorted` at `per_mille`
/// thousandths (500: the median, 999: p99.9), NaN when empty. The rank
/// ⌈per_mille · n / 1000⌉ is computed in integers: in floating point
/// 0.999 · 1000 rounds up past 999 and would make p99.9 the maximum.
pub fn nearest_rank(sorted: &[f64], per_mille: u64) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    let rank = (per_mille.saturating_mul(n as u64)).div_ceil(1000) as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// min, p50, p90, p99, p99.9 and max of `s`; None when it has no finite,
/// non-negative sample (non-finite or negative samples are left out: a
/// time is never negative, and such a sample is a clock fault).
pub fn percentiles(s: &LatencySamples) -> Option<LatencyPercentiles> {
    let mut v = super::stats::times(&s.half_rtt_ns);
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(LatencyPercentiles {
        size_bytes: s.size_bytes,
        samples: v.len() as u64,
        min_ns: v[0],
        p50_ns: nearest_rank(&v, 500),
        p90_ns: nearest_rank(&v, 900),
        p99_ns: nearest_rank(&v, 990),
        p999_ns: nearest_rank(&v, 999),
        max_ns: v[v.len() - 1],
    })
}

/// The percentiles of every size, sizes increasing, sizes without a usable
/// sample left out.
pub fn all_percentiles(runs: &[LatencySamples]) -> Vec<LatencyPercentiles> {
    let mut out: Vec<LatencyPercentiles> = runs.iter().filter_map(percentiles).collect();
    out.sort_by_key(|p| p.size_bytes);
    out.dedup_by_key(|p| p.size_bytes);
    out
}

/// Histogram bins per decade of time: each bin is 10^(1/10) ≈ 1.26 times
/// as wide as the one before, fine enough to show a mode, coarse enough
/// that a thousand samples fill them.
pub const BINS_PER_DECADE: u32 = 10;

/// One histogram bin: samples with `lo_ns` ≤ x < `hi_ns`.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Bin {
    pub lo_ns: f64,
    pub hi_ns: f64,
    pub count: u64,
}

/// A log-spaced histogram of `s`: bins [10^(k/10), 10^((k+1)/10)) ns from
/// the one that holds the smallest sample to the one that holds the
/// largest, empty bins between them included (a gap between two modes
/// shows). Samples below 1 ns fall in the first bin, [1, 1.26) ns.
pub fn histogram(s: &LatencySamples) -> Vec<Bin> {
    let per = f64::from(BINS_PER_DECADE);
    let bin_of = |x: f64| (x.max(1.0).log10() * per).floor() as i64;
    let edge = |k: i64| 10f64.powf(k as f64 / per);
    let xs = super::stats::times(&s.half_rtt_ns);
    let (Some(lo), Some(hi)) = (
        xs.iter().map(|&x| bin_of(x)).min(),
        xs.iter().map(|&x| bin_of(x)).max(),
    ) else {
        return Vec::new();
    };
    let mut bins: Vec<Bin> = (lo..=hi)
        .map(|k| Bin {
            lo_ns: edge(k),
            hi_ns: edge(k + 1),
            count: 0,
        })
        .collect();
    for &x in &xs {
        // The index is within 0..=hi−lo: lo and hi are the extremes of bin_of.
        bins[(bin_of(x) - lo) as usize].count += 1;
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(xs: &[f64]) -> LatencySamples {
        LatencySamples {
            size_bytes: 1,
            half_rtt_ns: xs.to_vec(),
        }
    }

    #[test]
    fn nearest_rank_of_1_to_1000() {
        let xs: Vec<f64> = (1..=1000).map(f64::from).collect();
        let p = percentiles(&samples(&xs)).unwrap();
        assert_eq!(p.samples, 1000);
        assert_eq!(
            (p.min_ns, p.p50_ns, p.p90_ns, p.p99_ns, p.p999_ns, p.max_ns),
            (1.0, 500.0, 900.0, 990.0, 999.0, 1000.0)
        );
    }

    #[test]
    fn p999_of_200_samples_is_the_max() {
        // Shuffled order: the percentiles sort.
        let xs: Vec<f64> = (0..200).map(|i| f64::from((i * 37) % 200 + 1)).collect();
        let p = percentiles(&samples(&xs)).unwrap();
        assert_eq!(p.p999_ns, 200.0);
        assert_eq!(p.p999_ns, p.max_ns);
        assert_eq!(p.p99_ns, 198.0);
        assert_eq!(p.p50_ns, 100.0);
    }

    #[test]
    fn bad_samples_are_left_out_and_empty_gives_none() {
        assert!(percentiles(&samples(&[])).is_none());
        assert!(percentiles(&samples(&[f64::NAN, -1.0])).is_none());
        let p = percentiles(&samples(&[f64::NAN, 5.0, -3.0, 7.0])).unwrap();
        assert_eq!((p.samples, p.min_ns, p.max_ns), (2, 5.0, 7.0));
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let p = percentiles(&samples(&[42.0])).unwrap();
        assert_eq!(
            (p.min_ns, p.p50_ns, p.p999_ns, p.max_ns),
            (42.0, 42.0, 42.0, 42.0)
        );
    }

    #[test]
    fn histogram_counts_every_sample_in_log_bins() {
        let mut xs = vec![1000.0; 90];
        xs.extend([10_000.0; 10]);
        let h = histogram(&samples(&xs));
        assert_eq!(h.iter().map(|b| b.count).sum::<u64>(), 100);
        // 1 µs to 10 µs is one decade: 11 bins, the nine between empty.
        assert_eq!(h.len(), 11);
        assert_eq!((h[0].count, h[10].count), (90, 10));
        assert!(h[1..10].iter().all(|b| b.count == 0));
        for b in &h {
            assert!(b.lo_ns < b.hi_ns);
            let ratio = b.hi_ns / b.lo_ns;
            assert!((ratio - 10f64.powf(0.1)).abs() < 1e-9);
        }
        assert!(h[0].lo_ns <= 1000.0 && 1000.0 < h[0].hi_ns);
        assert!(h[10].lo_ns <= 10_000.0 && 10_000.0 < h[10].hi_ns);
        assert!(histogram(&samples(&[])).is_empty());
    }

    #[test]
    fn all_percentiles_sorts_by_size() {
        let runs = [
            LatencySamples {
                size_bytes: 64,
                half_rtt_ns: vec![3.0],
            },
            LatencySamples {
                size_bytes: 1,
                half_rtt_ns: vec![1.0],
            },
            LatencySamples {
                size_bytes: 8,
                half_rtt_ns: vec![],
            },
        ];
        let p = all_percentiles(&runs);
        assert_eq!(p.iter().map(|p| p.size_bytes).collect::<Vec<_>>(), [1, 64]);
    }
}
