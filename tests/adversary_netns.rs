//! netgauged daemons on namespace hosts under attack and under change:
//!
//! - 1000 hostile connections (idle, slow, garbage, replayed hellos,
//!   re-opened as fast as the daemon closes them) from one host: a real
//!   peer's session is admitted within 2 s, 20 of 20 times, and a real peer
//!   daemon measures through the attack; the attacked daemon's threads and
//!   memory stay bounded (figures printed);
//! - SIGTERM ends a daemon within 2 s in every state tested: idle,
//!   driving a sweep, serving one, under attack, with its publisher stuck;
//! - a daemon restarted on a changed link (another shaper rate, another
//!   peer address) never publishes the old values as current.
//!
//! Needs root (namespaces, veth, tc): in a build made as root, as CI
//! builds (`build.rs` sets cfg `netns_tests`); elsewhere listed as ignored
//! with that reason. Namespaces are named `h6<pid>…` and deleted on drop.

mod common;
mod hostile;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::has_flag;
use common::netns::{ip, require_root, tbf};
use hostile::{attack, capture_hello, key, wait_for, Daemon, Scratch};
use netgauged::cluster::schedule::{Job, Reference};
use netgauged::control::{
    ConnConfig, Connection, Msg, ProbeDone, ProbeRequest, RoundDone, RoundRequest, SizePlan,
    Timeouts,
};
use netgauged::transport::Kind;

/// `n` namespace hosts on one bridge (in a namespace of its own), host i
/// at 10.<net>.0.(i+1); optional tbf `rate` on every host's link.
struct Hosts {
    names: Vec<String>,
    bridge: String,
    net: u8,
    base: String,
}

impl Hosts {
    fn new(tag: &str, net: u8, n: usize, rate: Option<&str>) -> Hosts {
        require_root();
        let base = format!("h6{tag}{}", std::process::id() % 10_000);
        let names: Vec<String> = (0..n).map(|i| format!("{base}n{i}")).collect();
        let bridge = format!("{base}br");
        let h = Hosts {
            names,
            bridge,
            net,
            base,
        };
        ip(&["netns", "add", &h.bridge]);
        ip(&["-n", &h.bridge, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &h.bridge, "link", "set", "br0", "up"]);
        for i in 0..n {
            h.add_host(i, rate);
        }
        h
    }

    fn add_host(&self, i: usize, rate: Option<&str>) {
        let (x, y) = (format!("{}x{i}", self.base), format!("{}y{i}", self.base));
        let ns = &self.names[i];
        ip(&["netns", "add", ns]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&["link", "add", &x, "type", "veth", "peer", "name", &y]);
        ip(&["link", "set", &x, "netns", ns, "name", "eth0"]);
        ip(&["link", "set", &y, "netns", &self.bridge]);
        ip(&["-n", &self.bridge, "link", "set", &y, "master", "br0", "up"]);
        let addr = format!("{}/24", self.addr(i));
        ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
        ip(&["-n", ns, "link", "set", "eth0", "up"]);
        if let Some(rate) = rate {
            self.shape(i, "add", rate);
        }
    }

    /// tbf on host i's link: `op` add or change.
    fn shape(&self, i: usize, op: &str, rate: &str) {
        tbf(&self.names[i], "eth0", op, rate, "16kb");
    }

    fn addr(&self, i: usize) -> String {
        format!("10.{}.0.{}", self.net, i + 1)
    }

    /// Give host i another address (the old one removed).
    fn readdress(&self, i: usize, host_byte: u8) -> String {
        let old = format!("{}/24", self.addr(i));
        let new = format!("10.{}.0.{host_byte}", self.net);
        ip(&["-n", &self.names[i], "addr", "del", &old, "dev", "eth0"]);
        ip(&[
            "-n",
            &self.names[i],
            "addr",
            "add",
            &format!("{new}/24"),
            "dev",
            "eth0",
        ]);
        new
    }

    fn control(&self, i: usize) -> SocketAddr {
        format!("{}:7470", self.addr(i)).parse().unwrap()
    }

    /// The configurations of hosts 0 and 1, each the other's only peer.
    fn pair_configs(&self, dir: &Path, extra: &str) -> Vec<PathBuf> {
        (0..2)
            .map(|i| config(dir, i, self.control(i), &[(1 - i, self.addr(1 - i))], extra))
            .collect()
    }

    /// Daemons on hosts 0 and 1 with `cfgs`, host i logging to `<tag>i.log`.
    fn start_pair(&self, d: &Scratch, cfgs: &[PathBuf], tag: &str) -> Vec<Daemon> {
        (0..2)
            .map(|i| {
                Daemon::start(
                    Some(&self.names[i]),
                    &cfgs[i],
                    &[],
                    &d.at(&format!("{tag}{i}.log")),
                )
            })
            .collect()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in self.names.iter().chain(std::iter::once(&self.bridge)) {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

/// Daemons busy-poll while they probe: one test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Host i's configuration: node `host<i>`, listening on its address, its
/// peers `peers` (index, address), files under `dir`.
fn config(
    dir: &Path,
    i: usize,
    listen: SocketAddr,
    peers: &[(usize, String)],
    extra: &str,
) -> PathBuf {
    let peers: Vec<(String, SocketAddr)> = peers
        .iter()
        .map(|(j, a)| (format!("host{j}"), format!("{a}:7470").parse().unwrap()))
        .collect();
    let refs: Vec<(&str, SocketAddr)> = peers.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    hostile::daemon_config(dir, &format!("host{i}"), listen, 7471, &refs, extra)
}

/// Host i's entry for `peer` over `transport`.
fn entry(dir: &Path, i: usize, peer: usize, transport: &str) -> Option<serde_json::Value> {
    let shm = hostile::segment_of(dir, &format!("host{i}"));
    common::daemon::entry(&shm, &format!("host{peer}"), Some(transport))
}

/// `ngctl dump --json` of host i's segment.
fn dump(dir: &Path, i: usize) -> Option<serde_json::Value> {
    common::daemon::dump(&hostile::segment_of(dir, &format!("host{i}")))
}

/// The large-message G of an entry (its last range), ns/B.
fn big_g(e: &serde_json::Value) -> f64 {
    e["ranges"]
        .as_array()
        .and_then(|r| r.last())
        .and_then(|r| r["G_ns_per_byte"].as_f64())
        .unwrap_or(f64::NAN)
}

/// The next round, from now, in which host1 drives a job with host0 on
/// the schedule both derive from `cfg` (host0's configuration): its number
/// and start, unix seconds.
fn next_round_of_host1(cfg: &Path) -> (u64, f64) {
    use netgauged::cluster::rounds::{Membership, Rounds};
    let c: netgauged::daemon::config::Config =
        toml::from_str(&std::fs::read_to_string(cfg).unwrap()).unwrap();
    let sc = c.schedule_config();
    let m = Membership::new(&["host0", "host1"], |_| None).unwrap();
    let rounds = Rounds::new(&m, &sc);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let first = rounds.slot_at(now_s).round + 1;
    (first..first + 1000)
        .map(|r| rounds.slot(r))
        .find(|slot| {
            let host0 = m.index_of("host0").unwrap();
            let host1 = m.index_of("host1").unwrap();
            rounds
                .plan_cycle(&m, slot.cycle)
                .pairing(&rounds, slot, host0)
                .is_some_and(|p| p.partner == host1 && !p.drives)
        })
        .map(|slot| (slot.round, slot.start_s))
        .expect("host1 drives host0 in some round")
}

/// A session as host1's daemon asks for one, against host0 under attack,
/// in the next round in which host1 drives: at the round's start connect,
/// handshake, Endpoints, RoundRequest → RoundReply, ProbeRequest →
/// ProbeAccept, ProbeDone, RoundDone, each bounded so the whole fits 2 s.
fn session_as_host1(target: SocketAddr, cfg: &Path) -> Result<Duration, String> {
    let (round, start_s) = next_round_of_host1(cfg);
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    std::thread::sleep(Duration::from_secs_f64((start_s - now_s).max(0.0) + 0.05));
    let t = Instant::now();
    let mut cc = ConnConfig::new("host1", key());
    cc.timeouts = Timeouts {
        connect: Duration::from_millis(800),
        handshake: Duration::from_millis(700),
        ..Timeouts::default()
    };
    let deadline = t + Duration::from_secs(2);
    let mut c = Connection::connect(target, "host0", &cc).map_err(|e| e.to_string())?;
    let ep = Msg::Endpoints(netgauged::control::Endpoints {
        node: "host1".into(),
        mac: [0; 6],
        ifindex: 0,
        udp_port: 0,
        raw_ok: false,
        verbs: None,
    });
    match c.request(&ep, deadline).map_err(|e| e.to_string())? {
        Msg::Endpoints(_) => {}
        other => return Err(format!("answered {other:?}")),
    }
    let ask = Msg::RoundRequest(RoundRequest {
        driver: "host1".into(),
        round,
        job: Job::Recheck(Reference::Pair),
    });
    match c.request(&ask, deadline).map_err(|e| e.to_string())? {
        Msg::RoundReply(r) if r.round == round && r.declined.is_none() => {}
        other => return Err(format!("round {round} answered {other:?}")),
    }
    let nonce: u64 = rand::random::<u64>() | 1;
    let req = Msg::ProbeRequest(ProbeRequest {
        session_nonce: nonce,
        transport: Kind::Udp,
        sizes: SizePlan::Recheck(vec![1]),
        driver: "host1".into(),
        driver_mac: None,
    });
    match c.request(&req, deadline).map_err(|e| e.to_string())? {
        Msg::ProbeAccept(a) if a.session_nonce == nonce => {}
        other => return Err(format!("answered {other:?}")),
    }
    let took = t.elapsed();
    let _ = c.send(&Msg::ProbeDone(ProbeDone {
        session_nonce: nonce,
    }));
    let _ = c.send(&Msg::RoundDone(RoundDone { round, bytes: 0 }));
    c.close();
    Ok(took)
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: network namespaces (runs in a build made as root, as CI does)"
)]
fn under_attack_from_one_host_a_real_peer_is_admitted_and_the_daemon_stays_bounded() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let h = Hosts::new("a", 181, 3, None);
    let d = Scratch::new("netattack");
    // Rounds of 2 s: host1 drives host0 every few seconds. Host0 meets
    // host1 unreachable until host1's daemon starts: backing off 2 to 8 s
    // (not the default 60 s to 15 min), it drives host1 soon after.
    let extra = "recheck_interval_s = 2.0\nbudget_bytes_per_s = 100000000\nmax_size_bytes = 4096\nmax_reps = 8\nfanout_interval_s = 0\n[schedule]\nround_s = 2.0\nskew_s = 0.5\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0";
    let cfg0 = config(&d.0, 0, h.control(0), &[(1, h.addr(1))], extra);
    let mut d0 = Daemon::start(Some(&h.names[0]), &cfg0, &[], &d.at("host0.log"));
    wait_for(Duration::from_secs(20), || dump(&d.0, 0))
        .unwrap_or_else(|| panic!("host0 not up:\n{}", d0.log()));
    let idle = (d0.proc_field("Threads"), d0.proc_field("VmRSS"));

    // The attack, from host2.
    let stop = Arc::new(AtomicBool::new(false));
    let (threads, stats) = attack(
        h.control(0),
        None,
        1000,
        capture_hello("host1", "host0"),
        Some(h.names[2].clone()),
        stop.clone(),
    );
    std::thread::sleep(Duration::from_secs(3));
    // 20 sessions as host1's daemon asks for them, each within 2 s.
    let mut times = Vec::new();
    let sessions_t0 = Instant::now();
    let (mut max_threads, mut max_rss) = (0, 0);
    let h2 = h.names[1].clone();
    let target = h.control(0);
    for i in 0..20 {
        let r = {
            let h2 = h2.clone();
            let cfg0 = cfg0.clone();
            std::thread::spawn(move || {
                use std::os::fd::AsRawFd;
                let f = std::fs::File::open(format!("/var/run/netns/{h2}")).unwrap();
                // SAFETY: setns on an open netns descriptor, this thread only.
                assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
                session_as_host1(target, &cfg0)
            })
            .join()
            .unwrap()
        };
        match r {
            Ok(t) => times.push(t),
            Err(e) => {
                panic!(
                "try {i}: host1's session was not admitted within 2 s: {e}\nattack {stats:?}\n{}",
                d0.log().lines().rev().take(20).collect::<Vec<_>>().join("\n")
            )
            }
        }
        max_threads = max_threads.max(d0.proc_field("Threads").unwrap_or(0));
        max_rss = max_rss.max(d0.proc_field("VmRSS").unwrap_or(0));
        std::thread::sleep(Duration::from_millis(200));
    }
    // A real peer daemon measures through the attack: its sweep toward the
    // attacked daemon (served by it) or the attacked daemon's own, whichever
    // comes first (on 2 shared cores the attacker's loop stretches a sweep
    // to a minute or more).
    let cfg1 = config(&d.0, 1, h.control(1), &[(0, h.addr(0))], extra);
    let d1 = Daemon::start(Some(&h.names[1]), &cfg1, &[], &d.at("host1.log"));
    let current =
        |i: usize, peer: usize| entry(&d.0, i, peer, "udp").filter(|e| !has_flag(e, "stale"));
    let sessions_took = sessions_t0.elapsed();
    let measure_t0 = Instant::now();
    let measured = wait_for(Duration::from_secs(240), || {
        current(1, 0).or_else(|| current(0, 1))
    });
    let measure_took = measure_t0.elapsed();
    for _ in 0..10 {
        max_threads = max_threads.max(d0.proc_field("Threads").unwrap_or(0));
        max_rss = max_rss.max(d0.proc_field("VmRSS").unwrap_or(0));
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    times.sort();
    let status = Command::new(hostile::NGCTL_PATH)
        .args(["status", "--json", "--shm"])
        .arg(hostile::segment_of(&d.0, "host0"))
        .output()
        .unwrap();
    let st: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
    eprintln!(
        "host1 admitted 20/20 under attack: median {:?}, max {:?}; attacker opened {} \
         connections ({} closed by the daemon); host0 threads {:?} idle, {max_threads} under \
         attack; RSS {:?} kB idle, {max_rss} kB under attack; rejects {}; the 20 sessions in \
         host1's rounds took {sessions_took:.1?}, host1's daemon's first entry {measure_took:.1?}",
        times[10],
        times[19],
        stats.opened.load(Ordering::Relaxed),
        stats.closed.load(Ordering::Relaxed),
        idle.0,
        idle.1,
        st["daemon"]["control_rejects"]
    );
    assert!(
        measured.is_some(),
        "host1's daemon measured nothing through the attack:\n{}\n{}",
        d0.log(),
        d1.log()
    );
    // Bounded: the attack adds no thread (1 pre-authentication thread, 8
    // workers, whatever the connections) and little memory.
    assert!(
        max_threads <= idle.0.unwrap_or(0) + 2,
        "threads {:?} idle, {max_threads} under attack",
        idle.0
    );
    assert!(
        max_rss <= idle.1.unwrap_or(0) + 32 * 1024,
        "RSS {:?} kB idle, {max_rss} kB under attack",
        idle.1
    );
    let (took, st) = d0.sigterm();
    assert!(st.success() && took < Duration::from_secs(2), "{took:?}");
}

/// Which of two daemons drives a session now, from their logs: the one
/// whose last session line says "driving".
fn driver_now(logs: [&Daemon; 2]) -> Option<usize> {
    logs.iter().position(|d| {
        let l = d.log();
        // "round N: driving the pair sweep with host1" (a class, pair or
        // repair sweep: long enough to be caught in).
        let drive = l
            .match_indices("driving the ")
            .filter(|(i, _)| {
                l[*i..]
                    .lines()
                    .next()
                    .is_some_and(|x| x.contains(" sweep with "))
            })
            .map(|(i, _)| i)
            .last();
        let serve = l.rfind("serving a ");
        drive.is_some() && drive > serve
    })
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: network namespaces (runs in a build made as root, as CI does)"
)]
fn sigterm_ends_the_daemon_within_2_s_in_every_state() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let h = Hosts::new("t", 182, 3, Some("20mbit"));
    let d = Scratch::new("netterm");
    // Slow link, large sizes: a sweep lasts long enough to be caught in it.
    // 1 GB/s: the schedule charges a sweep's bound before it runs, and the
    // bound of a first sweep to 1 MiB is several GB.
    // A partner found unreachable (not yet started, or stopped) is tried
    // again after 2 to 8 s, not the default 60 s to 15 min; rounds of 4 s
    // (not 10 s): the first sweep starts sooner, and it outlasts its round
    // anyway.
    let extra = "recheck_interval_s = 2.0\nbudget_bytes_per_s = 1000000000\nmax_size_bytes = 1048576\nfanout_interval_s = 0\n[schedule]\nround_s = 4.0\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0";
    let cfgs = h.pair_configs(&d.0, extra);
    let stop = |what: &str, daemon: &mut Daemon| {
        let (t, st) = daemon.sigterm();
        eprintln!("{what}: exited {t:?} after SIGTERM ({st})");
        assert!(
            t < Duration::from_secs(2),
            "{what}: {t:?}\n{}",
            daemon.log()
        );
        st
    };

    // Idle: its only peer does not answer.
    let mut a = Daemon::start(Some(&h.names[0]), &cfgs[0], &[], &d.at("idle.log"));
    wait_for(Duration::from_secs(20), || dump(&d.0, 0)).expect("up");
    std::thread::sleep(Duration::from_secs(2));
    assert!(stop("idle", &mut a).success());

    // Driving and serving a sweep, each side once.
    for victim in ["driver", "responder"] {
        let mut ds = h.start_pair(&d, &cfgs, victim);
        let drv = wait_for(Duration::from_secs(60), || driver_now([&ds[0], &ds[1]]))
            .unwrap_or_else(|| panic!("no sweep started:\n{}\n{}", ds[0].log(), ds[1].log()));
        std::thread::sleep(Duration::from_millis(1500));
        let i = if victim == "driver" { drv } else { 1 - drv };
        stop(&format!("{victim} mid-sweep"), &mut ds[i]);
        stop(
            &format!("the other side of a {victim}'s sweep"),
            &mut ds[1 - i],
        );
    }

    // Under attack.
    let mut a = Daemon::start(Some(&h.names[0]), &cfgs[0], &[], &d.at("attack.log"));
    wait_for(Duration::from_secs(20), || dump(&d.0, 0)).expect("up");
    let halt = Arc::new(AtomicBool::new(false));
    let (threads, _) = attack(
        h.control(0),
        None,
        1000,
        capture_hello("host1", "host0"),
        Some(h.names[2].clone()),
        halt.clone(),
    );
    std::thread::sleep(Duration::from_secs(2));
    stop("under attack", &mut a);
    halt.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }

    // The publisher stuck (test flag): the signal thread's deadline.
    let mut a = Daemon::start(
        Some(&h.names[0]),
        &cfgs[0],
        &["--test-stall-publisher-after-s", "1"],
        &d.at("stall.log"),
    );
    wait_for(Duration::from_secs(20), || dump(&d.0, 0)).expect("up");
    std::thread::sleep(Duration::from_secs(2));
    stop("publisher stuck", &mut a);
    assert!(a.log().contains("did not stop within"), "{}", a.log());
}

#[test]
#[cfg_attr(
    not(netns_tests),
    ignore = "needs root: network namespaces, tc (runs in a build made as root, as CI does)"
)]
fn a_daemon_restarted_on_a_changed_link_never_publishes_old_values_as_current() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // 1 Gbit/s first, 50 Mbit/s after the restart: G 8 → 160 ns/B.
    let h = Hosts::new("r", 183, 2, Some("1gbit"));
    let d = Scratch::new("netrestart");
    // Backoff 2 to 8 s: each phase starts host0 before its peer (or its
    // peer at a new address), whose first contacts may find nobody. Rounds
    // of 4 s: the sweeps at 50 Mbit/s (to 256 KiB, about 17 s) outlast
    // every round, so a repair confirmed with half its round left runs at
    // once, else at the start of the pair's next meeting. 1 GB/s: a
    // daemon's bucket starts empty, and a class sweep (100 MB) waits until
    // the bucket would still hold two more after it: 3 s at 100 MB/s.
    let extra = "recheck_interval_s = 2.0\nbudget_bytes_per_s = 1000000000\nmax_size_bytes = 262144\nmax_reps = 12\nfanout_interval_s = 0\n[schedule]\nround_s = 4.0\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0";
    let cfgs = h.pair_configs(&d.0, extra);
    let start = |tag: &str| h.start_pair(&d, &cfgs, tag);
    let phase = Instant::now();
    let mut ds = start("fast");
    let fast = wait_for(Duration::from_secs(300), || {
        let e = entry(&d.0, 0, 1, "udp")?;
        (!has_flag(&e, "stale") && !has_flag(&e, "restored")).then_some(e)
    })
    .unwrap_or_else(|| panic!("no first entry:\n{}", ds[0].log()));
    let g_fast = big_g(&fast);
    let fast_took = phase.elapsed();
    for x in &mut ds {
        assert!(x.sigterm().1.success());
    }

    // The same peer, another shaper rate.
    h.shape(0, "change", "50mbit");
    h.shape(1, "change", "50mbit");
    let restart_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let phase = Instant::now();
    let mut ds = start("slow");
    // The segment still holds what the stopped daemon left (heartbeat 0);
    // what the restarted daemon publishes counts from its start on.
    wait_for(Duration::from_secs(20), || {
        ds[0].log().contains(" up: ").then_some(())
    })
    .unwrap_or_else(|| panic!("host0 not up:\n{}", ds[0].log()));
    let mut seen_restored = false;
    let mut current = None;
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline {
        if let Some(e) = entry(&d.0, 0, 1, "udp") {
            let flagged = has_flag(&e, "restored") || has_flag(&e, "stale");
            seen_restored |= has_flag(&e, "restored");
            if !flagged {
                // Current: measured since the restart, never the old
                // values (a re-check that agreed with them would leave
                // their original time). How close the new fit comes to
                // the shaper is the fit's business, not checked here.
                let g = big_g(&e);
                assert!(
                    e["measured_unix_ns"].as_u64().unwrap_or(0) >= restart_unix_ns,
                    "old values published as current after the restart: G {g} ns/B \
                     (before: {g_fast} ns/B)\n{e}\nbefore: {fast}\n{}",
                    ds[0].log()
                );
                current = Some(g);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let g_slow = current.unwrap_or_else(|| panic!("no current entry:\n{}", ds[0].log()));
    eprintln!(
        "G {g_fast:.1} ns/B at 1 Gbit/s (first entry after {fast_took:.1?}), {g_slow:.1} ns/B \
         after the restart at 50 Mbit/s (current {:.1?} after it); restored entry seen: \
         {seen_restored}",
        phase.elapsed()
    );
    assert!(
        seen_restored,
        "the stored values were not shown as restored first"
    );
    for x in &mut ds {
        assert!(x.sigterm().1.success());
    }

    // The peer moves to another address, on a link at 1 Gbit/s again: its
    // stored values are not restored at all. (The rate: its sweeps take
    // 1.5 s instead of 17 s; the phase is about the address.)
    h.shape(0, "change", "1gbit");
    h.shape(1, "change", "1gbit");
    let moved = h.readdress(1, 77);
    let cfg0 = config(&d.0, 0, h.control(0), &[(1, moved.clone())], extra);
    let moved_ctl: SocketAddr = format!("{moved}:7470").parse().unwrap();
    let cfg1 = hostile::daemon_config(
        &d.0,
        "host1",
        moved_ctl,
        7471,
        &[("host0", h.control(0))],
        extra,
    );
    let phase = Instant::now();
    let mut d0 = Daemon::start(Some(&h.names[0]), &cfg0, &[], &d.at("moved0.log"));
    wait_for(Duration::from_secs(20), || {
        d0.log().contains(" up: ").then_some(())
    })
    .unwrap_or_else(|| panic!("host0 not up:\n{}", d0.log()));
    let e = entry(&d.0, 0, 1, "udp");
    assert!(
        e.as_ref().is_none_or(|e| has_flag(e, "stale")),
        "values measured toward the old address published: {e:?}"
    );
    assert!(d0.log().contains("not restored"), "{}", d0.log());
    let _d1 = Daemon::start(Some(&h.names[1]), &cfg1, &[], &d.at("moved1.log"));
    let fresh = wait_for(Duration::from_secs(300), || {
        let e = entry(&d.0, 0, 1, "udp")?;
        (!has_flag(&e, "stale") && !has_flag(&e, "restored")).then_some(e)
    });
    assert!(
        fresh.is_some(),
        "no new entry toward the moved peer:\n{}",
        d0.log()
    );
    eprintln!(
        "the moved peer's first entry {:.1?} after host0's start",
        phase.elapsed()
    );
    assert!(d0.sigterm().1.success());
}
