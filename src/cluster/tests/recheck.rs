use crate::clock::VirtualClock;
use crate::cluster::recheck::{
    compare, disturbed, recheck_disturbed, Disturbance, DisturbancePolicy, Quantity, RecheckPolicy,
    SessionSpread,
};
use crate::cluster::schedule::RecheckPlan;
use crate::model::fit::size_points;
use crate::model::SizeSamples;
use crate::probe::{self, ProbeOptions};
use crate::sweep;
use crate::transport::sim::{SimParams, SimTransport};

const LINK: &str = "L=1100,o=300,g=450,G=0.08,S=16384,jitter=0.02";

fn full_sweep(params: &str, seed: u64) -> probe::ProbeResult {
    let p = SimParams {
        seed,
        ..params.parse().unwrap()
    };
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(p, clock.clone(), 1);
    let mut opts = ProbeOptions::default();
    opts.sweep.max_size_bytes = 64 * 1024;
    opts.resamples = 50;
    probe::run(&mut t, &clock, 0, &opts, &mut ()).unwrap()
}

fn recheck(params: &str, seed: u64) -> (Vec<SizeSamples>, u64) {
    let p = SimParams {
        seed,
        ..params.parse().unwrap()
    };
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(p, clock.clone(), 1);
    let plan = RecheckPlan::default();
    let cfg = plan.sweep_config(&ProbeOptions::default().sweep);
    let s = sweep::measure_sizes(&mut t, &clock, 0, &plan.sizes_bytes, &cfg).unwrap();
    let c = crate::transport::Transport::counters(&t);
    (s, c.sent_bytes + c.recv_bytes)
}

#[test]
fn rechecks_of_an_unchanged_link_agree_and_a_changed_one_does_not() {
    let entry = crate::publish::entry_from_probe("b", "sim", &full_sweep(LINK, 1));
    let policy = RecheckPolicy::default();
    let mut agree = 0;
    let mut max_bytes = 0;
    for seed in 2..102 {
        let (s, bytes) = recheck(LINK, seed);
        assert!(bytes <= 1_000_000, "a re-check sent {bytes} B");
        max_bytes = max_bytes.max(bytes);
        let v = compare(&size_points(&s), &entry, &policy, &SessionSpread::default());
        assert_eq!(v.checks.len(), 3, "EEL and two gaps: {v:?}");
        agree += usize::from(v.agrees);
    }
    // The bound: at most 5 % false disagreements.
    println!("{agree} of 100 re-checks of the same link agreed, at most {max_bytes} B each");
    assert!(
        agree >= 95,
        "{agree} of 100 re-checks of the same link agreed"
    );
    // Latency doubled, or the link at a third of its rate: every re-check
    // disagrees.
    for changed in [
        "L=3300,o=300,g=450,G=0.08,S=16384,jitter=0.02",
        "L=1100,o=300,g=450,G=0.24,S=16384,jitter=0.02",
    ] {
        for seed in 2..12 {
            let (s, _) = recheck(changed, seed);
            let v = compare(&size_points(&s), &entry, &policy, &SessionSpread::default());
            assert!(!v.agrees, "{changed}: {v:?}");
        }
    }
    let (s, _) = recheck("L=3300,o=300,g=450,G=0.08,S=16384,jitter=0.02", 3);
    let v = compare(&size_points(&s), &entry, &policy, &SessionSpread::default());
    let eel = v
        .checks
        .iter()
        .find(|c| c.quantity == Quantity::Eel)
        .unwrap();
    assert!(
        !eel.agrees && eel.measured_ns > 2.0 * eel.reference_ns,
        "{eel:?}"
    );
    // Nothing to compare: no verdict of agreement.
    assert!(!compare(&[], &entry, &policy, &SessionSpread::default()).agrees);
}

/// A bandwidth-bound link whose entry's interval of g is wide (as on a
/// shaped link, where the per-message gap hides under the bytes' time): the
/// link at half its rate disagrees, the same link agrees.
#[test]
fn a_wide_interval_of_g_does_not_hide_a_link_at_half_its_rate() {
    const SLOW_LINK: &str = "L=1100,o=300,g=450,G=0.8,S=16384,jitter=0.02";
    const HALF_RATE: &str = "L=1100,o=300,g=450,G=1.6,S=16384,jitter=0.02";
    let mut entry = crate::publish::entry_from_probe("b", "sim", &full_sweep(SLOW_LINK, 1));
    let g = entry.ranges[0].g_ns;
    entry.ci95.retain(|(n, _, _)| n != "g_ns");
    entry.ci95.push(("g_ns".into(), g - 4000.0, g + 4000.0));
    let policy = RecheckPolicy::default();
    let mut agree = 0;
    for seed in 2..22 {
        let (same, _) = recheck(SLOW_LINK, seed);
        agree += usize::from(
            compare(
                &size_points(&same),
                &entry,
                &policy,
                &SessionSpread::default(),
            )
            .agrees,
        );
        let (half, _) = recheck(HALF_RATE, seed);
        let v = compare(
            &size_points(&half),
            &entry,
            &policy,
            &SessionSpread::default(),
        );
        let gap = v
            .checks
            .iter()
            .find(|c| c.quantity == Quantity::Gap && c.size_bytes == 4096)
            .unwrap();
        assert!(!gap.agrees, "{gap:?}");
        // The bound: half the reference, not the interval's 3 × 4000 ns.
        assert!(gap.tolerance_ns <= 0.5 * gap.reference_ns + 1e-9, "{gap:?}");
        // Without the bound the interval would have let it pass.
        let unbounded = RecheckPolicy {
            max_gap_rel_tol: f64::INFINITY,
            ..policy
        };
        assert!(
            compare(
                &size_points(&half),
                &entry,
                &unbounded,
                &SessionSpread::default()
            )
            .agrees
        );
    }
    assert!(
        agree >= 19,
        "{agree} of 20 re-checks of the same link agreed"
    );
}

#[test]
fn a_quiet_sweep_is_not_disturbed_a_spread_or_lossy_one_is() {
    let policy = DisturbancePolicy::default();
    for seed in 1..6 {
        let r = full_sweep(LINK, seed);
        assert_eq!(disturbed(&r, &policy), None, "seed {seed}");
    }
    // The host descheduled through most of the sweep: every size's
    // single-message round trips spread.
    let mut r = full_sweep(LINK, 1);
    for s in &mut r.samples {
        let n = s.prtt1_ns.len();
        for (i, x) in s.prtt1_ns.iter_mut().enumerate() {
            if i >= n / 3 {
                *x += 4e6;
            }
        }
    }
    assert!(matches!(
        disturbed(&r, &policy),
        Some(Disturbance::EelSpread(_) | Disturbance::Spread(_))
    ));
    let mut r = full_sweep(LINK, 1);
    r.lost_rounds = 20;
    assert_eq!(disturbed(&r, &policy), Some(Disturbance::Losses(20)));
    let mut r = full_sweep(LINK, 1);
    r.fit.eel_ns = f64::NAN;
    assert_eq!(disturbed(&r, &policy), Some(Disturbance::NoLatency));
    let mut r = full_sweep(LINK, 1);
    let eel = r.fit.eel_ns;
    r.fit.ranges[0].g_ns = -3.0 * eel;
    r.fit.ranges[0].G_ns_per_byte = 0.0;
    assert!(matches!(
        disturbed(&r, &policy),
        Some(Disturbance::NegativeGap { .. })
    ));
    // The larger sizes' gap far below the smaller ones' where two ranges
    // meet: the smaller sizes were held up (a guest's scheduler plateau).
    let mut r = full_sweep(LINK, 1);
    let mut upper = r.fit.ranges.last().unwrap().clone();
    let split = upper.to_bytes / 2;
    upper.from_bytes = split + 1;
    let lower = r.fit.ranges.last_mut().unwrap();
    lower.to_bytes = split;
    lower.g_ns += 200_000.0;
    r.fit.ranges.push(upper);
    assert!(matches!(
        disturbed(&r, &policy),
        Some(Disturbance::GapDrop { at_bytes, .. }) if at_bytes == split + 1
    ));
}

#[test]
fn a_quiet_recheck_is_not_disturbed_a_held_up_or_spread_one_is() {
    let policy = DisturbancePolicy::default();
    for seed in 2..22 {
        let (s, _) = recheck(LINK, seed);
        assert_eq!(
            recheck_disturbed(&s, &size_points(&s), &policy),
            None,
            "seed {seed}"
        );
    }
    // The single messages held up (the host descheduled the prober during
    // them): n messages back to back seem to take less than one.
    let (mut s, _) = recheck(LINK, 2);
    let last = s.len() - 1;
    for x in &mut s[last].prtt1_ns {
        *x += 4e6;
    }
    assert!(matches!(
        recheck_disturbed(&s, &size_points(&s), &policy),
        Some(Disturbance::NegativeGap { .. })
    ));
    // Every size's single round trips spread: no verdict on the entry.
    let (mut s, _) = recheck(LINK, 2);
    for x in s.iter_mut() {
        let n = x.prtt1_ns.len();
        for (i, v) in x.prtt1_ns.iter_mut().enumerate() {
            if i >= n / 3 {
                *v += 40_000.0;
            }
        }
        for v in &mut x.prttn_ns {
            *v += 40_000.0;
        }
    }
    assert!(matches!(
        recheck_disturbed(&s, &size_points(&s), &policy),
        Some(Disturbance::EelSpread(_) | Disturbance::Spread(_))
    ));
}

/// A link that settles at one of two levels from session to session: once
/// the pair's sessions have shown both, a re-check at either level agrees
/// with an entry measured at the other; a link at twice the latency or a
/// quarter of the rate still disagrees, however wide the recorded spread.
#[test]
fn a_link_with_two_quiet_levels_agrees_at_either_and_a_change_still_disagrees() {
    const LOW: &str = "L=1100,o=300,g=450,G=0.08,S=16384,jitter=0.02";
    const HIGH: &str = "L=1500,o=400,g=600,G=0.11,S=16384,jitter=0.02";
    let sizes = crate::cluster::schedule::RecheckPlan::default().sizes_bytes;
    let low = crate::publish::entry_from_probe("b", "sim", &full_sweep(LOW, 1));
    let high = crate::publish::entry_from_probe("b", "sim", &full_sweep(HIGH, 1));
    let policy = RecheckPolicy::default();
    // The pair's sweeps so far: one at each level; the entry is the latest.
    let mut spread = SessionSpread::default();
    spread.record_entry(&low, &sizes);
    spread.record_entry(&high, &sizes);
    let (mut plain, mut widened) = (0, 0);
    for seed in 2..22 {
        let (s, _) = recheck(LOW, seed);
        let p = size_points(&s);
        plain += usize::from(compare(&p, &high, &policy, &SessionSpread::default()).agrees);
        widened += usize::from(compare(&p, &high, &policy, &spread).agrees);
    }
    println!("low-level re-checks against the high entry: {plain} of 20 agree alone, {widened} with the spread");
    assert!(plain <= 5, "{plain} of 20 agreed without the spread");
    assert!(widened >= 19, "{widened} of 20 agreed with the spread");
    // However wide the recorded spread (a level three times the other),
    // a link at twice the latency or less than half the rate disagrees.
    let wide = crate::publish::entry_from_probe(
        "b",
        "sim",
        &full_sweep("L=4500,o=900,g=1800,G=0.33,S=16384,jitter=0.02", 1),
    );
    spread.record_entry(&wide, &sizes);
    for changed in [
        "L=4000,o=400,g=600,G=0.11,S=16384,jitter=0.02",
        "L=1500,o=400,g=600,G=0.44,S=16384,jitter=0.02",
    ] {
        for seed in 2..12 {
            let (s, _) = recheck(changed, seed);
            let v = compare(&size_points(&s), &high, &policy, &spread);
            assert!(!v.agrees, "{changed}: {v:?}");
        }
    }
    // Nothing recorded, or one session: no spread.
    let mut one = SessionSpread::default();
    assert_eq!(one.spread_ns(Quantity::Eel, 1), 0.0);
    one.record_entry(&low, &sizes);
    assert_eq!(one.spread_ns(Quantity::Gap, 4096), 0.0);
    one.record_points(&size_points(&recheck(HIGH, 2).0));
    assert!(one.spread_ns(Quantity::Gap, 4096) > 0.0);
}
