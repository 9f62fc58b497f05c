//! Alltoall candidates (m = the block one rank sends to each rank):
//! pairwise exchange and linear (everything posted at once).

use super::cost::{exchange_step, exchange_step_k, msg};
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

pub(super) fn alltoall<N: Network + ?Sized>(
    net: &N,
    p: usize,
    c: u64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    // Pairwise: P − 1 all-ranks exchange steps of one block.
    let pairwise = (p as f64 - 1.0) * exchange_step(net, p, c, sh)?;
    Ok(Candidates::new(
        p,
        &[
            (Algorithm::AlltoallPairwise, pairwise, 0),
            (Algorithm::AlltoallLinear, linear(net, p, c, sh)?, 0),
        ],
    ))
}

/// Every rank sends a block of `c` bytes to each other rank, all posted at
/// once (alltoall's and allgather's linear exchange).
pub(super) fn linear<N: Network + ?Sized>(
    net: &N,
    p: usize,
    c: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    // Every rank injects its P − 1 blocks back to back; the last arrives
    // one exchange after the first was sent, P − 2 gaps later, every rank
    // busy throughout.
    let m = msg(net, c)?;
    let one = exchange_step(net, p, c, sh)?;
    let injected = one + (p as f64 - 2.0).max(0.0) * m.gap_ns * sh.factor(p);
    // With the transport's penalties: each rank has P − 1 exchanges in
    // flight at once (mixed, k = P − 1), and each of them takes the step
    // stretched by that conflict; the injection above still bounds it.
    Ok(
        match exchange_step_k(net, p, c, sh, p.saturating_sub(1).max(1))? {
            Some(all) => all.max(injected),
            None => injected,
        },
    )
}
