//! `ngctl probe --publish` and `ngctl dump`: the JSON of a published entry
//! uses `ngctl probe --json`'s field names; a missing or corrupt segment is
//! one clear line and a non-zero exit.

mod common;
use common::{dump_json, json_of, ngctl, sim_probe, tmp_path};
use netgauged::model::fit::FIRST_RANGE_KEYS;

fn tmp(name: &str) -> std::path::PathBuf {
    tmp_path("ngdump", name)
}

#[test]
fn published_sim_probe_dumps_with_probe_field_names() {
    let seg = tmp("seg");
    let model = "L=5960,o=4720,g=5140,G=0.73,S=12288";
    let p = json_of(sim_probe(model).args(["--publish", "--shm"]).arg(&seg));
    let d = dump_json(&seg);
    let e = &d["entries"][0];
    assert_eq!(e["peer"], "sim");
    assert_eq!(e["transport"], "sim");
    for k in FIRST_RANGE_KEYS.into_iter().chain(["S_bytes"]) {
        assert_eq!(
            e[k], p[k],
            "{k} differs between probe --json and dump --json"
        );
    }
    assert_eq!(e["ranges"], p["ranges"]);
    assert_eq!(e["S_bytes"], 12288);
    let human = ngctl(&["dump", "--shm", seg.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("sim over sim") && text.contains("12288 B"),
        "{text}"
    );
    let _ = std::fs::remove_file(&seg);
}

#[test]
fn missing_or_corrupt_segments_are_one_clear_line() {
    let missing = tmp("missing");
    let corrupt = tmp("corrupt");
    std::fs::write(&corrupt, vec![0x5au8; 8192]).unwrap();
    // Exit codes: 4 no segment, 1 a segment that cannot be read.
    for (path, why, code) in [
        (&missing, "no segment at", 4),
        (&corrupt, "invalid segment", 1),
    ] {
        for cmd in ["dump", "status"] {
            let out = ngctl(&[cmd, "--shm", path.to_str().unwrap()]);
            assert_eq!(out.status.code(), Some(code), "{cmd} on {path:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim_end().lines().count(), 1, "{cmd}: {err}");
            assert!(err.contains(why), "{cmd}: {err}");
        }
    }
    let _ = std::fs::remove_file(&corrupt);
}
