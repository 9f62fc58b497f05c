//! The latency run: the half round trip's percentiles at a few small
//! sizes, against the sim's ground truth (exact and jittered), and over
//! UDP loopback into the JSON and the segment (`ngctl dump --json` after
//! `--publish`).

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;
use common::probe::{one_at_a_time, Killed};
use common::{cli_json, json_of, sim_probe, stdout_of, tmp_path, NGCTL};

/// The sim model's L, o and G: the half round trip of s bytes is
/// L + 2o + (s − 1)·G (one message: send overhead, wire, receive overhead).
const L: f64 = 2000.0;
const O: f64 = 500.0;
const G: f64 = 0.1;

fn model(jitter: f64) -> String {
    format!("L={L},o={O},g=600,G={G},jitter={jitter}")
}

fn half_rtt(size_bytes: f64) -> f64 {
    L + 2.0 * O + (size_bytes - 1.0) * G
}

const KEYS: [&str; 6] = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"];

/// The latency records of a probe's JSON, each checked: the six values
/// finite, ≥ 0 and in order; the sample count as asked; sizes increasing.
fn records(v: &Value, samples: u64) -> Vec<(u64, [f64; 6])> {
    let l = v["latency"].as_array().expect("a latency array");
    let mut out = Vec::new();
    for r in l {
        assert_eq!(r["samples"].as_u64(), Some(samples), "{r}");
        let vals = KEYS.map(|k| r[k].as_f64().unwrap_or(f64::NAN));
        assert!(vals.iter().all(|x| x.is_finite() && *x >= 0.0), "{r}");
        assert!(vals.windows(2).all(|w| w[0] <= w[1]), "not ordered: {r}");
        out.push((r["size_bytes"].as_u64().expect("size"), vals));
    }
    assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "{l:?}");
    out
}

#[test]
fn exact_sim_gives_the_model_at_every_percentile() {
    let v = json_of(sim_probe(&model(0.0)).args(["--max-size", "1024", "--resamples", "0"]));
    let r = records(&v, 1000);
    // 1 B and three more of the grid up to 64 B, spread over it.
    let sizes: Vec<u64> = r.iter().map(|x| x.0).collect();
    assert_eq!(sizes, [1, 4, 16, 64]);
    for (s, vals) in r {
        for x in vals {
            assert!((x - half_rtt(s as f64)).abs() < 0.01, "{s} B: {vals:?}");
        }
    }
}

#[test]
fn jittered_sim_percentiles_are_ordered_and_the_median_near_the_model() {
    let mut cmd = sim_probe(&model(0.1));
    cmd.args(["--max-size", "1024", "--resamples", "0", "--histogram"]);
    let v = json_of(&mut cmd);
    let r = records(&v, 1000);
    assert_eq!(r.len(), 4);
    for (s, [min, p50, p90, p99, p999, max]) in r {
        let m = half_rtt(s as f64);
        // Jitter only stretches spans: nothing is faster than the model.
        assert!(min >= m - 0.01, "{s} B: min {min} < model {m}");
        // Each of the three spans is stretched by a median of about 5 %.
        assert!(p50 <= 1.15 * m, "{s} B: p50 {p50} vs model {m}");
        // A heavy tail: the high percentiles stand apart from the median.
        assert!(p90 > p50 && p99 > p90 && max > p50 * 1.2, "{s} B");
        let _ = p999;
    }
    // The histogram holds every sample, in log-spaced bins that cover
    // [min, max].
    for rec in v["latency"].as_array().unwrap() {
        let h = rec["histogram"].as_array().expect("--histogram");
        let total: u64 = h.iter().map(|b| b["count"].as_u64().unwrap()).sum();
        assert_eq!(total, 1000);
        let lo = h[0]["lo_ns"].as_f64().unwrap();
        let hi = h[h.len() - 1]["hi_ns"].as_f64().unwrap();
        assert!(lo <= rec["min_ns"].as_f64().unwrap());
        assert!(hi > rec["max_ns"].as_f64().unwrap());
        for b in h {
            let ratio = b["hi_ns"].as_f64().unwrap() / b["lo_ns"].as_f64().unwrap();
            assert!((ratio - 10f64.powf(0.1)).abs() < 1e-6, "{b}");
        }
    }
    // Without --histogram there is none.
    let plain = json_of(sim_probe(&model(0.1)).args(["--max-size", "1024", "--resamples", "0"]));
    assert!(plain["latency"][0].get("histogram").is_none());
}

#[test]
fn the_count_is_as_asked_and_text_states_it() {
    // 200 samples: p99.9 is the largest (nearest rank 200 of 200), p99 the
    // second largest.
    let v = json_of(sim_probe(&model(0.2)).args([
        "--max-size",
        "64",
        "--resamples",
        "0",
        "--latency-samples",
        "200",
    ]));
    for (_, vals) in records(&v, 200) {
        assert_eq!(vals[4], vals[5], "p99.9 of 200 samples is the max");
    }
    // 0: no latency run, an empty list.
    let off = json_of(sim_probe(&model(0.0)).args([
        "--max-size",
        "64",
        "--resamples",
        "0",
        "--latency-samples",
        "0",
    ]));
    assert_eq!(off["latency"].as_array().map(Vec::len), Some(0));
    // The text says how many samples and what p99.9 of them is.
    let mut cmd = Command::new(NGCTL);
    cmd.args(["probe", "--transport", "sim", "--model", &model(0.2)]);
    cmd.args(["--max-size", "64", "--resamples", "0", "-q"]);
    cmd.args(["--latency-samples", "200", "--histogram"]);
    let text = String::from_utf8(stdout_of(&mut cmd)).unwrap();
    assert!(
        text.contains("nearest rank of 200 samples per size"),
        "{text}"
    );
    assert!(text.contains("below 1000 samples p99.9 is the maximum"));
    assert!(text.contains("histogram of the half round trip at 1 B:"));
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "{line:?}");
    }
}

#[test]
fn a_refit_of_saved_samples_gives_the_same_percentiles() {
    let saved = tmp_path("ng-latency", "raw.json");
    let raw = stdout_of(sim_probe(&model(0.1)).args([
        "--max-size",
        "256",
        "--resamples",
        "0",
        "--latency-samples",
        "300",
        "--raw",
    ]));
    std::fs::write(&saved, &raw).unwrap();
    let probe = cli_json(&raw);
    let refit = json_of(Command::new(NGCTL).args(["fit", saved.to_str().unwrap(), "--json"]));
    assert_eq!(probe["latency"], refit["latency"]);
    assert_eq!(records(&refit, 300).len(), 4);
    let _ = std::fs::remove_file(&saved);
}

fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

#[test]
fn udp_loopback_percentiles_reach_the_json_and_the_segment() {
    let _serial = one_at_a_time();
    let port = free_port();
    let _server = Killed(
        Command::new(NGCTL)
            .args(["serve", "--transport", "udp", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--idle-exit-s", "60"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ngctl serve"),
    );
    std::thread::sleep(Duration::from_millis(300));
    let seg = tmp_path("ng-latency", "segment");
    let _ = std::fs::remove_file(&seg);
    let peer = format!("127.0.0.1:{port}");
    let probe = json_of(Command::new(NGCTL).args([
        "probe",
        "--transport",
        "udp",
        "--peer",
        &peer,
        "--max-size",
        "4096",
        "--resamples",
        "20",
        "--latency-samples",
        "300",
        "--publish",
        "--shm",
        seg.to_str().unwrap(),
        "--json",
        "-q",
    ]));
    let r = records(&probe, 300);
    assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 4, 16, 64]);
    // A loopback half round trip is microseconds, not nothing.
    assert!(r.iter().all(|(_, v)| v[0] > 100.0), "{r:?}");
    // The segment holds the same numbers.
    let dump =
        json_of(Command::new(NGCTL).args(["dump", "--json", "--shm", seg.to_str().unwrap()]));
    let entry = dump["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["transport"] == "udp")
        .expect("the udp entry");
    assert_eq!(entry["latency"], probe["latency"]);
    records(entry, 300);
    // And its text table shows them.
    let text = String::from_utf8(stdout_of(Command::new(NGCTL).args([
        "dump",
        "--shm",
        seg.to_str().unwrap(),
    ])))
    .unwrap();
    assert!(
        text.contains("nearest rank of 300 samples per size"),
        "{text}"
    );
    let _ = std::fs::remove_file(&seg);
}
