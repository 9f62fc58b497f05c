//! Least squares: straight lines (ordinary and weighted, centred two-pass),
//! an online weighted line accumulator for the O(n²) segmentation, and a
//! small multi-column solver (modified Gram–Schmidt QR) for the LogfP hinge.

/// A fitted line y ≈ intercept + slope·x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Line {
    pub intercept: f64,
    pub slope: f64,
    /// Sum of squared residuals (weighted residuals for weighted fits).
    pub sse: f64,
    /// Number of points fitted.
    pub n: usize,
}

impl Line {
    pub fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// Ordinary least-squares line. None if the lengths differ or there are
/// fewer than 2 distinct x (or a non-finite value).
pub fn fit_line(xs: &[f64], ys: &[f64]) -> Option<Line> {
    if xs.len() != ys.len() {
        return None;
    }
    fit_core(xs, ys, |_| 1.0)
}

/// Weighted least-squares line minimising Σ w_i (y_i − a − b·x_i)². Weights
/// must be finite and > 0 (None otherwise). `sse` is the weighted SSE.
pub fn fit_line_weighted(xs: &[f64], ys: &[f64], ws: &[f64]) -> Option<Line> {
    if xs.len() != ys.len() || xs.len() != ws.len() {
        return None;
    }
    if ws.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
        return None;
    }
    fit_core(xs, ys, |i| ws[i])
}

/// Theil–Sen line: the slope is the median of the slopes between every pair
/// of points with distinct x, the intercept the median of y − slope·x. Robust
/// to up to ~29 % of the points being outliers, which a median of round
/// trips measured during a burst of interference is. `sse` is the plain SSE
/// about that line. None if there are fewer than 2 distinct x, the lengths
/// differ, or a value is not finite.
pub fn theil_sen(xs: &[f64], ys: &[f64]) -> Option<Line> {
    if xs.len() != ys.len() || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    let n = xs.len();
    let mut slopes = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            if xs[j] != xs[i] {
                slopes.push((ys[j] - ys[i]) / (xs[j] - xs[i]));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let slope = super::stats::median_in_place(&mut slopes);
    let mut resid: Vec<f64> = xs.iter().zip(ys).map(|(x, y)| y - slope * x).collect();
    let intercept = super::stats::median_in_place(&mut resid);
    let sse = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    Some(Line {
        intercept,
        slope,
        sse,
        n,
    })
}

fn fit_core(xs: &[f64], ys: &[f64], w: impl Fn(usize) -> f64) -> Option<Line> {
    let n = xs.len();
    if n < 2 || xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    if xs.iter().all(|x| *x == xs[0]) {
        return None;
    }
    // Pass 1: weighted means. Pass 2: centred moments (no cancellation
    // between large raw sums).
    let (mut sw, mut swx, mut swy) = (0.0, 0.0, 0.0);
    for i in 0..n {
        let wi = w(i);
        sw += wi;
        swx += wi * xs[i];
        swy += wi * ys[i];
    }
    let (mx, my) = (swx / sw, swy / sw);
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for i in 0..n {
        let wi = w(i);
        let dx = xs[i] - mx;
        sxx += wi * dx * dx;
        sxy += wi * dx * (ys[i] - my);
    }
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let line = Line {
        intercept,
        slope,
        sse: 0.0,
        n,
    };
    // Residuals directly: exact zero on exact data up to rounding.
    let sse = (0..n)
        .map(|i| {
            let r = ys[i] - line.at(xs[i]);
            w(i) * r * r
        })
        .sum();
    Some(Line { sse, ..line })
}

/// Online weighted line fit (West's weighted Welford update of the means and
/// co-moments): push points one at a time and read the SSE of the best line
/// through all points so far in O(1). Numerically stable (no raw-sum
/// cancellation), which is what the O(n²) segmentation needs.
#[derive(Clone, Copy, Debug, Default)]
pub struct OnlineLine {
    sw: f64,
    mx: f64,
    my: f64,
    sxx: f64,
    sxy: f64,
    syy: f64,
    n: usize,
}

impl OnlineLine {
    pub fn push(&mut self, x: f64, y: f64, w: f64) {
        self.n += 1;
        self.sw += w;
        let r = w / self.sw;
        let dx = x - self.mx;
        let dy = y - self.my;
        self.mx += r * dx;
        self.my += r * dy;
        self.sxx += w * dx * (x - self.mx);
        self.sxy += w * dx * (y - self.my);
        self.syy += w * dy * (y - self.my);
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Weighted SSE of the best line (of the mean if all x are equal); ≥ 0.
    pub fn sse(&self) -> f64 {
        let sse = if self.sxx > 0.0 {
            self.syy - self.sxy * self.sxy / self.sxx
        } else {
            self.syy
        };
        sse.max(0.0)
    }
}

/// Result of [`fit_multi`].
#[derive(Clone, Debug, PartialEq)]
pub struct MultiFit {
    pub coef: Vec<f64>,
    pub sse: f64,
    /// (XᵀX)⁻¹, row-major p×p: multiply by σ̂² = sse/(n−p) for the
    /// covariance of `coef`.
    pub xtx_inv: Vec<f64>,
}

/// Least squares y ≈ Σ_j coef_j · cols[j] by modified Gram–Schmidt QR.
/// None if the columns are (numerically) rank deficient, lengths differ, or
/// n < p.
pub fn fit_multi(cols: &[Vec<f64>], ys: &[f64]) -> Option<MultiFit> {
    let p = cols.len();
    let n = ys.len();
    if p == 0 || n < p || cols.iter().any(|c| c.len() != n) {
        return None;
    }
    let mut q: Vec<Vec<f64>> = cols.to_vec();
    let mut r = vec![0.0; p * p];
    for j in 0..p {
        let orig_norm = cols[j].iter().map(|v| v * v).sum::<f64>().sqrt();
        let (done, rest) = q.split_at_mut(j);
        let qj = &mut rest[0];
        for (k, qk) in done.iter().enumerate() {
            let d: f64 = qk.iter().zip(qj.iter()).map(|(a, b)| a * b).sum();
            r[k * p + j] = d;
            qj.iter_mut().zip(qk).for_each(|(a, b)| *a -= d * b);
        }
        let norm = qj.iter().map(|v| v * v).sum::<f64>().sqrt();
        // Rank deficient (or NaN): the column is (nearly) in the span of the
        // previous ones.
        if norm.is_nan() || norm <= 1e-10 * orig_norm {
            return None;
        }
        r[j * p + j] = norm;
        q[j].iter_mut().for_each(|v| *v /= norm);
    }
    // coef = R⁻¹ Qᵀ y (back substitution).
    let qty: Vec<f64> = (0..p)
        .map(|j| (0..n).map(|i| q[j][i] * ys[i]).sum())
        .collect();
    let mut coef = vec![0.0; p];
    for j in (0..p).rev() {
        let s: f64 = (j + 1..p).map(|k| r[j * p + k] * coef[k]).sum();
        coef[j] = (qty[j] - s) / r[j * p + j];
    }
    let sse = (0..n)
        .map(|i| {
            let fit: f64 = (0..p).map(|j| coef[j] * cols[j][i]).sum();
            (ys[i] - fit).powi(2)
        })
        .sum();
    // (XᵀX)⁻¹ = R⁻¹ R⁻ᵀ.
    let mut rinv = vec![0.0; p * p];
    for c in 0..p {
        for j in (0..p).rev() {
            let rhs = if j == c { 1.0 } else { 0.0 };
            let s: f64 = (j + 1..p).map(|k| r[j * p + k] * rinv[k * p + c]).sum();
            rinv[j * p + c] = (rhs - s) / r[j * p + j];
        }
    }
    let mut xtx_inv = vec![0.0; p * p];
    for a in 0..p {
        for b in 0..p {
            xtx_inv[a * p + b] = (0..p).map(|k| rinv[a * p + k] * rinv[b * p + k]).sum();
        }
    }
    Some(MultiFit { coef, sse, xtx_inv })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_line_recovered_far_from_origin() {
        // Large offsets: an uncentred normal-equation solver loses digits here.
        let xs: Vec<f64> = (0..50).map(|i| 1e9 + f64::from(i)).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 3.5 + 0.25 * (x - 1e9)).collect();
        let l = fit_line(&xs, &ys).unwrap();
        assert!((l.slope - 0.25).abs() < 1e-9, "{l:?}");
        assert!((l.at(1e9) - 3.5).abs() < 1e-6, "{l:?}");
        assert!(l.sse < 1e-9);
        assert_eq!(l.n, 50);
    }

    #[test]
    fn ols_matches_hand_computation() {
        // y = 1, 3, 2, 5 at x = 0..3: slope = 1.1, intercept = 1.1.
        let l = fit_line(&[0.0, 1.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 5.0]).unwrap();
        assert!((l.slope - 1.1).abs() < 1e-12);
        assert!((l.intercept - 1.1).abs() < 1e-12);
        // residuals −0.1, 0.8, −1.3, 0.6
        assert!((l.sse - 2.7).abs() < 1e-12);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit_line(&[1.0], &[2.0]).is_none());
        assert!(fit_line(&[1.0, 1.0, 1.0], &[2.0, 3.0, 4.0]).is_none());
        assert!(fit_line(&[1.0, 2.0], &[2.0]).is_none());
        assert!(fit_line(&[1.0, f64::NAN], &[2.0, 3.0]).is_none());
        assert!(fit_line_weighted(&[1.0, 2.0], &[2.0, 3.0], &[1.0, 0.0]).is_none());
        let l = fit_line(&[1.0, 2.0], &[2.0, 4.0]).unwrap();
        assert!((l.slope - 2.0).abs() < 1e-12 && l.sse < 1e-20);
    }

    #[test]
    fn weighted_fit_downweights_outlier() {
        let xs = [0.0, 1.0, 2.0, 3.0, 4.0];
        let ys = [0.0, 1.0, 2.0, 3.0, 40.0];
        let ols = fit_line(&xs, &ys).unwrap();
        let wls = fit_line_weighted(&xs, &ys, &[1.0, 1.0, 1.0, 1.0, 1e-9]).unwrap();
        assert!(ols.slope > 5.0);
        assert!((wls.slope - 1.0).abs() < 1e-6, "{wls:?}");
        // Equal weights reproduce OLS.
        let eq = fit_line_weighted(&xs, &ys, &[2.0; 5]).unwrap();
        assert!((eq.slope - ols.slope).abs() < 1e-12);
    }

    #[test]
    fn online_matches_batch() {
        let xs: Vec<f64> = (0..20).map(|i| f64::from(i * i)).collect();
        let ys: Vec<f64> = xs.iter().map(|x| 7.0 + 0.5 * x + (x * 0.7).sin()).collect();
        let ws: Vec<f64> = ys.iter().map(|y| 1.0 / (y * y)).collect();
        let mut acc = OnlineLine::default();
        for i in 0..xs.len() {
            acc.push(xs[i], ys[i], ws[i]);
            if i >= 1 {
                let b = fit_line_weighted(&xs[..=i], &ys[..=i], &ws[..=i]).unwrap();
                assert!((acc.sse() - b.sse).abs() <= 1e-12 + 1e-9 * b.sse, "i = {i}");
            }
        }
        assert_eq!(acc.n(), 20);
    }

    #[test]
    fn multi_fit_hinge_and_covariance() {
        // y = 2 + 0.5 p + 3·max(0, p − 4)
        let ps: Vec<f64> = (1..=10).map(f64::from).collect();
        let cols = vec![
            vec![1.0; 10],
            ps.clone(),
            ps.iter().map(|p| (p - 4.0).max(0.0)).collect(),
        ];
        let ys: Vec<f64> = ps
            .iter()
            .map(|p| 2.0 + 0.5 * p + 3.0 * (p - 4.0).max(0.0))
            .collect();
        let f = fit_multi(&cols, &ys).unwrap();
        for (c, t) in f.coef.iter().zip([2.0, 0.5, 3.0]) {
            assert!((c - t).abs() < 1e-10, "{:?}", f.coef);
        }
        assert!(f.sse < 1e-18);
        // (XᵀX)⁻¹ for the straight line x = 1..10: var(slope) = 1/Sxx = 1/82.5
        let g = fit_multi(&cols[..2], &ys).unwrap();
        assert!((g.xtx_inv[3] - 1.0 / 82.5).abs() < 1e-12);
        // Rank deficient: duplicate column.
        assert!(fit_multi(&[ps.clone(), ps.clone()], &ys).is_none());
    }
}
