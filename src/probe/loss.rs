//! Lost rounds of the probes that run rounds of their own (contention,
//! overlap): a round that times out is lost, and the peer counts as gone
//! after [`LOSS_LIMIT`] of them; any other failure ends the probe.

use std::time::Duration;

use crate::sweep::SweepError;
use crate::transport::TransportError;

/// Lost rounds after which the peer counts as gone.
pub(crate) const LOSS_LIMIT: u32 = 4;

/// A round at `size` bytes failed with `e`: a timeout is a lost round
/// (`Ok`), any other error ends the probe.
pub(crate) fn lost_round(e: TransportError, size: usize) -> Result<(), SweepError> {
    match e {
        TransportError::Timeout(_) => Ok(()),
        source => Err(SweepError::Transport {
            size_bytes: size as u64,
            source,
        }),
    }
}

/// `losses` rounds at `size` bytes lost, the last after waiting `wait`:
/// at [`LOSS_LIMIT`] the peer counts as gone.
pub(crate) fn peer_gone(losses: u32, size: usize, wait: Duration) -> Result<(), SweepError> {
    if losses >= LOSS_LIMIT {
        return Err(SweepError::PeerLost {
            size_bytes: size as u64,
            losses,
            last: TransportError::Timeout(wait),
        });
    }
    Ok(())
}
