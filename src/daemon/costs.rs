//! The probe thread's cost estimates: what the schedule charges before a
//! job runs, from the settings until the node has run jobs of a kind, then
//! from its recent runs.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::config::Config;
use super::{job, recheck_plan};
use crate::cluster::schedule::{Cost, CostTable, JobCosts, JobKind};
use crate::sweep::cost::{self, LinkEstimate};

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
/// has run a job of a kind (or when its runs are old), the plan from its
/// settings (bytes at most the bucket's burst); then the largest bytes of
/// its recent runs and their median time, with a margin.
pub(super) struct Costs {
    planned: CostTable,
    runs: HashMap<(bool, JobKind), VecDeque<(Instant, Cost)>>,
    max_age: Duration,
}

impl Costs {
    pub fn new(cfg: &Config, kinds: usize) -> Costs {
        let burst = cfg.schedule.burst_s * cfg.budget_bytes_per_s as f64;
        let sweep = job::sweep_options(cfg, super::FALLBACK).sweep;
        let plan = recheck_plan();
        let cap = |b: f64| b.min(burst).max(1.0) as u64;
        // Before a first job: the sweep's planned cost over a link like a
        // 1 Gbit/s one (`sweep::cost::plan`), not its worst-case bound,
        // which is several GB for sweeps to 1 MiB and would hold the first
        // sweep back for minutes of budget. A measured job replaces it.
        let link = LinkEstimate::default();
        let planned = cost::plan(&sweep, &link);
        let full = Cost {
            bytes: cap(planned.bytes as f64 * kinds as f64),
            seconds: planned.seconds * kinds as f64,
        };
        let checked = cost::plan_sizes(&plan.sweep_config(&sweep), &plan.sizes_bytes, &link);
        let recheck = Cost {
            bytes: cap(checked.bytes as f64 * kinds as f64),
            seconds: checked.seconds * kinds as f64,
        };
        let per = JobCosts { full, recheck };
        let fanout = Cost {
            bytes: cap(65_536.0 * f64::from(cfg.schedule.fanout_max_peers)),
            seconds: 0.0,
        };
        Costs {
            planned: CostTable {
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
            return self.planned.get(intra, kind);
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
