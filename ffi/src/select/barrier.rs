//! Barrier candidates: dissemination and a binomial tree in and out.

use super::cost::{ceil_log2, exchange_step};
use super::tree::binomial_tree;
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

/// Barrier candidates (messages of 0 bytes; LogfP applies).
pub(super) fn barrier<N: Network + ?Sized>(
    net: &N,
    p: usize,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    // Dissemination: ⌈log2 P⌉ rounds; in round k rank r notifies r + 2^k
    // and waits for r − 2^k. Sends and receives overlap: ⌈log2 P⌉·T(0),
    // every rank busy in every round.
    let dis = f64::from(ceil_log2(p)) * exchange_step(net, p, 0, sh)?;
    // Tree: a binomial fan-in to the root and a binomial fan-out back. The
    // fan-in is the fan-out run backwards (the root receives where it would
    // send), so it takes as long: 2 × binomial broadcast of 0 bytes.
    let tree = 2.0 * binomial_tree(net, p, 0, 0, sh)?;
    Ok(Candidates::new(
        p,
        &[
            (Algorithm::BarrierDissemination, dis, 0),
            (Algorithm::BarrierTree, tree, 0),
        ],
    ))
}
