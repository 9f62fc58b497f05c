//! Running `ngctl serve` and `ngctl probe` against each other.

use std::process::{Child, Output};
use std::sync::{Mutex, MutexGuard};

/// Client and server both busy-poll: two such pairs at once on a two-core
/// machine measure the scheduler, not the network. Hold this while a test
/// runs one.
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A child process killed and reaped on drop (a server the test is done
/// with, also when the test fails).
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The JSON of a successful `ngctl probe --json` of a socket transport,
/// checked for sane values: EEL and g between 100 ns (resp. 0) and 1 ms,
/// no negative G, a receive overhead, probe traffic.
pub fn sane_probe(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = super::cli_json(&out.stdout);
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
    assert!(v["probe_bytes"].as_u64().unwrap_or(0) > 0);
    v
}
