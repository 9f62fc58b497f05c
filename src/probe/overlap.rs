//! The CPU-overlap probe (Bell et al.) against one mirror server: per
//! message size, rounds without computation and rounds whose computation
//! lies past the knee ([`crate::model::overlap`]), interleaved so a drift
//! of the link touches both alike; the fractions with bootstrap intervals.

use std::time::Duration;

use serde::Serialize;

use super::loss::{lost_round, peer_gone};
use crate::clock::Clock;
use crate::model::overlap::{fit_overlap, OverlapPoint, OverlapRounds, PAST_KNEE};
use crate::pattern::overlap::overlap_round;
use crate::pattern::prtt::drain;
use crate::sweep::{Progress, SweepError};
use crate::transport::{PeerId, Transport};

/// Rounds without computation that find the knee before the measured ones.
const PILOT_ROUNDS: usize = 5;

/// What an overlap probe does.
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapOptions {
    pub sizes: Vec<usize>,
    /// Rounds of each kind per size.
    pub rounds: usize,
    /// Least wait for one round (a round past the knee waits its
    /// computation more).
    pub timeout: Duration,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for OverlapOptions {
    fn default() -> Self {
        OverlapOptions {
            sizes: vec![1, 1024, 4096, 16 << 10, 64 << 10],
            rounds: 30,
            timeout: Duration::from_secs(1),
            resamples: 200,
            seed: 1,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct OverlapResult {
    pub points: Vec<OverlapPoint>,
    #[serde(skip)]
    pub raw: Vec<OverlapRounds>,
    pub lost_rounds: u32,
    pub probe_bytes: u64,
}

/// Measure every size of `o` against `peer`.
pub fn run<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    o: &OverlapOptions,
    progress: &mut dyn Progress,
) -> Result<OverlapResult, SweepError> {
    let max_bytes = transport.caps().max_msg_bytes;
    if let Some(&s) = o.sizes.iter().find(|&&s| s > max_bytes) {
        return Err(SweepError::TooLarge {
            size_bytes: s as u64,
            max_bytes,
        });
    }
    let before = transport.counters();
    let (mut lost, mut in_a_row) = (0u32, 0u32);
    let mut raw = Vec::with_capacity(o.sizes.len());
    for (i, &size) in o.sizes.iter().enumerate() {
        progress.sizes(i, o.sizes.len(), size as u64);
        let mut round = |compute_ns: f64| -> Result<Option<_>, SweepError> {
            let timeout = o.timeout + Duration::from_nanos(compute_ns as u64);
            match overlap_round(
                transport,
                clock,
                peer,
                size,
                clock.from_ns(compute_ns),
                timeout,
            ) {
                Ok(s) => {
                    in_a_row = 0;
                    Ok(Some(s))
                }
                Err(e) => {
                    lost_round(e, size)?;
                    lost += 1;
                    in_a_row += 1;
                    peer_gone(in_a_row, size, timeout)?;
                    drain(transport, (o.timeout / 4).min(Duration::from_millis(200)));
                    Ok(None)
                }
            }
        };
        // The pilot: the wait after the post, and so the computation that
        // surely lies past the knee.
        let mut pilot = Vec::with_capacity(PILOT_ROUNDS);
        for _ in 0..PILOT_ROUNDS + 1 {
            pilot.extend(round(0.0)?);
        }
        let wait: Vec<f64> = pilot
            .iter()
            .skip(1)
            .map(|s| s.total_ns - s.post_ns)
            .collect();
        let wait_ns = crate::model::stats::quantile(&wait, 0.5);
        let compute_ns = if wait_ns.is_finite() {
            PAST_KNEE * wait_ns.max(0.0) + 1000.0
        } else {
            1e6
        };
        let mut r = OverlapRounds {
            size_bytes: size as u64,
            ..OverlapRounds::default()
        };
        for _ in 0..o.rounds {
            r.base.extend(round(0.0)?);
            r.past.extend(round(compute_ns)?);
        }
        raw.push(r);
    }
    progress.sizes(o.sizes.len(), o.sizes.len(), 0);
    let points = raw
        .iter()
        .enumerate()
        .filter_map(|(i, r)| fit_overlap(r, o.resamples, o.seed.wrapping_add(i as u64)))
        .collect();
    let after = transport.counters();
    Ok(OverlapResult {
        points,
        raw,
        lost_rounds: lost,
        probe_bytes: after.bytes_since(&before),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::sim::sim;

    /// LogGP in the simulator: the post costs o, the receive o after the
    /// wait. Receive side 1 − o/W, send side 1 − o/(T0/2), exact.
    #[test]
    fn the_simulator_gives_the_model_fractions() {
        let (mut t, clock) = sim("L=5000,o=400,g=500,G=0.5", 1);
        let o = OverlapOptions {
            sizes: vec![1, 65536],
            rounds: 8,
            resamples: 50,
            ..OverlapOptions::default()
        };
        let r = run(&mut t, &clock, 0, &o, &mut ()).unwrap();
        assert_eq!(r.points.len(), 2);
        for p in &r.points {
            let wait = p.round_ns - p.post_ns;
            assert!((p.post_ns - 400.0).abs() < 1.0, "{p:?}");
            assert!((p.recv_cpu_ns.value - 400.0).abs() < 1.0, "{p:?}");
            assert!((p.recv.value - (1.0 - 400.0 / wait)).abs() < 1e-6, "{p:?}");
            assert!(
                (p.send.value - (1.0 - 800.0 / p.round_ns)).abs() < 1e-6,
                "{p:?}"
            );
        }
        // Larger messages: a longer wait, more of it computable.
        assert!(r.points[1].recv.value > r.points[0].recv.value);
        assert_eq!(r.lost_rounds, 0);
    }
}
