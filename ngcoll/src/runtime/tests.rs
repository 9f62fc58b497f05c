use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::fake::{Fake, World};
use comm_setup::{receive_plan, Offer};

const SHADOW: Raw = 77;
const COMM: Raw = 5;

/// A communicator of 2 ranks whose plan runs Open MPI's linear reduce
/// for every reduce.
fn state() -> CommState {
    let mut plan = Plan::library();
    plan.force_alts(&[Alt::forced(Collective::Reduce, 2, 1, 0, 0)]);
    let mut st = CommState::passthrough(0, 2, 0);
    st.shadow = Some(SHADOW);
    st.closed = AtomicBool::new(false);
    st.alt_comms = plan
        .alts()
        .iter()
        .map(|_| AtomicUsize::new(ALT_NOT_MADE))
        .collect();
    st.plan = Arc::new(plan);
    st
}

#[test]
fn an_alternatives_duplicate_is_made_once_at_its_first_call_and_freed_with_the_shadow() {
    let mut m = Fake::new(Arc::new(World::default()), 0, 2);
    m.forced_ok = true;
    let st = state();
    let slot = st.pick(Collective::Reduce, 64);
    assert_eq!(st.alt_made(0), None);
    // Not an alternative: none.
    assert_eq!(st.alt_comm(&m, &st.pick(Collective::Bcast, 64), COMM), None);
    assert_eq!(m.dups.load(Relaxed), 0);
    let c = st.alt_comm(&m, &slot, COMM).unwrap();
    assert!(c != COMM && c != SHADOW, "{c}");
    assert_eq!(st.alt_made(0), Some(true));
    // Every later call of any size of the collective: the same one.
    assert_eq!(
        st.alt_comm(&m, &st.pick(Collective::Reduce, 1 << 20), COMM),
        Some(c)
    );
    assert_eq!(m.dups.load(Relaxed), 1);
    st.free_alt_comms(&m, false);
    st.free_alt_comms(&m, true);
    assert_eq!(m.frees.load(Relaxed), 1, "freed once");
    // Freed: still reported made, and a call goes to the program's
    // communicator (the library's own).
    assert_eq!(st.alt_made(0), Some(true));
    assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
    assert_eq!(m.dups.load(Relaxed), 1);
}

#[test]
fn a_duplicate_whose_algorithm_could_not_be_forced_is_let_go_for_good() {
    let m = Fake::new(Arc::new(World::default()), 0, 2);
    let st = state();
    let slot = st.pick(Collective::Reduce, 64);
    // The variables were not written: the duplicate is made (every rank
    // takes part), let go, and the call is the library's own.
    assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
    assert_eq!((m.dups.load(Relaxed), m.frees.load(Relaxed)), (1, 1));
    assert_eq!(st.alt_made(0), Some(false));
    // Not tried again.
    assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
    assert_eq!(m.dups.load(Relaxed), 1);
    st.free_alt_comms(&m, false);
    assert_eq!(m.frees.load(Relaxed), 1);
}

#[test]
fn an_alternative_never_needed_is_logged_so_and_none_is_made_after_the_shadow_closed() {
    let mut m = Fake::new(Arc::new(World::default()), 0, 2);
    m.forced_ok = true;
    let st = state();
    st.free_alt_comms(&m, false);
    assert_eq!(st.alt_made(0), None);
    st.closed.store(true, Relaxed);
    let slot = st.pick(Collective::Reduce, 64);
    assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
    assert_eq!((m.dups.load(Relaxed), st.alt_made(0)), (0, None));
}

/// The inputs of a plan for `ranks` ranks on the reference network.
fn inputs(ranks: usize) -> Inputs {
    Inputs {
        setup: Setup {
            lib: Library::OpenMpi41,
            ranks,
            one_node: true,
            view: ViewOptions::default(),
            margin: 0.1,
            max_bytes: 1 << 16,
            library_algorithms: true,
        },
        pair: vec![plan::reference_shared_memory()],
        exchange: Vec::new(),
        contention: None,
    }
}

fn key(ranks: usize) -> PlanKey {
    PlanKey {
        ranks,
        one_node: true,
        peer: "n1".into(),
        cores: 0,
    }
}

/// What each of `p` fake ranks received (its plan's bytes, its source,
/// whether it is to cache it), rank 0 offering `offer()`.
fn received(
    p: usize,
    offer: impl Fn() -> Offer + Send + Sync + 'static,
) -> Vec<(Option<Vec<u8>>, String, bool)> {
    received_failing(p, None, offer)
}

/// As [`received`], with broadcast `fail.1` of rank `fail.0` failing.
fn received_failing(
    p: usize,
    fail: Option<(usize, usize)>,
    offer: impl Fn() -> Offer + Send + Sync + 'static,
) -> Vec<(Option<Vec<u8>>, String, bool)> {
    crate::fake::run(p, move |m| {
        if let Some((_, k)) = fail.filter(|f| f.0 == m.rank) {
            m.fail_bcast.store(k, Relaxed);
        }
        let r = receive_plan(m, COMM, m.rank, p, (m.rank == 0).then(&offer));
        (r.plan.map(|p| p.encode()), r.source, r.built.is_some())
    })
}

#[test]
fn every_rank_takes_the_plan_rank_0_offers_whole_or_decided_in_shares() {
    let whole = plan::build(&inputs(4).network(), &inputs(4).setup).unwrap();
    assert!(!whole.alts().is_empty(), "a plan without alternatives");
    // Decided in shares by the four ranks: every rank holds the plan one
    // process builds, bit for bit; rank 0 says so and caches it.
    let got = received(4, || Offer::Shared {
        inputs: Box::new(inputs(4)),
        key: key(4),
        source: "n1/mpi".into(),
    });
    for (r, (plan, source, built)) in got.iter().enumerate() {
        assert_eq!(plan.as_deref(), Some(&whole.encode()[..]), "rank {r}");
        assert_eq!(*built, r == 0, "rank {r}");
        let want = if r == 0 {
            "n1/mpi, decided by 4 ranks"
        } else {
            ""
        };
        assert_eq!(source, want, "rank {r}");
    }
    // Sent whole (a cached plan).
    let cached = Arc::new(whole.clone());
    let got = received(3, move || {
        Offer::Whole(cached.clone(), "n1/mpi (cached plan)".into())
    });
    for (r, (plan, _, built)) in got.iter().enumerate() {
        assert_eq!(plan.as_deref(), Some(&whole.encode()[..]), "rank {r}");
        assert!(!built);
    }
}

#[test]
fn inputs_for_another_communicator_size_leave_every_rank_without_a_plan() {
    // Rank 0 sized the shares for 3 ranks' plan while the communicator
    // has 4: every rank still makes every call (no hang) and none has a
    // plan (the allreduce after it then gives each the library's own).
    let got = received(4, || Offer::Shared {
        inputs: Box::new(inputs(3)),
        key: key(4),
        source: "n1/mpi".into(),
    });
    for (r, (plan, ..)) in got.iter().enumerate() {
        assert!(plan.is_none(), "rank {r}");
    }
}

#[test]
fn a_broadcast_failing_on_one_rank_never_leaves_the_ranks_in_different_calls() {
    let shared = || Offer::Shared {
        inputs: Box::new(inputs(4)),
        key: key(4),
        source: "n1/mpi".into(),
    };
    // The header lost on rank 2: every rank agrees it is missing and stops
    // there (a rank making other calls than its peers would hang the
    // fake's waits, which fail the test after 20 s).
    for (r, (plan, ..)) in received_failing(4, Some((2, 0)), shared).iter().enumerate() {
        assert!(plan.is_none(), "header lost: rank {r}");
    }
    // The inputs lost on rank 1: it gathers a failed share, and no rank
    // assembles a plan.
    for (r, (plan, ..)) in received_failing(4, Some((1, 1)), shared).iter().enumerate() {
        assert!(plan.is_none(), "inputs lost: rank {r}");
    }
    // A whole plan lost on rank 1: rank 1 alone has none (the allreduce
    // after it turns every rank to the library's own).
    let whole = Arc::new(plan::build(&inputs(4).network(), &inputs(4).setup).unwrap());
    let got = received_failing(4, Some((1, 1)), move || {
        Offer::Whole(whole.clone(), "cached".into())
    });
    for (r, (plan, ..)) in got.iter().enumerate() {
        assert_eq!(plan.is_none(), r == 1, "plan lost on rank 1: rank {r}");
    }
}

#[test]
fn the_plan_cache_keeps_the_latest_shapes() {
    let mut cache = Vec::new();
    for ranks in 2..2 + MAX_CACHED_PLANS + 10 {
        cache_plan(
            &mut cache,
            (key(ranks), Arc::new(Plan::library()), String::new()),
        );
    }
    assert_eq!(cache.len(), MAX_CACHED_PLANS);
    // The oldest went first: the first shapes are gone, the last are kept.
    assert!(cache.iter().all(|(k, ..)| k.ranks >= 12));
    assert_eq!(cache.last().unwrap().0, key(1 + MAX_CACHED_PLANS + 10));
}

#[test]
fn inputs_above_the_plans_largest_size_leave_every_rank_without_a_plan() {
    // Rank 0 always sends PLAN_MAX_BYTES; more (a chain's segments grow
    // with the size) is refused by every rank alike.
    let got = received(3, || {
        let mut i = inputs(3);
        i.setup.max_bytes = PLAN_MAX_BYTES + 1;
        Offer::Shared {
            inputs: Box::new(i),
            key: key(3),
            source: "n1/mpi".into(),
        }
    });
    for (r, (plan, ..)) in got.iter().enumerate() {
        assert!(plan.is_none(), "rank {r}");
    }
}
