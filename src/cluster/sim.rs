//! The cluster simulated in virtual time: N nodes on a two-level fat tree
//! (leaves of `per_leaf` nodes), each running its own [`NodeSchedule`]
//! over the shared rounds, with node failures and quiet periods.
//!
//! Sessions are not invented: [`measure_costs`] runs a real full sweep
//! (`probe::run`) and a real re-check (`sweep::measure_sizes` with the
//! [`RecheckPlan`]) over `transport::sim::SimTransport` for each link class
//! (intra-leaf, inter-leaf), a few times with different jitter seeds; the
//! schedules are charged the largest of those runs (an upper bound, as the
//! daemon's estimates must be) and each simulated session costs one of the
//! measured runs, drawn at random.
//!
//! A pair counts as measured by a full sweep, an agreeing re-check, a
//! re-check without reference (the pair's points) or a disagreement a
//! second re-check confirmed (the pair's points, which differ from its
//! class; its repair sweep is counted apart).
//!
//! What is modelled beyond the schedule: a re-check on an unchanged link
//! disagrees with probability `false_disagreement`; a fraction
//! `changed_links` of the links differ from their class, so a re-check
//! against the class disagrees there (and the confirmed disagreement gets
//! the pair its own sweep); a dead node answers nothing (its partners'
//! connection attempts take `connect_timeout_s`); a quiet node declines.
//! Deterministic given the seed.

use crate::clock::{Clock, VirtualClock};
use crate::probe::{self, ProbeOptions};
use crate::sweep::{self, SweepError};
use crate::transport::sim::{SimParams, SimTransport};
use crate::transport::Transport;

use super::rounds::{mix, ClassId, Membership, Mix, Rounds, Slot};
use super::schedule::{
    Cost, CostTable, Job, JobCosts, JobKind, NodeSchedule, Outcome, Plan, RecheckPlan, Reference,
    ScheduleConfig, ScheduleError, View,
};

/// Measured costs of the jobs, several runs per link class and job.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CostSamples {
    pub intra_full: Vec<Cost>,
    pub intra_recheck: Vec<Cost>,
    pub inter_full: Vec<Cost>,
    pub inter_recheck: Vec<Cost>,
    /// A fan-out over `fanout_peers` peers at its driver.
    pub fanout: Vec<Cost>,
}

fn max_cost(v: &[Cost]) -> Cost {
    v.iter().fold(Cost::default(), |a, c| Cost {
        bytes: a.bytes.max(c.bytes),
        seconds: a.seconds.max(c.seconds),
    })
}

impl CostSamples {
    /// The estimates the schedules charge: the largest run of each.
    pub fn table(&self) -> CostTable {
        CostTable {
            intra: JobCosts {
                full: max_cost(&self.intra_full),
                recheck: max_cost(&self.intra_recheck),
            },
            inter: JobCosts {
                full: max_cost(&self.inter_full),
                recheck: max_cost(&self.inter_recheck),
            },
            fanout: max_cost(&self.fanout),
        }
    }

    fn runs(&self, intra: bool, kind: JobKind) -> &[Cost] {
        match (intra, kind) {
            (true, JobKind::Full) => &self.intra_full,
            (true, JobKind::Recheck) => &self.intra_recheck,
            (false, JobKind::Full) => &self.inter_full,
            (false, JobKind::Recheck) => &self.inter_recheck,
            (_, JobKind::Fanout) => &self.fanout,
        }
    }
}

/// Run the full sweep and the re-check over the `sim` transport for both
/// link models, and the fan-out over `fanout_peers` intra-leaf peers,
/// `runs` times each with jitter seeds 1..=runs.
pub fn measure_costs(
    intra: &SimParams,
    inter: &SimParams,
    full: &ProbeOptions,
    recheck: &RecheckPlan,
    fanout_peers: usize,
    runs: u64,
) -> Result<CostSamples, SweepError> {
    let mut out = CostSamples::default();
    if fanout_peers >= 2 {
        for seed in 1..=runs.max(1) {
            let p = SimParams { seed, ..*intra };
            let clock = VirtualClock::new();
            let mut t = SimTransport::new(p, clock.clone(), fanout_peers);
            let start = clock.now();
            sweep::fanout_sweep(
                &mut t,
                &clock,
                fanout_peers,
                full.fanout_size_bytes,
                &full.sweep,
            )?;
            let c = t.counters();
            out.fanout.push(Cost {
                bytes: c.sent_bytes + c.recv_bytes,
                seconds: clock.to_ns(clock.now().wrapping_sub(start)) * 1e-9,
            });
        }
    }
    for (params, fulls, rechecks) in [
        (intra, &mut out.intra_full, &mut out.intra_recheck),
        (inter, &mut out.inter_full, &mut out.inter_recheck),
    ] {
        for seed in 1..=runs.max(1) {
            let p = SimParams { seed, ..*params };
            let clock = VirtualClock::new();
            let mut t = SimTransport::new(p, clock.clone(), 1);
            let r = probe::run(&mut t, &clock, 0, full, &mut ())?;
            fulls.push(Cost {
                bytes: r.probe_bytes,
                seconds: r.elapsed_ns * 1e-9,
            });
            let cfg = recheck.sweep_config(&full.sweep);
            let before = t.counters();
            let start = clock.now();
            sweep::measure_sizes(&mut t, &clock, 0, &recheck.sizes_bytes, &cfg)?;
            rechecks.push(Cost {
                bytes: t.counters().bytes_since(&before),
                seconds: clock.to_ns(clock.now().wrapping_sub(start)) * 1e-9,
            });
        }
    }
    Ok(out)
}

/// The simulated cluster and its events.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub nodes: usize,
    pub per_leaf: usize,
    pub schedule: ScheduleConfig,
    pub costs: CostSamples,
    /// Simulated time from the start.
    pub horizon_s: f64,
    /// Time of the start on the shared clock (rounds are aligned to 0).
    pub start_s: f64,
    pub seed: u64,
    pub false_disagreement: f64,
    pub changed_links: f64,
    /// Nodes that die once, for `failure_down_s`, at a time drawn in the
    /// first half of the horizon.
    pub failures: usize,
    pub failure_down_s: f64,
    /// Mean fraction of nodes quiet (in a job), and the mean job length.
    pub quiet_fraction: f64,
    pub quiet_mean_s: f64,
    pub connect_timeout_s: f64,
    /// A class counts as fresh while it has a full sweep (by any node)
    /// younger than `full_sweep_max_age_s` and a measurement younger than
    /// this.
    pub fresh_s: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            nodes: 1024,
            per_leaf: 64,
            schedule: ScheduleConfig::default(),
            costs: CostSamples::default(),
            horizon_s: 30.0 * 3600.0,
            start_s: 1.0e9,
            seed: 1,
            false_disagreement: 0.05,
            changed_links: 0.001,
            failures: 0,
            failure_down_s: 2.0 * 3600.0,
            quiet_fraction: 0.0,
            quiet_mean_s: 4.0 * 3600.0,
            connect_timeout_s: 3.0,
            fresh_s: 900.0,
        }
    }
}

/// Mean and largest value over nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    pub mean: f64,
    pub max: f64,
}

fn spread(v: impl Iterator<Item = f64>) -> Spread {
    let (mut n, mut sum, mut max) = (0usize, 0.0, 0.0f64);
    for x in v {
        n += 1;
        sum += x;
        max = max.max(x);
    }
    Spread {
        mean: if n > 0 { sum / n as f64 } else { 0.0 },
        max,
    }
}

/// What a simulation shows. Times are seconds after the start; None: not
/// within the horizon.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SimReport {
    pub nodes: usize,
    pub leaves: usize,
    pub classes: usize,
    pub coverage_rounds: u32,
    pub block_rounds: Option<u32>,
    pub cycle_s: f64,
    pub horizon_s: f64,
    pub costs: CostTable,
    /// Every class fresh for the first time.
    pub classes_fresh_s: Option<f64>,
    /// Share of the rounds after that in which every class was fresh.
    pub classes_fresh_share: f64,
    /// Every unordered pair measured (either direction).
    pub mesh_pairs_s: Option<f64>,
    /// Every ordered pair measured by its driver.
    pub mesh_directed_s: Option<f64>,
    /// 99 % of the ordered pairs measured.
    pub mesh_directed_99_s: Option<f64>,
    pub directed_share_at_end: f64,
    /// Ordered pairs between nodes that never failed, all measured.
    pub mesh_directed_unfailed_s: Option<f64>,
    /// Every ordered pair with a failed end measured.
    pub mesh_directed_failed_s: Option<f64>,
    pub failed_nodes: usize,
    /// Control sessions (driven or served, declined ones included) per
    /// node per second, and the requests on them (a job each).
    pub sessions_per_s: Spread,
    pub requests_per_s: Spread,
    /// Probe payload bytes per node per second over the run, and in the
    /// busiest hour.
    pub bytes_per_s: Spread,
    pub peak_hour_bytes_per_s: f64,
    /// Share of time a node spends in sessions.
    pub busy_share: Spread,
    pub full_sweeps_per_node: Spread,
    pub rechecks_per_node: Spread,
    pub fanouts_per_node: Spread,
    /// Summed over nodes.
    pub class_sweeps_deferred: u64,
    pub repairs_deferred: u64,
    pub pair_sweeps_deferred: u64,
    pub budget_skips: u64,
    pub partner_down: u64,
    pub unreachable: u64,
    pub declined_quiet: u64,
    pub declined_budget: u64,
    pub confirmed_disagreements: u64,
    /// Pairs whose confirmed disagreement still awaits its repair sweep
    /// at the end of the run.
    pub repairs_pending_at_end: u64,
    /// Sessions that did not end within their round.
    pub overruns: u64,
    pub quiet_share: f64,
}

/// Per node: the intervals it is quiet, and when it is dead.
struct Events {
    quiet: Vec<Vec<(f64, f64)>>,
    quiet_next: Vec<usize>,
    dead: Vec<Option<(f64, f64)>>,
}

impl Events {
    fn new(cfg: &SimConfig, rng: &mut Mix) -> Events {
        let n = cfg.nodes;
        let (t0, t1) = (cfg.start_s, cfg.start_s + cfg.horizon_s);
        let mut quiet = vec![Vec::new(); n];
        let u = cfg.quiet_fraction.clamp(0.0, 0.99);
        if u > 0.0 {
            let busy_mean = cfg.quiet_mean_s;
            let idle_mean = cfg.quiet_mean_s * (1.0 - u) / u;
            for q in quiet.iter_mut() {
                let mut t = t0;
                let mut in_job = uniform(rng) < u;
                while t < t1 {
                    let d = exponential(rng, if in_job { busy_mean } else { idle_mean });
                    if in_job {
                        q.push((t, t + d));
                    }
                    t += d;
                    in_job = !in_job;
                }
            }
        }
        let mut dead = vec![None; n];
        let mut chosen = 0;
        while chosen < cfg.failures.min(n) {
            let i = rng.below(n as u64) as usize;
            if dead[i].is_none() {
                let at = t0 + uniform(rng) * cfg.horizon_s * 0.5;
                dead[i] = Some((at, at + cfg.failure_down_s));
                chosen += 1;
            }
        }
        Events {
            quiet,
            quiet_next: vec![0; n],
            dead,
        }
    }

    fn dead(&self, i: usize, t: f64) -> bool {
        self.dead[i].is_some_and(|(a, b)| t >= a && t < b)
    }

    /// Whether node i is quiet at t (t never decreases between calls).
    fn quiet(&mut self, i: usize, t: f64) -> bool {
        let q = &self.quiet[i];
        let k = &mut self.quiet_next[i];
        while *k < q.len() && q[*k].1 <= t {
            *k += 1;
        }
        *k < q.len() && q[*k].0 <= t
    }
}

fn uniform(rng: &mut Mix) -> f64 {
    (rng.next() >> 11) as f64 / (1u64 << 53) as f64
}

fn exponential(rng: &mut Mix, mean: f64) -> f64 {
    -mean * (1.0 - uniform(rng)).ln()
}

/// A bit per ordered pair, and when the count of set bits reached marks.
struct Coverage {
    n: usize,
    bits: Vec<u64>,
    count: u64,
}

impl Coverage {
    fn new(n: usize) -> Self {
        Self {
            n,
            bits: vec![0; (n * n).div_ceil(64)],
            count: 0,
        }
    }

    /// Set (a, b); true if it was not set.
    fn set(&mut self, a: usize, b: usize) -> bool {
        let k = a * self.n + b;
        let (w, m) = (k / 64, 1u64 << (k % 64));
        let new = self.bits[w] & m == 0;
        if new {
            self.bits[w] |= m;
            self.count += 1;
        }
        new
    }
}

/// What the run has seen so far.
struct Tally {
    /// The report being filled (the mesh times as they happen).
    report: SimReport,
    start_s: f64,
    hours: usize,
    failed: Vec<bool>,
    class_full: Vec<f64>,
    class_seen: Vec<f64>,
    directed: Coverage,
    pairs: Coverage,
    total_directed: u64,
    total_unfailed: u64,
    total_failed: u64,
    covered_unfailed: u64,
    covered_failed: u64,
    sessions: Vec<u64>,
    requests: Vec<u64>,
    bytes: Vec<u64>,
    busy_s: Vec<f64>,
    hourly: Vec<u64>,
}

impl Tally {
    fn new(cfg: &SimConfig, report: SimReport, classes: usize, failed: Vec<bool>) -> Tally {
        let n = cfg.nodes;
        let failed_count = failed.iter().filter(|&&f| f).count() as u64;
        let total_directed = (n * n.saturating_sub(1)) as u64;
        let unfailed = n as u64 - failed_count;
        let total_unfailed = unfailed * unfailed.saturating_sub(1);
        let hours = (cfg.horizon_s / 3600.0).ceil().max(1.0) as usize;
        Tally {
            report,
            start_s: cfg.start_s,
            hours,
            failed,
            class_full: vec![f64::NEG_INFINITY; classes],
            class_seen: vec![f64::NEG_INFINITY; classes],
            directed: Coverage::new(n),
            pairs: Coverage::new(n),
            total_directed,
            total_unfailed,
            total_failed: total_directed - total_unfailed,
            covered_unfailed: 0,
            covered_failed: 0,
            sessions: vec![0; n],
            requests: vec![0; n],
            bytes: vec![0; n],
            busy_s: vec![0.0; n],
            hourly: vec![0; n * hours],
        }
    }

    /// A job between d and p sent `cost.bytes` and took `cost.seconds`,
    /// from `t_s` on.
    fn job(&mut self, d: usize, p: usize, cost: Cost, t_s: f64) {
        for x in [d, p] {
            self.charge(x, cost.bytes, cost.seconds, t_s);
        }
    }

    /// Node x sent or received `bytes` in a session of `seconds`.
    fn charge(&mut self, x: usize, bytes: u64, seconds: f64, t_s: f64) {
        let hour = (((t_s - self.start_s) / 3600.0) as usize).min(self.hours - 1);
        self.bytes[x] += bytes;
        self.busy_s[x] += seconds;
        self.hourly[x * self.hours + hour] += bytes;
    }

    /// d measured its pair with p (class `class`) at `t_s`.
    fn measured(&mut self, d: usize, p: usize, class: ClassId, full: bool, t_s: f64) {
        let at = t_s - self.start_s;
        let r = &mut self.report;
        self.class_seen[class as usize] = t_s;
        if full {
            self.class_full[class as usize] = t_s;
        }
        if self.directed.set(d, p) {
            if self.failed[d] || self.failed[p] {
                self.covered_failed += 1;
            } else {
                self.covered_unfailed += 1;
            }
            let count = self.directed.count;
            if count == self.total_directed {
                r.mesh_directed_s.get_or_insert(at);
            }
            if count * 100 >= self.total_directed * 99 {
                r.mesh_directed_99_s.get_or_insert(at);
            }
            if self.covered_unfailed == self.total_unfailed {
                r.mesh_directed_unfailed_s.get_or_insert(at);
            }
            if self.total_failed > 0 && self.covered_failed == self.total_failed {
                r.mesh_directed_failed_s.get_or_insert(at);
            }
        }
        if self.pairs.set(d.min(p), d.max(p)) && self.pairs.count == self.total_directed / 2 {
            r.mesh_pairs_s.get_or_insert(at);
        }
    }

    /// Every measurable class has a full sweep younger than `max_age_s`
    /// and a measurement younger than `fresh_s`.
    fn all_fresh(&self, classes: &[ClassId], now_s: f64, max_age_s: f64, fresh_s: f64) -> bool {
        classes.iter().all(|&c| {
            now_s - self.class_full[c as usize] < max_age_s
                && now_s - self.class_seen[c as usize] < fresh_s
        })
    }
}

/// A round as the simulator runs it.
struct Round<'a> {
    cfg: &'a SimConfig,
    view: View<'a>,
    slot: Slot,
    alive: &'a [bool],
    quiet: &'a [bool],
}

/// Run the session `d` plans with `partner` in `slot` (job by job, as the
/// daemon would), with the session's own random draws. Returns when it
/// ended.
fn session(
    round: &Round<'_>,
    nodes: &mut [NodeSchedule],
    tally: &mut Tally,
    d: usize,
    partner: u32,
    mut job: Job,
) -> f64 {
    let Round {
        cfg, view, slot, ..
    } = round;
    let view = &view;
    let p = partner as usize;
    let class = view.membership.class_of(d as u32, partner);
    let intra = view.membership.is_intra(class);
    // A failed or quiet node elsewhere changes no other session's luck.
    let key = mix(slot.round ^ mix(((d as u64) << 32) | p as u64));
    let mut draws = Mix::new(mix(cfg.seed ^ key));
    let mut t = slot.start_s.max(cfg.start_s);
    let mut first = true;
    loop {
        let outcome = if !round.alive[p] {
            t += cfg.connect_timeout_s;
            Outcome::Unreachable
        } else {
            // One control session per meeting; each job is a request on it.
            for x in [d, p] {
                tally.sessions[x] += u64::from(first);
                tally.requests[x] += 1;
            }
            first = false;
            match nodes[p].admit(view, slot, d as u32, job, t, round.quiet[p]) {
                Err(why) => Outcome::Declined(why),
                Ok(()) => {
                    let runs = cfg.costs.runs(intra, job.kind());
                    let cost = runs
                        .get(draws.below(runs.len().max(1) as u64) as usize)
                        .copied()
                        .unwrap_or_default();
                    tally.job(d, p, cost, t);
                    t += cost.seconds;
                    nodes[p].served(cost.bytes);
                    match job.kind() {
                        JobKind::Full => Outcome::Swept { bytes: cost.bytes },
                        JobKind::Recheck => Outcome::Rechecked {
                            agrees: agrees(cfg, &mut draws, d, p, job_reference(job)),
                            bytes: cost.bytes,
                        },
                        JobKind::Fanout => Outcome::FannedOut {
                            peers: 1,
                            bytes: cost.bytes,
                        },
                    }
                }
            }
        };
        // Measured: a full sweep, an agreeing re-check, a re-check without
        // reference, or a disagreement the second re-check confirmed.
        match outcome {
            Outcome::Swept { .. } => tally.measured(d, p, class, true, t),
            Outcome::Rechecked { agrees, .. }
                if agrees
                    || job_reference(job) == Reference::Nothing
                    || matches!(job, Job::Confirm(_)) =>
            {
                tally.measured(d, p, class, false, t)
            }
            _ => {}
        }
        match nodes[d].record(view, outcome, t) {
            Some(next) => job = next,
            None => return t,
        }
    }
}

/// Simulate the cluster of `cfg`.
pub fn run(cfg: &SimConfig) -> Result<SimReport, ScheduleError> {
    let n = cfg.nodes;
    let per_leaf = cfg.per_leaf.max(1);
    let width = n.to_string().len();
    let names: Vec<String> = (0..n).map(|i| format!("node{i:0width$}")).collect();
    let leaf_width = n.div_ceil(per_leaf).to_string().len();
    let membership = Membership::new(&names, |name| {
        let i: usize = name[4..].parse().ok()?;
        Some(format!("leaf{:0leaf_width$}", i / per_leaf))
    })?;
    let rounds = Rounds::new(&membership, &cfg.schedule);
    let table = cfg.costs.table();
    let mut nodes = names
        .iter()
        .map(|name| NodeSchedule::new(&membership, name, &cfg.schedule, &table, cfg.start_s))
        .collect::<Result<Vec<_>, _>>()?;
    let mut events = Events::new(cfg, &mut Mix::new(cfg.seed));
    let failed: Vec<bool> = events.dead.iter().map(Option::is_some).collect();
    let classes: Vec<ClassId> = (0..membership.class_count() as ClassId)
        .filter(|&c| membership.class_measurable(c))
        .collect();
    let report = SimReport {
        nodes: n,
        leaves: membership.groups().len(),
        classes: classes.len(),
        coverage_rounds: rounds.coverage_rounds(),
        block_rounds: rounds.block_rounds(),
        cycle_s: rounds.cycle_s(),
        horizon_s: cfg.horizon_s,
        costs: table,
        failed_nodes: failed.iter().filter(|&&f| f).count(),
        ..SimReport::default()
    };
    let mut tally = Tally::new(cfg, report, membership.class_count(), failed);

    let (mut fresh_rounds, mut rounds_after_fresh) = (0u64, 0u64);
    let mut quiet_node_rounds = 0u64;
    let first = rounds.slot_at(cfg.start_s).round;
    let last = rounds.slot_at(cfg.start_s + cfg.horizon_s).round;
    let mut plan = rounds.plan_cycle(&membership, rounds.slot(first).cycle);
    let mut quiet = vec![false; n];
    let mut alive = vec![true; n];
    for k in first..last {
        let slot = rounds.slot(k);
        if slot.cycle != plan.cycle {
            plan = rounds.plan_cycle(&membership, slot.cycle);
        }
        let now = slot.start_s.max(cfg.start_s);
        for i in 0..n {
            alive[i] = !events.dead(i, now);
            quiet[i] = events.quiet(i, now);
            quiet_node_rounds += u64::from(quiet[i]);
        }
        let round = Round {
            cfg,
            view: View {
                membership: &membership,
                rounds: &rounds,
                cycle: &plan,
                costs: &table,
            },
            slot,
            alive: &alive,
            quiet: &quiet,
        };
        let plans: Vec<Option<Plan>> = (0..n)
            .map(|i| alive[i].then(|| nodes[i].plan(&round.view, &slot, now, quiet[i])))
            .collect();
        for (d, plan) in plans.iter().enumerate() {
            match *plan {
                Some(Plan::Drive { partner, job, .. }) => {
                    let end = session(&round, &mut nodes, &mut tally, d, partner, job);
                    tally.report.overruns += u64::from(end > slot.end_s);
                }
                Some(Plan::Fanout { chunk, .. }) => {
                    fanout(&round, &mut nodes, &mut tally, d, chunk);
                }
                _ => {}
            }
        }
        let fresh = tally.all_fresh(
            &classes,
            now,
            cfg.schedule.full_sweep_max_age_s,
            cfg.fresh_s,
        );
        if tally.report.classes_fresh_s.is_some() {
            rounds_after_fresh += 1;
            fresh_rounds += u64::from(fresh);
        } else if fresh {
            tally.report.classes_fresh_s = Some(slot.end_s - cfg.start_s);
        }
    }

    let horizon = cfg.horizon_s;
    let mut report = std::mem::take(&mut tally.report);
    report.classes_fresh_share = if rounds_after_fresh > 0 {
        fresh_rounds as f64 / rounds_after_fresh as f64
    } else {
        0.0
    };
    report.directed_share_at_end = tally.directed.count as f64 / tally.total_directed.max(1) as f64;
    report.sessions_per_s = spread(tally.sessions.iter().map(|&s| s as f64 / horizon));
    report.requests_per_s = spread(tally.requests.iter().map(|&s| s as f64 / horizon));
    report.bytes_per_s = spread(tally.bytes.iter().map(|&b| b as f64 / horizon));
    report.peak_hour_bytes_per_s = tally.hourly.iter().copied().max().unwrap_or(0) as f64 / 3600.0;
    report.busy_share = spread(tally.busy_s.iter().map(|&b| b / horizon));
    report.full_sweeps_per_node = spread(nodes.iter().map(|s| s.stats().full_sweeps as f64));
    report.rechecks_per_node = spread(nodes.iter().map(|s| s.stats().rechecks as f64));
    report.fanouts_per_node = spread(nodes.iter().map(|s| s.stats().fanouts as f64));
    for s in &nodes {
        let st = s.stats();
        report.class_sweeps_deferred += st.class_sweeps_deferred;
        report.repairs_deferred += st.repairs_deferred;
        report.pair_sweeps_deferred += st.pair_sweeps_deferred;
        report.budget_skips += st.budget_skips;
        report.partner_down += st.partner_down;
        report.unreachable += st.unreachable;
        report.declined_quiet += st.partner_quiet;
        report.declined_budget += st.partner_budget;
        report.confirmed_disagreements += st.confirmed_disagreements;
        report.repairs_pending_at_end += s.suspect_pairs() as u64;
    }
    report.quiet_share = quiet_node_rounds as f64 / ((last - first).max(1) as f64 * n as f64);
    Ok(report)
}

fn job_reference(job: Job) -> Reference {
    match job {
        Job::Recheck(r) | Job::Confirm(r) => r,
        Job::FullSweep(_) | Job::Fanout => Reference::Nothing,
    }
}

/// Run the fan-out `d` plans over the other members of `chunk`: each peer
/// that is alive admits or declines, the fan-out runs over those that
/// accepted (two at least) and costs one of the measured runs, scaled to
/// their number.
fn fanout(round: &Round<'_>, nodes: &mut [NodeSchedule], tally: &mut Tally, d: usize, chunk: u32) {
    let Round {
        cfg, view, slot, ..
    } = round;
    let key = mix(slot.round ^ mix((d as u64) << 32 | 0xfa));
    let mut draws = Mix::new(mix(cfg.seed ^ key));
    let t = slot.start_s.max(cfg.start_s);
    let members = view.rounds.fanout_chunk(chunk).to_vec();
    let mut accepted = Vec::new();
    for &p in members.iter().filter(|&&p| p as usize != d) {
        let p = p as usize;
        if !round.alive[p] {
            continue;
        }
        for x in [d, p] {
            tally.sessions[x] += 1;
            tally.requests[x] += 1;
        }
        if nodes[p]
            .admit(view, slot, d as u32, Job::Fanout, t, round.quiet[p])
            .is_ok()
        {
            accepted.push(p);
        }
    }
    let runs = &cfg.costs.fanout;
    let outcome = if accepted.len() >= 2 && !runs.is_empty() {
        let run = runs[draws.below(runs.len() as u64) as usize];
        let full = (members.len() - 1).max(1) as f64;
        let scale = accepted.len() as f64 / full;
        let cost = Cost {
            bytes: (run.bytes as f64 * scale) as u64,
            seconds: run.seconds * scale,
        };
        let share = cost.bytes / accepted.len() as u64;
        tally.charge(d, cost.bytes, cost.seconds, t);
        for &p in &accepted {
            tally.charge(p, share, cost.seconds, t);
            nodes[p].served(share);
        }
        tally.report.overruns += u64::from(t + cost.seconds > slot.end_s);
        Outcome::FannedOut {
            peers: accepted.len() as u32,
            bytes: cost.bytes,
        }
    } else {
        for &p in &accepted {
            nodes[p].served(0);
        }
        Outcome::FannedOut { peers: 0, bytes: 0 }
    };
    nodes[d].record(view, outcome, t);
}

/// Does a re-check of d → p against `reference` agree? Against nothing it
/// always does; a changed link never agrees with its class; otherwise a
/// false disagreement happens with the configured probability.
fn agrees(cfg: &SimConfig, rng: &mut Mix, d: usize, p: usize, reference: Reference) -> bool {
    if reference == Reference::Nothing {
        return true;
    }
    let (lo, hi) = (d.min(p) as u64, d.max(p) as u64);
    let link = mix(cfg.seed ^ 0xc4a9_6e0d ^ (lo << 32) ^ hi);
    let changed = ((link >> 11) as f64 / (1u64 << 53) as f64) < cfg.changed_links;
    if changed && reference == Reference::Class {
        return false;
    }
    uniform(rng) >= cfg.false_disagreement
}
