//! Tests of the planned cost of a sweep.

use super::*;
use crate::model::LinkTraits;

fn gbit() -> LinkEstimate {
    LinkEstimate::default()
}

#[test]
fn the_default_sweep_on_a_gigabit_link_is_under_two_hundred_megabytes() {
    // A datagram transport (no rendezvous: changes bisected to 1/16 of
    // their size, no confirmations).
    let udp = SweepConfig {
        traits: LinkTraits {
            rendezvous: false,
            ..LinkTraits::default()
        },
        ..SweepConfig::default()
    };
    let c = plan(&udp, &gbit());
    // The default sweep (1 B – 128 KiB) with its long bursts, at the most
    // repetitions every stage allows: far below the 220–520 MB the sweep
    // sent before repetitions were bounded by their payload.
    assert!(c.bytes > 30_000_000 && c.bytes < 200_000_000, "{c:?}");
    assert!(c.seconds > 0.1 && c.seconds < 30.0, "{c:?}");
    // Bisecting to the byte (a rendezvous threshold) in the top octave is
    // the costliest case the plan allows for.
    let rndv = plan(&SweepConfig::default(), &gbit());
    assert!(rndv.bytes > c.bytes, "{rndv:?} vs {c:?}");
}

#[test]
fn the_cost_grows_with_the_sweep_and_shrinks_without_its_stages() {
    let link = gbit();
    let base = SweepConfig::default();
    let full = plan(&base, &link);
    let bigger = plan(
        &SweepConfig {
            max_size_bytes: 1 << 20,
            ..base.clone()
        },
        &link,
    );
    assert!(bigger.bytes > full.bytes);
    let bare = plan(
        &SweepConfig {
            long_bursts: false,
            refine: false,
            repeat_smallest: false,
            ..base.clone()
        },
        &link,
    );
    assert!(bare.bytes < full.bytes);
    // The transport's limit bounds the sizes.
    let small_link = LinkEstimate {
        max_msg_bytes: 16 << 10,
        ..link
    };
    assert!(plan(&base, &small_link).bytes < full.bytes);
    // A slower link takes longer for the same bytes.
    let slow = LinkEstimate {
        G_ns_per_byte: 80.0,
        ..link
    };
    assert!(plan(&base, &slow).seconds > full.seconds);
}

#[test]
fn a_recheck_costs_a_fraction_of_a_sweep() {
    let link = gbit();
    let cfg = SweepConfig {
        refine: false,
        max_reps: 12,
        long_bursts: false,
        repeat_smallest: false,
        ..SweepConfig::default()
    };
    let r = plan_sizes(&cfg, &[1, 1024, 16384], &link);
    let full = plan(&SweepConfig::default(), &link);
    assert!(
        r.bytes > 0 && r.bytes * 10 < full.bytes,
        "{r:?} vs {full:?}"
    );
}

#[test]
fn the_latency_run_is_charged_per_round_trip() {
    let link = gbit();
    let off = SweepConfig::default();
    let on = SweepConfig {
        latency_samples: 200,
        ..off.clone()
    };
    // Sizes 1, 4, 16 and 64 B; each round trip carries the size both ways,
    // warm-up rounds included.
    assert_eq!(crate::sweep::latency_sizes(&on), [1, 4, 16, 64]);
    let extra = plan(&on, &link).bytes - plan(&off, &link).bytes;
    let rounds = 200 + u64::from(crate::sweep::LATENCY_WARMUP_ROUNDS);
    assert_eq!(extra, rounds * 2 * (1 + 4 + 16 + 64));
    let secs = plan(&on, &link).seconds - plan(&off, &link).seconds;
    assert!((secs - 4.0 * rounds as f64 * 100e-6).abs() < 1e-3, "{secs}");
}
