//! A real Prometheus (Debian's `prometheus`, which scripts/install-deps.sh
//! installs) scrapes two netgauged daemons on hosts made of network
//! namespaces, each with `metrics_listen`; its query API returns each
//! daemon's G and EEL for the other, equal to what `ngctl dump --json`
//! shows. `promtool check metrics` accepts the endpoint's exposition and
//! the `metrics_textfile` node_exporter would read.
//!
//! Needs root, as tests/daemon_netns.rs: it runs in a build made as root,
//! as CI builds (`build.rs` sets cfg `netns_tests`;
//! `NETGAUGED_NETNS_TESTS=1` or `=0` overrides the choice); in any other
//! build the test runner lists it as ignored, with the reason. Where it
//! runs, a missing `prometheus` or `promtool` fails it, saying so.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[macro_use]
mod common;
use common::daemon::wait_for;

const NETGAUGED: &str = env!("CARGO_BIN_EXE_netgauged");
const KEY_HEX: &str = "5b0e7c1f2a9d4e3b8c6f0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5";
/// The hosts' network: 10.NET.0.1 and 10.NET.0.2.
const NET: u8 = 92;
const METRICS_PORT: u16 = 9470;
const PROM_ADDR: &str = "127.0.0.1:9090";

fn sh(args: &[&str]) {
    let st = Command::new(args[0])
        .args(&args[1..])
        .status()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(st.success(), "{args:?} failed");
}

/// Two namespaces joined by a veth pair; deleted (with the test's
/// directory) on drop.
struct Hosts {
    ns: [String; 2],
    dir: PathBuf,
}

impl Hosts {
    fn new() -> Hosts {
        common::netns::require_root();
        let base = format!("ngp{}", std::process::id() % 100_000);
        let ns = [format!("{base}h0"), format!("{base}h1")];
        let dir = std::env::temp_dir().join(&base);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let h = Hosts { ns, dir };
        for n in &h.ns {
            sh(&["ip", "netns", "add", n]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        let (a, b) = (format!("{base}a"), format!("{base}b"));
        sh(&["ip", "link", "add", &a, "type", "veth", "peer", "name", &b]);
        sh(&["ip", "link", "set", &a, "netns", &h.ns[0], "name", "eth0"]);
        sh(&["ip", "link", "set", &b, "netns", &h.ns[1], "name", "eth0"]);
        for (i, n) in h.ns.iter().enumerate() {
            sh(&[
                "ip",
                "-n",
                n,
                "addr",
                "add",
                &format!("{}/24", addr(i)),
                "dev",
                "eth0",
            ]);
            sh(&["ip", "-n", n, "link", "set", "eth0", "up"]);
        }
        std::fs::write(h.dir.join("key"), KEY_HEX).unwrap();
        sh(&["chmod", "600", h.dir.join("key").to_str().unwrap()]);
        h
    }

    fn shm(&self, i: usize) -> PathBuf {
        self.dir.join(format!("seg{i}"))
    }

    fn textfile(&self, i: usize) -> PathBuf {
        self.dir.join(format!("host{i}.prom"))
    }

    /// Start host i's daemon, with its metrics endpoint and textfile.
    fn daemon(&self, i: usize) -> Proc {
        let other = 1 - i;
        let cfg = format!(
            "node = \"host{i}\"\nlisten = \"{a}:7470\"\nudp_port = 7471\nshm = \"{}\"\n\
             key_file = \"{}\"\nstate_file = \"{}\"\nlock_memory = false\n\
             recheck_interval_s = 2.0\nbudget_bytes_per_s = 100000000\nmax_size_bytes = 16384\n\
             fanout_interval_s = 0\nprobe_cpu = {cpu}\nmetrics_listen = \"{a}:{METRICS_PORT}\"\n\
             metrics_textfile = \"{}\"\n\
             [[peer]]\nname = \"host{other}\"\naddress = \"{}:7470\"\n",
            self.shm(i).display(),
            self.dir.join("key").display(),
            self.dir.join(format!("state{i}.json")).display(),
            self.textfile(i).display(),
            addr(other),
            a = addr(i),
            cpu = i % std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        let path = self.dir.join(format!("host{i}.toml"));
        std::fs::write(&path, cfg).unwrap();
        self.spawn(
            i,
            &format!("host{i}.log"),
            NETGAUGED,
            &["--config", path.to_str().unwrap()],
        )
    }

    fn spawn(&self, i: usize, log: &str, program: &str, args: &[&str]) -> Proc {
        let log = std::fs::File::create(self.dir.join(log)).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        Proc(child)
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for n in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn addr(i: usize) -> String {
    format!("10.{NET}.0.{}", i + 1)
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` (HTTP/1.0, so no chunked answer) from inside namespace `ns`:
/// (status code, body).
fn http_get(ns: &str, to: &str, path: &str) -> Option<(u16, String)> {
    let (ns, to, path) = (ns.to_string(), to.to_string(), path.to_string());
    std::thread::spawn(move || {
        let f = std::fs::File::open(format!("/run/netns/{ns}")).ok()?;
        // SAFETY: moves only this thread into the namespace, by a
        // descriptor that stays open for the call.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return None;
        }
        let mut s =
            std::net::TcpStream::connect_timeout(&to.parse().ok()?, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {to}\r\n\r\n").as_bytes())
            .ok()?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).ok()?;
        let text = String::from_utf8(out).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    })
    .join()
    .ok()
    .flatten()
}

/// host `i`'s entry for its peer, as `ngctl dump --json` shows it.
fn dumped(h: &Hosts, i: usize) -> Option<serde_json::Value> {
    let peer = format!("host{}", 1 - i);
    let mut e = common::daemon::entry(&h.shm(i), &peer, Some("udp"))?;
    // Its age changes with every read; its values do not.
    e.as_object_mut()?.remove("age_s");
    Some(e)
}

/// Prometheus' answer to an instant query: (labels, value) per series.
fn query(h: &Hosts, q: &str) -> Option<Vec<(serde_json::Value, f64)>> {
    let (code, body) = http_get(&h.ns[0], PROM_ADDR, &format!("/api/v1/query?query={q}"))?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    if v["status"] != "success" {
        return None;
    }
    v["data"]["result"]
        .as_array()?
        .iter()
        .map(|r| {
            let val: f64 = r["value"][1].as_str()?.parse().ok()?;
            Some((r["metric"].clone(), val))
        })
        .collect()
}

/// The value Prometheus holds for `metric` scraped from host `i` about
/// its peer (and `range`, if given).
fn scraped(h: &Hosts, metric: &str, i: usize, range: Option<usize>) -> Option<f64> {
    let instance = format!("{}:{METRICS_PORT}", addr(i));
    let peer = format!("host{}", 1 - i);
    query(h, metric)?
        .into_iter()
        .find(|(m, _)| {
            m["instance"] == instance.as_str()
                && m["peer"] == peer.as_str()
                && m["transport"] == "udp"
                && range.is_none_or(|r| m["range"] == r.to_string().as_str())
        })
        .map(|(_, v)| v)
}

fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs()
}

/// One comparison: what, the dump's value in base units, Prometheus' value.
type Compared = (String, f64, f64);

/// The verdict Prometheus holds for `parameter` of host i's entry.
fn scraped_verdict(h: &Hosts, i: usize, parameter: &str) -> Option<(String, f64)> {
    let instance = format!("{}:{METRICS_PORT}", addr(i));
    let peer = format!("host{}", 1 - i);
    query(h, "netgauged_parameter_identified")?
        .into_iter()
        .find(|(m, _)| {
            m["instance"] == instance.as_str()
                && m["peer"] == peer.as_str()
                && m["transport"] == "udp"
                && m["parameter"] == parameter
                && m.get("range").is_none()
        })
        .map(|(m, v)| (m["status"].as_str().unwrap_or("").to_string(), v))
}

/// The comparisons of host i's entry: (what, the dump's value in base
/// units, Prometheus' value). None while a value is missing or a verdict
/// differs. An EEL that is not identified is only accepted when
/// `eel_may_be_unidentified`: then Prometheus must hold no number for it
/// and its verdict must be the dump's.
fn compare(
    h: &Hosts,
    i: usize,
    e: &serde_json::Value,
    eel_may_be_unidentified: bool,
) -> Option<Vec<Compared>> {
    let id = &e["identification"];
    let mut out = Vec::new();
    let eel = e["eel_ns"].as_f64()? * 1e-9;
    let p = scraped(h, "netgauged_eel_seconds", i, None);
    if id["eel_ns"] == "identified" {
        out.push(("EEL".into(), eel, p?));
    } else {
        if !eel_may_be_unidentified || p.is_some() {
            return None;
        }
        let (status, v) = scraped_verdict(h, i, "EEL")?;
        if id["eel_ns"] != status.as_str() || v != 0.0 {
            return None;
        }
    }
    for (r, range) in e["ranges"].as_array()?.iter().enumerate() {
        let g = range["G_ns_per_byte"].as_f64()? * 1e-9;
        let p = scraped(h, "netgauged_gap_seconds_per_byte", i, Some(r));
        if id["ranges"][r]["G_ns_per_byte"] == "identified" {
            out.push((format!("G of range {r}"), g, p?));
        } else if p.is_some() {
            // Not identified: no number.
            return None;
        }
    }
    let sustained = &e["bandwidth"]["sustained"];
    if sustained["status"] == "identified" {
        out.push((
            "sustained G".into(),
            sustained["G_ns_per_byte"].as_f64()? * 1e-9,
            scraped(h, "netgauged_sustained_gap_seconds_per_byte", i, None)?,
        ));
    }
    Some(out)
}

/// Wait (up to `limit`) until Prometheus' values for host i equal the
/// dump's, read before and after the queries (a re-check may publish new
/// values in between; the next scrape catches up).
fn agree(
    h: &Hosts,
    i: usize,
    limit: Duration,
    eel_may_be_unidentified: bool,
) -> Result<(serde_json::Value, Vec<Compared>), String> {
    let mut last = String::new();
    wait_for(limit, || {
        let before = dumped(h, i)?;
        let cmp = compare(h, i, &before, eel_may_be_unidentified);
        let after = dumped(h, i)?;
        last = format!("{before}\n{cmp:?}");
        let cmp = cmp?;
        (before == after && cmp.iter().all(|(_, d, p)| same(*d, *p))).then_some((before, cmp))
    })
    .ok_or(last)
}

/// `promtool check metrics` on `text`: its complaints, if any.
fn promtool(text: &str) -> Result<(), String> {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus: scripts/install-deps.sh)");
    c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

root_test! {
    fn prometheus_scrapes_both_daemons_and_returns_their_g_and_eel() {
        let h = Hosts::new();
        let _d: Vec<Proc> = (0..2).map(|i| h.daemon(i)).collect();
        for i in 0..2 {
            wait_for(Duration::from_secs(120), || dumped(&h, i)).unwrap_or_else(|| {
                panic!(
                    "host{i} published nothing:\n{}\n--- other:\n{}",
                    h.log(&format!("host{i}.log")),
                    h.log(&format!("host{}.log", 1 - i))
                )
            });
        }

        // The endpoint's exposition and the textfile pass promtool's checks.
        let (code, text) = http_get(&h.ns[0], &format!("{}:{METRICS_PORT}", addr(0)), "/metrics")
            .expect("host0's metrics endpoint answers");
        assert_eq!(code, 200, "{text}");
        assert!(text.contains("netgauged_parameter_identified{"), "{text}");
        promtool(&text).unwrap_or_else(|e| panic!("promtool on the endpoint: {e}\n{text}"));
        let file = wait_for(Duration::from_secs(10), || {
            std::fs::read_to_string(h.textfile(1))
                .ok()
                .filter(|t| t.contains("netgauged_range_from_bytes{"))
        })
        .expect("host1's textfile holds its entry");
        promtool(&file).unwrap_or_else(|e| panic!("promtool on the textfile: {e}\n{file}"));
        // Anything but GET /metrics is refused.
        let (code, _) = http_get(&h.ns[1], &format!("{}:{METRICS_PORT}", addr(0)), "/")
            .expect("answer");
        assert_eq!(code, 404);

        // Prometheus in host0's namespace scrapes both hosts every second.
        let yml = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: netgauged\n    static_configs:\n      - targets: ['{}:{METRICS_PORT}', '{}:{METRICS_PORT}']\n",
            addr(0),
            addr(1)
        );
        let cfg = h.dir.join("prometheus.yml");
        std::fs::write(&cfg, yml).unwrap();
        let tsdb = h.dir.join("tsdb");
        let _prom = h.spawn(
            0,
            "prometheus.log",
            "prometheus",
            &[
                &format!("--config.file={}", cfg.display()),
                &format!("--storage.tsdb.path={}", tsdb.display()),
                &format!("--web.listen-address={PROM_ADDR}"),
            ],
        );
        wait_for(Duration::from_secs(30), || {
            http_get(&h.ns[0], PROM_ADDR, "/-/ready").filter(|(c, _)| *c == 200)
        })
        .unwrap_or_else(|| panic!("prometheus not ready:\n{}", h.log("prometheus.log")));

        // Both targets up, then each daemon's values for the other equal
        // the dump's (read before and after the query: a re-check may
        // publish new values in between, then the next scrape catches up).
        let up = wait_for(Duration::from_secs(30), || {
            let r = query(&h, "up")?;
            (r.len() == 2 && r.iter().all(|(_, v)| *v == 1.0)).then_some(r)
        });
        assert!(up.is_some(), "targets not up: {:?}\n{}", query(&h, "up"), h.log("prometheus.log"));
        for i in 0..2 {
            // An EEL is identified unless the samples were unstable (a
            // loaded machine): wait for one; failing that, its verdict
            // must be the dump's and no number exported.
            let (e, cmp) = agree(&h, i, Duration::from_secs(45), false)
                .or_else(|_| agree(&h, i, Duration::from_secs(20), true))
                .unwrap_or_else(|last| {
                    panic!("host{i}: Prometheus does not return the dump's values:\n{last}")
                });
            if e["identification"]["eel_ns"] != "identified" {
                eprintln!(
                    "host{i}: EEL not identified ({}) throughout: its verdict compared instead",
                    e["identification"]["eel_ns"]
                );
            }
            assert!(
                cmp.iter().any(|(w, _, _)| w.contains('G')),
                "host{i}: no identified G to compare: {cmp:?}"
            );
            for (what, d, p) in &cmp {
                eprintln!("host{i} → host{}: {what}: dump {d:e}, Prometheus {p:e}", 1 - i);
            }
        }
        // A status gauge for every parameter, with its verdict.
        let verdicts = query(&h, "netgauged_parameter_identified").expect("verdicts");
        assert!(verdicts.iter().any(|(m, v)| m["parameter"] == "EEL" && *v == 1.0));
    }
}
