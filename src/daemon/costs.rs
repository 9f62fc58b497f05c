//! The probe thread's cost estimates: what the schedule charges before a
//! job runs, from the settings until the node has run jobs of a kind, then
//! from its recent runs.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::config::Config;
use super::{job, recheck_plan};
use crate::cluster::schedule::{Cost, CostTable, JobCosts, JobKind};

/// Recent runs kept per (link kind, job kind) for the estimates.
const COST_RUNS: usize = 8;
/// Estimates are the recent runs' figure times this.
const COST_MARGIN: f64 = 1.25;
/// A run older than this many rounds no longer counts: a sweep slowed
/// once (a loaded host) must not keep its estimate, or a time estimate
/// longer than a round would stop full sweeps, and with them the runs
/// that could correct it, for good.
const COST_MAX_AGE_ROUNDS: f64 = 30.0;

/// The estimates the schedule charges before a job runs: until the node
/// has run a job of a kind (or when its runs are old), a bound from its
/// settings (bytes at most the bucket's burst); then the largest bytes of
/// its recent runs and their median time, with a margin.
pub(super) struct Costs {
    bound: CostTable,
    runs: HashMap<(bool, JobKind), VecDeque<(Instant, Cost)>>,
    max_age: Duration,
}

impl Costs {
    pub fn new(cfg: &Config, kinds: usize) -> Costs {
        let burst = cfg.schedule.burst_s * cfg.budget_bytes_per_s as f64;
        let sweep = job::sweep_options(cfg, super::FALLBACK).sweep;
        let plan = recheck_plan();
        let cap = |b: f64| b.min(burst).max(1.0) as u64;
        // Its time is not known before a first sweep: half a round.
        let full = Cost {
            bytes: cap(payload_bound(&sweep, &sweep.initial_sizes()) * kinds as f64),
            seconds: 0.5 * cfg.schedule.round_s,
        };
        let recheck = Cost {
            bytes: cap(payload_bound(&plan.sweep_config(&sweep), &plan.sizes_bytes) * kinds as f64),
            seconds: 0.0,
        };
        let per = JobCosts { full, recheck };
        let fanout = Cost {
            bytes: cap(65_536.0 * f64::from(cfg.schedule.fanout_max_peers)),
            seconds: 0.0,
        };
        Costs {
            bound: CostTable {
                intra: per,
                inter: per,
                fanout,
            },
            runs: HashMap::new(),
            max_age: Duration::from_secs_f64(COST_MAX_AGE_ROUNDS * cfg.schedule.round_s),
        }
    }

    pub fn record(&mut self, intra: bool, kind: JobKind, cost: Cost) {
        let intra = intra && kind != JobKind::Fanout;
        let v = self.runs.entry((intra, kind)).or_default();
        if v.len() == COST_RUNS {
            v.pop_front();
        }
        v.push_back((Instant::now(), cost));
    }

    pub fn get(&self, intra: bool, kind: JobKind) -> Cost {
        let recent: Vec<Cost> = self
            .runs
            .get(&(intra, kind))
            .into_iter()
            .flatten()
            .filter(|(at, _)| at.elapsed() <= self.max_age)
            .map(|&(_, c)| c)
            .collect();
        if recent.is_empty() {
            return self.bound.get(intra, kind);
        }
        let bytes = recent.iter().map(|c| c.bytes).max().unwrap_or(0);
        let mut secs: Vec<f64> = recent.iter().map(|c| c.seconds).collect();
        secs.sort_by(f64::total_cmp);
        Cost {
            bytes: (bytes as f64 * COST_MARGIN) as u64,
            seconds: secs[secs.len() / 2] * COST_MARGIN,
        }
    }

    pub fn table(&self) -> CostTable {
        let per = |intra| JobCosts {
            full: self.get(intra, JobKind::Full),
            recheck: self.get(intra, JobKind::Recheck),
        };
        CostTable {
            intra: per(true),
            inter: per(false),
            fanout: self.get(false, JobKind::Fanout),
        }
    }
}

/// Payload of measuring `sizes` with `cfg` at most: every size at its
/// most repetitions, each a settled single message and two bursts of
/// `n_max` (a bound: the sweep chooses n per size, most far smaller, and
/// stops repeating once its estimates are tight), plus the warm-ups.
fn payload_bound(cfg: &crate::sweep::SweepConfig, sizes: &[u64]) -> f64 {
    let per_rep = 2.0 * f64::from(cfg.settle_rounds + 1) + 2.0 * f64::from(cfg.n_max + 1);
    let warm = f64::from(cfg.warmup) * (2.0 + f64::from(cfg.n.max(2) + 1));
    sizes
        .iter()
        .map(|&s| {
            let reps = f64::from(cfg.max_reps.max(cfg.min_reps));
            s as f64 * (reps * per_rep + warm)
        })
        .sum::<f64>()
        + 3.0 * 2.0 * cfg.max_size_bytes as f64
}
