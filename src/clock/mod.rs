//! Time sources for probes.
//!
//! A [`Clock`] reads ticks and converts them to nanoseconds. Real probes use
//! [`TscClock`] (serialized, calibrated TSC) or [`MonoRawClock`]
//! (CLOCK_MONOTONIC_RAW fallback), chosen once by [`HostClock`]; the `sim`
//! transport drives a [`VirtualClock`] whose time only moves when simulated
//! work happens.
//!
//! Layout, from the hardware up:
//! - `tsc`: TSC reads, CPUID leaves, calibration against
//!   CLOCK_MONOTONIC_RAW, [`TscClock`];
//! - `mono_raw`: CLOCK_MONOTONIC_RAW, [`MonoRawClock`];
//! - `virtual_clock`: the simulator's picosecond time line;
//! - this module: the [`Clock`] trait and the host's choice between the
//!   two real clocks ([`HostClock`], [`ClockChoice`]);
//! - `spin`: [`SpinDeadline`], the deadline of a busy-polling wait over any
//!   clock;
//! - `kernel_log`: the kernel's logged TSC rate (`tsc: Detected …`,
//!   `tsc: Refined …`) from /dev/kmsg, journalctl or dmesg;
//! - `info`: [`ClockInfo`], the report `ngctl clock` prints.

mod info;
mod kernel_log;
mod mono_raw;
mod spin;
mod tsc;
mod virtual_clock;

pub use info::{clock_info, measure_read_cost_ns, ClockInfo};
pub use kernel_log::{best_kernel_tsc_line, parse_kernel_tsc_line, KernelTscLine};
pub use mono_raw::{mono_raw_ns, MonoRawClock};
pub use spin::SpinDeadline;
pub use tsc::{
    calibrate_tsc, read_tsc, tsc_invariant, Calibration, CpuidTscInfo, RateSource, TscClock,
};
pub use virtual_clock::VirtualClock;

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
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

impl ClockChoice {
    /// Every choice, in the order `--clock` lists them.
    pub const ALL: [ClockChoice; 3] = [
        ClockChoice::Auto,
        ClockChoice::Tsc,
        ClockChoice::MonotonicRaw,
    ];

    /// The name `--clock` and `clock =` take.
    pub fn name(self) -> &'static str {
        match self {
            ClockChoice::Auto => "auto",
            ClockChoice::Tsc => "tsc",
            ClockChoice::MonotonicRaw => "monotonic-raw",
        }
    }
}

impl std::str::FromStr for ClockChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ClockChoice::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown clock {s:?} (auto, tsc or monotonic-raw)"))
    }
}

impl HostClock {
    /// How far apart (ppm) two calibrations of a TSC that is not flagged
    /// invariant may be for `--clock tsc` to accept it: 0.1 %, far above the
    /// calibration's own noise on a loaded virtual machine and far below a
    /// frequency-scaled TSC's change (tens of percent), and a rate error
    /// that small is invisible in any LogGP parameter.
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

#[cfg(test)]
mod tests;
