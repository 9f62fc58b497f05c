//! ABI compatibility, tested against the 1.0 and 1.1 code itself, not a
//! model of it.
//!
//! The `ffi/` crate of [`BASE`] (the last ABI 1.0 commit, where the 1.1
//! work branched off) and of [`BASE_1_1`] (the last ABI 1.1 commit, where
//! the 1.2 work branched off) is extracted from git history (`git archive`)
//! into a temporary workspace under `target/`, next to a small program
//! written against the 1.0 API only, and built offline from the local cargo
//! cache. Then:
//! - (a) the 1.0 reader, Rust and C, and the 1.1 reader (Rust) read a 1.2
//!   segment written by this
//!   crate's writer (entries with every 1.1 block, class entries, the class
//!   map, per-transport records): every lookup, index, snapshot and info
//!   answer equals what the 1.1 reader's 1.0 functions give. The C side is
//!   the 1.0 `examples/lookup.c` built against the 1.0 `netgauge.h`, once
//!   linked with the 1.0 `libnetgauge.a` and once with this crate's
//!   `libnetgauge.so` (a 1.0 program whose library was upgraded);
//! - (b) this crate's reader reads a 1.0 segment written by the 1.0 writer:
//!   the 1.0 data is all there and every 1.1 part reads as absent; and this
//!   crate's writer replaces a 1.0 segment (new inode) while readers of the
//!   old one keep a valid mapping;
//! - (c) this crate's reader reads a 1.1 segment written by the 1.1 writer
//!   (no hot table: the index lookups read the entries) and answers as the
//!   1.1 reader does; this crate's writer replaces it with a 1.2 one.
//!
//! Needs git with the history down to BASE (a shallow clone lacks it: `git
//! fetch --unshallow`), tar, cc, and the crates of the workspace in the
//! local cargo cache (any earlier build fetched them). Without them the
//! tests fail with that message rather than pass.

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::{flags, EntryExt, LookupError, Params, ParamsStatus, Reader, SegmentWriter};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The last commit with segment ABI 1.0 (`git merge-base HEAD main` when
/// ABI 1.1 was written).
const BASE: &str = "d6ba19db2666acca658a03e5f9267e433a2fbea0";
/// The last commit with segment ABI 1.1 (`git merge-base HEAD main` when
/// ABI 1.2 was written).
const BASE_1_1: &str = "d69c2e800137539a267a98a9ff4b768b5ef3631d";

/// A program that uses only the ABI 1.0 API of the `netgauge` crate:
/// `write PATH` creates a segment with the 1.0 writer; `read PATH [PEER
/// TRANSPORT SIZE]...` prints what the 1.0 reader answers, one line per
/// question, every number in Rust's round-trip form.
const PROBE_MAIN: &str = r#"
mod abi10;

use abi10::{answers_1_0, derived_entry_1_0};
use netgauge::{Reader, SegmentWriter};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[2];
    if args[1] == "write" {
        let mut w = SegmentWriter::create_or_open(path, 8, "node-v10", "tsc 1.0").unwrap();
        for (i, t) in ["rdma", "udp"].iter().enumerate() {
            for p in 0..3u64 {
                w.upsert(&derived_entry_1_0(&format!("n{p}"), t, 10 * p + i as u64)).unwrap();
            }
        }
        w.mark_stale("n2", "udp").unwrap();
        println!("written");
        // Keep the writer (and its heartbeat) alive until stdin closes.
        let mut s = String::new();
        let _ = std::io::stdin().read_line(&mut s);
        return;
    }
    let mut r = Reader::open(path).unwrap();
    r.set_stale_after_ns(600_000_000_000);
    let queries: Vec<(&str, &str, u64)> = args[3..]
        .chunks(3)
        .map(|q| (q[0].as_str(), q[1].as_str(), q[2].parse().unwrap()))
        .collect();
    print!("{}", answers_1_0(&r, &queries));
}
"#;

/// The test code both sides share, written against the 1.0 API.
const ABI10_RS: &str = include_str!("common/abi10.rs");

/// The paths of a built 1.0 baseline.
struct Baseline {
    /// The probe program.
    probe: PathBuf,
    /// The 1.0 `libnetgauge.a`.
    static_lib: PathBuf,
    /// The 1.0 `include/` and `examples/` directories.
    include: PathBuf,
    examples: PathBuf,
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// target/<profile>/ of this test binary.
fn target_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// Extracts and builds the 1.0 baseline once per test process.
fn baseline() -> &'static Baseline {
    static B: OnceLock<Baseline> = OnceLock::new();
    B.get_or_init(|| build_baseline(BASE, "1.0"))
}

/// Extracts and builds the 1.1 baseline once per test process.
fn baseline_1_1() -> &'static Baseline {
    static B: OnceLock<Baseline> = OnceLock::new();
    B.get_or_init(|| build_baseline(BASE_1_1, "1.1"))
}

/// The ffi crate of `commit` (ABI `abi`) with the probe program, built.
fn build_baseline(commit: &str, abi: &str) -> Baseline {
    {
        let root = repo_root();
        let have = Command::new("git")
            .args(["-C", root.to_str().unwrap(), "cat-file", "-e"])
            .arg(format!("{commit}^{{commit}}"))
            .status();
        assert!(
            matches!(have, Ok(s) if s.success()),
            "the ABI {abi} baseline commit {commit} is not in this repository's history \
             (a shallow clone? `git fetch --unshallow`); the compatibility tests need it"
        );
        let work = target_profile_dir().join(format!("compat-abi-{abi}"));
        let src = work.join("src");
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(src.join("probe/src")).unwrap();
        run(
            Command::new("sh").arg("-c").arg(format!(
                "git -C '{}' archive --format=tar {commit} ffi Cargo.lock | tar -x -C '{}'",
                root.display(),
                src.display()
            )),
            &format!("git archive of the {abi} ffi crate"),
        );
        std::fs::write(
            src.join("Cargo.toml"),
            "[workspace]\nmembers = [\"ffi\", \"probe\"]\nresolver = \"2\"\n\n\
             [workspace.package]\nedition = \"2021\"\nlicense = \"MIT OR Apache-2.0\"\n",
        )
        .unwrap();
        std::fs::write(
            src.join("probe/Cargo.toml"),
            "[package]\nname = \"ng-abi10-probe\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nnetgauge-ffi = { path = \"../ffi\" }\n",
        )
        .unwrap();
        std::fs::write(src.join("probe/src/main.rs"), PROBE_MAIN).unwrap();
        std::fs::write(src.join("probe/src/abi10.rs"), ABI10_RS).unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let target = work.join("target");
        run(
            Command::new(&cargo)
                .args([
                    "build",
                    "--release",
                    "--offline",
                    "--quiet",
                    "--manifest-path",
                ])
                .arg(src.join("Cargo.toml"))
                .args(["-p", "ng-abi10-probe", "-p", "netgauge-ffi"])
                .env("CARGO_TARGET_DIR", &target)
                .env_remove("RUSTC_WORKSPACE_WRAPPER"),
            &format!("cargo build of the {abi} baseline (offline, from the local crate cache)"),
        );
        let rel = target.join("release");
        Baseline {
            probe: rel.join("ng-abi10-probe"),
            static_lib: rel.join("libnetgauge.a"),
            include: src.join("ffi/include"),
            examples: src.join("ffi/examples"),
        }
    }
}

fn probe_read(b: &Baseline, seg: &Path, queries: &[(&str, &str, u64)]) -> String {
    let mut c = Command::new(&b.probe);
    c.arg("read").arg(seg);
    for (p, t, n) in queries {
        c.args([*p, *t]).arg(n.to_string());
    }
    String::from_utf8(run(&mut c, "baseline probe read").stdout).unwrap()
}

/// A segment of this crate's writer (ABI 1.2) with every 1.1 part in use.
fn segment_1_1(p: &TmpPath) -> SegmentWriter {
    let mut w = SegmentWriter::create_or_open(&p.0, 16, "node001", "tsc 1.1").unwrap();
    w.upsert(&sample_entry_ext("node002", "rdma")).unwrap();
    let mut restored = sample_entry_ext("node003", "udp");
    restored.flags |= flags::RESTORED | flags::CHANGED | flags::UNSTABLE;
    w.upsert(&restored).unwrap();
    for k in 0..3 {
        w.upsert(&derived_entry(&format!("d{k}"), "raw", 100 + k))
            .unwrap();
    }
    w.upsert(&derived_entry("@leaf0", "raw", 900)).unwrap();
    w.set_peer_classes([("m1", "@leaf0"), ("m2", "@leaf0"), ("d0", "@leaf0")])
        .unwrap();
    w.set_transport_ext("raw", &sample_transport_ext(0.0))
        .unwrap();
    w.mark_stale("d2", "raw").unwrap();
    w
}

const QUERIES_1_1: &[(&str, &str, u64)] = &[
    ("node002", "rdma", 0),
    ("node002", "rdma", 100),
    ("node002", "rdma", 8191),
    ("node002", "rdma", 8192),
    ("node002", "rdma", 1 << 30),
    ("node003", "udp", 5000),
    ("d0", "raw", 1500),
    ("d1", "raw", 3999),
    ("d2", "raw", 1),
    ("@leaf0", "raw", 2500),
    ("m1", "raw", 1),
    ("node002", "udp", 1),
    ("", "raw", 1),
];

/// Questions about the segment the probe program writes.
const QUERIES_PROBE: &[(&str, &str, u64)] = &[
    ("n0", "rdma", 0),
    ("n1", "udp", 2500),
    ("n2", "udp", 1),
    ("n2", "rdma", 1 << 40),
    ("zz", "rdma", 1),
];

#[test]
fn reader_1_0_reads_a_1_2_segment() {
    old_reader_reads_a_1_2_segment(baseline(), "compat-a");
}

#[test]
fn reader_1_1_reads_a_1_2_segment() {
    old_reader_reads_a_1_2_segment(baseline_1_1(), "compat-a11");
}

/// The baseline's reader reads this writer's segment (with its hot table,
/// which it never maps) and answers every 1.0 question as this reader
/// does, the index path included.
fn old_reader_reads_a_1_2_segment(b: &Baseline, tag: &str) {
    let p = TmpPath::new(tag);
    let w = segment_1_1(&p);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(600_000_000_000);
    let want = answers_1_0(&r, QUERIES_1_1);
    let got = probe_read(b, &p.0, QUERIES_1_1);
    for (g, x) in got.lines().zip(want.lines()) {
        assert_eq!(g, x);
    }
    assert_eq!(got, want);
    assert!(got.contains("index node002 rdma 8192 0 eel="));
    // The answers say what they should, not just the same thing: the 1.0
    // reader sees the new flags as bits of the entry, class entries as
    // entries, mapped peers without entries as unknown, stale as stale.
    assert!(got.contains("info major=1 minor=2 "));
    assert_ne!(
        r.info().unwrap().capabilities & netgauge::layout::CAP_HOT,
        0
    );
    assert!(got.contains("lookup m1 raw 1 err unknown peer or transport"));
    assert!(got.contains("lookup d2 raw 1 err stale"));
    let restored = r.lookup("node003", "udp", 1).unwrap().flags;
    assert_ne!(restored & flags::RESTORED, 0);
    assert!(got.contains(&format!("flags={restored:#x}")));
    assert_eq!(got.lines().filter(|l| l.starts_with("entry ")).count(), 6);
    drop(w);
}

#[test]
fn c_example_1_0_reads_a_1_2_segment() {
    let b = baseline();
    let p = TmpPath::new("compat-c");
    let w = segment_1_1(&p);
    let dir = p.0.with_extension("d");
    std::fs::create_dir_all(&dir).unwrap();
    // The 1.0 example against the 1.0 header, linked with `libs`.
    let example = b.examples.join("lookup.c");
    let cc = |exe: &Path, libs: &[&std::ffi::OsStr], what: &str| {
        run(
            Command::new("cc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
                .arg(&b.include)
                .arg(&example)
                .args(libs)
                .arg("-o")
                .arg(exe),
            what,
        );
    };
    // (i) The 1.0 program with the 1.0 static library.
    let old = dir.join("lookup-1.0-static");
    let mut static_libs = vec![b.static_lib.as_os_str()];
    static_libs.extend(
        [
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ]
        .map(std::ffi::OsStr::new),
    );
    cc(
        &old,
        &static_libs,
        "cc of the 1.0 example against the 1.0 static library",
    );
    // (ii) The 1.0 program with this crate's shared library (an upgraded
    // libnetgauge.so.1 under an unchanged program).
    let new_lib = lib_dir();
    std::os::unix::fs::symlink(new_lib.join("libnetgauge.so"), dir.join("libnetgauge.so.1"))
        .unwrap();
    std::os::unix::fs::symlink(new_lib.join("libnetgauge.so"), dir.join("libnetgauge.so")).unwrap();
    let upgraded = dir.join("lookup-1.0-shared");
    cc(
        &upgraded,
        &["-L".as_ref(), dir.as_os_str(), "-lnetgauge".as_ref()],
        "cc of the 1.0 example against this crate's shared library",
    );
    let r = Reader::open(&p.0).unwrap();
    for exe in [&old, &upgraded] {
        for (peer, t, s) in [("node002", "rdma", 101u64), ("d1", "raw", 2500)] {
            let out = run(
                Command::new(exe)
                    .arg(&p.0)
                    .args([peer, t])
                    .arg(s.to_string())
                    .env("LD_LIBRARY_PATH", &dir),
                "1.0 C example",
            );
            let v = r.lookup(peer, t, s).unwrap();
            let want = format!(
                "{peer}/{t} {s} B: range [{}, {}] EEL={:.1} ns L={:.1} ns o_s={:.1} ns o_r={:.1} ns g={:.1} ns G={:.4} ns/B flags={:#x} predicted={:.1} ns\n",
                v.range_from_bytes, v.range_to_bytes, v.eel_ns, v.L_ns, v.o_s_ns, v.o_r_ns,
                v.g_ns, v.G_ns_per_byte, v.flags, v.predict_ns(s)
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout.starts_with(&want),
                "{}: {stdout}\nwant: {want}",
                exe.display()
            );
            assert!(
                stdout.contains(&format!("predicted {:.1} ns", v.predict_ns(s))),
                "{stdout}"
            );
        }
        // A peer known only through its class is unknown to a 1.0 program.
        let out = Command::new(exe)
            .arg(&p.0)
            .args(["m1", "raw", "1"])
            .env("LD_LIBRARY_PATH", &dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("unknown peer or transport"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(w);
}

/// The directory holding the libnetgauge.{so,a} cargo built with this test.
/// Writes a 1.0 segment with the 1.0 writer, which stays alive (and beats)
/// until the returned child's stdin is closed.
fn write_1_0(b: &Baseline, path: &Path) -> std::process::Child {
    use std::io::BufRead;
    let mut c = Command::new(&b.probe)
        .arg("write")
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "written\n");
    c
}

#[test]
fn reader_1_2_reads_a_1_0_segment() {
    let b = baseline();
    let p = TmpPath::new("compat-b");
    let mut child = write_1_0(b, &p.0);
    let r = Reader::open(&p.0).unwrap();
    let info = r.info().unwrap();
    assert_eq!((info.abi_major, info.abi_minor), (1, 0));
    assert_eq!(info.node_name, "node-v10");
    assert_eq!(info.entry_count, 6);
    assert_eq!(info.capabilities, 0x1f);
    // The 1.0 data, field by field (the probe's entries are derived_entry's
    // 1.0 fields: k = 10·peer + transport).
    for (i, t) in ["rdma", "udp"].iter().enumerate() {
        for peer in 0..3u64 {
            let name = format!("n{peer}");
            let k = 10 * peer + i as u64;
            if (peer, *t) == (2, "udp") {
                assert_eq!(r.lookup(&name, t, 1), Err(LookupError::Stale));
                continue;
            }
            for s in [0u64, 1500, 2999, 3999] {
                let v = r.lookup(&name, t, s).unwrap();
                assert_eq!(derived_k(&v, s / 1000), Some(k), "{name} {t} {s}");
                let idx = r.index(&name, t).unwrap();
                assert_eq!(r.lookup_index(idx, s).unwrap(), v);
                // 1.1 functions on a 1.0 segment: the 1.0 answer, nothing new.
                assert_eq!(r.lookup_or_class(&name, t, s).unwrap(), v);
                let (v2, st) = r.lookup_status(&name, t, s).unwrap();
                assert_eq!(v2, v);
                assert_eq!(
                    st,
                    ParamsStatus {
                        range_index: (s / 1000) as u32,
                        ..Default::default()
                    }
                );
                assert_eq!(r.lookup_index_status(idx, s).unwrap(), (v, st));
            }
            assert_eq!(r.entry_ext(&name, t).unwrap(), EntryExt::default());
            assert_eq!(r.index_or_class(&name, t), Ok(r.index(&name, t).unwrap()));
        }
    }
    for e in r.snapshot().unwrap() {
        let k = e.samples - 11;
        let mut want = derived_entry_1_0(&e.peer, &e.transport, k);
        want.flags = e.flags;
        assert_eq!(e, want);
        assert_eq!(
            e.flags & !flags::STALE,
            flags::VALID | flags::HAS_S | flags::HAS_LOGFP | flags::HAS_LOGGPS
        );
    }
    assert_eq!(r.transport_ext("rdma"), Err(LookupError::NotFound));
    assert_eq!(r.transports_ext().unwrap(), vec![]);
    assert_eq!(r.peer_class("n0").unwrap(), None);
    assert_eq!(r.class_map().unwrap(), vec![]);
    assert_eq!(
        r.lookup_or_class("m1", "rdma", 1),
        Err(LookupError::NotFound)
    );
    // The C ABI says the same.
    let cpath = std::ffi::CString::new(p.0.to_str().unwrap()).unwrap();
    // SAFETY: valid pointers; the reader is closed once.
    unsafe {
        let cr = ng_open(cpath.as_ptr());
        assert!(!cr.is_null());
        let mut x = EntryExt {
            present: 99,
            ..Default::default()
        };
        assert_eq!(
            ng_get_entry_ext(cr, c"n1".as_ptr(), c"rdma".as_ptr(), &mut x),
            0
        );
        assert_eq!(x.present, 0);
        let mut t = netgauge::TransportExt::default();
        assert_eq!(
            ng_get_transport_ext(cr, c"rdma".as_ptr(), &mut t),
            -libc::ENOENT
        );
        let mut cls = [0 as core::ffi::c_char; 64];
        assert_eq!(
            ng_peer_class(cr, c"n1".as_ptr(), cls.as_mut_ptr(), 64),
            -libc::ENOENT
        );
        let mut out = Params::default();
        assert_eq!(
            ng_lookup_or_class(cr, c"n1".as_ptr(), c"rdma".as_ptr(), 1500, &mut out),
            0
        );
        assert_eq!(derived_k(&out, 1), Some(10));
        ng_close(cr);
    }
    // A 1.0 reader and this one agree on the 1.0 segment, question by
    // question.
    let queries = QUERIES_PROBE;
    let mut r = r;
    r.set_stale_after_ns(600_000_000_000);
    assert_eq!(probe_read(b, &p.0, queries), answers_1_0(&r, queries));

    // This crate's writer replaces the 1.0 segment with a 1.1 one (a new
    // inode, once the 1.0 writer has let go of it); a reader of the old
    // inode keeps its mapping and its answers.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(&p.0).unwrap().ino();
    let before = r.lookup("n1", "rdma", 1500).unwrap();
    let mut w = SegmentWriter::create_or_open(&p.0, 8, "node001", "tsc").unwrap();
    assert_ne!(std::fs::metadata(&p.0).unwrap().ino(), ino);
    assert_eq!(w.entries().len(), 0);
    w.upsert(&sample_entry_ext("n1", "rdma")).unwrap();
    r.set_stale_after_ns(0);
    assert_eq!(r.lookup("n1", "rdma", 1500).unwrap(), before);
    let r2 = Reader::open(&p.0).unwrap();
    assert_eq!(r2.info().unwrap().abi_minor, 2);
    assert_ne!(r2.entry_ext("n1", "rdma").unwrap().present, 0);
}

#[test]
fn reader_1_2_reads_a_1_1_segment() {
    let b = baseline_1_1();
    let p = TmpPath::new("compat-d");
    let mut child = write_1_0(b, &p.0);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(600_000_000_000);
    let info = r.info().unwrap();
    assert_eq!((info.abi_major, info.abi_minor), (1, 1));
    assert_eq!(info.capabilities & netgauge::layout::CAP_HOT, 0);
    assert_eq!(info.entry_count, 6);
    // No hot table: the index lookups read the entries, and agree with the
    // name lookups field by field.
    for (i, t) in ["rdma", "udp"].iter().enumerate() {
        for peer in 0..2u64 {
            let name = format!("n{peer}");
            let idx = r.index(&name, t).unwrap();
            for s in [0u64, 1500, 2999, 3999, 1 << 40] {
                let v = r.lookup(&name, t, s).unwrap();
                assert_eq!(derived_k(&v, (s / 1000).min(3)), Some(10 * peer + i as u64));
                assert_eq!(r.lookup_index(idx, s), Ok(v));
                let st = r.lookup_status(&name, t, s).unwrap();
                assert_eq!(r.lookup_index_status(idx, s), Ok(st));
            }
        }
    }
    assert_eq!(
        probe_read(b, &p.0, QUERIES_PROBE),
        answers_1_0(&r, QUERIES_PROBE)
    );
    // This crate's writer replaces the 1.1 segment with a 1.2 one (a new
    // inode); the reader of the old one keeps its mapping and answers.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let before = r
        .lookup_index(r.index("n1", "rdma").unwrap(), 1500)
        .unwrap();
    let mut w = SegmentWriter::create_or_open(&p.0, 8, "node001", "tsc").unwrap();
    w.upsert(&sample_entry_ext("n1", "rdma")).unwrap();
    r.set_stale_after_ns(0);
    assert_eq!(r.lookup("n1", "rdma", 1500), Ok(before));
    let r2 = Reader::open(&p.0).unwrap();
    assert_eq!(r2.info().unwrap().abi_minor, 2);
}
