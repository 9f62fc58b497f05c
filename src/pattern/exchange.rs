//! The all-ranks exchange sweep (see `model::exchange`): every rank of a
//! job exchanges s bytes with a partner at once, as in the steps of
//! recursive doubling, the ring and the allgathers. Written over
//! [`AllRanks`]; every rank calls it with the same arguments.

use std::time::Instant;

use crate::clock::Clock;
use crate::model::exchange::ExchangeSamples;
use crate::transport::{AllRanks, TransportError};

/// Sizes of the exchange sweep: 1 B, the powers of two and their √2
/// midpoints up to `max_bytes`, and `max_bytes`.
pub fn exchange_sizes(max_bytes: u64) -> Vec<u64> {
    let mut v = vec![1u64];
    let mut p = 2u64;
    while p <= max_bytes {
        let mid = ((p / 2) as f64 * std::f64::consts::SQRT_2).round() as u64;
        if mid > *v.last().unwrap_or(&0) && mid < p {
            v.push(mid);
        }
        v.push(p);
        p *= 2;
    }
    if *v.last().unwrap_or(&0) < max_bytes {
        v.push(max_bytes);
    }
    v
}

/// Exchanges back to back in one round of the exchange sweep: enough that a
/// round of small steps lasts well beyond the barrier's skew.
fn exchange_steps(bytes: u64) -> u32 {
    ((256 * 1024) / bytes.max(1)).clamp(1, 16) as u32
}

/// The all-ranks exchange sweep over the sizes up to `max_msg_bytes`. The
/// ranks below the largest power of two P' ≤ P take part (the others only
/// join the barriers and reductions). Step j pairs rank r with r ⊕ d,
/// d = 1 + (j mod (P' − 1)): a new partner every step, as in recursive
/// doubling and halving, so no step finds its partner already running in
/// lockstep from the step before (on shared cores a rendezvous step waits
/// for the partner to be scheduled). Per size: one warm-up round, then
/// `rounds` rounds of a barrier and [`exchange_steps`] exchanges; a
/// round's value is the slowest rank's mean step. Every wait ends by
/// `deadline`.
pub fn exchange_sweep<T: AllRanks, C: Clock>(
    t: &mut T,
    clock: &C,
    sizes: &[u64],
    max_msg_bytes: u64,
    rounds: usize,
    deadline: Instant,
) -> Result<Vec<ExchangeSamples>, TransportError> {
    let (rank, ranks) = (t.rank(), t.ranks());
    let pow2 = if ranks.is_power_of_two() {
        ranks
    } else {
        ranks.next_power_of_two() / 2
    };
    let takes_part = rank < pow2 && pow2 >= 2;
    let mut out = Vec::with_capacity(sizes.len());
    for &bytes in sizes.iter().filter(|&&b| b <= max_msg_bytes) {
        let steps = exchange_steps(bytes);
        let mut rounds_ns = Vec::with_capacity(rounds);
        for round in 0..=rounds {
            t.barrier(deadline)?;
            let t0 = clock.now();
            if takes_part {
                for j in 0..steps as usize {
                    let partner = rank ^ (1 + j % (pow2 - 1));
                    t.exchange(partner, bytes as usize, deadline)?;
                }
            }
            let ns = clock.to_ns(clock.now().wrapping_sub(t0)) / f64::from(steps);
            if round > 0 {
                rounds_ns.push(if takes_part { ns } else { 0.0 });
            }
        }
        let step_ns = t.max_over_ranks(rounds_ns, deadline)?;
        out.push(ExchangeSamples {
            size_bytes: bytes,
            steps_per_round: steps,
            step_ns,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;

    #[test]
    fn sizes_are_powers_of_two_and_their_midpoints() {
        assert_eq!(exchange_sizes(1), [1]);
        assert_eq!(exchange_sizes(8), [1, 2, 3, 4, 6, 8]);
        assert_eq!(exchange_sizes(10), [1, 2, 3, 4, 6, 8, 10]);
        let v = exchange_sizes(4 << 20);
        assert_eq!((v.len(), v[v.len() - 1]), (44, 4 << 20));
    }

    /// Four ranks in one process: each exchange step costs 100 ns + 1 ns/B
    /// of virtual time, and rank 2 is 3× slower.
    struct Ranks {
        rank: usize,
        clock: VirtualClock,
        partners: Vec<usize>,
    }

    impl AllRanks for Ranks {
        fn rank(&self) -> usize {
            self.rank
        }
        fn ranks(&self) -> usize {
            4
        }
        fn barrier(&mut self, _: Instant) -> Result<(), TransportError> {
            Ok(())
        }
        fn exchange(
            &mut self,
            partner: usize,
            bytes: usize,
            _: Instant,
        ) -> Result<(), TransportError> {
            self.partners.push(partner);
            let slow = if self.rank == 2 { 3.0 } else { 1.0 };
            self.clock
                .advance_to_ns(self.clock.now_ns() + slow * (100.0 + bytes as f64));
            Ok(())
        }
        fn max_over_ranks(
            &mut self,
            vals: Vec<f64>,
            _: Instant,
        ) -> Result<Vec<f64>, TransportError> {
            // The slowest rank's values (rank 2's, three times these).
            Ok(vals
                .iter()
                .map(|v| v * if self.rank == 2 { 1.0 } else { 3.0 })
                .collect())
        }
    }

    #[test]
    fn a_round_is_the_slowest_ranks_mean_step_with_a_new_partner_each_step() {
        let clock = VirtualClock::new();
        let mut r = Ranks {
            rank: 1,
            clock: clock.clone(),
            partners: Vec::new(),
        };
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let x = exchange_sweep(&mut r, &clock, &[1, 1 << 20, 8 << 20], 4 << 20, 3, far).unwrap();
        // 8 MiB is above the largest message: not measured.
        assert_eq!(x.len(), 2);
        assert_eq!((x[0].size_bytes, x[0].steps_per_round), (1, 16));
        assert_eq!(x[0].step_ns, [303.0; 3]);
        assert_eq!(
            (x[1].steps_per_round, x[1].step_ns[0]),
            (1, 3.0 * (100.0 + 1048576.0))
        );
        // Rank 1 meets 0, 3, 2, 0, ... (1 ⊕ 1, 1 ⊕ 2, 1 ⊕ 3).
        assert_eq!(&r.partners[..4], [0, 3, 2, 0]);
    }
}
