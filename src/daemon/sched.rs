//! Which peer to probe next, how, and whether the budget allows it. Pure
//! logic over an explicit `now`, so it is tested without sleeping.
//!
//! - A new peer (nothing published) gets a full sweep.
//! - A known peer gets a cheap re-check (EEL and a few sizes) on a jittered
//!   interval; a re-check that disagrees with the published model beyond its
//!   interval schedules a full sweep.
//! - A failed probe backs off exponentially (up to `MAX_BACKOFF_S`) and the
//!   peer is marked stale by the caller.
//! - Traffic is paced by a token bucket of `budget_bytes_per_s`: a job runs
//!   only when the bucket is not in debt; its real payload is charged after,
//!   so the long-run rate never exceeds the budget.

use std::time::Duration;

/// What to do with a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    FullSweep,
    Recheck,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeerPhase {
    /// Never measured (or nothing loaded from the state file).
    New,
    /// Published values agree with the last re-check.
    Known,
    /// A re-check disagreed: a full sweep is due.
    Suspect,
    /// The last probe failed; retried with backoff; its entry is stale.
    Failing,
}

impl PeerPhase {
    /// The name the status file uses.
    pub fn name(self) -> &'static str {
        match self {
            PeerPhase::New => "new",
            PeerPhase::Known => "known",
            PeerPhase::Suspect => "suspect",
            PeerPhase::Failing => "failing",
        }
    }
}

#[derive(Clone, Debug)]
pub struct PeerSched {
    pub phase: PeerPhase,
    /// Seconds on the scheduler's clock when the peer is next due.
    pub due_s: f64,
    pub failures: u32,
    pub last_probe_s: Option<f64>,
}

pub const MIN_BACKOFF_S: f64 = 1.0;
pub const MAX_BACKOFF_S: f64 = 300.0;

pub struct Scheduler {
    peers: Vec<PeerSched>,
    interval_s: f64,
    budget_bytes_per_s: f64,
    /// Bucket level in bytes; negative = debt.
    tokens: f64,
    /// Bucket capacity: a burst of at most this many seconds of budget.
    capacity: f64,
    last_refill_s: f64,
    rng: rand_pcg::Pcg64,
    /// Payload bytes charged so far.
    pub spent_bytes: u64,
}

impl Scheduler {
    /// `known[i]`: peer i has parameters already (from the state file).
    pub fn new(
        known: &[bool],
        interval_s: f64,
        budget_bytes_per_s: u64,
        now_s: f64,
        seed: u64,
    ) -> Self {
        use rand::SeedableRng;
        let mut s = Scheduler {
            peers: Vec::with_capacity(known.len()),
            interval_s,
            budget_bytes_per_s: budget_bytes_per_s as f64,
            tokens: 0.0,
            capacity: 10.0 * budget_bytes_per_s as f64,
            last_refill_s: now_s,
            rng: rand_pcg::Pcg64::seed_from_u64(seed),
            spent_bytes: 0,
        };
        for &k in known {
            // Known peers are re-checked soon (spread over one interval);
            // new ones are swept as soon as the budget allows.
            let due_s = if k {
                now_s + s.jitter(interval_s) * 0.5
            } else {
                now_s
            };
            s.peers.push(PeerSched {
                phase: if k { PeerPhase::Known } else { PeerPhase::New },
                due_s,
                failures: 0,
                last_probe_s: None,
            });
        }
        s
    }

    fn jitter(&mut self, mean_s: f64) -> f64 {
        use rand::Rng;
        mean_s * self.rng.gen_range(0.75..1.25)
    }

    fn refill(&mut self, now_s: f64) {
        let dt = (now_s - self.last_refill_s).max(0.0);
        self.tokens = (self.tokens + dt * self.budget_bytes_per_s).min(self.capacity);
        self.last_refill_s = now_s;
    }

    pub fn peer(&self, i: usize) -> &PeerSched {
        &self.peers[i]
    }

    /// The next job that may run now, or how long to wait for one.
    pub fn next(&mut self, now_s: f64) -> Result<(usize, Job), Duration> {
        self.refill(now_s);
        let Some((i, p)) = self
            .peers
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.due_s.total_cmp(&b.1.due_s))
        else {
            return Err(Duration::from_secs(1));
        };
        if p.due_s > now_s {
            return Err(Duration::from_secs_f64((p.due_s - now_s).clamp(0.001, 1.0)));
        }
        if self.tokens < 0.0 {
            // In debt: wait until the budget has paid it back.
            let wait = -self.tokens / self.budget_bytes_per_s;
            return Err(Duration::from_secs_f64(wait.clamp(0.01, 1.0)));
        }
        let job = match p.phase {
            PeerPhase::New | PeerPhase::Suspect | PeerPhase::Failing => Job::FullSweep,
            PeerPhase::Known => Job::Recheck,
        };
        Ok((i, job))
    }

    /// Whether the budget is out of debt: a job of unknown length (a
    /// conflict probe) starts only then, and is paid back afterwards as a
    /// sweep is.
    pub fn solvent(&mut self, now_s: f64) -> bool {
        self.refill(now_s);
        self.tokens >= 0.0
    }

    /// Charge the payload a job put on the wire (successful or not).
    pub fn charge(&mut self, bytes: u64, now_s: f64) {
        self.refill(now_s);
        self.tokens -= bytes as f64;
        self.spent_bytes += bytes;
    }

    /// A full sweep succeeded and was published.
    pub fn swept(&mut self, i: usize, now_s: f64) {
        let iv = self.jitter(self.interval_s);
        let p = &mut self.peers[i];
        p.phase = PeerPhase::Known;
        p.failures = 0;
        p.last_probe_s = Some(now_s);
        p.due_s = now_s + iv;
    }

    /// A re-check finished; `agrees` says whether it matched the model.
    pub fn rechecked(&mut self, i: usize, agrees: bool, now_s: f64) {
        let iv = self.jitter(self.interval_s);
        let p = &mut self.peers[i];
        p.failures = 0;
        p.last_probe_s = Some(now_s);
        if agrees {
            p.phase = PeerPhase::Known;
            p.due_s = now_s + iv;
        } else {
            p.phase = PeerPhase::Suspect;
            p.due_s = now_s;
        }
    }

    /// The peer was busy: try again at `at_s`, nothing else changes.
    pub fn defer(&mut self, i: usize, at_s: f64) {
        self.peers[i].due_s = at_s;
    }

    /// A probe failed (dead peer, timeout, rejected session).
    pub fn failed(&mut self, i: usize, now_s: f64) {
        let p = &mut self.peers[i];
        p.failures += 1;
        p.phase = PeerPhase::Failing;
        let backoff = (MIN_BACKOFF_S * 2f64.powi(p.failures.min(20) as i32 - 1)).min(MAX_BACKOFF_S);
        p.due_s = now_s + backoff;
    }

    /// Bytes per second spent since `since_s` (for `ngctl status`).
    pub fn budget_bytes_per_s(&self) -> u64 {
        self.budget_bytes_per_s as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_peers_are_swept_known_peers_rechecked() {
        let mut s = Scheduler::new(&[false, true], 60.0, 1_000_000, 0.0, 1);
        assert_eq!(s.next(0.0), Ok((0, Job::FullSweep)));
        s.charge(0, 0.0);
        s.swept(0, 0.0);
        // peer 1 is due within half an interval (jittered), as a re-check
        let mut t = 0.0;
        let got = loop {
            match s.next(t) {
                Ok(j) => break j,
                Err(_) => t += 1.0,
            }
        };
        assert_eq!(got, (1, Job::Recheck));
        assert!(t <= 0.5 * 60.0 * 1.25 + 1.0, "due after {t} s");
    }

    #[test]
    fn disagreement_triggers_a_full_sweep_at_once() {
        let mut s = Scheduler::new(&[true], 60.0, 1_000_000, 0.0, 2);
        s.rechecked(0, false, 100.0);
        assert_eq!(s.peer(0).phase, PeerPhase::Suspect);
        assert_eq!(s.next(100.0), Ok((0, Job::FullSweep)));
        s.rechecked(0, true, 100.0);
        assert!(
            s.next(100.0).is_err(),
            "an agreeing re-check waits an interval"
        );
    }

    #[test]
    fn failures_back_off_exponentially_and_cap() {
        let mut s = Scheduler::new(&[false], 60.0, 1_000_000, 0.0, 3);
        let mut dues = Vec::new();
        for _ in 0..12 {
            s.failed(0, 0.0);
            dues.push(s.peer(0).due_s);
        }
        assert_eq!(&dues[..4], &[1.0, 2.0, 4.0, 8.0]);
        assert_eq!(*dues.last().unwrap(), MAX_BACKOFF_S);
        assert_eq!(s.peer(0).phase, PeerPhase::Failing);
        s.swept(0, 10.0);
        assert_eq!(s.peer(0).failures, 0);
    }

    #[test]
    fn the_budget_bounds_the_long_run_rate() {
        // One peer that is always due; every job costs 5 MB; budget 1 MB/s.
        let budget = 1_000_000;
        let mut s = Scheduler::new(&[false], 1e-9, budget, 0.0, 4);
        let (mut t, mut jobs) = (0.0, 0u64);
        while t < 1000.0 {
            match s.next(t) {
                Ok((i, _)) => {
                    s.charge(5_000_000, t);
                    s.swept(i, t);
                    jobs += 1;
                }
                Err(wait) => t += wait.as_secs_f64(),
            }
        }
        let rate = s.spent_bytes as f64 / t;
        // At most the budget plus the first job (paid from an empty bucket).
        assert!(rate <= budget as f64 * 1.01 + 5e6 / t, "rate {rate} B/s");
        assert!(
            rate >= budget as f64 * 0.9,
            "the budget is used: {rate} B/s ({jobs} jobs)"
        );
    }
}
