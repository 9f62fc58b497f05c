//! Alltoall candidates (m = the block one rank sends to each rank):
//! pairwise exchange and linear (everything posted at once).

use super::cost::{exchange_step, msg};
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
    // Linear: every rank injects its P − 1 blocks back to back; the last
    // arrives one exchange after the first was sent, P − 2 gaps later,
    // every rank busy throughout.
    let m = msg(net, c)?;
    let linear =
        exchange_step(net, p, c, sh)? + (p as f64 - 2.0).max(0.0) * m.gap_ns * sh.factor(p);
    Ok(Candidates::new(
        p,
        &[
            (Algorithm::AlltoallPairwise, pairwise, 0),
            (Algorithm::AlltoallLinear, linear, 0),
        ],
    ))
}
