//! The conventions every `ngctl` subcommand follows: help that fits 80
//! columns with an example, man pages and completions from the CLI
//! definition, JSON that follows docs/ngctl.schema.json, CSV, -q,
//! distinct exit codes, contradictory flags refused, the only entry taken
//! or the entries listed, no colour codes in a redirected log.

mod common;

use std::path::Path;
use std::process::Command;

use common::{cli_json, ngctl, publish_sim, text, tmp_path, NGCTL};

const SUBCOMMANDS: &[&str] = &[
    "clock",
    "serve",
    "fit",
    "probe",
    "plot",
    "status",
    "predict",
    "export",
    "dump",
    "contention",
    "ebb",
    "overlap",
    "quiet",
    "resume",
    "matrix",
    "completions",
    "man",
];

/// A segment with one sim entry (peer "sim", transport "sim").
fn segment(name: &str) -> String {
    let seg = tmp_path("ng-cli", name);
    let _ = std::fs::remove_file(&seg);
    let seg = seg.display().to_string();
    let out = publish_sim(&seg, "16384", &["--resamples", "20", "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    seg
}

/// A saved `ngctl probe --transport sim --json --raw`, for `ngctl fit`.
fn saved_probe(name: &str) -> std::path::PathBuf {
    common::saved_sim_probe("ng-cli", name, &["--max-size", "4096"])
}

#[test]
fn every_help_fits_80_columns_and_has_an_example() {
    for sub in std::iter::once("").chain(SUBCOMMANDS.iter().copied()) {
        let args: Vec<&str> = [sub, "--help"]
            .into_iter()
            .filter(|a| !a.is_empty())
            .collect();
        let out = ngctl(&args);
        assert!(out.status.success(), "{sub}");
        let help = text(&out.stdout);
        for line in help.lines() {
            assert!(line.chars().count() <= 80, "ngctl {sub} --help: {line:?}");
        }
        assert!(
            help.contains("Example"),
            "ngctl {sub} --help has no example:\n{help}"
        );
    }
}

#[test]
fn man_pages_and_completions_come_from_the_cli() {
    let dir = tmp_path("ng-cli", "man");
    let _ = std::fs::remove_dir_all(&dir);
    let out = ngctl(&["man", dir.to_str().unwrap(), "-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in
        std::iter::once("ngctl".to_string()).chain(SUBCOMMANDS.iter().map(|s| format!("ngctl-{s}")))
    {
        let t = std::fs::read_to_string(dir.join(format!("{page}.1"))).expect(&page);
        assert!(t.starts_with(".ie") || t.contains(".TH"), "{page}");
        assert!(t.contains(".SH NAME"), "{page}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    for shell in ["bash", "zsh", "fish"] {
        let out = ngctl(&["completions", shell]);
        assert!(out.status.success());
        let t = text(&out.stdout);
        assert!(
            t.contains("ngctl") && t.contains("probe") && t.contains("--transport"),
            "{shell}"
        );
    }
}

#[test]
fn every_json_document_follows_the_schema() {
    let seg = segment("json");
    for args in [
        vec!["clock", "--json"],
        vec!["dump", "--json", "--shm", &seg],
        vec![
            "predict", "bcast", "--ranks", "8", "--bytes", "65536", "--json", "--shm", &seg,
        ],
        vec![
            "probe",
            "--transport",
            "sim",
            "--max-size",
            "4096",
            "--resamples",
            "20",
            "--json",
        ],
        vec![
            "probe",
            "--transport",
            "sim",
            "--model",
            "L=1100,o=300,g=450,G=0.08,jitter=0.1",
            "--max-size",
            "1024",
            "--resamples",
            "20",
            "--latency-samples",
            "300",
            "--histogram",
            "--json",
        ],
        vec![
            "overlap",
            "--transport",
            "sim",
            "--model",
            "L=1100,o=300,g=450,G=0.08",
            "--sizes",
            "1,4096",
            "--rounds",
            "5",
            "--json",
        ],
    ] {
        let out = ngctl(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v = cli_json(&out.stdout);
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["command"], args[0], "{args:?}");
        assert!(v["timestamp_unix_ns"].as_u64().unwrap() > 0);
    }
    // status (of a segment a probe published: alive while its heartbeat
    // is fresh; a stopped daemon's exits 3, tests/adversary.rs).
    let out = ngctl(&["status", "--json", "--shm", &seg]);
    let v = cli_json(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(if v["alive"] == true { 0 } else { 3 })
    );
    // The generation is the same 16 hex digits in dump and status.
    let d = cli_json(&ngctl(&["dump", "--json", "--shm", &seg]).stdout);
    assert_eq!(d["generation"], v["generation"]);
    // A probe's document names its transport, peer and clock.
    let p = cli_json(
        &ngctl(&[
            "probe",
            "--transport",
            "sim",
            "--max-size",
            "1024",
            "--json",
        ])
        .stdout,
    );
    assert_eq!(
        (p["transport"].as_str(), p["peer"].as_str()),
        (Some("sim"), Some("sim"))
    );
    assert_eq!(p["clock"], "virtual (sim)");
    // The fit of a saved probe follows it too.
    let saved = saved_probe("raw.json");
    let out = ngctl(&["fit", saved.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(cli_json(&out.stdout)["command"], "fit");
    let _ = std::fs::remove_file(&saved);
    let _ = std::fs::remove_file(&seg);
}

#[test]
#[should_panic(expected = "does not follow docs/ngctl.schema.json")]
fn the_schema_rejects_a_document_without_its_envelope() {
    cli_json(br#"{"eel_ns": 1.0, "ranges": []}"#);
}

#[test]
fn exit_codes_tell_the_failures_apart() {
    let missing = tmp_path("ng-cli", "no-such-segment").display().to_string();
    let code = |args: &[&str]| ngctl(args).status.code();
    assert_eq!(code(&["dump", "--shm", &missing]), Some(4));
    assert_eq!(code(&["status", "--shm", &missing]), Some(4));
    assert_eq!(code(&["probe", "--no-such-flag"]), Some(2));
    let seg = segment("codes");
    assert_eq!(
        code(&[
            "export",
            "--format",
            "netgauge",
            "--shm",
            &seg,
            "--transport",
            "udp"
        ]),
        Some(5)
    );
    let _ = std::fs::remove_file(&seg);
}

#[test]
fn contradictory_flags_are_refused() {
    let refused = |args: &[&str], says: &str| {
        let out = ngctl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(
        &[
            "probe",
            "--transport",
            "sim",
            "--min-size",
            "100",
            "--max-size",
            "10",
        ],
        "--min-size 100",
    );
    refused(
        &[
            "probe",
            "--transport",
            "udp",
            "--peer",
            "127.0.0.1:9",
            "--fanout-peers",
            "4",
        ],
        "--fanout-peers does nothing with --transport udp",
    );
    refused(
        &["probe", "--transport", "udp", "--model", "L=1"],
        "--model does nothing",
    );
    refused(
        &[
            "probe",
            "--transport",
            "sim",
            "--latency-samples",
            "0",
            "--histogram",
        ],
        "--histogram shows the latency run",
    );
    refused(
        &[
            "probe",
            "--transport",
            "sim",
            "--latency-samples",
            "2000000",
        ],
        "--latency-samples 2000000 is out of range",
    );
    refused(&["clock", "--csv"], "--csv");
    refused(&["export", "--format", "smpi", "--bytes", "10"], "--bytes");
    refused(&["dump", "--json", "--csv"], "cannot be used with");
}

#[test]
fn predict_and_export_take_the_only_entry_or_list_them() {
    let seg = segment("entries");
    // One entry (sim over sim): no --transport needed.
    let out = ngctl(&["export", "--format", "loggopsim", "--shm", &seg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("sim over sim"));
    let out = ngctl(&[
        "predict",
        "allreduce",
        "--ranks",
        "4",
        "--bytes",
        "8",
        "--shm",
        &seg,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A second entry: the choice is listed, exit 5.
    let saved = saved_probe("entries-raw.json");
    let out = ngctl(&[
        "fit",
        saved.to_str().unwrap(),
        "--publish",
        "--shm",
        &seg,
        "--peer",
        "other",
        "--transport",
        "udp",
        "-q",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ngctl(&["export", "--format", "loggopsim", "--shm", &seg]);
    assert_eq!(out.status.code(), Some(5));
    let err = text(&out.stderr);
    assert!(
        err.contains("--peer sim --transport sim") && err.contains("--peer other --transport udp"),
        "{err}"
    );
    let out = ngctl(&[
        "export",
        "--format",
        "loggopsim",
        "--shm",
        &seg,
        "--peer",
        "other",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = std::fs::remove_file(&saved);
    let _ = std::fs::remove_file(&seg);
}

#[test]
fn csv_quiet_and_plain_logs() {
    let seg = segment("csv");
    let out = ngctl(&["dump", "--csv", "--shm", &seg]);
    assert!(out.status.success());
    let t = text(&out.stdout);
    let mut lines = t.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("peer,transport,from_bytes,to_bytes,g_ns,"));
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&row[..3], &["sim", "sim", "1"]);
    // -q: the published note is not written; without it, it is.
    let publish = |extra: &[&str]| publish_sim(&seg, "1024", extra);
    assert!(text(&publish(&[]).stderr).contains("published"));
    let quiet = publish(&["-q"]);
    assert!(quiet.status.success());
    assert!(quiet.stderr.is_empty(), "{}", text(&quiet.stderr));
    // A log that is not a terminal has no colour codes.
    let out = Command::new(NGCTL)
        .env("RUST_LOG", "trace")
        .args(["dump", "--shm", &seg])
        .output()
        .unwrap();
    assert!(!out.stderr.contains(&0x1b), "{}", text(&out.stderr));
    // Tables fit 80 columns.
    let model = "L=1100,o=300,g=450,G=0.08,S=16384";
    let outputs = [
        out.stdout,
        ngctl(&[
            "probe",
            "--transport",
            "sim",
            "--model",
            model,
            "--max-size",
            "65536",
            "-q",
        ])
        .stdout,
        ngctl(&[
            "probe",
            "--transport",
            "sim",
            "--model",
            "L=1100,o=300,g=450,G=0.08,jitter=0.3",
            "--max-size",
            "1024",
            "--histogram",
            "-q",
        ])
        .stdout,
        ngctl(&["status", "--shm", &seg]).stdout,
        ngctl(&[
            "overlap",
            "--transport",
            "sim",
            "--model",
            model,
            "--rounds",
            "5",
            "-q",
        ])
        .stdout,
        ngctl(&[
            "contention",
            "--transport",
            "sim",
            "--model",
            model,
            "--rounds",
            "4",
            "-q",
        ])
        .stdout,
    ];
    for o in &outputs {
        assert!(!o.is_empty());
        for line in text(o).lines() {
            assert!(line.chars().count() <= 80, "{line:?}");
        }
    }
    let _ = std::fs::remove_file(&seg);
    assert!(!Path::new(&seg).exists());
}
