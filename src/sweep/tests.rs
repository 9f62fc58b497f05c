//! Tests of the adaptive sweep.

use super::loss::MAX_WAIT;
use super::*;

#[test]
fn the_wait_follows_the_median_pace_not_one_slow_round() {
    let base = Duration::from_millis(250);
    let mut g = LossGuard::new(4);
    // Nothing learned yet, or only latency-bound rounds: the base.
    assert_eq!(g.wait(base, 8, 1 << 20), base);
    g.paced(1, 1024, 1e9);
    assert_eq!(g.wait(base, 8, 1 << 20), base);
    // A link at 200 ns/B (40 Mbit/s): 8 × 1 MiB is predicted at 1.68 s.
    for _ in 0..10 {
        g.paced(1, 1 << 20, 200.0 * f64::from(1 << 20));
    }
    let w = g.wait(base, 8, 1 << 20).as_secs_f64();
    assert!((w - 4.0 * 1.677_721_6).abs() < 1e-3, "{w}");
    // One round slowed 100× leaves it; the cap bounds any wait.
    g.paced(1, 1 << 20, 2e4 * f64::from(1 << 20));
    assert!((g.wait(base, 8, 1 << 20).as_secs_f64() - w).abs() < 1e-9);
    assert_eq!(g.wait(base, 64, 64 << 20), MAX_WAIT);
    // A fast link never waits less than the base.
    let mut fast = LossGuard::new(4);
    fast.paced(8, 1 << 20, 0.1 * 8.0 * f64::from(1 << 20));
    assert_eq!(fast.wait(base, 8, 1 << 20), base);
}

#[test]
fn adaptive_order_visits_every_size_once_and_spreads_neighbours() {
    for n in [1usize, 2, 3, 10, 33, 40, 41, 64] {
        let order: Vec<usize> = measurement_order(n, Schedule::Adaptive).collect();
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        assert_eq!(order.first(), Some(&0).filter(|_| n > 0), "n = {n}");
        if n >= 10 {
            // Sizes measured one after the other are far apart in the grid.
            let near = order.windows(2).filter(|w| w[0].abs_diff(w[1]) < 3).count();
            assert!(near * 10 <= n, "n = {n}: {order:?}");
        }
    }
    let netgauge: Vec<usize> = measurement_order(5, Schedule::Netgauge).collect();
    assert_eq!(netgauge, vec![0, 1, 2, 3, 4]);
}

#[test]
fn latency_sizes_are_small_grid_sizes_spread_over_the_grid() {
    let on = |min: u64, max: u64, count: usize| SweepConfig {
        latency_samples: 10,
        latency_sizes: count,
        min_size_bytes: min,
        max_size_bytes: max,
        ..SweepConfig::default()
    };
    assert_eq!(latency_sizes(&on(1, 1 << 17, 4)), [1, 4, 16, 64]);
    assert_eq!(latency_sizes(&on(1, 1 << 17, 1)), [1]);
    assert_eq!(latency_sizes(&on(1, 1 << 17, 100)).len(), 8);
    // A sweep that stops below 64 B: its sizes.
    assert_eq!(latency_sizes(&on(1, 3, 4)), [1, 2, 3]);
    // One that starts above: none.
    assert!(latency_sizes(&on(100, 4096, 4)).is_empty());
    // Off.
    let off = SweepConfig::default();
    assert!(latency_sizes(&off).is_empty());
}
