//! Broadcast candidates: binomial tree, scatter + recursive-doubling or
//! ring allgather, and the pipelined chain.

use super::cost::{ceil_log2, exchange_step, msg};
use super::tree::binomial_tree;
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

/// The pipelined chain of `m` bytes in segments of `k` over P − 1 hops (see
/// [`bcast`]). Sharing: while the first segment crosses hop h (1-based),
/// the segments behind it occupy the hops before it, so min(h, n) links
/// carry a segment at once; in steady state min(n, P − 1) do, and the
/// period stretches with that many busy forwarding ranks.
pub(super) fn chain_time<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    k: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    let segs = m.div_ceil(k.max(1)).max(1);
    let in_flight = usize::try_from(segs).unwrap_or(usize::MAX);
    let x = msg(net, k)?;
    let t = x.t_shared(sh.factor_sum(p.saturating_sub(1), in_flight));
    let busy = sh.factor((p - 1).min(in_flight));
    Ok(t + (segs as f64 - 1.0) * x.gap_ns.max(x.forward_ns) * busy)
}

/// Broadcast candidates. Root holds m bytes; c = ⌈m/P⌉ is one rank's share.
pub(super) fn bcast<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    let c = m.div_ceil(p as u64).max(1);
    let rounds = ceil_log2(p);

    // Binomial tree: every edge carries all m bytes (tree evaluation).
    let binomial = binomial_tree(net, p, m, 0, sh)?;

    // Scatter + allgather (van de Geijn): a binomial scatter (the edge to a
    // subtree of k ranks carries k·c bytes) then an allgather of the P
    // shares.
    let scatter = binomial_tree(net, p, 0, c, sh)?;
    // Both allgathers keep every rank busy in every step: each step is an
    // all-ranks exchange (exchange_step).
    // Recursive-doubling allgather: in step k = 0..log2 P − 1 every rank
    // exchanges the 2^k·c bytes it has with rank ⊕ 2^k; send and receive
    // overlap, so a step costs X(2^k·c). Non-powers of two need one more
    // step of the largest size (the ranks beyond the power of two are folded
    // in and out).
    let mut rd = 0.0;
    for k in 0..rounds {
        rd += exchange_step(net, p, c << k, sh)?;
    }
    if !p.is_power_of_two() {
        rd += exchange_step(net, p, c << rounds.saturating_sub(1), sh)?;
    }
    // Ring allgather: P − 1 steps, each passes one share of c bytes to the
    // right neighbour while receiving one from the left: (P−1)·X(c).
    let ring = (p as f64 - 1.0) * exchange_step(net, p, c, sh)?;

    // Pipelined chain with segments of k bytes, n = ⌈m/k⌉ segments over
    // P − 1 hops. The first segment reaches the last rank after
    // (P−1)·T(k); every later one follows a pipeline period behind. The
    // period is the slowest stage: a link accepts one segment per gap(k); an
    // inner rank spends forward(k) = o_s + o_r + (k−1)·max(O_s, O_r) of CPU
    // per segment (receive, then send on; the segment's one copy per hop
    // counted once). T = (P−1)·T(k) + (n−1)·max(gap(k), forward(k)), with
    // the hops and periods stretched by the ranks that share cores
    // ([`chain_time`]).
    // The optimal k (d T / d k = 0 gives k* = sqrt(m·a / ((P−2)·G)) for
    // T(k) ≈ a + k·G) is found by evaluating powers of two and S, since the
    // range boundaries make T non-smooth.
    let (chain, seg) = if p <= 1 {
        (0.0, m)
    } else {
        let mut best = (f64::INFINITY, m);
        let mut k = 64u64.min(m.max(1));
        let mut candidates = [0u64; 48];
        let mut n = 0;
        while n < 40 {
            candidates[n] = k.min(m.max(1));
            n += 1;
            if k >= m {
                break;
            }
            k *= 2;
        }
        let s_bytes = net.at(m)?.S_bytes;
        if s_bytes != u64::MAX && s_bytes > 0 && s_bytes < m {
            candidates[n] = s_bytes;
            n += 1;
        }
        for &k in &candidates[..n] {
            let t = chain_time(net, p, m, k, sh)?;
            if t < best.0 {
                best = (t, k);
            }
        }
        best
    };

    Ok(Candidates::new(
        p,
        &[
            (Algorithm::BcastBinomial, binomial, 0),
            (Algorithm::BcastScatterRdAllgather, scatter + rd, 0),
            (Algorithm::BcastScatterRingAllgather, scatter + ring, 0),
            (Algorithm::BcastChain, chain, seg),
        ],
    ))
}
