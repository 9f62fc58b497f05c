use std::collections::{BTreeSet, HashSet};

use crate::cluster::rounds::{Membership, RoundKind, Rounds, ALL_GROUP, UNPLACED_GROUP};
use crate::cluster::schedule::ScheduleConfig;
use crate::cluster::topology::Topology;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i:04}")).collect()
}

/// `groups` leaves of `per` nodes each.
fn fat_tree(groups: usize, per: usize) -> Membership {
    let names = names(groups * per);
    Membership::new(&names, |n| {
        let i: usize = n[1..].parse().ok()?;
        Some(format!("leaf{:03}", i / per))
    })
    .unwrap()
}

/// The default schedule without fan-out rounds (tested on their own).
fn cfg() -> ScheduleConfig {
    ScheduleConfig {
        fanout_interval_s: 0.0,
        ..ScheduleConfig::default()
    }
}

/// Every mesh round of cycle `cycle`: (partner of each member, driver?).
fn mesh_rounds(m: &Membership, r: &Rounds, cycle: u64) -> Vec<Vec<Option<(u32, bool)>>> {
    let plan = r.plan_cycle(m, cycle);
    let start = cycle * r.cycle_rounds();
    (start..start + r.cycle_rounds())
        .map(|k| r.slot(k))
        .filter(|s| matches!(s.kind, RoundKind::Mesh(_)))
        .map(|s| {
            (0..m.len() as u32)
                .map(|x| plan.pairing(r, &s, x).map(|p| (p.partner, p.drives)))
                .collect()
        })
        .collect()
}

#[test]
fn a_cycle_pairs_every_two_members_once_and_nobody_twice_a_round() {
    for n in [1usize, 2, 3, 7, 8, 64, 65, 100] {
        let m = Membership::flat(&names(n)).unwrap();
        let r = Rounds::new(&m, &cfg());
        let rounds = mesh_rounds(&m, &r, 0);
        assert_eq!(rounds.len(), r.mesh_rounds() as usize, "n = {n}");
        let mut seen = HashSet::new();
        let mut sat_out = vec![0; n];
        for round in &rounds {
            for (x, p) in round.iter().enumerate() {
                match p {
                    None => sat_out[x] += 1,
                    Some((y, drives)) => {
                        let back = round[*y as usize].expect("pairing is symmetric");
                        assert_eq!(back.0 as usize, x);
                        assert_ne!(back.1, *drives, "exactly one of the two drives");
                        if x < *y as usize {
                            assert!(seen.insert((x, *y as usize)), "pair met twice");
                        }
                    }
                }
            }
        }
        assert_eq!(seen.len(), n * (n - 1) / 2, "n = {n}: every pair met");
        let expect_out = usize::from(n % 2 == 1);
        assert!(sat_out.iter().all(|&s| s == expect_out), "n = {n}");
    }
}

#[test]
fn a_cap_on_concurrent_mesh_sessions_spreads_each_tournament_round() {
    for (n, cap) in [
        (16usize, 1u32),
        (16, 2),
        (16, 3),
        (15, 2),
        (64, 5),
        (9, 100),
    ] {
        let m = Membership::flat(&names(n)).unwrap();
        let cfg = ScheduleConfig {
            mesh_pairs_per_round: cap,
            ..cfg()
        };
        let r = Rounds::new(&m, &cfg);
        let pairs = (n + n % 2) / 2;
        let parts = pairs.div_ceil(cap as usize);
        assert_eq!(
            r.mesh_rounds() as usize,
            (n + n % 2 - 1) * parts,
            "n = {n}, cap {cap}"
        );
        assert_eq!(r.mesh_pairs_per_round() as usize, pairs.div_ceil(parts));
        let rounds = mesh_rounds(&m, &r, 0);
        assert_eq!(rounds.len(), r.mesh_rounds() as usize);
        let mut seen = HashSet::new();
        for round in &rounds {
            let mut sessions = 0;
            for (x, p) in round.iter().enumerate() {
                if let Some((y, _)) = p {
                    let back = round[*y as usize].expect("pairing is symmetric");
                    assert_eq!(back.0 as usize, x);
                    if x < *y as usize {
                        sessions += 1;
                        assert!(seen.insert((x, *y as usize)), "pair met twice");
                    }
                }
            }
            assert!(
                sessions <= cap as usize,
                "n = {n}: {sessions} sessions over the cap {cap}"
            );
        }
        assert_eq!(
            seen.len(),
            n * (n - 1) / 2,
            "n = {n}, cap {cap}: every pair met once"
        );
    }
}

#[test]
fn the_driver_alternates_so_two_cycles_cover_both_directions() {
    let m = Membership::flat(&names(9)).unwrap();
    let r = Rounds::new(&m, &cfg());
    let mut directed = BTreeSet::new();
    let (a, b) = (mesh_rounds(&m, &r, 4), mesh_rounds(&m, &r, 5));
    for (ra, rb) in a.iter().zip(&b) {
        for (x, (pa, pb)) in ra.iter().zip(rb).enumerate() {
            // The same partner at the same point of every cycle...
            assert_eq!(pa.map(|p| p.0), pb.map(|p| p.0));
            if let (Some((y, da)), Some((_, db))) = (pa, pb) {
                // ... driven from the other end.
                assert_ne!(da, db);
                if *da {
                    directed.insert((x, *y));
                }
                if *db {
                    directed.insert((x, *y));
                }
            }
        }
    }
    assert_eq!(directed.len(), 9 * 8);
}

#[test]
fn every_node_derives_the_same_rounds() {
    let mut shuffled = names(50);
    shuffled.reverse();
    shuffled.push("n0003".into());
    let (m1, m2) = (
        Membership::flat(&names(50)).unwrap(),
        Membership::flat(&shuffled).unwrap(),
    );
    assert_eq!(m1, m2, "members are sorted and de-duplicated");
    let (r1, r2) = (Rounds::new(&m1, &cfg()), Rounds::new(&m2, &cfg()));
    assert_eq!(mesh_rounds(&m1, &r1, 3), mesh_rounds(&m2, &r2, 3));
    // Another seed, another pairing.
    let other = Rounds::new(&m1, &ScheduleConfig { seed: 99, ..cfg() });
    assert_ne!(mesh_rounds(&m1, &r1, 3), mesh_rounds(&m1, &other, 3));
}

#[test]
fn coverage_rounds_pair_a_representative_of_every_class() {
    for (groups, per, want_rounds) in [(8, 8, 2), (16, 16, 2), (4, 3, 2), (5, 40, 1), (1, 10, 1)] {
        let m = fat_tree(groups, per);
        let r = Rounds::new(&m, &cfg());
        assert_eq!(r.coverage_rounds(), want_rounds, "{groups}×{per}");
        let measurable: BTreeSet<u32> = (0..m.class_count() as u32)
            .filter(|&c| m.class_measurable(c))
            .collect();
        assert_eq!(measurable.len(), groups * (groups + 1) / 2);
        for cycle in 0..3 {
            let plan = r.plan_cycle(&m, cycle);
            let mut classes = BTreeSet::new();
            let mut duties = vec![0; m.len()];
            for q in 0..r.coverage_rounds() {
                let mut busy = HashSet::new();
                for (a, b, c) in plan.coverage_pairs(q) {
                    assert!(busy.insert(a) && busy.insert(b), "a node twice in a round");
                    assert_eq!(m.class_of(a, b), c);
                    assert!(classes.insert(c), "a class twice in a pass");
                    duties[a as usize] += 1;
                    duties[b as usize] += 1;
                }
            }
            assert_eq!(classes, measurable, "{groups}×{per}: every class");
            // The duty is spread: nobody carries more than the group sizes
            // force.
            let most = duties.iter().max().copied().unwrap_or(0);
            assert!(
                most <= groups.div_ceil(per).max(1) + 1,
                "{groups}×{per}: {most}"
            );
        }
    }
}

#[test]
fn coverage_representatives_rotate_between_cycles() {
    let m = fat_tree(4, 16);
    let r = Rounds::new(&m, &cfg());
    let reps = |cycle| -> BTreeSet<(u32, u32)> {
        let plan = r.plan_cycle(&m, cycle);
        plan.coverage_pairs(0).map(|(a, b, _)| (a, b)).collect()
    };
    assert_ne!(reps(0), reps(1));
    assert_eq!(reps(1), reps(1));
}

#[test]
fn round_layout() {
    let m = fat_tree(8, 8);
    let c = cfg();
    let r = Rounds::new(&m, &c);
    // Two coverage rounds per pass of about 600 s: a block of 30 rounds.
    assert_eq!(r.block_rounds(), Some(30));
    let per_cycle = r.cycle_rounds();
    assert_eq!(
        per_cycle,
        3 + 63,
        "63 mesh rounds in three blocks, the last cut short"
    );
    let mut kinds = (0, 0);
    let mut mesh = BTreeSet::new();
    let mut passes = Vec::new();
    for k in 7 * per_cycle..8 * per_cycle {
        let s = r.slot(k);
        assert_eq!(s.cycle, 7);
        assert_eq!(s.start_s, k as f64 * c.round_s);
        assert_eq!(r.slot_at(s.start_s + 0.5).round, k);
        match s.kind {
            RoundKind::Coverage { q, pass } => {
                assert_eq!((k - 7 * per_cycle) % 30, 0);
                passes.push((pass, q));
                kinds.0 += 1;
            }
            RoundKind::Mesh(m) => {
                assert!(mesh.insert(m));
                kinds.1 += 1;
            }
            RoundKind::Fanout { .. } => panic!("no fan-out rounds configured"),
        }
    }
    assert_eq!(kinds, (3, 63));
    assert_eq!(
        mesh.into_iter().collect::<Vec<_>>(),
        (0..63).collect::<Vec<_>>()
    );
    // Blocks 21, 22, 23 since the origin: passes go on across cycles.
    assert_eq!(passes, vec![(10, 1), (11, 0), (11, 1)]);
}

#[test]
fn groups_come_from_the_topology() {
    let t = Topology::parse("SwitchName=b Nodes=n[0002-0003]\nSwitchName=a Nodes=n0000\n").unwrap();
    let m = Membership::with_topology(&names(5), &t).unwrap();
    let groups: Vec<(&str, &[u32])> = m
        .groups()
        .iter()
        .map(|g| (g.name.as_str(), &g.members[..]))
        .collect();
    assert_eq!(
        groups,
        vec![
            ("a", &[0u32][..]),
            ("b", &[2, 3][..]),
            (UNPLACED_GROUP, &[1, 4][..])
        ]
    );
    assert_eq!(m.class_count(), 6);
    assert!(
        !m.class_measurable(m.class_of(0, 0)),
        "a group of one has no pair"
    );
    assert!(m.is_intra(m.class_of(2, 3)));
    assert!(!m.is_intra(m.class_of(0, 2)));
    assert_eq!(m.class_of(2, 0), m.class_of(0, 3));
    let flat = Membership::flat(&names(3)).unwrap();
    assert_eq!(flat.groups()[0].name, ALL_GROUP);
    assert_eq!(flat.class_count(), 1);
    assert!(Membership::flat::<&str>(&[]).is_err());
}

#[test]
fn fanout_rounds_stand_outside_the_cycles() {
    let m = Membership::flat(&names(16)).unwrap();
    let with = ScheduleConfig {
        fanout_interval_s: 100.0,
        ..ScheduleConfig::default()
    };
    let r = Rounds::new(&m, &with);
    let plain = Rounds::new(&m, &cfg());
    assert_eq!(r.fanout_period(), Some(10));
    assert_eq!(plain.fanout_period(), None);
    assert_eq!(r.cycle_rounds(), plain.cycle_rounds());
    assert!((r.cycle_s() / plain.cycle_s() - 10.0 / 9.0).abs() < 1e-12);
    // Every tenth round is a fan-out round; the others are the plain
    // layout's rounds in order, the same kinds and cycles.
    let mut inner = 0;
    let mut drivers = vec![0; 16];
    for k in 0..200 * 10 {
        let s = r.slot(k);
        assert_eq!(s.start_s, k as f64 * with.round_s);
        if k % 10 == 9 {
            let RoundKind::Fanout { f } = s.kind else {
                panic!("round {k}: {:?}", s.kind)
            };
            assert_eq!(f, k / 10);
            let parts: Vec<_> = (0..16).map(|x| r.fanout(&s, x).unwrap()).collect();
            // One chunk, one driver, the same for everyone.
            assert!(parts.iter().all(|p| *p == parts[0]));
            if f < 16 {
                drivers[parts[0].driver as usize] += 1;
            }
            let plan = r.plan_cycle(&m, s.cycle);
            assert_eq!(plan.pairing(&r, &s, 0), None);
        } else {
            let p = plain.slot(inner);
            assert_eq!((s.kind, s.cycle), (p.kind, p.cycle), "round {k}");
            assert_eq!(r.fanout(&s, 0), None);
            inner += 1;
        }
    }
    // Over 16 fan-out rounds every member drove once.
    assert_eq!(drivers, vec![1; 16]);
}

#[test]
fn fanout_chunks_are_balanced_within_switch_groups() {
    let with = ScheduleConfig {
        fanout_interval_s: 100.0,
        ..ScheduleConfig::default()
    };
    let chunks = |m: &Membership| {
        let r = Rounds::new(m, &with);
        let s = r.slot(9);
        let mut seen: Vec<Vec<u32>> = (0..m.len() as u32)
            .filter_map(|x| r.fanout(&s, x))
            .map(|p| r.fanout_chunk(p.chunk).to_vec())
            .collect();
        seen.sort();
        seen.dedup();
        seen
    };
    // 64 per leaf, at most 15 peers: 4 chunks of 16 per leaf.
    let c = chunks(&fat_tree(2, 64));
    assert_eq!(c.len(), 8);
    assert!(c.iter().all(|x| x.len() == 16));
    let m = fat_tree(2, 64);
    for x in &c {
        assert!(x.iter().all(|&y| m.group_of(y) == m.group_of(x[0])));
    }
    // 20: two chunks of 10; a leaf of 2 cannot fan out (P ≥ 2 needs 3).
    let c = chunks(&fat_tree(1, 20));
    assert_eq!(c.iter().map(Vec::len).collect::<Vec<_>>(), vec![10, 10]);
    let m = fat_tree(3, 2);
    let r = Rounds::new(&m, &with);
    assert_eq!(r.fanout_period(), None, "no chunk can fan out");
}
