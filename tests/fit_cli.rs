//! `ngctl fit`: a saved `ngctl probe --json --raw` re-fits to the same
//! parameters, publishes like a probe, and a file without raw samples or
//! not JSON at all is one clear line and a non-zero exit.

use std::process::Command;

mod common;
use common::{json_of, stdout_of};

const NGCTL: &str = env!("CARGO_BIN_EXE_ngctl");

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("ngfit-{}-{name}", std::process::id()))
}

fn run(args: &[&str]) -> std::process::Output {
    Command::new(NGCTL).args(args).output().expect("ngctl")
}

#[test]
fn saved_probe_refits_to_the_same_parameters() {
    let model = "L=5960,o=4720,g=5140,G=0.73,S=12288,jitter=0.01,seed=3";
    let probe = stdout_of(Command::new(NGCTL).args([
        "probe",
        "--transport",
        "sim",
        "--model",
        model,
        "--json",
        "--raw",
    ]));
    let saved = tmp("probe.json");
    std::fs::write(&saved, &probe).unwrap();
    let p: serde_json::Value = serde_json::from_slice(&probe).unwrap();
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

    let d = json_of(
        Command::new(NGCTL)
            .args(["dump", "--json", "--shm"])
            .arg(&seg),
    );
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
    let out = run(&["fit", no_raw.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no raw samples") && err.contains("--raw"),
        "{err}"
    );

    let garbage = tmp("garbage.json");
    std::fs::write(&garbage, b"{\"raw\": {\"sizes\": 7}}").unwrap();
    let out = run(&["fit", garbage.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not the JSON of `ngctl probe --json --raw`"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let out = run(&["fit", "/nonexistent/p.json"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read /nonexistent/p.json"));
    let _ = std::fs::remove_file(&no_raw);
    let _ = std::fs::remove_file(&garbage);
}
