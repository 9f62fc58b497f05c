use crate::cluster::schedule::{Cost, RecheckPlan, ScheduleConfig};
use crate::cluster::sim::{self, CostSamples, SimConfig};
use crate::probe::ProbeOptions;
use crate::transport::sim::SimParams;

const MB: u64 = 1_000_000;

/// Costs of the order the `sim` transport gives (bench/cluster.md), two
/// runs each so the simulator draws between them.
fn costs() -> CostSamples {
    let c = |bytes, seconds| Cost { bytes, seconds };
    CostSamples {
        intra_full: vec![c(150 * MB, 0.30), c(160 * MB, 0.32)],
        intra_recheck: vec![c(800_000, 0.25), c(850_000, 0.25)],
        inter_full: vec![c(165 * MB, 0.33), c(171 * MB, 0.34)],
        inter_recheck: vec![c(790_000, 0.25), c(820_000, 0.25)],
        fanout: vec![c(40_000, 0.5), c(42_000, 0.52)],
    }
}

fn small() -> SimConfig {
    SimConfig {
        nodes: 96,
        per_leaf: 16,
        costs: costs(),
        horizon_s: 3.0 * 3600.0,
        ..SimConfig::default()
    }
}

#[test]
fn the_small_cluster_is_covered_within_its_cycles() {
    let cfg = small();
    let r = sim::run(&cfg).unwrap();
    assert_eq!((r.nodes, r.leaves, r.classes), (96, 6, 21));
    // 95 mesh rounds and the coverage rounds of ~16 min cycles.
    assert!(r.cycle_s < 1100.0, "{}", r.cycle_s);
    let fresh = r.classes_fresh_s.expect("classes fresh");
    assert!(fresh <= 610.0 + cfg.schedule.round_s, "{fresh}");
    assert!(r.classes_fresh_share > 0.99);
    let pairs = r.mesh_pairs_s.expect("every pair met");
    assert!(
        pairs <= r.cycle_s + cfg.schedule.round_s,
        "{pairs} vs {}",
        r.cycle_s
    );
    let directed = r.mesh_directed_s.expect("both directions");
    assert!(
        directed <= 2.0 * r.cycle_s + cfg.schedule.round_s,
        "{directed}"
    );
    assert_eq!(r.overruns, 0);
    // One session per round at most, and the budget holds over the run
    // (its bucket may add at most its capacity on top).
    assert!(r.sessions_per_s.max <= 1.0 / cfg.schedule.round_s + 1e-9);
    let budget = cfg.schedule.budget_bytes_per_s as f64;
    let capacity = (cfg.schedule.burst_s * budget).max(3.0 * 171.0 * MB as f64);
    assert!(r.bytes_per_s.max <= budget + capacity / cfg.horizon_s);
    assert!(r.peak_hour_bytes_per_s <= budget + capacity / 3600.0);
    assert!(r.full_sweeps_per_node.mean >= 1.0);
}

#[test]
fn the_simulation_is_deterministic_given_its_seed() {
    let a = sim::run(&small()).unwrap();
    let b = sim::run(&small()).unwrap();
    assert_eq!(a, b);
    let c = sim::run(&SimConfig {
        seed: 2,
        schedule: ScheduleConfig {
            seed: 2,
            ..ScheduleConfig::default()
        },
        ..small()
    })
    .unwrap();
    assert_ne!(a.rechecks_per_node, c.rechecks_per_node);
}

#[test]
fn a_failed_node_does_not_slow_the_others() {
    let base = sim::run(&small()).unwrap();
    let failing = sim::run(&SimConfig {
        failures: 3,
        failure_down_s: 1800.0,
        ..small()
    })
    .unwrap();
    assert_eq!(failing.failed_nodes, 3);
    assert!(failing.unreachable > 0);
    assert_eq!(
        failing.mesh_directed_unfailed_s, base.mesh_directed_s,
        "the pairs of the nodes that never failed are covered as fast"
    );
    // The failed nodes' pairs are picked up again after they return:
    // within the run, every pair with a failed end is measured too.
    assert!(failing.mesh_directed_failed_s.is_some());
}

#[test]
fn quiet_nodes_are_skipped_without_failures() {
    let r = sim::run(&SimConfig {
        quiet_fraction: 0.3,
        quiet_mean_s: 1800.0,
        ..small()
    })
    .unwrap();
    assert!((0.2..0.4).contains(&r.quiet_share), "{}", r.quiet_share);
    assert!(r.declined_quiet > 0);
    assert_eq!((r.unreachable, r.partner_down), (0, 0));
    assert!(r.directed_share_at_end > 0.5);
}

#[test]
fn costs_come_from_sweeps_over_the_sim_transport() {
    let intra: SimParams = "L=1100,o=300,g=450,G=0.08,jitter=0.02".parse().unwrap();
    let inter: SimParams = "L=1600,o=300,g=450,G=0.08,jitter=0.02".parse().unwrap();
    let mut full = ProbeOptions {
        resamples: 0,
        ..ProbeOptions::default()
    };
    full.sweep.max_size_bytes = 16 * 1024;
    let c = sim::measure_costs(&intra, &inter, &full, &RecheckPlan::default(), 3, 2).unwrap();
    assert_eq!(c.intra_full.len(), 2);
    let t = c.table();
    for j in [t.intra, t.inter] {
        assert!(
            j.recheck.bytes <= MB,
            "a re-check sends ≤ 1 MB: {}",
            j.recheck.bytes
        );
        assert!(j.recheck.bytes > 0 && j.full.bytes > 10 * j.recheck.bytes);
        // The session warm-up alone is 250 ms of virtual time.
        assert!(j.recheck.seconds >= 0.25 && j.full.seconds > j.recheck.seconds);
    }
    assert!(
        c.intra_full[0] != c.intra_full[1],
        "the jitter seed differs"
    );
}
