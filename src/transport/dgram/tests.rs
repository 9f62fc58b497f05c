//! Tests of the datagram core against an in-memory device in virtual time:
//! no socket, no privilege. The test plays the network: it moves frames
//! between two endpoints' ports and loses, reorders, duplicates or forges
//! them on the way; every wait ends when virtual time says so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::idle::{Idle, IdlePolicy, Pause};
use super::reasm::{Offer, Reassembly};
use super::session::HelloGate;
use super::wire::Header;
use super::{EndpointConfig, IgnoredFrames};
use crate::clock::{Clock, VirtualClock};
use crate::transport::{Meta, Received, Transport, TransportError};

// This file is itself loaded with `#[path]` (dgram/mod.rs), so a plain
// `mod mem;` would be looked for beside it, not in tests/.
#[path = "tests/mem.rs"]
mod mem;

use mem::*;

#[test]
fn frames_written_by_hand_are_understood_and_sent_byte_for_byte() {
    let clock = VirtualClock::new();
    let (phy, port) = device(&clock);
    let mut server = Ep::server(phy, clock.clone(), cfg()).unwrap();
    // The Hello of nonce 0x0123456789abcdef, every byte spelled out.
    let hello = [
        0x4E, 0x47, 1, 1, 0, 0, 0, 0, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(hello.to_vec(), control(1, NONCE));
    port.borrow_mut().rx.push_back((7, hello.to_vec()));
    assert_eq!(server.accept(Duration::from_millis(1)).unwrap(), 7);
    assert_eq!(sent(&port), [(7, control(2, NONCE))]);

    // A 150-byte message in two fragments, the second first.
    let frag = |i: u32| {
        let r = (i as usize * 100)..(150.min(i as usize * 100 + 100));
        by_hand(3, 1, NONCE, 1, r.start as u32, 150, 7, i, 2, &pattern(r))
    };
    port.borrow_mut().rx.extend([(7, frag(1)), (7, frag(0))]);
    let r = server.recv(None, Duration::from_millis(1)).unwrap();
    assert_eq!(
        r,
        Received {
            peer: 0,
            bytes: 150,
            meta: ASK,
            overhead_ns: 2.0 * RX_COST_NS,
        }
    );

    // The answer, as this code's predecessor put it on the wire.
    let meta = Meta {
        answer: false,
        report_ns: 9,
    };
    server.send(0, 150, meta).unwrap();
    assert_eq!(
        sent(&port),
        [
            (
                7,
                by_hand(3, 0, NONCE, 1, 0, 150, 9, 0, 2, &pattern(0..100))
            ),
            (
                7,
                by_hand(3, 0, NONCE, 1, 100, 150, 9, 1, 2, &pattern(100..150))
            ),
        ]
    );
    server.send(0, 0, meta).unwrap();
    assert_eq!(
        sent(&port),
        [(7, by_hand(3, 0, NONCE, 2, 0, 0, 9, 0, 1, &[]))]
    );
    drop(server);
    assert_eq!(sent(&port), [(7, control(4, NONCE))]);
}

#[test]
fn the_client_says_hello_and_takes_only_its_own_ack() {
    let clock = VirtualClock::new();
    let (phy, port) = device(&clock);
    port.borrow_mut().rx.extend([
        (9, control(2, NONCE)),          // a stranger's
        (SERVER, control(2, NONCE ^ 1)), // another session's
        (SERVER, control(1, NONCE)),     // a Hello, at a client
        (SERVER, b"garbage".to_vec()),   // not a frame
        (SERVER, control(2, NONCE)),     // ours
    ]);
    let c = Ep::client(phy, clock.clone(), cfg(), SERVER, Some(NONCE)).unwrap();
    assert_eq!(sent(&port), [(SERVER, control(1, NONCE))]);
    assert_eq!((c.nonce(), c.peer()), (Some(NONCE), Some(SERVER)));
    assert_eq!((c.mtu_bytes(), c.frag_bytes()), (Some(140), Some(FRAG)));
    assert_eq!(
        c.ignored(),
        IgnoredFrames {
            malformed: 1,
            wrong_nonce: 1,
            stranger: 1,
            unexpected: 1,
            ..IgnoredFrames::default()
        }
    );

    // Silence: every attempt waits its time, then a timeout.
    let (phy, port) = device(&clock);
    let t0 = clock.now_ns();
    let e = Ep::client(phy, clock.clone(), cfg(), SERVER, Some(NONCE)).err();
    assert!(
        matches!(e, Some(TransportError::Timeout(d)) if d == Duration::from_millis(3)),
        "{e:?}"
    );
    // Three Hellos, then the Bye of the endpoint given up.
    let hello = (SERVER, control(1, NONCE));
    let bye = (SERVER, control(4, NONCE));
    assert_eq!(sent(&port), [hello.clone(), hello.clone(), hello, bye]);
    assert!(clock.now_ns() - t0 >= 3e6);
}

#[test]
fn a_refused_hello_then_an_ack_opens_a_usable_session() {
    let clock = VirtualClock::new();
    // Nobody listens, ever: the peer refused the session.
    let (phy, port) = device(&clock);
    port.borrow_mut().refuse = 1;
    let e = Ep::client(phy, clock.clone(), cfg(), SERVER, Some(NONCE)).err();
    assert!(
        matches!(e, Some(TransportError::PeerGone(ref m)) if m == "node1 refused the session: refused"),
        "{e:?}"
    );
    // Nobody listens yet when the first Hello arrives; then the server
    // answers: the session works.
    let (phy, port) = device(&clock);
    port.borrow_mut().refuse = 1;
    port.borrow_mut().rx.push_back((SERVER, control(2, NONCE)));
    let mut c = Ep::client(phy, clock.clone(), cfg(), SERVER, Some(NONCE)).unwrap();
    c.send(0, 10, ASK).unwrap();
    assert_eq!(sent(&port).len(), 2);
    // A refusal while waiting for an answer ends the session.
    port.borrow_mut().refuse = 1;
    let e = c.recv(Some(0), Duration::from_millis(1)).unwrap_err();
    assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
    let e = c.send(0, 10, ASK).unwrap_err();
    assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
}

#[test]
fn loss_reordering_and_duplicates_cost_one_message_at_most() {
    let mut p = pair();
    // 350 bytes: four fragments, delivered backwards with one twice.
    p.client.send(0, 350, ASK).unwrap();
    pump(&p.cport, CLIENT, &p.sport, |mut v| {
        v.reverse();
        let dup = v[1].clone();
        v.insert(1, dup);
        v
    });
    let r = p.server.recv(None, Duration::from_millis(1)).unwrap();
    assert_eq!((r.bytes, r.meta), (350, ASK));
    assert_eq!(
        r.overhead_ns,
        4.0 * RX_COST_NS,
        "the duplicate costs nothing"
    );
    assert_eq!(p.server.ignored().duplicate, 1);

    // The answer loses its second fragment: a timeout at the deadline.
    let answer = Meta {
        answer: false,
        report_ns: 3,
    };
    p.server.send(0, 350, answer).unwrap();
    let mut lost = Vec::new();
    pump(&p.sport, SERVER, &p.cport, |mut v| {
        lost.push(v.remove(1));
        v
    });
    let t0 = p.clock.now_ns();
    let timeout = Duration::from_millis(2);
    let e = p.client.recv(Some(0), timeout).unwrap_err();
    assert!(
        matches!(e, TransportError::Timeout(d) if d == timeout),
        "{e}"
    );
    assert!(p.clock.now_ns() - t0 >= 2e6);

    // The next message works; the incomplete one is dropped and counted,
    // and its lost fragment, arriving late, is stale.
    p.server.send(0, 120, answer).unwrap();
    pump(&p.sport, SERVER, &p.cport, |mut v| {
        v.extend(lost);
        v
    });
    let r = p.client.recv(Some(0), timeout).unwrap();
    assert_eq!((r.bytes, r.meta), (120, answer));
    let e = p.client.recv(Some(0), timeout).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(_)), "{e}");
    assert_eq!(
        p.client.ignored(),
        IgnoredFrames {
            stale: 1,
            dropped_incomplete: 1,
            ..IgnoredFrames::default()
        }
    );
    assert_eq!(p.client.counters().recv_messages, 1);
    assert_eq!(p.client.counters().sent_bytes, 350);
}

#[test]
fn strangers_other_sessions_and_unexpected_frames_are_ignored_and_counted() {
    let mut p = pair();
    let data = |nonce: u64, seq: u32, len: u32| {
        by_hand(3, 1, nonce, seq, 0, len, 0, 0, 1, &pattern(0..len as usize))
    };
    p.sport.borrow_mut().rx.extend([
        (9, data(NONCE, 5, 10)),                     // stranger
        (9, control(4, NONCE)),                      // a stranger's Bye
        (CLIENT, data(NONCE ^ 1, 5, 10)),            // another session
        (CLIENT, b"short".to_vec()),                 // malformed
        (CLIENT, data(NONCE, 5, 10)[..45].to_vec()), // truncated
        (CLIENT, control(2, NONCE)),                 // a HelloAck, at a server
        (
            CLIENT,
            by_hand(3, 0, NONCE, 6, 0, 5000, 0, 0, 50, &pattern(0..100)),
        ), // oversize
    ]);
    let e = p.server.recv(None, Duration::from_millis(1)).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(_)), "{e}");
    assert_eq!(
        p.server.ignored(),
        IgnoredFrames {
            malformed: 2,
            wrong_nonce: 1,
            stranger: 2,
            oversize: 1,
            unexpected: 1,
            ..IgnoredFrames::default()
        }
    );
    // The session is intact: a real message still works, and an older one
    // is stale.
    p.sport
        .borrow_mut()
        .rx
        .push_back((CLIENT, data(NONCE, 7, 10)));
    p.sport
        .borrow_mut()
        .rx
        .push_back((CLIENT, data(NONCE, 6, 10)));
    let r = p.server.recv(None, Duration::from_millis(1)).unwrap();
    assert_eq!(r.bytes, 10);
    assert!(p.server.recv(None, Duration::from_millis(1)).is_err());
    assert_eq!(p.server.ignored().stale, 1);
    assert_eq!(p.server.sessions_started(), 1);
}

#[test]
fn bye_ends_the_session_and_a_new_hello_starts_one() {
    let mut p = pair();
    // The client leaves: the server's wait ends, its session is closed.
    let Pair {
        client,
        cport,
        mut server,
        sport,
        clock: _,
    } = p;
    drop(client);
    pump(&cport, CLIENT, &sport, as_is);
    let e = server.recv(None, Duration::from_millis(1)).unwrap_err();
    assert!(
        matches!(e, TransportError::PeerGone(ref m) if m == "node2 said bye"),
        "{e}"
    );
    assert_eq!((server.nonce(), server.peer()), (None, None));
    assert!(matches!(
        server.send(0, 1, ASK),
        Err(TransportError::PeerGone(_))
    ));
    // A retried Hello is acknowledged again without a new session; a new
    // nonce takes over.
    sport.borrow_mut().rx.extend([
        (CLIENT, control(1, 77)),
        (CLIENT, control(1, 77)),
        (3, control(1, 78)),
    ]);
    assert!(server.recv(None, Duration::from_millis(1)).is_err());
    assert_eq!(server.sessions_started(), 3);
    assert_eq!((server.nonce(), server.peer()), (Some(78), Some(3)));
    assert_eq!(sent(&sport).len(), 3);

    // The server leaves: the client's wait is PeerGone, and so is every
    // later call.
    p = pair();
    drop(p.server);
    pump(&p.sport, SERVER, &p.cport, as_is);
    let e = p
        .client
        .recv(Some(0), Duration::from_millis(1))
        .unwrap_err();
    assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
    for _ in 0..2 {
        assert!(matches!(
            p.client.recv(Some(0), Duration::ZERO),
            Err(TransportError::PeerGone(_))
        ));
        assert!(matches!(
            p.client.send(0, 1, ASK),
            Err(TransportError::PeerGone(_))
        ));
    }
    // A client that knows its peer is gone sends no Bye.
    drop(p.client);
    assert!(sent(&p.cport).is_empty());
}

/// A gate that also binds the session to the source the control plane
/// authenticated.
struct FromNode(Addr, AtomicU64);

impl HelloGate<Addr> for FromNode {
    fn admits(&self, nonce: u64, src: &Addr) -> bool {
        *src == self.0 && self.1.admits(nonce, src)
    }
}

#[test]
fn the_gate_admits_only_the_authorized_nonce_and_can_bind_the_source() {
    let clock = VirtualClock::new();
    let (phy, port) = device(&clock);
    let mut server = Ep::server(phy, clock.clone(), cfg()).unwrap();
    let gate = Arc::new(AtomicU64::new(0));
    server.gate_hellos(gate.clone());
    let hello_from =
        |src: Addr, nonce: u64| port.borrow_mut().rx.push_back((src, control(1, nonce)));
    hello_from(7, NONCE);
    assert!(server.accept(Duration::from_millis(1)).is_err());
    gate.store(NONCE, Ordering::Release);
    hello_from(7, NONCE ^ 1);
    hello_from(7, NONCE);
    assert_eq!(server.accept(Duration::from_millis(1)).unwrap(), 7);
    assert_eq!(server.ignored().wrong_nonce, 2);

    let (phy, port) = device(&clock);
    let mut server = Ep::server(phy, clock.clone(), cfg()).unwrap();
    server.gate_hellos_with(Arc::new(FromNode(7, AtomicU64::new(NONCE))));
    port.borrow_mut().rx.push_back((8, control(1, NONCE)));
    assert!(server.accept(Duration::from_millis(1)).is_err());
    port.borrow_mut().rx.push_back((7, control(1, NONCE)));
    assert_eq!(server.accept(Duration::from_millis(1)).unwrap(), 7);
    assert_eq!(server.ignored().wrong_nonce, 1);
}

#[test]
fn waits_sleep_only_when_idle_and_never_past_their_deadline() {
    let mut p = pair();
    let ms = |n: f64| n * 1e6;
    p.clock.spin(ps(ms(1000.0)));
    // A server nobody talked to for a second sleeps at once, in slices of
    // at most SLEEP_SLICE (1 s), the last one cut at the deadline: one
    // sleep for this wait.
    let t0 = p.clock.now_ns();
    let timeout = Duration::from_micros(25_300);
    assert!(p.server.recv(None, timeout).is_err());
    let deadline = t0 + timeout.as_nanos() as f64;
    let sleeps = std::mem::take(&mut p.sport.borrow_mut().sleeps);
    assert!(!sleeps.is_empty() && sleeps.len() <= 2, "{sleeps:?}");
    for (at, len) in &sleeps {
        assert!(
            *len <= ms(1000.0) && at + len <= deadline + 1.0,
            "{sleeps:?}"
        );
    }
    let slept: f64 = sleeps.iter().map(|s| s.1).sum();
    assert!(slept >= ms(25.0), "slept {slept} ns of a 25.3 ms wait");
    assert!(p.clock.now_ns() < deadline + 2.0 * EMPTY_POLL_NS);

    // A client spins from the start of every wait: 20 ms before it sleeps.
    let t0 = p.clock.now_ns();
    assert!(p.client.recv(Some(0), Duration::from_millis(30)).is_err());
    let sleeps = std::mem::take(&mut p.cport.borrow_mut().sleeps);
    assert!(
        !sleeps.is_empty() && sleeps[0].0 >= t0 + ms(20.0),
        "{sleeps:?}"
    );

    // A server that just received spins for 20 ms after the frame.
    p.client.send(0, 10, ASK).unwrap();
    pump(&p.cport, CLIENT, &p.sport, as_is);
    p.server.recv(None, Duration::ZERO).unwrap();
    let t1 = p.clock.now_ns();
    assert!(p.server.recv(None, Duration::from_millis(25)).is_err());
    let sleeps = std::mem::take(&mut p.sport.borrow_mut().sleeps);
    assert!(
        !sleeps.is_empty() && sleeps[0].0 >= t1 + ms(20.0) - RX_COST_NS,
        "{sleeps:?}"
    );
}

#[test]
fn a_strangers_frames_do_not_keep_a_server_awake() {
    // A server idle for a second gets a frame from a stranger and a
    // malformed one: it still sleeps at once, not after the 20 ms of
    // spinning and yielding that follow its session's traffic (a stranger
    // sending more often than that would keep it from ever sleeping).
    let mut p = pair();
    p.clock.spin(ps(1e9));
    let t0 = p.clock.now_ns();
    let data = by_hand(3, 1, NONCE, 5, 0, 10, 0, 0, 1, &pattern(0..10));
    p.sport
        .borrow_mut()
        .rx
        .extend([(9, data), (CLIENT, b"short".to_vec())]);
    assert!(p.server.recv(None, Duration::from_millis(25)).is_err());
    let ignored = p.server.ignored();
    assert_eq!((ignored.stranger, ignored.malformed), (1, 1));
    let sleeps = std::mem::take(&mut p.sport.borrow_mut().sleeps);
    assert!(
        !sleeps.is_empty() && sleeps[0].0 < t0 + 1e6,
        "first sleep {:?} ns after the stranger's frame",
        sleeps.first().map(|s| s.0 - t0)
    );
}

#[test]
fn the_idle_policy_spins_then_yields_then_sleeps() {
    let clock = VirtualClock::new();
    let idle = Idle::new(&IdlePolicy::default(), &clock);
    let t = |us: f64| ps(us * 1000.0);
    assert_eq!(idle.pause(t(49.0), t(1e6)), Pause::Spin);
    assert_eq!(idle.pause(t(50.0), t(1e6)), Pause::Yield);
    assert_eq!(idle.pause(t(19_999.0), t(1e6)), Pause::Yield);
    assert_eq!(idle.pause(t(20_000.0), t(1e6)), Pause::Sleep(t(1e6)));
    assert_eq!(idle.pause(t(20_000.0), t(5e6)), Pause::Sleep(t(1e6)));
    assert_eq!(idle.pause(t(20_000.0), t(3.0)), Pause::Sleep(t(3.0)));
    assert_eq!(idle.pause(t(20_000.0), 0), Pause::Yield);
    let spin_only = IdlePolicy {
        yield_after: None,
        sleep_after: Duration::from_secs(1),
    };
    let idle = Idle::new(&spin_only, &clock);
    assert_eq!(idle.pause(t(999_999.0), t(1.0)), Pause::Spin);
}

#[test]
fn a_full_queue_is_retried_until_the_send_deadline() {
    let mut p = pair();
    p.cport.borrow_mut().busy = 5;
    p.client.send(0, 250, ASK).unwrap();
    assert_eq!(sent(&p.cport).len(), 3);
    p.cport.borrow_mut().busy = u32::MAX;
    let e = p.client.send(0, 10, ASK).unwrap_err();
    assert!(
        matches!(e, TransportError::Timeout(d) if d == Duration::from_millis(1)),
        "{e}"
    );
    p.cport.borrow_mut().busy = 0;
}

#[test]
fn bad_arguments_are_typed_errors() {
    let clock = VirtualClock::new();
    let (phy, _port) = device(&clock);
    let mut server = Ep::server(phy, clock.clone(), cfg()).unwrap();
    let e = |r: Result<(), TransportError>| format!("{:?}", r.unwrap_err());
    assert_eq!(e(server.send(0, 1, ASK)), "NoPeer(0)");
    assert_eq!(e(server.send(1, 1, ASK)), "NoPeer(1)");
    assert_eq!(
        e(server.recv(Some(1), Duration::ZERO).map(drop)),
        "NoPeer(1)"
    );
    let too_large = "TooLarge { bytes: 4097, max: 4096 }";
    assert_eq!(e(server.send(0, 4097, ASK)), too_large);
    let (phy, _port) = device(&clock);
    let huge = EndpointConfig {
        max_msg_bytes: u32::MAX as usize + 1,
        ..cfg()
    };
    assert!(matches!(
        Ep::server(phy, clock, huge),
        Err(TransportError::Protocol(_))
    ));
}

// --- reassembly, as a pure state machine ---------------------------------

fn frag(seq: u32, msg_len: u32, frag_bytes: u32, idx: u32) -> Header {
    let meta = Meta {
        answer: seq % 2 == 1,
        report_ns: seq,
    };
    let (len, bytes) = (msg_len as usize, frag_bytes as usize);
    Header::fragment(1, seq, meta, len, bytes, idx as usize)
}

#[test]
fn reassembly_completes_in_any_order_and_sums_overhead() {
    let mut r = Reassembly::new(1 << 20);
    assert_eq!(r.offer(&frag(1, 2500, 1000, 2), 5), Offer::Partial);
    assert_eq!(r.offer(&frag(1, 2500, 1000, 0), 7), Offer::Partial);
    assert_eq!(r.offer(&frag(1, 2500, 1000, 0), 100), Offer::Duplicate);
    assert_eq!(
        r.offer(&frag(1, 2500, 1000, 1), 11),
        Offer::Complete {
            bytes: 2500,
            meta: Meta {
                answer: true,
                report_ns: 1
            },
            overhead_ticks: 23
        }
    );
    // Late duplicate of a completed message.
    assert_eq!(r.offer(&frag(1, 2500, 1000, 1), 1), Offer::Duplicate);
    // Empty message.
    assert!(matches!(
        r.offer(&frag(2, 0, 1000, 0), 3),
        Offer::Complete { bytes: 0, .. }
    ));
}

#[test]
fn reassembly_newer_seq_drops_older_and_older_is_stale() {
    let mut r = Reassembly::new(1 << 20);
    assert_eq!(r.offer(&frag(10, 3000, 1000, 0), 1), Offer::Partial);
    assert_eq!(
        r.offer(&frag(11, 1000, 1000, 0), 1),
        Offer::Complete {
            bytes: 1000,
            meta: Meta {
                answer: true,
                report_ns: 11
            },
            overhead_ticks: 1,
        }
    );
    assert_eq!(r.dropped_incomplete, 1);
    assert_eq!(r.offer(&frag(10, 3000, 1000, 1), 1), Offer::Stale);
    // A complete message then a newer one does not count as dropped.
    assert_eq!(r.offer(&frag(12, 2000, 1000, 0), 1), Offer::Partial);
    assert_eq!(r.dropped_incomplete, 1);
    // Same seq, different shape.
    assert_eq!(r.offer(&frag(12, 3000, 1000, 1), 1), Offer::Inconsistent);
    // Sequence numbers wrap.
    let mut r = Reassembly::new(1 << 20);
    assert!(matches!(
        r.offer(&frag(u32::MAX, 10, 1000, 0), 1),
        Offer::Complete { .. }
    ));
    assert!(matches!(
        r.offer(&frag(0, 10, 1000, 0), 1),
        Offer::Complete { .. }
    ));
    assert_eq!(r.offer(&frag(u32::MAX, 10, 1000, 0), 1), Offer::Stale);
    // After a session reset any seq starts afresh.
    r.reset();
    assert!(matches!(
        r.offer(&frag(5, 10, 1000, 0), 1),
        Offer::Complete { .. }
    ));
}

#[test]
fn reassembly_rejects_oversize() {
    let mut r = Reassembly::new(4096);
    assert_eq!(r.offer(&frag(1, 5000, 1000, 0), 1), Offer::Oversize);
    // 4096 B in 16-byte fragments = 256 > 4096/64+1 rounded to 128 bits.
    assert_eq!(r.offer(&frag(1, 4096, 16, 0), 1), Offer::Oversize);
    assert!(matches!(r.offer(&frag(1, 4096, 64, 63), 1), Offer::Partial));
}

#[test]
fn the_session_gate_admits_the_authenticated_source_only() {
    use super::session::{GateSource, SessionGate};
    use std::net::{IpAddr, SocketAddr};
    let gate = SessionGate::new();
    let at = |ip: &str| SocketAddr::new(ip.parse::<IpAddr>().unwrap(), 9);
    let (mac, other_mac) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let udp = |g: &SessionGate, src: SocketAddr| HelloGate::<SocketAddr>::admits(g, NONCE, &src);
    let raw = |g: &SessionGate, src: [u8; 6]| HelloGate::<[u8; 6]>::admits(g, NONCE, &src);
    assert!(
        !udp(&gate, at("10.0.0.1")) && !raw(&gate, mac),
        "a closed gate"
    );
    gate.open(NONCE, GateSource::Ip("10.0.0.1".parse().unwrap()));
    assert!(udp(&gate, at("10.0.0.1")) && udp(&gate, at("::ffff:10.0.0.1")));
    assert!(!udp(&gate, at("10.0.0.2")) && !raw(&gate, mac));
    assert!(!HelloGate::<SocketAddr>::admits(
        &gate,
        NONCE ^ 1,
        &at("10.0.0.1")
    ));
    gate.open(NONCE, GateSource::Mac(mac));
    assert!(raw(&gate, mac) && !raw(&gate, other_mac) && !udp(&gate, at("10.0.0.1")));
    // A verbs session's nonce, which travels in clear, opens no datagram
    // session: neither responder admits a Hello with it, from anywhere.
    gate.open(NONCE, GateSource::Elsewhere);
    assert_eq!(gate.nonce(), NONCE);
    assert!(!udp(&gate, at("10.0.0.1")) && !udp(&gate, at("10.9.9.9")));
    assert!(!raw(&gate, mac) && !raw(&gate, other_mac));
}
