//! Publication of contention and overlap (issue 16) through `ngctl`: a
//! simulated conflict probe and overlap test published into a segment show
//! in `ngctl dump`, table and JSON, with the values the probes printed.

use std::process::Command;

mod common;
use common::{dump_json, json_of, sim_probe, stdout_of, tmp_path, NGCTL};

const MODEL: &str = "L=5000,o=400,g=500,G=0.5,S=16384";

#[test]
fn contention_and_overlap_are_published_and_dumped() {
    let seg = tmp_path("ngcont", "seg");
    json_of(sim_probe(MODEL).args(["--publish", "--shm"]).arg(&seg));
    let c = json_of(
        Command::new(NGCTL)
            .args([
                "contention",
                "--transport",
                "sim",
                "--model",
                MODEL,
                "--peers",
                "3",
            ])
            .args([
                "--rounds",
                "4",
                "--resamples",
                "20",
                "--json",
                "--publish",
                "--shm",
            ])
            .arg(&seg),
    );
    let o = json_of(
        Command::new(NGCTL)
            .args([
                "overlap",
                "--transport",
                "sim",
                "--model",
                MODEL,
                "--rounds",
                "4",
            ])
            .args([
                "--sizes",
                "1,4096,65536",
                "--json",
                "--publish",
                "sim",
                "--shm",
            ])
            .arg(&seg),
    );
    let d = dump_json(&seg);

    // The udp record of the segment carries the probe's outgoing penalties.
    let t = &d["transports"][0];
    assert_eq!(t["transport"], "sim");
    let published = t["penalties"]["outgoing"]["k"].as_array().unwrap();
    let measured = c["fit"]["outgoing"].as_array().unwrap();
    assert_eq!(published.len(), measured.len());
    for (p, m) in published.iter().zip(measured) {
        let (p, m) = (
            p["value"].as_f64().unwrap(),
            m["penalty"]["value"].as_f64().unwrap(),
        );
        assert!((p - m).abs() < 1e-9, "{p} vs {m}");
    }
    // In the simulator k flows out of one NIC share it: penalty ≈ k.
    let k3 = published[2]["value"].as_f64().unwrap();
    assert!((k3 / 3.0 - 1.0).abs() < 0.1, "k = 3: {k3}");

    // Overlap: one record per range of the entry, each from a measured size.
    let ranges = d["entries"][0]["ranges"].as_array().unwrap().len();
    let ov = &d["overlap"][0];
    assert_eq!(ov["peer"], "sim");
    let recs = ov["ranges"].as_array().unwrap();
    assert_eq!(recs.len(), ranges);
    let measured: Vec<f64> = o["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["recv"]["value"].as_f64().unwrap())
        .collect();
    for r in recs {
        let v = r["recv"]["value"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&v), "{r}");
        assert!(
            measured.iter().any(|m| (m - v).abs() < 1e-9),
            "{v} not measured"
        );
    }

    let text = String::from_utf8_lossy(&stdout_of(
        Command::new(NGCTL).args(["dump", "--shm"]).arg(&seg),
    ))
    .into_owned();
    assert!(text.contains("bandwidth sharing"), "{text}");
    assert!(text.contains("CPU overlap"), "{text}");
    let _ = std::fs::remove_file(&seg);
}
