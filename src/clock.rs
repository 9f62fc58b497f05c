//! Time sources for probes.
//!
//! A [`Clock`] reads ticks and converts them to nanoseconds. Real probes use
//! [`TscClock`] (serialized, calibrated TSC) or [`MonoRawClock`]
//! (CLOCK_MONOTONIC_RAW fallback); the `sim` transport drives a
//! [`VirtualClock`] whose time only moves when simulated work happens.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

/// A monotonic time source measured in ticks.
///
/// Patterns are generic over `Clock` so that the same probe code runs in
/// virtual time against `sim` and in TSC cycles against real hardware.
pub trait Clock {
    /// Current reading, in ticks. Must not allocate, lock or make a system call
    /// (beyond the vDSO for the fallback clock).
    fn now(&self) -> u64;
    /// Nanoseconds per tick.
    fn ns_per_tick(&self) -> f64;
    /// Convert a tick difference to nanoseconds.
    fn to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick()
    }
    /// Convert nanoseconds to ticks (rounded to nearest).
    #[allow(clippy::wrong_self_convention)]
    fn from_ns(&self, ns: f64) -> u64 {
        (ns / self.ns_per_tick()).round().max(0.0) as u64
    }
    /// Keep the CPU busy for `ticks` (the `d` of PRTT(n,d,s)). The default
    /// busy-spins on [`Clock::now`]; a virtual clock advances itself instead.
    fn spin(&self, ticks: u64) {
        let start = self.now();
        while self.now().wrapping_sub(start) < ticks {
            std::hint::spin_loop();
        }
    }
}

/// Virtual time for the discrete-event simulator: one tick is one picosecond.
///
/// Cloning shares the same time line; the simulator advances it while the
/// simulated CPU is busy or waiting.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock {
    ps: Rc<Cell<u64>>,
}

impl VirtualClock {
    pub const PS_PER_NS: f64 = 1000.0;

    pub fn new() -> Self {
        Self::default()
    }
    /// Current virtual time in nanoseconds.
    pub fn now_ns(&self) -> f64 {
        self.ps.get() as f64 / Self::PS_PER_NS
    }
    /// Move time forward to `ns` (never backwards).
    pub fn advance_to_ns(&self, ns: f64) {
        let ps = (ns * Self::PS_PER_NS).round() as u64;
        if ps > self.ps.get() {
            self.ps.set(ps);
        }
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> u64 {
        self.ps.get()
    }
    fn ns_per_tick(&self) -> f64 {
        1.0 / Self::PS_PER_NS
    }
    fn spin(&self, ticks: u64) {
        self.ps.set(self.ps.get() + ticks);
    }
}

/// A deadline for a busy-polling wait that reads the clock only every
/// [`SpinDeadline::SPINS`] polls, and not at all while the first ones run:
/// a wait that ends within them costs no clock read. On a host without a
/// usable TSC a clock read is a system call (≈ 1 µs under an emulated CPU),
/// which would otherwise be charged to every round trip. The deadline counts
/// from the first reading, at most `SPINS` polls after the wait began.
#[derive(Clone, Copy, Debug)]
pub struct SpinDeadline {
    start: Option<u64>,
    last: u64,
    limit_ticks: u64,
    yield_after_ticks: u64,
    spins: u32,
}

impl SpinDeadline {
    /// Polls between two clock readings (a power of two).
    pub const SPINS: u32 = 64;

    pub fn new<C: Clock + ?Sized>(clock: &C, timeout: std::time::Duration) -> Self {
        SpinDeadline {
            start: None,
            last: 0,
            limit_ticks: clock.from_ns(timeout.as_nanos() as f64),
            yield_after_ticks: u64::MAX,
            spins: 0,
        }
    }

    /// Past `after` of waiting, give the CPU away (sched_yield) at each
    /// clock checkpoint. A software RDMA device (rxe, siw) does its protocol
    /// work in kernel threads and soft interrupts that may need the waiter's
    /// CPU; a waiter that never yields leaves them for the next timer tick
    /// (milliseconds). A NIC's answer is microseconds away, so on hardware
    /// this only triggers when the peer is late anyway.
    pub fn yielding_after<C: Clock + ?Sized>(
        mut self,
        clock: &C,
        after: std::time::Duration,
    ) -> Self {
        self.yield_after_ticks = clock.from_ns(after.as_nanos() as f64);
        self
    }

    /// Count one poll; true once the timeout has passed. Reads the clock on
    /// every `SPINS`-th call only.
    #[inline]
    pub fn expired<C: Clock + ?Sized>(&mut self, clock: &C) -> bool {
        self.spins = self.spins.wrapping_add(1);
        if self.spins & (Self::SPINS - 1) != 0 {
            return false;
        }
        let now = clock.now();
        self.last = now;
        match self.start {
            None => {
                self.start = Some(now);
                false
            }
            Some(s) => {
                let waited = now.wrapping_sub(s);
                if waited > self.yield_after_ticks {
                    std::thread::yield_now();
                }
                waited > self.limit_ticks
            }
        }
    }

    /// Ticks between the first and the latest clock reading (0 before the
    /// second): how long the wait has lasted, give or take `SPINS` polls.
    #[inline]
    pub fn waited_ticks(&self) -> u64 {
        self.start.map_or(0, |s| self.last.wrapping_sub(s))
    }

    /// True on the calls that read the clock: a place for periodic work.
    #[inline]
    pub fn at_checkpoint(&self) -> bool {
        self.spins & (Self::SPINS - 1) == 0
    }
}

// ---------------------------------------------------------------------------
// Host clocks
// ---------------------------------------------------------------------------

/// Why a host clock could not be set up as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    #[error("the TSC is only supported on x86-64")]
    Unsupported,
    #[error("the TSC is not invariant (CPUID 0x80000007 EDX bit 8 is clear)")]
    NotInvariant,
    #[error("TSC calibration failed: {0}")]
    Calibration(String),
    #[error(
        "the TSC is not invariant and its rate is not steady: two calibrations \
         gave {first_hz:.0} Hz and {second_hz:.0} Hz ({ppm:.1} ppm apart, at most \
         {limit_ppm} allowed)"
    )]
    Unsteady {
        first_hz: f64,
        second_hz: f64,
        ppm: f64,
        limit_ppm: f64,
    },
}

/// Read CLOCK_MONOTONIC_RAW in nanoseconds (vDSO, no system call on Linux
/// with a vDSO-capable clocksource).
#[inline]
pub fn mono_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call, and
    // CLOCK_MONOTONIC_RAW is a valid clock id (Linux >= 2.6.28).
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC_RAW: one tick is one nanosecond. The fallback where the
/// TSC is not invariant or the CPU is not x86-64.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MonoRawClock;

impl MonoRawClock {
    pub fn new() -> Self {
        MonoRawClock
    }
}

impl Clock for MonoRawClock {
    #[inline]
    fn now(&self) -> u64 {
        mono_raw_ns()
    }
    fn ns_per_tick(&self) -> f64 {
        1.0
    }
}

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
fn fit_pairs(pts: &[(u64, u64, u64)]) -> Result<Calibration, ClockError> {
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

    fn from_parts(hz: f64, rate_source: RateSource, residual_ppm: Option<f64>) -> Self {
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

/// The host's best clock: the TSC when invariant, else CLOCK_MONOTONIC_RAW.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HostClock {
    Tsc(TscClock),
    MonoRaw(MonoRawClock),
}

impl Default for HostClock {
    /// CLOCK_MONOTONIC_RAW: needs no calibration.
    fn default() -> Self {
        HostClock::MonoRaw(MonoRawClock)
    }
}

/// Which host clock to time with (`--clock`, `clock =` in the daemon's
/// configuration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockChoice {
    /// The TSC when the CPU flags it invariant, else CLOCK_MONOTONIC_RAW.
    #[default]
    Auto,
    /// The TSC even when the CPU does not flag it invariant (virtual
    /// machines often hide the flag), provided two calibrations against
    /// CLOCK_MONOTONIC_RAW agree within [`HostClock::STEADY_PPM`]
    /// ([`HostClock::STEADY_TRIES`] tries); refused
    /// otherwise. perftest times this way unconditionally.
    Tsc,
    /// CLOCK_MONOTONIC_RAW (a system call where the kernel's clocksource has
    /// no vDSO support, e.g. hpet).
    MonotonicRaw,
}

impl HostClock {
    /// How far apart (ppm) two calibrations of a TSC that is not flagged
    /// invariant may be for `--clock tsc` to accept it: 0.1 %, far above the
    /// calibration's own noise on a loaded virtual machine (≈ 150 ppm seen)
    /// and far below a frequency-scaled TSC's change (tens of percent), and
    /// a rate error that small is invisible in any LogGP parameter.
    pub const STEADY_PPM: f64 = 1000.0;
    /// Pairs of successive calibrations tried before `--clock tsc` gives up.
    pub const STEADY_TRIES: u32 = 3;

    /// The clock `choice` asks for. Only [`ClockChoice::Tsc`] can fail.
    pub fn choose(choice: ClockChoice) -> Result<HostClock, ClockError> {
        match choice {
            ClockChoice::Auto => Ok(Self::detect()),
            ClockChoice::MonotonicRaw => Ok(HostClock::MonoRaw(MonoRawClock)),
            ClockChoice::Tsc => match TscClock::detect() {
                Ok(t) => Ok(HostClock::Tsc(t)),
                Err(ClockError::NotInvariant) => {
                    // Two successive calibrations must agree; a guest that
                    // was descheduled during one gets up to three tries.
                    let mut prev = TscClock::calibrated(TscClock::CALIBRATION)?;
                    let mut attempt = 0;
                    loop {
                        let next = TscClock::calibrated(TscClock::CALIBRATION)?;
                        let ppm = (prev.hz() - next.hz()).abs() / next.hz() * 1e6;
                        if ppm <= Self::STEADY_PPM {
                            tracing::info!(
                                "TSC not flagged invariant; used as asked ({:.6} MHz, calibrations {ppm:.1} ppm apart)",
                                next.hz() / 1e6
                            );
                            return Ok(HostClock::Tsc(next));
                        }
                        attempt += 1;
                        if attempt == Self::STEADY_TRIES {
                            return Err(ClockError::Unsteady {
                                first_hz: prev.hz(),
                                second_hz: next.hz(),
                                ppm,
                                limit_ppm: Self::STEADY_PPM,
                            });
                        }
                        prev = next;
                    }
                }
                Err(e) => Err(e),
            },
        }
    }

    /// The invariant TSC if there is one and its rate can be found, else
    /// CLOCK_MONOTONIC_RAW. Takes at most about 200 ms (the calibration).
    pub fn detect() -> HostClock {
        match TscClock::detect() {
            Ok(t) => HostClock::Tsc(t),
            Err(e) => {
                tracing::info!("TSC not used ({e}); falling back to CLOCK_MONOTONIC_RAW");
                HostClock::MonoRaw(MonoRawClock)
            }
        }
    }
    /// Ticks per second.
    pub fn rate_hz(&self) -> f64 {
        match self {
            HostClock::Tsc(t) => t.hz(),
            HostClock::MonoRaw(_) => 1e9,
        }
    }
    pub fn source_name(&self) -> &'static str {
        match self {
            HostClock::Tsc(_) => "tsc",
            HostClock::MonoRaw(_) => "monotonic_raw",
        }
    }
}

impl Clock for HostClock {
    #[inline]
    fn now(&self) -> u64 {
        match self {
            HostClock::Tsc(t) => t.now(),
            HostClock::MonoRaw(m) => m.now(),
        }
    }
    #[inline]
    fn ns_per_tick(&self) -> f64 {
        match self {
            HostClock::Tsc(t) => t.ns_per_tick(),
            HostClock::MonoRaw(m) => m.ns_per_tick(),
        }
    }
}

// ---------------------------------------------------------------------------
// Clock report (`ngctl clock`)
// ---------------------------------------------------------------------------

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
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

/// Describe `clock`: rate and its origin, read cost, and the difference to
/// the kernel's TSC rate. With `long`, a missing kernel log line is replaced
/// by a 2 s calibration against CLOCK_MONOTONIC_RAW when the kernel's
/// clocksource is the TSC (the raw clock then runs at the kernel's rate).
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

    let mut kernel = kernel_tsc_from_logs(&mut notes);
    if kernel.is_none() {
        if kernel_clocksource.as_deref() == Some("tsc") {
            if long {
                match calibrate_tsc(Duration::from_secs(2)) {
                    Ok(c) => kernel = Some((c.hz, "long_calibration".to_string())),
                    Err(e) => notes.push(format!("long calibration failed: {e}")),
                }
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
        notes,
    }
}

impl TscClock {
    /// Why [`TscClock::detect`] would refuse the TSC, without calibrating.
    fn detect_reason() -> Option<ClockError> {
        if !cfg!(target_arch = "x86_64") {
            Some(ClockError::Unsupported)
        } else if !tsc_invariant() {
            Some(ClockError::NotInvariant)
        } else {
            None
        }
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

/// A TSC rate the kernel logged at boot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelTscLine {
    /// "tsc: Refined TSC clocksource calibration: X MHz", in Hz.
    Refined(f64),
    /// "tsc: Detected X MHz processor", in Hz.
    Detected(f64),
}

impl KernelTscLine {
    pub fn hz(self) -> f64 {
        match self {
            KernelTscLine::Refined(h) | KernelTscLine::Detected(h) => h,
        }
    }
    pub fn kind(self) -> &'static str {
        match self {
            KernelTscLine::Refined(_) => "refined",
            KernelTscLine::Detected(_) => "detected",
        }
    }
}

/// Parse one kernel log line (dmesg, journalctl or /dev/kmsg record form).
pub fn parse_kernel_tsc_line(line: &str) -> Option<KernelTscLine> {
    const REFINED: &str = "tsc: Refined TSC clocksource calibration: ";
    const DETECTED: &str = "tsc: Detected ";
    if let Some(i) = line.find(REFINED) {
        return parse_mhz(&line[i + REFINED.len()..]).map(KernelTscLine::Refined);
    }
    if let Some(i) = line.find(DETECTED) {
        return parse_mhz(&line[i + DETECTED.len()..]).map(KernelTscLine::Detected);
    }
    None
}

/// "2596.144 MHz..." → 2.596144e9 Hz.
fn parse_mhz(s: &str) -> Option<f64> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    if !rest.starts_with(" MHz") || num.is_empty() {
        return None;
    }
    // Exact decimal to Hz: integer MHz and up to six fraction digits.
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.len() > 6 || frac.contains('.') {
        return None;
    }
    let mhz: u64 = int.parse().ok()?;
    let frac_hz: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(6 - frac.len() as u32)
    };
    if mhz >= 100_000 {
        return None;
    }
    let hz = mhz * 1_000_000 + frac_hz;
    (hz > 0).then_some(hz as f64)
}

/// Fold log lines into the best TSC line: the last refined one, else the
/// last detected one.
pub fn best_kernel_tsc_line<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<KernelTscLine> {
    let mut best = None;
    for l in lines {
        best = prefer(best, parse_kernel_tsc_line(l));
    }
    best
}

fn prefer(old: Option<KernelTscLine>, new: Option<KernelTscLine>) -> Option<KernelTscLine> {
    match (old, new) {
        (Some(KernelTscLine::Refined(_)), Some(KernelTscLine::Detected(_))) => old,
        (_, Some(n)) => Some(n),
        (o, None) => o,
    }
}

/// The kernel's TSC rate from /dev/kmsg, else journalctl -k, else dmesg.
fn kernel_tsc_from_logs(notes: &mut Vec<String>) -> Option<(f64, String)> {
    match read_kmsg_tsc() {
        Ok(Some(l)) => return Some((l.hz(), format!("kmsg:{}", l.kind()))),
        Ok(None) => notes.push("/dev/kmsg has no tsc line (ring buffer wrapped?)".into()),
        Err(e) => notes.push(format!("cannot read /dev/kmsg: {e}")),
    }
    for (name, args) in [
        ("journalctl", &["-k", "-b", "--no-pager", "-q"][..]),
        ("dmesg", &[][..]),
    ] {
        match run_with_timeout(name, args, Duration::from_secs(5)) {
            Ok(out) => {
                if let Some(l) = best_kernel_tsc_line(out.lines()) {
                    return Some((l.hz(), format!("{name}:{}", l.kind())));
                }
                notes.push(format!("{name} output has no tsc line"));
            }
            Err(e) => notes.push(format!("cannot run {name}: {e}")),
        }
    }
    None
}

/// Read every record of /dev/kmsg without blocking and keep the best tsc line.
fn read_kmsg_tsc() -> std::io::Result<Option<KernelTscLine>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut best = None;
    // Each read returns one record; bound the loop in case the log is busy.
    for _ in 0..1_000_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                // Record: "prio,seq,usec,flags;message\n continuation..."
                let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
                let first = msg.lines().next().unwrap_or("");
                best = prefer(best, parse_kernel_tsc_line(first));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EPIPE: records were overwritten under us; the next read resumes.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(best)
}

/// Run a command, capture stdout, and kill it if it outlives `timeout`.
fn run_with_timeout(program: &str, args: &[&str], timeout: Duration) -> std::io::Result<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = reader.join().unwrap_or_default();
    match status {
        None => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{program} timed out"),
        )),
        Some(st) if !st.success() && out.is_empty() => {
            Err(std::io::Error::other(format!("{program} exited with {st}")))
        }
        Some(_) => Ok(String::from_utf8_lossy(&out).into_owned()),
    }
}

#[cfg(test)]
mod tests {
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
    fn tsc_is_monotonic_over_many_reads() {
        if TscClock::detect_reason().is_some() {
            eprintln!("no invariant TSC here; skipping");
            return;
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
    fn tsc_rate_matches_monotonic_raw_over_300ms_within_100ppm() {
        let Ok(clock) = TscClock::detect() else {
            eprintln!("no usable TSC here; skipping");
            return;
        };
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
        assert_eq!(
            parse_kernel_tsc_line("[    0.000062] tsc: Detected 2596.144 MHz processor"),
            Some(KernelTscLine::Detected(2_596_144_000.0))
        );
        assert_eq!(
            parse_kernel_tsc_line(
                "[    1.523344] tsc: Refined TSC clocksource calibration: 2095.077 MHz"
            ),
            Some(KernelTscLine::Refined(2_095_077_000.0))
        );
        assert_eq!(
            parse_kernel_tsc_line("6,123,62,-;tsc: Detected 3000.000 MHz processor"),
            Some(KernelTscLine::Detected(3e9))
        );
        assert_eq!(
            parse_kernel_tsc_line(
                "Nov 20 host kernel: tsc: Refined TSC clocksource calibration: 2400 MHz"
            ),
            Some(KernelTscLine::Refined(2.4e9))
        );
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
        let clocks = [
            HostClock::Tsc(TscClock::from_parts(
                2_596_144_000.0,
                RateSource::Given,
                None,
            )),
            HostClock::Tsc(TscClock::from_parts(
                3_000_000_000.0,
                RateSource::Given,
                None,
            )),
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
    #[ignore = "takes 2 s"]
    fn long_calibration_matches_the_kernel_line() {
        let mut notes = Vec::new();
        let Some((k_hz, src)) = kernel_tsc_from_logs(&mut notes) else {
            eprintln!("no kernel line: {notes:?}");
            return;
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
}
