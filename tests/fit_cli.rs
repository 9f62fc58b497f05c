//! `ngctl fit`: a saved `ngctl probe --json --raw` re-fits to the same
//! parameters, publishes like a probe, and a file without raw samples or
//! not JSON at all is one clear line and a non-zero exit.

use std::process::Command;

mod common;
use common::{dump_json, json_of, ngctl, sim_probe, stdout_of, tmp_path, NGCTL};

fn tmp(name: &str) -> std::path::PathBuf {
    tmp_path("ngfit", name)
}

#[test]
fn saved_probe_refits_to_the_same_parameters() {
    let model = "L=5960,o=4720,g=5140,G=0.73,S=12288,jitter=0.01,seed=3";
    let probe = stdout_of(sim_probe(model).arg("--raw"));
    let saved = tmp("probe.json");
    std::fs::write(&saved, &probe).unwrap();
    let p = common::cli_json(&probe);
    assert_eq!(p["S_bytes"], 12288, "the sim's S");

    let seg = tmp("seg");
    let f = json_of(
        Command::new(NGCTL)
            .args([
                "fit",
                "--json",
                "--publish",
                "--peer",
                "n1",
                "--transport",
                "udp",
                "--shm",
            ])
            .arg(&seg)
            .arg(&saved),
    );
    // The same numbers up to float rounding (the JSON round trip is exact,
    // the order of a few sums is not).
    let close = |a: &serde_json::Value, b: &serde_json::Value, what: &str| {
        let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
        assert!(
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1e-3),
            "{what}: {x} vs {y}"
        );
    };
    for key in ["eel_ns", "g_ns", "G_ns_per_byte", "o_s_ns", "o_r_ns"] {
        close(&f[key], &p[key], key);
    }
    assert_eq!(f["S_bytes"], p["S_bytes"]);
    let (fr, pr) = (
        f["ranges"].as_array().unwrap(),
        p["ranges"].as_array().unwrap(),
    );
    assert_eq!(fr.len(), pr.len());
    for (a, b) in fr.iter().zip(pr) {
        for (k, v) in a.as_object().unwrap() {
            close(v, &b[k], k);
        }
    }

    let d = dump_json(&seg);
    let e = &d["entries"][0];
    assert_eq!(
        (e["peer"].as_str(), e["transport"].as_str()),
        (Some("n1"), Some("udp"))
    );
    assert_eq!(e["S_bytes"], 12288);
    let _ = std::fs::remove_file(&saved);
    let _ = std::fs::remove_file(&seg);
}

#[test]
fn files_without_raw_samples_are_refused_clearly() {
    // A probe saved without --raw.
    let probe = stdout_of(Command::new(NGCTL).args(["probe", "--transport", "sim", "--json"]));
    let no_raw = tmp("noraw.json");
    std::fs::write(&no_raw, probe).unwrap();
    let out = ngctl(&["fit", no_raw.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no raw samples") && err.contains("--raw"),
        "{err}"
    );

    let garbage = tmp("garbage.json");
    std::fs::write(&garbage, b"{\"raw\": {\"sizes\": 7}}").unwrap();
    let out = ngctl(&["fit", garbage.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not the JSON of `ngctl probe --json --raw`"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let out = ngctl(&["fit", "/nonexistent/p.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/p.json"));
    let _ = std::fs::remove_file(&no_raw);
    let _ = std::fs::remove_file(&garbage);
}

/// A saved MPI probe's all-ranks exchange sweep (4 ranks on 2 cores, one
/// of the runs of bench/mpi.md) re-fits, is published beside the pair entry as
/// mpi-x4, and `ngctl predict` prices the all-ranks steps of 4 ranks with
/// it (and only those of 4 ranks).
#[test]
fn exchange_sweep_refits_publishes_and_is_used_by_predict() {
    let probe = stdout_of(sim_probe("L=2000,o=400,g=500,G=0.08,S=4096,seed=5").arg("--raw"));
    let mut p = common::cli_json(&probe);
    let x: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/exchange/mpi-4ranks-2cores.json"
        ))
        .unwrap(),
    )
    .unwrap();
    p["raw"]["exchange"] = x;
    let saved = tmp("xprobe.json");
    std::fs::write(&saved, serde_json::to_vec(&p).unwrap()).unwrap();
    let seg = tmp("xseg");
    let f = json_of(
        Command::new(NGCTL)
            .args(["fit", "--json", "--publish", "--peer", "n1"])
            .args(["--transport", "mpi", "--shm"])
            .arg(&seg)
            .arg(&saved),
    );
    let ex = &f["exchange"];
    assert_eq!(ex["ranks"], 4);
    let ranges = ex["ranges"].as_array().unwrap();
    let points = ex["points"].as_array().unwrap();
    assert!(points.len() >= 40, "{} sizes", points.len());
    assert!((2..=8).contains(&ranges.len()), "{ranges:?}");
    let line = |s: f64| {
        let r = ranges
            .iter()
            .rev()
            .find(|r| r["from_bytes"].as_f64().unwrap() <= s)
            .unwrap_or(&ranges[0]);
        r["step_ns"].as_f64().unwrap() + (s - 1.0) * r["G_ns_per_byte"].as_f64().unwrap()
    };
    // The ranges follow the measured medians.
    let mut dev: Vec<f64> = points
        .iter()
        .map(|q| {
            let (s, t) = (
                q["size_bytes"].as_f64().unwrap(),
                q["step_ns"].as_f64().unwrap(),
            );
            (line(s) - t).abs() / t
        })
        .collect();
    dev.sort_by(f64::total_cmp);
    assert!(
        dev[dev.len() / 2] < 0.05,
        "median deviation {}",
        dev[dev.len() / 2]
    );
    assert!(
        dev[dev.len() * 9 / 10] < 0.25,
        "90th percentile {}",
        dev[dev.len() * 9 / 10]
    );
    // Rendezvous: one exchange of 4 KiB costs clearly more than of 2 KiB.
    assert!(line(4096.0) > 1.2 * line(2048.0), "{ranges:?}");

    // predict: recursive doubling of 1 MiB on 4 ranks with γ = 0 is
    // 2·X(1 MiB) from the published exchange; on 8 ranks there is none.
    let predict = |ranks: &str| {
        json_of(
            Command::new(NGCTL)
                .args([
                    "predict",
                    "allreduce",
                    "--ranks",
                    ranks,
                    "--bytes",
                    "1048576",
                ])
                .args([
                    "--gamma-ns-per-byte",
                    "0",
                    "--cores",
                    "2",
                    "--json",
                    "--shm",
                ])
                .arg(&seg),
        )
    };
    let p4 = predict("4");
    assert_eq!(p4["measured_exchange"], true);
    let rd = p4["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["algorithm"] == "recursive_doubling")
        .unwrap()["predicted_ns"]
        .as_f64()
        .unwrap();
    let want = 2.0 * line(1048576.0);
    assert!((rd - want).abs() <= 1e-6 * want, "{rd} vs {want}");
    assert_eq!(predict("8")["measured_exchange"], false);
    let _ = std::fs::remove_file(&seg);
    let _ = std::fs::remove_file(&saved);
}
