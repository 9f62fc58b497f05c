//! One node's part in the rounds: whether it drives, serves or sits a
//! round out, which job it runs, and its traffic budget. Pure and
//! deterministic: time is a parameter, nothing here reads a clock, sleeps,
//! spawns or does I/O, so the daemon's probe thread and the cluster
//! simulator (`cluster::sim`) run this very code. [`Schedule`] bundles a
//! [`NodeSchedule`] with what it is evaluated against, for the daemon.
//!
//! Per round (see `rounds` for how the pairs come about):
//! - [`NodeSchedule::plan`] says what this node does in the round. A
//!   quiet node does nothing (and [`NodeSchedule::admit`] declines for it);
//!   a node whose partner is backing off after a failed contact, or whose
//!   pair was measured less than `pair_recheck_s` ago, skips the round
//!   (coverage rounds and suspect pairs are always due, and so is a pair
//!   without a sweep of its own: a re-check in place of its deferred
//!   sweep does not put the sweep off). The job:
//!   - a repair (full sweep) when the pair's disagreement with its
//!     reference was confirmed;
//!   - a class sweep (full sweep) when this node has no full sweep of the
//!     pair's coverage class younger than `full_sweep_max_age_s`: it then
//!     stands for the class;
//!   - a pair sweep (full sweep) when the pair has no sweep of its own
//!     younger than `full_sweep_max_age_s` and the budget allows it: the
//!     full mesh, swept in the background;
//!   - else a cheap re-check, against the pair's own sweep, the class's,
//!     or nothing yet (then it records the pair's points).
//! - In a fan-out round (see `rounds`) the driver of a chunk plans
//!   [`Plan::Fanout`], the chunk's other members serve it.
//! - The job's estimated cost is charged to a token bucket *before* it
//!   runs; the bucket never goes into debt on an estimate. Repairs and the
//!   jobs of coverage rounds may empty it; a class sweep elsewhere must
//!   leave two full sweeps in it, and one the bucket (or the partner's)
//!   cannot pay becomes a re-check, so the meeting is not lost. After the
//!   job the estimate is settled against the bytes actually sent (an
//!   estimate below the real cost leaves a debt, paid back before
//!   anything else runs). Pair sweeps keep the same two full sweeps in the
//!   bucket, so a budget that cannot spare them (large sweeps, a low
//!   budget) covers the mesh with re-checks only.
//! - The responder charges its own bucket the same way when it admits a
//!   request, so the budget bounds all probe bytes through the node.
//! - [`NodeSchedule::record`] takes the outcome and may continue the same
//!   session: a disagreeing re-check is confirmed by a second one; a
//!   confirmed disagreement measured the pair (its points) and marks it
//!   suspect, and its repair runs at once if the budget and the round's
//!   remaining time allow (where sweeps outlast every round: half the
//!   round left, as for a sweep at a round's start), else first thing at
//!   the pair's next meeting.
//! - A partner that cannot be reached (or fails mid-job) backs off
//!   exponentially, `backoff_min_s` … `backoff_max_s`. A partner that
//!   declines (quiet, over its budget) is simply met again at its next
//!   round. Neither counts as a failure of this node.
//!
//! One session per node per round: sessions per node per second are at
//! most 1 / `round_s`, and the probe bytes through a node over a time T
//! at most budget × T plus the bucket's content at the start (one full
//! sweep), whatever the number of members.

pub use super::jobs::{
    Cost, CostTable, Decline, Idle, Job, JobCosts, JobKind, NodeStats, Outcome, Plan, Purpose,
    RecheckPlan, Reference, TokenBucket,
};
pub use super::node::{Schedule, ScheduleConfig, ScheduleError, ScheduleStatus};
use super::rounds::{ClassId, CyclePlan, Membership, RoundKind, Rounds, Slot};

/// What the node knows of a pair (its driven direction).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    #[default]
    None,
    /// Re-checked only (against nothing or the class): points, no
    /// parameters of its own.
    Points,
    /// Its own full sweep.
    Swept,
}

/// Times are whole seconds since the schedule's origin, plus one (0 =
/// never), so a pair costs 16 bytes at 4096 members.
#[derive(Clone, Copy, Debug, Default)]
struct PairState {
    measured: u32,
    /// The pair's own full sweep (a class, pair or repair sweep).
    swept: u32,
    down_until: u32,
    entry: Entry,
    suspect: bool,
    failures: u8,
}

#[derive(Clone, Copy, Debug)]
struct Session {
    round: u64,
    partner: u32,
    drives: bool,
    coverage: bool,
    /// A fan-out round's session (driver: `partner` is itself).
    fanout: bool,
    class: ClassId,
    intra: bool,
    until_s: f64,
    job: Option<Job>,
    /// The estimate charged for the step in flight.
    charged: u64,
    /// A responder admitted a request in this session.
    admitted: bool,
}

impl Session {
    /// A session of `slot` with `partner`, nothing charged yet.
    fn new(slot: &Slot, partner: u32, drives: bool, class: ClassId, intra: bool) -> Session {
        Session {
            round: slot.round,
            partner,
            drives,
            coverage: false,
            fanout: false,
            class,
            intra,
            until_s: slot.end_s,
            job: None,
            charged: 0,
            admitted: false,
        }
    }
}

/// The shared, read-only state a node's schedule is evaluated against.
#[derive(Clone, Copy)]
pub struct View<'a> {
    pub membership: &'a Membership,
    pub rounds: &'a Rounds,
    pub cycle: &'a CyclePlan,
    pub costs: &'a CostTable,
}

/// One node's schedule state.
#[derive(Clone, Debug)]
pub struct NodeSchedule {
    me: u32,
    cfg: ScheduleConfig,
    origin_s: f64,
    pairs: Vec<PairState>,
    /// Per class: this node's last full sweep standing for it (a stamp).
    class_swept: Vec<u32>,
    bucket: TokenBucket,
    session: Option<Session>,
    planned: Option<u64>,
    stats: NodeStats,
}

/// How far back the schedule can date what it learns (restored entries):
/// its origin lies this long before its start.
const HISTORY_S: f64 = 30.0 * 86_400.0;

/// The most bytes a served job is counted for, as a multiple of its charge
/// (losses and re-sends cost a real job far less), and at least
/// `UNCHARGED_MAX` (a job charged nothing: no budget, or no estimate yet).
pub const MAX_OVERRUN: u64 = 4;
pub const UNCHARGED_MAX: u64 = 256 << 20;

/// Whether a job of `cost_s` may start with `remaining_s` of a round of
/// `round_s` left: where it fits; or, for an `overdue` sweep (of a pair
/// never swept, or the repair of a confirmed disagreement) where sweeps
/// outlast every round, with at least half the round left (the meeting
/// then outlasts its round, and the partner declines its next ones as
/// busy). Re-checks alone would leave such a pair unmeasured, or
/// re-check, disagree and confirm at every meeting, for good. A repair
/// confirmed with half its round left starts at once: put off, it would
/// wait for the pair's next meeting in this direction (two cycles), and
/// it overruns this round by at most half a round more than it would
/// overrun a round it starts.
fn may_start(cost_s: f64, remaining_s: f64, round_s: f64, overdue: bool) -> bool {
    cost_s <= remaining_s || (overdue && cost_s > round_s && remaining_s >= 0.5 * round_s)
}

impl NodeSchedule {
    /// The schedule of member `me_name`, starting at `now_s` with one full
    /// sweep's worth in its bucket.
    pub fn new(
        membership: &Membership,
        me_name: &str,
        cfg: &ScheduleConfig,
        costs: &CostTable,
        now_s: f64,
    ) -> Result<Self, ScheduleError> {
        cfg.validate()?;
        let me = membership
            .index_of(me_name)
            .ok_or_else(|| ScheduleError::NotAMember(me_name.to_string()))?;
        let full = costs.max_full_bytes() as f64;
        let rate = cfg.budget_bytes_per_s as f64;
        Ok(Self {
            me,
            cfg: cfg.clone(),
            origin_s: now_s - HISTORY_S,
            pairs: vec![PairState::default(); membership.len()],
            class_swept: vec![0; membership.class_count()],
            bucket: TokenBucket::new(rate, (cfg.burst_s * rate).max(3.0 * full), full, now_s),
            session: None,
            planned: None,
            stats: NodeStats::default(),
        })
    }

    pub fn member(&self) -> u32 {
        self.me
    }

    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    pub fn config(&self) -> &ScheduleConfig {
        &self.cfg
    }

    /// Bytes in the bucket now.
    pub fn budget_level(&mut self, now_s: f64) -> f64 {
        self.bucket.level(now_s)
    }

    /// When this node last measured its pair with `peer` (any job), if
    /// ever.
    pub fn measured_s(&self, peer: u32) -> Option<f64> {
        self.time_of(self.pairs[peer as usize].measured)
    }

    /// Pairs whose disagreement with their reference was confirmed and
    /// whose repair sweep has not run yet.
    pub fn suspect_pairs(&self) -> usize {
        self.pairs.iter().filter(|p| p.suspect).count()
    }

    /// When this node's full sweep standing for `class` ran, if ever.
    pub fn class_swept_s(&self, class: ClassId) -> Option<f64> {
        self.time_of(self.class_swept[class as usize])
    }

    /// A full sweep of `class` made elsewhere (shared by a peer, or
    /// restored from the state file) counts as this node's reference for
    /// the class.
    pub fn learn_class(&mut self, class: ClassId, swept_s: f64) {
        let s = self.stamp(swept_s);
        let c = &mut self.class_swept[class as usize];
        *c = (*c).max(s);
    }

    /// The pair with `peer` has a full sweep of its own from `swept_s`
    /// (restored from the state file): re-checks compare with it, and it
    /// counts as measured then.
    pub fn learn_pair(&mut self, peer: u32, swept_s: f64) {
        let s = self.stamp(swept_s);
        if let Some(p) = self.pairs.get_mut(peer as usize) {
            p.entry = Entry::Swept;
            p.swept = p.swept.max(s);
            p.measured = p.measured.max(s);
        }
    }

    /// Whether this node has measured its pair with `peer` (any job), and
    /// whether with a full sweep of the pair's own.
    pub fn pair_known(&self, peer: u32) -> (bool, bool) {
        let p = self.pairs[peer as usize];
        (p.entry != Entry::None, p.entry == Entry::Swept)
    }

    /// Whether this node's full sweep standing for `class` is younger than
    /// the maximum age at `now_s`.
    pub fn class_fresh(&self, class: ClassId, now_s: f64) -> bool {
        self.age_s(self.class_swept[class as usize], now_s) < self.cfg.full_sweep_max_age_s
    }

    fn stamp(&self, t_s: f64) -> u32 {
        ((t_s - self.origin_s).max(0.0) as u64 + 1).min(u64::from(u32::MAX)) as u32
    }

    fn time_of(&self, stamp: u32) -> Option<f64> {
        (stamp != 0).then(|| self.origin_s + f64::from(stamp - 1))
    }

    fn age_s(&self, stamp: u32, now_s: f64) -> f64 {
        self.time_of(stamp).map_or(f64::INFINITY, |t| now_s - t)
    }

    /// What a re-check of the pair with `peer` is compared with.
    fn reference(&self, peer: u32, class: ClassId) -> Reference {
        if self.pairs[peer as usize].entry == Entry::Swept {
            Reference::Pair
        } else if self.class_swept[class as usize] != 0 {
            Reference::Class
        } else {
            Reference::Nothing
        }
    }

    /// The bytes a job must leave in the bucket (see [`Purpose`]).
    fn reserve(&self, costs: &CostTable, coverage: bool, job: Job) -> u64 {
        let full = costs.max_full_bytes();
        match job {
            Job::FullSweep(Purpose::Class | Purpose::Pair) if !coverage => 2 * full,
            _ => 0,
        }
    }

    /// Bytes a fan-out peer is charged: its share of the driver's cost.
    fn fanout_share(costs: &CostTable, peers: usize) -> u64 {
        costs.fanout.bytes / peers.max(1) as u64
    }

    /// Serve `session`'s partner (a session admitted early, across the
    /// round's edge, is kept).
    fn serve(&mut self, session: Session) -> Plan {
        if self.session.is_none() {
            self.session = Some(session);
        }
        Plan::Serve {
            partner: session.partner,
            until_s: session.until_s,
        }
    }

    /// The plan of a fan-out round.
    fn plan_fanout(&mut self, view: &View<'_>, slot: &Slot, now_s: f64, quiet: bool) -> Plan {
        let Some(part) = view.rounds.fanout(slot, self.me) else {
            return Plan::Idle(Idle::NoPartner);
        };
        if quiet {
            self.stats.quiet_rounds += 1;
            return Plan::Idle(Idle::Quiet);
        }
        let mut session = Session {
            fanout: true,
            ..Session::new(slot, part.driver, part.driver == self.me, 0, true)
        };
        if !session.drives {
            return self.serve(session);
        }
        let cost = view.costs.fanout;
        if cost.seconds > slot.end_s - now_s {
            return Plan::Idle(Idle::NoTime);
        }
        if !self.bucket.try_take(cost.bytes, 0, now_s) {
            self.stats.budget_skips += 1;
            return Plan::Idle(Idle::Budget);
        }
        session.job = Some(Job::Fanout);
        session.charged = cost.bytes;
        self.stats.drives += 1;
        self.session = Some(session);
        Plan::Fanout {
            chunk: part.chunk,
            until_s: slot.end_s,
        }
    }

    /// What this node does in `slot` (called once per round, at its start).
    pub fn plan(&mut self, view: &View<'_>, slot: &Slot, now_s: f64, quiet: bool) -> Plan {
        if self.planned == Some(slot.round) {
            return Plan::Idle(Idle::Planned);
        }
        self.planned = Some(slot.round);
        // A request admitted a moment before this node's own round began
        // (clocks differ by up to skew_s) keeps its session.
        self.session = self.session.filter(|s| s.round == slot.round && !s.drives);
        self.stats.rounds += 1;
        let cap = (self.cfg.burst_s * self.cfg.budget_bytes_per_s as f64)
            .max(3.0 * view.costs.max_full_bytes() as f64);
        self.bucket.set_capacity(cap);
        if matches!(slot.kind, RoundKind::Fanout { .. }) {
            return self.plan_fanout(view, slot, now_s, quiet);
        }
        let Some(p) = view.cycle.pairing(view.rounds, slot, self.me) else {
            return Plan::Idle(Idle::NoPartner);
        };
        if quiet {
            self.stats.quiet_rounds += 1;
            return Plan::Idle(Idle::Quiet);
        }
        let class = view.membership.class_of(self.me, p.partner);
        let intra = view.membership.is_intra(class);
        let mut session = Session {
            coverage: p.coverage,
            ..Session::new(slot, p.partner, p.drives, class, intra)
        };
        if !p.drives {
            return self.serve(session);
        }
        let pair = self.pairs[p.partner as usize];
        if pair.down_until > self.stamp(now_s) {
            self.stats.partner_down += 1;
            return Plan::Idle(Idle::PartnerDown);
        }
        // Only a pair's own sweep makes it not due. A re-check in place of
        // a deferred sweep (for the budget or the round's time) leaves the
        // pair due: against nothing its points validate nothing, and
        // against the class it vouches for the class entry, not for the
        // pair's own parameters. Its next meeting tries the sweep again
        // instead of waiting out `pair_recheck_s` (at scale a pair meets
        // less often than that anyway; in a small cluster this is what
        // gets the mesh swept).
        if !p.coverage
            && pair.entry == Entry::Swept
            && !pair.suspect
            && self.age_s(pair.measured, now_s) < self.cfg.pair_recheck_s
        {
            self.stats.not_due += 1;
            return Plan::Idle(Idle::NotDue);
        }
        let class_fresh = self.class_fresh(class, now_s);
        let pair_fresh = self.age_s(pair.swept, now_s) < self.cfg.full_sweep_max_age_s;
        let remaining_s = slot.end_s - now_s;
        if pair.suspect || !class_fresh || !pair_fresh {
            let job = Job::FullSweep(if pair.suspect {
                Purpose::Repair
            } else if !class_fresh {
                Purpose::Class
            } else {
                Purpose::Pair
            });
            let cost = view.costs.get(session.intra, JobKind::Full);
            let reserve = self.reserve(view.costs, p.coverage, job);
            let overdue = self.time_of(pair.swept).is_none() || pair.suspect;
            let fits = may_start(
                cost.seconds,
                remaining_s,
                slot.end_s - slot.start_s,
                overdue,
            );
            if fits && self.bucket.try_take(cost.bytes, reserve, now_s) {
                session.job = Some(job);
                session.charged = cost.bytes;
            } else {
                self.deferred(job);
            }
        }
        if session.job.is_none() {
            let reference = self.reference(p.partner, class);
            let cost = view.costs.get(session.intra, JobKind::Recheck);
            if cost.seconds > remaining_s {
                return Plan::Idle(Idle::NoTime);
            }
            if !self.bucket.try_take(cost.bytes, 0, now_s) {
                self.stats.budget_skips += 1;
                return Plan::Idle(Idle::Budget);
            }
            session.job = Some(Job::Recheck(reference));
            session.charged = cost.bytes;
        }
        self.stats.drives += 1;
        self.session = Some(session);
        Plan::Drive {
            partner: p.partner,
            job: session.job.unwrap_or(Job::Recheck(Reference::Nothing)),
            until_s: slot.end_s,
        }
    }

    /// A request from `requester` for `job` in the round of
    /// `slot` (the driver's round: a round is accepted up to `skew_s` past
    /// its edges). On success the job's estimate is charged; call
    /// [`NodeSchedule::served`] when it ends.
    pub fn admit(
        &mut self,
        view: &View<'_>,
        slot: &Slot,
        requester: u32,
        job: Job,
        now_s: f64,
        quiet: bool,
    ) -> Result<(), Decline> {
        let refuse = |stats: &mut NodeStats, d: Decline| {
            match d {
                Decline::Quiet => stats.refused_quiet += 1,
                Decline::Budget => stats.refused_budget += 1,
                Decline::Busy => stats.refused_busy += 1,
                Decline::NotExpected => stats.refused_other += 1,
            }
            Err(d)
        };
        if quiet {
            return refuse(&mut self.stats, Decline::Quiet);
        }
        let skew = self.cfg.skew_s;
        let in_time = now_s >= slot.start_s - skew && now_s <= slot.end_s + skew;
        if !in_time {
            return refuse(&mut self.stats, Decline::NotExpected);
        }
        if job == Job::Fanout || matches!(slot.kind, RoundKind::Fanout { .. }) {
            if let Some(s) = &self.session {
                if s.drives && s.job.is_some() {
                    return refuse(&mut self.stats, Decline::Busy);
                }
            }
            return self.admit_fanout(view, slot, requester, job, now_s);
        }
        let expected = view
            .cycle
            .pairing(view.rounds, slot, self.me)
            .filter(|p| p.partner == requester && !p.drives);
        let Some(p) = expected else {
            return refuse(&mut self.stats, Decline::NotExpected);
        };
        if let Some(s) = &self.session {
            if s.drives && s.job.is_some() {
                return refuse(&mut self.stats, Decline::Busy);
            }
        }
        let class = view.membership.class_of(self.me, requester);
        let intra = view.membership.is_intra(class);
        let cost = view.costs.get(intra, job.kind());
        let reserve = self.reserve(view.costs, p.coverage, job);
        if !self.bucket.try_take(cost.bytes, reserve, now_s) {
            return refuse(&mut self.stats, Decline::Budget);
        }
        self.admitted(Session {
            coverage: p.coverage,
            charged: cost.bytes,
            ..Session::new(slot, requester, false, class, intra)
        });
        Ok(())
    }

    /// A request was admitted as `new` describes: it joins the session of
    /// the same round and requester (its charge added), or starts one.
    fn admitted(&mut self, new: Session) {
        match &mut self.session {
            Some(s) if !s.drives && s.round == new.round && s.partner == new.partner => {
                s.charged += new.charged;
                if !s.admitted {
                    s.admitted = true;
                    self.stats.serves += 1;
                }
            }
            _ => {
                self.stats.serves += 1;
                self.session = Some(Session {
                    admitted: true,
                    ..new
                });
            }
        }
    }

    /// A fan-out request: from this member's chunk driver, in its fan-out
    /// round.
    fn admit_fanout(
        &mut self,
        view: &View<'_>,
        slot: &Slot,
        requester: u32,
        job: Job,
        now_s: f64,
    ) -> Result<(), Decline> {
        let part = view
            .rounds
            .fanout(slot, self.me)
            .filter(|p| job == Job::Fanout && p.driver == requester && requester != self.me);
        let Some(part) = part else {
            self.stats.refused_other += 1;
            return Err(Decline::NotExpected);
        };
        let peers = view.rounds.fanout_chunk(part.chunk).len().saturating_sub(1);
        let bytes = Self::fanout_share(view.costs, peers);
        if !self.bucket.try_take(bytes, 0, now_s) {
            self.stats.refused_budget += 1;
            return Err(Decline::Budget);
        }
        self.admitted(Session {
            fanout: true,
            charged: bytes,
            ..Session::new(slot, requester, false, 0, true)
        });
        Ok(())
    }

    /// An admitted job ended without word of its bytes (its driver's
    /// connection closed first): the estimate charged stands.
    pub fn served_as_charged(&mut self) {
        if let Some(s) = self.session.as_mut().filter(|s| !s.drives) {
            self.stats.bytes += s.charged;
            s.charged = 0;
        }
    }

    /// An admitted job ended having sent `bytes` (both directions), as its
    /// driver reports: counted up to [`MAX_OVERRUN`] times the charge, or
    /// [`UNCHARGED_MAX`] if more (a report beyond that is a broken or
    /// hostile driver's, and would empty this node's budget for good).
    pub fn served(&mut self, bytes: u64) {
        if let Some(s) = self.session.as_mut().filter(|s| !s.drives) {
            let bytes = bytes.min(s.charged.saturating_mul(MAX_OVERRUN).max(UNCHARGED_MAX));
            self.bucket.settle(s.charged, bytes);
            s.charged = 0;
            self.stats.bytes = self.stats.bytes.saturating_add(bytes);
        }
    }

    /// Take `bytes` more for the job this node drives now (a conflict
    /// probe after a round's fan-out), if the budget holds them; they are
    /// settled with the job's outcome.
    pub fn charge_more(&mut self, bytes: u64, now_s: f64) -> bool {
        let Some(s) = self
            .session
            .as_mut()
            .filter(|s| s.drives && s.job.is_some())
        else {
            return false;
        };
        if !self.bucket.try_take(bytes, 0, now_s) {
            return false;
        }
        s.charged += bytes;
        true
    }

    /// Bytes moved outside the rounds (the flows of an operator's stream
    /// order this node consented to): spent, as a job's are.
    pub fn spent_outside_rounds(&mut self, bytes: u64, now_s: f64) {
        self.bucket.level(now_s);
        self.settle(0, bytes);
    }

    /// How the job of [`Plan::Drive`] (or of the last step) ended. Returns
    /// the next job of the same session, already charged, when there is
    /// one: a confirming re-check after a disagreement, a full sweep after
    /// a confirmed one.
    pub fn record(&mut self, view: &View<'_>, outcome: Outcome, now_s: f64) -> Option<Job> {
        let s = self.session.filter(|s| s.drives)?;
        let job = s.job?;
        let now = self.stamp(now_s);
        let i = s.partner as usize;
        let mut next = None;
        if s.fanout {
            let bytes = match outcome {
                Outcome::FannedOut { bytes, peers } => {
                    self.stats.fanouts += u64::from(peers > 0);
                    bytes
                }
                Outcome::Swept { bytes }
                | Outcome::Rechecked { bytes, .. }
                | Outcome::Disturbed { bytes }
                | Outcome::Failed { bytes } => bytes,
                Outcome::Declined(_) | Outcome::Unreachable => 0,
            };
            self.settle(s.charged, bytes);
            if let Some(x) = self.session.as_mut() {
                x.job = None;
                x.charged = 0;
            }
            return None;
        }
        match outcome {
            Outcome::Declined(d) => {
                self.bucket.settle(s.charged, 0);
                match d {
                    Decline::Quiet => self.stats.partner_quiet += 1,
                    Decline::Budget => self.stats.partner_budget += 1,
                    Decline::Busy => self.stats.partner_busy += 1,
                    Decline::NotExpected => self.stats.partner_not_expected += 1,
                }
                // A partner that cannot pay for a class sweep may pay for a
                // re-check: the meeting is not lost.
                if d == Decline::Budget {
                    self.deferred(job);
                }
                if d == Decline::Budget
                    && matches!(job, Job::FullSweep(Purpose::Class | Purpose::Pair))
                {
                    let r = self.reference(s.partner, s.class);
                    next = self.charge_next(view, &s, Job::Recheck(r), now_s);
                }
            }
            Outcome::Unreachable | Outcome::Failed { .. } => {
                let bytes = match outcome {
                    Outcome::Failed { bytes } => bytes,
                    _ => 0,
                };
                self.settle(s.charged, bytes);
                if bytes > 0 {
                    self.stats.failed += 1;
                } else {
                    self.stats.unreachable += 1;
                }
                let failures = self.pairs[i].failures.saturating_add(1);
                let backoff = (self.cfg.backoff_min_s * 2f64.powi(i32::from(failures.min(30)) - 1))
                    .min(self.cfg.backoff_max_s);
                let down_until = self.stamp(now_s + backoff);
                let p = &mut self.pairs[i];
                p.failures = failures;
                p.down_until = down_until;
            }
            Outcome::Disturbed { bytes } => {
                self.settle(s.charged, bytes);
                self.stats.disturbed += 1;
            }
            Outcome::FannedOut { bytes, .. } => {
                // Not a job of a pair session: only its bytes count.
                self.settle(s.charged, bytes);
            }
            Outcome::Swept { bytes } => {
                self.settle(s.charged, bytes);
                self.stats.full_sweeps += 1;
                let p = &mut self.pairs[i];
                *p = PairState {
                    measured: now,
                    swept: now,
                    entry: Entry::Swept,
                    ..PairState::default()
                };
                if job == Job::FullSweep(Purpose::Class) {
                    self.class_swept[s.class as usize] = now;
                }
            }
            Outcome::Rechecked { agrees, bytes } => {
                self.settle(s.charged, bytes);
                self.stats.rechecks += 1;
                self.stats.recheck_bytes += bytes;
                let reference = match job {
                    Job::Recheck(r) | Job::Confirm(r) => r,
                    Job::FullSweep(_) | Job::Fanout => Reference::Nothing,
                };
                let p = &mut self.pairs[i];
                p.failures = 0;
                p.down_until = 0;
                if agrees || reference == Reference::Nothing {
                    p.measured = now;
                    p.suspect = false;
                    p.entry = p.entry.max(Entry::Points);
                } else if let Job::Recheck(r) = job {
                    self.stats.disagreements += 1;
                    next = self.charge_next(view, &s, Job::Confirm(r), now_s);
                } else {
                    // Two re-checks agree that the pair differs from its
                    // reference: its points are a measurement of the pair;
                    // the repair sweep (now, or first thing at the pair's
                    // next meeting) gives it its own parameters.
                    self.stats.confirmed_disagreements += 1;
                    p.suspect = true;
                    p.measured = now;
                    p.entry = p.entry.max(Entry::Points);
                    next = self.charge_next(view, &s, Job::FullSweep(Purpose::Repair), now_s);
                }
            }
        }
        let session = self.session.as_mut().filter(|x| x.drives)?;
        session.job = next.map(|(j, _)| j);
        session.charged = next.map_or(0, |(_, c)| c);
        next.map(|(j, _)| j)
    }

    /// A full sweep the budget could not pay.
    fn deferred(&mut self, job: Job) {
        match job {
            Job::FullSweep(Purpose::Class) => self.stats.class_sweeps_deferred += 1,
            Job::FullSweep(Purpose::Repair) => self.stats.repairs_deferred += 1,
            Job::FullSweep(Purpose::Pair) => self.stats.pair_sweeps_deferred += 1,
            Job::Recheck(_) | Job::Confirm(_) | Job::Fanout => {}
        }
    }

    fn settle(&mut self, charged: u64, bytes: u64) {
        self.bucket.settle(charged, bytes);
        self.stats.bytes = self.stats.bytes.saturating_add(bytes);
    }

    /// Charge a follow-up job if the budget and the round allow it.
    fn charge_next(
        &mut self,
        view: &View<'_>,
        s: &Session,
        job: Job,
        now_s: f64,
    ) -> Option<(Job, u64)> {
        let cost = view.costs.get(s.intra, job.kind());
        let reserve = self.reserve(view.costs, s.coverage, job);
        // The repair of a disagreement just confirmed is overdue as a
        // round's first sweep would be.
        let overdue = job == Job::FullSweep(Purpose::Repair);
        if !may_start(
            cost.seconds,
            s.until_s - now_s,
            view.rounds.round_s(),
            overdue,
        ) {
            return None;
        }
        if !self.bucket.try_take(cost.bytes, reserve, now_s) {
            self.deferred(job);
            return None;
        }
        Some((job, cost.bytes))
    }
}
