//! The trial's order of calls and its verdict, over the in-process MPI.

use super::*;
use crate::fake;
use crate::plan::Slot;
use netgauge::select::Algorithm;

#[test]
fn each_side_gets_its_timed_calls_in_turn() {
    for calls in 1..=MAX_CALLS {
        let t = Trial::new(calls);
        assert_eq!(t.next(), Side::Ours(None));
        assert_eq!(t.next(), Side::Library(None));
        let sides: Vec<Side> = (0..2 * calls).map(|_| t.next()).collect();
        let mut ours: Vec<usize> = Vec::new();
        let mut lib: Vec<usize> = Vec::new();
        for s in &sides {
            match *s {
                Side::Ours(Some(k)) => ours.push(k),
                Side::Library(Some(k)) => lib.push(k),
                other => panic!("an untimed call inside the trial: {other:?}"),
            }
        }
        let want: Vec<usize> = (0..calls).collect();
        assert_eq!(ours, want, "calls = {calls}");
        assert_eq!(lib, want, "calls = {calls}");
        // A B B A: no side runs three times in a row.
        assert!(sides
            .windows(3)
            .all(|w| !(w[0].ours() == w[1].ours() && w[1].ours() == w[2].ours())));
        // Undecided until recorded: the calls after it are counted and untimed.
        assert_eq!(t.outcome(), None);
    }
    // No trials: the plan's choice, untimed, every call.
    let off = Trial::new(0);
    assert!((0..20).all(|_| off.next() == Side::Ours(None)));
}

/// Runs a whole trial of `calls` per side on `p` ranks of the in-process
/// MPI; `ns(rank, ours, k)` is the time of a rank's k-th timed call. Returns
/// every rank's outcome and its next call's side after the trial.
fn trial_on(
    p: usize,
    calls: usize,
    ns: fn(usize, bool, usize) -> f64,
) -> Vec<(Option<Outcome>, Side)> {
    fake::run(p, move |m| {
        let t = Trial::new(calls);
        for _ in 0..2 * calls + 2 {
            let side = t.next();
            let time = match side {
                Side::Ours(Some(k)) => ns(m.rank, true, k),
                Side::Library(Some(k)) => ns(m.rank, false, k),
                _ => continue,
            };
            t.record(m, Some(1), side, time);
        }
        (t.outcome(), t.next())
    })
}

fn outcome(kept_ours: bool, ours_ns: u32, library_ns: u32) -> Outcome {
    Outcome {
        kept_ours,
        ours_ns,
        library_ns,
        rounds: 1,
    }
}

#[test]
fn the_ranks_mean_time_decides_and_every_rank_agrees() {
    // Ours is faster on three ranks of four but keeps the fourth ten times
    // longer: the ranks' summed medians (1300 against 1200 µs) keep the
    // library's own, on every rank.
    let r = trial_on(4, 4, |rank, ours, _| match (ours, rank) {
        (true, 3) => 1000e3,
        (true, _) => 100e3,
        (false, _) => 300e3,
    });
    for (got, next) in &r {
        assert_eq!(*got, Some(outcome(false, 1_300_000, 1_200_000)));
        assert_eq!(*next, Side::Library(None));
    }
    // Ours faster everywhere: kept.
    let r = trial_on(3, 4, |_, ours, _| if ours { 50e3 } else { 80e3 });
    for (got, next) in &r {
        assert_eq!(*got, Some(outcome(true, 150_000, 240_000)));
        assert_eq!(*next, Side::Ours(None));
    }
}

#[test]
fn one_disturbed_call_per_rank_does_not_decide() {
    // Every rank's last call of ours was descheduled (20 ms): the medians
    // (mean of the middle two of four) pass over it and ours is kept.
    let r = trial_on(4, 4, |_, ours, k| match (ours, k) {
        (true, 3) => 20e6,
        (true, _) => 40e3,
        (false, _) => 60e3,
    });
    for (got, _) in &r {
        assert_eq!(*got, Some(outcome(true, 160_000, 240_000)));
    }
}

#[test]
fn a_failed_allreduce_keeps_the_library_own() {
    // No shadow communicator to agree on: the library's own (as every rank
    // would decide), never a verdict some ranks could take differently.
    let t = Trial::new(1);
    t.next();
    t.next();
    let a = t.next();
    let b = t.next();
    let m = fake::Fake::new(Default::default(), 0, 1);
    t.record(&m, None, a, 1.0);
    t.record(&m, None, b, 1e9);
    assert_eq!(t.outcome().map(|o| o.kept_ours), Some(false));
    assert_eq!(t.next(), Side::Library(None));
}

#[test]
fn only_the_classes_where_ours_was_chosen_have_a_trial() {
    let mut plan = Plan::library();
    let ours = |a: Algorithm| Slot {
        alg: a as u32,
        ..Slot::library()
    };
    plan.set(Collective::Allreduce, 7, ours(Algorithm::AllreduceRing));
    plan.set(Collective::Bcast, 20, ours(Algorithm::BcastChain));
    let t = Trials::new(&plan, 4);
    assert!(t.get(Collective::Allreduce, 7).is_some());
    assert!(t.get(Collective::Bcast, 20).is_some());
    let with: usize = Collective::ALL
        .iter()
        .map(|&c| (0..CLASSES).filter(|&k| t.get(c, k).is_some()).count())
        .sum();
    assert_eq!(with, 2);
    // Two trials of their own: one's calls do not count in the other.
    t.get(Collective::Allreduce, 7).unwrap().next();
    assert_eq!(
        t.get(Collective::Bcast, 20).unwrap().next(),
        Side::Ours(None)
    );
    assert_eq!(
        t.get(Collective::Allreduce, 7).unwrap().next(),
        Side::Library(None)
    );
    // NETGAUGE_COLL_TRIAL=0: none.
    let off = Trials::new(&plan, 0);
    assert!(off.get(Collective::Allreduce, 7).is_none());
}

#[test]
fn a_tie_keeps_the_library_own() {
    let r = trial_on(2, 2, |_, _, _| 70e3);
    for (got, next) in &r {
        assert_eq!(*got, Some(outcome(false, 140_000, 140_000)));
        assert_eq!(*next, Side::Library(None));
    }
}

/// Runs the timed calls of one trial on a single rank (its calls' times by
/// side), returning the sides of the calls it ran.
fn one_trial(m: &fake::Fake, t: &Trial, calls: usize, ours_ns: f64, lib_ns: f64) -> Vec<Side> {
    (0..2 * calls)
        .map(|_| {
            let side = t.next();
            let ns = if side.ours() { ours_ns } else { lib_ns };
            t.record(m, Some(1), side, ns);
            side
        })
        .collect()
}

#[test]
fn a_verdict_is_tried_again_after_growing_intervals() {
    let m = fake::Fake::new(Default::default(), 0, 1);
    let t = Trial::new(2);
    t.next();
    t.next();
    one_trial(&m, &t, 2, 50e3, 80e3);
    assert_eq!(
        t.outcome().map(|o| (o.kept_ours, o.rounds)),
        Some((true, 1))
    );
    // The verdict holds for RECHECK_FIRST calls, untimed.
    for _ in 0..RECHECK_FIRST {
        assert_eq!(t.next(), Side::Ours(None));
    }
    // Then a re-trial, without untimed calls, which the library wins now:
    // the class goes to it, and the last outcome is kept meanwhile.
    let sides = one_trial(&m, &t, 2, 90e3, 80e3);
    assert!(sides.iter().all(|s| s.is_timed()), "{sides:?}");
    assert_eq!(
        t.outcome().map(|o| (o.kept_ours, o.rounds)),
        Some((false, 2))
    );
    // The next interval is four times longer.
    for _ in 0..4 * RECHECK_FIRST {
        assert_eq!(t.next(), Side::Library(None));
    }
    assert!(t.next().is_timed());
    assert_eq!(t.outcome().map(|o| o.rounds), Some(2));
}

#[test]
fn every_rank_tries_again_in_the_same_call() {
    // Ours faster on every rank at first, slower in the re-trial: every
    // rank reopens in the same call and takes the same second verdict.
    let r = fake::run(3, |m| {
        let t = Trial::new(1);
        t.next();
        t.next();
        one_trial(m, &t, 1, 10e3, 20e3);
        let mut untimed = 0;
        while !t.next().is_timed() {
            untimed += 1;
        }
        // That timed call was ours' (A first): record it, then the library's.
        t.record(m, Some(1), Side::Ours(Some(0)), 30e3);
        let lib = t.next();
        t.record(m, Some(1), lib, 20e3);
        (
            untimed,
            t.outcome().map(|o| (o.kept_ours, o.rounds)),
            t.next(),
        )
    });
    for got in &r {
        assert_eq!(*got, (RECHECK_FIRST, Some((false, 2)), Side::Library(None)));
    }
}
