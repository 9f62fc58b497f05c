//! Reduce candidates: binomial tree and Rabenseifner (reduce-scatter by
//! recursive halving, then a binomial gather), commutative operations.

use super::cost::{ceil_log2, exchange_step, msg};
use super::{Algorithm, Candidates, Network, Sharing};
use crate::types::LookupError;

/// Reduce candidates over m bytes, combining at γ ns per byte.
pub(super) fn reduce<N: Network + ?Sized>(
    net: &N,
    p: usize,
    m: u64,
    gamma: f64,
    sh: Sharing,
) -> Result<Candidates, LookupError> {
    let rounds = ceil_log2(p);
    let pow2 = p.is_power_of_two();
    let mf = m as f64;
    let pp = p.next_power_of_two();

    // Binomial: in round k the ranks of stride 2^(k+1) receive m bytes from
    // the rank 2^k above and combine them; P'/2^(k+1) transfers at once.
    let mut binomial = 0.0;
    for k in 0..rounds {
        let flows = (pp >> (k + 1)).max(1);
        binomial += (msg(net, m)?.t_ns + gamma * mf) * sh.factor(flows);
    }

    // Rabenseifner: fold in (non-powers of two: one exchange of m and its
    // combining), recursive halving (all ranks busy: X(m/2^k) + γ·m/2^k),
    // then the gather: in round j the ranks of stride 2^(j+1) receive
    // 2^j blocks of m/P'.
    let q = if pow2 { p } else { pp / 2 };
    let q_rounds = ceil_log2(q);
    let mut rab = if pow2 {
        0.0
    } else {
        exchange_step(net, p, m, sh)? + gamma * mf * sh.factor(p)
    };
    for k in 1..=q_rounds {
        let s = (m >> k).max(1);
        rab += exchange_step(net, p, s, sh)? + gamma * s as f64 * sh.factor(p);
    }
    let blk = m.div_ceil(q as u64).max(1);
    for j in 0..q_rounds {
        let flows = (q >> (j + 1)).max(1);
        rab += msg(net, blk << j)?.t_ns * sh.factor(flows);
    }

    Ok(Candidates::new(
        p,
        &[
            (Algorithm::ReduceBinomial, binomial, 0),
            (Algorithm::ReduceRabenseifner, rab, 0),
        ],
    ))
}
