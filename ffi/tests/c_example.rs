//! The C side: install.sh into a temporary prefix, build examples/lookup.c
//! with exactly `cc lookup.c $(pkg-config --cflags --libs netgauge)`, run it
//! against a segment; and build tests/c/seccomp_lookup.c against the static
//! library to prove zero system calls from C.
//!
//! Needs `cc` and `pkg-config` (Debian: build-essential pkg-config); the test
//! fails, rather than skips, without them.

mod common;

use common::*;
use netgauge::SegmentWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding the libnetgauge.{so,a} cargo built with this test.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    // deps/ holds the copy built with this test; target/<profile>/ may hold
    // an older uplifted one.
    for d in [deps, deps.parent().unwrap()] {
        if d.join("libnetgauge.so").is_file() && d.join("libnetgauge.a").is_file() {
            return d.to_path_buf();
        }
    }
    panic!("libnetgauge.so / .a not found next to {}", exe.display());
}

fn sh(cmd: &str, env: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("cannot run sh");
    assert!(
        out.status.success(),
        "`{cmd}` failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

struct TmpDir(PathBuf);

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn example_builds_with_pkg_config_and_prints_a_lookup() {
    let prefix = TmpDir(std::env::temp_dir().join(format!("ng-prefix-{}", std::process::id())));
    std::fs::create_dir_all(&prefix.0).unwrap();
    let install = crate_dir().join("install.sh");
    sh(
        &format!("'{}'", install.display()),
        &[
            ("PREFIX", &prefix.0),
            ("NG_LIB_DIR", &lib_dir()),
            ("NG_NO_LDCONFIG", Path::new("1")),
        ],
    );
    let lib = prefix.0.join("lib");
    for f in [
        "libnetgauge.so",
        "libnetgauge.so.1",
        "libnetgauge.a",
        "pkgconfig/netgauge.pc",
    ] {
        assert!(lib.join(f).exists(), "{f} not installed");
    }
    assert!(prefix.0.join("include/netgauge.h").is_file());
    let pc = std::fs::read_to_string(lib.join("pkgconfig/netgauge.pc")).unwrap();
    assert!(pc.contains(&format!("prefix={}", prefix.0.display())));

    // The example, built exactly as the README says.
    let exe = prefix.0.join("lookup");
    let example = crate_dir().join("examples/lookup.c");
    sh(
        &format!(
            "cc -std=c11 -Wall -Wextra -Werror '{}' $(pkg-config --cflags --libs netgauge) -o '{}'",
            example.display(),
            exe.display()
        ),
        &[("PKG_CONFIG_PATH", &lib.join("pkgconfig"))],
    );

    let seg = TmpPath::new("cexample");
    let mut w = SegmentWriter::create_or_open(&seg.0, 8, "node001", "tsc").unwrap();
    w.upsert(&sample_entry("node002", "rdma")).unwrap();
    let out = Command::new(&exe)
        .args([seg.0.to_str().unwrap(), "node002", "rdma", "101"])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "lookup failed: {out:?}");
    // o_s + L + 100·G + o_r = 300 + 950 + 10 + 250
    assert!(
        stdout.contains("node002/rdma 101 B: range [1, 8191] EEL=1500.0 ns L=950.0 ns o_s=300.0 ns o_r=250.0 ns g=500.0 ns G=0.1000 ns/B"),
        "{stdout}"
    );
    assert!(stdout.contains("predicted=1510.0 ns"), "{stdout}");
    assert!(stdout.contains("index 0: predicted 1510.0 ns"), "{stdout}");

    // Errors come back as codes and messages.
    let out = Command::new(&exe)
        .args([seg.0.to_str().unwrap(), "node404", "rdma", "1"])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown peer or transport"));
    let out = Command::new(&exe)
        .args(["/nonexistent/segment", "node002", "rdma", "1"])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // NULL path: $NETGAUGE_SEGMENT.
    let out = Command::new(&exe)
        .args(["-", "node002", "rdma", "101"])
        .env("LD_LIBRARY_PATH", &lib)
        .env("NETGAUGE_SEGMENT", &seg.0)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    drop(w);
}

#[test]
fn c_program_under_seccomp_makes_no_system_call() {
    let dir = TmpDir(std::env::temp_dir().join(format!("ng-cseccomp-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let exe = dir.0.join("seccomp_lookup");
    let src = crate_dir().join("tests/c/seccomp_lookup.c");
    sh(
        &format!(
            "cc -std=gnu11 -O2 -Wall -Werror -I'{}' '{}' '{}' -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o '{}'",
            crate_dir().join("include").display(),
            src.display(),
            lib_dir().join("libnetgauge.a").display(),
            exe.display()
        ),
        &[],
    );
    let seg = TmpPath::new("cseccomp");
    let mut w = SegmentWriter::create_or_open(&seg.0, 16, "node001", "tsc").unwrap();
    for i in 0..10 {
        w.upsert(&derived_entry(&format!("node{i:03}"), "rdma", i))
            .unwrap();
    }
    let out = Command::new(&exe)
        .args([seg.0.to_str().unwrap(), "10", "1000000"])
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        (out.status.code(), out.status.signal()),
        (Some(0), None),
        "C reader under seccomp: {out:?} (signal 31 = SIGSYS: a system call was made)"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "seccomp_lookup: ok\n");
    drop(w);
}
