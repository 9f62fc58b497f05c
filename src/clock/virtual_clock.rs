//! The simulator's clock: virtual time in picoseconds, moved only by the
//! `sim` transport and by [`Clock::spin`].

use std::cell::Cell;
use std::rc::Rc;

use super::Clock;

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
