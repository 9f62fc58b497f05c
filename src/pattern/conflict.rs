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
/// that send to it; every peer at most once per set. A peer in both sets
/// streams both ways (its mirror server sends its reverse burst, then
/// answers the burst it received meanwhile: its first n messages end the
/// incoming flow, the next one the outgoing flow).
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

    /// The open flow a message from `peer` belongs to (its index: out
    /// flows first, then in flows): the peer's incoming flow while it has
    /// messages to come, else its outgoing one.
    fn flow_of(&self, peer: PeerId, left: &[u32]) -> Option<usize> {
        let o = self.out.len();
        let inc = self.inc.iter().position(|&p| p == peer).map(|i| o + i);
        let out = self.out.iter().position(|&p| p == peer);
        inc.filter(|&i| left[i] > 0)
            .or(out.filter(|&i| left[i] > 0))
    }

    /// Whether no peer appears twice in one set.
    pub fn valid(&self) -> bool {
        let once = |v: &[PeerId]| v.iter().enumerate().all(|(i, p)| !v[i + 1..].contains(p));
        once(self.out) && once(self.inc)
    }

    /// Whether the two sets share no peer.
    pub fn disjoint(&self) -> bool {
        self.out.iter().all(|p| !self.inc.contains(p))
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
        if let Some(i) = flows.flow_of(r.peer, left) {
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
    use crate::transport::sim::{sim, SimTransport};

    #[test]
    fn flows_are_indexed_out_then_in() {
        let f = Flows {
            out: &[2, 0],
            inc: &[1],
        };
        assert_eq!(f.len(), 3);
        let left = [1, 1, 2];
        let at = |p| f.flow_of(p, &left);
        assert_eq!(
            (at(2), at(0), at(1), at(3)),
            (Some(0), Some(1), Some(2), None)
        );
        assert!(f.valid() && f.disjoint());
        let both = Flows {
            out: &[1],
            inc: &[1],
        };
        assert!(both.valid() && !both.disjoint());
        assert_eq!(both.flow_of(1, &[1, 2]), Some(1));
        assert_eq!(both.flow_of(1, &[1, 0]), Some(0));
        assert_eq!(both.flow_of(1, &[0, 0]), None);
        assert!(!Flows {
            out: &[1, 1],
            inc: &[]
        }
        .valid());
    }

    /// One peer both ways: its reverse burst ends the incoming flow, the
    /// answer to this node's burst (sent after it) the outgoing one.
    #[test]
    fn one_peer_streams_both_ways() {
        let (mut t, clock) = sim("L=1000,o=100,g=200,G=1", 1);
        let (mut times, mut left) = ([0.0; 2], [0; 2]);
        let f = Flows {
            out: &[0],
            inc: &[0],
        };
        let to = Duration::from_secs(1);
        conflict_round(&mut t, &clock, f, 4, 5000, to, &mut times, &mut left).unwrap();
        assert!(times[0].is_finite() && times[1].is_finite());
        assert!(times[0] > times[1], "{times:?}");
        assert_eq!(t.counters().recv_messages, 5);
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
