//! Time sources for probes.
//!
//! A [`Clock`] reads ticks and converts them to nanoseconds. Real probes use
//! [`TscClock`] (serialized, calibrated TSC) or [`MonoRawClock`]
//! (CLOCK_MONOTONIC_RAW fallback); the `sim` transport drives a
//! [`VirtualClock`] whose time only moves when simulated work happens.

use std::cell::Cell;
use std::rc::Rc;

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
