//! Build-time switches of the test suite.
//!
//! `netns_tests`: the tests that need root (network namespaces, veth pairs,
//! CAP_NET_RAW) are compiled to run only in a build made as root, the way CI
//! builds; in any other build the test runner lists them as ignored, with
//! the reason, instead of letting them pass without running.
//! `NETGAUGED_NETNS_TESTS=1` or `=0` overrides the choice.
//!
//! `tsc_tests`: the tests of the TSC clock run where the build host has an
//! invariant TSC (Linux lists `constant_tsc` and `nonstop_tsc` in
//! /proc/cpuinfo); elsewhere they are listed as ignored, with the reason.
//! `NETGAUGED_TSC_TESTS=1` or `=0` overrides the choice.

fn main() {
    switch("netns_tests", "NETGAUGED_NETNS_TESTS", || {
        effective_uid() == Some(0)
    });
    switch("tsc_tests", "NETGAUGED_TSC_TESTS", invariant_tsc);
}

/// Declares cfg `name` and sets it when `env` says `1`, or, unset, when
/// `detect` finds the environment the tests need.
fn switch(name: &str, env: &str, detect: impl FnOnce() -> bool) {
    println!("cargo:rustc-check-cfg=cfg({name})");
    println!("cargo:rerun-if-env-changed={env}");
    let enabled = match std::env::var(env).ok().as_deref() {
        Some("1") => true,
        Some("0") => false,
        _ => detect(),
    };
    if enabled {
        println!("cargo:rustc-cfg={name}");
    }
}

/// Whether the build host's CPU flags name an invariant TSC.
fn invariant_tsc() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    info.lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| {
            let has = |f: &str| l.split_whitespace().any(|x| x == f);
            has("constant_tsc") && has("nonstop_tsc")
        })
}

/// The effective user id of the build, from /proc (no dependency needed).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    // Uid: real effective saved filesystem
    line.split_whitespace().nth(2)?.parse().ok()
}
