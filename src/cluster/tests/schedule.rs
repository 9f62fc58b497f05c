use crate::cluster::rounds::{CyclePlan, Membership, RoundKind, Rounds, Slot};
use crate::cluster::schedule::{
    Cost, CostTable, Decline, Idle, Job, JobCosts, NodeSchedule, Outcome, Plan, Purpose, Reference,
    ScheduleConfig, ScheduleError, TokenBucket, View, MAX_OVERRUN, UNCHARGED_MAX,
};

const MB: u64 = 1_000_000;
/// A re-check of a megabyte that agreed with its reference.
const AGREED: Outcome = Outcome::Rechecked {
    agrees: true,
    bytes: MB,
};
/// A re-check of a megabyte that disagreed with its reference.
const DISAGREED: Outcome = Outcome::Rechecked {
    agrees: false,
    bytes: MB,
};

fn costs() -> CostTable {
    CostTable::uniform(JobCosts {
        full: Cost {
            bytes: 100 * MB,
            seconds: 0.5,
        },
        recheck: Cost {
            bytes: MB,
            seconds: 0.25,
        },
    })
}

/// A small cluster and every node's schedule.
struct Cluster {
    m: Membership,
    r: Rounds,
    cfg: ScheduleConfig,
    costs: CostTable,
    nodes: Vec<NodeSchedule>,
}

impl Cluster {
    fn new(n: usize, cfg: ScheduleConfig) -> Cluster {
        let names: Vec<String> = (0..n).map(|i| format!("h{i:02}")).collect();
        let m = Membership::new(&names, |x| {
            Some(format!("g{}", x[1..].parse::<usize>().ok()? / 4))
        })
        .unwrap();
        let r = Rounds::new(&m, &cfg);
        let costs = costs();
        let nodes = names
            .iter()
            .map(|x| NodeSchedule::new(&m, x, &cfg, &costs, 0.0).unwrap())
            .collect();
        Cluster {
            m,
            r,
            cfg,
            costs,
            nodes,
        }
    }

    fn view<'a>(&'a self, plan: &'a CyclePlan) -> View<'a> {
        View {
            membership: &self.m,
            rounds: &self.r,
            cycle: plan,
            costs: &self.costs,
        }
    }

    /// Runs `f` with the view of `cycle` and every node's schedule.
    fn with_view<T>(&mut self, cycle: u64, f: impl FnOnce(&View, &mut [NodeSchedule]) -> T) -> T {
        let mut nodes = std::mem::take(&mut self.nodes);
        let plan = self.r.plan_cycle(&self.m, cycle);
        let out = f(&self.view(&plan), &mut nodes);
        self.nodes = nodes;
        out
    }

    /// The first mesh round at or after round `from` in which `a` meets `b`.
    fn meeting(&self, a: u32, b: u32, from: u64) -> (Slot, bool) {
        (from..from + 4 * self.r.cycle_rounds())
            .map(|k| self.r.slot(k))
            .find_map(|s| {
                let plan = self.r.plan_cycle(&self.m, s.cycle);
                let p = plan.pairing(&self.r, &s, a)?;
                (p.partner == b && matches!(s.kind, RoundKind::Mesh(_))).then_some((s, p.drives))
            })
            .expect("they meet every cycle")
    }

    /// The first mesh round from `from` in which `a` drives `b`.
    fn driving(&self, a: u32, b: u32, from: u64) -> Slot {
        let mut k = from;
        loop {
            let (s, drives) = self.meeting(a, b, k);
            if drives {
                return s;
            }
            k = s.round + 1;
        }
    }

    /// `a`'s plan in the first mesh round from `from` where `a` drives `b`.
    fn drive(&mut self, a: u32, b: u32, from: u64) -> (Slot, Plan) {
        let s = self.driving(a, b, from);
        let p = self.with_view(s.cycle, |v, n| n[a as usize].plan(v, &s, s.start_s, false));
        (s, p)
    }

    fn record(&mut self, a: u32, s: &Slot, o: Outcome, t: f64) -> Option<Job> {
        self.with_view(s.cycle, |v, n| n[a as usize].record(v, o, t))
    }
}

fn job_of(p: Plan) -> Job {
    match p {
        Plan::Drive { job, .. } => job,
        other => panic!("expected a drive, got {other:?}"),
    }
}

fn roomy() -> ScheduleConfig {
    ScheduleConfig {
        budget_bytes_per_s: 100 * MB,
        ..ScheduleConfig::default()
    }
}

/// A budget that pays a class sweep (with two full sweeps kept in the
/// bucket) once the bucket has filled, but not a pair sweep right after.
fn thrifty() -> ScheduleConfig {
    ScheduleConfig {
        budget_bytes_per_s: 200_000,
        ..ScheduleConfig::default()
    }
}

/// Eight nodes under `cfg`, and the first round from 100 in which h00
/// drives h01: the full sweep that stands for their class.
fn first_class_sweep(cfg: ScheduleConfig) -> (Cluster, Slot) {
    let mut c = Cluster::new(8, cfg);
    let (s, p) = c.drive(0, 1, 100);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Class));
    (c, s)
}

#[test]
fn a_class_is_swept_once_then_rechecked() {
    // h00 and h01, h02 share group g0. Once the bucket has filled, the
    // first pair of the class gets a full sweep standing for the class.
    let (mut c, s) = first_class_sweep(thrifty());
    assert_eq!(
        c.record(0, &s, Outcome::Swept { bytes: 90 * MB }, s.start_s + 1.0),
        None
    );
    assert!(c.nodes[0].class_swept_s(c.m.class_of(0, 1)).is_some());
    // Another pair of the class: the budget cannot spare a sweep of its
    // own yet, so a re-check against the class.
    let (_, p) = c.drive(0, 2, 100);
    assert_eq!(job_of(p), Job::Recheck(Reference::Class));
    assert_eq!(c.nodes[0].stats().pair_sweeps_deferred, 1);
    // The swept pair itself, an hour later: against its own sweep.
    let (_, p) = c.drive(0, 1, s.round + 400);
    assert_eq!(job_of(p), Job::Recheck(Reference::Pair));
    // Another class, once the bucket has filled again: a full sweep.
    let (_, p) = c.drive(0, 5, s.round + 400);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Class));
}

#[test]
fn a_measured_pair_is_not_due_before_its_interval() {
    let mut c = Cluster::new(4, roomy());
    let (s, p) = c.drive(0, 1, 100);
    let job = job_of(p);
    let o = match job {
        Job::FullSweep(_) => Outcome::Swept { bytes: MB },
        _ => AGREED,
    };
    c.record(0, &s, o, s.start_s + 1.0);
    // Four members meet every few rounds; the pair is not due for an hour.
    let (s2, p) = c.drive(0, 1, s.round + 1);
    assert!(s2.start_s - s.start_s < 3600.0);
    assert_eq!(p, Plan::Idle(Idle::NotDue));
    let (s3, p) = c.drive(0, 1, s.round + 361);
    assert!(s3.start_s - s.start_s >= 3600.0);
    assert!(matches!(p, Plan::Drive { .. }));
    assert_eq!(c.nodes[0].stats().not_due, 1);
}

#[test]
fn a_pair_rechecked_against_nothing_stays_due_for_its_sweep() {
    // A node's first meeting, before its bucket can pay the class sweep
    // and the two full sweeps it must leave: a cheap re-check instead,
    // with nothing to compare against.
    let mut c = Cluster::new(4, thrifty());
    let (s, p) = c.drive(0, 1, 0);
    assert_eq!(job_of(p), Job::Recheck(Reference::Nothing));
    c.record(0, &s, AGREED, s.start_s + 0.3);
    // Its points validate nothing: the pair's next meeting once the bucket
    // has filled (well within `pair_recheck_s`) sweeps it for the class,
    // rather than finding it not due for an hour.
    let (s2, p) = c.drive(0, 1, 100);
    assert!(s2.start_s - s.start_s < c.cfg.pair_recheck_s);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Class));
    assert_eq!(c.nodes[0].stats().not_due, 0);
}

#[test]
fn a_pair_only_validated_against_its_class_stays_due_for_its_own_sweep() {
    // The class is swept; another pair of it gets a re-check against the
    // class instead of its own sweep (the bucket cannot spare one yet).
    let (mut c, s) = first_class_sweep(thrifty());
    c.record(0, &s, Outcome::Swept { bytes: 90 * MB }, s.start_s + 1.0);
    let (s2, p) = c.drive(0, 2, 100);
    assert_eq!(job_of(p), Job::Recheck(Reference::Class));
    c.record(0, &s2, AGREED, s2.start_s + 0.3);
    // It agreed, but the pair has no sweep of its own: its next meeting
    // once the bucket can pay (within `pair_recheck_s`) sweeps it, rather
    // than finding it not due until the interval has passed.
    let (s3, p) = c.drive(0, 2, s2.round + 200);
    assert!(s3.start_s - s2.start_s < c.cfg.pair_recheck_s);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Pair));
    assert_eq!(c.nodes[0].stats().not_due, 0);
}

#[test]
fn a_budget_that_allows_it_sweeps_every_pair() {
    let (mut c, s) = first_class_sweep(roomy());
    c.record(0, &s, Outcome::Swept { bytes: 90 * MB }, s.start_s + 1.0);
    // The class is known; the pair has no sweep of its own: a pair sweep.
    let (s, p) = c.drive(0, 2, 100);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Pair));
    c.record(0, &s, Outcome::Swept { bytes: 90 * MB }, s.start_s + 1.0);
    assert_eq!(c.nodes[0].pair_known(2), (true, true));
    // Re-checked against it later, not swept again within the day.
    let (_, p) = c.drive(0, 2, s.round + 400);
    assert_eq!(job_of(p), Job::Recheck(Reference::Pair));
    // A day later its sweep is repeated.
    let (_, p) = c.drive(0, 2, s.round + 8700);
    assert!(matches!(job_of(p), Job::FullSweep(_)), "{p:?} after a day");
}

#[test]
fn a_confirmed_disagreement_gets_the_pair_its_own_sweep() {
    let (mut c, s) = first_class_sweep(thrifty());
    c.record(0, &s, Outcome::Swept { bytes: MB }, s.start_s + 1.0);
    let (s, p) = c.drive(0, 2, 100);
    assert_eq!(job_of(p), Job::Recheck(Reference::Class));
    let t = s.start_s + 0.3;
    let d = DISAGREED;
    assert_eq!(c.record(0, &s, d, t), Some(Job::Confirm(Reference::Class)));
    assert_eq!(
        c.record(0, &s, d, t + 0.3),
        Some(Job::FullSweep(Purpose::Repair))
    );
    let repair = Outcome::Swept { bytes: 100 * MB };
    assert_eq!(c.record(0, &s, repair, t + 1.0), None);
    let st = c.nodes[0].stats();
    assert_eq!((st.disagreements, st.confirmed_disagreements), (1, 1));
    // The re-check and its confirmation are the re-checks' bytes; the
    // repair sweep is not.
    assert_eq!((st.rechecks, st.recheck_bytes), (2, 2 * MB));
    assert_eq!(c.nodes[0].measured_s(2), Some((t + 1.0).floor()));
    // A disagreement the second re-check does not confirm is noise (once
    // the bucket holds a few re-checks again).
    let (s, p) = c.drive(0, 3, s.round + 20);
    assert_eq!(job_of(p), Job::Recheck(Reference::Class));
    assert_eq!(
        c.record(0, &s, d, s.start_s + 0.3),
        Some(Job::Confirm(Reference::Class))
    );
    let ok = AGREED;
    assert_eq!(c.record(0, &s, ok, s.start_s + 0.6), None);
    assert!(c.nodes[0].measured_s(3).is_some());
}

#[test]
fn failures_back_off_declines_do_not() {
    let cfg = ScheduleConfig {
        backoff_min_s: 500.0,
        ..roomy()
    };
    let mut c = Cluster::new(4, cfg);
    let (s, _) = c.drive(0, 1, 100);
    assert_eq!(c.record(0, &s, Outcome::Unreachable, s.start_s + 3.0), None);
    // Backing off 500 s: the meetings within that are skipped...
    let (s2, p) = c.drive(0, 1, s.round + 1);
    assert!(s2.start_s < s.start_s + 500.0);
    assert_eq!(p, Plan::Idle(Idle::PartnerDown));
    // ... and the peer is tried again after it, picked up when it answers.
    let (s3, p) = c.drive(0, 1, s.round + 51);
    assert!(matches!(p, Plan::Drive { .. }), "{p:?}");
    c.record(0, &s3, AGREED, s3.start_s + 1.0);
    assert!(c.nodes[0].measured_s(1).is_some());
    // A quiet partner declines: no backoff, no failure.
    let (s4, _) = c.drive(0, 2, 100);
    c.record(0, &s4, Outcome::Declined(Decline::Quiet), s4.start_s + 0.01);
    let (_, p) = c.drive(0, 2, s4.round + 1);
    assert!(matches!(p, Plan::Drive { .. }), "{p:?}");
    let st = c.nodes[0].stats();
    assert_eq!((st.unreachable, st.partner_quiet), (1, 1));
}

#[test]
fn a_partner_short_of_budget_still_gets_a_recheck() {
    let (mut c, s) = first_class_sweep(roomy());
    assert_eq!(
        c.record(0, &s, Outcome::Declined(Decline::Budget), s.start_s + 0.01),
        Some(Job::Recheck(Reference::Nothing))
    );
}

#[test]
fn responders_admit_only_their_partner_and_pay_too() {
    let tight = ScheduleConfig {
        budget_bytes_per_s: MB,
        burst_s: 10.0,
        ..ScheduleConfig::default()
    };
    let c = Cluster::new(8, tight);
    let (s, one_drives) = c.meeting(1, 0, 0);
    let (driver, server) = if one_drives { (1, 0) } else { (0, 1) };
    let other = (0..8).find(|&x| x != driver && x != server).unwrap();
    let plan = c.r.plan_cycle(&c.m, s.cycle);
    let view = c.view(&plan);
    let mut n = c.nodes[server as usize].clone();
    let now = s.start_s;
    let admit = |n: &mut NodeSchedule, from: u32, job: Job, t: f64, quiet: bool| {
        n.admit(&view, &s, from, job, t, quiet)
    };
    assert_eq!(
        admit(&mut n, driver, Job::Recheck(Reference::Nothing), now, true),
        Err(Decline::Quiet)
    );
    assert_eq!(
        admit(&mut n, other, Job::Recheck(Reference::Nothing), now, false),
        Err(Decline::NotExpected)
    );
    assert_eq!(
        admit(
            &mut n,
            driver,
            Job::Recheck(Reference::Nothing),
            s.end_s + 5.0,
            false
        ),
        Err(Decline::NotExpected),
        "the round is over"
    );
    // The bucket starts with one full sweep (100 MB) and gains 1 MB/s; a
    // class sweep outside a coverage round must leave two in it, a repair
    // may empty it.
    let before = n.budget_level(now);
    assert!(before < 300.0 * MB as f64, "{before}");
    assert_eq!(
        admit(&mut n, driver, Job::FullSweep(Purpose::Class), now, false),
        Err(Decline::Budget)
    );
    let fresh = n.clone();
    assert_eq!(
        admit(&mut n, driver, Job::FullSweep(Purpose::Repair), now, false),
        Ok(())
    );
    n.served(60 * MB);
    let left = n.budget_level(now);
    assert!((left - (before - 60.0 * MB as f64)).abs() < 1.0, "{left}");
    let st = n.stats();
    assert_eq!(
        (st.serves, st.bytes, st.refused_quiet, st.refused_budget),
        (1, 60 * MB, 1, 1)
    );
    // A driver that reports more bytes than a job can send (broken or
    // hostile) is counted MAX_OVERRUN times the charge at most (or
    // UNCHARGED_MAX): the level drops by that, not to −∞.
    let mut m = fresh;
    let bytes_before = m.stats().bytes;
    assert_eq!(
        admit(&mut m, driver, Job::FullSweep(Purpose::Repair), now, false),
        Ok(())
    );
    let charged = before - m.budget_level(now);
    assert!(charged > MB as f64, "{charged}");
    m.served(u64::MAX);
    let cap = (MAX_OVERRUN as f64 * charged).max(UNCHARGED_MAX as f64);
    let want = before - cap;
    assert!(
        (m.budget_level(now) - want).abs() < 1.0,
        "{}",
        m.budget_level(now)
    );
    let counted = (m.stats().bytes - bytes_before) as f64;
    assert!((counted - cap).abs() < 1.0, "{counted}");
}

#[test]
fn one_plan_per_round_and_quiet_nodes_sit_out() {
    let mut c = Cluster::new(4, roomy());
    let s = c.r.slot(100);
    let (first, second) = c.with_view(s.cycle, |view, n| {
        let first = n[0].plan(view, &s, s.start_s, true);
        (first, n[0].plan(view, &s, s.start_s + 1.0, false))
    });
    assert!(matches!(first, Plan::Idle(Idle::Quiet | Idle::NoPartner)));
    assert_eq!(second, Plan::Idle(Idle::Planned));
}

#[test]
fn a_job_that_does_not_fit_the_round_is_not_started() {
    let mut c = Cluster::new(4, roomy());
    let s = c.driving(0, 1, 100);
    let p = c.with_view(s.cycle, |view, n| n[0].plan(view, &s, s.end_s - 0.1, false));
    assert_eq!(p, Plan::Idle(Idle::NoTime));
}

/// Where a full sweep outlasts every round, a pair never swept still gets
/// one at the start of a round (and a swept pair a re-check).
#[test]
fn a_pair_never_swept_is_swept_even_when_sweeps_outlast_a_round() {
    let mut c = Cluster::new(4, roomy());
    let s = c.driving(0, 1, 100);
    let round_s = s.end_s - s.start_s;
    c.with_view(s.cycle, |view, n| {
        let mut costs = *view.costs;
        costs.intra.full.seconds = 30.0 * round_s;
        costs.inter.full.seconds = 30.0 * round_s;
        let view = View {
            costs: &costs,
            ..*view
        };
        let p = n[0].plan(&view, &s, s.start_s, false);
        assert!(
            matches!(
                p,
                Plan::Drive {
                    job: Job::FullSweep(_),
                    ..
                }
            ),
            "{p:?}"
        );
    });
}

/// A swept pair whose full sweeps now take 30 rounds, met again for a
/// re-check against its sweep: the cluster, that meeting's slot, and a
/// disagreeing re-check's outcome.
fn swept_pair_rechecked_where_sweeps_outlast_a_round() -> (Cluster, Slot, Outcome) {
    let (mut c, s) = first_class_sweep(ScheduleConfig {
        pair_recheck_s: 0.0,
        ..thrifty()
    });
    c.record(0, &s, Outcome::Swept { bytes: MB }, s.start_s + 1.0);
    let round_s = s.end_s - s.start_s;
    c.costs.intra.full.seconds = 30.0 * round_s;
    c.costs.inter.full.seconds = 30.0 * round_s;
    let (s, p) = c.drive(0, 1, s.round + 1);
    assert_eq!(job_of(p), Job::Recheck(Reference::Pair));
    let d = DISAGREED;
    (c, s, d)
}

/// Where a full sweep outlasts every round, a pair whose disagreement was
/// confirmed still gets its repair at the start of its next meeting:
/// otherwise every meeting would re-check, disagree and confirm for good.
#[test]
fn a_confirmed_disagreement_is_repaired_even_when_sweeps_outlast_a_round() {
    let (mut c, s, d) = swept_pair_rechecked_where_sweeps_outlast_a_round();
    let round_s = s.end_s - s.start_s;
    // Confirmed with less than half the round left: the repair waits.
    let t = s.start_s + 0.6 * round_s;
    assert_eq!(c.record(0, &s, d, t), Some(Job::Confirm(Reference::Pair)));
    assert_eq!(c.record(0, &s, d, t + 0.3), None);
    assert_eq!(c.nodes[0].stats().confirmed_disagreements, 1);
    // At the pair's next meeting with a bucket that pays it: the repair.
    let (_, p) = c.drive(0, 1, s.round + 5000);
    assert_eq!(job_of(p), Job::FullSweep(Purpose::Repair));
}

/// Where a full sweep outlasts every round, a disagreement confirmed with
/// half the round left is repaired in the same meeting, as a repair at a
/// round's start would be, not two cycles later at the pair's next
/// meeting in this direction.
#[test]
fn a_disagreement_confirmed_early_in_a_round_is_repaired_at_once_when_sweeps_outlast_a_round() {
    let (mut c, s, d) = swept_pair_rechecked_where_sweeps_outlast_a_round();
    let round_s = s.end_s - s.start_s;
    let t = s.start_s + 0.3;
    assert_eq!(c.record(0, &s, d, t), Some(Job::Confirm(Reference::Pair)));
    assert_eq!(
        c.record(0, &s, d, t + 0.3),
        Some(Job::FullSweep(Purpose::Repair))
    );
    assert_eq!(c.nodes[0].stats().confirmed_disagreements, 1);
    // The repair measured the pair: its next meeting re-checks again.
    c.record(
        0,
        &s,
        Outcome::Swept { bytes: MB },
        t + 0.3 + 30.0 * round_s,
    );
    assert_eq!(c.nodes[0].suspect_pairs(), 0);
    // A confirming re-check does not get the allowance: it fits or waits.
    let (s, p) = c.drive(0, 1, s.round + 5000);
    assert_eq!(job_of(p), Job::Recheck(Reference::Pair));
    c.costs.intra.recheck.seconds = 2.0 * round_s;
    c.costs.inter.recheck.seconds = 2.0 * round_s;
    assert_eq!(c.record(0, &s, d, s.start_s + 0.3), None);
}

#[test]
fn the_bucket_never_pays_an_estimate_on_credit() {
    // Every node plans every round and every job costs its estimate; over
    // 20 000 rounds no bucket may dip below zero, and the bytes through a
    // node stay within budget × time plus the initial full sweep.
    let cfg = ScheduleConfig {
        budget_bytes_per_s: 2 * MB,
        burst_s: 100.0,
        pair_recheck_s: 0.0,
        full_sweep_max_age_s: 600.0,
        ..ScheduleConfig::default()
    };
    let mut c = Cluster::new(12, cfg);
    let mut through = [0u64; 12];
    let (first, last) = (1000u64, 21_000u64);
    for k in first..last {
        let s = c.r.slot(k);
        c.with_view(s.cycle, |view, nodes| {
            let plans: Vec<Plan> = nodes
                .iter_mut()
                .map(|n| n.plan(view, &s, s.start_s, false))
                .collect();
            for (d, p) in plans.iter().enumerate() {
                let Plan::Drive {
                    partner, mut job, ..
                } = *p
                else {
                    continue;
                };
                let mut t = s.start_s;
                loop {
                    let o = match nodes[partner as usize].admit(view, &s, d as u32, job, t, false) {
                        Err(why) => Outcome::Declined(why),
                        Ok(()) => {
                            let cost = view.costs.get(true, job.kind());
                            t += cost.seconds;
                            nodes[partner as usize].served(cost.bytes);
                            through[d] += cost.bytes;
                            through[partner as usize] += cost.bytes;
                            match job {
                                Job::FullSweep(_) => Outcome::Swept { bytes: cost.bytes },
                                _ => Outcome::Rechecked {
                                    agrees: k % 3 != 0,
                                    bytes: cost.bytes,
                                },
                            }
                        }
                    };
                    match nodes[d].record(view, o, t) {
                        Some(j) => job = j,
                        None => break,
                    }
                }
            }
            for n in nodes.iter_mut() {
                assert!(n.budget_level(s.end_s) >= 0.0);
            }
        });
    }
    let span_s = (last - first) as f64 * c.cfg.round_s;
    for (i, b) in through.iter().enumerate() {
        let bound = 2.0 * MB as f64 * (span_s + 1000.0 * c.cfg.round_s) + 100.0 * MB as f64;
        assert!((*b as f64) <= bound, "node {i}: {b} B");
        assert!(*b > 0);
        assert_eq!(*b, c.nodes[i].stats().bytes);
    }
    let fulls: u64 = c.nodes.iter().map(|n| n.stats().full_sweeps).sum();
    assert!(fulls > 100, "the budget is used: {fulls} full sweeps");
}

#[test]
fn settings_are_checked() {
    let bad = |cfg: ScheduleConfig| cfg.validate().unwrap_err().to_string();
    let d = ScheduleConfig::default;
    assert!(bad(ScheduleConfig {
        round_s: 0.5,
        ..d()
    })
    .contains("at least 1 s"));
    assert!(bad(ScheduleConfig {
        budget_bytes_per_s: 0,
        ..d()
    })
    .contains("budget"));
    assert!(bad(ScheduleConfig { skew_s: 5.0, ..d() }).contains("skew"));
    assert!(bad(ScheduleConfig {
        backoff_max_s: 1.0,
        ..d()
    })
    .contains("backoff"));
    assert!(bad(ScheduleConfig {
        pair_recheck_s: f64::NAN,
        ..d()
    })
    .contains("finite"));
    let m = Membership::flat(&["a", "b"]).unwrap();
    assert_eq!(
        NodeSchedule::new(&m, "c", &d(), &costs(), 0.0).unwrap_err(),
        ScheduleError::NotAMember("c".into())
    );
    let cfg: ScheduleConfig = toml::from_str("round_s = 20.0\nseed = 7\n").unwrap();
    assert_eq!(
        (cfg.round_s, cfg.seed, cfg.coverage_pass_s),
        (20.0, 7, 600.0)
    );
    assert!(toml::from_str::<ScheduleConfig>("rounds = 1\n").is_err());
}

#[test]
fn token_bucket() {
    let mut b = TokenBucket::new(10.0, 100.0, 50.0, 0.0);
    assert!(!b.try_take(60, 0, 0.0));
    assert!(b.try_take(40, 10, 0.0));
    assert!(!b.try_take(1, 10, 0.0));
    assert_eq!(b.level(2.0), 30.0);
    b.settle(30, 50);
    assert_eq!(b.level(2.0), 10.0);
    assert_eq!(b.level(1000.0), 100.0, "capped at the capacity");
}

#[test]
fn the_owning_schedule_runs_a_pair_of_nodes() {
    use crate::cluster::schedule::Schedule;
    let cfg = ScheduleConfig {
        pair_recheck_s: 0.0,
        ..roomy()
    };
    let m = Membership::flat(&["a", "b"]).unwrap();
    let mut nodes = [
        Schedule::new(m.clone(), "a", &cfg, costs(), 1000.0).unwrap(),
        Schedule::new(m, "b", &cfg, costs(), 1000.0).unwrap(),
    ];
    let names = ["a", "b"];
    let mut t = 1000.0;
    let mut drives = [0, 0];
    for _ in 0..40 {
        // b's clock runs 0.5 s ahead of a's; a plans first, so when b
        // drives, a admits a request for a round it has not planned yet.
        let plans = [nodes[0].plan(t, false), nodes[1].plan(t + 0.5, false)];
        assert_eq!(plans[0].0.round, plans[1].0.round);
        for d in 0..2 {
            let (slot, Plan::Drive { mut job, .. }) = plans[d] else {
                continue;
            };
            drives[d] += 1;
            let p = 1 - d;
            assert!(matches!(plans[p].1, Plan::Serve { .. }), "{:?}", plans[p]);
            let mut now = t + 1.0;
            loop {
                let o = match nodes[p].admit(names[d], slot.round, job, now, false) {
                    Ok(()) => {
                        now += 0.3;
                        nodes[p].served(MB);
                        match job {
                            Job::FullSweep(_) => Outcome::Swept { bytes: MB },
                            _ => AGREED,
                        }
                    }
                    Err(d) => Outcome::Declined(d),
                };
                match nodes[d].record(o, now) {
                    Some(j) => job = j,
                    None => break,
                }
            }
        }
        t += cfg.round_s;
    }
    // Two members: a cycle is a coverage round and a mesh round, each
    // driven by one of them, alternating.
    assert_eq!(drives, [20, 20]);
    for n in &nodes {
        let st = n.node().stats();
        assert_eq!((st.drives, st.serves), (20, 20));
        assert_eq!(st.bytes, 40 * MB);
        assert_eq!(st.full_sweeps, 1, "the class once, then re-checks");
    }
    assert_eq!(
        nodes[0].admit("zz", 0, Job::Recheck(Reference::Nothing), t, false),
        Err(Decline::NotExpected)
    );
}

#[test]
fn a_repair_the_budget_cannot_pay_waits_for_the_next_meeting() {
    let (mut c, s) = first_class_sweep(roomy());
    // A node that starts at this very round holds one full sweep (100 MB)
    // and gains 1 MB/s: after two re-checks (1 MB each) it cannot pay the
    // repair.
    let slow = ScheduleConfig {
        budget_bytes_per_s: MB,
        ..c.cfg.clone()
    };
    let mut n = NodeSchedule::new(&c.m, "h00", &slow, &c.costs, s.start_s).unwrap();
    n.learn_class(c.m.class_of(0, 1), s.start_s);
    let plan = c.r.plan_cycle(&c.m, s.cycle);
    let view = c.view(&plan);
    let p = n.plan(&view, &s, s.start_s, false);
    assert_eq!(job_of(p), Job::Recheck(Reference::Class));
    let d = DISAGREED;
    let t = s.start_s + 0.3;
    assert_eq!(n.record(&view, d, t), Some(Job::Confirm(Reference::Class)));
    assert_eq!(n.record(&view, d, t + 0.3), None);
    assert_eq!(n.stats().repairs_deferred, 1);
    // The confirmed disagreement measured the pair; its repair is pending.
    assert_eq!(n.suspect_pairs(), 1);
    assert_eq!(n.measured_s(1), Some((t + 0.3).floor()));
    // At the pair's next meeting the repair comes first.
    c.nodes[0] = n;
    let (s2, p2) = c.drive(0, 1, s.round + 1);
    assert!(s2.start_s > s.start_s);
    assert_eq!(job_of(p2), Job::FullSweep(Purpose::Repair));
}

#[test]
fn a_fanout_round_has_one_driver_per_chunk_and_its_peers_serve() {
    let cfg = ScheduleConfig {
        fanout_interval_s: 100.0,
        ..roomy()
    };
    // One switch group of four: one chunk.
    let mut c = Cluster::new(4, cfg);
    c.costs.fanout = Cost {
        bytes: 30_000,
        seconds: 1.0,
    };
    let s = c.r.slot(109);
    assert!(matches!(s.kind, RoundKind::Fanout { .. }));
    let driver = c.r.fanout(&s, 0).unwrap().driver;
    let quiet_one = (0..4u32).find(|&x| x != driver).unwrap();
    let plan = c.r.plan_cycle(&c.m, s.cycle);
    let costs = c.costs;
    let view = View {
        membership: &c.m,
        rounds: &c.r,
        cycle: &plan,
        costs: &costs,
    };
    for x in 0..4u32 {
        let p = c.nodes[x as usize].plan(&view, &s, s.start_s, x == quiet_one);
        match p {
            Plan::Fanout { .. } => assert_eq!(x, driver),
            Plan::Serve { partner, .. } => assert_eq!(partner, driver),
            Plan::Idle(Idle::Quiet) => assert_eq!(x, quiet_one),
            other => panic!("member {x}: {other:?}"),
        }
    }
    // The chunk's members admit the driver's fan-out, and nothing else.
    let t = s.start_s + 0.1;
    for x in (0..4u32).filter(|&x| x != driver) {
        let quiet = x == quiet_one;
        let got = c.nodes[x as usize].admit(&view, &s, driver, Job::Fanout, t, quiet);
        assert_eq!(got, if quiet { Err(Decline::Quiet) } else { Ok(()) });
        let other = (0..4).find(|&y| y != driver && y != x).unwrap();
        assert_eq!(
            c.nodes[x as usize].admit(&view, &s, other, Job::Fanout, t, false),
            Err(Decline::NotExpected)
        );
    }
    let d = driver as usize;
    let out = Outcome::FannedOut {
        peers: 2,
        bytes: 20_000,
    };
    assert_eq!(c.nodes[d].record(&view, out, t + 1.0), None);
    assert_eq!(c.nodes[d].stats().fanouts, 1);
}
