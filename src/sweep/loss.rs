//! Losses and waits of a sweep's rounds: [`LossGuard`] counts rounds lost
//! in a row and learns the link's pace, so that the wait for an answer
//! grows with what a round sends; [`round`] is one PRTT round under it.

use std::time::Duration;

use super::SweepError;
use crate::clock::Clock;
use crate::pattern::prtt::{drain, prtt, PrttSample};
use crate::transport::{PeerId, Transport, TransportError};

/// Counts rounds lost in a row and turns too many into an error; learns
/// how long the link takes per byte, so the wait for an answer grows with
/// what a round sends.
pub(super) struct LossGuard {
    limit: u32,
    in_a_row: u32,
    total: u32,
    /// Round trip per byte sent of the last [`PACE_ROUNDS`] rounds that
    /// sent at least [`PACE_MIN_BYTES`] (a ring; `paces_seen` of them
    /// filled). Their median is the link's pace: one round slowed by a
    /// descheduled host must not stretch every later wait.
    paces: [f64; PACE_ROUNDS],
    paces_seen: usize,
    /// The wait of the last round (what a loss drains after).
    last_wait: Duration,
}

/// Rounds that send less are latency-bound and say nothing of the pace.
pub(super) const PACE_MIN_BYTES: usize = 64 * 1024;
/// The pace is the median of this many recent rounds.
const PACE_ROUNDS: usize = 15;
/// A round's answer is waited for this many times its predicted time...
const PACE_MARGIN: f64 = 4.0;
/// ... but never longer than this.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(30);

impl LossGuard {
    pub(super) fn new(limit: u32) -> Self {
        Self {
            limit: limit.max(1),
            in_a_row: 0,
            total: 0,
            paces: [0.0; PACE_ROUNDS],
            paces_seen: 0,
            last_wait: Duration::ZERO,
        }
    }

    /// How long to wait for the answer to a round of `n` messages of `s`
    /// bytes: the configured `base`, or [`PACE_MARGIN`] times what the
    /// link's pace predicts if that is longer. A 1 MiB burst over a slow
    /// link is not a lost round.
    pub(super) fn wait(&self, base: Duration, n: u32, s: usize) -> Duration {
        let predicted_ns = self.pace_ns_per_byte() * f64::from(n) * s as f64;
        let paced = Duration::from_secs_f64((PACE_MARGIN * predicted_ns * 1e-9).min(1e6));
        base.max(paced).min(MAX_WAIT.max(base))
    }

    pub(super) fn paced(&mut self, n: u32, s: usize, rtt_ns: f64) {
        let bytes = n as usize * s;
        if bytes >= PACE_MIN_BYTES && rtt_ns.is_finite() && rtt_ns > 0.0 {
            self.paces[self.paces_seen % PACE_ROUNDS] = rtt_ns / bytes as f64;
            self.paces_seen += 1;
        }
    }

    /// The median of the recent paces (0 before the first); on the stack.
    pub(super) fn pace_ns_per_byte(&self) -> f64 {
        let k = self.paces_seen.min(PACE_ROUNDS);
        if k == 0 {
            return 0.0;
        }
        let mut p = self.paces;
        let p = &mut p[..k];
        p.sort_unstable_by(f64::total_cmp);
        p[k / 2]
    }

    /// Decide what a failed round means: retry (Ok) or give up (Err).
    pub(super) fn on_error<T: Transport>(
        &mut self,
        transport: &mut T,
        err: TransportError,
        size_bytes: u64,
        timeout: Duration,
    ) -> Result<(), SweepError> {
        match err {
            TransportError::Timeout(_) => {
                self.in_a_row += 1;
                self.total += 1;
                if self.in_a_row >= self.limit {
                    return Err(SweepError::PeerLost {
                        size_bytes,
                        losses: self.in_a_row,
                        last: err,
                    });
                }
                // An answer that arrives late must not close the next round.
                drain(transport, timeout.max(self.last_wait) / 4);
                Ok(())
            }
            other => Err(SweepError::Transport {
                size_bytes,
                source: other,
            }),
        }
    }

    pub(super) fn on_success(&mut self) {
        self.in_a_row = 0;
    }

    /// Counts the outcome `r` of one round: Some(its result) when it was
    /// answered, None when it was lost (the caller tries again), an error
    /// as [`LossGuard::on_error`] gives up.
    pub(super) fn count<T: Transport, R>(
        &mut self,
        transport: &mut T,
        r: Result<R, TransportError>,
        size_bytes: u64,
        timeout: Duration,
    ) -> Result<Option<R>, SweepError> {
        match r {
            Ok(x) => {
                self.on_success();
                Ok(Some(x))
            }
            Err(e) => self
                .on_error(transport, e, size_bytes, timeout)
                .map(|()| None),
        }
    }

    /// Rounds lost (and retried) so far.
    pub(super) fn lost_rounds(&self) -> u32 {
        self.total
    }
}

/// One PRTT(n, d, s) whose wait for the answer follows the link's pace
/// ([`LossGuard::wait`]); a round that is answered teaches the pace.
#[allow(clippy::too_many_arguments)]
pub(super) fn round<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    n: u32,
    d_ticks: u64,
    s: usize,
    base: Duration,
    guard: &mut LossGuard,
) -> Result<PrttSample, TransportError> {
    guard.last_wait = guard.wait(base, n, s);
    let r = prtt(transport, clock, peer, n, d_ticks, s, guard.last_wait);
    if let Ok(x) = &r {
        guard.paced(n, s, x.rtt_ns);
    }
    r
}
