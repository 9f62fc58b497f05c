//! The deadline of a busy-polling wait, over any [`Clock`].

use super::Clock;

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
