//! Zero system calls, proven: a forked child maps the segment, enters a
//! seccomp filter that allows only read, write, exit and exit_group (anything
//! else: SECCOMP_RET_KILL_PROCESS, i.e. SIGSYS, shell status 159), performs
//! 10^6 lookups through each of the Rust API and the C ABI (string and index
//! paths, and the ABI 1.1 lookups: class fallback, entry extension,
//! per-transport record), and exits with a code saying whether every answer
//! was right.
//!
//! Filter mode rather than SECCOMP_MODE_STRICT: strict mode also disables
//! rdtsc, which kills vDSO clock reads (docs/RIGS.md).
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::{EntryExt, Params, Reader, Scheme, SegmentWriter, TransportExt};
use std::ffi::CString;

const LOOKUPS: usize = 1_000_000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

// BPF_LD | BPF_W | BPF_ABS
const BPF_LD_W_ABS: u16 = 0x20;
// BPF_JMP | BPF_JEQ | BPF_K
const BPF_JEQ_K: u16 = 0x05 | 0x10;
const BPF_RET_K: u16 = 0x06;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jeq(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: BPF_JEQ_K,
        jt,
        jf,
        k,
    }
}

/// The filter program: allow read, write, exit, exit_group; kill otherwise.
fn filter() -> Vec<libc::sock_filter> {
    vec![
        stmt(BPF_LD_W_ABS, 4), // seccomp_data.arch
        jeq(AUDIT_ARCH, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_LD_W_ABS, 0), // seccomp_data.nr
        jeq(libc::SYS_read as u32, 4, 0),
        jeq(libc::SYS_write as u32, 3, 0),
        jeq(libc::SYS_exit as u32, 2, 0),
        jeq(libc::SYS_exit_group as u32, 1, 0),
        stmt(BPF_RET_K, RET_KILL_PROCESS),
        stmt(BPF_RET_K, RET_ALLOW),
    ]
}

/// Forks; the child enters the filter and runs `body`, then `_exit`s with its
/// return value. `body` must neither allocate nor panic. Returns the raw wait
/// status.
fn run_confined(prog: &mut [libc::sock_filter], body: impl FnOnce() -> i32) -> i32 {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: fork in a test process; the child only runs `body` (no
    // allocation, no locks) and leaves with _exit, never returning.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: prctl with valid arguments; fprog outlives the call.
        let ok = unsafe {
            libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &fprog as *const libc::sock_fprog,
                ) == 0
        };
        let code = if ok { body() } else { 100 };
        // SAFETY: ends the child at once (exit_group, allowed by the filter).
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(rc, pid);
    status
}

fn describe(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exited with {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!(
            "killed by signal {} (shell status {})",
            libc::WTERMSIG(status),
            128 + libc::WTERMSIG(status)
        )
    } else {
        format!("status {status:#x}")
    }
}

/// Runs `lookups`, which counts its wrong answers, in a child confined to
/// read, write and exit; asserts that it made no other system call and
/// that every answer was right.
fn assert_confined_and_right(lookups: impl FnOnce() -> u64) {
    let status = run_confined(&mut filter(), || i32::from(lookups() != 0));
    assert_eq!(describe(status), "exited with 0");
}

/// 40 peers × {rdma, udp} (indices 2i, 2i + 1), class entries "@sw0" and
/// "@sw1" for rdma, 40 peers "peerNNN" without entries mapped to them
/// alternately, a per-transport record for rdma.
fn segment() -> (TmpPath, SegmentWriter) {
    let p = TmpPath::new("seccomp");
    let mut w = SegmentWriter::create_or_open(&p.0, 128, "node001", "tsc").unwrap();
    for i in 0..40 {
        w.upsert(&derived_entry(&format!("node{i:03}"), "rdma", i))
            .unwrap();
        w.upsert(&derived_entry(&format!("node{i:03}"), "udp", 1000 + i))
            .unwrap();
    }
    w.upsert(&derived_entry("@sw0", "rdma", 500)).unwrap();
    w.upsert(&derived_entry("@sw1", "rdma", 501)).unwrap();
    let peers: Vec<String> = (0..40).map(|i| format!("peer{i:03}")).collect();
    w.set_peer_classes(
        peers
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), if i % 2 == 0 { "@sw0" } else { "@sw1" })),
    )
    .unwrap();
    w.set_transport_ext("rdma", &sample_transport_ext(0.0))
        .unwrap();
    (p, w)
}

/// The segment of [`segment`], read through the Rust API and the C ABI,
/// and the names of its 40 peers. Both readers keep the heartbeat rule
/// active (it reads the clock on every lookup) with a threshold a slow
/// debug build cannot hit; the Rust one likewise the data age.
struct Rig {
    c: *mut NgReader,
    rust: Reader,
    _writer: SegmentWriter,
    _path: TmpPath,
    names: Vec<String>,
    c_names: Vec<CString>,
}

impl Rig {
    fn new() -> Rig {
        const HOUR_NS: u64 = 3_600_000_000_000;
        let (p, w) = segment();
        let mut rust = Reader::open(&p.0).unwrap();
        rust.set_stale_after_ns(HOUR_NS);
        rust.set_max_age_ns(u64::MAX);
        let c = c_reader(&p.0, HOUR_NS);
        w.heartbeat();
        Rig {
            c,
            rust,
            _writer: w,
            _path: p,
            names: (0..40).map(|i| format!("node{i:03}")).collect(),
            c_names: c_names("node", 40),
        }
    }

    /// Runs `lookups` on the Rust reader and the peers' names, confined
    /// (see [`assert_confined_and_right`]); it counts its wrong answers in
    /// its last argument.
    fn confined_rust(&self, lookups: impl FnOnce(&Reader, &[String], &mut u64)) {
        assert_confined_and_right(|| {
            let mut bad = 0;
            lookups(&self.rust, &self.names, &mut bad);
            bad
        });
    }

    /// [`Rig::confined_rust`] for the C reader and the names as C strings.
    fn confined_c(&self, lookups: impl FnOnce(*mut NgReader, &[CString], &mut u64)) {
        assert_confined_and_right(|| {
            let mut bad = 0;
            lookups(self.c, &self.c_names, &mut bad);
            bad
        });
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the C reader Rig::new opened, closed once.
        unsafe { ng_close(self.c) };
    }
}

#[test]
fn filter_kills_a_stray_system_call() {
    // Negative control: the harness must see SIGSYS (159) for a stray call.
    let status = run_confined(&mut filter(), || {
        // SAFETY: getpid has no preconditions.
        unsafe { libc::getpid() };
        0
    });
    assert!(
        libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS,
        "expected SIGSYS, got {}",
        describe(status)
    );
    // And write/exit stay allowed.
    let status = run_confined(&mut filter(), || {
        // SAFETY: writes 0 bytes to stderr.
        unsafe { libc::write(2, b"".as_ptr().cast(), 0) };
        7
    });
    assert_eq!(describe(status), "exited with 7");
}

#[test]
fn rust_api_lookups_make_no_system_call() {
    Rig::new().confined_rust(|r, names, bad| {
        for n in 0..LOOKUPS {
            let i = n % 40;
            let (t, k) = if n % 2 == 0 {
                ("rdma", i as u64)
            } else {
                ("udp", 1000 + i as u64)
            };
            let s = ((n * 7919) % 4000) as u64;
            match r.lookup(&names[i], t, s) {
                Ok(v) if derived_k(&v, s / 1000) == Some(k) => {}
                _ => *bad += 1,
            }
            let idx = 2 * i + (n % 2);
            match r.lookup_index(idx, s) {
                Ok(v) if derived_k(&v, s / 1000) == Some(k) => {}
                _ => *bad += 1,
            }
        }
        if r.lookup("nobody", "rdma", 1).is_ok() || r.predict_ns(&names[0], "rdma", 1).is_err() {
            *bad += 1;
        }
    });
}

#[test]
fn c_abi_lookups_make_no_system_call() {
    Rig::new().confined_c(|r, names, bad| {
        let mut out = Params::default();
        for n in 0..LOOKUPS {
            let i = n % 40;
            let (t, k) = if n % 2 == 0 {
                (c"rdma", i as u64)
            } else {
                (c"udp", 1000 + i as u64)
            };
            let s = ((n * 7919) % 4000) as u64;
            // SAFETY: r live, strings valid, out writable.
            let rc = unsafe { ng_lookup(r, names[i].as_ptr(), t.as_ptr(), s, &mut out) };
            if rc != 0 || derived_k(&out, s / 1000) != Some(k) {
                *bad += 1;
            }
            // SAFETY: as above.
            let idx = unsafe { ng_index(r, names[i].as_ptr(), t.as_ptr()) };
            // SAFETY: as above.
            let rc = unsafe { ng_lookup_index(r, idx, s, &mut out) };
            if rc != 0 || derived_k(&out, s / 1000) != Some(k) {
                *bad += 1;
            }
        }
        // SAFETY: as above.
        let nan = unsafe { ng_predict_ns(r, c"nobody".as_ptr(), c"udp".as_ptr(), 1) };
        if !nan.is_nan() {
            *bad += 1;
        }
    });
}

#[test]
fn rust_api_ext_lookups_make_no_system_call() {
    let mapped: Vec<String> = (0..40).map(|i| format!("peer{i:03}")).collect();
    Rig::new().confined_rust(|r, names, bad| {
        for n in 0..LOOKUPS / 4 {
            let i = n % 40;
            let s = ((n * 7919) % 4000) as u64;
            // Own entry through the class-fallback path.
            match r.lookup_or_class(&names[i], "rdma", s) {
                Ok(v) if derived_k(&v, s / 1000) == Some(i as u64) => {}
                _ => *bad += 1,
            }
            // A peer without an entry: its class's, flagged.
            let class_k = 500 + (i % 2) as u64;
            match r.lookup_or_class(&mapped[i], "rdma", s) {
                Ok(v)
                    if derived_k(&v, s / 1000) == Some(class_k)
                        && v.flags & netgauge::flags::CLASS != 0 => {}
                _ => *bad += 1,
            }
            match r.index_or_class(&mapped[i], "rdma") {
                Ok(idx) if idx == 80 + i % 2 => {}
                _ => *bad += 1,
            }
            match r.lookup_status(&mapped[i], "rdma", s) {
                Ok((v, st))
                    if derived_k(&v, s / 1000) == Some(class_k)
                        && st.range_index as u64 == s / 1000
                        && st.range == 0x11 => {}
                _ => *bad += 1,
            }
            match r.lookup_index_status(2 * i, s) {
                Ok((v, st)) if derived_k(&v, s / 1000) == Some(i as u64) && st.entry != 0 => {}
                _ => *bad += 1,
            }
            match r.entry_ext_index(2 * i + 1) {
                Ok(x) if derived_ext_k(&x) == Some(1000 + i as u64) => {}
                _ => *bad += 1,
            }
            match r.entry_ext(&names[i], "rdma") {
                Ok(x) if derived_ext_k(&x) == Some(i as u64) => {}
                _ => *bad += 1,
            }
            match r.transport_ext("rdma") {
                Ok(t) if t.penalties(Scheme::Outgoing).len() == 5 => {}
                _ => *bad += 1,
            }
        }
        if r.lookup_or_class("nobody", "rdma", 1).is_ok() || r.transport_ext("udp").is_ok() {
            *bad += 1;
        }
    });
}

#[test]
fn c_abi_ext_lookups_make_no_system_call() {
    let mapped = c_names("peer", 40);
    Rig::new().confined_c(|r, names, bad| {
        let mut out = Params::default();
        let mut x = EntryExt::default();
        let mut t = TransportExt::default();
        let mut cls = [0 as core::ffi::c_char; 64];
        for n in 0..LOOKUPS / 4 {
            let i = n % 40;
            let s = ((n * 7919) % 4000) as u64;
            let class_k = 500 + (i % 2) as u64;
            // SAFETY: r live, strings valid, outs writable.
            let rc =
                unsafe { ng_lookup_or_class(r, mapped[i].as_ptr(), c"rdma".as_ptr(), s, &mut out) };
            if rc != 0 || derived_k(&out, s / 1000) != Some(class_k) {
                *bad += 1;
            }
            // SAFETY: as above.
            let idx = unsafe { ng_index_or_class(r, mapped[i].as_ptr(), c"rdma".as_ptr()) };
            // SAFETY: as above.
            let rc = unsafe { ng_lookup_index(r, idx, s, &mut out) };
            if rc != 0 || derived_k(&out, s / 1000) != Some(class_k) {
                *bad += 1;
            }
            let mut st = netgauge::ParamsStatus::default();
            // SAFETY: as above.
            let rc = unsafe {
                ng_lookup_status(
                    r,
                    mapped[i].as_ptr(),
                    c"rdma".as_ptr(),
                    s,
                    &mut out,
                    &mut st,
                )
            };
            if rc != 0 || derived_k(&out, s / 1000) != Some(class_k) || st.range != 0x11 {
                *bad += 1;
            }
            // SAFETY: as above.
            let rc = unsafe { ng_get_entry_ext(r, names[i].as_ptr(), c"udp".as_ptr(), &mut x) };
            if rc != 0 || derived_ext_k(&x) != Some(1000 + i as u64) {
                *bad += 1;
            }
            // SAFETY: as above.
            let rc = unsafe { ng_get_entry_ext_index(r, (2 * i) as i32, &mut x) };
            if rc != 0 || derived_ext_k(&x) != Some(i as u64) {
                *bad += 1;
            }
            // SAFETY: as above.
            let rc = unsafe { ng_get_transport_ext(r, c"rdma".as_ptr(), &mut t) };
            if rc != 0 || t.n_k != [5, 4, 0] {
                *bad += 1;
            }
            // SAFETY: as above.
            let rc = unsafe { ng_peer_class(r, mapped[i].as_ptr(), cls.as_mut_ptr(), 64) };
            if rc != 0 || cls[3] as u8 != b'0' + (i % 2) as u8 {
                *bad += 1;
            }
        }
    });
}
