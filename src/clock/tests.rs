//! Tests of the clock module.

use std::time::Duration;

use super::kernel_log::{kernel_tsc_from_logs, run_with_timeout};
use super::tsc::fit_pairs;
use super::*;

#[test]
fn spin_deadline_reads_the_clock_only_at_checkpoints() {
    let clock = VirtualClock::new();
    let mut d = SpinDeadline::new(&clock, std::time::Duration::from_micros(10));
    // The first SPINS polls: no reading yet, so no deadline either, even
    // though (virtual) time flies.
    for _ in 0..SpinDeadline::SPINS - 1 {
        clock.advance_to_ns(clock.now_ns() + 1_000.0);
        assert!(!d.expired(&clock));
        assert!(!d.at_checkpoint());
    }
    // The first checkpoint starts the deadline.
    assert!(!d.expired(&clock));
    assert!(d.at_checkpoint());
    assert_eq!(d.waited_ticks(), 0);
    let start_ns = clock.now_ns();
    // 9 µs later at the next checkpoint: not yet.
    clock.advance_to_ns(start_ns + 9_000.0);
    for _ in 0..SpinDeadline::SPINS {
        assert!(!d.expired(&clock));
    }
    assert_eq!(d.waited_ticks(), clock.from_ns(9_000.0));
    // 11 µs after the start: expired at the next checkpoint, not before.
    clock.advance_to_ns(start_ns + 11_000.0);
    for _ in 0..SpinDeadline::SPINS - 1 {
        assert!(!d.expired(&clock));
    }
    assert!(d.expired(&clock));
}

#[test]
fn clock_choice_monotonic_raw_is_what_it_says() {
    let c = HostClock::choose(ClockChoice::MonotonicRaw).unwrap();
    assert_eq!(c.source_name(), "monotonic_raw");
    assert_eq!(c.rate_hz(), 1e9);
    let a = c.now();
    let b = c.now();
    assert!(b >= a);
}

#[test]
fn clock_choice_tsc_is_a_tsc_or_a_reason() {
    match HostClock::choose(ClockChoice::Tsc) {
        Ok(c) => {
            assert_eq!(c.source_name(), "tsc");
            // A plausible TSC rate: 100 MHz to 10 GHz.
            assert!(c.rate_hz() > 1e8 && c.rate_hz() < 1e10, "{}", c.rate_hz());
        }
        Err(e) => assert!(!cfg!(target_arch = "x86_64") || e.to_string().contains("TSC")),
    }
}

/// A (raw_ns, tsc) pair whose bracketing TSC reads are the closest of
/// many tries.
fn tight_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..200 {
        let t0 = read_tsc();
        let raw = mono_raw_ns();
        let t1 = read_tsc();
        if t1 >= t0 && t1 - t0 < best.0 {
            best = (t1 - t0, raw, t0 + (t1 - t0) / 2);
        }
    }
    (best.1, best.2)
}

#[test]
#[cfg_attr(
    not(tsc_tests),
    ignore = "no invariant TSC on the build host (NETGAUGED_TSC_TESTS=1 forces it)"
)]
fn tsc_is_monotonic_over_many_reads() {
    if let Some(why) = TscClock::detect_reason() {
        panic!("this test needs an invariant TSC: {why}");
    }
    let c = TscClock::with_hz(1e9).unwrap();
    let mut prev = c.now();
    for _ in 0..2_000_000 {
        let t = c.now();
        assert!(t >= prev, "TSC went backwards: {prev} -> {t}");
        prev = t;
    }
}

#[test]
fn mono_raw_is_monotonic() {
    let c = MonoRawClock::new();
    let mut prev = c.now();
    assert!(prev > 0);
    for _ in 0..200_000 {
        let t = c.now();
        assert!(t >= prev);
        prev = t;
    }
}

#[test]
#[cfg_attr(
    not(tsc_tests),
    ignore = "no invariant TSC on the build host (NETGAUGED_TSC_TESTS=1 forces it)"
)]
fn tsc_rate_matches_monotonic_raw_over_300ms_within_100ppm() {
    let clock = TscClock::detect().unwrap_or_else(|e| panic!("this test needs a usable TSC: {e}"));
    let (raw0, tsc0) = tight_pair();
    while mono_raw_ns() - raw0 < 300_000_000 {
        std::hint::spin_loop();
    }
    let (raw1, tsc1) = tight_pair();
    let measured_hz = (tsc1 - tsc0) as f64 / (raw1 - raw0) as f64 * 1e9;
    let ppm = (clock.hz() - measured_hz) / measured_hz * 1e6;
    eprintln!(
        "detected {:.3} Hz ({:?}), 300 ms check {:.3} Hz, diff {ppm:+.3} ppm",
        clock.hz(),
        clock.rate_source(),
        measured_hz
    );
    assert!(ppm.abs() < 100.0, "rate off by {ppm} ppm");
}

#[test]
fn calibration_fits_a_line_with_small_residual() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let c = calibrate_tsc(Duration::from_millis(100)).unwrap();
    eprintln!("{c:?}");
    // Bins lost while the thread was descheduled are skipped, so the
    // count and span depend on load; the fit quality does not.
    assert!((8..=100).contains(&c.pairs), "{c:?}");
    assert!(c.interval_ns > 0.0 && c.interval_ns < 100e6, "{c:?}");
    assert!((1e8..1e10).contains(&c.hz), "{c:?}");
    assert!(c.residual_ppm < 100.0, "{c:?}");
}

#[test]
fn fit_recovers_an_exact_slope() {
    // 2.5 GHz exactly: 2.5 ticks per ns, with offsets.
    let pts: Vec<(u64, u64, u64)> = (0..20u64)
        .map(|i| (10, 1_000_000 + i * 1_000_000, 7_000 + i * 2_500_000))
        .collect();
    let c = fit_pairs(&pts).unwrap();
    assert!((c.hz - 2.5e9).abs() < 1e-3, "{c:?}");
    assert!(c.residual_ppm < 1e-6);
    assert_eq!(c.interval_ns, 19e6);
    assert!(fit_pairs(&pts[..5]).is_err());
}

#[test]
fn kernel_line_parsing() {
    for (line, want) in [
        (
            "[    0.000062] tsc: Detected 2596.144 MHz processor",
            KernelTscLine::Detected(2_596_144_000.0),
        ),
        (
            "[    1.523344] tsc: Refined TSC clocksource calibration: 2095.077 MHz",
            KernelTscLine::Refined(2_095_077_000.0),
        ),
        (
            "6,123,62,-;tsc: Detected 3000.000 MHz processor",
            KernelTscLine::Detected(3e9),
        ),
        (
            "Nov 20 host kernel: tsc: Refined TSC clocksource calibration: 2400 MHz",
            KernelTscLine::Refined(2.4e9),
        ),
    ] {
        assert_eq!(parse_kernel_tsc_line(line), Some(want), "{line:?}");
    }
    for bad in [
        "",
        "garbage",
        "tsc: Detected",
        "tsc: Detected MHz processor",
        "tsc: Detected 12.3.4 MHz processor",
        "tsc: Detected 2596.144 GHz processor",
        "tsc: Detected 0 MHz processor",
        "tsc: Detected 99999999 MHz processor",
        "tsc: Refined TSC clocksource calibration: abc MHz",
        "[    0.257654] clocksource: tsc-early: mask: 0xffffffffffffffff",
        "tsc: Fast TSC calibration using PIT",
        "tsc: Detected 2596.144",
    ] {
        assert_eq!(parse_kernel_tsc_line(bad), None, "{bad:?}");
    }
}

#[test]
fn refined_line_beats_detected() {
    let log = "[0.0] tsc: Detected 2000.000 MHz processor\n\
               [1.5] tsc: Refined TSC clocksource calibration: 2000.123 MHz\n\
               [2.0] tsc: Detected 2100.000 MHz processor\n";
    assert_eq!(
        best_kernel_tsc_line(log.lines()),
        Some(KernelTscLine::Refined(2_000_123_000.0))
    );
    assert_eq!(
        best_kernel_tsc_line("[0.0] tsc: Detected 2000.000 MHz processor".lines()),
        Some(KernelTscLine::Detected(2e9))
    );
    assert_eq!(best_kernel_tsc_line("nothing\nhere".lines()), None);
}

#[test]
fn cpuid_leaf_interpretation() {
    // Skylake-like: crystal 24 MHz, ratio 216/2 => 2.592 GHz, base 2600 MHz.
    let i = CpuidTscInfo::from_leaves(2, 216, 24_000_000, 2600);
    assert_eq!(i.leaf15_hz, Some(2.592e9));
    assert_eq!(i.plausible_hz(), Some(2.592e9));
    // Crystal unknown (ECX = 0): no rate.
    assert_eq!(
        CpuidTscInfo::from_leaves(2, 216, 0, 2600).plausible_hz(),
        None
    );
    // Disagrees with the base frequency by more than 2 %.
    assert_eq!(
        CpuidTscInfo::from_leaves(2, 216, 24_000_000, 3000).plausible_hz(),
        None
    );
    // No leaf 0x16: accepted alone when plausible.
    assert_eq!(
        CpuidTscInfo::from_leaves(1, 100, 24_000_000, 0).plausible_hz(),
        Some(2.4e9)
    );
    // Absurd: 24 kHz.
    assert_eq!(
        CpuidTscInfo::from_leaves(1000, 1, 24_000_000, 0).plausible_hz(),
        None
    );
    assert_eq!(
        CpuidTscInfo::from_leaves(0, 0, 0, 0),
        CpuidTscInfo::default()
    );
}

#[test]
fn to_ns_from_ns_round_trip() {
    let tsc = |hz: f64| HostClock::Tsc(TscClock::from_parts(hz, RateSource::Given, None));
    let clocks = [
        tsc(2_596_144_000.0),
        tsc(3_000_000_000.0),
        HostClock::MonoRaw(MonoRawClock),
    ];
    for c in clocks {
        for ticks in [0u64, 1, 2, 3, 999, 123_456_789, 2_596_144_000, 1 << 40] {
            assert_eq!(c.from_ns(c.to_ns(ticks)), ticks, "{c:?} {ticks}");
        }
        let ns = 1_000_000.0;
        let back = c.to_ns(c.from_ns(ns));
        assert!((back - ns).abs() <= c.ns_per_tick(), "{c:?}");
    }
    let t = TscClock::from_parts(2.5e9, RateSource::Given, None);
    assert_eq!(t.to_ns(2_500_000_000), 1e9);
}

#[test]
fn host_clock_detect_and_info() {
    let c = HostClock::detect();
    let info = clock_info(&c, false);
    eprintln!("{info}\n{}", serde_json::to_string(&info).unwrap());
    assert_eq!(info.source, c.source_name());
    assert!(info.read_cost_ns >= 0.0 && info.read_cost_ns < 10_000.0);
    if let (HostClock::Tsc(_), Some(d)) = (c, info.kernel_diff_ppm) {
        assert!(d.abs() < 100.0, "TSC rate {d} ppm off the kernel's");
    }
}

#[test]
fn mono_raw_info_has_no_tsc_diff() {
    let info = clock_info(&HostClock::MonoRaw(MonoRawClock), false);
    assert_eq!(info.source, "monotonic_raw");
    assert_eq!(info.rate_hz, 1e9);
    assert_eq!(info.rate_source, "nominal");
    assert_eq!(info.kernel_diff_ppm, None);
    assert!(info.read_cost_ns > 0.0);
    assert!(!info.notes.is_empty());
    assert!(info.to_string().contains("monotonic_raw"));
}

/// The 2 s calibration `clock_info(.., true)` falls back to, checked
/// against the kernel's log line (`cargo test -- --ignored`).
#[test]
#[ignore = "needs the kernel's TSC line in dmesg or the journal (run with --ignored where it is)"]
fn long_calibration_matches_the_kernel_line() {
    let mut notes = Vec::new();
    let Some((k_hz, src)) = kernel_tsc_from_logs(&mut notes) else {
        panic!("no kernel TSC line in the logs: {notes:?}");
    };
    let c = calibrate_tsc(Duration::from_secs(2)).unwrap();
    let ppm = (c.hz - k_hz) / k_hz * 1e6;
    eprintln!("long calibration {c:?}; kernel {k_hz} Hz ({src}); diff {ppm:+.3} ppm");
    assert!(ppm.abs() < 50.0);
}

#[test]
fn log_command_fallback_parses_kills_and_degrades() {
    let out = run_with_timeout(
        "sh",
        &[
            "-c",
            "echo '[    0.000062] tsc: Detected 2596.144 MHz processor'",
        ],
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(
        best_kernel_tsc_line(out.lines()),
        Some(KernelTscLine::Detected(2_596_144_000.0))
    );
    let e = run_with_timeout("sleep", &["30"], Duration::from_millis(100)).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
    assert!(run_with_timeout(
        "/nonexistent/netgauged-no-such-tool",
        &[],
        Duration::from_secs(1)
    )
    .is_err());
}
