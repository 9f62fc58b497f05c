//! The all-ranks exchange sweep (see `model::exchange`): every rank of a
//! job exchanges s bytes with a partner at once, as in the steps of
//! recursive doubling, the ring and the allgathers. Written over
//! [`AllRanks`]; every rank calls it with the same arguments.

use std::time::Instant;

use crate::clock::Clock;
use crate::model::exchange::ExchangeSamples;
use crate::transport::{AllRanks, TransportError};
use netgauge::layout::MAX_K;
use netgauge::{Estimate, Scheme, Status, TransportExt};

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

/// One (scheme, k) of the conflict sweep: the centre rank's step times.
#[derive(Clone, Debug, PartialEq)]
pub struct ConflictSamples {
    pub scheme: Scheme,
    pub k: usize,
    pub step_ns: Vec<f64>,
}

/// The conflict sweep over ranks (Vienne et al.'s schemes on one node's
/// ranks): rank 0 is the centre; for every scheme and k = 1 ..= min(P − 1,
/// MAX_K) it sends `bytes` to ranks 1..=k at once (outgoing), receives
/// from them at once (incoming), or both (mixed, the same k peers both
/// ways), while ranks above k stay idle. Per (scheme, k): one warm-up
/// round, then `rounds` rounds of a barrier and one step, timed on the
/// centre. Every rank calls it; the samples are the centre's (the others'
/// are returned as well and are not used). Every wait ends by `deadline`.
pub fn conflict_sweep<T: AllRanks, C: Clock>(
    t: &mut T,
    clock: &C,
    bytes: u64,
    rounds: usize,
    deadline: Instant,
) -> Result<Vec<ConflictSamples>, TransportError> {
    let (rank, ranks) = (t.rank(), t.ranks());
    let k_max = ranks.saturating_sub(1).min(MAX_K);
    let peers: Vec<usize> = (1..=k_max).collect();
    let centre = [0usize];
    let mut out = Vec::with_capacity(3 * k_max);
    for scheme in Scheme::ALL {
        for k in 1..=k_max {
            let ps = &peers[..k];
            let none: &[usize] = &[];
            let (to, from): (&[usize], &[usize]) = if rank == 0 {
                match scheme {
                    Scheme::Outgoing => (ps, none),
                    Scheme::Incoming => (none, ps),
                    Scheme::Mixed => (ps, ps),
                }
            } else if rank <= k {
                match scheme {
                    Scheme::Outgoing => (none, &centre),
                    Scheme::Incoming => (&centre, none),
                    Scheme::Mixed => (&centre, &centre),
                }
            } else {
                (none, none)
            };
            let mut step_ns = Vec::with_capacity(rounds);
            for round in 0..=rounds {
                t.barrier(deadline)?;
                let t0 = clock.now();
                if !to.is_empty() || !from.is_empty() {
                    t.concurrent(to, from, bytes as usize, deadline)?;
                }
                let ns = clock.to_ns(clock.now().wrapping_sub(t0));
                if round > 0 {
                    step_ns.push(ns);
                }
            }
            out.push(ConflictSamples { scheme, k, step_ns });
        }
    }
    Ok(out)
}

/// The contention record of a conflict sweep: per scheme and k the
/// penalty T_k / T_1, its value the median over rounds of each round's
/// time over the median time of k = 1, its interval the 2.5 and 97.5 %
/// quantiles of those ratios; a scheme's status that of its first value
/// not identified, else identified. β, γ and the bisection are left unset.
pub fn conflict_record(samples: &[ConflictSamples], measured_unix_ns: u64) -> TransportExt {
    let mut t = TransportExt::default();
    for scheme in Scheme::ALL {
        let rows: Vec<&ConflictSamples> = samples.iter().filter(|s| s.scheme == scheme).collect();
        let Some(one) = rows.iter().find(|s| s.k == 1) else {
            continue;
        };
        let reference = quantile(&one.step_ns, 0.5);
        let mut est = Vec::new();
        for r in rows.iter().take(MAX_K) {
            let ratios: Vec<f64> = r.step_ns.iter().map(|v| v / reference).collect();
            est.push(Estimate::new(
                quantile(&ratios, 0.5),
                quantile(&ratios, 0.025),
                quantile(&ratios, 0.975),
            ));
        }
        let status = est
            .iter()
            .map(|e| Status::of_nonnegative(e.value, e.lo, e.hi))
            .find(|s| *s != Status::Identified)
            .unwrap_or(Status::Identified);
        // At most MAX_K rows: cannot fail.
        let _ = t.set_penalties(scheme, &est, status);
    }
    t.contention_unix_ns = measured_unix_ns;
    t
}

/// The q-quantile of `v` (linear between order statistics; NaN if empty).
fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
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

    /// The centre of 4 ranks whose concurrent flows share one copy engine:
    /// a step with n flows costs n·1000 ns of virtual time (mixed: the flows
    /// both ways, 2k).
    struct Centre {
        clock: VirtualClock,
        steps: Vec<(usize, usize)>,
    }

    impl AllRanks for Centre {
        fn rank(&self) -> usize {
            0
        }
        fn ranks(&self) -> usize {
            4
        }
        fn barrier(&mut self, _: Instant) -> Result<(), TransportError> {
            Ok(())
        }
        fn exchange(&mut self, _: usize, _: usize, _: Instant) -> Result<(), TransportError> {
            Ok(())
        }
        fn concurrent(
            &mut self,
            to: &[usize],
            from: &[usize],
            _: usize,
            _: Instant,
        ) -> Result<(), TransportError> {
            self.steps.push((to.len(), from.len()));
            let t = self.clock.now_ns() + 1000.0 * (to.len() + from.len()) as f64;
            self.clock.advance_to_ns(t);
            Ok(())
        }
        fn max_over_ranks(&mut self, v: Vec<f64>, _: Instant) -> Result<Vec<f64>, TransportError> {
            Ok(v)
        }
    }

    #[test]
    fn the_conflict_sweep_measures_every_scheme_and_k_and_its_penalties() {
        let clock = VirtualClock::new();
        let mut c = Centre {
            clock: clock.clone(),
            steps: Vec::new(),
        };
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let s = conflict_sweep(&mut c, &clock, 4096, 3, far).unwrap();
        // Three schemes × k = 1..3, each a warm-up and 3 rounds.
        assert_eq!(s.len(), 9);
        assert_eq!(c.steps.len(), 9 * 4);
        assert_eq!(&c.steps[..4], [(1, 0); 4]);
        assert_eq!(c.steps[8 * 4], (3, 3));
        let rec = conflict_record(&s, 7);
        for scheme in Scheme::ALL {
            let p: Vec<f64> = rec.penalties(scheme).iter().map(|e| e.value).collect();
            assert_eq!(p, [1.0, 2.0, 3.0], "{scheme:?}");
        }
        assert_eq!(rec.contention_unix_ns, 7);
        // Equal rounds: a zero-width interval around the value.
        assert_eq!(
            rec.status(netgauge::TransportField::PenaltyMixed),
            Status::Identified
        );
        // Rounds that spread: the interval holds the quantiles.
        let spread = [ConflictSamples {
            scheme: Scheme::Outgoing,
            k: 1,
            step_ns: vec![900.0, 1000.0, 1100.0],
        }];
        let e = conflict_record(&spread, 0).penalties(Scheme::Outgoing)[0];
        assert_eq!(e.value, 1.0);
        assert!(
            (e.lo - 0.905).abs() < 1e-12 && (e.hi - 1.095).abs() < 1e-12,
            "{e:?}"
        );
    }
}
