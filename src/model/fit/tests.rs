//! Tests of the LogGP(S) fit.

use super::lines::{robust_rel_line, wsse};
use super::merge::merge_narrow;
use super::*;
use crate::model::stats::{seeded_rng, standard_normal, Rng};

/// Ground truth: LogGP with o_s = o_r = o and per-range (first size, g, G).
struct Truth {
    l_ns: f64,
    o_ns: f64,
    ranges: Vec<(u64, f64, f64)>,
    n: u32,
    /// Sizes from here on pay a rendezvous handshake (2L + 4o) per
    /// message, a single one too (both the request and the answer).
    handshake_from: Option<u64>,
}

/// Paper Table 2, Open MPI/openib (µs → ns).
fn openib() -> Truth {
    Truth {
        l_ns: 5960.0,
        o_ns: 4720.0,
        ranges: vec![(1, 5140.0, 0.73), (12289, 21390.0, 1.03)],
        n: 16,
        handshake_from: Some(12289),
    }
}

/// Geometric grid 1..=1 MiB, two sizes per octave from 4 on, plus the
/// protocol boundary 12288/12289.
fn sizes() -> Vec<u64> {
    let mut s = vec![1, 2];
    for k in 2..=20 {
        s.push(1 << k);
        if k < 20 {
            s.push(3 << (k - 1));
        }
    }
    s.extend([12288, 12289]);
    s.sort_unstable();
    s.dedup();
    s
}

/// PRTT samples from the LogGP equations (1), (2), (5) with d = PRTT(1,0,s)
/// and median-one multiplicative log-normal noise of `sigma`.
fn generate(t: &Truth, reps: usize, sigma: f64, seed: u64) -> Vec<SizeSamples> {
    let mut rng = seeded_rng(seed);
    let noisy = |v: f64, rng: &mut Rng| v * (sigma * standard_normal(rng)).exp();
    sizes()
        .into_iter()
        .map(|s| {
            let &(_, g, big_g) = t.ranges.iter().rev().find(|r| r.0 <= s).unwrap();
            let x = (s - 1) as f64;
            let g_all = g + x * big_g;
            let handshake = match t.handshake_from {
                Some(from) if s >= from => 2.0 * (2.0 * t.l_ns + 4.0 * t.o_ns),
                _ => 0.0,
            };
            let prtt1 = 2.0 * (t.l_ns + 2.0 * t.o_ns + x * big_g) + handshake;
            let d = prtt1;
            let k = f64::from(t.n - 1);
            let prttn = prtt1 + k * g_all;
            let prttd = prtt1 + k * (t.o_ns + d).max(g_all);
            SizeSamples {
                size_bytes: s,
                n: t.n,
                d_ns: d,
                prtt1_ns: (0..reps).map(|_| noisy(prtt1, &mut rng)).collect(),
                prttn_ns: (0..reps).map(|_| noisy(prttn, &mut rng)).collect(),
                prttd_ns: (0..reps).map(|_| noisy(prttd, &mut rng)).collect(),
                o_r_ns: (0..reps).map(|_| noisy(t.o_ns, &mut rng)).collect(),
            }
        })
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

#[test]
fn a_minority_of_bucket_medians_does_not_tilt_the_gap_line() {
    // The shape of a 400 Mbit/s token bucket's sweep: from 2 KiB on, the
    // gap is 20.2 ns/B plus a small constant; around 0.8–1.4 KiB the
    // medians land in either mode (bucket full: ~5.5 µs; empty: on the
    // line). Sizes as the sweep's bisection places them.
    let on_line = |s: f64| 1500.0 + 20.2 * (s - 1.0);
    let mut sizes = vec![799.0, 836.0, 855.0, 864.0, 869.0, 871.0, 1024.0, 1448.0];
    let low = [true, true, true, false, true, true, true, false];
    let mut ys: Vec<f64> = sizes
        .iter()
        .zip(low)
        .map(|(&s, l)| if l { 5500.0 } else { on_line(s) })
        .collect();
    let mut s = 2048.0;
    while s <= 1048576.0 {
        sizes.push(s);
        ys.push(on_line(s) * if sizes.len() % 2 == 0 { 1.004 } else { 0.996 });
        s *= std::f64::consts::SQRT_2;
    }
    let xs: Vec<f64> = sizes.iter().map(|s| s - 1.0).collect();
    let ws = rel_weights(ys.iter().copied());
    let ls = line_or_mean(&xs, &ys, &ws);
    let robust = robust_rel_line(&xs, &ys);
    // Least squares is pulled off by more than 3 %; the biweight stays within
    // 1 % of the slope and of the 1 MiB gap.
    assert!((ls.slope / 20.2 - 1.0).abs() > 0.03, "{ls:?}");
    assert!((robust.slope / 20.2 - 1.0).abs() < 0.01, "{robust:?}");
    let x = 1048575.0;
    assert!((robust.at(x) / on_line(1048576.0) - 1.0).abs() < 0.01);
    // Medians that all fit within the noise floor: exactly least squares.
    let ys: Vec<f64> = xs.iter().map(|&x| on_line(x + 1.0)).collect();
    let ws = rel_weights(ys.iter().copied());
    let (a, b) = (line_or_mean(&xs, &ys, &ws), robust_rel_line(&xs, &ys));
    assert_eq!((a.intercept, a.slope), (b.intercept, b.slope));
}

#[test]
fn fitted_times_are_never_negative() {
    // A range far from s = 1 whose points rise faster than proportionally:
    // the free line has a large negative intercept (o' < 0).
    let xs = [2.0e6, 3.0e6, 4.0e6];
    let ys = [250e3, 430e3, 810e3];
    let ws = rel_weights(ys.iter().copied());
    let free = line_or_mean(&xs, &ys, &ws);
    assert!(free.intercept < -100e3, "{free:?}");
    let c = non_negative(free, &xs, &ys, &ws);
    assert!(c.intercept >= 0.0 && c.slope >= 0.0, "{c:?}");
    // The constrained line is the best non-negative one: no grid point of
    // the quadrant does better.
    let best = wsse(&xs, &ys, &ws, c.intercept, c.slope);
    for i in 0..=40 {
        for j in 0..=40 {
            let (a, b) = (f64::from(i) * 10e3, f64::from(j) * 0.01);
            assert!(wsse(&xs, &ys, &ws, a, b) >= best * (1.0 - 1e-9), "{a} {b}");
        }
    }
    // A falling line (negative slope) becomes the weighted mean.
    let ys = [5.0, 4.0, 3.0];
    let ws = [1.0, 1.0, 1.0];
    let c = non_negative(line_or_mean(&xs, &ys, &ws), &xs, &ys, &ws);
    assert_eq!((c.intercept, c.slope), (4.0, 0.0));
    // A line that already fits the model is untouched.
    let ys = [
        2.0e6 * 0.5 + 100.0,
        3.0e6 * 0.5 + 100.0,
        4.0e6 * 0.5 + 100.0,
    ];
    let free = line_or_mean(&xs, &ys, &ws);
    let c = non_negative(free, &xs, &ys, &ws);
    assert_eq!((c.intercept, c.slope), (free.intercept, free.slope));
}

#[test]
fn points_from_medians() {
    let s = SizeSamples {
        size_bytes: 64,
        n: 3,
        d_ns: 100.0,
        prtt1_ns: vec![10.0, 1000.0, 12.0, 11.0, 9.0],
        prttn_ns: vec![30.0, 31.0, 29.0],
        prttd_ns: vec![240.0, 250.0, 260.0],
        o_r_ns: vec![],
    };
    let p = size_points(std::slice::from_ref(&s));
    assert_eq!(p.len(), 1);
    // median PRTT1 = 11 (the outlier 1000 does not matter)
    assert!((p[0].half_rtt_ns - 5.5).abs() < 1e-12);
    assert!((p[0].gap_ns - 9.5).abs() < 1e-12); // (30 − 11)/2
    assert!((p[0].o_s_ns - 19.5).abs() < 1e-12); // (250−11)/2 − 100
    assert_eq!(p[0].o_r_ns, 0.0);
    // unusable sizes are skipped, order is by size
    let mut a = s.clone();
    a.size_bytes = 8;
    let mut bad = s.clone();
    bad.prttn_ns.clear();
    let p = size_points(&[s, bad, a]);
    assert_eq!(
        p.iter().map(|p| p.size_bytes).collect::<Vec<_>>(),
        vec![8, 64]
    );
}

#[test]
fn exact_openib_recovered() {
    let t = openib();
    let fit = fit_loggp(&generate(&t, 5, 0.0, 1));
    assert_eq!(fit.changes_lookahead, vec![12289]);
    assert_eq!(fit.changes_optimal, vec![12289]);
    assert_eq!(fit.ranges.len(), 2);
    for (r, &(from, g, big_g)) in fit.ranges.iter().zip(&t.ranges) {
        assert_eq!(r.from_bytes, from);
        assert!(rel(r.g_ns, g) < 0.01, "{r:?}");
        assert!(rel(r.G_ns_per_byte, big_g) < 0.01, "{r:?}");
        assert!(rel(r.o_s_ns, t.o_ns) < 0.01, "{r:?}");
        assert!(rel(r.o_r_ns, t.o_ns) < 0.01, "{r:?}");
        assert!(r.O_s_ns_per_byte.abs() < 1e-6 && r.O_r_ns_per_byte.abs() < 1e-6);
    }
    assert_eq!(fit.ranges[0].to_bytes, 12288);
    assert_eq!(fit.ranges[1].to_bytes, 1 << 20);
    assert_eq!(fit.S_bytes, Some(12288));
    assert!(rel(fit.eel_ns, t.l_ns + 2.0 * t.o_ns) < 1e-9);
    assert!(rel(fit.L_ns, t.l_ns) < 0.01, "{}", fit.L_ns);
    assert!(!fit.L_negative);
    assert_eq!(fit.segmenter, Some(Segmenter::Lookahead)); // both agree
    assert_eq!(fit.points.len(), sizes().len());
}

#[test]
fn noisy_openib_recovered_without_spurious_changes() {
    let t = openib();
    for seed in 0..10 {
        let fit = fit_loggp(&generate(&t, 30, 0.02, 1000 + seed));
        let froms: Vec<u64> = fit.ranges.iter().map(|r| r.from_bytes).collect();
        assert_eq!(
            froms,
            vec![1, 12289],
            "seed {seed}: {:?}",
            fit.changes_optimal
        );
        assert_eq!(fit.S_bytes, Some(12288), "seed {seed}");
        for (r, &(_, g, big_g)) in fit.ranges.iter().zip(&t.ranges) {
            assert!(rel(r.g_ns, g) < 0.03, "seed {seed}: {r:?}");
            assert!(rel(r.G_ns_per_byte, big_g) < 0.03, "seed {seed}: {r:?}");
        }
        assert!(rel(fit.eel_ns, t.l_ns + 2.0 * t.o_ns) < 0.03);
        assert!(
            rel(fit.ranges[0].o_s_ns, t.o_ns) < 0.05,
            "{:?}",
            fit.ranges[0]
        );
        assert!(rel(fit.L_ns, t.l_ns) < 0.05, "seed {seed}: L {}", fit.L_ns);
    }
}

/// Every PRTT sample of `size` scaled by `factor` (a burst of
/// interference over that size).
fn slow_down(samples: &mut [SizeSamples], size: u64, factor: f64) {
    let s = samples.iter_mut().find(|s| s.size_bytes == size).unwrap();
    for v in s
        .prtt1_ns
        .iter_mut()
        .chain(&mut s.prttn_ns)
        .chain(&mut s.prttd_ns)
    {
        *v *= factor;
    }
}

#[test]
fn late_medians_on_either_side_do_not_move_s() {
    // One late size in the rendezvous range bends its line (the ranges
    // may split there); one late eager size below S. S stays 12288 and
    // the rendezvous range starts right above it.
    let mut s = generate(&openib(), 30, 0.01, 7);
    slow_down(&mut s, 24576, 1.8);
    slow_down(&mut s, 6144, 1.6);
    let fit = fit_loggp(&s);
    assert_eq!(fit.S_bytes, Some(12288), "{:?}", fit.ranges);
    assert!(
        fit.ranges.iter().any(|r| r.from_bytes == 12289),
        "{:?}",
        fit.ranges
    );
    assert!(
        fit.ranges.iter().any(|r| r.to_bytes == 12288),
        "{:?}",
        fit.ranges
    );
}

#[test]
fn two_late_sizes_right_below_s_are_not_s() {
    // The two sizes just below S slowed by a handshake's worth: the step
    // does not persist over three sizes there, so S stays where it is.
    let mut s = generate(&openib(), 30, 0.01, 8);
    slow_down(&mut s, 6144, 2.0);
    slow_down(&mut s, 8192, 2.0);
    assert_eq!(fit_loggp(&s).S_bytes, Some(12288));
}

#[test]
fn narrow_ranges_merge_but_not_across_s() {
    let sizes = [1u64, 2, 4, 8, 16, 32, 61, 62, 63, 64, 128, 256, 512, 1024];
    let points: Vec<SizePoint> = sizes
        .iter()
        .map(|&s| SizePoint {
            size_bytes: s,
            gap_ns: match s {
                0..=32 => 400.0,
                33..=64 => 300.0 + s as f64,
                _ => 500.0 + 2.0 * s as f64,
            },
            half_rtt_ns: 1000.0,
            ..SizePoint::default()
        })
        .collect();
    // 61–64 B spans less than an octave: merged into one neighbour.
    let merged = merge_narrow(&points, &[6, 10], None);
    assert_eq!(merged.len(), 1, "{merged:?}");
    // Not across a rendezvous boundary at either of its ends.
    assert_eq!(merge_narrow(&points, &[6, 10], Some(6)), vec![6]);
    assert_eq!(merge_narrow(&points, &[6, 10], Some(10)), vec![10]);
    // Wide ranges stay.
    assert_eq!(merge_narrow(&points, &[6], None), vec![6]);
}

#[test]
fn rendezvous_change_replaces_changes_next_to_it() {
    assert_eq!(with_change_at(&[4, 10, 20], 11), vec![4, 11, 20]);
    assert_eq!(with_change_at(&[4, 12, 20], 10), vec![4, 10, 20]);
    assert_eq!(with_change_at(&[8, 13], 10), vec![10, 13]);
    assert_eq!(with_change_at(&[], 5), vec![5]);
    assert_eq!(with_change_at(&[5], 5), vec![5]);
}

#[test]
fn single_protocol_has_no_s() {
    let t = Truth {
        l_ns: 2000.0,
        o_ns: 500.0,
        ranges: vec![(1, 800.0, 0.1)],
        n: 8,
        handshake_from: None,
    };
    let fit = fit_loggp(&generate(&t, 30, 0.01, 5));
    assert_eq!(fit.ranges.len(), 1, "{:?}", fit.changes_optimal);
    assert_eq!(fit.S_bytes, None);
    assert!(rel(fit.ranges[0].g_ns, 800.0) < 0.03);
}

#[test]
fn small_change_is_not_rendezvous() {
    // A bandwidth change (G doubles) with a small g step: a protocol
    // range, but no rendezvous threshold.
    let t = Truth {
        l_ns: 2000.0,
        o_ns: 500.0,
        ranges: vec![(1, 800.0, 0.1), (65537, 1000.0, 0.2)],
        n: 8,
        handshake_from: None,
    };
    let fit = fit_loggp(&generate(&t, 5, 0.0, 5));
    assert_eq!(fit.ranges.len(), 2);
    assert_eq!(fit.ranges[1].from_bytes, 65537 + 32767); // first sampled size above
    assert_eq!(fit.S_bytes, None);
}

#[test]
fn negative_l_is_flagged() {
    // o_s measured larger than EEL allows (overlap of o and L).
    let mut s = generate(&openib(), 5, 0.0, 1);
    for x in &mut s {
        x.o_r_ns.iter_mut().for_each(|v| *v *= 3.0);
    }
    let fit = fit_loggp(&s);
    assert!(fit.L_ns < 0.0 && fit.L_negative);
}

#[test]
fn degenerate_sweeps_do_not_panic() {
    let f = fit_loggp(&[]);
    assert!(f.ranges.is_empty() && f.eel_ns.is_nan());
    let one = generate(&openib(), 3, 0.0, 1).remove(0);
    let f = fit_loggp(std::slice::from_ref(&one));
    assert_eq!(f.ranges.len(), 1);
    assert!(rel(f.ranges[0].g_ns, 5140.0) < 1e-9);
    assert!(ci95_loggp(&[], 10, 1).is_empty());
    assert!(ci95_loggp(&[one], 0, 1).is_empty());
}

const BOOT_TRUTH: [(&str, f64); 7] = [
    ("eel_ns", 5960.0 + 2.0 * 4720.0),
    ("g_ns", 5140.0),
    ("G_ns_per_byte", 0.73),
    ("ranges[1].g_ns", 21390.0),
    ("ranges[1].G_ns_per_byte", 1.03),
    ("o_r_ns", 4720.0),
    ("L_ns", 5960.0),
];

#[test]
fn bootstrap_covers_truth() {
    // Coverage over 20 independent noisy sweeps (nominal 95 %; the
    // bootstrap of a median from 20 repetitions runs a little under).
    let t = openib();
    let mut hits = [0usize; BOOT_TRUTH.len()];
    for seed in 0..20 {
        let ci = ci95_loggp(&generate(&t, 20, 0.03, 500 + seed), 200, seed);
        for (h, (k, v)) in hits.iter_mut().zip(BOOT_TRUTH) {
            let (lo, hi) = ci[k];
            assert!(lo < hi, "{k}: [{lo}, {hi}]");
            if lo <= v && v <= hi {
                *h += 1;
            }
        }
    }
    for (h, (k, _)) in hits.iter().zip(BOOT_TRUTH) {
        assert!(*h >= 16, "{k}: covered {h} of 20");
    }
}

#[test]
fn bootstrap_shrinks_with_repetitions() {
    let t = openib();
    // Widths summed over 4 sweeps each (one sweep's bootstrap of a median
    // from few repetitions is lumpy: its width follows the spacing of the
    // middle order statistics it happened to draw).
    let width = |reps: usize, seed: u64| {
        let ci = ci95_loggp(&generate(&t, reps, 0.03, seed), 200, seed);
        BOOT_TRUTH.map(|(k, _)| ci[k].1 - ci[k].0)
    };
    let (mut w_few, mut w_many) = ([0.0; BOOT_TRUTH.len()], [0.0; BOOT_TRUTH.len()]);
    for seed in 0..4 {
        for (acc, w) in w_few.iter_mut().zip(width(16, 70 + seed)) {
            *acc += w;
        }
        for (acc, w) in w_many.iter_mut().zip(width(128, 80 + seed)) {
            *acc += w;
        }
    }
    for (i, (k, _)) in BOOT_TRUTH.iter().enumerate() {
        // 8× the repetitions: ~√8 ≈ 2.8× narrower
        assert!(
            w_many[i] < 0.6 * w_few[i],
            "{k}: {} vs {}",
            w_many[i],
            w_few[i]
        );
    }
    let ci_few = ci95_loggp(&generate(&t, 12, 0.03, 77), 20, 9);
    assert_eq!(ci_few.len(), 6 + 2 * 6);
    assert!(ci_few.contains_key("ranges[0].O_r_ns_per_byte"));
    // reproducible
    let few = generate(&t, 12, 0.03, 77);
    assert_eq!(ci95_loggp(&few, 50, 3), ci95_loggp(&few, 50, 3));
}
