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
//!
//! `mpich_tests`, `ompi_tests`: the tests that run an export's consumer,
//! MPICH 4.0 or Open MPI 4.1, run where the build host has that MPI's
//! compiler and launcher on PATH (`mpicc.mpich` and `mpirun.mpich`,
//! `mpicc.openmpi` and `mpirun.openmpi`: scripts/install-deps.sh installs
//! both, as CI does). `NETGAUGED_MPICH_TESTS` / `NETGAUGED_OMPI_TESTS`
//! override the choice.
//!
//! `simgrid_tests`: the tests that run SimGrid's SMPI on the exported
//! platform run where `smpicc` and `smpirun` are on PATH (Debian's
//! libsimgrid-dev: scripts/install-deps.sh installs it, as CI does).
//! `NETGAUGED_SIMGRID_TESTS` overrides the choice.
//!
//! `loggopsim_tests`: the tests that run LogGOPSim, which the project does
//! not build or ship, run where `LOGGOPSIM` and `TXT2BIN` name its two
//! binaries (bench/exports.sh sets them).

fn main() {
    switch("netns_tests", "NETGAUGED_NETNS_TESTS", || {
        effective_uid() == Some(0)
    });
    switch("tsc_tests", "NETGAUGED_TSC_TESTS", invariant_tsc);
    switch("mpich_tests", "NETGAUGED_MPICH_TESTS", || {
        on_path(&["mpicc.mpich", "mpirun.mpich"])
    });
    switch("ompi_tests", "NETGAUGED_OMPI_TESTS", || {
        on_path(&["mpicc.openmpi", "mpirun.openmpi"])
    });
    switch("simgrid_tests", "NETGAUGED_SIMGRID_TESTS", || {
        on_path(&["smpicc", "smpirun"])
    });
    println!("cargo:rerun-if-env-changed=LOGGOPSIM");
    println!("cargo:rerun-if-env-changed=TXT2BIN");
    switch("loggopsim_tests", "NETGAUGED_LOGGOPSIM_TESTS", || {
        ["LOGGOPSIM", "TXT2BIN"]
            .iter()
            .all(|v| std::env::var_os(v).is_some_and(|p| executable(std::path::Path::new(&p))))
    });
}

/// Whether every program is an executable file in a directory of PATH.
fn on_path(programs: &[&str]) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    programs
        .iter()
        .all(|p| std::env::split_paths(&path).any(|d| executable(&d.join(p))))
}

/// Whether `p` is a regular file someone may execute.
fn executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
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
