//! Bandwidth-sharing conflicts (Vienne et al.): this node drives k flows
//! out to some peers and, at the same time, k flows in from others, and
//! times every flow on its own clock.
//!
//! A flow out to peer p is a PRTT burst: n messages of s bytes, the last
//! asking for an answer; it ends when the answer has arrived. A flow in
//! from peer q is a reverse burst: one message of s bytes asking q's mirror
//! server for n answers ([`Meta::asking`]); it ends when the n-th has
//! arrived. The requests of the incoming flows leave first, then the
//! outgoing bursts round robin over their peers (one message to each in
//! turn, as k concurrent senders sharing one link interleave), with a
//! non-blocking look for arrivals after each turn so an incoming flow's
//! end is seen when it happens and not when the sends are done.
//!
//! With n = 1 the same round is the reference of the PRTT method: the
//! difference of a flow's time at n and at 1, over n − 1, is its gap under
//! this conflict; the answers' and requests' own cost cancels in it.
//!
//! Nothing here allocates or makes a system call beyond the transport's:
//! the caller brings the buffers.

use std::time::Duration;

use crate::clock::Clock;
use crate::transport::{Meta, PeerId, Transport, TransportError};

/// The flows of one conflict round: peers this node sends to, and peers
/// that send to it. The two sets must be disjoint (a mirror server serves
/// one stream at a time); every peer at most once.
#[derive(Clone, Copy, Debug)]
pub struct Flows<'a> {
    pub out: &'a [PeerId],
    pub inc: &'a [PeerId],
}

impl Flows<'_> {
    pub fn len(&self) -> usize {
        self.out.len() + self.inc.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The flow index of `peer`: its place among `out`, then `inc`.
    fn index(&self, peer: PeerId) -> Option<usize> {
        self.out.iter().chain(self.inc).position(|&p| p == peer)
    }

    /// Whether every peer appears once.
    pub fn distinct(&self) -> bool {
        let all = || self.out.iter().chain(self.inc);
        all()
            .enumerate()
            .all(|(i, p)| all().skip(i + 1).all(|q| q != p))
    }
}

/// One conflict round of `n` messages of `size_bytes` per flow. On return
/// `times_ns[i]` is flow i's time (its place in `flows`: out, then in) from
/// the round's start until it ended here; `left` is scratch of the same
/// length. A message that belongs to no flow still open (a late answer of
/// an earlier, lost round) is ignored. Fails with `Timeout` when the round
/// has not ended within `timeout`.
#[allow(clippy::too_many_arguments)]
pub fn conflict_round<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    flows: Flows<'_>,
    n: u32,
    size_bytes: usize,
    timeout: Duration,
    times_ns: &mut [f64],
    left: &mut [u32],
) -> Result<(), TransportError> {
    let k = flows.len();
    debug_assert!(n >= 1 && times_ns.len() >= k && left.len() >= k);
    for (i, l) in left.iter_mut().enumerate().take(k) {
        *l = if i < flows.out.len() { 1 } else { n };
    }
    times_ns[..k].fill(f64::NAN);
    let mut open = k;
    let start = clock.now();
    let limit_ticks = clock.from_ns(timeout.as_nanos() as f64);
    let mut note = |r: crate::transport::Received, open: &mut usize| {
        if let Some(i) = flows.index(r.peer).filter(|&i| left[i] > 0) {
            left[i] -= 1;
            if left[i] == 0 {
                times_ns[i] = clock.to_ns(clock.now().wrapping_sub(start));
                *open -= 1;
            }
        }
    };
    for &q in flows.inc {
        transport.send(q, size_bytes, Meta::asking(n))?;
    }
    for j in 0..n {
        let meta = if j + 1 == n {
            Meta::asking(1)
        } else {
            Meta::default()
        };
        for &p in flows.out {
            transport.send(p, size_bytes, meta)?;
        }
        if !flows.inc.is_empty() {
            loop {
                match transport.recv(None, Duration::ZERO) {
                    Ok(r) => note(r, &mut open),
                    Err(TransportError::Timeout(_)) => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    while open > 0 {
        let elapsed = clock.now().wrapping_sub(start);
        if elapsed >= limit_ticks {
            return Err(TransportError::Timeout(timeout));
        }
        let rest_ns = clock.to_ns(limit_ticks - elapsed).max(1.0);
        let r = transport.recv(None, Duration::from_nanos(rest_ns as u64))?;
        note(r, &mut open);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::VirtualClock;
    use crate::transport::sim::SimTransport;

    fn sim(model: &str, peers: usize) -> (SimTransport, VirtualClock) {
        let clock = VirtualClock::new();
        let t = SimTransport::new(model.parse().unwrap(), clock.clone(), peers);
        (t, clock)
    }

    #[test]
    fn flows_are_indexed_out_then_in() {
        let f = Flows {
            out: &[2, 0],
            inc: &[1],
        };
        assert_eq!(f.len(), 3);
        assert_eq!(
            (f.index(2), f.index(0), f.index(1), f.index(3)),
            (Some(0), Some(1), Some(2), None)
        );
        assert!(f.distinct());
        assert!(!Flows {
            out: &[1],
            inc: &[1]
        }
        .distinct());
    }

    /// In the simulator the client's NIC is shared by every flow out: k
    /// flows of n messages each take k times the gap of one per message.
    #[test]
    fn outgoing_flows_share_the_senders_nic() {
        let (mut t, clock) = sim("L=1000,o=100,g=200,G=1", 4);
        let (mut times, mut left) = ([0.0; 4], [0; 4]);
        let s = 10_000;
        let gap = |k: usize, t: &mut SimTransport, times: &mut [f64; 4], left: &mut [u32; 4]| {
            let out: Vec<PeerId> = (0..k).collect();
            let f = Flows {
                out: &out,
                inc: &[],
            };
            let to = Duration::from_secs(1);
            conflict_round(t, &clock, f, 9, s, to, times, left).unwrap();
            let t9 = times[..k].iter().sum::<f64>() / k as f64;
            conflict_round(t, &clock, f, 1, s, to, times, left).unwrap();
            let t1 = times[..k].iter().sum::<f64>() / k as f64;
            (t9 - t1) / 8.0
        };
        let one = gap(1, &mut t, &mut times, &mut left);
        assert!((one - (200.0 + (s as f64 - 1.0))).abs() < 1.0, "gap {one}");
        for k in 2..=4 {
            let g = gap(k, &mut t, &mut times, &mut left);
            let penalty = g / one;
            assert!(
                (penalty - k as f64).abs() < 0.01,
                "k {k}: penalty {penalty}"
            );
        }
    }

    /// A reverse burst: n answers come back, and the flow ends with the
    /// n-th; the simulator has no shared incoming link, so k incoming
    /// flows are not slower than one (no bottleneck is invented).
    #[test]
    fn incoming_flows_end_with_their_last_answer() {
        let (mut t, clock) = sim("L=1000,o=100,g=200,G=1", 3);
        let (mut times, mut left) = ([0.0; 3], [0; 3]);
        let s = 10_000;
        let to = Duration::from_secs(1);
        let mut gap = |inc: &[PeerId]| {
            let f = Flows { out: &[], inc };
            conflict_round(&mut t, &clock, f, 5, s, to, &mut times, &mut left).unwrap();
            let t5 = times[..inc.len()].iter().sum::<f64>() / inc.len() as f64;
            conflict_round(&mut t, &clock, f, 1, s, to, &mut times, &mut left).unwrap();
            let t1 = times[..inc.len()].iter().sum::<f64>() / inc.len() as f64;
            (t5 - t1) / 4.0
        };
        let one = gap(&[0]);
        let three = gap(&[0, 1, 2]);
        assert!((one - (200.0 + (s as f64 - 1.0))).abs() < 1.0, "gap {one}");
        assert!((three / one - 1.0).abs() < 0.05, "penalty {}", three / one);
        assert_eq!(t.counters().recv_messages, 5 + 1 + 3 * 5 + 3);
    }

    #[test]
    fn a_lost_round_times_out_and_strays_are_ignored() {
        let (mut t, clock) = sim("L=1000,o=100,g=200,G=1", 2);
        let (mut times, mut left) = ([0.0; 2], [0; 2]);
        // A stray answer from "an earlier round" is waiting.
        t.send(1, 8, Meta::asking(1)).unwrap();
        let f = Flows {
            out: &[0],
            inc: &[],
        };
        conflict_round(
            &mut t,
            &clock,
            f,
            3,
            8,
            Duration::from_secs(1),
            &mut times,
            &mut left,
        )
        .unwrap();
        assert!(times[0] > 0.0);
        // Nobody answers peer 5 (no such server): the send fails at once.
        let f = Flows {
            out: &[5],
            inc: &[],
        };
        assert!(conflict_round(
            &mut t,
            &clock,
            f,
            1,
            8,
            Duration::from_millis(1),
            &mut times,
            &mut left
        )
        .is_err());
    }
}
