//! Binomial trees, evaluated node by node (see "Trees" in the module
//! documentation of `select`).

use super::cost::{burst_gap, msg};
use super::{Network, Sharing};
use crate::types::LookupError;

/// Children of `rel` (relative rank) in the binomial tree over `p` ranks,
/// in send order (largest subtree first), with the size of each subtree.
/// Node r's parent is r − lowbit(r); its children are r + 2^k for
/// 2^k < lowbit(r) (all k for the root).
pub(super) fn binomial_children(rel: usize, p: usize, out: &mut [(usize, usize); 64]) -> usize {
    let limit = if rel == 0 {
        p.next_power_of_two()
    } else {
        rel & rel.wrapping_neg()
    };
    let mut n = 0;
    let mut mask = limit >> 1;
    while mask > 0 {
        let child = rel + mask;
        if child < p {
            out[n] = (child, mask.min(p - child));
            n += 1;
        }
        mask >>= 1;
    }
    n
}

/// Completion time of a binomial-tree broadcast (or scatter when
/// `per_rank_bytes` > 0: each edge carries its subtree's share) from the
/// root: evaluated node by node as described in the module documentation.
///
/// Sharing: the edge from r to r + d belongs to the round in which the
/// ranks holding data are those of stride 2d, so P' / (2d) edges (P' = P
/// rounded up to a power of two) carry bytes at once.
pub(super) fn binomial_tree<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bcast_bytes: u64,
    per_rank_bytes: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    // ready[r]: when relative rank r holds its data. Parents have smaller
    // ranks than their children, so one pass in rank order suffices.
    let mut ready = [0f64; 1024];
    if p > ready.len() {
        // Beyond 1024 ranks: the closed form ⌈log2 P⌉·T(m) (bcast) or
        // Σ_k T(m/2^k) (scatter).
        let rounds = usize::BITS - (p - 1).leading_zeros();
        let mut t = 0.0;
        for k in 1..=rounds {
            let s = if per_rank_bytes > 0 {
                per_rank_bytes * (p as u64 >> k).max(1)
            } else {
                bcast_bytes
            };
            t += msg(net, s)?.t_shared(sh.factor(1 << (k - 1)));
        }
        return Ok(t);
    }
    let mut kids = [(0usize, 0usize); 64];
    let mut finish: f64 = 0.0;
    for r in 0..p {
        let n = binomial_children(r, p, &mut kids);
        let mut start = ready[r];
        for (j, &(child, subtree)) in kids[..n].iter().enumerate() {
            let s = if per_rank_bytes > 0 {
                per_rank_bytes * subtree as u64
            } else {
                bcast_bytes
            };
            let m = msg(net, s)?;
            let flows = (p.next_power_of_two() / (2 * (child - r))).max(1);
            ready[child] = start + m.t_shared(sh.factor(flows));
            finish = finish.max(ready[child]);
            start += burst_gap(net, s, j, n, &m)?;
        }
    }
    Ok(finish)
}
