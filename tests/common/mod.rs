//! Helpers shared by the integration tests.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The `ngctl` binary of this build.
pub const NGCTL: &str = env!("CARGO_BIN_EXE_ngctl");

/// A path in the temporary directory, unique to this test process:
/// `<tmp>/<prefix>-<pid>-<name>`.
pub fn tmp_path(prefix: &str, name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()))
}

/// `ngctl probe --transport sim --model <model> --json`; callers add
/// their own arguments.
pub fn sim_probe(model: &str) -> Command {
    let mut cmd = Command::new(NGCTL);
    cmd.args(["probe", "--transport", "sim", "--model", model, "--json"]);
    cmd
}

/// Runs `cmd`, asserts that it succeeded (its stderr as the message if
/// not) and returns its stdout.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`stdout_of`], parsed as JSON.
pub fn json_of(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_slice(&stdout_of(cmd)).expect("JSON on stdout")
}

/// The sanity checks of a probe over a socket (`ngctl probe --json`):
/// EEL and g between 100 ns and 1 ms (a millisecond-scale g is a
/// Nagle-like artefact), no negative G, and a receive overhead.
#[track_caller]
pub fn assert_socket_probe_sane(v: &serde_json::Value) {
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let eel = num("eel_ns");
    assert!(eel > 100.0 && eel < 1e6, "EEL {eel} ns");
    let g = num("g_ns");
    assert!(
        g > 0.0 && g < 1e6,
        "g {g} ns is not sane (a millisecond-scale g is a Nagle-like artefact)"
    );
    for r in v["ranges"].as_array().expect("ranges") {
        let big_g = r["G_ns_per_byte"].as_f64().expect("G");
        assert!(big_g >= 0.0, "negative G in range {r}");
    }
    assert!(num("o_r_ns") > 0.0, "a socket has a receive overhead");
}
