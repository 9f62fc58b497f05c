//! Tests of the sustained rate and the burst regime.

use super::*;
use crate::model::{BurstLength, SizePoint};

/// Long bursts through a token bucket: rounds of n messages of `s` bytes
/// take c + max(0, n·s − free)·g_s (+ the lifted rounds' delay).
fn bursts(s: u64, g_s: f64, free: f64, lengths: &[(u32, &[f64])]) -> BurstSamples {
    let c = 50e3;
    BurstSamples {
        size_bytes: s,
        lengths: lengths
            .iter()
            .map(|&(n, lift)| BurstLength {
                n,
                prtt_ns: lift
                    .iter()
                    .map(|d| c + (f64::from(n) * s as f64 - free).max(0.0) * g_s + d)
                    .collect(),
            })
            .collect(),
        stopped: None,
    }
}

#[test]
fn the_sustained_rate_is_read_from_the_confirmed_minima() {
    // 8 ns/B behind a 64 KiB allowance; every length has two clean rounds
    // (2 µs apart) among rounds lifted by milliseconds.
    let lifted: &[f64] = &[3e6, 0.0, 1.2e6, 2e3, 4e6];
    let b = bursts(
        131072,
        8.0,
        65536.0,
        &[(2, lifted), (4, lifted), (8, lifted)],
    );
    let e = sustained(&b, 1).expect("estimate");
    assert_eq!((e.from_messages, e.to_messages), (4, 8));
    assert!((e.per_message_ns / 131072.0 - 8.0).abs() < 1e-9, "{e:?}");
    assert!(e.settled, "{e:?}");
    // ±3 × √(2² + 2²) µs over 4 messages.
    let hw = (e.ci95.1 - e.ci95.0) / 2.0;
    assert!((hw - 3.0 * (8e6f64).sqrt() / 4.0).abs() < 1e-6, "{hw}");
    // Not settled while the bursts are still inside the allowance.
    let inside = bursts(131072, 8.0, 600e3, &[(2, lifted), (4, lifted), (8, lifted)]);
    assert!(!sustained(&inside, 1).unwrap().settled);
    // One clean round only: the time is not known at all.
    let lonely = bursts(131072, 8.0, 0.0, &[(2, &[0.0, 1e6]), (4, &[0.0, 2e6])]);
    let e = sustained(&lonely, 1).unwrap();
    assert!(e.rel_halfwidth() > 1.0, "{e:?}");
    // No interval without resamples; nothing with one length.
    assert!(sustained(&b, 0).unwrap().ci95.0.is_nan());
    assert!(sustained(&bursts(4096, 8.0, 0.0, &[(2, lifted)]), 1).is_none());
}

#[test]
fn the_interval_holds_the_disagreement_of_the_last_two_increments() {
    // Clean rounds repeat to 2 µs, but every round of the shortest length
    // is 40 µs short (what the bucket held at its start moved the whole
    // length): the increment 2 → 4 reads 20 µs per message above 4 → 8.
    let clean: &[f64] = &[0.0, 2e3];
    let short: &[f64] = &[-40e3, -38e3];
    let b = bursts(131072, 8.0, 0.0, &[(2, short), (4, clean), (8, clean)]);
    let e = sustained(&b, 1).expect("estimate");
    let m = 8.0 * 131072.0;
    assert!((e.per_message_ns - m).abs() < 1e-6, "{e:?}");
    assert!((e.previous_ns - (m + 20e3)).abs() < 1e-6, "{e:?}");
    assert!(e.settled, "{e:?}");
    let jitter_hw = 3.0 * (8e6f64).sqrt() / 4.0;
    let hw = (e.ci95.1 - e.ci95.0) / 2.0;
    assert!((hw - jitter_hw.hypot(20e3)).abs() < 1e-6, "{hw}");
    // A rate between the two increments is inside; the jitter alone
    // (±2.1 µs) would have excluded it.
    assert!(e.ci95.0 < m + 15e3 && m + 15e3 < e.ci95.1, "{e:?}");
    assert!(jitter_hw < 15e3);
}

fn point(s: u64, gap_ns: f64, n: u32) -> SizePoint {
    SizePoint {
        size_bytes: s,
        gap_ns,
        half_rtt_ns: 5e3,
        gap_hw_ns: 0.01 * gap_ns,
        n,
        ..SizePoint::default()
    }
}

/// Points of a host-limited stream at the sizes 2^0 … 2^`max_k`: gap(s)
/// = `per_msg` + `per_byte`·s, 8 repetitions each.
fn linear_points(max_k: u32, per_msg: f64, per_byte: f64) -> Vec<SizePoint> {
    (0..=max_k)
        .map(|k| point(1 << k, per_msg + per_byte * f64::from(1u32 << k), 8))
        .collect()
}

fn fit_with(points: Vec<SizePoint>) -> LogGpFit {
    crate::model::fit::fit_points_with(
        points,
        &LinkTraits {
            rendezvous: false,
            ..LinkTraits::default()
        },
    )
}

#[test]
fn a_token_bucket_is_recognised_and_the_sustained_rate_reported() {
    // Short bursts of the mid sizes pass at 0.5 ns/B (the bucket), the
    // long bursts at 8 ns/B.
    let mut pts = Vec::new();
    for k in 0..=17u32 {
        let s = 1u64 << k;
        let gap = if s <= 8192 {
            2e3 + 0.5 * s as f64
        } else {
            8.0 * s as f64
        };
        pts.push(point(s, gap, 4));
    }
    let fit = fit_with(pts);
    let lifted: &[f64] = &[0.0, 1e3, 2e6];
    let b = bursts(
        131072,
        8.0,
        65536.0,
        &[(2, lifted), (4, lifted), (8, lifted)],
    );
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &LinkTraits::default(), 1);
    assert!(
        (bw.sustained_G_ns_per_byte - 8.0).abs() < 1e-9,
        "paced: G = m/s, no per-message constant ({bw:?})"
    );
    assert_eq!(bw.status, Status::Identified, "{bw:?}");
    let burst = bw.burst.expect("a burst regime");
    assert_eq!(burst.kind, BurstKind::TokenBucket);
    assert!(burst.G_ns_per_byte < 0.8, "{burst:?}");
    assert_eq!(burst.bytes, 4 * 8192);
    let credit = LinkTraits {
        credit: true,
        ..LinkTraits::default()
    };
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &credit, 1);
    assert_eq!(bw.burst.unwrap().kind, BurstKind::Credit);
}

#[test]
fn an_unshaped_link_has_no_regime_and_its_g_is_taken_off() {
    // A host-limited stream: gap(s) = 2 µs + 0.5 ns/B for every size and
    // every burst length.
    let pts = linear_points(17, 2e3, 0.5);
    let fit = fit_with(pts);
    let per_msg = 2e3 + 0.5 * 131071.0;
    let b = BurstSamples {
        size_bytes: 131072,
        lengths: [2u32, 4, 8, 16]
            .iter()
            .map(|&n| BurstLength {
                n,
                prtt_ns: vec![
                    1e4 + f64::from(n) * per_msg,
                    1e4 + f64::from(n) * per_msg + 1e3,
                ],
            })
            .collect(),
        stopped: None,
    };
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &LinkTraits::default(), 0);
    assert!(bw.burst.is_none(), "no invented regime: {bw:?}");
    assert!(
        (bw.sustained_G_ns_per_byte - 0.5).abs() < 1e-3,
        "(m − g)/(s − 1): {bw:?}"
    );
    assert_eq!(bw.range_index, Some(fit.ranges.len() - 1));
    assert_eq!(bw.status, Status::NotAssessed, "no intervals asked for");
}

#[test]
fn without_long_bursts_the_largest_range_stands_in() {
    let pts = linear_points(12, 1e3, 2.0);
    let fit = fit_with(pts);
    let k = fit.ranges.len() - 1;
    let mut ci = BTreeMap::new();
    ci.insert(format!("ranges[{k}].G_ns_per_byte"), (1.99, 2.01));
    let bw = fit_bandwidth(&fit, &ci, None, &LinkTraits::default(), 100);
    assert_eq!(bw.source, Source::Range { index: k });
    assert_eq!(bw.status, Status::Identified);
    // ±10 %: too wide to call the bandwidth identified.
    ci.insert(format!("ranges[{k}].G_ns_per_byte"), (1.8, 2.2));
    let bw = fit_bandwidth(&fit, &ci, None, &LinkTraits::default(), 100);
    assert_eq!(bw.status, Status::NotIdentified(Reason::WideInterval));
    // Nothing at all.
    let none = fit_bandwidth(&LogGpFit::default(), &ci, None, &LinkTraits::default(), 100);
    assert_eq!(none.status, Status::NotIdentified(Reason::NotMeasured));
}

#[test]
fn a_lone_fast_round_is_not_a_length_time() {
    // Behind a 256 KiB bucket at 4 ns/B, one round of 8 found the bucket
    // full (0.5 ms faster) and was never repeated; the others agree.
    let rounds = [3717e3, 4202e3, 4212e3, 4218e3, 6798e3];
    assert_eq!(confirmed_least(&rounds), Some((4202e3, 10e3)));
    assert_eq!(confirmed_least(&[3717e3, 4202e3]), None);
    assert_eq!(confirmed_least(&[1e6]), None);
    // Within 5 µs counts at any size.
    assert_eq!(confirmed_least(&[200e3, 204e3]), Some((200e3, 4e3)));
    // The sustained time is taken between confirmed times: 4 ns/B at 128
    // KiB whichever length had the lone fast round.
    let s = 131072u64;
    let ok: &[f64] = &[0.0, 3e3];
    let fast: &[f64] = &[-500e3, 0.0, 3e3];
    let b = bursts(s, 4.0, 0.0, &[(4, ok), (8, fast), (16, ok)]);
    let e = sustained(&b, 1).expect("estimate");
    assert!((e.per_message_ns - 4.0 * s as f64).abs() < 1e-6, "{e:?}");
    assert!(e.settled, "{e:?}");
    // With no two rounds agreeing, the least stands, known to its second.
    let lone: &[f64] = &[0.0, 400e3];
    let b = bursts(s, 4.0, 0.0, &[(4, ok), (8, ok), (16, lone)]);
    let e = sustained(&b, 1).expect("estimate");
    assert!((e.per_message_ns - 4.0 * s as f64).abs() < 1e-6, "{e:?}");
    assert!(e.rel_halfwidth() > 0.2, "{e:?}");
}

#[test]
fn a_paced_link_without_a_visible_bucket_is_not_charged_a_range_intercept() {
    // The sweep's own traffic kept the bucket empty: every size ran at the
    // shaper's 80 ns/B, but the largest range, fitted across where the
    // bucket ran out, has a line of 130 µs + 94 ns/B that is 15 % above the
    // long bursts' time at 128 KiB. The stream is paced: G = m/s.
    let mut pts = linear_points(13, 3e3, 80.0);
    for &s in &[17232u64, 32768, 65536, 131072] {
        pts.push(point(s, 130e3 + 94.0 * s as f64, 8));
    }
    let fit = fit_with(pts);
    let k = fit.ranges.len() - 1;
    let r = &fit.ranges[k];
    let s = 131072u64;
    let line = r.g_ns + (s as f64 - 1.0) * r.G_ns_per_byte;
    assert!(line > 1.1 * 80.0 * s as f64, "the fixture's line: {r:?}");
    let clean: &[f64] = &[0.0, 2e3];
    let b = bursts(s, 80.0, 0.0, &[(2, clean), (4, clean), (8, clean)]);
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &LinkTraits::default(), 1);
    assert!(bw.burst.is_none(), "no burst seen: {bw:?}");
    assert!(
        (bw.sustained_G_ns_per_byte - 80.0).abs() < 1e-9,
        "paced: m/s, no range intercept taken off: {bw:?}"
    );
}

#[test]
fn a_noisy_sustained_time_invents_no_burst_regime() {
    // An unshaped link whose sweep ran at 0.55 ns/B, and long bursts that
    // read 0.95 ns/B but with no two rounds agreeing (60 µs apart): the
    // short bursts are 1.7× faster than m/s, not beyond m's interval.
    let pts = linear_points(17, 2e3, 0.55);
    let fit = fit_with(pts);
    let noisy: &[f64] = &[0.0, 60e3];
    let b = bursts(131072, 0.95, 0.0, &[(2, noisy), (4, noisy), (8, noisy)]);
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &LinkTraits::default(), 1);
    assert!(bw.burst.is_none(), "no invented regime: {bw:?}");
    assert_ne!(bw.status, Status::Identified, "{bw:?}");
    // Known to 2 µs but still slowing down between the longest bursts
    // (a host whose other work slowed them, or an allowance not yet
    // used up): no regime until the sustained time settles.
    let clean: &[f64] = &[0.0, 2e3];
    let growing = bursts(131072, 0.95, 600e3, &[(2, clean), (4, clean), (8, clean)]);
    let bw = fit_bandwidth(
        &fit,
        &BTreeMap::new(),
        Some(&growing),
        &LinkTraits::default(),
        1,
    );
    assert!(bw.burst.is_none(), "{bw:?}");
    assert_eq!(bw.status, Status::NotIdentified(Reason::Shaper), "{bw:?}");
    // The same bursts known to 2 µs: the short bursts' rate is a regime.
    let b = bursts(131072, 0.95, 0.0, &[(2, clean), (4, clean), (8, clean)]);
    let bw = fit_bandwidth(&fit, &BTreeMap::new(), Some(&b), &LinkTraits::default(), 1);
    assert!(bw.burst.is_some(), "{bw:?}");
}
