//! No torn reads: a writer republishing as fast as it can (every field of an
//! entry, its ABI 1.1 block included, derived from one counter k) against
//! readers in 4 threads of this process and in 2 child processes (this test
//! binary re-executed), 10^7 reads in all. And a writer SIGKILLed mid-update leaves readers with the
//! previous valid snapshot.

mod common;

use common::*;
use netgauge::{LookupError, Reader, SegmentWriter};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const THREADS: usize = 4;
const PROCS: usize = 2;
const READS_PER_THREAD: u64 = 1_500_000;
const READS_PER_PROC: u64 = 2_000_000;
const CHILD_ENV: &str = "NG_STRESS_CHILD";
const KILL_ENV: &str = "NG_KILL_CHILD";

#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    reads: u64,
    ok: u64,
    torn: u64,
    busy: u64,
    other: u64,
    backwards: u64,
    distinct: u64,
}

/// `reads` lookups over entry "a" (index 0) and "b" (index 1), all four
/// ranges: the index path, the string path, and the ABI 1.1 reads (the
/// entry extension by index, the lookup with statuses by name).
fn read_loop(r: &Reader, reads: u64, seed: u64) -> Tally {
    let mut t = Tally::default();
    let mut last_k = [0u64; 2];
    let mut x = seed | 1;
    for n in 0..reads {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let s = x % 4000;
        let which = (n % 2) as usize;
        let name = ["a", "b"][which];
        let res = match n % 8 {
            0..=2 => r.lookup_index(which, s).map(|p| derived_k(&p, s / 1000)),
            3..=5 => r.lookup(name, "rdma", s).map(|p| derived_k(&p, s / 1000)),
            6 => r.entry_ext_index(which).map(|e| derived_ext_k(&e)),
            _ => r.lookup_status(name, "rdma", s).map(|(p, st)| {
                // Statuses of derived entries: g and G of every range.
                derived_k(&p, s / 1000).filter(|_| st.range == 0x11)
            }),
        };
        t.reads += 1;
        match res {
            Ok(Some(k)) => {
                t.ok += 1;
                if k < last_k[which] {
                    t.backwards += 1;
                }
                if k != last_k[which] {
                    t.distinct += 1;
                }
                last_k[which] = k;
            }
            Ok(None) => t.torn += 1,
            Err(LookupError::Busy) => t.busy += 1,
            Err(_) => t.other += 1,
        }
    }
    t
}

fn seed_segment(p: &TmpPath) -> SegmentWriter {
    let mut w = SegmentWriter::create_or_open(&p.0, 8, "node001", "tsc").unwrap();
    w.upsert(&derived_entry("a", "rdma", 1)).unwrap();
    w.upsert(&derived_entry("b", "rdma", 1)).unwrap();
    w
}

/// A seeded segment and a reader of it that tests torn snapshots, not
/// staleness: the killed writers re-open the segment, which leaves its
/// heartbeat as it was (the seed's).
fn seeded_for_kills(name: &str) -> (TmpPath, Reader) {
    let p = TmpPath::new(name);
    drop(seed_segment(&p));
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    (p, r)
}

/// Child-process entry point, re-executed by the parent (ignored otherwise).
#[test]
#[ignore = "child process of no_torn_reads_under_a_fast_writer"]
fn stress_reader_child() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let r = Reader::open(path).unwrap();
    let t = read_loop(&r, READS_PER_PROC, u64::from(std::process::id()));
    println!(
        "TALLY {} {} {} {} {} {} {}",
        t.reads, t.ok, t.torn, t.busy, t.other, t.backwards, t.distinct
    );
}

fn spawn_self(test: &str, env: &str, path: &std::path::Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(env, path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

#[test]
fn no_torn_reads_under_a_fast_writer() {
    let p = TmpPath::new("stress");
    let mut w = seed_segment(&p);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_w = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut k = 2u64;
        while !stop_w.load(Ordering::Relaxed) {
            w.upsert(&derived_entry(["a", "b"][(k % 2) as usize], "rdma", k))
                .unwrap();
            if k % 1024 == 0 {
                w.heartbeat();
            }
            k += 1;
        }
        k
    });

    let children: Vec<_> = (0..PROCS)
        .map(|_| Guard(spawn_self("stress_reader_child", CHILD_ENV, &p.0)))
        .collect();
    let readers: Vec<_> = (0..THREADS)
        .map(|i| {
            let path = p.0.clone();
            std::thread::spawn(move || {
                let r = Reader::open(path).unwrap();
                read_loop(&r, READS_PER_THREAD, 0x9E37_79B9 + i as u64)
            })
        })
        .collect();
    let mut all: Vec<Tally> = readers.into_iter().map(|h| h.join().unwrap()).collect();
    for mut c in children {
        let mut stdout = String::new();
        std::io::Read::read_to_string(c.0.stdout.as_mut().unwrap(), &mut stdout).unwrap();
        let status = c.0.wait().unwrap();
        let out = std::process::Output {
            status,
            stdout: stdout.into_bytes(),
            stderr: Vec::new(),
        };
        assert!(out.status.success(), "child failed: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find_map(|l| l.split_once("TALLY ").map(|(_, v)| v))
            .expect("child printed no tally");
        let v: Vec<u64> = line
            .split_whitespace()
            .take(7)
            .map(|x| x.parse().unwrap())
            .collect();
        all.push(Tally {
            reads: v[0],
            ok: v[1],
            torn: v[2],
            busy: v[3],
            other: v[4],
            backwards: v[5],
            distinct: v[6],
        });
    }
    stop.store(true, Ordering::Relaxed);
    let publishes = writer.join().unwrap();

    let sum = |f: fn(&Tally) -> u64| all.iter().map(f).sum::<u64>();
    let (reads, ok, torn, busy, other) = (
        sum(|t| t.reads),
        sum(|t| t.ok),
        sum(|t| t.torn),
        sum(|t| t.busy),
        sum(|t| t.other),
    );
    eprintln!(
        "stress: {reads} reads ({ok} ok, {torn} torn, {busy} busy, {other} other), \
         {publishes} publishes, per reader {all:?}"
    );
    assert!(reads >= 10_000_000);
    assert_eq!(torn, 0, "torn snapshots");
    assert_eq!(other, 0, "unexpected errors");
    assert_eq!(sum(|t| t.backwards), 0, "a reader went back in time");
    assert!(ok > reads / 2, "too few consistent reads: {ok} of {reads}");
    // The writer really was active during the reads.
    assert!(publishes > 1000, "writer published only {publishes} times");
    assert!(
        all.iter().all(|t| t.distinct > 10),
        "readers saw no updates: {all:?}"
    );
}

/// Child-process entry point for the kill tests: re-opens the segment as
/// its writer and updates it until killed. NG_KILL_CHILD_MODE=partial
/// publishes k = 2..=100, then leaves an update of k = 999 half-written and
/// waits to be killed; otherwise it republishes forever.
#[test]
#[ignore = "child process of the kill tests"]
fn kill_writer_child() {
    let Some(path) = std::env::var_os(KILL_ENV) else {
        return;
    };
    // The previous writer's lock can outlive it for a moment: a sibling test
    // thread's fork that has not exec'd yet holds a copy of its descriptor.
    let mut tries = 0;
    let mut w = loop {
        match SegmentWriter::create_or_open(&path, 8, "node001", "tsc") {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => break r.unwrap(),
        }
    };
    if std::env::var("NG_KILL_CHILD_MODE").as_deref() == Ok("partial") {
        for k in 2..=100 {
            w.upsert(&derived_entry("a", "rdma", k)).unwrap();
        }
        w.begin_update_without_publish(&derived_entry("a", "rdma", 999))
            .unwrap();
        println!("READY");
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    println!("READY");
    let mut k = 2u64;
    loop {
        w.upsert(&derived_entry(["a", "b"][(k % 2) as usize], "rdma", k))
            .unwrap();
        k += 1;
    }
}

/// Kills and reaps the child if the test panics before doing so itself.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn wait_ready(c: &mut std::process::Child) {
    let out = c.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    loop {
        let l = lines.next().expect("child exited before READY").unwrap();
        // libtest prints "test NAME ... " before the child's own output.
        if l.ends_with("READY") {
            return;
        }
    }
}

fn sigkill(c: &mut std::process::Child) {
    // SAFETY: signals our own child, identified by its pid.
    assert_eq!(unsafe { libc::kill(c.id() as i32, libc::SIGKILL) }, 0);
    let st = c.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGKILL));
}

#[test]
fn writer_killed_mid_update_leaves_previous_snapshot() {
    let (p, r) = seeded_for_kills("killpartial");
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args([
            "kill_writer_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_ENV, &p.0)
        .env("NG_KILL_CHILD_MODE", "partial")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut c);
    sigkill(&mut c);
    // Readers keep the last published snapshot, k = 100, in every range.
    for s in [0, 1500, 2500, 3999] {
        assert_eq!(
            derived_k(&r.lookup("a", "rdma", s).unwrap(), s / 1000),
            Some(100)
        );
    }
    assert_eq!(derived_k(&r.lookup("b", "rdma", 1).unwrap(), 0), Some(1));
    // A restarted writer finds the same snapshot and publishes on top of it.
    let mut w = SegmentWriter::create_or_open(&p.0, 8, "node001", "tsc").unwrap();
    assert_eq!(w.entries()[0], {
        let mut e = derived_entry("a", "rdma", 100);
        e.flags = w.entries()[0].flags;
        e
    });
    for k in 101..105 {
        w.upsert(&derived_entry("b", "rdma", k)).unwrap();
        for s in [0, 3999] {
            assert_eq!(
                derived_k(&r.lookup("a", "rdma", s).unwrap(), s / 1000),
                Some(100)
            );
        }
        assert_eq!(derived_k(&r.lookup("b", "rdma", 1).unwrap(), 0), Some(k));
    }
}

#[test]
fn writer_killed_at_random_times_leaves_a_valid_snapshot() {
    let (p, r) = seeded_for_kills("killrandom");
    let mut last = 0;
    for round in 0..8u64 {
        let mut c = Guard(spawn_self("kill_writer_child", KILL_ENV, &p.0));
        wait_ready(&mut c.0);
        std::thread::sleep(Duration::from_millis(2 + (round * 7) % 13));
        sigkill(&mut c.0);
        for which in ["a", "b"] {
            for s in [0, 1000, 2000, 3000] {
                let v = r.lookup(which, "rdma", s).unwrap();
                let k = derived_k(&v, s / 1000);
                assert!(
                    k.is_some(),
                    "round {round}: torn snapshot after SIGKILL: {v:?}"
                );
            }
        }
        let seq = r.info().unwrap().seq;
        assert!(seq > last, "round {round}: the writer published nothing");
        last = seq;
    }
}
