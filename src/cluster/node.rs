//! The schedule a daemon holds: a node's [`NodeSchedule`] bundled with
//! what it is evaluated against (membership, rounds, the cycle's plan, the
//! cost estimates), and its state as `ngctl status` shows it; the
//! settings every node of a cluster shares.

use super::jobs::{CostTable, Decline, Job, NodeStats, Outcome, Plan};
use super::rounds::{ClassId, CyclePlan, Membership, Rounds, Slot};
use super::schedule::{NodeSchedule, View};

/// Scheduling settings; every node of a cluster must use the same
/// `round_s`, `coverage_pass_s` and `seed` (they define the rounds).
#[derive(Clone, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScheduleConfig {
    /// Length of a round: a node takes part in at most one session per
    /// round, so this bounds the sessions per node per second.
    pub round_s: f64,
    /// Aim for one pass over all coverage classes in about this time.
    pub coverage_pass_s: f64,
    /// Probe payload bytes per second through this node (driving and
    /// serving), the long-run bound.
    pub budget_bytes_per_s: u64,
    /// Bucket capacity in seconds of budget (raised to two full sweeps
    /// when that is more, so one can run with one kept in reserve).
    pub burst_s: f64,
    /// A measured pair is not re-checked sooner than this.
    pub pair_recheck_s: f64,
    /// A coverage class's full sweep is repeated when older than this.
    pub full_sweep_max_age_s: f64,
    /// Backoff after an unreachable partner: doubling from the minimum.
    pub backoff_min_s: f64,
    pub backoff_max_s: f64,
    /// Clock difference between nodes tolerated at a round's edges.
    pub skew_s: f64,
    /// Seed of the pairing (shared by the cluster).
    pub seed: u64,
    /// A fan-out round (LogfP) every this many seconds of rounds (0: none).
    pub fanout_interval_s: f64,
    /// Peers of one fan-out at most (the chunks hold one member more).
    pub fanout_max_peers: u32,
    /// Mesh sessions that run at once over the whole cluster, at most
    /// (0: every pair of a tournament round at once). Each tournament
    /// round is then spread over ⌈(pairs of the round) / cap⌉ rounds: the
    /// cluster's probe load, and the links the mesh's own sessions share,
    /// stay bounded whatever the member count.
    pub mesh_pairs_per_round: u32,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            round_s: 10.0,
            coverage_pass_s: 600.0,
            budget_bytes_per_s: 2_000_000,
            burst_s: 300.0,
            pair_recheck_s: 3600.0,
            full_sweep_max_age_s: 86_400.0,
            backoff_min_s: 60.0,
            backoff_max_s: 900.0,
            skew_s: 1.0,
            seed: 0,
            fanout_interval_s: 1200.0,
            fanout_max_peers: 15,
            mesh_pairs_per_round: 0,
        }
    }
}

/// Largest cap on concurrent mesh sessions (a cap this large is no cap
/// for any membership the rounds accept in practice).
pub const MAX_MESH_PAIRS_PER_ROUND: u32 = 1 << 20;

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("no members")]
    NoMembers,
    #[error("{0} members is too many")]
    TooManyMembers(usize),
    #[error("{0:?} is not a member of the cluster (its own name must be in the peer list every node reads)")]
    NotAMember(String),
    #[error("schedule: {0}")]
    Config(String),
}

impl ScheduleConfig {
    pub fn validate(&self) -> Result<(), ScheduleError> {
        let bad = |m: &str| Err(ScheduleError::Config(m.to_string()));
        let finite = [
            self.round_s,
            self.coverage_pass_s,
            self.burst_s,
            self.pair_recheck_s,
            self.full_sweep_max_age_s,
            self.backoff_min_s,
            self.backoff_max_s,
            self.skew_s,
            self.fanout_interval_s,
        ];
        if finite.iter().any(|v| !v.is_finite() || *v < 0.0) {
            return bad("every duration must be a finite number ≥ 0");
        }
        if self.round_s < 1.0 {
            return bad("round_s must be at least 1 s (at most one session per second)");
        }
        if self.budget_bytes_per_s == 0 {
            return bad("budget_bytes_per_s must be positive");
        }
        if self.full_sweep_max_age_s <= 0.0 || self.backoff_min_s <= 0.0 {
            return bad("full_sweep_max_age_s and backoff_min_s must be positive");
        }
        if self.backoff_max_s < self.backoff_min_s {
            return bad("backoff_max_s must not be below backoff_min_s");
        }
        if self.skew_s * 2.0 >= self.round_s {
            return bad("skew_s must be under half a round");
        }
        if self.fanout_interval_s > 0.0 && self.fanout_interval_s < 2.0 * self.round_s {
            return bad("fanout_interval_s must be 0 (none) or at least two rounds");
        }
        if !(2..=1024).contains(&self.fanout_max_peers) {
            return bad("fanout_max_peers must be 2 ..= 1024");
        }
        if self.mesh_pairs_per_round > MAX_MESH_PAIRS_PER_ROUND {
            return bad("mesh_pairs_per_round must be 0 (no cap) ..= 1048576");
        }
        Ok(())
    }
}

/// The schedule's state as `ngctl status` shows it (the daemon's status
/// file carries it).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ScheduleStatus {
    /// The current round, its kind ("mesh", "coverage", "fanout"), length
    /// and cycle.
    pub round: u64,
    pub round_kind: String,
    pub round_s: f64,
    pub cycle: u64,
    /// One cycle: every pair meets once.
    pub cycle_s: f64,
    pub members: usize,
    pub groups: usize,
    /// Coverage classes this node belongs to, and those it holds a full
    /// sweep of younger than the maximum age.
    pub classes: usize,
    pub classes_fresh: usize,
    /// Peers this node has measured (any job), and with a full sweep of
    /// the pair's own.
    pub pairs_measured: usize,
    pub pairs_swept: usize,
    /// Confirmed disagreements awaiting their repair sweep.
    pub suspect_pairs: usize,
    pub budget_level_bytes: f64,
    pub quiet: bool,
    pub stats: NodeStats,
}

/// A node's schedule with what it is evaluated against: the membership,
/// the rounds, the current cycle's plan (recomputed when the cycle
/// changes) and the cost estimates. This is what the daemon holds: its
/// probe thread calls [`Schedule::plan`] at every round and
/// [`Schedule::record`] after every job; its control handler calls
/// [`Schedule::admit`] for a request and [`Schedule::served`] when the
/// session ends.
#[derive(Clone, Debug)]
pub struct Schedule {
    membership: Membership,
    rounds: Rounds,
    cycle: CyclePlan,
    costs: CostTable,
    node: NodeSchedule,
    /// The round of the last plan (for record).
    slot: Option<Slot>,
}

impl Schedule {
    pub fn new(
        membership: Membership,
        me: &str,
        cfg: &ScheduleConfig,
        costs: CostTable,
        now_s: f64,
    ) -> Result<Schedule, ScheduleError> {
        let node = NodeSchedule::new(&membership, me, cfg, &costs, now_s)?;
        let rounds = Rounds::new(&membership, cfg);
        let cycle = rounds.plan_cycle(&membership, rounds.slot_at(now_s).cycle);
        Ok(Schedule {
            membership,
            rounds,
            cycle,
            costs,
            node,
            slot: None,
        })
    }

    pub fn membership(&self) -> &Membership {
        &self.membership
    }

    pub fn rounds(&self) -> &Rounds {
        &self.rounds
    }

    pub fn node(&self) -> &NodeSchedule {
        &self.node
    }

    pub fn node_mut(&mut self) -> &mut NodeSchedule {
        &mut self.node
    }

    /// New estimates (e.g. from the node's own sweeps).
    pub fn set_costs(&mut self, costs: CostTable) {
        self.costs = costs;
    }

    pub fn costs(&self) -> &CostTable {
        &self.costs
    }

    /// The members of fan-out chunk `chunk` but this node.
    pub fn fanout_peers(&self, chunk: u32) -> Vec<u32> {
        let me = self.node.member();
        self.rounds
            .fanout_chunk(chunk)
            .iter()
            .copied()
            .filter(|&m| m != me)
            .collect()
    }

    /// What `ngctl status` shows of the schedule at `now_s`.
    pub fn status(&mut self, now_s: f64, quiet: bool) -> ScheduleStatus {
        let slot = self.rounds.slot_at(now_s);
        let m = &self.membership;
        let me = self.node.member();
        let mine = m.group_of(me);
        let classes: Vec<ClassId> = (0..m.groups().len() as u32)
            .map(|g| {
                let (i, j) = (g.min(mine), g.max(mine));
                j * (j + 1) / 2 + i
            })
            .filter(|&c| m.class_measurable(c))
            .collect();
        let peers = (0..m.len() as u32).filter(|&p| p != me);
        let (mut measured, mut swept) = (0, 0);
        for p in peers {
            let (a, b) = self.node.pair_known(p);
            measured += usize::from(a);
            swept += usize::from(b);
        }
        ScheduleStatus {
            round: slot.round,
            round_kind: slot.kind.name().to_string(),
            round_s: self.rounds.round_s(),
            cycle: slot.cycle,
            cycle_s: self.rounds.cycle_s(),
            members: m.len(),
            groups: m.groups().len(),
            classes: classes.len(),
            classes_fresh: classes
                .iter()
                .filter(|&&c| self.node.class_fresh(c, now_s))
                .count(),
            pairs_measured: measured,
            pairs_swept: swept,
            suspect_pairs: self.node.suspect_pairs(),
            budget_level_bytes: self.node.budget_level(now_s),
            quiet,
            stats: self.node.stats().clone(),
        }
    }

    fn refresh(&mut self, slot: &Slot) {
        if self.cycle.cycle != slot.cycle {
            self.cycle = self.rounds.plan_cycle(&self.membership, slot.cycle);
        }
    }

    /// The round at `now_s` (shared clock) and what this node does in it.
    pub fn plan(&mut self, now_s: f64, quiet: bool) -> (Slot, Plan) {
        let slot = self.rounds.slot_at(now_s);
        self.refresh(&slot);
        self.slot = Some(slot);
        let view = View {
            membership: &self.membership,
            rounds: &self.rounds,
            cycle: &self.cycle,
            costs: &self.costs,
        };
        (slot, self.node.plan(&view, &slot, now_s, quiet))
    }

    /// A request from the member named `requester` for `job` in `round`.
    pub fn admit(
        &mut self,
        requester: &str,
        round: u64,
        job: Job,
        now_s: f64,
        quiet: bool,
    ) -> Result<(), Decline> {
        let Some(from) = self.membership.index_of(requester) else {
            return Err(Decline::NotExpected);
        };
        let slot = self.rounds.slot(round);
        let cycle = if slot.cycle == self.cycle.cycle {
            None
        } else {
            Some(self.rounds.plan_cycle(&self.membership, slot.cycle))
        };
        let view = View {
            membership: &self.membership,
            rounds: &self.rounds,
            cycle: cycle.as_ref().unwrap_or(&self.cycle),
            costs: &self.costs,
        };
        self.node.admit(&view, &slot, from, job, now_s, quiet)
    }

    /// The admitted job ended having sent `bytes`.
    pub fn served(&mut self, bytes: u64) {
        self.node.served(bytes);
    }

    /// The admitted job ended without word of its bytes.
    pub fn served_as_charged(&mut self) {
        self.node.served_as_charged();
    }

    /// How the planned job ended; the next job of the session, if any.
    pub fn record(&mut self, outcome: Outcome, now_s: f64) -> Option<Job> {
        let slot = self.slot?;
        self.refresh(&slot);
        let view = View {
            membership: &self.membership,
            rounds: &self.rounds,
            cycle: &self.cycle,
            costs: &self.costs,
        };
        self.node.record(&view, outcome, now_s)
    }
}
