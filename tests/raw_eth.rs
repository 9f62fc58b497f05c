//! `ngctl probe --transport raw` against `ngctl serve --transport raw` across
//! two network namespaces joined by a veth pair. Needs root (namespaces,
//! CAP_NET_RAW); skipped with a printed reason otherwise. Every namespace is
//! created with a unique name and deleted on drop, also when a test fails.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use netgauged::transport::frame::{Header, Kind};
use netgauged::transport::raw_eth::{interface_info, ETHERTYPE};

const NGCTL: &str = env!("CARGO_BIN_EXE_ngctl");

/// Client and server both busy-poll: two such pairs at once on a two-core
/// machine measure the scheduler, not the network. One test at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Namespaces `<name>-a` (veth `va`) and `<name>-b` (veth `vb`).
struct Pair {
    a: String,
    b: String,
}

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

impl Pair {
    fn new() -> Option<Pair> {
        if !is_root() {
            eprintln!("skipped: raw Ethernet tests need root (network namespaces, CAP_NET_RAW)");
            return None;
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = format!(
            "ngri{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let p = Pair {
            a: format!("{base}-a"),
            b: format!("{base}-b"),
        };
        ip(&["netns", "add", &p.a]);
        ip(&["netns", "add", &p.b]);
        ip(&[
            "link", "add", "va", "netns", &p.a, "type", "veth", "peer", "name", "vb", "netns", &p.b,
        ]);
        ip(&["-n", &p.a, "link", "set", "va", "up"]);
        ip(&["-n", &p.b, "link", "set", "vb", "up"]);
        Some(p)
    }

    /// Run `f` on a thread inside namespace `ns`.
    fn run<R: Send + 'static>(ns: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
        let path = format!("/var/run/netns/{ns}");
        std::thread::spawn(move || {
            enter(&path);
            f()
        })
        .join()
        .expect("thread in netns")
    }

    fn mac(ns: &str, dev: &'static str) -> [u8; 6] {
        Self::run(ns, move || interface_info(dev).expect("interface").mac)
    }

    /// `ngctl` in namespace `ns`, pinned to `cpu` when taskset exists (a
    /// busy-polling client and server want a core each).
    fn ngctl(ns: &str, cpu: usize) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        if ncpu >= 2 && Command::new("taskset").arg("-V").output().is_ok() {
            c.args(["taskset", "-c", &(cpu % ncpu).to_string()]);
        }
        c.arg(NGCTL);
        c
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn enter(path: &str) {
    let f = std::fs::File::open(path).expect("open netns");
    // SAFETY: f is an open netns descriptor; setns affects only this thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

fn mac_str(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

struct Server(Child);

impl Server {
    fn start(pair: &Pair, idle_exit_s: u64) -> Server {
        let child = Pair::ngctl(&pair.b, 1)
            .args(["serve", "--transport", "raw", "--interface", "vb"])
            .args(["--idle-exit-s", &idle_exit_s.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ngctl serve");
        std::thread::sleep(Duration::from_millis(300));
        Server(child)
    }

    /// Wait for the idle exit; its stderr.
    fn finish(mut self) -> String {
        let mut err = String::new();
        if let Some(mut e) = self.0.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = self.0.wait();
        err
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn probe(pair: &Pair, server_mac: &[u8; 6], max_size: &str) -> Child {
    Pair::ngctl(&pair.a, 0)
        .args(["probe", "--transport", "raw", "--interface", "va"])
        .args(["--peer-mac", &mac_str(server_mac)])
        .args(["--max-size", max_size, "--json", "--resamples", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ngctl probe")
}

fn check_sane(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "probe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let eel = num("eel_ns");
    assert!(eel > 100.0 && eel < 1e6, "EEL {eel} ns");
    let g = num("g_ns");
    assert!(g > 0.0 && g < 1e6, "g {g} ns");
    for r in v["ranges"].as_array().expect("ranges") {
        let big_g = r["G_ns_per_byte"].as_f64().expect("G");
        assert!(big_g >= 0.0, "negative G in range {r}");
    }
    assert!(num("o_r_ns") > 0.0, "a socket has a receive overhead");
    assert!(v["probe_bytes"].as_u64().unwrap_or(0) > 0);
    v
}

/// `field: N` from a `{:?}` of IgnoredFrames on the line starting `prefix`.
fn ignored(stderr: &str, prefix: &str, field: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with(prefix) && l.contains("ignored frames"))
        .unwrap_or_else(|| panic!("no ignored-frames line in {stderr}"));
    let at = line
        .find(&format!("{field}: "))
        .unwrap_or_else(|| panic!("{field} not in {line}"));
    line[at + field.len() + 2..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad {field} in {line}"))
}

#[test]
fn sweep_1b_to_64kib_is_sane() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = Pair::new() else { return };
    let server_mac = Pair::mac(&pair.b, "vb");
    let server = Server::start(&pair, 2);
    let out = probe(&pair, &server_mac, "65536")
        .wait_with_output()
        .expect("probe");
    let v = check_sane(&out);
    assert_eq!(v["lost_rounds"].as_u64(), Some(0));
    let err = server.finish();
    assert!(err.contains("answering raw probes on vb"), "{err}");
    for f in ["malformed", "wrong_nonce", "stranger", "dropped_incomplete"] {
        assert_eq!(ignored(&err, "ngctl serve", f), 0, "{f}: {err}");
    }
}

/// A raw socket on `dev` in namespace `ns` that sends hand-made frames.
fn injector(ns: &str, dev: &'static str) -> OwnedFd {
    Pair::run(ns, move || {
        let index = interface_info(dev).expect("interface").index;
        // SAFETY: plain socket(2) call, checked below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh descriptor we own.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_ifindex = index as i32;
        // SAFETY: sll is a valid sockaddr_ll of the given length.
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        sock
    })
}

fn stray_frame(dst: &[u8; 6], src: &[u8; 6], nonce: u64, seq: u32) -> Vec<u8> {
    let h = Header {
        kind: Kind::Data,
        answer: true,
        nonce,
        seq,
        frag_offset: 0,
        msg_len: 16,
        report_ns: 0,
        frag_index: 0,
        frag_count: 1,
        frag_len: 16,
    };
    let mut f = Vec::new();
    f.extend_from_slice(dst);
    f.extend_from_slice(src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    let at = f.len();
    f.resize(at + h.frame_len(), 0);
    h.encode(&mut f[at..]).expect("encode");
    f
}

fn send_raw(sock: &OwnedFd, f: &[u8]) {
    // SAFETY: f is a live buffer of f.len() bytes.
    let r = unsafe {
        libc::send(
            sock.as_raw_fd(),
            f.as_ptr() as *const libc::c_void,
            f.len(),
            0,
        )
    };
    assert_eq!(
        r as usize,
        f.len(),
        "send: {}",
        std::io::Error::last_os_error()
    );
}

#[test]
fn stray_frames_are_ignored_and_the_probe_is_unaffected() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = Pair::new() else { return };
    let server_mac = Pair::mac(&pair.b, "vb");
    let client_mac = Pair::mac(&pair.a, "va");
    let stranger = [0x02, 0x5e, 0x00, 0x00, 0x0b, 0xad];
    let server = Server::start(&pair, 2);
    let client = probe(&pair, &server_mac, "65536");
    // Let the session start: strays before it would all be "stranger".
    std::thread::sleep(Duration::from_millis(500));

    // A third party on each side of the link: frames to the server that
    // claim to be the client but carry another session's nonce, frames to
    // the server from a stranger's MAC, and frames to the client from a
    // stranger's MAC. One every 2 ms while the probe runs.
    let to_server = injector(&pair.a, "va");
    let to_client = injector(&pair.b, "vb");
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let (stop2, sent2) = (stop.clone(), sent.clone());
    let h = std::thread::spawn(move || {
        let mut seq = 1u32;
        while !stop2.load(Ordering::Relaxed) {
            let nonce = 0x5eed_0000_0000_0000 | u64::from(seq);
            send_raw(
                &to_server,
                &stray_frame(&server_mac, &client_mac, nonce, seq),
            );
            send_raw(&to_server, &stray_frame(&server_mac, &stranger, nonce, seq));
            send_raw(&to_client, &stray_frame(&client_mac, &stranger, nonce, seq));
            sent2.fetch_add(1, Ordering::Relaxed);
            seq = seq.wrapping_add(1);
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let out = client.wait_with_output().expect("probe");
    stop.store(true, Ordering::Relaxed);
    h.join().expect("injector");
    let rounds = sent.load(Ordering::Relaxed);
    assert!(rounds > 10, "the probe ended before the strays began");

    let v = check_sane(&out);
    assert_eq!(v["lost_rounds"].as_u64(), Some(0), "strays cost rounds");
    let cerr = String::from_utf8_lossy(&out.stderr);
    // The client stops receiving at its last answer, while strays may still
    // come: it saw most of them, and never more than were sent. The server
    // receives until its idle exit, so it saw every one.
    let seen = ignored(&cerr, "ngctl probe", "stranger");
    assert!(
        seen <= rounds && seen >= rounds / 2,
        "{seen} of {rounds}: {cerr}"
    );
    assert_eq!(ignored(&cerr, "ngctl probe", "wrong_nonce"), 0, "{cerr}");
    let serr = server.finish();
    // After the client's Bye the server has no session: the rest of the
    // "wrong nonce" strays are then strangers' frames too.
    let wrong_nonce = ignored(&serr, "ngctl serve", "wrong_nonce");
    let strangers = ignored(&serr, "ngctl serve", "stranger");
    assert_eq!(wrong_nonce + strangers, 2 * rounds, "{serr}");
    assert!(wrong_nonce >= rounds / 2 && strangers >= rounds, "{serr}");
    assert_eq!(ignored(&serr, "ngctl serve", "malformed"), 0, "{serr}");
}

#[test]
fn without_cap_net_raw_the_error_says_so() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(pair) = Pair::new() else { return };
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    // Root, but with CAP_NET_RAW gone from every capability set.
    let drop_raw = |ns: &str, args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", ns, "setpriv", "--bounding-set=-net_raw"])
            .args(["--inh-caps=-net_raw", "--", NGCTL])
            .args(args)
            .output()
            .expect("run setpriv")
    };
    let out = drop_raw(
        &pair.a,
        &[
            "probe",
            "--transport",
            "raw",
            "--interface",
            "va",
            "--peer-mac",
            "02:00:00:00:00:01",
        ],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CAP_NET_RAW") && err.lines().count() <= 2,
        "unclear error: {err}"
    );
    let out = drop_raw(
        &pair.b,
        &["serve", "--transport", "raw", "--interface", "vb"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CAP_NET_RAW"), "unclear error: {err}");
}
