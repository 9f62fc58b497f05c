//! Allreduce candidates: recursive doubling, Rabenseifner (recursive
//! halving + doubling), the ring, and linear (every rank sends its vector
//! to every other and combines all P itself).

use super::alltoall::linear;
use super::cost::{ceil_log2, exchange_step};
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

/// Allreduce candidates over m bytes, combining at γ ns per byte.
pub(super) fn allreduce<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    gamma: f64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    // Every step of all three keeps every rank busy (P transfers, P ranks
    // combining).
    let all = sh.factor(p);
    let gamma = gamma * all;
    let rounds = ceil_log2(p);
    let pow2 = p.is_power_of_two();
    let mf = m as f64;

    // Each exchange of s bytes is an all-ranks step X(s) (exchange_step).
    // Recursive doubling: log2 P steps, each exchanges all m bytes with
    // rank ⊕ 2^k and combines them: log2 P·(X(m) + γ·m). A non-power of two
    // adds a fold-in step before and a fold-out step after: +2·X(m) + γ·m.
    let tm = exchange_step(net, p, m, sh)?;
    let mut rd = f64::from(rounds) * (tm + gamma * mf);
    if !pow2 {
        rd = f64::from(rounds - 1) * (tm + gamma * mf) + 2.0 * tm + gamma * mf;
    }

    // Rabenseifner: reduce-scatter by recursive halving (step k exchanges
    // and combines m/2^k bytes), then allgather by recursive doubling (the
    // same sizes in reverse, without combining):
    // Σ_{k=1..log2 P} [2·X(m/2^k) + γ·m/2^k]; non-powers of two fold in and
    // out like recursive doubling (+2·X(m) + γ·m).
    let q = if pow2 { p } else { p.next_power_of_two() / 2 };
    let q_rounds = ceil_log2(q);
    let mut rab = 0.0;
    for k in 1..=q_rounds {
        let s = (m >> k).max(1);
        rab += 2.0 * exchange_step(net, p, s, sh)? + gamma * s as f64;
    }
    if !pow2 {
        rab += 2.0 * tm + gamma * mf;
    }

    // Ring: a reduce-scatter of P − 1 steps (pass one block of m/P to the
    // right, combine the one from the left) and an allgather of P − 1
    // steps: 2(P−1)·X(m/P) + (P−1)·γ·m/P.
    let b = m.div_ceil(p as u64).max(1);
    let ring = 2.0 * (p as f64 - 1.0) * exchange_step(net, p, b, sh)?
        + (p as f64 - 1.0) * gamma * b as f64;

    // Linear: one exchange of the whole vector with every other rank (as
    // alltoall's linear exchange of m-byte blocks), then P − 1 combinings.
    let direct = linear(net, p, m, sh)? + (p as f64 - 1.0) * gamma * mf;

    Ok(Candidates::new(
        p,
        &[
            (Algorithm::AllreduceRecursiveDoubling, rd, 0),
            (Algorithm::AllreduceRabenseifner, rab, 0),
            (Algorithm::AllreduceRing, ring, 0),
            (Algorithm::AllreduceLinear, direct, 0),
        ],
    ))
}
