//! Every published parameter is either identified or marked not identified
//! with a reason: no value negative, and none whose 95 % interval reaches
//! zero, without the mark. Checked in the JSON of a probe and in that of
//! the segment entry the daemon would publish from it, over the sim's
//! random parameter sets (with and without jitter, intervals included), the
//! saved real sweeps of tests/data/ (per-size points, no intervals) and the
//! real sweeps saved with their raw samples in tests/data/sweeps/.

use std::collections::BTreeMap;

use netgauge::ext::Instability;
use netgauged::clock::VirtualClock;
use netgauged::model::{bandwidth, fit, ident, LinkTraits, SizePoint};
use netgauged::probe::{self, ProbeOptions, ProbeResult, Raw, Stability};
use netgauged::publish::entry_from_probe;
use netgauged::report::{entry_probe_json, probe_json, ProbeJson};
use netgauged::transport::sim::{SimParams, SimTransport};
use netgauged::transport::Kind;
use rand::{Rng, SeedableRng};

/// A verdict that marks a value as not identified.
fn marked(status: &str) -> bool {
    status != "identified" && status != "not_assessed"
}

/// Check every value of `p`; returns how many values were marked.
fn check(what: &str, p: &ProbeJson) -> usize {
    let mut marks = 0;
    let mut one = |key: String, value: f64, status: &str, ci: Option<(f64, f64)>| {
        if marked(status) {
            marks += 1;
            return;
        }
        assert!(
            value.is_nan() || value >= 0.0,
            "{what}: {key} = {value} published as {status}"
        );
        if let Some((lo, hi)) = ci {
            if lo.is_finite() && hi.is_finite() {
                assert!(
                    lo > 0.0,
                    "{what}: {key} = {value}, interval [{lo}, {hi}] reaches zero, published as {status}"
                );
            }
        }
    };
    let ci = |k: &str| p.ci95.get(k).copied();
    one(
        "eel_ns".into(),
        p.eel_ns,
        p.identification.eel_ns,
        ci("eel_ns"),
    );
    one("L_ns".into(), p.L_ns, p.identification.l_ns, ci("L_ns"));
    for (i, (r, st)) in p.ranges.iter().zip(&p.identification.ranges).enumerate() {
        let r = &r.range;
        for (k, v) in [
            ("g_ns", r.g_ns),
            ("G_ns_per_byte", r.G_ns_per_byte),
            ("o_s_ns", r.o_s_ns),
            ("o_r_ns", r.o_r_ns),
            ("O_s_ns_per_byte", r.O_s_ns_per_byte),
            ("O_r_ns_per_byte", r.O_r_ns_per_byte),
        ] {
            let key = format!("ranges[{i}].{k}");
            let status = st.get(k).copied().unwrap_or("not_assessed");
            one(key.clone(), v, status, ci(&key));
        }
    }
    if let Some(b) = &p.bandwidth {
        let s = &b.sustained;
        one(
            "bandwidth.sustained".into(),
            s.G_ns_per_byte,
            s.status,
            Some(s.ci95),
        );
    }
    // What is marked is listed, with its reason.
    for n in &p.not_identified {
        assert!(
            marked(n.reason),
            "{what}: {} listed as {}",
            n.parameter,
            n.reason
        );
    }
    marks
}

/// The probe's JSON and the JSON of the segment entry published from it.
fn check_both(what: &str, r: &ProbeResult, transport: &str) -> usize {
    let marks = check(what, &probe_json(r, Some(transport)));
    let entry = entry_from_probe("peer", transport, r);
    check(&format!("{what} (segment)"), &entry_probe_json(&entry));
    marks
}

fn sim_sweep(model: &str) -> ProbeResult {
    let params: SimParams = model.parse().expect("model");
    let opts = ProbeOptions {
        resamples: 60,
        seed: params.seed,
        ..ProbeOptions::for_kind(Kind::Sim)
    };
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(params, clock.clone(), 1);
    probe::run(&mut t, &clock, 0, &opts, &mut ()).expect("sim probe")
}

#[test]
fn sim_parameter_sets() {
    // The parameter space of bench/fidelity.rs.
    let mut rng = rand_pcg::Pcg64::seed_from_u64(18);
    let mut marks = 0;
    for jitter in [0.0, 0.02] {
        for k in 0..8u64 {
            let l = rng.gen_range(500.0..20_000.0f64).round();
            let o = rng.gen_range(100.0..5_000.0f64).round();
            let g = (o * rng.gen_range(1.1..4.0f64)).round();
            let big_g = (10f64.powf(rng.gen_range(-2.0..1.0f64)) * 1000.0).round() / 1000.0;
            let mut m = format!("L={l},o={o},g={g},G={big_g},jitter={jitter},seed={k}");
            if rng.gen_bool(0.5) {
                m.push_str(&format!(",S={}", rng.gen_range(2048..48 * 1024u64)));
            }
            marks += check_both(&m, &sim_sweep(&m), "sim");
        }
    }
    println!("sim: {marks} values marked not identified");
}

#[derive(serde::Deserialize)]
struct Fixture {
    points: Vec<SizePoint>,
}

/// A fit of per-size points alone (no samples, so no intervals).
fn from_points(points: Vec<SizePoint>, traits: LinkTraits) -> ProbeResult {
    let fit = fit::fit_points_with(points, &traits);
    let ci95 = BTreeMap::new();
    let bw = bandwidth::fit_bandwidth(&fit, &ci95, None, &traits, 0);
    let ident = ident::identify(&fit, &ci95, &bw, &traits, Instability::None, false);
    ProbeResult {
        fit,
        logfp: None,
        ci95,
        bandwidth: bw,
        ident,
        stability: Stability::default(),
        traits,
        transport: None,
        probe_bytes: 0,
        probe_messages: 0,
        elapsed_ns: 0.0,
        lost_rounds: 0,
        samples: Vec::new(),
        fanout: Vec::new(),
        bursts: None,
        repeat: None,
        cpu: None,
        latency_samples: Vec::new(),
        latency: Vec::new(),
    }
}

fn kind_of(file: &str) -> Kind {
    let name = file.rsplit('/').next().unwrap_or(file);
    let prefix = name.split('_').next().unwrap_or("");
    match prefix {
        "udp" => Kind::Udp,
        "raw" => Kind::Raw,
        "rdma" => Kind::Rdma,
        "msg" => Kind::Msg,
        _ => Kind::Mpi,
    }
}

fn files(dir: &str) -> Vec<String> {
    let dir = format!("{}/tests/data/{dir}", env!("CARGO_MANIFEST_DIR"));
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.path().display().to_string())
        .filter(|p| p.ends_with(".json"))
        .collect();
    v.sort();
    v
}

#[test]
fn saved_real_sweeps_as_points() {
    let mut n = 0;
    for dir in ["rendezvous", "shaper"] {
        for path in files(dir) {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let f: Fixture = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
            let kind = kind_of(&path);
            let r = from_points(f.points, probe::traits_of(kind));
            check_both(&path, &r, kind.name());
            // S only where the transport has a rendezvous protocol.
            if !kind.descriptor().rendezvous {
                assert_eq!(r.fit.S_bytes, None, "{path}: S on {}", kind.name());
            }
            n += 1;
        }
    }
    assert!(n >= 19, "only {n} fixtures");
}

/// `ngctl probe --json --raw` output: the raw samples re-fitted as
/// `ngctl fit` does.
#[derive(serde::Deserialize)]
struct Saved {
    raw: Raw,
}

#[test]
fn saved_real_sweeps_with_samples() {
    let mut n = 0;
    for path in files("sweeps") {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let s: Saved = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let kind = kind_of(&path);
        let r = probe::fit(s.raw, &ProbeOptions::for_kind(kind));
        let marks = check_both(&path, &r, kind.name());
        println!("{path}: {marks} values marked not identified");
        n += 1;
    }
    assert!(n >= 1, "no saved sweeps in tests/data/sweeps");
}
