//! The conflict probe: for every scheme (outgoing, incoming, mixed) and
//! k = 1 … its largest, rounds of `pattern::conflict` at n messages and at
//! one, interleaved over the whole probe (repetition by repetition, every
//! cell in turn, so a drift of the host or the link spreads over all cells
//! instead of biasing one), then `model::contention`'s penalties, intervals
//! and β. The peers of a round rotate with the repetition, so the
//! reference flow (k = 1) is not one peer's path.
//!
//! The plan is deterministic ([`plan`]), so what every peer will carry is
//! known before the probe starts ([`ContentionOptions::bytes_per_peer`]):
//! a daemon asks each peer's consent for exactly that.

use std::time::Duration;

use super::loss::{lost_round, peer_gone};
use crate::clock::Clock;
use crate::model::contention::{
    fit_contention, Conflict, ConflictCell, ContentionFit, ContentionRaw,
};
use crate::pattern::conflict::{conflict_round, Flows};
use crate::pattern::prtt::drain;
use crate::sweep::{Progress, SweepError};
use crate::transport::{PeerId, Transport};

/// Flow counts the segment holds per scheme.
pub const MAX_K: usize = netgauge::layout::MAX_K;

/// What a conflict probe does.
#[derive(Clone, Debug, PartialEq)]
pub struct ContentionOptions {
    /// Message size of every flow (large enough to be bandwidth-bound).
    pub size_bytes: usize,
    /// Messages per flow in the burst rounds (n ≥ 2).
    pub burst: u32,
    /// Repetitions of every (scheme, k) cell, each a burst and a single round.
    pub rounds: usize,
    /// Largest k (also bounded by the peers and by [`MAX_K`]).
    pub max_k: usize,
    pub schemes: Vec<Conflict>,
    /// Least wait for a round to end; longer rounds wait 4× what the
    /// link's pace predicts.
    pub timeout: Duration,
    /// Bootstrap resamples for the intervals (0: none).
    pub resamples: usize,
    pub seed: u64,
    /// One untimed round of every scheme at its largest k first.
    pub warmup: bool,
}

impl Default for ContentionOptions {
    fn default() -> Self {
        ContentionOptions {
            size_bytes: 64 * 1024,
            burst: 16,
            rounds: 12,
            max_k: MAX_K,
            schemes: Conflict::ALL.to_vec(),
            timeout: Duration::from_secs(1),
            resamples: 200,
            seed: 1,
            warmup: true,
        }
    }
}

/// One round of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedRound {
    pub scheme: Conflict,
    pub k: usize,
    pub out: Vec<PeerId>,
    pub inc: Vec<PeerId>,
    /// Untimed (warm-up).
    pub warmup: bool,
}

/// The rounds of a probe over `peers` peers, in order; each stands for a
/// burst round and a single round.
pub fn plan(peers: usize, o: &ContentionOptions) -> Vec<PlannedRound> {
    let mut v = Vec::new();
    let kmax = |s: Conflict| s.max_k(peers).min(o.max_k).min(MAX_K);
    let round = |s: Conflict, k: usize, rep: usize, warmup| {
        let (no, ni) = s.flows(k);
        let at = |i: usize| (rep + i) % peers;
        PlannedRound {
            scheme: s,
            k,
            out: (0..no).map(at).collect(),
            inc: (no..no + ni).map(at).collect(),
            warmup,
        }
    };
    if peers == 0 {
        return v;
    }
    if o.warmup {
        for &s in &o.schemes {
            if kmax(s) > 0 {
                v.push(round(s, kmax(s), 0, true));
            }
        }
    }
    for rep in 0..o.rounds {
        for &s in &o.schemes {
            for k in 1..=kmax(s) {
                v.push(round(s, k, rep, false));
            }
        }
    }
    v
}

impl ContentionOptions {
    /// Payload bytes the probe moves through each of `peers` peers (sent
    /// and received by it), counting every round of the plan once at n
    /// and once at one message, lost rounds not included.
    pub fn bytes_per_peer(&self, peers: usize) -> Vec<u64> {
        let mut b = vec![0u64; peers];
        let s = self.size_bytes as u64;
        let n = u64::from(self.burst.max(2));
        for r in plan(peers, self) {
            // A burst flow carries n + 1 messages, a single one 2.
            for &p in r.out.iter().chain(&r.inc) {
                b[p] += (n + 1) * s + 2 * s;
            }
        }
        b
    }
}

/// What a conflict probe produced.
#[derive(Clone, Debug)]
pub struct ContentionResult {
    pub fit: ContentionFit,
    pub raw: ContentionRaw,
    /// Payload bytes sent and received by this node.
    pub probe_bytes: u64,
    pub elapsed_ns: f64,
}

/// Learns the link's pace (ns per byte through this node, the slowest seen
/// in rounds of at least 64 KiB) so a round of k flows is waited for in
/// proportion, and counts losses in a row.
struct Waits {
    base: Duration,
    pace_ns_per_byte: f64,
    lost_in_a_row: u32,
    lost: u32,
}

const MAX_WAIT: Duration = Duration::from_secs(30);

impl Waits {
    fn wait(&self, bytes: u64) -> Duration {
        let predicted =
            Duration::from_secs_f64((4.0 * self.pace_ns_per_byte * bytes as f64 * 1e-9).min(1e6));
        self.base.max(predicted).min(MAX_WAIT.max(self.base))
    }

    fn learn(&mut self, bytes: u64, ns: f64) {
        if bytes >= 64 * 1024 && ns.is_finite() && ns > 0.0 {
            self.pace_ns_per_byte = self.pace_ns_per_byte.max(ns / bytes as f64);
        }
    }
}

/// Run the conflict probe over the peers of `transport` (a multi-peer
/// transport: the daemon's links to its peers, or the simulator).
pub fn run<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    o: &ContentionOptions,
    progress: &mut dyn Progress,
) -> Result<ContentionResult, SweepError> {
    let caps = transport.caps();
    let size = o.size_bytes;
    if size > caps.max_msg_bytes {
        return Err(SweepError::TooLarge {
            size_bytes: size as u64,
            max_bytes: caps.max_msg_bytes,
        });
    }
    let n = o.burst.max(2);
    let rounds = plan(caps.peers, o);
    let mut cells: Vec<ConflictCell> = Vec::new();
    for r in rounds.iter().filter(|r| !r.warmup) {
        if !cells.iter().any(|c| c.scheme == r.scheme && c.k == r.k) {
            cells.push(ConflictCell::new(r.scheme, r.k, n, size as u64, o.rounds));
        }
    }
    let (mut times, mut left) = ([0.0; 2 * MAX_K], [0u32; 2 * MAX_K]);
    let mut waits = Waits {
        base: o.timeout,
        pace_ns_per_byte: 0.0,
        lost_in_a_row: 0,
        lost: 0,
    };
    let before = transport.counters();
    let start = clock.now();
    for (done, r) in rounds.iter().enumerate() {
        progress.sizes(done, rounds.len(), size as u64);
        let flows = Flows {
            out: &r.out,
            inc: &r.inc,
        };
        let f = flows.len();
        for msgs in [n, 1] {
            let bytes = (f as u64) * u64::from(msgs + 1) * size as u64;
            loop {
                let wait = waits.wait(bytes);
                let t0 = clock.now();
                match conflict_round(
                    transport, clock, flows, msgs, size, wait, &mut times, &mut left,
                ) {
                    Ok(()) => {
                        waits.lost_in_a_row = 0;
                        waits.learn(bytes, clock.to_ns(clock.now().wrapping_sub(t0)));
                        break;
                    }
                    Err(e) => {
                        lost_round(e, size)?;
                        waits.lost += 1;
                        waits.lost_in_a_row += 1;
                        peer_gone(waits.lost_in_a_row, size, wait)?;
                        // Late answers must not end the next round.
                        drain(transport, (wait / 4).min(Duration::from_secs(1)));
                    }
                }
            }
            if r.warmup {
                continue;
            }
            if let Some(c) = cells
                .iter_mut()
                .find(|c| c.scheme == r.scheme && c.k == r.k)
            {
                let into = if msgs == n {
                    &mut c.burst_ns
                } else {
                    &mut c.single_ns
                };
                into.extend_from_slice(&times[..f]);
            }
        }
    }
    progress.sizes(rounds.len(), rounds.len(), size as u64);
    let elapsed_ns = clock.to_ns(clock.now().wrapping_sub(start));
    let after = transport.counters();
    let raw = ContentionRaw {
        peers: caps.peers,
        cells,
        lost_rounds: waits.lost,
    };
    Ok(ContentionResult {
        fit: fit_contention(&raw, o.resamples, o.seed),
        probe_bytes: after.bytes_since(&before),
        elapsed_ns,
        raw,
    })
}

/// One pair's stream over a time window, as a bisection round runs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StreamMeasure {
    /// Payload bandwidth to the peer and from it (NaN when not streamed).
    pub out_bytes_per_s: f64,
    pub in_bytes_per_s: f64,
    /// Burst rounds completed in the window.
    pub rounds: u32,
    /// Payload bytes sent and received.
    pub bytes: u64,
}

/// Stream to peer 0 (and, `bidirectional`, from it at the same time) until
/// `until` or until `max_bytes` have moved: burst rounds of `n` messages
/// and single rounds alternate, and each direction's bandwidth is the
/// message size over its gap, (mean burst time − mean single time)/(n − 1):
/// the PRTT method's per-message time with the round trips' cost
/// cancelled. Means, not low quantiles: the other pairs of a bisection
/// round stream unsynchronised, and what a flow sustains over the window
/// is its share on average. No round starts after `until`; each is waited
/// for at most `timeout`.
#[allow(clippy::too_many_arguments)]
pub fn stream<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    bidirectional: bool,
    n: u32,
    size_bytes: usize,
    until: std::time::Instant,
    max_bytes: u64,
    timeout: Duration,
) -> Result<StreamMeasure, SweepError> {
    let n = n.max(2);
    let inc: &[PeerId] = if bidirectional { &[0] } else { &[] };
    let flows = Flows { out: &[0], inc };
    // [burst, single] × [out, in]: sum of times, ns, and rounds.
    let mut sum_ns = [[0.0f64; 2]; 2];
    let mut count = [0u32; 2];
    let (mut times, mut left) = ([0.0; 2], [0u32; 2]);
    let before = transport.counters();
    let moved = |t: &T| t.counters().bytes_since(&before);
    let mut lost = 0;
    while std::time::Instant::now() < until && moved(transport) < max_bytes {
        for (w, msgs) in [(0, n), (1, 1)] {
            let r = conflict_round(
                transport, clock, flows, msgs, size_bytes, timeout, &mut times, &mut left,
            );
            match r {
                Ok(()) => {
                    count[w] += 1;
                    for (s, t) in sum_ns[w].iter_mut().zip(&times[..flows.len()]) {
                        *s += t;
                    }
                }
                Err(e) => {
                    lost_round(e, size_bytes)?;
                    lost += 1;
                    peer_gone(lost, size_bytes, timeout)?;
                    drain(transport, (timeout / 4).min(Duration::from_secs(1)));
                }
            }
        }
    }
    let bw = |class: usize| {
        if count[0] == 0 || count[1] == 0 {
            return f64::NAN;
        }
        let mean = |w: usize| sum_ns[w][class] / f64::from(count[w]);
        let gap_ns = (mean(0) - mean(1)) / f64::from(n - 1);
        if gap_ns > 0.0 {
            size_bytes as f64 / (gap_ns * 1e-9)
        } else {
            f64::NAN
        }
    };
    Ok(StreamMeasure {
        out_bytes_per_s: bw(0),
        in_bytes_per_s: if bidirectional { bw(1) } else { f64::NAN },
        rounds: count[0],
        bytes: moved(transport),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::sim::sim;

    #[test]
    fn the_plan_rotates_peers_and_keeps_sets_disjoint() {
        let o = ContentionOptions {
            rounds: 3,
            ..Default::default()
        };
        let p = plan(5, &o);
        // Warm-up: 3 schemes; then per rep 5 + 5 + 2 rounds.
        assert_eq!(p.len(), 3 + 3 * 12);
        assert!(p.iter().all(|r| {
            let f = Flows {
                out: &r.out,
                inc: &r.inc,
            };
            f.valid() && f.disjoint()
        }));
        let refs: Vec<&PlannedRound> = p
            .iter()
            .filter(|r| !r.warmup && r.k == 1 && r.scheme == Conflict::Outgoing)
            .collect();
        assert_eq!(
            refs.iter().map(|r| r.out[0]).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        let mixed = p
            .iter()
            .find(|r| r.scheme == Conflict::Mixed && r.k == 2 && !r.warmup)
            .unwrap();
        assert_eq!(
            (mixed.out.clone(), mixed.inc.clone()),
            (vec![0, 1], vec![2, 3])
        );
        let b = o.bytes_per_peer(5);
        assert_eq!(b.len(), 5);
        let total: u64 = b.iter().sum();
        let flows: usize = p.iter().map(|r| r.out.len() + r.inc.len()).sum();
        assert_eq!(total, flows as u64 * (17 + 2) * 65536);
        assert!(plan(0, &o).is_empty());
        let o1 = ContentionOptions {
            max_k: 2,
            schemes: vec![Conflict::Incoming],
            warmup: false,
            rounds: 1,
            ..Default::default()
        };
        assert_eq!(plan(5, &o1).len(), 2);
    }

    /// In the simulator the sender's NIC is the one shared resource: the
    /// outgoing penalty is k, the incoming one 1, β 1.
    #[test]
    fn sim_outgoing_penalty_is_k() {
        let (mut t, clock) = sim("L=2000,o=300,g=500,G=0.5", 4);
        let o = ContentionOptions {
            rounds: 6,
            resamples: 50,
            ..Default::default()
        };
        let r = run(&mut t, &clock, &o, &mut ()).unwrap();
        assert_eq!(r.raw.lost_rounds, 0);
        for p in &r.fit.outgoing {
            assert!((p.penalty.value - p.k as f64).abs() < 0.01, "{p:?}");
        }
        for p in &r.fit.incoming {
            assert!((p.penalty.value - 1.0).abs() < 0.05, "{p:?}");
        }
        assert_eq!(r.fit.mixed.len(), 2);
        assert!((r.fit.beta.value - 1.0).abs() < 0.01);
        assert!(r.probe_bytes > 0);
    }

    /// In the simulator a stream runs in virtual time: the window is never
    /// reached, the byte limit ends it; the bandwidth is 1/G for large
    /// messages.
    #[test]
    fn a_stream_ends_at_its_byte_limit() {
        let (mut t, clock) = sim("L=2000,o=300,g=500,G=1", 1);
        let until = std::time::Instant::now() + Duration::from_secs(3600);
        let to = Duration::from_secs(1);
        let m = stream(&mut t, &clock, true, 8, 100_000, until, 20_000_000, to).unwrap();
        assert!(m.bytes >= 20_000_000 && m.rounds >= 8, "{m:?}");
        // 1 ns per byte: 1 GB/s, less the gap g per message.
        let want = 1e9 * 100_000.0 / (100_000.0 - 1.0 + 500.0);
        assert!((m.out_bytes_per_s / want - 1.0).abs() < 0.01, "{m:?}");
        assert!((m.in_bytes_per_s / want - 1.0).abs() < 0.01, "{m:?}");
    }

    #[test]
    fn too_large_a_message_is_refused() {
        let (mut t, clock) = sim("L=2000,o=300,g=500,G=0.5", 2);
        let o = ContentionOptions {
            size_bytes: usize::MAX,
            ..Default::default()
        };
        assert!(matches!(
            run(&mut t, &clock, &o, &mut ()),
            Err(SweepError::TooLarge { .. })
        ));
    }
}
