//! PRTT(n, d, s): the parametrized round trip of Hoefler, Lichei and Rehm
//! (Listing 1), its mirror server, and the drain step after a lost message.
//!
//! Client: send n messages of s bytes, spinning d between them; the n-th
//! carries `answer`; wait for the server's one answer of s bytes. The time from
//! before the first send to after the answer arrived is PRTT(n, d, s).
//!
//! Nothing here allocates or makes a system call of its own: the loop is
//! sends, spins and one receive.

use std::time::Duration;

use crate::clock::Clock;
use crate::transport::{Meta, PeerId, Transport, TransportError};

/// One completed PRTT(n, d, s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrttSample {
    /// The round trip, in nanoseconds.
    pub rtt_ns: f64,
    /// The receive overhead the server reported on its answer (0 if none).
    pub server_o_r_ns: f64,
}

/// Run one PRTT(n, d, s) against `peer`. `d_ticks` is the delay between
/// sends in clock ticks. A lost message surfaces as `Timeout` after `timeout`.
pub fn prtt<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    n: u32,
    d_ticks: u64,
    size_bytes: usize,
    timeout: Duration,
) -> Result<PrttSample, TransportError> {
    debug_assert!(n >= 1);
    let last = Meta {
        answer: true,
        report_ns: 0,
    };
    let plain = Meta::default();
    let start = clock.now();
    transport.send(peer, size_bytes, if n == 1 { last } else { plain })?;
    for i in 1..n {
        if d_ticks > 0 {
            clock.spin(d_ticks);
        }
        transport.send(peer, size_bytes, if i + 1 == n { last } else { plain })?;
    }
    let answer = transport.recv(Some(peer), timeout)?;
    let end = clock.now();
    Ok(PrttSample {
        rtt_ns: clock.to_ns(end.wrapping_sub(start)),
        server_o_r_ns: f64::from(answer.meta.report_ns),
    })
}

/// After a timed-out PRTT, swallow answers that may still arrive late so
/// they are not mistaken for the answer to the next burst. Returns how many
/// stale messages were discarded.
pub fn drain<T: Transport>(transport: &mut T, quiet: Duration) -> usize {
    let mut stale = 0;
    while transport.recv(None, quiet).is_ok() {
        stale += 1;
    }
    stale
}

/// Statistics a mirror server keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServeStats {
    pub messages: u64,
    pub answers: u64,
    pub timeouts: u64,
    pub sessions_ended: u64,
    /// Answers abandoned because a send failed (a full queue past its
    /// deadline, a route or link that went away): the burst is lost, the
    /// responder carries on.
    pub send_failures: u64,
}

/// The mirror server: receive messages; when one asks for an answer, reply
/// with one message of the same size (or, for a reverse burst, as many as
/// [`Meta::answers`] says) whose `report_ns` (on the last) carries the mean
/// receive overhead o_r of the burst it closes. Runs until `keep_going`
/// returns false (checked at least every `idle` of silence).
pub fn serve<T: Transport>(
    transport: &mut T,
    idle: Duration,
    mut keep_going: impl FnMut(&ServeStats) -> bool,
) -> Result<ServeStats, TransportError> {
    let mut stats = ServeStats::default();
    let mut burst_overhead_ns = 0.0;
    let mut burst_messages = 0u32;
    while keep_going(&stats) {
        let got = match transport.recv(None, idle) {
            Ok(got) => got,
            Err(TransportError::Timeout(_)) => {
                stats.timeouts += 1;
                // A burst cut short by a lost message is abandoned.
                burst_overhead_ns = 0.0;
                burst_messages = 0;
                continue;
            }
            Err(TransportError::PeerGone(_)) => {
                // The client ended its session; wait for the next one.
                stats.sessions_ended += 1;
                burst_overhead_ns = 0.0;
                burst_messages = 0;
                continue;
            }
            Err(e) => return Err(e),
        };
        stats.messages += 1;
        burst_overhead_ns += got.overhead_ns;
        burst_messages += 1;
        let answers = got.meta.answers();
        if answers > 0 {
            let mean_ns = burst_overhead_ns / f64::from(burst_messages);
            let report = Meta {
                answer: false,
                report_ns: mean_ns.round().clamp(0.0, f64::from(u32::MAX)) as u32,
            };
            let sent = (1..answers)
                .try_for_each(|_| transport.send(got.peer, got.bytes, Meta::default()))
                .and_then(|()| transport.send(got.peer, got.bytes, report));
            match sent {
                Ok(()) => stats.answers += 1,
                // A send that fails loses this answer, as a lost frame
                // would (the prober times out and counts a loss); one
                // failure must not end a standing responder. A link that
                // is broken for good fails its next receive.
                Err(e) => {
                    stats.send_failures += 1;
                    tracing::debug!("an answer was not sent: {e}");
                }
            }
            burst_overhead_ns = 0.0;
            burst_messages = 0;
        }
    }
    Ok(stats)
}
