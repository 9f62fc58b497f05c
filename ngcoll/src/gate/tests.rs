use std::sync::Arc;

use netgauge::select::{Algorithm, Collective};

use super::*;
use crate::config::{Force, Forced};
use crate::plan::{class_of, Plan, Slot};
use crate::runtime::{library_masks, CommState};

/// Bits of the classes an MPI `int` of bytes reaches (0..=61).
const INT_CLASSES: u64 = (1 << 62) - 1;

fn ours(alg: Algorithm) -> Slot {
    let mut s = Slot::library();
    s.alg = alg as u32;
    s
}

#[test]
fn masks_set_exactly_the_library_classes_within_an_int() {
    let mut plan = Plan::library();
    plan.set(Collective::Bcast, 5, ours(Algorithm::BcastBinomial));
    plan.set(Collective::Allreduce, 0, ours(Algorithm::AllreduceRing));
    let m = library_masks(&plan, &Force::None);
    assert_eq!(m[Collective::Bcast as usize], INT_CLASSES & !(1 << 5));
    assert_eq!(m[Collective::Allreduce as usize], INT_CLASSES & !1);
    assert_eq!(m[Collective::Barrier as usize], INT_CLASSES);
    // A choice per call: the full path decides every call.
    assert_eq!(library_masks(&plan, &Force::Cycle), [0; COLLECTIVES]);
    // A forced collective: the library everywhere, or nowhere.
    let fixed = Force::Fixed(vec![
        (Collective::Bcast, Forced::Library),
        (Collective::Barrier, Forced::Ours(Algorithm::BarrierTree, 0)),
    ]);
    let m = library_masks(&plan, &fixed);
    assert_eq!(m[Collective::Bcast as usize], INT_CLASSES);
    assert_eq!(m[Collective::Barrier as usize], 0);
    assert_eq!(m[Collective::Allreduce as usize], INT_CLASSES & !1);
}

#[test]
fn every_bit_agrees_with_the_full_paths_pick() {
    let mut plan = Plan::library();
    for (i, alg) in Algorithm::ALL.into_iter().enumerate() {
        for class in [i, 2 * i + 7, 40 + i] {
            plan.set(alg.collective(), class, ours(alg));
        }
    }
    // The library's other algorithms in some classes: not the library's
    // own either.
    for (coll, class) in [(Collective::Reduce, 3), (Collective::Bcast, 30)] {
        plan.force_alt_at(coll, class, 1);
    }
    let forces = [
        Force::None,
        Force::Fixed(vec![
            (Collective::Allreduce, Forced::Library),
            (Collective::Bcast, Forced::Ours(Algorithm::BcastChain, 4096)),
        ]),
        Force::Fixed(vec![(
            Collective::Reduce,
            Forced::LibraryAlg {
                number: 1,
                faninout: 0,
                segsize: 0,
            },
        )]),
    ];
    for force in forces {
        let st = CommState::for_plan(plan.clone(), force.clone());
        let masks = st.library_masks();
        for coll in Collective::ALL {
            for class in 0..CLASSES {
                let (lo, hi) = crate::plan::class_bounds(class);
                let bit = masks[coll as usize] >> class & 1 == 1;
                if hi > i32::MAX as u64 {
                    assert!(
                        !bit,
                        "{coll:?} class {class}: beyond an int, the full path's"
                    );
                    continue;
                }
                for bytes in [lo, hi] {
                    let library = !st.pick(coll, bytes).replaces_library();
                    assert_eq!(bit, library, "{force:?} {coll:?} {bytes} B");
                }
            }
        }
    }
}

/// The gate is one per process: one test walks it through its states.
#[test]
fn the_gate_passes_only_what_its_communicator_gives_to_the_library() {
    const A: Raw = 0xa000;
    const B: Raw = 0xb000;
    const FLOAT: Raw = 0x40;
    let bcast_bits = INT_CLASSES & !(1 << class_of(4 * 1000));
    let mut bits = [INT_CLASSES; COLLECTIVES];
    bits[Collective::Bcast as usize] = bcast_bits;
    bits[Collective::Barrier as usize] = 0;
    let st = Arc::new(CommState::for_gate(bits, true));

    // Off: everything passes, and nothing is opened.
    set(false, false);
    assert!(passes(Collective::Bcast, A, FLOAT, 10));
    // On under MPI_THREAD_MULTIPLE: the full path decides every call.
    set(true, false);
    remember_type(FLOAT, 4);
    open(A, &st);
    assert!(!passes(Collective::Bcast, A, FLOAT, 10));
    assert!(!passes_barrier(A));

    set(true, true);
    assert!(!passes(Collective::Bcast, A, FLOAT, 10), "nothing open yet");
    open(A, &st);
    assert!(!passes(Collective::Bcast, A, FLOAT, 10), "datatype unknown");
    remember_type(FLOAT, 4);
    assert!(passes(Collective::Bcast, A, FLOAT, 10));
    assert!(
        !passes(Collective::Bcast, A, FLOAT, 0),
        "a count of 0: the full path"
    );
    assert!(
        !passes(Collective::Bcast, A, 0, 10),
        "the handle 0 never matches an empty slot"
    );
    assert!(!passes(Collective::Bcast, A, FLOAT, 1000), "ours there");
    assert!(
        !passes(Collective::Bcast, B, FLOAT, 10),
        "another communicator"
    );
    assert!(!passes_barrier(A));
    assert!(passes(Collective::Alltoall, A, FLOAT, 1 << 20));
    // Counted in their class, as the full path's pick does; `holds` does not count.
    assert!(holds(Collective::Bcast, A, 40));
    assert_eq!(st.counted(Collective::Bcast, class_of(40)), 1);
    assert_eq!(st.counted(Collective::Bcast, 0), 0);
    assert_eq!(st.counted(Collective::Bcast, class_of(4000)), 0);
    assert_eq!(st.counted(Collective::Alltoall, class_of(4 << 20)), 1);

    // A fifth datatype takes the oldest slot.
    for (i, t) in [0x41, 0x42, 0x43, 0x44].into_iter().enumerate() {
        remember_type(t, i + 1);
    }
    assert!(!passes(Collective::Bcast, A, FLOAT, 10));
    assert!(passes(Collective::Bcast, A, 0x44, 10));
    remember_type(0x45, usize::MAX);
    assert_eq!(type_size(0x45), None, "a size beyond u32 is not held");
    assert_eq!(type_size(0x41), Some(1));

    // Another state's communicator freed: still open; this one's: shut.
    let other = CommState::for_gate(bits, false);
    forget(&other);
    assert!(passes(Collective::Bcast, A, 0x44, 10));
    forget(Arc::as_ptr(&st));
    assert!(!passes(Collective::Bcast, A, 0x44, 10));
    assert_eq!(Arc::strong_count(&st), 1, "the gate let its state go");

    // Finalize: shut for good.
    open(A, &st);
    assert!(passes(Collective::Bcast, A, 0x44, 10));
    close();
    assert!(!passes(Collective::Bcast, A, 0x44, 10));
    open(A, &st);
    assert!(!passes(Collective::Bcast, A, 0x44, 10));
    set(false, false);
}
