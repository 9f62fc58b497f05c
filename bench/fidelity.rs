//! Fidelity and probe economy over many random LogGP(S) parameter sets on the
//! `sim` network (ground truth).
//!
//!     cargo run --release --example fidelity -- [SETS] [SEED]
//!
//! For every set: relative error of g, G, o_s, o_r, EEL of the first range;
//! whether S was found to the byte; which segmenter found the true change set;
//! payload bytes against Netgauge 2.4.6's default schedule (sizes 1, 1025, …,
//! 130049; 100 repetitions; n = 10; four series). A subset is also probed with
//! Netgauge's schedule itself, through the same estimators, to compare accuracy.

use netgauged::clock::VirtualClock;
use netgauged::model::{self, Segmenter};
use netgauged::probe::{self, ProbeOptions, ProbeResult};
use netgauged::sweep::SweepConfig;
use netgauged::transport::sim::{SimParams, SimTransport};
use rand::{Rng, SeedableRng};

const MAX_SIZE: u64 = 128 * 1024;

struct Truth {
    l: f64,
    o: f64,
    g: f64,
    big_g: f64,
    s: Option<u64>,
}

fn random_set(rng: &mut rand_pcg::Pcg64, jitter: f64, seed: u64) -> (String, Truth) {
    let l = rng.gen_range(500.0..20_000.0f64).round();
    let o = rng.gen_range(100.0..5_000.0f64).round();
    // LogGP's method assumes o < g + (s−1)G; keep g above o.
    let g = (o * rng.gen_range(1.1..4.0f64)).round();
    let big_g = (10f64.powf(rng.gen_range(-2.0..1.0f64)) * 1000.0).round() / 1000.0;
    let s = if rng.gen_bool(0.5) {
        Some(rng.gen_range(2048..48 * 1024u64))
    } else {
        None
    };
    let mut m = format!("L={l},o={o},g={g},G={big_g},jitter={jitter},seed={seed}");
    if let Some(s) = s {
        m.push_str(&format!(",S={s}"));
    }
    (m, Truth { l, o, g, big_g, s })
}

fn run(model: &str, sweep: SweepConfig) -> ProbeResult {
    let params: SimParams = model.parse().expect("model");
    let opts = ProbeOptions {
        sweep,
        resamples: 0,
        seed: params.seed,
        ..ProbeOptions::default()
    };
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(params, clock.clone(), 1);
    probe::run(&mut t, &clock, 0, &opts, &mut ()).expect("sim probe")
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

fn netgauge_bytes() -> u64 {
    (0..128u64).map(|k| 1 + 1024 * k).sum::<u64>() * 100 * (2 + 3 * 11)
}

fn quant(v: &mut [f64], q: f64) -> f64 {
    model::stats::quantile(v, q)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sets: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100);
    let seed: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
    println!(
        "# fidelity over {sets} random sets per jitter level (seed {seed}), sizes 1 B – 128 KiB"
    );
    for jitter in [0.0, 0.02] {
        let mut errs: [Vec<f64>; 5] = Default::default();
        // G alone, over the sets where (s−1)·G reaches a quarter of the gap
        // within the first range (below that, G is a small correction to g
        // and its relative error says little).
        let mut g_identifiable: Vec<f64> = Vec::new();
        let (mut s_sets, mut s_exact, mut s_spurious) = (0, 0, 0);
        let (mut la_right, mut opt_right, mut used_right) = (0, 0, 0);
        let (mut la_used, mut opt_used) = (0, 0);
        let mut bytes = Vec::new();
        let mut ng_errs: Vec<f64> = Vec::new();
        let mut our_errs_subset: Vec<f64> = Vec::new();
        for i in 0..sets {
            let (m, t) = random_set(&mut rng, jitter, seed * 1000 + i as u64);
            // The model has no cold path and no burst residue: no session
            // warm-up, no settle round trips.
            let r = run(
                &m,
                SweepConfig {
                    session_warmup: std::time::Duration::ZERO,
                    settle_rounds: 0,
                    ..SweepConfig::default()
                },
            );
            let first = &r.fit.ranges[0];
            let e = [
                rel(first.g_ns, t.g),
                rel(first.G_ns_per_byte, t.big_g),
                rel(first.o_s_ns, t.o),
                rel(first.o_r_ns, t.o),
                rel(r.fit.eel_ns, t.l + 2.0 * t.o),
            ];
            if std::env::var_os("FIDELITY_VERBOSE").is_some() && e.iter().any(|x| *x > 0.03) {
                eprintln!(
                    "outlier {m}: errors {e:?}\n  ranges {:?}\n  S {:?} changes la {:?} opt {:?}",
                    r.fit.ranges, r.fit.S_bytes, r.fit.changes_lookahead, r.fit.changes_optimal
                );
            }
            let end = t.s.unwrap_or(MAX_SIZE) as f64;
            if (end - 1.0) * t.big_g >= 0.25 * (t.g + (end - 1.0) * t.big_g) {
                g_identifiable.push(e[1]);
            }
            for (v, x) in errs.iter_mut().zip(e) {
                v.push(x);
            }
            // The true change set: one change at S+1, or none.
            let truth: Vec<u64> = t.s.map(|s| vec![s + 1]).unwrap_or_default();
            let near = |c: &[u64]| {
                c.len() == truth.len()
                    && c.iter()
                        .zip(&truth)
                        .all(|(a, b)| rel(*a as f64, *b as f64) < 0.05)
            };
            la_right += near(&r.fit.changes_lookahead) as u32;
            opt_right += near(&r.fit.changes_optimal) as u32;
            match r.fit.segmenter {
                Some(Segmenter::Lookahead) => la_used += 1,
                Some(Segmenter::OptimalBic) => opt_used += 1,
                None => {}
            }
            let starts: Vec<u64> = r.fit.ranges.iter().skip(1).map(|x| x.from_bytes).collect();
            used_right += (starts == truth) as u32;
            if let Some(s) = t.s {
                s_sets += 1;
                s_exact += (r.fit.S_bytes == Some(s)) as u32;
            } else {
                s_spurious += r.fit.S_bytes.is_some() as u32;
            }
            bytes.push(r.probe_bytes as f64 / netgauge_bytes() as f64);
            if i < 10 {
                let ng = run(&m, SweepConfig::netgauge(MAX_SIZE));
                let ng_first = &ng.fit.ranges[0];
                ng_errs.push(rel(ng_first.g_ns, t.g).max(rel(ng_first.G_ns_per_byte, t.big_g)));
                our_errs_subset.push(e[0].max(e[1]));
            }
        }
        println!("\n## jitter {:.0} %", jitter * 100.0);
        println!("| parameter | median error | p90 error | max error |");
        println!("|---|---|---|---|");
        for (name, v) in ["g", "G", "o_s", "o_r", "EEL"].iter().zip(errs.iter_mut()) {
            println!(
                "| {name} | {:.3} % | {:.3} % | {:.3} % |",
                100.0 * quant(v, 0.5),
                100.0 * quant(v, 0.9),
                100.0 * quant(v, 1.0)
            );
        }
        println!(
            "| G where (s−1)G ≥ ¼ of the gap ({} sets) | {:.3} % | {:.3} % | {:.3} % |",
            g_identifiable.len(),
            100.0 * quant(&mut g_identifiable, 0.5),
            100.0 * quant(&mut g_identifiable, 0.9),
            100.0 * quant(&mut g_identifiable, 1.0)
        );
        println!(
            "\nS found to the byte: {s_exact}/{s_sets}; S where there is none: {s_spurious}/{}. Change sets right: lookahead {la_right}/{sets}, optimal/BIC {opt_right}/{sets}, used segmentation {used_right}/{sets} (lookahead used {la_used}, optimal used {opt_used}).",
            sets - s_sets
        );
        println!(
            "Payload bytes vs Netgauge's schedule: median {:.3} %, max {:.3} %.",
            100.0 * quant(&mut bytes, 0.5),
            100.0 * quant(&mut bytes, 1.0)
        );
        println!(
            "Same estimators on Netgauge's schedule (first {} sets), worst of g/G error: median {:.3} % (ours {:.3} %).",
            ng_errs.len(),
            100.0 * quant(&mut ng_errs, 0.5),
            100.0 * quant(&mut our_errs_subset, 0.5)
        );
    }
}
