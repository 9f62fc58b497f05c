//! The clock report of `ngctl clock`: rate and its origin, read cost, and
//! the difference from the kernel's own TSC rate.

use std::fmt;
use std::time::Duration;

use super::kernel_log::kernel_tsc_from_logs;
use super::tsc::{calibrate_tsc, tsc_invariant, CpuidTscInfo, TscClock};
use super::{Clock, HostClock};

/// A description of a host clock and how it compares with the kernel's idea
/// of the TSC rate.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClockInfo {
    /// "tsc" or "monotonic_raw".
    pub source: &'static str,
    pub rate_hz: f64,
    /// "cpuid_0x15", "calibration", "given", or "nominal" (monotonic_raw).
    pub rate_source: &'static str,
    pub calibration_residual_ppm: Option<f64>,
    pub invariant_tsc: bool,
    /// Median cost of one clock read, measured back to back, ns.
    pub read_cost_ns: f64,
    /// The kernel's TSC rate, when it could be found.
    pub kernel_tsc_hz: Option<f64>,
    /// Where `kernel_tsc_hz` came from, e.g. "kmsg:refined",
    /// "journalctl:detected", "long_calibration".
    pub kernel_rate_source: Option<String>,
    /// (rate_hz − kernel_tsc_hz) / kernel_tsc_hz in ppm (TSC source only).
    pub kernel_diff_ppm: Option<f64>,
    /// /sys/devices/system/clocksource/clocksource0/current_clocksource.
    pub kernel_clocksource: Option<String>,
    /// `--long`: the TSC rate from a 2 s calibration against
    /// CLOCK_MONOTONIC_RAW, and its difference from `rate_hz` in ppm.
    pub long_calibration_hz: Option<f64>,
    pub long_calibration_diff_ppm: Option<f64>,
    /// Degradations and remarks, one sentence each.
    pub notes: Vec<String>,
}

impl fmt::Display for ClockInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "source:          {}", self.source)?;
        writeln!(
            f,
            "rate:            {:.6} MHz ({})",
            self.rate_hz / 1e6,
            self.rate_source
        )?;
        if let Some(r) = self.calibration_residual_ppm {
            writeln!(f, "calibration fit: residual RMS {r:.3} ppm")?;
        }
        writeln!(f, "invariant TSC:   {}", self.invariant_tsc)?;
        writeln!(f, "read cost:       {:.1} ns (median)", self.read_cost_ns)?;
        writeln!(
            f,
            "kernel clocksrc: {}",
            self.kernel_clocksource.as_deref().unwrap_or("unknown")
        )?;
        match (self.kernel_tsc_hz, &self.kernel_rate_source) {
            (Some(hz), src) => writeln!(
                f,
                "kernel TSC rate: {:.6} MHz ({})",
                hz / 1e6,
                src.as_deref().unwrap_or("?")
            )?,
            (None, _) => writeln!(f, "kernel TSC rate: unknown")?,
        }
        if let Some(d) = self.kernel_diff_ppm {
            writeln!(f, "diff vs kernel:  {d:+.2} ppm")?;
        }
        if let (Some(hz), Some(d)) = (self.long_calibration_hz, self.long_calibration_diff_ppm) {
            writeln!(
                f,
                "2 s calibration: {:.6} MHz against CLOCK_MONOTONIC_RAW ({d:+.2} ppm)",
                hz / 1e6
            )?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// Describe `clock`: rate and its origin, read cost, and the difference to
/// the kernel's TSC rate. With `long`, a TSC is also calibrated for 2 s
/// against CLOCK_MONOTONIC_RAW (reported beside the rate in use), which
/// stands in for a missing kernel log line when the kernel's clocksource is
/// the TSC (the raw clock then runs at the kernel's rate).
pub fn clock_info(clock: &HostClock, long: bool) -> ClockInfo {
    let mut notes = Vec::new();
    let invariant_tsc = tsc_invariant();
    let (rate_source, calibration_residual_ppm) = match clock {
        HostClock::Tsc(t) => (t.rate_source().as_str(), t.residual_ppm()),
        HostClock::MonoRaw(_) => {
            match TscClock::detect_reason() {
                Some(why) => notes.push(format!("TSC not used: {why}")),
                None => notes.push("TSC usable but not selected".into()),
            }
            ("nominal", None)
        }
    };
    let cpuid = CpuidTscInfo::read();
    if cpuid.leaf15_hz.is_none() {
        notes.push("CPUID leaf 0x15 gives no TSC frequency".into());
    } else if cpuid.plausible_hz().is_none() {
        notes.push(format!(
            "CPUID leaf 0x15 rate {:?} Hz is implausible or disagrees with leaf 0x16 base {:?} Hz",
            cpuid.leaf15_hz, cpuid.leaf16_base_hz
        ));
    }
    let read_cost_ns = measure_read_cost_ns(clock);
    let kernel_clocksource =
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .ok()
            .map(|s| s.trim().to_string());

    let long_calibration_hz = match clock {
        HostClock::Tsc(_) if long => match calibrate_tsc(Duration::from_secs(2)) {
            Ok(c) => Some(c.hz),
            Err(e) => {
                notes.push(format!("long calibration failed: {e}"));
                None
            }
        },
        _ => None,
    };
    let long_calibration_diff_ppm = long_calibration_hz.map(|hz| (clock.rate_hz() - hz) / hz * 1e6);
    let mut kernel = kernel_tsc_from_logs(&mut notes);
    if kernel.is_none() {
        if kernel_clocksource.as_deref() == Some("tsc") {
            if let Some(hz) = long_calibration_hz {
                kernel = Some((hz, "long_calibration".to_string()));
            } else if long {
                notes.push("no kernel tsc line, and no TSC to calibrate".into());
            } else {
                notes.push(
                    "no kernel tsc line; a long run would calibrate against CLOCK_MONOTONIC_RAW"
                        .into(),
                );
            }
        } else {
            notes.push("no kernel tsc line and the kernel clocksource is not tsc".into());
        }
    }
    let (kernel_tsc_hz, kernel_rate_source) = match kernel {
        Some((hz, src)) => (Some(hz), Some(src)),
        None => (None, None),
    };
    let kernel_diff_ppm = match (clock, kernel_tsc_hz) {
        (HostClock::Tsc(t), Some(k)) => Some((t.hz() - k) / k * 1e6),
        _ => None,
    };
    ClockInfo {
        source: clock.source_name(),
        rate_hz: clock.rate_hz(),
        rate_source,
        calibration_residual_ppm,
        invariant_tsc,
        read_cost_ns,
        kernel_tsc_hz,
        kernel_rate_source,
        kernel_diff_ppm,
        kernel_clocksource,
        long_calibration_hz,
        long_calibration_diff_ppm,
        notes,
    }
}

/// Median cost of one read over many back-to-back reads, ns.
pub fn measure_read_cost_ns(clock: &HostClock) -> f64 {
    const READS: usize = 20_001;
    let mut t = vec![0u64; READS];
    for slot in t.iter_mut() {
        *slot = clock.now();
    }
    let mut d: Vec<u64> = t.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
    d.sort_unstable();
    clock.to_ns(d[d.len() / 2])
}
