//! netgauged daemons on hosts made of network namespaces: convergence and
//! G against a `tc tbf` rate, restart from the state file, a peer killed
//! mid-probe, a fuzzed control port, LogfP over four hosts on a bridge, and
//! a shaper's rate changed under two daemons (drift, repair, history).
//!
//! Needs root (namespaces, veth, tc). They run in a build made as root, as
//! CI builds (`build.rs` sets cfg `netns_tests`; `NETGAUGED_NETNS_TESTS=1`
//! or `=0` overrides the choice); in any other build the test runner lists
//! them as ignored, with that reason. Run without root anyway, each fails
//! at once saying why.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[macro_use]
mod common;
use common::daemon::{dump, has_flag, ngctl_json, wait_for};
use common::netns::{ip, tbf};
use common::NGCTL;

const NETGAUGED: &str = env!("CARGO_BIN_EXE_netgauged");
/// The cluster key of every test (random bytes, in hex).
const KEY_HEX: &str = "8f1dc2075ea933f061bb029c47d8157ae428906bcf1153a63ef7840d69b225c8";

fn key_bytes() -> Vec<u8> {
    (0..KEY_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&KEY_HEX[i..i + 2], 16).unwrap())
        .collect()
}

/// The namespaces of one test: they share a pid-based prefix and are
/// deleted on drop. Host i has address 10.<net>.0.(i+1).
struct Net {
    names: Vec<String>,
    net: u8,
    dir: PathBuf,
}

impl Net {
    /// `hosts` namespaces; two are joined by a veth pair, more by a bridge
    /// in a namespace of its own. `rate`: a tbf shaper on every host's link.
    fn new(tag: &str, net: u8, hosts: usize, rate: Option<&str>) -> Net {
        let base = format!("ng{}{}", tag, std::process::id() % 100_000);
        let names: Vec<String> = (0..hosts).map(|i| format!("{base}h{i}")).collect();
        let dir = std::env::temp_dir().join(&base);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut n = Net { names, net, dir };
        for h in &n.names {
            ip(&["netns", "add", h]);
            ip(&["-n", h, "link", "set", "lo", "up"]);
        }
        if hosts == 2 {
            let (a, b) = (&n.names[0], &n.names[1]);
            ip(&[
                "link",
                "add",
                &format!("{base}a"),
                "type",
                "veth",
                "peer",
                "name",
                &format!("{base}b"),
            ]);
            ip(&[
                "link",
                "set",
                &format!("{base}a"),
                "netns",
                a,
                "name",
                "eth0",
            ]);
            ip(&[
                "link",
                "set",
                &format!("{base}b"),
                "netns",
                b,
                "name",
                "eth0",
            ]);
        } else {
            let br = format!("{base}br");
            n.names.push(br.clone());
            ip(&["netns", "add", &br]);
            ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]);
            ip(&["-n", &br, "link", "set", "br0", "mtu", "9000", "up"]);
            for (i, h) in n.names[..hosts].iter().enumerate() {
                let (x, y) = (format!("{base}x{i}"), format!("{base}y{i}"));
                ip(&["link", "add", &x, "type", "veth", "peer", "name", &y]);
                ip(&["link", "set", &x, "netns", h, "name", "eth0"]);
                ip(&["link", "set", &y, "netns", &br]);
                ip(&[
                    "-n", &br, "link", "set", &y, "mtu", "9000", "master", "br0", "up",
                ]);
            }
        }
        for (i, h) in n.names[..hosts].iter().enumerate() {
            let addr = format!("10.{}.0.{}/24", n.net, i + 1);
            ip(&["-n", h, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", h, "link", "set", "eth0", "mtu", "9000", "up"]);
            if let Some(rate) = rate {
                tbf(h, "eth0", "add", rate, "16kb");
            }
        }
        std::fs::write(n.dir.join("key"), KEY_HEX).unwrap();
        std::fs::set_permissions(n.dir.join("key"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        n
    }

    fn addr(&self, i: usize) -> String {
        format!("10.{}.0.{}", self.net, i + 1)
    }

    /// Write host i's configuration (peers: every other host).
    fn config(&self, i: usize, hosts: usize, extra: &str) -> PathBuf {
        let mut t = format!(
            "node = \"host{i}\"\nlisten = \"{}:7470\"\nudp_port = 7471\nshm = \"{}\"\nkey_file = \"{}\"\nstate_file = \"{}\"\nlock_memory = false\n{extra}\n",
            self.addr(i),
            self.shm(i).display(),
            self.dir.join("key").display(),
            self.dir.join(format!("state{i}.json")).display()
        );
        for j in (0..hosts).filter(|&j| j != i) {
            t.push_str(&format!(
                "[[peer]]\nname = \"host{j}\"\naddress = \"{}:7470\"\n",
                self.addr(j)
            ));
        }
        let p = self.dir.join(format!("host{i}.toml"));
        std::fs::write(&p, t).unwrap();
        p
    }

    fn shm(&self, i: usize) -> PathBuf {
        self.dir.join(format!("seg{i}"))
    }

    fn start(&self, i: usize, cfg: &Path) -> Daemon {
        let log = std::fs::File::create(self.dir.join(format!("host{i}.log"))).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[i], NETGAUGED, "--config"])
            .arg(cfg)
            .env("RUST_LOG", "netgauged=debug")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn netgauged");
        Daemon(child)
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("host{i}.log"))).unwrap_or_default()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.names {
            let _ = Command::new("ip").args(["netns", "del", h]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

struct Daemon(Child);

impl Daemon {
    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
    fn kill9(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
    /// SIGTERM and wait for a clean exit.
    fn stop(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill").arg(self.0.id().to_string()).status();
        self.0.wait().expect("wait")
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A segment's entry for `peer` (one transport, udp, in these tests).
fn entry(shm: &Path, peer: &str) -> Option<serde_json::Value> {
    common::daemon::entry(shm, peer, None)
}

/// `probe_cpu` for host `i`: a core of its own where the machine has enough.
fn own_core(i: usize) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("probe_cpu = {}", i % cores)
}

/// Daemons busy-poll while they probe: two tests' hosts at once on a
/// two-core machine measure the scheduler, not the links. One at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

macro_rules! need_root {
    () => {
        common::netns::require_root();
        let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    };
}

/// `[schedule]` of every test's daemons: a partner found unreachable is
/// tried again after 2 s, doubling to 8 s, not after the default 60 s to
/// 15 min. The daemons of a test start within milliseconds of each other,
/// so a first contact may find its partner not yet listening; a killed
/// peer that returns is met again seconds later.
const BACKOFF: &str = "[schedule]\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0";

/// [`BACKOFF`] with rounds of 4 s (the default 10 s), for the tests whose
/// sweeps (to 16 KiB at most) and fan-outs take well under a round: the
/// schedule's steps come 2.5 times as often.
const SHORT_ROUNDS: &str = "[schedule]\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0\nround_s = 4.0";

/// tbf at 400 Mbit/s (16 KiB bucket): 1/R = 20 ns per byte on the wire;
/// UDP/IP/Ethernet and our headers add 82 B per 8918 B of payload at MTU
/// 9000 (≈ 0.9 %).
const RATE: &str = "400mbit";
const INV_RATE_NS_PER_BYTE: f64 = 8.0 / 400e6 * 1e9;

root_test! {
    fn two_daemons_converge_and_g_matches_the_shaper() {
        need_root!();
        let net = Net::new("c", 97, 2, Some(RATE));
        // Sizes to 1 MiB: above the shaper's 16 KiB bucket a burst of n
        // messages is paced at R, below it part of it is free, so the
        // large-message range needs sizes well above the bucket.
        // A budget of 1 GB/s: the schedule charges a sweep's bound before
        // it runs (sweeps to 1 MiB bound at several GB before the first
        // measured cost), which 100 MB/s pays only after minutes.
        let extra = "recheck_interval_s = 5.0\nbudget_bytes_per_s = 1000000000\nmax_size_bytes = 1048576\nfanout_interval_s = 0";
        // Each host's busy-polling threads on a core of its own, as on two
        // machines: unpinned, a driver and its responder may share one core,
        // where each spins out its yield threshold before the other runs
        // (bench/daemon.md).
        let mut d: Vec<Daemon> = (0..2)
            .map(|i| {
                let cfg = format!("{extra}\n{}\n{BACKOFF}", own_core(i));
                net.start(i, &net.config(i, 2, &cfg))
            })
            .collect();
        for (me, other) in [(0, 1), (1, 0)] {
            // The two sweeps run one after the other (a node drives or
            // serves, never both), each 25-150 s here: the token bucket's
            // modes make the sweep bisect many sizes.
            let e = wait_for(Duration::from_secs(400), || {
                entry(&net.shm(me), &format!("host{other}"))
            })
            .unwrap_or_else(|| {
                panic!(
                    "host{me} published nothing for host{other}:\n{}\n--- host{other}:\n{}",
                    net.log(me),
                    net.log(other)
                )
            });
            // The large-message bandwidth the entry states: the sustained
            // rate (the last range's G may include sizes the bucket passes
            // at line rate; the ranges are printed below).
            let g = e["bandwidth"]["sustained"]["G_ns_per_byte"]
                .as_f64()
                .expect("sustained G");
            let err = (g - INV_RATE_NS_PER_BYTE).abs() / INV_RATE_NS_PER_BYTE;
            eprintln!("host{me}: large-message G {g:.2} ns/B, 1/R {INV_RATE_NS_PER_BYTE:.2} ns/B");
            for r in e["ranges"].as_array().into_iter().flatten() {
                eprintln!(
                    "  {}..{} B: g {:.0} ns, G {:.3} ns/B",
                    r["from_bytes"], r["to_bytes"], r["g_ns"], r["G_ns_per_byte"]
                );
            }
            assert!(
                err <= 0.10,
                "host{me}: large-message G {g:.2} ns/B vs 1/R {INV_RATE_NS_PER_BYTE:.2} ({:.1} % off)\n{e}",
                err * 100.0
            );
            assert!(e["eel_ns"].as_f64().unwrap() > 0.0);
        }
        // Both EELs describe the same link: they agree within a factor of 2.
        let (a, b) = (
            entry(&net.shm(0), "host1").unwrap()["eel_ns"]
                .as_f64()
                .unwrap(),
            entry(&net.shm(1), "host0").unwrap()["eel_ns"]
                .as_f64()
                .unwrap(),
        );
        eprintln!("EEL host0→host1 {a:.0} ns, host1→host0 {b:.0} ns");
        assert!(
            a / b < 2.0 && b / a < 2.0,
            "EELs {a} and {b}\n--- host0:\n{}\n--- host1:\n{}",
            net.log(0),
            net.log(1)
        );
        for x in &mut d {
            assert!(x.alive());
            assert!(x.stop().success(), "clean exit on SIGTERM");
        }
    }
}

fn inode(p: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).expect("segment exists").ino()
}

root_test! {
    fn restart_keeps_the_inode_and_restores_values_and_a_dead_peer_goes_stale() {
        need_root!();
        let net = Net::new("r", 96, 2, None);
        let extra = format!("recheck_interval_s = 2.0\nbudget_bytes_per_s = 100000000\nmax_size_bytes = 16384\nfanout_interval_s = 0\n{SHORT_ROUNDS}");
        let cfg: Vec<PathBuf> = (0..2).map(|i| net.config(i, 2, &extra)).collect();
        let mut a = net.start(0, &cfg[0]);
        let mut b = net.start(1, &cfg[1]);
        let before = wait_for(Duration::from_secs(120), || entry(&net.shm(0), "host1"))
            .unwrap_or_else(|| panic!("no entry:\n{}", net.log(0)));
        let ino = inode(&net.shm(0));
        // The full sweep's latency run: the daemon's default of 200 round
        // trips at 1, 4, 16 and 64 B, percentiles in order.
        let lat = before["latency"].as_array().expect("latency records");
        let sizes: Vec<u64> = lat.iter().filter_map(|r| r["size_bytes"].as_u64()).collect();
        assert_eq!(sizes, [1, 4, 16, 64], "{before}");
        for r in lat {
            assert_eq!(r["samples"], 200, "{r}");
            let v: Vec<f64> = ["min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"]
                .iter()
                .map(|k| r[*k].as_f64().unwrap_or(f64::NAN))
                .collect();
            assert!(v[0] > 0.0 && v.windows(2).all(|w| w[0] <= w[1]), "{r}");
        }

        // Restart host0: same inode, values back from the state file at once
        // (its peer is still there, so nothing is stale).
        assert!(a.stop().success());
        let restarted = Instant::now();
        let mut a = net.start(0, &cfg[0]);
        let restored = wait_for(Duration::from_secs(10), || {
            let e = entry(&net.shm(0), "host1")?;
            let st = Command::new(NGCTL)
                .args(["status", "--shm"])
                .arg(net.shm(0))
                .output()
                .ok()?;
            st.status.success().then_some(e)
        })
        .expect("values restored after restart");
        // Reported, not asserted (a test does not time things).
        eprintln!(
            "values readable {:?} after the restart began",
            restarted.elapsed()
        );
        assert_eq!(inode(&net.shm(0)), ino, "the segment keeps its inode");
        assert_eq!(
            restored["eel_ns"], before["eel_ns"],
            "restored from the state file"
        );
        assert_eq!(restored["measured_unix_ns"], before["measured_unix_ns"]);
        assert_eq!(restored["latency"], before["latency"]);

        // kill -9 the peer: host0 stays up, publishes nothing new for host1, and
        // marks it stale once a probe fails.
        b.kill9();
        let stale = wait_for(Duration::from_secs(60), || {
            let e = entry(&net.shm(0), "host1")?;
            e["flags"]
                .as_array()?
                .iter()
                .any(|f| f == "stale")
                .then_some(e)
        })
        .unwrap_or_else(|| panic!("host1 never marked stale:\n{}", net.log(0)));
        assert!(a.alive(), "the survivor stays up");
        assert_eq!(
            stale["measured_unix_ns"], before["measured_unix_ns"],
            "nothing partial was published"
        );
        // The peer returns: host0 recovers. Only a measurement lifts the
        // stale flag: a re-check that agrees with the entry (which keeps its
        // measurement time) or a new sweep.
        let _b = net.start(1, &cfg[1]);
        let fresh = wait_for(Duration::from_secs(120), || {
            let e = entry(&net.shm(0), "host1")?;
            let stale = e["flags"].as_array()?.iter().any(|f| f == "stale");
            (!stale).then_some(e)
        });
        assert!(fresh.is_some(), "host0 recovered:\n{}", net.log(0));
        assert!(a.alive());
    }
}

root_test! {
    fn a_fuzzed_control_port_is_rejected_and_counted() {
        need_root!();
        let net = Net::new("f", 95, 2, None);
        let extra = "fanout_interval_s = 0\nmax_size_bytes = 4096";
        let mut a = net.start(0, &net.config(0, 2, extra));
        let status = |shm: &Path| ngctl_json("status", shm);
        wait_for(Duration::from_secs(10), || status(&net.shm(0))).expect("daemon up");
        // The sender runs inside host1's namespace: this test binary again, in
        // its ignored helper test below.
        let out = Command::new("ip")
            .args(["netns", "exec", &net.names[1]])
            .arg(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "fuzz_sender", "--nocapture"])
            .env("NG_FUZZ_TARGET", format!("{}:7470", net.addr(0)))
            .output()
            .expect("run the fuzz sender");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let conns: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("fuzz connections: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("sender report");
        eprintln!("{text}");
        assert!(a.alive(), "the daemon survives garbage on its control port");
        // Every connection was refused at its first bad frame and counted (the
        // status file is rewritten every second).
        let counted = wait_for(Duration::from_secs(5), || {
            let st = status(&net.shm(0))?;
            let r = &st["daemon"]["control_rejects"];
            let n: u64 = [
                "malformed",
                "oversize",
                "bad_tag",
                "replay",
                "wrong_version",
                "timeout",
                "unknown_peer",
                "refused",
            ]
            .iter()
            .map(|k| r[k].as_u64().unwrap_or(0))
            .sum();
            (n >= conns).then_some(n)
        });
        assert!(
            counted.is_some(),
            "rejections not counted for {conns} connections:\n{}",
            net.log(0)
        );
        // Nothing else changed: no entry appeared.
        assert_eq!(
            dump(&net.shm(0)).unwrap()["entries"]
                .as_array()
                .map_or(0, Vec::len),
            0
        );
    }
}

/// Helper of the test above, run by it inside a namespace (ignored on its
/// own): writes 100 000 random frames over 10 000 connections (the daemon
/// judges the first frame of each and resets the connection).
#[test]
#[ignore = "run by a_fuzzed_control_port_is_rejected_and_counted"]
fn fuzz_sender() {
    use rand::{Rng, SeedableRng};
    use std::io::Write;
    let target: std::net::SocketAddr = std::env::var("NG_FUZZ_TARGET")
        .expect("target")
        .parse()
        .unwrap();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
    let (mut conns, mut frames) = (0u64, 0u64);
    for _ in 0..10_000 {
        let mut s =
            std::net::TcpStream::connect_timeout(&target, Duration::from_secs(2)).expect("connect");
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        conns += 1;
        for _ in 0..10 {
            let len = rng.gen_range(1..96usize);
            let mut frame: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.5) {
                // A plausible length prefix, so the body reaches the checks.
                frame[..4.min(len)].copy_from_slice(&(len as u32).to_le_bytes()[..4.min(len)]);
            }
            if s.write_all(&frame).is_err() {
                break;
            }
            frames += 1;
        }
        // Wait for the daemon's verdict (it resets the connection).
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut sink = [0u8; 64];
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        let _ = std::io::Read::read(&mut s, &mut sink);
    }
    // Forged: a client with the wrong cluster key; unauthenticated: the
    // right key but a node name the daemon does not know. Both refused.
    use netgauged::control::{ClusterKey, ConnConfig, Connection};
    let mut wrong = key_bytes();
    wrong[0] ^= 1;
    let wrong = ClusterKey::from_bytes(&wrong).unwrap();
    let right = ClusterKey::from_bytes(&key_bytes()).unwrap(); // what the key file holds in hex
    for (who, key) in [("host1", wrong), ("intruder", right)] {
        let r = Connection::connect(target, "host0", &ConnConfig::new(who, key));
        assert!(r.is_err(), "{who} was let in");
        conns += 1;
    }
    println!("fuzz connections: {conns}");
    println!("fuzz frames: {frames}");
}

root_test! {
    fn four_hosts_on_a_bridge_publish_logfp() {
        need_root!();
        let hosts = 4;
        let net = Net::new("l", 94, hosts, None);
        // A fan-out round every other round, as with the default 10 s rounds
        // and fanout_interval_s = 20. Rounds of 2 s (sweeps to 4 KiB on an
        // unshaped link, no repair to fit in a round): host0 drives each
        // peer once in two cycles and the fan-out once in four fan-out
        // rounds, and those come twice as often as in rounds of 4 s.
        let extra = "recheck_interval_s = 60.0\nbudget_bytes_per_s = 100000000\nmax_size_bytes = 4096\nfanout_interval_s = 4.0\n[schedule]\nbackoff_min_s = 2.0\nbackoff_max_s = 8.0\nround_s = 2.0\nskew_s = 0.5";
        let _d: Vec<Daemon> = (0..hosts)
            .map(|i| net.start(i, &net.config(i, hosts, extra)))
            .collect();
        // Every host measures its three peers, then runs 1:P−P:1 over them.
        let e = wait_for(Duration::from_secs(300), || {
            let d = dump(&net.shm(0))?;
            d["entries"]
                .as_array()?
                .iter()
                .find(|e| {
                    e["logfp"]["curve"]
                        .as_array()
                        .is_some_and(|c| c.len() == hosts - 1)
                })
                .cloned()
        })
        .unwrap_or_else(|| panic!("no LogfP published:\n{}", net.log(0)));
        let l = &e["logfp"];
        let curve = l["curve"].as_array().unwrap();
        let ps: Vec<u64> = curve.iter().map(|p| p["peers"].as_u64().unwrap()).collect();
        assert_eq!(ps, vec![1, 2, 3], "o(P) measured at P = 1..3");
        for p in curve {
            let (o, rtt) = (p["o_ns"].as_f64().unwrap(), p["rtt_ns"].as_f64().unwrap());
            assert!(o > 0.0 && rtt > o, "o(P) {o} ns, RTT(P) {rtt} ns");
        }
        // RTT(P) should grow with P (one more answer to wait for each time),
        // but that is a timing on a shared 2-core machine with four daemons:
        // reported, not asserted.
        let rtts: Vec<f64> = curve
            .iter()
            .map(|p| p["rtt_ns"].as_f64().unwrap())
            .collect();
        eprintln!("RTT(P) for P = 1..3: {rtts:?} ns");
        assert!(l["o_min_ns"].as_f64().is_some() && l["o_max_ns"].as_f64().is_some());
        // f is published as a number or as null ("not identifiable from P ≤ 3").
        assert!(l.get("f").is_some());
    }
}

/// The sustained large-message G an entry states (ns/B).
fn sustained_g(e: &serde_json::Value) -> Option<f64> {
    e["bandwidth"]["sustained"]["G_ns_per_byte"].as_f64()
}

/// Set host i's shaper to `rate`, with a bucket of 4 KiB (a few 1500 B
/// frames): bursts of the re-check's 4 KiB messages are paced at the rate
/// too, not passed at line rate from a larger bucket.
fn shape(net: &Net, i: usize, rate: &str) {
    tbf(&net.names[i], "eth0", "replace", rate, "4kb");
}

root_test! {
    fn a_shaper_cut_under_two_daemons_is_repaired_flagged_changed_and_in_history() {
        need_root!();
        // 400 Mbit/s (20 ns/B), then 200 Mbit/s (40 ns/B): the re-check's
        // gap at 4 KiB doubles, beyond the tolerance a gap may have
        // (cluster::recheck: at most half the reference).
        const R1: &str = "400mbit";
        const R2: &str = "200mbit";
        let (g1, g2) = (8.0 / 400e6 * 1e9, 8.0 / 200e6 * 1e9);
        let net = Net::new("h", 94, 2, None);
        for i in 0..2 {
            ip(&["-n",
                &net.names[i],
                "link",
                "set",
                "eth0",
                "mtu",
                "1500",
            ]);
            shape(&net, i, R1);
        }
        // Sizes to 128 KiB and few repetitions: a sweep that takes seconds.
        let recheck_s = 5.0;
        let extra = format!(
            "recheck_interval_s = {recheck_s}\nbudget_bytes_per_s = 1000000000\nmax_size_bytes = 131072\nmax_reps = 8\nfanout_interval_s = 0"
        );
        let started = Instant::now();
        // Rounds of the default 10 s: a repair sweep runs only where it fits
        // in the rest of a round.
        let _d: Vec<Daemon> = (0..2)
            .map(|i| {
                let cfg = format!("{extra}\n{}\n{BACKOFF}", own_core(i));
                net.start(i, &net.config(i, 2, &cfg))
            })
            .collect();
        let first = wait_for(Duration::from_secs(150), || entry(&net.shm(0), "host1"))
            .unwrap_or_else(|| panic!("no entry:\n{}\n--- host1:\n{}", net.log(0), net.log(1)));
        let first_s = started.elapsed().as_secs_f64();
        let before = sustained_g(&first).expect("sustained G");
        eprintln!("first entry after {first_s:.1} s: sustained G {before:.2} ns/B (1/R1 {g1:.2})");
        assert!(
            (before - g1).abs() / g1 <= 0.15,
            "G {before:.2} ns/B before the change, 1/R1 {g1:.2}\n{first}"
        );

        // Half the rate under the running daemons.
        for i in 0..2 {
            shape(&net, i, R2);
        }
        let changed_at = Instant::now();
        // A deadline, not a speed assertion: one re-check interval, its
        // confirmation, and a sweep (at most what the first entry took,
        // twice at half the rate), with room for the rounds.
        let limit = Duration::from_secs_f64(recheck_s + 2.0 * first_s + 30.0);
        let after = wait_for(limit, || {
            let e = entry(&net.shm(0), "host1")?;
            (e["measured_unix_ns"] != first["measured_unix_ns"] && has_flag(&e, "changed"))
                .then_some(e)
        })
        .unwrap_or_else(|| {
            panic!(
                "no repaired entry within {limit:?}:\n{}\n--- host1:\n{}",
                net.log(0),
                net.log(1)
            )
        });
        let now = sustained_g(&after).expect("sustained G after");
        eprintln!(
            "repaired {:.1} s after the change: sustained G {now:.2} ns/B (1/R2 {g2:.2})",
            changed_at.elapsed().as_secs_f64()
        );
        assert!(
            (now - g2).abs() / g2 <= 0.15,
            "G {now:.2} ns/B after the change, 1/R2 {g2:.2}\n{after}"
        );

        // The history shows the old and the new bandwidth, the disagreeing
        // re-check between them; the drift is logged old → new.
        let h = common::json_of(
            Command::new(NGCTL)
                .args(["history", "host1", "--transport", "udp", "--json", "--shm"])
                .arg(net.shm(0)),
        );
        let recs = h["records"].as_array().unwrap();
        let g_of = |ev: &str| -> Vec<f64> {
            recs.iter()
                .filter(|r| r["event"] == ev)
                .filter_map(|r| r["sustained_G_ns_per_byte"].as_f64())
                .collect()
        };
        let (sweeps, repairs) = (g_of("sweep"), g_of("repair"));
        eprintln!("history: sweeps {sweeps:?}, repairs {repairs:?}");
        assert!(sweeps.iter().any(|g| (g - g1).abs() / g1 <= 0.15), "{h}");
        assert!(repairs.iter().any(|g| (g - g2).abs() / g2 <= 0.15), "{h}");
        let disagree = recs
            .iter()
            .find(|r| r["event"] == "recheck-disagree")
            .unwrap_or_else(|| panic!("no disagreeing re-check in {h}"));
        assert!(
            disagree["deviation"]["relative"].as_f64().unwrap() > 0.25,
            "{disagree}"
        );
        let log = net.log(0);
        assert!(
            log.lines()
                .any(|l| l.contains("host1 over udp: changed: EEL") && l.contains("→")),
            "no drift line in the log:\n{log}"
        );
        // The table fits 80 columns.
        let out = Command::new(NGCTL)
            .args(["history", "host1", "--shm"])
            .arg(net.shm(0))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!("{text}");
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        eprintln!("whole test {:.1} s", started.elapsed().as_secs_f64());
    }
}
