use super::*;
use crate::model::stats::standard_normal;

/// A cell whose flows take `lat + j·gap·scale` for message j, with
/// multiplicative noise of `noise` (relative), `rounds` rounds.
fn cell(
    scheme: Conflict,
    k: usize,
    scale: [f64; 2],
    rounds: usize,
    noise: f64,
    rng: &mut Rng,
) -> ConflictCell {
    let n = 8;
    let (gap, lat) = (1000.0, 5000.0);
    let mut c = ConflictCell::new(scheme, k, n, 65536, rounds);
    let (o, i) = scheme.flows(k);
    for _ in 0..rounds {
        for (msgs, into) in [(n, &mut c.burst_ns), (1, &mut c.single_ns)] {
            for f in 0..o + i {
                let class = usize::from(f >= o);
                let t = lat + f64::from(msgs) * gap * scale[class];
                into.push(t * (1.0 + noise * standard_normal(rng)));
            }
        }
    }
    c
}

fn raw(
    peers: usize,
    noise: f64,
    out_scale: impl Fn(usize) -> f64,
    in_scale: impl Fn(usize) -> f64,
) -> ContentionRaw {
    let mut rng = seeded_rng(7);
    let mut cells = Vec::new();
    for s in Conflict::ALL {
        for k in 1..=s.max_k(peers) {
            cells.push(cell(s, k, [out_scale(k), in_scale(k)], 30, noise, &mut rng));
        }
    }
    ContentionRaw {
        peers,
        cells,
        lost_rounds: 0,
    }
}

#[test]
fn fair_sharing_gives_penalty_k_and_beta_one() {
    let r = raw(5, 0.01, |k| k as f64, |k| k as f64);
    let f = fit_contention(&r, 200, 1);
    assert_eq!(
        (f.outgoing.len(), f.incoming.len(), f.mixed.len()),
        (5, 5, 2)
    );
    for (s, name) in [
        (&f.outgoing, "out"),
        (&f.incoming, "in"),
        (&f.mixed, "mixed"),
    ] {
        for p in s.iter() {
            let k = p.k as f64;
            assert!((p.penalty.value - k).abs() < 0.03 * k, "{p:?}");
            if name == "in" {
                // The incoming penalty is the slowest flow's: with flows
                // noisy on their own, the slowest of k reads a little high.
                assert!(p.penalty.lo < k * 1.02 && p.penalty.hi > k * 0.99, "{p:?}");
            } else {
                assert!(p.penalty.contains(k), "{p:?}");
            }
            assert!(p.slowest.value >= p.penalty.value * 0.98, "{p:?}");
            assert_eq!(p.rounds, 30);
        }
    }
    assert!(
        (f.beta.value - 1.0).abs() < 0.02 && f.beta.contains(1.0),
        "{:?}",
        f.beta
    );
    assert!((f.beta_in.value - 1.0).abs() < 0.02, "{:?}", f.beta_in);
    assert!(f.e_abs_pct < 3.0, "{}", f.e_abs_pct);
    assert!((f.ref_gap_out_ns - 1000.0).abs() < 20.0);
    let m = &f.mixed[1];
    assert!(
        m.out.unwrap().contains(2.0) && m.inc.unwrap().contains(2.0),
        "{m:?}"
    );
}

/// No shared resource: every penalty is 1, β = 1/k's slope is small, and
/// nothing claims a bottleneck.
#[test]
fn no_bottleneck_reads_as_penalty_one() {
    let r = raw(4, 0.02, |_| 1.0, |_| 1.0);
    let f = fit_contention(&r, 200, 2);
    for p in f.outgoing.iter().chain(&f.incoming) {
        assert!((p.penalty.value - 1.0).abs() < 0.05, "{p:?}");
    }
    for p in &f.outgoing {
        assert!(
            p.penalty.contains(1.0) || (p.penalty.value - 1.0).abs() < 0.02,
            "{p:?}"
        );
    }
    // Incoming: the slowest of k flows with 2 % noise each, a few per cent
    // high, never a bottleneck.
    for p in &f.incoming {
        assert!(p.penalty.lo < 1.04, "{p:?}");
    }
    // P(k) = 1 fitted as β·k over k = 2..4: β ≈ Σk/Σk² = 9/29.
    assert!((f.beta.value - 9.0 / 29.0).abs() < 0.02, "{:?}", f.beta);
}

#[test]
fn no_intervals_without_resamples_and_missing_cells_are_nan() {
    let mut r = raw(3, 0.0, |k| k as f64, |k| 2.0 * k as f64 - 1.0);
    r.cells
        .retain(|c| !(c.scheme == Conflict::Outgoing && c.k == 2));
    let f = fit_contention(&r, 0, 3);
    assert!(f.outgoing[0].penalty.lo.is_nan());
    assert!(f.outgoing[1].penalty.value.is_nan());
    assert!((f.outgoing[2].penalty.value - 3.0).abs() < 1e-9);
    assert!((f.incoming[2].penalty.value - 5.0).abs() < 1e-9);
    // β from k = 3 alone.
    assert!((f.beta.value - 1.0).abs() < 1e-9);
    let j = serde_json::to_string(&f).unwrap();
    let back: ContentionFit = serde_json::from_str(&j).unwrap();
    assert!(back.outgoing[1].penalty.value.is_nan());
    assert_eq!(back.incoming[2].penalty.value, f.incoming[2].penalty.value);
}

#[test]
fn a_round_with_a_lost_flow_is_left_out() {
    let mut rng = seeded_rng(1);
    let mut c = cell(Conflict::Outgoing, 2, [2.0, 2.0], 10, 0.0, &mut rng);
    c.burst_ns[0] = f64::NAN;
    let r = CellRounds::of(&c);
    assert_eq!(r.burst[0][0].len(), 9);
    assert_eq!(r.rounds(), 9);
}

/// The paper's examples: β = 0.75 gives 1.5 for two outgoing flows and
/// 2.25 for three; γ_o lowers the flow whose destination is not the most
/// loaded and raises the others.
#[test]
fn sharing_model_matches_the_papers_examples() {
    let m = Sharing {
        beta: 0.75,
        gamma_o: 0.115,
        gamma_i: 0.036,
    };
    assert_eq!(sharing_penalties(&[(0, 1)], m), vec![1.0]);
    assert_eq!(sharing_penalties(&[(0, 1), (0, 2)], m), vec![1.5, 1.5]);
    let p = sharing_penalties(&[(0, 1), (0, 2), (0, 3)], m);
    assert!(p.iter().all(|&x| (x - 2.25).abs() < 1e-12), "{p:?}");
    // Node 0 sends to 1, 2, 3; node 4 also sends to 3: the flow 0→3 is
    // strongly slow (its destination has in-degree 2), 0→1 and 0→2 are not.
    let p = sharing_penalties(&[(0, 1), (0, 2), (0, 3), (4, 3)], m);
    let k = 3.0 * 0.75;
    assert!((p[0] - k * (1.0 - 0.115)).abs() < 1e-12, "{p:?}");
    assert!((p[2] - k * (1.0 + 0.115 * 2.0)).abs() < 1e-12, "{p:?}");
    // 4→3: it sends alone (p_o = 1); at node 3 it is not strongly slow.
    assert!((p[3] - 2.0 * 0.75 * (1.0 - 0.036)).abs() < 1e-12, "{p:?}");
    assert!((e_rel(1.1, 1.0) - 10.0).abs() < 1e-9);
    assert!((e_abs(&[1.1, 0.8], &[1.0, 1.0]) - 15.0).abs() < 1e-9);
    assert!(e_abs(&[], &[]).is_nan());
}

#[test]
fn scheme_limits() {
    assert_eq!(Conflict::Mixed.max_k(5), 2);
    assert_eq!(Conflict::Incoming.max_k(5), 5);
    assert_eq!(Conflict::Mixed.flows(2), (2, 2));
}
