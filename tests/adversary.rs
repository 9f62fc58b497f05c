//! The daemon and its readers against a hostile network and hostile local
//! users.
//!
//! Without root, over loopback: a control server under 1000 connections
//! that are idle, slow, garbage or replayed hellos (re-opened as fast as
//! they are closed) still admits a real peer, 20 of 20 times, within 2 s
//! of its connect; a replayed client hello earns a server hello and
//! nothing else; idle connections end at the first-byte deadline; the
//! oldest pending connection is evicted, not the new one; weak keys;
//! bounded inputs (each reproducer of the issue); `Msg::Status`; `ngctl
//! status` after a clean stop.
//!
//! As root (`netns_tests`, as CI builds): symbolic links, FIFOs and other
//! users' files planted at every path the daemon or a reader opens, and a
//! key file owned by another user. The namespace tests (attack from
//! another host, SIGTERM in every state, restart on a changed link) are in
//! `adversary_netns.rs`.

mod common;
mod hostile;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{ngctl, NGCTL};
use hostile::*;
use netgauged::control::{
    ConnConfig, Connection, ControlServer, Hello, Msg, ServerConfig, Timeouts,
};

fn hello_msg(node: &str) -> Msg {
    Msg::Hello(Hello {
        node: node.into(),
        generation: 1,
        nonce: 2,
        time_unix_ns: 3,
    })
}

/// A client whose connect, handshake and first answer together must fit
/// in 2 s.
fn tight_client(node: &str) -> ConnConfig {
    let mut cc = ConnConfig::new(node, key());
    cc.timeouts = Timeouts {
        connect: Duration::from_millis(800),
        handshake: Duration::from_millis(700),
        ..Timeouts::default()
    };
    cc
}

/// Held by the tests that run a control server in this process, so the
/// thread count of one is not mixed with another's (tests run in parallel).
static IN_PROCESS_SERVER: Mutex<()> = Mutex::new(());

fn one_server_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    IN_PROCESS_SERVER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
                .filter(|c| c.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_thousand_hostile_connections_do_not_keep_a_real_peer_out() {
    let _one = one_server_at_a_time();
    // The server on 127.0.0.1; the attacker from 127.0.0.2 (another source,
    // as another host); the real peer from 127.0.0.1.
    let mut scfg = ServerConfig::new("srv", key());
    scfg.allowed_peers = Some(vec!["peer".into()]);
    let server = ControlServer::bind("127.0.0.1:0", scfg.clone(), |_: &str, m: Msg| Some(m))
        .expect("server");
    let addr = server.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let hello = capture_hello("peer", "srv");
    let (threads, stats) = attack(
        addr,
        Some("127.0.0.2".parse().unwrap()),
        1000,
        hello,
        None,
        stop.clone(),
    );
    // Let the attack fill the table first.
    std::thread::sleep(Duration::from_secs(2));
    let mut times = Vec::new();
    let mut max_threads = 0;
    for i in 0..20 {
        let t = Instant::now();
        let deadline = Instant::now() + Duration::from_millis(500);
        let r = Connection::connect(addr, "srv", &tight_client("peer"))
            .and_then(|mut c| c.request(&hello_msg("peer"), deadline).map(|m| (c, m)));
        match r {
            Ok((c, Msg::Hello(_))) => c.close(),
            Ok((_, other)) => panic!("try {i}: answered {other:?}"),
            Err(e) => panic!(
                "try {i}: the real peer was not admitted within 2 s: {e} (attack: {stats:?}, \
                 rejects {:?})",
                server.counters().snapshot()
            ),
        }
        times.push(t.elapsed());
        max_threads = max_threads.max(threads_named("ctl-"));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let r = server.counters().snapshot();
    times.sort();
    eprintln!(
        "admitted 20/20 under attack: median {:?}, max {:?}; attacker opened {} connections, \
         {} closed by the server; rejects {r:?}; control threads {max_threads}",
        times[10],
        times[19],
        stats.opened.load(Ordering::Relaxed),
        stats.closed.load(Ordering::Relaxed),
    );
    // Bounded: one pre-authentication thread and the workers, whatever the
    // number of connections.
    assert!(
        max_threads <= 1 + scfg.max_connections,
        "{max_threads} control threads"
    );
    // The attack did run into the limits (eviction and rejected garbage).
    assert!(stats.opened.load(Ordering::Relaxed) >= 1000);
    assert!(
        r.evicted > 0 && r.malformed + r.oversize + r.bad_tag > 0,
        "{r:?}"
    );
}

#[test]
fn a_replayed_client_hello_earns_a_server_hello_and_nothing_else() {
    let _one = one_server_at_a_time();
    let seen = Arc::new(AtomicU64::new(0));
    let s2 = seen.clone();
    let server = ControlServer::bind(
        "127.0.0.1:0",
        ServerConfig::new("srv", key()),
        move |_: &str, m: Msg| {
            s2.fetch_add(1, Ordering::Relaxed);
            Some(m)
        },
    )
    .unwrap();
    let addr = server.local_addr();
    let hello = capture_hello("peer", "srv");
    // 16 replays at once (what once held every worker for 120 s), each
    // followed by a message a key holder would send.
    let replays: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&hello).unwrap();
            s
        })
        .collect();
    for mut s in replays {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The server hello comes (the hello's tag is valid)...
        let mut prefix = [0u8; 4];
        s.read_exact(&mut prefix).unwrap();
        let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
        s.read_exact(&mut body).unwrap();
        assert_eq!(body[2], 2, "a server hello");
        // ...then, without a proof, only the end of the connection, at the
        // handshake deadline.
        let mut rest = [0u8; 16];
        let n = s.read(&mut rest);
        assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    }
    assert_eq!(
        seen.load(Ordering::Relaxed),
        0,
        "a replay reached the handler"
    );
    let r = server.counters().snapshot();
    assert!(r.timeout >= 16, "{r:?}");
    // A key holder still gets in at once.
    let mut c = Connection::connect(addr, "srv", &ConnConfig::new("peer", key())).unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    assert!(matches!(
        c.request(&hello_msg("peer"), deadline),
        Ok(Msg::Hello(_))
    ));
}

#[test]
fn idle_connections_end_at_the_first_byte_deadline_and_the_oldest_is_evicted() {
    let _one = one_server_at_a_time();
    // Deadlines long enough that only eviction ends a connection while the
    // test looks; the default first-byte deadline is checked at the end.
    let server = evicting_echo_server(6, 4);
    let addr = server.local_addr();
    let src = |s: &str| Some(s.parse::<IpAddr>().unwrap());
    let open = |from: Option<IpAddr>| {
        let s = connect_from(from, addr).unwrap();
        // Accepted (not just queued) before the next one.
        std::thread::sleep(Duration::from_millis(20));
        s
    };
    // Five from one source: the first is evicted to make room for the fifth.
    let a: Vec<TcpStream> = (0..5).map(|_| open(src("127.0.0.2"))).collect();
    let gone = |s: &TcpStream| {
        wait_for(Duration::from_millis(150), || {
            closed_by_server(s).then_some(())
        })
        .is_some()
    };
    assert!(gone(&a[0]), "the oldest of the source was not evicted");
    assert!(!a[1..].iter().any(gone), "a newer one was evicted");
    assert_eq!(server.counters().snapshot().evicted, 1);
    // Two more from another source: the table (6) is full, so the oldest
    // of all goes, whatever its source.
    let b: Vec<TcpStream> = (0..3).map(|_| open(src("127.0.0.3"))).collect();
    assert!(gone(&a[1]), "the oldest of all was not evicted");
    assert!(!b.iter().any(gone));
    assert_eq!(server.counters().snapshot().evicted, 2);
    drop((a, b, server));

    // With the default deadlines, a connection that sends nothing ends at
    // the first-byte deadline (200 ms), one that stalls mid-hello at the
    // handshake deadline (1 s).
    let server = ControlServer::bind(
        "127.0.0.1:0",
        ServerConfig::new("srv", key()),
        |_: &str, m: Msg| Some(m),
    )
    .unwrap();
    let addr = server.local_addr();
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let mut stalled: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    for s in &mut stalled {
        s.write_all(&[60, 0]).unwrap();
    }
    for s in idle.iter().chain(&stalled) {
        s.set_nonblocking(true).unwrap();
        assert!(
            wait_for(Duration::from_secs(3), || closed_by_server(s).then_some(())).is_some(),
            "a connection outlived its deadline"
        );
    }
    assert!(server.counters().snapshot().timeout >= 8);
}

// ---------------------------------------------------------------------
// Bounded inputs: each reproducer of the issue, and a daemon's answers.

/// Run `cmd`, killing it after `limit`; its output, or a panic saying it
/// hung.
fn run_bounded(cmd: &mut Command, limit: Duration) -> std::process::Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if wait_for(limit, || child.try_wait().ok().flatten()).is_none() {
        let _ = child.kill();
        panic!("{cmd:?} still running after {limit:?}");
    }
    child.wait_with_output().unwrap()
}

#[test]
fn every_reproducer_is_one_clear_error_not_a_hang_or_an_abort() {
    let sim = |args: &[&str]| {
        let mut c = Command::new(NGCTL);
        c.args(["probe", "--transport", "sim", "--json"]).args(args);
        run_bounded(&mut c, Duration::from_secs(20))
    };
    for (args, says) in [
        (&["--model", ""][..], "takes no time"),
        (&["--model", "L=0,o=0,g=0,G=0"][..], "takes no time"),
        (&["--max-size", "18446744073709551615"][..], "--max-size"),
        (&["--fanout-peers", "100000000"][..], "--fanout-peers"),
        (&["--min-size", "0"][..], "--min-size"),
        (&["--timeout-ms", "0"][..], "--timeout-ms"),
        (&["--max-reps", "0"][..], "--max-reps"),
        (&["--model", "L=1e300"][..], "too large"),
    ] {
        let out = sim(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && err.lines().count() <= 3,
            "{args:?}: {err}"
        );
    }

    // ngctl fit on a probe without samples.
    let d = Scratch::new("fit");
    for (name, text) in [
        ("none.json", r#"{"raw": {"sizes": []}}"#),
        (
            "empty.json",
            r#"{"raw": {"sizes": [{"size_bytes": 1, "n": 4, "d_ns": 1.0, "prtt1_ns": [], "prttn_ns": [], "prttd_ns": [], "o_r_ns": []}]}}"#,
        ),
    ] {
        std::fs::write(d.at(name), text).unwrap();
        let out = run_bounded(
            Command::new(NGCTL).arg("fit").arg(d.at(name)),
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "fit {name} succeeded");
        assert!(err.contains("no samples to fit"), "{name}: {err}");
    }

    // The daemon's configuration: each bound a clear line, exit 2.
    let listen = free_loopback();
    let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
    for (extra, says) in [
        ("max_size_bytes = 18446744073709551615", "max_size_bytes"),
        ("recheck_interval_s = 0.0", "recheck_interval_s"),
        ("fanout_interval_s = -1.0", "fanout_interval_s"),
        ("budget_bytes_per_s = 0", "budget_bytes_per_s"),
        ("max_reps = 0", "max_reps"),
        ("sched_fifo_priority = 1000", "sched_fifo_priority"),
    ] {
        let cfg = daemon_config(&d.0, "n1", listen, free_port(), &[("p", peer)], extra);
        let out = run_bounded(
            Command::new(NETGAUGED).arg("--config").arg(&cfg),
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
        assert!(err.contains(says), "{extra}: {err}");
    }
}

#[test]
fn a_weak_key_stops_the_daemon_with_one_line() {
    let d = Scratch::new("weak");
    let listen = free_loopback();
    let cfg = daemon_config(
        &d.0,
        "n1",
        listen,
        free_port(),
        &[("p", "127.0.0.1:9".parse().unwrap())],
        "",
    );
    for weak in [
        "ab".repeat(32),
        "00".repeat(32),
        (0u8..32).map(|b| format!("{b:02x}")).collect::<String>(),
        "passwordpasswordpasswordpassword".to_string(),
    ] {
        std::fs::write(d.at("key"), &weak).unwrap();
        let out = run_bounded(
            Command::new(NETGAUGED).arg("--config").arg(&cfg),
            Duration::from_secs(20),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{weak}");
        assert!(err.contains("weak"), "{weak}: {err}");
    }
}

#[test]
fn the_daemon_answers_status_and_a_clean_stop_shows_as_one() {
    let d = Scratch::new("status");
    let (cfg, listen) = lone_daemon_config(&d.0);
    let mut daemon = Daemon::start(None, &cfg, &[], &d.at("n1.log"));
    let seg = segment_of(&d.0, "n1");
    let status = || {
        let out = Command::new(NGCTL)
            .args(["status", "--shm"])
            .arg(&seg)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).to_string())
    };
    wait_for(Duration::from_secs(20), status)
        .unwrap_or_else(|| panic!("daemon not up:\n{}", daemon.log()));

    // Msg::Status, as the configured peer p1 asks it. The daemon publishes
    // its segment before its control listener is bound, so a status read
    // does not yet mean the port accepts: connect until it does.
    let mut c = wait_for(Duration::from_secs(20), || {
        Connection::connect(listen, "n1", &ConnConfig::new("p1", key())).ok()
    })
    .unwrap_or_else(|| panic!("control port never accepted:\n{}", daemon.log()));
    let deadline = Instant::now() + Duration::from_secs(3);
    match c.request(&Msg::Status, deadline) {
        Ok(Msg::StatusReply(s)) => {
            assert_eq!(s.node, "n1");
            assert_eq!(s.peers.len(), 1);
            assert_eq!(s.peers[0].name, "p1");
        }
        other => panic!("{other:?}"),
    }
    c.close();

    // A clean stop: `ngctl status` says so, not "heartbeat 1.8e9 s ago".
    let (took, st) = daemon.sigterm();
    assert!(st.success(), "{}", daemon.log());
    eprintln!("stopped {took:?} after SIGTERM");
    let out = ngctl(&["status", "--shm", seg.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    // Exit code 3: the daemon is not running (README, "Exit codes").
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text.contains("NOT RUNNING") && text.contains("stopped cleanly"),
        "{text}"
    );
    assert!(!text.contains("s ago,"), "{text}");
}

// ---------------------------------------------------------------------
// Planted files (root: another user's files, device nodes).

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// nobody's uid and gid.
const NOBODY: u32 = 65534;

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A daemon whose files live under a fresh scratch directory; `plant` runs
/// after the directories exist and before the start.
struct Planted {
    d: Scratch,
    cfg: PathBuf,
}

impl Planted {
    fn new(tag: &str) -> Planted {
        let d = Scratch::new(tag);
        let (cfg, _) = lone_daemon_config(&d.0);
        for sub in ["run-n1", "state-n1"] {
            std::fs::create_dir_all(d.at(sub)).unwrap();
            std::fs::set_permissions(d.at(sub), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::write(d.at("victim"), b"precious").unwrap();
        Planted { d, cfg }
    }
    fn run(&self, name: &str) -> PathBuf {
        self.d.at("run-n1").join(name)
    }
    fn state(&self, name: &str) -> PathBuf {
        self.d.at("state-n1").join(name)
    }
    fn start(&self) -> Daemon {
        Daemon::start(None, &self.cfg, &[], &self.d.at("n1.log"))
    }
    fn victim_intact(&self) -> bool {
        std::fs::read(self.d.at("victim")).unwrap() == b"precious"
    }
    /// The daemon runs (its status reads alive).
    fn alive(&self) -> bool {
        Command::new(NGCTL)
            .args(["status", "--shm"])
            .arg(self.run("segment"))
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

/// Start, expect a refusal naming `says` within 10 s.
fn refused(p: &Planted, says: &str) {
    let mut daemon = p.start();
    let st = daemon
        .exit_within(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("the daemon started:\n{}", daemon.log()));
    assert!(!st.success());
    let log = daemon.log();
    assert!(log.contains(says), "expected {says:?}:\n{log}");
    assert!(p.victim_intact());
}

/// Start, expect it up within 20 s, the victim untouched, a clean stop
/// within 2 s.
fn started(p: &Planted, check: impl Fn() -> bool) -> String {
    let mut daemon = p.start();
    if wait_for(Duration::from_secs(20), || {
        (p.alive() && check()).then_some(())
    })
    .is_none()
    {
        panic!("not up, or the check failed:\n{}", daemon.log());
    }
    assert!(p.victim_intact());
    let (took, st) = daemon.sigterm();
    assert!(
        st.success() && took < Duration::from_secs(2),
        "{took:?}\n{}",
        daemon.log()
    );
    assert!(p.victim_intact());
    daemon.log()
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: files owned by another user (runs in a build made as root, as CI does)"
)]
fn directories_others_may_write_or_own_are_refused() {
    assert!(is_root(), "needs root: chown to another user");
    // A world-writable (sticky) runtime directory, like /dev/shm.
    let p = Planted::new("dir1777");
    std::fs::set_permissions(p.d.at("run-n1"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    refused(&p, "may be written by others");
    // A runtime directory another user owns.
    let p = Planted::new("dirnobody");
    std::os::unix::fs::chown(p.d.at("run-n1"), Some(NOBODY), Some(NOBODY)).unwrap();
    refused(&p, "may be written by others");
    // A state directory others may write.
    let p = Planted::new("state777");
    std::fs::set_permissions(p.d.at("state-n1"), std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&p, "state directory");
    // A runtime directory that is a link to another.
    let p = Planted::new("dirlink");
    std::fs::remove_dir(p.d.at("run-n1")).unwrap();
    std::os::unix::fs::symlink(p.d.at("state-n1"), p.d.at("run-n1")).unwrap();
    refused(&p, "symbolic link");
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: files owned by another user (runs in a build made as root, as CI does)"
)]
fn nothing_planted_in_the_daemons_directories_redirects_it() {
    assert!(is_root(), "needs root: chown to another user");
    let victim = |p: &Planted| p.d.at("victim");
    // Links at the segment, its lock, the status file, the state file.
    for name in ["segment", "segment.lock", "segment.status"] {
        let p = Planted::new(&format!("link-{name}"));
        std::os::unix::fs::symlink(victim(&p), p.run(name)).unwrap();
        started(&p, || {
            std::fs::symlink_metadata(p.run(name)).is_ok_and(|m| m.is_file())
        });
    }
    let p = Planted::new("link-state");
    std::os::unix::fs::symlink(victim(&p), p.state("n1.json")).unwrap();
    let log = started(&p, || true);
    assert!(
        log.contains("not used") || log.contains("symbolic link"),
        "{log}"
    );
    // FIFOs at the segment and the status file: nothing blocks on them
    // (the heartbeat goes on), both are replaced.
    for name in ["segment", "segment.status"] {
        let p = Planted::new(&format!("fifo-{name}"));
        mkfifo(&p.run(name));
        started(&p, || {
            std::fs::metadata(p.run(name)).is_ok_and(|m| m.is_file())
        });
    }
    // Another user's segment, even a valid one: replaced, never adopted.
    let p = Planted::new("foreign-seg");
    drop(netgauge::SegmentWriter::create_or_open(p.run("segment"), 4, "n1", "x").unwrap());
    std::os::unix::fs::chown(p.run("segment"), Some(NOBODY), Some(NOBODY)).unwrap();
    let log = started(&p, || {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p.run("segment")).is_ok_and(|m| m.uid() == 0)
    });
    assert!(log.contains("owned by uid 65534"), "{log}");
    // Anyone flocking the readable segment does not keep the daemon out.
    let p = Planted::new("flock");
    drop(netgauge::SegmentWriter::create_or_open(p.run("segment"), 16, "n1", "x").unwrap());
    let f = std::fs::File::open(p.run("segment")).unwrap();
    // SAFETY: flock on a valid descriptor.
    assert_eq!(
        unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        },
        0
    );
    started(&p, || true);
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: files owned by another user (runs in a build made as root, as CI does)"
)]
fn a_key_file_another_user_owns_or_links_is_refused() {
    assert!(is_root(), "needs root: chown to another user");
    let p = Planted::new("keynobody");
    std::os::unix::fs::chown(p.d.at("key"), Some(NOBODY), Some(NOBODY)).unwrap();
    refused(&p, "owned by uid 65534");
    let p = Planted::new("keylink");
    std::fs::rename(p.d.at("key"), p.d.at("key.real")).unwrap();
    std::os::unix::fs::symlink(p.d.at("key.real"), p.d.at("key")).unwrap();
    refused(&p, "not a regular file");
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: files owned by another user, device nodes (runs in a build made as root, as CI does)"
)]
fn readers_refuse_planted_segments_and_status_files_quickly() {
    assert!(is_root(), "needs root: chown to another user");
    let d = Scratch::new("readers");
    let good = d.at("good");
    let w = netgauge::SegmentWriter::create_or_open(&good, 4, "n1", "x").unwrap();
    w.heartbeat();
    let cases: Vec<(&str, PathBuf, &str)> = {
        let foreign = d.at("foreign");
        std::fs::copy(&good, &foreign).unwrap();
        std::os::unix::fs::chown(&foreign, Some(NOBODY), Some(NOBODY)).unwrap();
        let fifo = d.at("fifo");
        mkfifo(&fifo);
        let link = d.at("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        let dev = d.at("zero");
        let c = std::ffi::CString::new(dev.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path; makedev(1, 5) is /dev/zero.
        assert_eq!(
            unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 5)) },
            0
        );
        vec![
            ("another user's segment", foreign, "owned by uid 65534"),
            ("a FIFO", fifo, "FIFO"),
            ("a symbolic link", link, "symbolic link"),
            ("a device", dev, "character device"),
        ]
    };
    for (what, path, says) in &cases {
        for cmd in ["dump", "status"] {
            let t = Instant::now();
            let out = run_bounded(
                Command::new(NGCTL).args([cmd, "--shm"]).arg(path),
                Duration::from_secs(10),
            );
            let took = t.elapsed();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "ngctl {cmd} read {what}");
            assert!(err.contains(says), "ngctl {cmd} on {what}: {err}");
            eprintln!("ngctl {cmd} on {what}: refused in {took:?} (process included)");
        }
        // The library itself, without a process to start: within 100 ms.
        let t = Instant::now();
        assert!(netgauge::Reader::open(path).is_err(), "{what}");
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "{what}: {:?}",
            t.elapsed()
        );
    }
    // The owner rule is what NETGAUGE_SEGMENT_OWNER relaxes, nothing else.
    common::stdout_of(
        Command::new(NGCTL)
            .args(["dump", "--shm"])
            .arg(&cases[0].1)
            .env("NETGAUGE_SEGMENT_OWNER", "any"),
    );
    let out = Command::new(NGCTL)
        .args(["dump", "--shm"])
        .arg(&cases[1].1)
        .env("NETGAUGE_SEGMENT_OWNER", "any")
        .output()
        .unwrap();
    assert!(!out.status.success());
    // A status file planted beside a good segment is not read.
    let status = d.at("good.status");
    mkfifo(&status);
    let out = run_bounded(
        Command::new(NGCTL)
            .args(["status", "--json", "--shm"])
            .arg(&good),
        Duration::from_secs(10),
    );
    let v = common::cli_json(&out.stdout);
    assert!(v["daemon"].is_null(), "{v}");
    drop(w);
}

#[test]
fn a_corrupt_history_file_is_reported_and_replaced_and_the_daemon_runs() {
    let d = Scratch::new("history");
    let (cfg, _) = lone_daemon_config(&d.0);
    let state = d.at("state-n1");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = state.join("n1.history.json");
    std::fs::write(
        &file,
        b"{\"version\": 1, \"node\": \"n1\", \"records\": [{\"peer\"",
    )
    .unwrap();
    let mut daemon = Daemon::start(None, &cfg, &[], &d.at("n1.log"));
    let seg = segment_of(&d.0, "n1");
    // Replaced by a new (empty) history at start.
    let replaced = wait_for(Duration::from_secs(20), || {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).ok()?).ok()?;
        (v["version"] == 1 && v["records"].as_array()?.is_empty()).then_some(v)
    });
    assert!(replaced.is_some(), "not replaced:\n{}", daemon.log());
    let log = daemon.log();
    assert!(
        log.contains("n1.history.json is not valid") && log.contains("starting a new history"),
        "{log}"
    );
    // The daemon runs on: ngctl status answers and names the history file.
    let st = wait_for(Duration::from_secs(20), || {
        let out = Command::new(NGCTL)
            .args(["status", "--json", "--shm"])
            .arg(&seg)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| common::cli_json(&out.stdout))
            .filter(|v| !v["daemon"]["history_file"].is_null())
    })
    .unwrap_or_else(|| panic!("no status:\n{}", daemon.log()));
    assert_eq!(
        st["daemon"]["history_file"].as_str(),
        Some(file.to_str().unwrap())
    );
    // Nothing recorded of p1 yet: exit 5, saying what the file holds.
    let out = ngctl(&["history", "p1", "--shm", seg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains("no history of p1") && err.contains("(none yet)"),
        "{err}"
    );
    let (_, st) = daemon.sigterm();
    assert!(st.success(), "{}", daemon.log());
}
