//! Reading running daemons from the tests: polling with a deadline and
//! `ngctl`'s JSON view of a segment.
#![allow(dead_code)] // each test file uses its own part of the helpers

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Poll `f` every `every` for up to `limit`: a bound so a broken daemon
/// fails the test instead of hanging it, not a timing assertion. `f` runs
/// at least once, and once more at the deadline.
pub fn wait_every<T>(
    every: Duration,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// [`wait_every`] 200 ms: each poll of a segment runs `ngctl`, which the
/// busy-polling daemons of a two-core machine share the cores with.
pub fn wait_for<T>(limit: Duration, f: impl FnMut() -> Option<T>) -> Option<T> {
    wait_every(Duration::from_millis(200), limit, f)
}

/// `ngctl <what> --json --shm <shm>`, parsed and checked against the
/// schema ([`super::cli_json`]), if `ngctl` succeeds.
pub fn ngctl_json(what: &str, shm: &Path) -> Option<serde_json::Value> {
    let out = Command::new(super::NGCTL)
        .args([what, "--json", "--shm"])
        .arg(shm)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| Some(super::cli_json(&out.stdout)))?
}

/// `ngctl dump --json` of a segment.
pub fn dump(shm: &Path) -> Option<serde_json::Value> {
    ngctl_json("dump", shm)
}

/// The segment's entry for `peer` (over `transport`, if given).
pub fn entry(shm: &Path, peer: &str, transport: Option<&str>) -> Option<serde_json::Value> {
    dump(shm)?["entries"]
        .as_array()?
        .iter()
        .find(|e| e["peer"] == peer && transport.is_none_or(|t| e["transport"] == t))
        .cloned()
}

/// Whether an entry carries `flag` ("stale", "restored", "changed", …).
pub fn has_flag(e: &serde_json::Value, flag: &str) -> bool {
    e["flags"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == flag))
}
