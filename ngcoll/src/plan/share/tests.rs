use super::*;
use crate::plan::{build, reference_shared_memory, LIBRARY, MAX_ALTS};

fn setup(lib: Library, ranks: usize, library_algorithms: bool) -> Setup {
    Setup {
        ranks,
        ..crate::plan::tests::setup(lib, library_algorithms)
    }
}

/// The shares of ranks 0..n, gathered in rank order.
fn gathered<N: Network + ?Sized>(net: &N, s: &Setup, n: usize) -> Vec<u8> {
    (0..n).flat_map(|r| decide_share(net, s, r, n)).collect()
}

#[test]
fn a_plan_shared_among_any_number_of_ranks_is_the_plan_built_in_one_process() {
    let net = reference_shared_memory();
    for s in [
        setup(Library::OpenMpi41, 5, true),
        setup(Library::OpenMpi41, 4, false),
        setup(Library::Mpich40, 6, false),
    ] {
        let whole = build(&net, &s).unwrap();
        let n_items = items(&s).len();
        // One rank, fewer ranks than items, more ranks than items (some
        // decide nothing).
        for n in [1, 2, 3, 7, n_items + 3] {
            let all = gathered(&net, &s, n);
            assert_eq!(all.len(), n * share_bytes(&s, n));
            let plan = assemble_shares(&s, &all, n).expect("every share decided");
            // Bit for bit (a slot's unpriced views are NaN).
            assert!(
                plan.encode() == whole.encode(),
                "{:?} {} ranks, shared by {n}",
                s.lib,
                s.ranks
            );
        }
    }
    // Where the library's other algorithms are chosen, the shared plan
    // names the same ones in the same table order.
    let s = setup(Library::OpenMpi41, 5, true);
    let whole = build(&net, &s).unwrap();
    assert!(!whole.alts().is_empty());
}

#[test]
fn a_failed_missing_or_malformed_share_gives_no_plan() {
    let net = reference_shared_memory();
    let s = setup(Library::OpenMpi41, 4, true);
    let n = 3;
    let all = gathered(&net, &s, n);
    let len = share_bytes(&s, n);
    assert!(assemble_shares(&s, &all, n).is_some());
    // A rank whose decision failed.
    let mut failed = all.clone();
    failed[len] = 0;
    assert!(assemble_shares(&s, &failed, n).is_none());
    // A share cut short or one missing.
    assert!(assemble_shares(&s, &all[..all.len() - 1], n).is_none());
    assert!(assemble_shares(&s, &all[..2 * len], n).is_none());
    assert!(assemble_shares(&s, &all, 0).is_none());
    // A decision whose alternative flag is neither 0 nor 1, or whose
    // alternative names no collective.
    let mut bad_flag = all.clone();
    bad_flag[1 + SLOT_BYTES] = 2;
    assert!(assemble_shares(&s, &bad_flag, n).is_none());
    let mut bad_alt = all;
    bad_alt[1 + SLOT_BYTES] = 1;
    bad_alt[1 + SLOT_BYTES + 1..1 + SLOT_BYTES + 1 + 4].copy_from_slice(&99u32.to_le_bytes());
    assert!(assemble_shares(&s, &bad_alt, n).is_none());
}

#[test]
fn alternatives_take_the_table_in_item_order_and_ours_stand_where_it_is_full() {
    let s = setup(Library::OpenMpi41, 4, true);
    let items = items(&s);
    let ours = Algorithm::ALL[0] as u32;
    let mut slot = Slot::library();
    slot.alg = ours;
    slot.seg_bytes = 4096;
    // Every item names an alternative of its own: the first MAX_ALTS
    // (in item order) fill the table, the others keep our choice.
    let decided: Vec<Decided> = items
        .iter()
        .enumerate()
        .map(|(i, &(coll, _))| Decided {
            slot,
            alt: Some((Alt::forced(coll, 4, 1, i as u32, 0), 1.0, 2.0)),
        })
        .collect();
    let plan = assemble(&s, &decided).unwrap();
    assert_eq!(plan.alts().len(), MAX_ALTS);
    for (i, &(coll, c)) in items.iter().enumerate() {
        let got = plan.slot(coll, c);
        if i < MAX_ALTS {
            assert_eq!(got.alt(), Some(i), "item {i}");
            assert_eq!(
                (got.seg_bytes, got.ours_sync_ns, got.ours_b2b_ns),
                (0, 1.0, 2.0)
            );
        } else {
            assert_eq!((got.alg, got.seg_bytes), (ours, 4096), "item {i}");
        }
    }
    // Classes above the last decided keep its decision.
    let (coll, top) = items[items.len() - 1];
    let bits = |s: &Slot| {
        let mut b = [0u8; SLOT_BYTES];
        s.encode(&mut b);
        b
    };
    assert_eq!(
        bits(plan.slot(coll, CLASSES - 1)),
        bits(plan.slot(coll, top))
    );
    // One decision short: no plan.
    assert!(assemble(&s, &decided[1..]).is_none());
    assert_ne!(Slot::library().alg, ours);
    assert_eq!(Slot::library().alg, LIBRARY);
}

#[test]
fn inputs_round_trip_and_anything_else_is_refused() {
    let net = reference_shared_memory();
    let inputs = Inputs {
        setup: setup(Library::OpenMpi41, 8, true),
        pair: vec![net],
        exchange: vec![net, net],
        contention: Some(TransportExt::default()),
    };
    let b = inputs.encode().unwrap();
    assert_eq!(Inputs::decode(&b), Some(inputs.clone()));
    assert!(Inputs::decode(&b[..b.len() - 1]).is_none());
    assert!(Inputs::decode(&[]).is_none());
    // Inputs beyond MAX_INPUT_BYTES: not encoded, and not decoded from
    // bytes written without the limit.
    let big = Inputs {
        pair: vec![net; MAX_INPUT_BYTES as usize / std::mem::size_of::<Params>() + 1],
        ..inputs
    };
    assert!(big.encode().is_none());
    let unlimited = {
        use bincode::Options;
        bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .serialize(&big)
            .unwrap()
    };
    assert!(unlimited.len() as u64 > MAX_INPUT_BYTES);
    assert!(Inputs::decode(&unlimited).is_none());
    // The same encoding as the limited one below the limit.
    let small = {
        use bincode::Options;
        bincode::DefaultOptions::new()
            .with_fixint_encoding()
            .serialize(&Inputs {
                pair: vec![net],
                ..big
            })
            .unwrap()
    };
    assert!(Inputs::decode(&small).is_some());
}
