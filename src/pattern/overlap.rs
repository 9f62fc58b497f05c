//! One round of Bell et al.'s CPU-overlap test over a mirror server: post a
//! message that asks for an answer, compute for a calibrated time
//! ([`Clock::spin`]), then wait for the answer. While the computation is
//! shorter than the time the transfer needs no CPU, the round is as long as
//! without it; past that it grows one for one. Nothing here allocates or
//! makes a system call of its own.

use std::time::Duration;

use crate::clock::Clock;
pub use crate::model::overlap::OverlapSample;
use crate::transport::{Meta, PeerId, Transport, TransportError};

/// Post `size_bytes` to `peer`, compute `compute_ticks`, wait for the
/// answer (at most `timeout`).
pub fn overlap_round<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    size_bytes: usize,
    compute_ticks: u64,
    timeout: Duration,
) -> Result<OverlapSample, TransportError> {
    let start = clock.now();
    transport.send(peer, size_bytes, Meta::asking(1))?;
    let posted = clock.now();
    if compute_ticks > 0 {
        clock.spin(compute_ticks);
    }
    transport.recv(Some(peer), timeout)?;
    let end = clock.now();
    Ok(OverlapSample {
        compute_ns: clock.to_ns(compute_ticks),
        post_ns: clock.to_ns(posted.wrapping_sub(start)),
        total_ns: clock.to_ns(end.wrapping_sub(start)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::sim::sim;

    /// In the simulator the post costs o and the answer's receive o: a
    /// computation shorter than the rest of the round trip is hidden, a
    /// longer one adds to the round.
    #[test]
    fn computation_is_hidden_until_the_answer_waits() {
        let (mut t, clock) = sim("L=5000,o=300,g=500,G=1", 1);
        let to = Duration::from_secs(1);
        let base = overlap_round(&mut t, &clock, 0, 1000, 0, to).unwrap();
        assert!((base.post_ns - 300.0).abs() < 1.0, "{base:?}");
        let hidden = overlap_round(&mut t, &clock, 0, 1000, clock.from_ns(2000.0), to).unwrap();
        assert!(
            (hidden.total_ns - base.total_ns).abs() < 1.0,
            "{hidden:?} vs {base:?}"
        );
        let long = base.total_ns * 2.0;
        let over = overlap_round(&mut t, &clock, 0, 1000, clock.from_ns(long), to).unwrap();
        assert!(over.total_ns > base.total_ns + 1000.0, "{over:?}");
        // Past the knee: the post, the computation and the receive's o.
        assert!(
            (over.total_ns - (over.post_ns + long + 300.0)).abs() < 1.0,
            "{over:?}"
        );
    }
}
