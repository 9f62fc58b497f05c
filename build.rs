//! Build-time switches of the test suite.
//!
//! `netns_tests`: the tests that need root (network namespaces, veth pairs,
//! CAP_NET_RAW) are compiled to run only in a build made as root, the way CI
//! builds; in any other build the test runner lists them as ignored, with
//! the reason, instead of letting them pass without running.
//! `NETGAUGED_NETNS_TESTS=1` or `=0` overrides the choice.

fn main() {
    println!("cargo:rustc-check-cfg=cfg(netns_tests)");
    println!("cargo:rerun-if-env-changed=NETGAUGED_NETNS_TESTS");
    let forced = std::env::var("NETGAUGED_NETNS_TESTS").ok();
    let enabled = match forced.as_deref() {
        Some("1") => true,
        Some("0") => false,
        _ => effective_uid() == Some(0),
    };
    if enabled {
        println!("cargo:rustc-cfg=netns_tests");
    }
}

/// The effective user id of the build, from /proc (no dependency needed).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Uid: real effective saved filesystem
    line.split_whitespace().nth(2)?.parse().ok()
}
