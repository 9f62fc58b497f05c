//! The vocabulary of a session between two nodes: the jobs, what they
//! cost, what a node plans for a round, how a job ends, the counters, and
//! the token bucket that pays for it all (see `schedule` for the rules).

/// What a job costs: payload bytes (both directions) and time.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Cost {
    pub bytes: u64,
    pub seconds: f64,
}

/// The costs of the two jobs over one kind of link.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct JobCosts {
    pub full: Cost,
    pub recheck: Cost,
}

/// Estimated costs by link kind: the daemon's from its measurements (or a
/// bound from its sweep settings), the simulator's from sweeps over the
/// `sim` transport.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct CostTable {
    /// Both ends on one switch group.
    pub intra: JobCosts,
    /// Ends on two groups.
    pub inter: JobCosts,
    /// A LogfP fan-out, at its driver (each of its P peers carries 1/P).
    pub fanout: Cost,
}

impl CostTable {
    pub fn uniform(costs: JobCosts) -> Self {
        Self {
            intra: costs,
            inter: costs,
            fanout: Cost::default(),
        }
    }

    pub fn get(&self, intra: bool, kind: JobKind) -> Cost {
        let c = if intra { &self.intra } else { &self.inter };
        match kind {
            JobKind::Full => c.full,
            JobKind::Recheck => c.recheck,
            JobKind::Fanout => self.fanout,
        }
    }

    pub(crate) fn max_full_bytes(&self) -> u64 {
        self.intra.full.bytes.max(self.inter.full.bytes)
    }
}

/// The cheap re-check: the gap and half round trip at a few sizes, a fixed
/// number of repetitions, n bounded, and the session warm-up topped at the
/// largest re-check size instead of the full sweep's, so it stays under
/// 1 MB (bench/cluster.md measures it on the `sim` links).
#[derive(Clone, Debug, PartialEq)]
pub struct RecheckPlan {
    pub sizes_bytes: Vec<u64>,
    pub reps: u32,
    pub n_max: u32,
}

impl Default for RecheckPlan {
    fn default() -> Self {
        Self {
            sizes_bytes: vec![1, 4096],
            reps: 6,
            n_max: 8,
        }
    }
}

impl RecheckPlan {
    /// The sweep settings of a re-check, from those of the full sweep.
    pub fn sweep_config(&self, full: &crate::sweep::SweepConfig) -> crate::sweep::SweepConfig {
        crate::sweep::SweepConfig {
            refine: false,
            min_reps: self.reps,
            max_reps: self.reps,
            n_max: self.n_max,
            n_min: full.n_min.min(self.n_max),
            max_size_bytes: self.sizes_bytes.iter().copied().max().unwrap_or(1),
            ..full.clone()
        }
    }
}

/// A job's kind, as a responder is asked to admit it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum JobKind {
    Full,
    Recheck,
    Fanout,
}

/// What a re-check is compared with. Part of the control protocol (a
/// request names its job): new variants go at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Reference {
    /// The pair's own full sweep.
    Pair,
    /// This node's full sweep of the pair's coverage class.
    Class,
    /// Nothing known yet: the re-check's points are kept as the pair's.
    Nothing,
}

/// Why a full sweep runs; it sets the sweep's priority on the budget. A
/// repair (and any job of a coverage round) may empty the bucket; a class
/// or pair sweep outside coverage rounds must leave two full sweeps in it,
/// kept for repairs and coverage duties (a sweep the bucket cannot pay is
/// replaced by a re-check). Part of the control protocol: new variants go
/// at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Purpose {
    /// No full sweep of the pair's class younger than the maximum age:
    /// this one stands for the class.
    Class,
    /// A disagreement was confirmed: the pair gets its own parameters.
    Repair,
    /// The class is known, the pair has no sweep of its own younger than
    /// the maximum age: the full mesh, swept in the background as the
    /// budget allows.
    Pair,
}

/// A job of a session. Part of the control protocol (a request names its
/// job): new variants go at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Job {
    FullSweep(Purpose),
    Recheck(Reference),
    /// A second re-check after a disagreeing one.
    Confirm(Reference),
    /// A LogfP fan-out over the driver's chunk (fan-out rounds only).
    Fanout,
}

impl Job {
    pub fn kind(&self) -> JobKind {
        match self {
            Job::FullSweep(_) => JobKind::Full,
            Job::Recheck(_) | Job::Confirm(_) => JobKind::Recheck,
            Job::Fanout => JobKind::Fanout,
        }
    }

    /// A short name (status, logs).
    pub fn name(&self) -> &'static str {
        match self {
            Job::FullSweep(Purpose::Class) => "class sweep",
            Job::FullSweep(Purpose::Repair) => "repair sweep",
            Job::FullSweep(Purpose::Pair) => "pair sweep",
            Job::Recheck(_) => "re-check",
            Job::Confirm(_) => "confirming re-check",
            Job::Fanout => "fan-out",
        }
    }
}

/// Why a node sits a round out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Idle {
    /// No partner this round.
    NoPartner,
    /// This node is quiet.
    Quiet,
    /// The pair was measured recently.
    NotDue,
    /// The partner is backing off after a failed contact.
    PartnerDown,
    /// Not even a re-check fits the budget.
    Budget,
    /// Not even a re-check fits the rest of the round.
    NoTime,
    /// The round was planned already.
    Planned,
}

impl Idle {
    /// A short name (status, logs).
    pub fn name(&self) -> &'static str {
        match self {
            Idle::NoPartner => "no partner",
            Idle::Quiet => "quiet",
            Idle::NotDue => "pair not due",
            Idle::PartnerDown => "partner backing off",
            Idle::Budget => "over budget",
            Idle::NoTime => "no time left in the round",
            Idle::Planned => "planned",
        }
    }
}

/// What this node does in a round.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Plan {
    Idle(Idle),
    /// Admit requests from `partner` (only) until `until_s`.
    Serve {
        partner: u32,
        until_s: f64,
    },
    /// Ask `partner` for `job` (its cost is charged) and run it before
    /// `until_s`; then call [`NodeSchedule::record`].
    Drive {
        partner: u32,
        job: Job,
        until_s: f64,
    },
    /// Ask every other member of fan-out chunk `chunk` for [`Job::Fanout`]
    /// (its cost is charged), run the fan-out over those that accept
    /// before `until_s`, then call [`NodeSchedule::record`].
    Fanout {
        chunk: u32,
        until_s: f64,
    },
}

/// Why a responder declined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Decline {
    Quiet,
    /// Its bucket cannot pay for the job.
    Budget,
    /// It is not this requester's partner in that round (or the round is
    /// over).
    NotExpected,
    /// It is driving a session of its own.
    Busy,
}

/// How a driver's job ended.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum Outcome {
    Swept {
        bytes: u64,
    },
    Rechecked {
        agrees: bool,
        bytes: u64,
    },
    /// The partner answered and declined: no failure.
    Declined(Decline),
    /// The partner could not be reached: it backs off.
    Unreachable,
    /// The samples show the link or a host was disturbed: nothing is
    /// published, the pair is tried again at its next round.
    Disturbed {
        bytes: u64,
    },
    /// The partner stopped answering mid-job: it backs off.
    Failed {
        bytes: u64,
    },
    /// A fan-out ran over `peers` peers (0: it could not run).
    FannedOut {
        peers: u32,
        bytes: u64,
    },
}

/// Counters for `ngctl status` and the simulator.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct NodeStats {
    pub rounds: u64,
    pub quiet_rounds: u64,
    pub drives: u64,
    pub serves: u64,
    pub full_sweeps: u64,
    pub rechecks: u64,
    pub disagreements: u64,
    pub confirmed_disagreements: u64,
    pub not_due: u64,
    pub partner_down: u64,
    /// Class sweeps the budget (this node's or the partner's) could not
    /// pay, run as re-checks instead.
    pub class_sweeps_deferred: u64,
    /// Repairs of a confirmed disagreement the budget could not pay: the
    /// pair stays suspect until its next meeting.
    pub repairs_deferred: u64,
    /// Sweeps of a pair of its own the budget could not pay yet (a re-check
    /// ran instead).
    pub pair_sweeps_deferred: u64,
    pub fanouts: u64,
    /// Rounds skipped because not even a re-check fitted.
    pub budget_skips: u64,
    pub unreachable: u64,
    pub failed: u64,
    pub disturbed: u64,
    /// Declines this node met as driver: quiet, over budget, busy with
    /// another session, not expecting this node in that round.
    pub partner_quiet: u64,
    pub partner_budget: u64,
    pub partner_busy: u64,
    pub partner_not_expected: u64,
    /// Declines this node gave as responder, by the same reasons.
    pub refused_quiet: u64,
    pub refused_budget: u64,
    pub refused_busy: u64,
    pub refused_other: u64,
    /// Probe payload bytes settled (driving and serving).
    pub bytes: u64,
    /// Of those, the payload of the re-checks (and confirmations) this node
    /// drove, both directions: `recheck_bytes / rechecks` is what one
    /// re-check costs.
    pub recheck_bytes: u64,
}

/// A token bucket that never goes into debt on an estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenBucket {
    rate_per_s: f64,
    capacity: f64,
    level: f64,
    at_s: f64,
}

impl TokenBucket {
    pub fn new(rate_per_s: f64, capacity: f64, level: f64, now_s: f64) -> Self {
        Self {
            rate_per_s,
            capacity,
            level: level.min(capacity),
            at_s: now_s,
        }
    }

    fn refill(&mut self, now_s: f64) {
        let dt = (now_s - self.at_s).max(0.0);
        self.level = (self.level + dt * self.rate_per_s).min(self.capacity);
        self.at_s = self.at_s.max(now_s);
    }

    pub fn level(&mut self, now_s: f64) -> f64 {
        self.refill(now_s);
        self.level
    }

    pub(crate) fn set_capacity(&mut self, capacity: f64) {
        self.capacity = capacity;
        self.level = self.level.min(capacity);
    }

    /// Take `bytes` if `reserve` is left afterwards.
    pub fn try_take(&mut self, bytes: u64, reserve: u64, now_s: f64) -> bool {
        self.refill(now_s);
        let ok = self.level - bytes as f64 >= reserve as f64;
        if ok {
            self.level -= bytes as f64;
        }
        ok
    }

    /// A job charged `charged` and sent `actual`: the difference is given
    /// back, or owed.
    pub fn settle(&mut self, charged: u64, actual: u64) {
        self.level = (self.level + charged as f64 - actual as f64).min(self.capacity);
    }
}
