//! The one idle policy of every wait of the core (receive, accept,
//! handshake): spin, then give the CPU away, then sleep.
//!
//! A wait that has found nothing busy-polls: a probe's answer is
//! microseconds away and must be seen at once. After
//! [`IdlePolicy::yield_after`] without traffic it calls `sched_yield`
//! between polls, so a waiter sharing its core with the peer (or with
//! anything else) does not starve it; that is far above a small-message
//! round trip, so it does not touch latency measurements. After
//! [`IdlePolicy::sleep_after`] it sleeps in poll(2) until a frame arrives,
//! at most [`SLEEP_SLICE`] at a time and never past the caller's deadline:
//! an idle responder wakes once per deadline of its caller (the daemon's
//! look at its shutdown flag), not many times a second, and a probe in
//! progress never waits this long (poll returns as soon as a frame is
//! readable). "Without traffic" counts from the last frame sent or received; a
//! client (a prober) counts at least from the start of each wait, so it
//! spins whenever it waits for an answer.

use std::time::Duration;

use crate::clock::Clock;

/// Longest single sleep: the caller's deadline is checked between sleeps.
/// Long enough that an idle responder's wake-ups are its caller's, not the
/// slice's (an idle daemon's CPU budget is 0.1 % of a core).
pub const SLEEP_SLICE: Duration = Duration::from_secs(1);

/// When a wait stops spinning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdlePolicy {
    /// Yield the CPU between polls after this long without traffic
    /// (`None`: never).
    pub yield_after: Option<Duration>,
    /// Sleep in poll(2) after this long without traffic.
    pub sleep_after: Duration,
}

impl Default for IdlePolicy {
    fn default() -> Self {
        IdlePolicy {
            yield_after: Some(Duration::from_micros(50)),
            sleep_after: Duration::from_millis(20),
        }
    }
}

/// What a wait that found nothing does before it polls again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// Poll again at once.
    Spin,
    /// `sched_yield`, then poll.
    Yield,
    /// Sleep until readable, at most this many ticks.
    Sleep(u64),
}

/// [`IdlePolicy`] in ticks of one clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Idle {
    yield_ticks: u64,
    sleep_ticks: u64,
    slice_ticks: u64,
}

impl Idle {
    pub fn new<C: Clock>(policy: &IdlePolicy, clock: &C) -> Idle {
        let ticks = |d: Duration| clock.from_ns(d.as_nanos() as f64);
        Idle {
            yield_ticks: policy.yield_after.map_or(u64::MAX, ticks),
            sleep_ticks: ticks(policy.sleep_after),
            slice_ticks: ticks(SLEEP_SLICE).max(1),
        }
    }

    /// The pause after `quiet_ticks` without traffic, `left_ticks` before
    /// the deadline.
    pub fn pause(&self, quiet_ticks: u64, left_ticks: u64) -> Pause {
        if quiet_ticks >= self.sleep_ticks && left_ticks > 0 {
            Pause::Sleep(left_ticks.min(self.slice_ticks))
        } else if quiet_ticks >= self.yield_ticks {
            Pause::Yield
        } else {
            Pause::Spin
        }
    }
}
