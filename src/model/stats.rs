//! Robust summary statistics: median, quantiles, a distribution-free interval
//! of the median, and the seeded RNG helpers the bootstrap uses.
//!
//! Inputs are assumed NaN-free (they are measured durations). Nothing here
//! mutates its input; functions that need order statistics sort a local copy
//! (the model is not a hot path). The `*_in_place` variants exist for the
//! bootstrap, which reuses one scratch buffer per resample.

use super::Interval;
use rand::{Rng as _, SeedableRng};

/// The RNG used for resampling: small, fast, seedable, reproducible across
/// platforms (PCG 128-bit MCG, 64-bit output).
pub type Rng = rand_pcg::Pcg64Mcg;

/// A reproducible RNG from a 64-bit seed.
pub fn seeded_rng(seed: u64) -> Rng {
    Rng::seed_from_u64(seed)
}

/// A sorted copy (total order, so a stray NaN cannot panic the sort).
fn sorted_copy(xs: &[f64]) -> Vec<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile of already sorted data, linear interpolation between order
/// statistics (Hyndman & Fan type 7: h = (n−1)·q).
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    if n == 0 || q.is_nan() {
        return f64::NAN;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(n - 1);
    let frac = h - lo as f64;
    sorted[lo] + frac * (sorted[hi] - sorted[lo])
}

/// The samples of `xs` that can be times: finite and non-negative (a
/// negative or non-finite time is a clock fault, left out).
pub fn times(xs: &[f64]) -> Vec<f64> {
    xs.iter()
        .copied()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect()
}

/// Quantile `q` ∈ [0, 1] (clamped) with linear interpolation between order
/// statistics; NaN for empty input.
pub fn quantile(xs: &[f64], q: f64) -> f64 {
    quantile_sorted(&sorted_copy(xs), q)
}

/// Median (mean of the two middle order statistics for even n); NaN if empty.
pub fn median(xs: &[f64]) -> f64 {
    quantile(xs, 0.5)
}

/// Median computed by selection, reordering `buf` (no allocation). Same
/// definition as [`median`].
pub fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    if n == 0 {
        return f64::NAN;
    }
    let mid = n / 2;
    let (left, m, _) = buf.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *m;
    if n % 2 == 1 {
        upper
    } else {
        let lower = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        0.5 * (lower + upper)
    }
}

/// Median of a bootstrap resample of `src` (n draws with replacement),
/// using `scratch` as the buffer. NaN if `src` is empty.
pub fn resample_median(src: &[f64], rng: &mut Rng, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    if src.is_empty() {
        return f64::NAN;
    }
    scratch.extend((0..src.len()).map(|_| src[rng.gen_range(0..src.len())]));
    median_in_place(scratch)
}

/// One standard normal variate (Box–Muller). For synthetic data in tests and
/// benches; `rand_distr` is not a dependency.
pub fn standard_normal(rng: &mut Rng) -> f64 {
    // u1 in (0, 1] so ln(u1) is finite.
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Rank `j` (1-based) of the lower order statistic of the distribution-free
/// 95 % interval of the median: the largest j with P(B ≤ j−1) ≤ 0.025 for
/// B ~ Binomial(n, ½), so that [x_(j), x_(n+1−j)] covers the median with
/// probability 1 − 2·P(B ≤ j−1) ≥ 95 %. None when even [min, max] covers
/// with less than 95 % (n ≤ 5).
pub fn median_ci95_rank(n: usize) -> Option<usize> {
    if n == 0 {
        return None;
    }
    // Binomial(n, ½) pmf in log space: ln C(n,k) − n·ln 2 (no underflow).
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_c = 0.0_f64; // ln C(n, 0)
    let mut cdf = 0.0_f64; // P(B ≤ k)
    let mut j = None;
    for k in 0..n {
        cdf += (ln_c + ln_half_n).exp();
        if cdf <= 0.025 {
            j = Some(k + 1); // P(B ≤ j−1) with j−1 = k
        } else {
            break;
        }
        ln_c += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    j
}

/// Distribution-free 95 % interval of the median from order statistics
/// (binomial). For n ≤ 5 no pair of order statistics reaches 95 % coverage,
/// so the interval is (−∞, +∞): "not enough repetitions yet", which is what
/// the adaptive sampler needs to hear. Empty input → (NaN, NaN).
pub fn median_ci95(xs: &[f64]) -> Interval {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    match median_ci95_rank(xs.len()) {
        None => (f64::NEG_INFINITY, f64::INFINITY),
        Some(j) => {
            let s = sorted_copy(xs);
            (s[j - 1], s[xs.len() - j])
        }
    }
}

/// Relative half-width of [`median_ci95`]: (hi − lo) / 2 / |median|.
/// +∞ when the interval is unbounded or the median is 0; NaN if empty.
pub fn rel_halfwidth(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let (lo, hi) = median_ci95(xs);
    let m = median(xs).abs();
    if !(lo.is_finite() && hi.is_finite()) || m == 0.0 {
        return f64::INFINITY;
    }
    (hi - lo) / 2.0 / m
}

/// Percentile 95 % interval (2.5 % and 97.5 % quantiles) of bootstrap
/// replicates. (NaN, NaN) if empty.
pub fn percentile_ci95(replicates: &[f64]) -> Interval {
    let s = sorted_copy(replicates);
    (quantile_sorted(&s, 0.025), quantile_sorted(&s, 0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quantile_basic() {
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0]), 3.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        let xs = [10.0, 0.0, 30.0, 20.0, 40.0];
        assert_eq!(quantile(&xs, 0.0), 0.0);
        assert_eq!(quantile(&xs, 1.0), 40.0);
        assert_eq!(quantile(&xs, 0.25), 10.0);
        // h = 4·0.1 = 0.4 → 0 + 0.4·10
        assert!((quantile(&xs, 0.1) - 4.0).abs() < 1e-12);
        // out-of-range q is clamped
        assert_eq!(quantile(&xs, 2.0), 40.0);
        // input untouched
        assert_eq!(xs, [10.0, 0.0, 30.0, 20.0, 40.0]);
    }

    #[test]
    fn median_in_place_matches_median() {
        let mut rng = seeded_rng(7);
        for n in 1..40 {
            let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
            let mut buf = xs.clone();
            assert_eq!(median_in_place(&mut buf), median(&xs), "n = {n}");
        }
    }

    #[test]
    fn median_ci_ranks_match_binomial_tables() {
        // Classical table of the sign-test interval: n → rank j.
        assert_eq!(median_ci95_rank(5), None);
        assert_eq!(median_ci95_rank(6), Some(1)); // 1 − 2/64 = 0.969
        assert_eq!(median_ci95_rank(9), Some(2)); // P(B≤1) = 10/512 = 0.0195
        assert_eq!(median_ci95_rank(10), Some(2));
        assert_eq!(median_ci95_rank(20), Some(6)); // P(B≤5) = 0.0207
        assert_eq!(median_ci95_rank(30), Some(10)); // P(B≤9) = 0.0214
        assert_eq!(median_ci95_rank(100), Some(40)); // P(B≤39) = 0.0176
                                                     // Large n: no underflow, j ≈ n/2 − 0.98·√n.
        let j = median_ci95_rank(10_000).unwrap();
        assert!((4900..=4903).contains(&j), "{j}");
    }

    #[test]
    fn median_ci_and_rel_halfwidth() {
        assert_eq!(
            median_ci95(&[1.0, 2.0, 3.0]),
            (f64::NEG_INFINITY, f64::INFINITY)
        );
        assert_eq!(rel_halfwidth(&[1.0, 2.0, 3.0]), f64::INFINITY);
        let xs: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        assert_eq!(median_ci95(&xs), (2.0, 9.0));
        // (9 − 2)/2/5.5
        assert!((rel_halfwidth(&xs) - 7.0 / 11.0).abs() < 1e-12);
    }

    #[test]
    fn median_ci_covers_at_nominal_rate_and_shrinks() {
        // Coverage of the true median (0) of N(0,1) over many seeded trials.
        let mut rng = seeded_rng(42);
        let trials = 2000;
        let mut covered = 0;
        let mut width = [0.0; 2];
        for (k, n) in [15usize, 120].into_iter().enumerate() {
            for _ in 0..trials {
                let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
                let (lo, hi) = median_ci95(&xs);
                if k == 0 && lo <= 0.0 && 0.0 <= hi {
                    covered += 1;
                }
                width[k] += hi - lo;
            }
        }
        let rate = covered as f64 / trials as f64;
        assert!((0.94..=0.995).contains(&rate), "coverage {rate}");
        // ~√8 narrower with 8× the repetitions.
        assert!(width[1] < 0.45 * width[0], "{width:?}");
    }

    #[test]
    fn percentile_interval() {
        let xs: Vec<f64> = (0..=1000).map(f64::from).collect();
        let (lo, hi) = percentile_ci95(&xs);
        assert!((lo - 25.0).abs() < 1e-9 && (hi - 975.0).abs() < 1e-9);
    }

    #[test]
    fn resample_median_is_reproducible() {
        let src: Vec<f64> = (0..31).map(f64::from).collect();
        let mut scratch = Vec::new();
        let a: Vec<f64> = {
            let mut r = seeded_rng(3);
            (0..5)
                .map(|_| resample_median(&src, &mut r, &mut scratch))
                .collect()
        };
        let mut r = seeded_rng(3);
        for v in &a {
            assert_eq!(*v, resample_median(&src, &mut r, &mut scratch));
            assert!((0.0..=30.0).contains(v));
        }
        assert!(a.iter().any(|v| *v != 15.0));
    }
}
