//! The raw Ethernet transport on veth pairs between network namespaces:
//! the transport itself (client and server in this process, both receive
//! paths, loss, strangers, takeover, Bye), and `ngctl probe --transport raw`
//! against `ngctl serve --transport raw`.
//!
//! Needs root (namespaces, CAP_NET_RAW): in a build not made as root every
//! test here is listed as ignored with that reason; a build made as root
//! run by another user fails with a clear message.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use netgauged::transport::dgram::wire::{Header, HEADER_LEN};
use netgauged::transport::raw_eth::{
    IgnoredFrames, RawEthOptions, RawEthTransport, RxMode, ETHERTYPE, ETH_HDR_LEN,
};
use netgauged::transport::{Meta, Transport, TransportError};

#[macro_use]
mod common;
use common::echo::{
    check_echoed, check_one_frame_lost_each_way, check_refusals, check_strays_ignored,
    check_takeover, data_header, echo, lose_one_frame_each_way, ping, ping_sizes, Echoed, Loss,
    LONG,
};
use common::netns::{eth_frame, veth, Netns, RawPort};
use common::probe::{one_at_a_time, sane_probe, Killed};
use common::NGCTL;

/// Namespaces `a` (veth `va`) and `b` (veth `vb`), joined.
struct Pair {
    a: Netns,
    b: Netns,
}

impl Pair {
    fn new(mtu: usize) -> Pair {
        let p = Pair {
            a: Netns::new("ngri"),
            b: Netns::new("ngri"),
        };
        veth(&p.a, "va", &p.b, "vb", mtu);
        p
    }
}

// --- the transport, in this process ---------------------------------------

fn opts(rx: RxMode) -> RawEthOptions {
    RawEthOptions {
        handshake_timeout: Duration::from_millis(300),
        handshake_attempts: 10,
        rx,
        buffer_bytes: 4 << 20,
        ..RawEthOptions::default()
    }
}

/// Two hosts joined by a veth pair of `mtu` and an echo server on `vb`
/// receiving by `rx`: the hosts, the options, the server's MAC and thread.
fn echo_pair(mtu: usize, rx: RxMode) -> (Pair, RawEthOptions, [u8; 6], JoinHandle<Echoed>) {
    let p = Pair::new(mtu);
    let o = opts(rx);
    let (mac, h) = echo_server(&p.b, o);
    (p, o, mac, h)
}

/// An echo server on `vb`: its MAC and thread.
fn echo_server(ns: &Netns, o: RawEthOptions) -> ([u8; 6], JoinHandle<Echoed>) {
    let server = ns.run(move || RawEthTransport::listen("vb", o).unwrap());
    (server.interface().mac, echo(server))
}

fn client(ns: &Netns, mac: [u8; 6], o: RawEthOptions) -> RawEthTransport {
    ns.run(move || RawEthTransport::connect("va", mac, o).unwrap())
}

fn ping_pong(rx: RxMode, mtu: usize) {
    let _serial = one_at_a_time();
    let (p, o, mac, h) = echo_pair(mtu, rx);
    let mut c = client(&p.a, mac, o);
    assert_eq!(c.rx_mode(), rx);
    assert_eq!(c.max_frag_bytes(), mtu - HEADER_LEN);
    assert_eq!(c.interface().mtu_bytes, mtu);
    assert_eq!(c.peer_mac(), Some(mac));
    assert_ne!(c.nonce(), Some(0));
    let sent = ping_sizes(
        &mut c,
        &[0, 1, 45, mtu - HEADER_LEN, mtu, 64 << 10, 1 << 20],
    );
    assert_eq!(c.kernel_drops().unwrap(), 0);
    let nonce = c.nonce();
    drop(c);
    let s = h.join().unwrap();
    check_echoed(&s, sent);
    assert_eq!(s.nonce, nonce);
}

root_test! {
    fn ping_pong_ring_mtu_1500() {
        ping_pong(RxMode::Ring, 1500);
    }
}

root_test! {
    fn ping_pong_recv_mtu_1500() {
        ping_pong(RxMode::Recv, 1500);
    }
}

root_test! {
    fn ping_pong_ring_jumbo() {
        ping_pong(RxMode::Ring, 9000);
    }
}

/// A bridge between `ra` and `rb` in `ns` that forwards our frames both
/// ways and drops the n-th Data frame (1-based) of a direction, if asked.
/// Joins to the numbers of Data frames seen each way.
fn lossy_relay(
    ns: &Netns,
    drop_fwd: Option<u64>,
    drop_back: Option<u64>,
) -> (Arc<AtomicBool>, JoinHandle<(u64, u64)>) {
    let ra = RawPort::of_type(ns, "ra", ETHERTYPE);
    let rb = RawPort::of_type(ns, "rb", ETHERTYPE);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || {
        let mut buf = vec![0u8; 16 << 10];
        let (mut fwd, mut back) = (Loss::nth(drop_fwd), Loss::nth(drop_back));
        while !stop2.load(Ordering::Relaxed) {
            for (from, to, loss) in [(&ra, &rb, &mut fwd), (&rb, &ra, &mut back)] {
                while let Some(f) = from.recv(&mut buf) {
                    if loss.passes(f.get(ETH_HDR_LEN..).unwrap_or(&[])) {
                        to.send(f);
                    }
                }
            }
            ra.wait(1);
        }
        (fwd.data_frames, back.data_frames)
    });
    (stop, h)
}

root_test! {
    fn lost_frame_times_out_then_next_message_succeeds() {
        let _serial = one_at_a_time();
        // va (client) — ra [relay] rb — vb (server)
        let (a, r, b) = (Netns::new("ngri"), Netns::new("ngri"), Netns::new("ngri"));
        veth(&a, "va", &r, "ra", 1500);
        veth(&r, "rb", &b, "vb", 1500);
        // The client's second Data frame (the middle of its first request) and
        // the server's first (of its first answer) are lost.
        let (stop, relay) = lossy_relay(&r, Some(2), Some(1));
        let o = opts(RxMode::Ring);
        let (mac, h) = echo_server(&b, o);
        let mut c = client(&a, mac, o);
        lose_one_frame_each_way(&mut c);
        drop(c);
        let s = h.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        check_one_frame_lost_each_way(&s, relay.join().unwrap());
    }
}

root_test! {
    fn wrong_nonce_stranger_malformed_and_stale_frames_are_ignored_and_counted() {
        let _serial = one_at_a_time();
        let (p, o, server_mac, h) = echo_pair(1500, RxMode::Ring);
        let mut c = client(&p.a, server_mac, o);
        ping(&mut c, 10); // the server's newest seq is now 1
        let nonce = c.nonce().unwrap();
        let client_mac = c.interface().mac;
        let inj = RawPort::sender(&p.a, "va");
        let stranger = [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01];
        let to_server = |src: &[u8; 6], h: &Header| inj.send(&eth_frame(&server_mac, src, h));
        // Wrong nonce, from the client's MAC.
        to_server(&client_mac, &data_header(nonce ^ 1, 100, 10));
        // Right nonce, from a stranger.
        to_server(&stranger, &data_header(nonce, 100, 10));
        // Garbage and a truncated frame from the client's MAC.
        let mut garbage = eth_frame(&server_mac, &client_mac, &data_header(nonce, 100, 10));
        garbage.truncate(ETH_HDR_LEN);
        garbage.extend_from_slice(b"not a frame at all, not at all, no");
        inj.send(&garbage);
        let truncated = eth_frame(&server_mac, &client_mac, &data_header(nonce, 100, 10));
        inj.send(&truncated[..ETH_HDR_LEN + HEADER_LEN + 5]);
        // An old message (seq 0 < 1), right nonce and MAC.
        to_server(&client_mac, &data_header(nonce, 0, 10));
        // Another destination never reaches the socket.
        let mut other = server_mac;
        other[5] ^= 0x40;
        inj.send(&eth_frame(
            &other,
            &client_mac,
            &data_header(nonce, 100, 10),
        ));
        // None of these was answered; a real message still works.
        let e = c.recv(Some(0), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        ping(&mut c, 10);
        assert_eq!(c.ignored(), IgnoredFrames::default());
        drop(c);
        check_strays_ignored(&h.join().unwrap());
    }
}

root_test! {
    fn a_new_hello_takes_over_and_bye_is_peer_gone() {
        let _serial = one_at_a_time();
        let (p, o, mac, h) = echo_pair(1500, RxMode::Recv);
        // The second client is on the same interface (same MAC, new nonce):
        // the first one's request and Bye carry a stale nonce.
        let s = check_takeover(|| client(&p.a, mac, o), h);
        assert_eq!(s.ignored.wrong_nonce, 2);

        // A server that says Bye: the client's next wait is PeerGone.
        let mut server = p.b.run(move || RawEthTransport::listen("vb", o).unwrap());
        let mac = server.interface().mac;
        let h = std::thread::spawn(move || {
            server.accept(LONG).unwrap();
            let r = server.recv(Some(0), LONG).unwrap();
            server.send(0, r.bytes, Meta::default()).unwrap();
        });
        let mut c = client(&p.a, mac, o);
        ping(&mut c, 10);
        h.join().unwrap();
        let e = c.recv(Some(0), LONG).unwrap_err();
        assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
        assert!(matches!(
            c.send(0, 1, Meta::default()),
            Err(TransportError::PeerGone(_))
        ));
    }
}

root_test! {
    fn silent_peer_is_a_timeout_not_a_hang() {
        let p = Pair::new(1500);
        let o = RawEthOptions {
            handshake_timeout: Duration::from_millis(50),
            handshake_attempts: 3,
            ..opts(RxMode::Ring)
        };
        let r =
            p.a.run(move || RawEthTransport::connect("va", [0x02, 0, 0, 0, 0, 0x42], o).map(|_| ()));
        assert!(
            matches!(r, Err(TransportError::Timeout(d)) if d == Duration::from_millis(150)),
            "{r:?}"
        );
        let mut server = p.b.run(move || RawEthTransport::listen("vb", o).unwrap());
        check_refusals(&mut server);
        let small = RawEthOptions {
            mtu_bytes: Some(100),
            ..o
        };
        let r =
            p.b.run(move || RawEthTransport::listen("vb", small).map(|_| ()));
        assert!(matches!(r, Err(TransportError::Protocol(_))), "{r:?}");
    }
}

// --- ngctl probe against ngctl serve --------------------------------------

/// `ngctl` in namespace `ns`, pinned to `cpu` when taskset exists (a
/// busy-polling client and server want a core each).
fn ngctl(ns: &Netns, cpu: usize) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name()]);
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    if ncpu >= 2 && Command::new("taskset").arg("-V").output().is_ok() {
        c.args(["taskset", "-c", &(cpu % ncpu).to_string()]);
    }
    c.arg(NGCTL);
    c
}

fn mac_str(m: &[u8; 6]) -> String {
    netgauged::transport::raw_eth::format_mac(m)
}

/// `ngctl serve --transport raw` on `vb`, until `idle_exit_s` without a
/// probe.
fn serve(pair: &Pair, idle_exit_s: u64) -> Killed {
    let child = ngctl(&pair.b, 1)
        .args(["serve", "--transport", "raw", "--interface", "vb"])
        .args(["--idle-exit-s", &idle_exit_s.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ngctl serve");
    std::thread::sleep(Duration::from_millis(300));
    Killed(child)
}

/// Wait for the server's idle exit; its stderr.
fn finish(mut server: Killed) -> String {
    let mut err = String::new();
    if let Some(mut e) = server.0.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    let _ = server.0.wait();
    err
}

fn probe(pair: &Pair, server_mac: &[u8; 6], max_size: &str) -> Child {
    ngctl(&pair.a, 0)
        .args(["probe", "--transport", "raw", "--interface", "va"])
        .args(["--peer-mac", &mac_str(server_mac)])
        .args(["--max-size", max_size, "--json", "--resamples", "50"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ngctl probe")
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

root_test! {
    fn sweep_1b_to_64kib_is_sane() {
        let _serial = one_at_a_time();
        let pair = Pair::new(1500);
        let server_mac = pair.b.mac("vb");
        let server = serve(&pair, 2);
        let out = probe(&pair, &server_mac, "65536")
            .wait_with_output()
            .expect("probe");
        let v = sane_probe(&out);
        assert_eq!(v["lost_rounds"].as_u64(), Some(0));
        let err = finish(server);
        assert!(err.contains("answering raw probes on vb"), "{err}");
        for f in ["malformed", "wrong_nonce", "stranger", "dropped_incomplete"] {
            assert_eq!(ignored(&err, "ngctl serve", f), 0, "{f}: {err}");
        }
    }
}

root_test! {
    fn stray_frames_are_ignored_and_the_probe_is_unaffected() {
        let _serial = one_at_a_time();
        let pair = Pair::new(1500);
        let server_mac = pair.b.mac("vb");
        let client_mac = pair.a.mac("va");
        let stranger = [0x02, 0x5e, 0x00, 0x00, 0x0b, 0xad];
        let server = serve(&pair, 2);
        let client = probe(&pair, &server_mac, "65536");
        // Let the session start: strays before it would all be "stranger".
        std::thread::sleep(Duration::from_millis(500));

        // A third party on each side of the link: frames to the server that
        // claim to be the client but carry another session's nonce, frames to
        // the server from a stranger's MAC, and frames to the client from a
        // stranger's MAC. One every 2 ms while the probe runs.
        let to_server = RawPort::sender(&pair.a, "va");
        let to_client = RawPort::sender(&pair.b, "vb");
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let (stop2, sent2) = (stop.clone(), sent.clone());
        let h = std::thread::spawn(move || {
            let mut seq = 1u32;
            while !stop2.load(Ordering::Relaxed) {
                let nonce = 0x5eed_0000_0000_0000 | u64::from(seq);
                let h = data_header(nonce, seq, 16);
                to_server.send(&eth_frame(&server_mac, &client_mac, &h));
                to_server.send(&eth_frame(&server_mac, &stranger, &h));
                to_client.send(&eth_frame(&client_mac, &stranger, &h));
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

        let v = sane_probe(&out);
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
        let serr = finish(server);
        // After the client's Bye the server has no session: the rest of the
        // "wrong nonce" strays are then strangers' frames too.
        let wrong_nonce = ignored(&serr, "ngctl serve", "wrong_nonce");
        let strangers = ignored(&serr, "ngctl serve", "stranger");
        assert_eq!(wrong_nonce + strangers, 2 * rounds, "{serr}");
        assert!(wrong_nonce >= rounds / 2 && strangers >= rounds, "{serr}");
        assert_eq!(ignored(&serr, "ngctl serve", "malformed"), 0, "{serr}");
    }
}

root_test! {
    fn without_cap_net_raw_the_error_says_so() {
        let _serial = one_at_a_time();
        let pair = Pair::new(1500);
        assert!(
            Command::new("setpriv").arg("--version").output().is_ok(),
            "this test drops CAP_NET_RAW with setpriv (util-linux), which is not installed"
        );
        // Root, but with CAP_NET_RAW gone from every capability set.
        let drop_raw = |ns: &Netns, args: &[&str]| {
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    ns.name(),
                    "setpriv",
                    "--bounding-set=-net_raw",
                ])
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
}
