use super::*;
use netgauge::select::ompi_rule_algorithms;

#[test]
fn classes_cover_every_size_once() {
    assert_eq!(class_of(0), 0);
    assert_eq!(class_of(1), 1);
    let mut prev = 0;
    for c in 1..CLASSES {
        let (lo, hi) = class_bounds(c);
        assert!(lo <= hi, "{c}");
        assert_eq!(class_of(lo), c, "lo of {c}");
        assert_eq!(class_of(hi), c, "hi of {c}");
        if c > 1 {
            assert_eq!(lo, prev + 1, "{c} starts after {prev}");
        }
        prev = hi;
        let m = class_size(c);
        assert!(lo <= m && m <= hi, "{c}: {m} in [{lo}, {hi}]");
    }
    assert_eq!(class_of(u64::MAX), CLASSES - 1);
    assert_eq!(class_of(3 << 20), class_of((3 << 20) + 1));
    assert_ne!(class_of(4 << 20), class_of((4 << 20) - 1));
}

/// A plan's set-up for 4 ranks on one node sharing 2 cores.
pub(crate) fn setup(lib: Library, library_algorithms: bool) -> Setup {
    Setup {
        lib,
        ranks: 4,
        one_node: true,
        view: ViewOptions {
            gamma_ns_per_byte: 0.1,
            cores: 2,
            spin_slice_ns: 3e6,
            fresh_ns_per_byte: 0.4,
            ours_run_by: None,
            path_ns: 0.0,
        },
        margin: 0.1,
        max_bytes: 1 << 20,
        library_algorithms,
    }
}

#[test]
fn the_library_s_other_algorithms_are_chosen_only_where_it_takes_them() {
    let net = reference_shared_memory();
    let with = build(&net, &setup(Library::OpenMpi41, true)).unwrap();
    let without = build(&net, &setup(Library::OpenMpi41, false)).unwrap();
    let mpich = build(&net, &setup(Library::Mpich40, true)).unwrap();
    assert!(without.alts().is_empty() && mpich.alts().is_empty());
    assert!(!with.alts().is_empty(), "no alternative chosen: {with:?}");
    assert!(with.alts().len() <= MAX_ALTS);
    let mut named = 0;
    for coll in Collective::ALL {
        for c in 0..CLASSES {
            let s = with.slot(coll, c);
            let Some(k) = s.alt() else {
                // Elsewhere the same decision as without them.
                let w = without.slot(coll, c);
                if s.algorithm().is_some() {
                    assert_eq!(s.alg, w.alg, "{coll:?} class {c}");
                }
                continue;
            };
            named += 1;
            let alt = with.alts()[k];
            assert_eq!(alt.coll, coll);
            // One of the algorithms a rules file can name, at this size.
            let m = if coll == Collective::Barrier {
                0
            } else {
                class_size(c)
            };
            assert!(
                ompi_rule_algorithms(coll, 4, m)
                    .iter()
                    .any(|r| Alt::of(coll, r) == alt),
                "{coll:?} class {c}: {alt:?}"
            );
            // Priced below the library's own choice in both views the
            // slot keeps.
            assert!(s.ours_b2b_ns <= s.lib_b2b_ns * 1.05, "{coll:?} {c}: {s:?}");
            assert!(
                s.ours_sync_ns <= s.lib_sync_ns * 1.05,
                "{coll:?} {c}: {s:?}"
            );
            // Where ours was chosen without them, the alternative stands
            // better than ours by the same judge.
            let w = without.slot(coll, c);
            if w.algorithm().is_some() {
                assert!(s.ours_b2b_ns <= w.ours_b2b_ns || s.ours_sync_ns <= w.ours_sync_ns);
            }
        }
    }
    assert!(named > 0);
    // Every entry of the table is used by some slot.
    for k in 0..with.alts().len() {
        assert!(Collective::ALL
            .iter()
            .any(|&c| (0..CLASSES).any(|i| with.slot(c, i).alt() == Some(k))));
    }
}

#[test]
fn a_choice_must_gain_more_than_libngcolls_own_path_in_every_view() {
    let net = reference_shared_memory();
    let plan = |path_ns: f64| {
        let mut s = setup(Library::OpenMpi41, true);
        s.view.path_ns = path_ns;
        build(&net, &s).unwrap()
    };
    let replaced = |p: &Plan| -> Vec<(Collective, usize)> {
        Collective::ALL
            .iter()
            .flat_map(|&c| (0..CLASSES).map(move |i| (c, i)))
            .filter(|&(c, i)| p.slot(c, i).replaces_library())
            .collect()
    };
    let (free, costly) = (plan(0.0), plan(PATH_NS));
    let (all, fewer) = (replaced(&free), replaced(&costly));
    // The path only ever makes a candidate dearer: what it still
    // replaces, the free plan replaced too, and some small classes
    // (a tie back to back) go back to the library's own.
    assert!(fewer.iter().all(|x| all.contains(x)), "{fewer:?} ⊄ {all:?}");
    assert!(fewer.len() < all.len(), "{} vs {}", fewer.len(), all.len());
    let mut same = 0;
    for &(c, i) in &fewer {
        let (s, f) = (costly.slot(c, i), free.slot(c, i));
        // Within the worst-view rule, priced with the path.
        assert!(s.ours_b2b_ns <= s.lib_b2b_ns * 1.051, "{c:?} {i}: {s:?}");
        if s.alg == f.alg && s.seg_bytes == f.seg_bytes {
            same += 1;
            for (a, b) in [
                (s.ours_sync_ns, f.ours_sync_ns),
                (s.ours_b2b_ns, f.ours_b2b_ns),
            ] {
                let d = f64::from(a) - f64::from(b);
                assert!(
                    (d - PATH_NS).abs() < 0.01 * PATH_NS,
                    "{c:?} {i}: {s:?} vs {f:?}"
                );
            }
            // The library's own choice is not charged the path.
            assert_eq!(s.lib_b2b_ns, f.lib_b2b_ns);
        }
    }
    assert!(same > 0);
    // A path dearer than any call: nothing but the library's own.
    assert!(replaced(&plan(1e9)).is_empty());
}

const PATH_NS: f64 = 80.0;

#[test]
fn alternatives_force_their_algorithm_through_cvars() {
    let chain = Alt {
        coll: Collective::Bcast,
        number: 3,
        faninout: 1,
        segsize: 4096,
        sched: 0,
    };
    assert_eq!(
        chain.cvars(),
        vec![
            ("coll_tuned_bcast_algorithm".to_string(), 3),
            ("coll_tuned_bcast_algorithm_segmentsize".to_string(), 4096),
            ("coll_tuned_bcast_algorithm_chain_fanout".to_string(), 1),
            ("coll_tuned_bcast_algorithm_tree_fanout".to_string(), 1),
        ]
    );
    let barrier = Alt::forced(Collective::Barrier, 4, 4, 0, 0);
    assert_eq!(
        barrier.cvars(),
        vec![("coll_tuned_barrier_algorithm".to_string(), 4)]
    );
    assert_eq!(lib_sched_name(barrier.sched), "dissemination");
    let allreduce = Alt::forced(Collective::Allreduce, 4, 4, 0, 0);
    assert_eq!(allreduce.cvars().len(), 2);
    assert_eq!(lib_sched_name(allreduce.sched), "ring");
    // A number the model has no schedule for is still forced.
    assert_eq!(
        Alt::forced(Collective::Allreduce, 4, 2, 0, 0).sched,
        u32::MAX
    );
}

#[test]
fn a_plan_with_alternatives_round_trips_and_a_broken_one_is_refused() {
    let mut p = Plan::library();
    p.force_alt(Alt::forced(Collective::Reduce, 4, 1, 0, 0));
    p.force_alt_at(Collective::Bcast, 9, 7);
    assert_eq!(p.alts().len(), 2);
    assert!((0..CLASSES).all(|c| p.slot(Collective::Reduce, c).alt() == Some(0)));
    assert_eq!(p.slot(Collective::Bcast, 9).alt(), Some(1));
    assert!(p.slot(Collective::Bcast, 9).replaces_library());
    assert!(!p.slot(Collective::Bcast, 8).replaces_library());
    let b = p.encode();
    assert_eq!(Plan::decode(&b).unwrap().encode(), b);
    assert_eq!(Plan::decode(&b).unwrap().alts(), p.alts());
    // Without them: every such class back to the library's own.
    let q = p.without_alts();
    assert!(q.alts().is_empty());
    assert!(Collective::ALL
        .iter()
        .all(|&c| (0..CLASSES).all(|i| !q.slot(c, i).replaces_library())));
    // A slot naming an entry the table does not have, an entry of
    // another collective, or more entries than fit: refused.
    let at = COLLECTIVES * CLASSES * SLOT_BYTES;
    let mut short = b.clone();
    short[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
    assert!(Plan::decode(&short).is_none());
    let mut many = b.clone();
    many[at..at + 4].copy_from_slice(&(MAX_ALTS as u32 + 1).to_le_bytes());
    assert!(Plan::decode(&many).is_none());
    let mut other = b.clone();
    other[at + 4..at + 8].copy_from_slice(&(Collective::Bcast as u32).to_le_bytes());
    assert!(Plan::decode(&other).is_none());
    let mut past = b;
    let slot = (Collective::Bcast as usize * CLASSES + 9) * SLOT_BYTES;
    past[slot..slot + 4].copy_from_slice(&(LIBRARY_ALG + MAX_ALTS as u32).to_le_bytes());
    assert!(Plan::decode(&past).is_none());
    // The table holds at most MAX_ALTS.
    let mut full = Plan::library();
    for n in 0..MAX_ALTS as u32 + 2 {
        full.force_alt_at(Collective::Reduce, n as usize, 1 + n);
    }
    assert_eq!(full.alts().len(), MAX_ALTS);
    // A forced choice takes its collective whole, and room from the
    // plan's own entries where the table is full.
    let (bcast, barrier) = (
        Alt::forced(Collective::Bcast, 4, 3, 1, 1024),
        Alt::forced(Collective::Barrier, 4, 4, 0, 0),
    );
    full.force_alts(&[bcast, barrier]);
    assert_eq!(full.alts().len(), MAX_ALTS);
    let at = |p: &Plan, c, i| p.slot(c, i).alt().map(|k| p.alts()[k]);
    assert!((0..CLASSES).all(|i| at(&full, Collective::Bcast, i) == Some(bcast)));
    assert_eq!(at(&full, Collective::Barrier, 0), Some(barrier));
    // The reduce classes kept name the entries they had; two gave theirs.
    let kept: Vec<u32> = (0..MAX_ALTS)
        .filter_map(|i| at(&full, Collective::Reduce, i).map(|a| a.number))
        .collect();
    assert_eq!(kept, (1..=MAX_ALTS as u32 - 2).collect::<Vec<_>>());
    assert!(Plan::decode(&full.encode()).is_some());
}

#[test]
fn plan_round_trips() {
    let mut p = Plan::library();
    p.slots[2][7] = Slot {
        alg: Algorithm::AllreduceRing as u32,
        seg_bytes: 4096,
        ours_sync_ns: 1.5,
        ours_b2b_ns: 2.5,
        lib_sync_ns: 3.5,
        lib_b2b_ns: 4.5,
        best_ours: Algorithm::AllreduceRing as u32,
        lib_sched: 3,
    };
    let b = p.encode();
    assert_eq!(b.len(), PLAN_BYTES);
    let q = Plan::decode(&b).unwrap();
    // NaN != NaN: compare the encodings.
    assert_eq!(q.encode(), b);
    assert_eq!(q.slots[2][7].alg, Algorithm::AllreduceRing as u32);
    assert!(Plan::decode(&b[1..]).is_none());
}
