//! CLOCK_MONOTONIC_RAW: the fallback host clock, and the reference the TSC
//! is calibrated against.

use super::Clock;

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
