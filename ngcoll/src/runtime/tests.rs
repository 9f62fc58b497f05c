use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::fake::{Fake, World};

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
