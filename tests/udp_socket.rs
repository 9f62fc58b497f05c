//! The UDP transport on loopback: the datagram core over a real socket,
//! client and server in this process (handshake, fragments, loss,
//! strangers, takeover, Bye, the gate). `tests/raw_eth.rs` runs the same
//! checks over raw Ethernet.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use netgauged::clock::mono_raw_ns;
use netgauged::transport::dgram::wire::{Header, Kind, HEADER_LEN};
use netgauged::transport::sys::socket;
use netgauged::transport::udp::{IgnoredFrames, UdpOptions, UdpTransport};
use netgauged::transport::{Caps, Meta, Transport, TransportError};

mod common;
use common::echo::{
    check_echoed, check_one_frame_lost_each_way, check_refusals, check_strays_ignored,
    check_takeover, data_header, echo, lose_one_frame_each_way, ping, ping_sizes, Echoed, Loss,
    ASK, LONG,
};

fn lo() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn opts() -> UdpOptions {
    UdpOptions {
        handshake_timeout: Duration::from_millis(500),
        handshake_attempts: 10,
        ..UdpOptions::default()
    }
}

/// An echo server on loopback: its address and thread.
fn echo_server(o: UdpOptions) -> (SocketAddr, JoinHandle<Echoed>) {
    let server = UdpTransport::listen(lo(), o).unwrap();
    let addr = server.local_addr().unwrap();
    (addr, echo(server))
}

#[test]
fn handshake_opens_a_session() {
    let (addr, h) = echo_server(opts());
    let mut c = UdpTransport::connect(addr, opts()).unwrap();
    let nonce = c.nonce().unwrap();
    assert_ne!(nonce, 0);
    assert_eq!(c.peer_addr(), Some(addr));
    let mtu = c.mtu_bytes().unwrap();
    assert!(mtu >= 1280, "loopback MTU {mtu}");
    assert_eq!(
        c.max_frag_bytes().unwrap(),
        (mtu - 28).min(65_507) - HEADER_LEN
    );
    assert_eq!(
        c.caps(),
        Caps {
            max_msg_bytes: 4 << 20,
            one_sided: false,
            has_recv_overhead: true,
            peers: 1
        }
    );
    ping(&mut c, 1);
    drop(c);
    let s = h.join().unwrap();
    assert_eq!(s.sessions, 1);
    assert_eq!(s.nonce, Some(nonce));
    assert_eq!(s.ignored, IgnoredFrames::default());
}

fn ping_pong(o: UdpOptions, expect_frag_bytes: Option<usize>) {
    let (addr, h) = echo_server(o);
    let mut c = UdpTransport::connect(addr, o).unwrap();
    if let Some(f) = expect_frag_bytes {
        assert_eq!(c.max_frag_bytes(), Some(f));
    }
    let sent = ping_sizes(&mut c, &[0, 1, 1500, 64 << 10, 1 << 20]);
    drop(c);
    check_echoed(&h.join().unwrap(), sent);
}

#[test]
fn ping_pong_at_loopback_mtu() {
    ping_pong(opts(), None);
}

#[test]
fn ping_pong_at_mtu_1500_fragments_and_reassembles() {
    let o = UdpOptions {
        mtu_bytes: Some(1500),
        ..opts()
    };
    ping_pong(o, Some(1500 - 20 - 8 - HEADER_LEN));
}

#[test]
fn silent_server_times_out_at_the_deadline_then_works() {
    let (addr, h) = echo_server(opts());
    let mut c = UdpTransport::connect(addr, opts()).unwrap();
    c.send(0, 100, Meta::default()).unwrap(); // not to be answered
    let timeout = Duration::from_millis(300);
    let t0 = mono_raw_ns();
    let e = c.recv(Some(0), timeout).unwrap_err();
    let el_ns = mono_raw_ns() - t0;
    assert!(
        matches!(e, TransportError::Timeout(d) if d == timeout),
        "{e}"
    );
    assert!(el_ns >= 300_000_000, "returned early after {el_ns} ns");
    assert!(el_ns < 5_300_000_000, "no hang: {el_ns} ns");
    ping(&mut c, 100);
    drop(c);
    assert_eq!(h.join().unwrap().counters.recv_messages, 2);
}

/// A UDP relay between one client and `server` that loses the n-th Data
/// datagram (1-based) of each direction, if asked. Joins to the numbers of
/// Data datagrams seen each way.
fn lossy_proxy(
    server: SocketAddr,
    drop_fwd: Option<u64>,
    drop_back: Option<u64>,
) -> (SocketAddr, Arc<AtomicBool>, JoinHandle<(u64, u64)>) {
    let front = UdpSocket::bind(lo()).unwrap();
    let back = UdpSocket::bind(lo()).unwrap();
    back.connect(server).unwrap();
    front.set_nonblocking(true).unwrap();
    back.set_nonblocking(true).unwrap();
    let addr = front.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        let mut client = None;
        let (mut fwd, mut bwd) = (Loss::nth(drop_fwd), Loss::nth(drop_back));
        while !stop2.load(Ordering::Relaxed) {
            socket::wait_readable(front.as_fd(), Duration::from_millis(1));
            while let Ok((n, from)) = front.recv_from(&mut buf) {
                client = Some(from);
                if fwd.passes(&buf[..n]) {
                    let _ = back.send(&buf[..n]);
                }
            }
            while let Ok(n) = back.recv(&mut buf) {
                if let (true, Some(c)) = (bwd.passes(&buf[..n]), client) {
                    let _ = front.send_to(&buf[..n], c);
                }
            }
        }
        (fwd.data_frames, bwd.data_frames)
    });
    (addr, stop, h)
}

#[test]
fn lost_fragment_times_out_then_next_message_succeeds() {
    let o = UdpOptions {
        mtu_bytes: Some(1500),
        ..opts()
    };
    let (server, sh) = echo_server(o);
    // Drop the middle fragment of the first request and the first
    // fragment of the second answer.
    let (proxy, stop, ph) = lossy_proxy(server, Some(2), Some(1));
    let mut c = UdpTransport::connect(proxy, o).unwrap();
    lose_one_frame_each_way(&mut c);
    drop(c);
    let s = sh.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    check_one_frame_lost_each_way(&s, ph.join().unwrap());
}

/// A whole frame: `h` and its payload (zeros).
fn frame_bytes(h: &Header) -> Vec<u8> {
    let mut v = vec![0u8; h.frame_len()];
    h.encode(&mut v).unwrap();
    v
}

#[test]
fn wrong_nonce_stranger_malformed_and_stale_frames_are_ignored_and_counted() {
    let (addr, h) = echo_server(opts());
    let mut c = UdpTransport::connect(addr, opts()).unwrap();
    ping(&mut c, 10); // server's newest seq is now 1
    let nonce = c.nonce().unwrap();
    // From the session peer's own socket.
    let send = |f: &[u8]| assert!(socket::send_two(c.as_fd(), None, f, &[]).unwrap());
    // Wrong nonce.
    send(&frame_bytes(&data_header(nonce ^ 1, 100, 10)));
    // Right nonce, from a stranger.
    let f = frame_bytes(&data_header(nonce, 100, 10));
    let stranger = UdpSocket::bind(lo()).unwrap();
    stranger.send_to(&f, addr).unwrap();
    // Garbage and a truncated frame from the peer.
    send(b"not a frame");
    send(&f[..HEADER_LEN + 5]);
    // An old message (seq 0 < 1), right nonce and address.
    send(&frame_bytes(&data_header(nonce, 0, 10)));
    // None of these was answered; a real message still works.
    let e = c.recv(Some(0), Duration::from_millis(200)).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(_)), "{e}");
    ping(&mut c, 10);
    drop(c);
    check_strays_ignored(&h.join().unwrap());
}

#[test]
fn a_new_hello_takes_over_the_session() {
    let (addr, h) = echo_server(opts());
    // Once B has taken over, A is a stranger: its request and its Bye.
    let s = check_takeover(|| UdpTransport::connect(addr, opts()).unwrap(), h);
    assert_eq!(s.ignored.stranger, 2);
}

#[test]
fn peer_saying_bye_is_peer_gone() {
    let mut server = UdpTransport::listen(lo(), opts()).unwrap();
    let addr = server.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        server.accept(LONG).unwrap();
        let r = server.recv(Some(0), LONG).unwrap();
        server.send(0, r.bytes, Meta::default()).unwrap();
        // Dropping the server sends Bye.
    });
    let mut c = UdpTransport::connect(addr, opts()).unwrap();
    ping(&mut c, 10);
    h.join().unwrap();
    let e = c.recv(Some(0), LONG).unwrap_err();
    assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
    let e = c.send(0, 10, Meta::default()).unwrap_err();
    assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
}

#[test]
fn vanished_peer_is_an_error_not_a_hang() {
    // A bare server: acknowledges the Hello, then closes its socket
    // without a Bye.
    let sock = UdpSocket::bind(lo()).unwrap();
    let addr = sock.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        sock.set_read_timeout(Some(LONG)).unwrap();
        let mut buf = [0u8; 256];
        let (n, from) = sock.recv_from(&mut buf).unwrap();
        let hello = Header::decode(&buf[..n]).unwrap();
        assert_eq!(hello.kind, Kind::Hello);
        let mut ack = [0u8; HEADER_LEN];
        Header::control(Kind::HelloAck, hello.nonce)
            .encode(&mut ack)
            .unwrap();
        sock.send_to(&ack, from).unwrap();
        drop(sock);
        tx.send(()).unwrap();
    });
    let mut c = UdpTransport::connect(addr, opts()).unwrap();
    rx.recv().unwrap();
    h.join().unwrap();
    let t0 = mono_raw_ns();
    let r = c
        .send(0, 100, ASK)
        .and_then(|()| c.recv(Some(0), Duration::from_secs(2)));
    let el_ns = mono_raw_ns() - t0;
    match r {
        Err(e @ TransportError::PeerGone(_)) | Err(e @ TransportError::Timeout(_)) => {
            eprintln!("vanished peer: {e} after {el_ns} ns")
        }
        other => panic!("expected PeerGone or Timeout, got {other:?}"),
    }
    assert!(el_ns < 7_000_000_000, "no hang: {el_ns} ns");
}

#[test]
fn connecting_to_a_closed_port_fails_after_the_retries() {
    let addr = UdpSocket::bind(lo()).unwrap().local_addr().unwrap(); // closed at once
    let o = UdpOptions {
        handshake_timeout: Duration::from_millis(50),
        handshake_attempts: 3,
        ..UdpOptions::default()
    };
    match UdpTransport::connect(addr, o) {
        Err(TransportError::PeerGone(_)) | Err(TransportError::Timeout(_)) => {}
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("connected to a closed port"),
    }
}

#[test]
fn bad_arguments_are_typed_errors() {
    let mut server = UdpTransport::listen(lo(), opts()).unwrap();
    check_refusals(&mut server);
    let tiny = UdpOptions {
        mtu_bytes: Some(100),
        ..opts()
    };
    let r = UdpTransport::connect(server.local_addr().unwrap(), tiny);
    assert!(
        matches!(r, Err(TransportError::Protocol(_))),
        "{:?}",
        r.err()
    );
}

#[test]
fn gated_server_accepts_only_the_authorized_nonce() {
    let gate = Arc::new(AtomicU64::new(0));
    let mut server = UdpTransport::listen(lo(), opts()).unwrap();
    server.gate_hellos(gate.clone());
    let addr = server.local_addr().unwrap();
    let stop = Arc::new(AtomicU64::new(0));
    let stop2 = stop.clone();
    let h = std::thread::spawn(move || {
        while stop2.load(Ordering::Acquire) == 0 {
            let _ = server.recv(None, Duration::from_millis(20));
        }
        (server.sessions_started(), server.ignored())
    });
    let client = |nonce| {
        UdpTransport::connect(
            addr,
            UdpOptions {
                handshake_timeout: Duration::from_millis(100),
                handshake_attempts: 3,
                session_nonce: Some(nonce),
                ..UdpOptions::default()
            },
        )
    };
    // Nothing authorized: every Hello is ignored.
    assert!(matches!(client(111), Err(TransportError::Timeout(_))));
    gate.store(222, Ordering::Release);
    // The wrong nonce still is; the authorized one opens the session.
    assert!(matches!(client(111), Err(TransportError::Timeout(_))));
    let c = client(222).expect("authorized session");
    assert_eq!(c.nonce(), Some(222));
    stop.store(1, Ordering::Release);
    let (sessions, ignored) = h.join().unwrap();
    assert_eq!(sessions, 1);
    assert!(ignored.wrong_nonce >= 6, "{ignored:?}");
}

#[test]
fn a_server_that_comes_up_during_the_handshake_gets_a_working_session() {
    // The port is closed when the first Hellos arrive (ICMP port
    // unreachable comes back) and open for a later one.
    let addr = UdpSocket::bind(lo()).unwrap().local_addr().unwrap();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let mut server = UdpTransport::listen(addr, opts()).unwrap();
        server.accept(LONG).unwrap();
        let r = server.recv(Some(0), LONG).unwrap();
        server.send(0, r.bytes, Meta::default()).unwrap();
    });
    let o = UdpOptions {
        handshake_timeout: Duration::from_millis(100),
        handshake_attempts: 30,
        ..UdpOptions::default()
    };
    let mut c = UdpTransport::connect(addr, o).unwrap();
    ping(&mut c, 10);
    h.join().unwrap();
}
