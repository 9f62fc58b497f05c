//! Tests of the adaptive sweep.

use super::loss::MAX_WAIT;
use super::*;
use crate::clock::VirtualClock;
use crate::transport::{Caps, Counters, Kind, Meta, Received};

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

/// A virtual link's receive of an answer of `bytes` from peer 0: the
/// clock advances to the pending answer's time, or by the whole timeout
/// when none is pending (a lost round).
fn answer_at(
    clock: &VirtualClock,
    at: Option<f64>,
    timeout: Duration,
    bytes: usize,
    counters: &mut Counters,
) -> Result<Received, TransportError> {
    let Some(at) = at else {
        clock.advance_to_ns(clock.now_ns() + timeout.as_nanos() as f64);
        return Err(TransportError::Timeout(timeout));
    };
    clock.advance_to_ns(at);
    counters.received(bytes);
    Ok(Received {
        peer: 0,
        bytes,
        meta: Meta::default(),
        overhead_ns: 0.0,
    })
}

/// A one-peer link on virtual time whose round trip doubles once it has
/// answered `switch_at` rounds (a host that falls into a slow mode), and
/// that logs the size of every answered round.
struct ModeLink {
    clock: VirtualClock,
    switch_at: usize,
    /// When the link is next free to carry a message (ns).
    free_ns: f64,
    pending_ns: Option<f64>,
    answered: Vec<usize>,
    counters: Counters,
}

/// The fast mode's round trip (ns); the slow one's is twice it.
const MODE_RTT_NS: f64 = 10_000.0;

impl ModeLink {
    fn new(switch_at: usize) -> Self {
        Self {
            clock: VirtualClock::new(),
            switch_at,
            free_ns: 0.0,
            pending_ns: None,
            answered: Vec::new(),
            counters: Counters::default(),
        }
    }
}

impl Transport for ModeLink {
    fn caps(&self) -> Caps {
        Caps::single(Kind::Sim, 1 << 20)
    }
    fn send(&mut self, _peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        // 100 ns to post, 50 ns + 0.5 ns/B on the wire per message.
        let now = self.clock.now_ns() + 100.0;
        self.clock.advance_to_ns(now);
        self.free_ns = self.free_ns.max(now) + 50.0 + 0.5 * bytes as f64;
        self.counters.sent(bytes);
        if meta.answer {
            let slow = if self.answered.len() >= self.switch_at {
                2.0
            } else {
                1.0
            };
            self.pending_ns = Some(self.free_ns + slow * MODE_RTT_NS + bytes as f64);
            self.answered.push(bytes);
        }
        Ok(())
    }
    fn recv(
        &mut self,
        _from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        let bytes = *self.answered.last().unwrap_or(&0);
        let at = self.pending_ns.take();
        answer_at(&self.clock, at, timeout, bytes, &mut self.counters)
    }
    fn counters(&self) -> Counters {
        self.counters
    }
}

fn mode_cfg(interleave_max_bytes: u64) -> SweepConfig {
    SweepConfig {
        max_size_bytes: 64,
        interleave_max_bytes,
        long_bursts: false,
        refine: false,
        ..SweepConfig::default()
    }
}

fn run_mode(switch_at: usize, interleave_max_bytes: u64) -> (SweepResult, Vec<usize>) {
    let mut link = ModeLink::new(switch_at);
    let clock = link.clock.clone();
    let r = sweep(
        &mut link,
        &clock,
        0,
        &mode_cfg(interleave_max_bytes),
        &mut (),
    )
    .unwrap();
    (r, link.answered)
}

fn half_rtt_at(r: &SweepResult, size_bytes: u64) -> f64 {
    let s = r.samples.iter().find(|s| s.size_bytes == size_bytes);
    stats::median(&s.expect("the size was measured").prtt1_ns) / 2.0
}

#[test]
fn the_smallest_sizes_are_measured_a_repetition_of_each_in_turn() {
    let cfg = mode_cfg(INTERLEAVE_MAX_BYTES);
    assert_eq!(cfg.initial_sizes()[..7], [1, 2, 3, 4, 6, 8, 11]);
    assert_eq!(interleaved_len(&cfg, &cfg.initial_sizes()), 6);
    assert_eq!(interleaved_len(&mode_cfg(0), &cfg.initial_sizes()), 1);
    assert_eq!(interleaved_len(&cfg, &[16, 32]), 1);
    assert_eq!(interleaved_len(&cfg, &[]), 0);

    let mut link = ModeLink::new(usize::MAX);
    let clock = link.clock.clone();
    let mut guard = LossGuard::new(cfg.max_consecutive_losses);
    let got = measure::measure_group(&mut link, &clock, 0, &[1, 2, 4], &cfg, &mut guard).unwrap();
    assert_eq!(
        got.iter().map(|s| s.size_bytes).collect::<Vec<_>>(),
        [1, 2, 4]
    );
    let log = &link.answered;
    // Warm-up: PRTT(1,0,s) and PRTT(n,0,s) of each size in turn, twice.
    assert_eq!(log[..12], [1, 1, 2, 2, 4, 4, 1, 1, 2, 2, 4, 4]);
    // Then repetitions in turn: two settle rounds and three timed ones of
    // one size, then the next size.
    let reps = &log[12..];
    assert_eq!(reps.len() % 15, 0, "{reps:?}");
    for (i, rep) in reps.chunks(5).enumerate() {
        assert!(rep.iter().all(|&s| s == [1, 2, 4][i % 3]), "{i}: {rep:?}");
    }
    // Every size has the same repetitions (one stretch of time).
    let counts: Vec<u32> = got.iter().map(|s| s.rounds()).collect();
    assert!(
        counts.iter().all(|&c| c == counts[0] && c >= cfg.min_reps),
        "{counts:?}"
    );
}

#[test]
fn a_mode_switch_splits_eel_from_2_b_one_after_the_other_but_not_in_turn() {
    // Where the smallest size's measurement ends when measured alone: the
    // first round at another size after the session warm-up (whose last
    // three rounds are at the largest size, 64 B).
    let (_, log) = run_mode(usize::MAX, 0);
    let top = log.iter().position(|&s| s == 64).expect("warm-up at 64 B") + 3;
    let switch_at = top + log[top..].iter().position(|&s| s != 1).expect("more sizes");
    assert!(switch_at > top + 30, "{switch_at}");

    // Alone: 1 B entirely in the fast mode, 2 B in the slow one.
    let (seq, _) = run_mode(switch_at, 0);
    let (eel, h2) = (half_rtt_at(&seq, 1), half_rtt_at(&seq, 2));
    assert!(h2 > 1.8 * eel, "EEL {eel} ns, 2 B {h2} ns");

    // Measured in turn, the switch falls on 1 B and 2 B alike.
    let (inter, _) = run_mode(switch_at, INTERLEAVE_MAX_BYTES);
    let (eel, h2) = (half_rtt_at(&inter, 1), half_rtt_at(&inter, 2));
    assert!((eel / h2 - 1.0).abs() <= 0.05, "EEL {eel} ns, 2 B {h2} ns");
    // And 8 B with them.
    let h8 = half_rtt_at(&inter, 8);
    assert!((eel / h8 - 1.0).abs() <= 0.05, "EEL {eel} ns, 8 B {h8} ns");
    // The repeat at the end measured the same sizes together again.
    assert_eq!(inter.repeat.as_ref().map(|r| r.size_bytes), Some(1));
}

/// A one-peer link on virtual time whose bursts never settle: a message
/// costs 20 µs or 27 µs on the wire by the burst's length (by the parity of
/// its power of two), so the increments of successive doublings alternate
/// between 13 and 34 µs a message (a host whose noise never lets two
/// doublings agree).
struct UnsettledLink {
    clock: VirtualClock,
    in_burst: u32,
    pending_ns: Option<f64>,
    counters: Counters,
}

impl Transport for UnsettledLink {
    fn caps(&self) -> Caps {
        Caps::single(Kind::Sim, 1 << 20)
    }
    fn send(&mut self, _peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        self.in_burst += 1;
        self.counters.sent(bytes);
        if meta.answer {
            let n = self.in_burst;
            let per_message = if n.trailing_zeros() % 2 == 1 {
                27e3
            } else {
                20e3
            };
            self.pending_ns = Some(self.clock.now_ns() + f64::from(n) * per_message + 10e3);
            self.in_burst = 0;
        }
        Ok(())
    }
    fn recv(
        &mut self,
        _from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        let at = self.pending_ns.take();
        answer_at(&self.clock, at, timeout, 64, &mut self.counters)
    }
    fn counters(&self) -> Counters {
        self.counters
    }
}

#[test]
fn bursts_that_never_settle_stop_growing_at_the_time_cap() {
    let mut link = UnsettledLink {
        clock: VirtualClock::new(),
        in_burst: 0,
        pending_ns: None,
        counters: Counters::default(),
    };
    let clock = link.clock.clone();
    let cfg = SweepConfig {
        max_size_bytes: 64,
        ..SweepConfig::default()
    };
    let mut guard = LossGuard::new(cfg.max_consecutive_losses);
    let b = burst::long_bursts(&mut link, &clock, 0, &cfg, &mut guard).unwrap();
    assert_eq!(b.size_bytes, 64);
    assert!(b.stopped.is_none());
    let longest = b.lengths.last().unwrap();
    let least = longest
        .prtt_ns
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    // The byte cap alone would double to 32768 messages (2 MiB of 64 B),
    // 0.7–0.9 s a burst; the stage stops at the length whose double would
    // outlast 100 ms (2048 × 27 µs = 55 ms).
    assert_eq!(
        longest.n,
        2048,
        "{:?}",
        b.lengths.iter().map(|l| l.n).collect::<Vec<_>>()
    );
    assert!(
        least <= burst::MAX_BURST_NS && 2.0 * least > burst::MAX_BURST_NS,
        "{least}"
    );
    // Every length was measured, and the two longest repeated to the most.
    assert_eq!(b.lengths.len(), 11);
    assert_eq!(longest.prtt_ns.len(), burst::MAX_REPS as usize);
    // The stage's virtual time: seconds, not the tens of seconds of 32768.
    assert!(clock.now_ns() < 5e9, "{} s", clock.now_ns() * 1e-9);
}
