//! The TSC: serialized reads, what CPUID says about it (invariance, leaf
//! 0x15/0x16 rates), the least-squares calibration against
//! CLOCK_MONOTONIC_RAW, and [`TscClock`].

use std::time::Duration;

use super::mono_raw::mono_raw_ns;
use super::{Clock, ClockError};

/// Read the TSC with ordering on both sides: `lfence; rdtsc; lfence`.
///
/// The leading `lfence` waits until every earlier instruction has completed
/// locally, so the read cannot be hoisted into the interval it ends. The
/// trailing `lfence` keeps later instructions from starting before `rdtsc`
/// has executed, so work cannot leak ahead of the read that starts an
/// interval. `rdtscp; lfence` would give the same guarantees but also reads
/// IA32_TSC_AUX (slower on several cores, and trapped by some hypervisors),
/// and `rdtscp` alone orders only the earlier side. One read serves both the
/// start and the end of an interval, which is what [`Clock::now`] needs.
#[cfg(target_arch = "x86_64")]
#[inline]
pub fn read_tsc() -> u64 {
    use core::arch::x86_64::{_mm_lfence, _rdtsc};
    #[allow(unused_unsafe)]
    // SAFETY: lfence needs SSE2 and rdtsc is present on every x86-64 CPU;
    // neither touches memory. (Newer toolchains treat them as safe.)
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// Not x86-64: there is no TSC; the monotonic raw clock stands in so callers
/// never see a panic (a [`TscClock`] cannot be built there anyway).
#[cfg(not(target_arch = "x86_64"))]
#[inline]
pub fn read_tsc() -> u64 {
    mono_raw_ns()
}

#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32) -> (u32, u32, u32, u32) {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86-64 CPU; an unsupported leaf returns
    // zeros or the highest basic leaf's data, never faults.
    let r = unsafe { core::arch::x86_64::__cpuid(leaf) };
    (r.eax, r.ebx, r.ecx, r.edx)
}

/// True when CPUID 0x80000007 EDX bit 8 (invariant TSC) is set.
pub fn tsc_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let (max_ext, _, _, _) = cpuid(0x8000_0000);
        if max_ext < 0x8000_0007 {
            return false;
        }
        let (_, _, _, edx) = cpuid(0x8000_0007);
        edx & (1 << 8) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// What CPUID leaves 0x15 and 0x16 say about the TSC frequency.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuidTscInfo {
    /// TSC Hz from leaf 0x15 (crystal Hz × numerator / denominator) when the
    /// leaf is present and all three values are non-zero.
    pub leaf15_hz: Option<f64>,
    /// Processor base frequency from leaf 0x16, in Hz, when non-zero.
    pub leaf16_base_hz: Option<f64>,
}

impl CpuidTscInfo {
    /// Read the leaves (all `None` off x86-64 or when absent).
    pub fn read() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let (max_basic, _, _, _) = cpuid(0);
            let (a, b, c, _) = if max_basic >= 0x15 {
                cpuid(0x15)
            } else {
                (0, 0, 0, 0)
            };
            let (base_mhz, _, _, _) = if max_basic >= 0x16 {
                cpuid(0x16)
            } else {
                (0, 0, 0, 0)
            };
            Self::from_leaves(a, b, c, base_mhz)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Self::default()
        }
    }

    /// Interpret raw register values: 0x15 EAX (denominator), EBX
    /// (numerator), ECX (crystal Hz); 0x16 EAX (base MHz).
    pub fn from_leaves(denominator: u32, numerator: u32, crystal_hz: u32, base_mhz: u32) -> Self {
        let leaf15_hz = (denominator != 0 && numerator != 0 && crystal_hz != 0)
            .then(|| crystal_hz as f64 * numerator as f64 / denominator as f64);
        let leaf16_base_hz = (base_mhz != 0).then_some(base_mhz as f64 * 1e6);
        Self {
            leaf15_hz,
            leaf16_base_hz,
        }
    }

    /// The leaf 0x15 rate if it is plausible (100 MHz..10 GHz) and, where
    /// leaf 0x16 reports a base frequency, within 2 % of it.
    pub fn plausible_hz(&self) -> Option<f64> {
        let hz = self.leaf15_hz?;
        if !(1e8..=1e10).contains(&hz) {
            return None;
        }
        if let Some(base) = self.leaf16_base_hz {
            if ((hz - base) / base).abs() > 0.02 {
                return None;
            }
        }
        Some(hz)
    }
}

/// Result of a TSC calibration against CLOCK_MONOTONIC_RAW.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// Least-squares slope, TSC ticks per second.
    pub hz: f64,
    /// RMS of the fit residuals, in ppm of the calibration interval.
    pub residual_ppm: f64,
    /// Number of (raw_ns, tsc) pairs in the fit.
    pub pairs: usize,
    /// Span of the pairs on CLOCK_MONOTONIC_RAW, ns.
    pub interval_ns: f64,
    /// The widest bracket (TSC read before and after the raw read) among the
    /// chosen pairs, in ns.
    pub max_bracket_ns: f64,
}

/// Calibrate the TSC against CLOCK_MONOTONIC_RAW for `duration`.
///
/// The interval is cut into bins; in each bin many pairs `tsc0, raw, tsc1`
/// are read back to back and the one with the shortest bracket `tsc1 - tsc0`
/// is kept, its TSC value taken at the bracket's midpoint. The rate is the
/// least-squares slope of TSC over raw nanoseconds.
pub fn calibrate_tsc(duration: Duration) -> Result<Calibration, ClockError> {
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = duration;
        Err(ClockError::Unsupported)
    }
    #[cfg(target_arch = "x86_64")]
    {
        const BINS: usize = 100;
        let dur_ns = duration.as_nanos().clamp(1_000_000, 60_000_000_000) as u64;
        // (bracket_ticks, raw_ns, tsc_mid)
        let mut best: Vec<Option<(u64, u64, u64)>> = vec![None; BINS];
        let start_ns = mono_raw_ns();
        loop {
            let t0 = read_tsc();
            let raw = mono_raw_ns();
            let t1 = read_tsc();
            let elapsed = raw.wrapping_sub(start_ns);
            if elapsed >= dur_ns {
                break;
            }
            if t1 < t0 {
                continue;
            }
            let bin = ((elapsed as u128 * BINS as u128) / dur_ns as u128) as usize;
            let bracket = t1 - t0;
            let slot = &mut best[bin.min(BINS - 1)];
            if !matches!(*slot, Some((b, _, _)) if b <= bracket) {
                *slot = Some((bracket, raw, t0 + bracket / 2));
            }
        }
        let pts: Vec<(u64, u64, u64)> = best.into_iter().flatten().collect();
        fit_pairs(&pts)
    }
}

/// Least-squares fit of (bracket, raw_ns, tsc) pairs.
pub(super) fn fit_pairs(pts: &[(u64, u64, u64)]) -> Result<Calibration, ClockError> {
    if pts.len() < 8 {
        return Err(ClockError::Calibration(format!(
            "only {} usable pairs",
            pts.len()
        )));
    }
    let (_, x0, y0) = pts[0];
    let n = pts.len() as f64;
    let xs = pts.iter().map(|&(_, x, _)| x.wrapping_sub(x0) as f64);
    let ys = pts.iter().map(|&(_, _, y)| y.wrapping_sub(y0) as f64);
    let mx = xs.clone().sum::<f64>() / n;
    let my = ys.clone().sum::<f64>() / n;
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for (x, y) in xs.clone().zip(ys.clone()) {
        sxx += (x - mx) * (x - mx);
        sxy += (x - mx) * (y - my);
    }
    if sxx <= 0.0 {
        return Err(ClockError::Calibration("zero raw-clock span".into()));
    }
    let slope = sxy / sxx; // ticks per ns
    let hz = slope * 1e9;
    if !hz.is_finite() || !(1e6..=1e11).contains(&hz) {
        return Err(ClockError::Calibration(format!("implausible rate {hz} Hz")));
    }
    let intercept = my - slope * mx;
    let ss: f64 = xs
        .clone()
        .zip(ys)
        .map(|(x, y)| {
            let r_ns = (y - (intercept + slope * x)) / slope;
            r_ns * r_ns
        })
        .sum();
    let rms_ns = (ss / n).sqrt();
    let interval_ns = xs.fold(0.0f64, f64::max);
    let max_bracket = pts.iter().map(|&(b, _, _)| b).max().unwrap_or(0) as f64 / slope;
    Ok(Calibration {
        hz,
        residual_ppm: rms_ns / interval_ns * 1e6,
        pairs: pts.len(),
        interval_ns,
        max_bracket_ns: max_bracket,
    })
}

/// How a [`TscClock`] got its rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RateSource {
    /// CPUID leaf 0x15 (crystal × ratio), cross-checked with leaf 0x16.
    Cpuid15,
    /// Linear-regression calibration against CLOCK_MONOTONIC_RAW.
    Calibration,
    /// Given by the caller.
    Given,
}

impl RateSource {
    pub fn as_str(self) -> &'static str {
        match self {
            RateSource::Cpuid15 => "cpuid_0x15",
            RateSource::Calibration => "calibration",
            RateSource::Given => "given",
        }
    }
}

/// Serialized, invariant TSC; ticks are CPU reference cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TscClock {
    hz: f64,
    ns_per_tick: f64,
    rate_source: RateSource,
    residual_ppm: Option<f64>,
}

impl TscClock {
    /// Longest calibration [`TscClock::detect`] may spend.
    pub const CALIBRATION: Duration = Duration::from_millis(180);

    /// Check for an invariant TSC and find its rate: CPUID 0x15 where present
    /// and plausible, otherwise a calibration of at most 200 ms.
    pub fn detect() -> Result<Self, ClockError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(ClockError::Unsupported);
        }
        if !tsc_invariant() {
            return Err(ClockError::NotInvariant);
        }
        if let Some(hz) = CpuidTscInfo::read().plausible_hz() {
            return Ok(Self::from_parts(hz, RateSource::Cpuid15, None));
        }
        Self::calibrated(Self::CALIBRATION)
    }

    /// Calibrate for `duration` against CLOCK_MONOTONIC_RAW (no invariance
    /// check).
    pub fn calibrated(duration: Duration) -> Result<Self, ClockError> {
        let c = calibrate_tsc(duration)?;
        Ok(Self::from_parts(
            c.hz,
            RateSource::Calibration,
            Some(c.residual_ppm),
        ))
    }

    /// A TSC clock with a known rate (e.g. from a previous calibration).
    pub fn with_hz(hz: f64) -> Result<Self, ClockError> {
        if !cfg!(target_arch = "x86_64") {
            return Err(ClockError::Unsupported);
        }
        if !hz.is_finite() || hz <= 0.0 {
            return Err(ClockError::Calibration(format!("invalid rate {hz} Hz")));
        }
        Ok(Self::from_parts(hz, RateSource::Given, None))
    }

    pub(super) fn from_parts(hz: f64, rate_source: RateSource, residual_ppm: Option<f64>) -> Self {
        Self {
            hz,
            ns_per_tick: 1e9 / hz,
            rate_source,
            residual_ppm,
        }
    }

    pub fn hz(&self) -> f64 {
        self.hz
    }
    pub fn rate_source(&self) -> RateSource {
        self.rate_source
    }
    pub fn residual_ppm(&self) -> Option<f64> {
        self.residual_ppm
    }

    /// Why [`TscClock::detect`] would refuse the TSC, without calibrating.
    pub(super) fn detect_reason() -> Option<ClockError> {
        if !cfg!(target_arch = "x86_64") {
            Some(ClockError::Unsupported)
        } else if !tsc_invariant() {
            Some(ClockError::NotInvariant)
        } else {
            None
        }
    }
}

impl Clock for TscClock {
    #[inline]
    fn now(&self) -> u64 {
        read_tsc()
    }
    #[inline]
    fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }
}
