//! The C side: install.sh into a temporary prefix, build examples/lookup.c
//! with exactly `cc lookup.c $(pkg-config --cflags --libs netgauge)`, run it
//! against a segment; build tests/c/ext_dump.c and compare every ABI 1.1
//! field it prints with what was written; and build tests/c/seccomp_lookup.c
//! against the static library to prove zero system calls from C.
//!
//! Needs `cc` and `pkg-config` (Debian: build-essential pkg-config); the test
//! fails, rather than skips, without them.

mod common;

use common::*;
use netgauge::{EntryData, Estimate, Scheme, SegmentWriter, Status, TransportExt};
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sh(cmd: &str, env: &[(&str, &Path)]) -> std::process::Output {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd);
    for (k, v) in env {
        c.env(k, v);
    }
    run(&mut c, &format!("`{cmd}`"))
}

struct TmpDir(PathBuf);

impl TmpDir {
    /// A new directory `<tmp>/ng-<tag>-<pid>`, removed on drop.
    fn new(tag: &str) -> TmpDir {
        let d = TmpDir(std::env::temp_dir().join(format!("ng-{tag}-{}", std::process::id())));
        std::fs::create_dir_all(&d.0).unwrap();
        d
    }
}

/// Builds `tests/c/<name>.c` with `cflags` against the static library
/// into `dir`; returns the program's path.
fn cc_static(name: &str, cflags: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    sh(
        &format!(
            "cc {cflags} -I'{}' '{}' '{}' -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o '{}'",
            crate_dir().join("include").display(),
            crate_dir().join(format!("tests/c/{name}.c")).display(),
            lib_dir().join("libnetgauge.a").display(),
            exe.display()
        ),
        &[],
    );
    exe
}

impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn example_builds_with_pkg_config_and_prints_a_lookup() {
    let prefix = TmpDir::new("prefix");
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
    let seg_path = seg.0.to_str().unwrap();
    // The example with the installed shared library: `lookup SEGMENT PEER
    // TRANSPORT SIZE` (SEGMENT "-": $NETGAUGE_SEGMENT).
    let lookup = |args: [&str; 4]| {
        Command::new(&exe)
            .args(args)
            .env("LD_LIBRARY_PATH", &lib)
            .env("NETGAUGE_SEGMENT", &seg.0)
            .output()
            .unwrap()
    };
    let mut w = SegmentWriter::create_or_open(&seg.0, 8, "node001", "tsc").unwrap();
    w.upsert(&sample_entry("node002", "rdma")).unwrap();
    let out = lookup([seg_path, "node002", "rdma", "101"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "lookup failed: {out:?}");
    // o_s + L + 100·G + o_r = 300 + 950 + 10 + 250
    assert!(
        stdout.contains("node002/rdma 101 B: range [1, 8191] EEL=1500.0 ns L=950.0 ns o_s=300.0 ns o_r=250.0 ns g=500.0 ns G=0.1000 ns/B"),
        "{stdout}"
    );
    assert!(stdout.contains("predicted=1510.0 ns"), "{stdout}");
    assert!(
        stdout.contains("range 0: g not_assessed, G not_assessed, EEL not_assessed\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("bandwidth"), "{stdout}");
    assert!(stdout.contains("index 0: predicted 1510.0 ns"), "{stdout}");

    // ABI 1.1: statuses and bandwidth, and a peer answered from its class.
    w.upsert(&sample_entry_ext("node003", "raw")).unwrap();
    w.upsert(&sample_entry_ext("@rack1", "raw")).unwrap();
    w.set_peer_classes([("node004", "@rack1")]).unwrap();
    for (peer, class) in [
        ("node003", ""),
        ("node004", " (values of the peer's coverage class)"),
    ] {
        let out = lookup([seg_path, peer, "raw", "10000"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "lookup failed: {out:?}");
        assert!(
            stdout.contains(&format!(
                "range 1: g negative, G identified, EEL identified{class}\n"
            )),
            "{stdout}"
        );
        // 8 bits / 8.6 ns per byte.
        assert!(
            stdout.contains("sustained bandwidth 0.930 Gb/s (G identified)"),
            "{stdout}"
        );
    }

    // Errors come back as codes and messages.
    let out = lookup([seg_path, "node404", "rdma", "1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown peer or transport"));
    let out = lookup(["/nonexistent/segment", "node002", "rdma", "1"]);
    assert_eq!(out.status.code(), Some(2));
    // NULL path: $NETGAUGE_SEGMENT.
    let out = lookup(["-", "node002", "rdma", "101"]);
    assert!(out.status.success(), "{out:?}");
    drop(w);
}

#[test]
fn c_program_under_seccomp_makes_no_system_call() {
    let dir = TmpDir::new("cseccomp");
    let exe = cc_static("seccomp_lookup", "-std=gnu11 -O2 -Wall -Werror", &dir.0);
    let seg = TmpPath::new("cseccomp");
    let mut w = SegmentWriter::create_or_open(&seg.0, 16, "node001", "tsc").unwrap();
    for i in 0..10 {
        w.upsert(&derived_entry(&format!("node{i:03}"), "rdma", i))
            .unwrap();
    }
    w.upsert(&derived_entry("@rack", "rdma", 500)).unwrap();
    let mapped: Vec<String> = (0..10).map(|i| format!("peer{i:03}")).collect();
    w.set_peer_classes(mapped.iter().map(|p| (p.as_str(), "@rack")))
        .unwrap();
    w.set_transport_ext("rdma", &sample_transport_ext(0.0))
        .unwrap();
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

fn est(name: &str, e: &Estimate) -> String {
    format!(" {name}={:.3} [{:.3}, {:.3}]", e.value, e.lo, e.hi)
}

/// What ext_dump.c must print for entry `e`, class entry `class` (for the
/// mapped peer) and record `t`.
fn expected_dump(e: &EntryData, mapped: &str, class: &EntryData, t: &TransportExt) -> String {
    let x = &e.ext;
    let id = &x.ident;
    let mut s = format!(
        "ext present=15 n_latency={} n_overlap={} instability=0 checked={} changed={}\n",
        x.latency.len(),
        x.overlap.len(),
        x.checked_unix_ns,
        x.changed_unix_ns
    );
    s += &format!("ident entry={:016x}", id.entry);
    for w in id.range {
        s += &format!(" {w:016x}");
    }
    s += "\n";
    use netgauge::{Field, RangeField};
    s += &format!(
        "status EEL={} S={} G_sustained={} g0={} g1={} overlap_recv1={}\n",
        id.get(Field::Eel).name(),
        id.get(Field::S).name(),
        id.get(Field::SustainedG).name(),
        id.get_range(0, RangeField::Gap).name(),
        id.get_range(1, RangeField::Gap).name(),
        id.get_range(1, RangeField::OverlapRecv).name()
    );
    let b = x.bandwidth.unwrap();
    s += &format!(
        "bandwidth{}{} burst_bytes={} regime={} range={}\n",
        est("sustained", &b.sustained_G_ns_per_byte),
        est("burst", &b.burst_G_ns_per_byte),
        b.burst_bytes,
        b.regime,
        b.range_index
    );
    for l in &x.latency {
        s += &format!(
            "latency size={} samples={} min={:.3} p50={:.3} p90={:.3} p99={:.3} p999={:.3} max={:.3}\n",
            l.size_bytes, l.samples, l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns
        );
    }
    for (i, o) in x.overlap.iter().enumerate() {
        s += &format!(
            "overlap {i}{}{}\n",
            est("send", &o.send),
            est("recv", &o.recv)
        );
    }
    let flags = e.flags
        | netgauge::flags::HAS_S
        | netgauge::flags::HAS_LOGFP
        | netgauge::flags::HAS_LOGGPS
        | netgauge::flags::UNIDENTIFIED
        | netgauge::flags::SHAPED;
    s += &format!(
        "lookup range=1 from=8192 g={} G={} flags={flags:#x}\n",
        id.get_range(1, RangeField::Gap).name(),
        id.get_range(1, RangeField::GapPerByte).name()
    );
    s += &format!(
        "class peer={mapped} class={} class_flag=1 eel={:.3}\n",
        class.peer, class.eel_ns
    );
    s += &format!(
        "transport present={} n_k={},{},{} status={:016x} at={}\n",
        t.present, t.n_k[0], t.n_k[1], t.n_k[2], t.status, t.contention_unix_ns
    );
    for sc in Scheme::ALL {
        for (k, p) in t.penalties(sc).iter().enumerate() {
            s += &format!(
                "penalty scheme={} k={}{}\n",
                sc as usize,
                k + 1,
                est("p", p)
            );
        }
    }
    let [beta, go, gi] = t.sharing().unwrap();
    s += &format!(
        "sharing{}{}{} gamma_i_status={}\n",
        est("beta", &beta),
        est("gamma_o", &go),
        est("gamma_i", &gi),
        t.status(netgauge::TransportField::GammaI).name()
    );
    let bi = t.bisection().unwrap();
    s += &format!(
        "bisection min={:.3} median={:.3} mean={:.3} max={:.3} nodes={} rounds={} msg={} at={}\n",
        bi.min_bytes_per_s,
        bi.median_bytes_per_s,
        bi.mean_bytes_per_s,
        bi.max_bytes_per_s,
        bi.nodes,
        bi.rounds,
        bi.msg_bytes,
        bi.measured_unix_ns
    );
    s
}

#[test]
fn c_program_reads_every_abi_1_1_field() {
    let dir = TmpDir::new("cext");
    let exe = cc_static(
        "ext_dump",
        "-std=c11 -Wall -Wextra -Werror -pedantic",
        &dir.0,
    );
    let seg = TmpPath::new("cext");
    let mut w = SegmentWriter::create_or_open(&seg.0, 16, "node001", "tsc").unwrap();
    let e = sample_entry_ext("node002", "raw");
    let mut class = sample_entry("@leaf3", "raw");
    class.eel_ns = 2345.5;
    let mut t = sample_transport_ext(0.25);
    t.set_penalties(
        Scheme::Mixed,
        &[Estimate::new(1.0, 1.0, 1.0), Estimate::new(2.5, 2.25, 2.75)],
        Status::Identified,
    )
    .unwrap();
    w.upsert(&e).unwrap();
    w.upsert(&class).unwrap();
    w.set_peer_classes([("node077", "@leaf3")]).unwrap();
    w.set_transport_ext("raw", &t).unwrap();
    let out = Command::new(&exe)
        .args([seg.0.to_str().unwrap(), "node002", "raw", "node077"])
        .output()
        .unwrap();
    assert!(out.status.success(), "ext_dump failed: {out:?}");
    let got = String::from_utf8_lossy(&out.stdout);
    let want = expected_dump(&e, "node077", &class, &t);
    for (g, w) in got.lines().zip(want.lines()) {
        assert_eq!(g, w);
    }
    assert_eq!(got, want);
    drop(w);
}
