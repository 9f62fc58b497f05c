//! Allgather candidates (m = one rank's block): recursive doubling (powers
//! of two; a non-power of two pays one more step of the largest size, as
//! Bruck's variant does), the ring, and linear (every block sent directly:
//! alltoall's linear exchange with one block for every rank).

use super::alltoall::linear;
use super::cost::{ceil_log2, exchange_step};
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

pub(super) fn allgather<N: Network + ?Sized>(
    net: &N,
    p: usize,
    c: u64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    let rounds = ceil_log2(p);
    // Step k exchanges the 2^k blocks gathered so far: X(2^k·c).
    let mut rd = 0.0;
    for k in 0..rounds {
        rd += exchange_step(net, p, c << k, sh)?;
    }
    if !p.is_power_of_two() {
        rd += exchange_step(net, p, c << rounds.saturating_sub(1), sh)?;
    }
    // Ring: P − 1 steps of one block.
    let ring = (p as f64 - 1.0) * exchange_step(net, p, c.max(1), sh)?;
    Ok(Candidates::new(
        p,
        &[
            (Algorithm::AllgatherRecursiveDoubling, rd, 0),
            (Algorithm::AllgatherRing, ring, 0),
            (Algorithm::AllgatherLinear, linear(net, p, c, sh)?, 0),
        ],
    ))
}
