//! An echo server and pings, for the tests of the datagram transports
//! (UDP and raw Ethernet: one core, the same checks).
#![allow(dead_code)] // each test file uses its own part of the helpers

use std::thread::JoinHandle;
use std::time::Duration;

use netgauged::transport::dgram::wire::Header;
use netgauged::transport::dgram::{Endpoint, IgnoredFrames, Phy};
use netgauged::transport::{Counters, Meta, Received, Transport, TransportError};

/// A wait that only a broken transport reaches.
pub const LONG: Duration = Duration::from_secs(10);

/// What a client sends: answer me, and a report the server must see.
pub const ASK: Meta = Meta {
    answer: true,
    report_ns: 7,
};

/// What an echo server saw.
#[derive(Debug)]
pub struct Echoed {
    pub counters: Counters,
    pub ignored: IgnoredFrames,
    pub sessions: u64,
    /// The nonce of its last session.
    pub nonce: Option<u64>,
    pub received: Vec<Received>,
}

/// A server thread that answers every message flagged `answer` with one of
/// the same size (reporting its receive overhead) and ends when its client
/// says Bye (or after 20 s of silence, so a test cannot hang).
pub fn echo<P: Phy>(mut server: Endpoint<P>) -> JoinHandle<Echoed>
where
    Endpoint<P>: Send + 'static,
{
    std::thread::spawn(move || {
        let mut received = Vec::new();
        let mut nonce = None;
        let mut idle_ms = 0;
        while idle_ms < 20_000 {
            let r = server.recv(None, Duration::from_millis(100));
            nonce = server.nonce().or(nonce);
            match r {
                Ok(r) => {
                    idle_ms = 0;
                    received.push(r);
                    if r.meta.answer {
                        let meta = Meta {
                            answer: false,
                            report_ns: r.overhead_ns as u32,
                        };
                        if server.send(0, r.bytes, meta).is_err() {
                            break;
                        }
                    }
                }
                Err(TransportError::Timeout(_)) => idle_ms += 100,
                Err(TransportError::PeerGone(_)) => break,
                Err(e) => panic!("server: {e}"),
            }
        }
        Echoed {
            counters: server.counters(),
            ignored: server.ignored(),
            sessions: server.sessions_started(),
            nonce,
            received,
        }
    })
}

/// Send `bytes` asking for an answer; the answer.
pub fn ping<P: Phy>(c: &mut Endpoint<P>, bytes: usize) -> Received {
    c.send(0, bytes, ASK).unwrap();
    let r = c.recv(Some(0), LONG).unwrap();
    assert_eq!(r.bytes, bytes);
    assert_eq!(r.peer, 0);
    assert!(!r.meta.answer);
    r
}

/// A second client's Hello takes the session over from the first: after
/// a 10 B ping from `a = connect()` and a 20 B ping from `b = connect()`,
/// `a`'s request is ignored and times out, `a`'s Bye ends nothing, `b`
/// pings 30 B and its Bye ends the server. Returns what the server saw
/// (two sessions, the three messages), for the device's own counts.
pub fn check_takeover<P: Phy>(
    connect: impl Fn() -> Endpoint<P>,
    server: JoinHandle<Echoed>,
) -> Echoed {
    let mut a = connect();
    ping(&mut a, 10);
    let mut b = connect();
    ping(&mut b, 20);
    a.send(0, 10, ASK).unwrap();
    let e = a.recv(Some(0), Duration::from_millis(200)).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(_)), "{e}");
    drop(a);
    ping(&mut b, 30);
    drop(b);
    let s = server.join().unwrap();
    assert_eq!(s.sessions, 2);
    assert_eq!(
        s.received.iter().map(|r| r.bytes).collect::<Vec<_>>(),
        [10, 20, 30]
    );
    s
}

/// Three pings of each size, each with a receive overhead and the server's
/// report of its own; the client's counters add up and it ignored nothing.
/// Returns (messages, bytes) each way.
pub fn ping_sizes<P: Phy>(c: &mut Endpoint<P>, sizes: &[usize]) -> (u64, u64) {
    let mut total = 0u64;
    for &s in sizes {
        for _ in 0..3 {
            let r = ping(c, s);
            assert!(r.overhead_ns > 0.0 && r.overhead_ns.is_finite());
            assert!(r.meta.report_ns > 0, "server reports its o_r");
            total += s as u64;
        }
    }
    let n = 3 * sizes.len() as u64;
    assert_eq!(
        c.counters(),
        Counters {
            sent_bytes: total,
            sent_messages: n,
            recv_bytes: total,
            recv_messages: n
        }
    );
    assert_eq!(c.ignored(), IgnoredFrames::default());
    (n, total)
}

/// The server of [`ping_sizes`] saw one session, every message with its
/// metadata, and ignored nothing.
pub fn check_echoed(s: &Echoed, (n, total): (u64, u64)) {
    assert_eq!(s.sessions, 1);
    assert_eq!(s.counters.recv_messages, n);
    assert_eq!(s.counters.sent_bytes, total);
    assert!(s.received.iter().all(|r| r.meta == ASK));
    assert_eq!(s.ignored, IgnoredFrames::default());
}

/// Over a relay that loses the client's second Data frame (the middle of
/// its first 4000-byte request) and the server's first (of its first
/// answer), at an MTU of 1500 bytes (3 frames a message): the first is never
/// answered, the answer to the second is incomplete, the third round trip
/// works; each wait for an answer that cannot come ends at its deadline.
pub fn lose_one_frame_each_way<P: Phy>(c: &mut Endpoint<P>) {
    let short = Duration::from_millis(300);
    // 1: 3 frames sent, 2 arrive: no answer.
    c.send(0, 4000, ASK).unwrap();
    let e = c.recv(Some(0), short).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(d) if d == short), "{e}");
    // 2: the request arrives (the server drops the incomplete #1); its
    // answer loses a frame.
    c.send(0, 4000, ASK).unwrap();
    let e = c.recv(Some(0), short).unwrap_err();
    assert!(matches!(e, TransportError::Timeout(_)), "{e}");
    // 3: everything arrives; the incomplete answer #2 is dropped.
    let r = ping(c, 4000);
    assert!(r.overhead_ns > 0.0);
    assert_eq!(c.ignored().dropped_incomplete, 1);
    assert_eq!(c.counters().recv_messages, 1);
}

/// The server of [`lose_one_frame_each_way`], and the relay's count of the
/// Data frames it saw each way (3 requests and 2 answers of 3 frames).
pub fn check_one_frame_lost_each_way(s: &Echoed, relayed: (u64, u64)) {
    assert_eq!(relayed, (9, 6));
    assert_eq!(s.ignored.dropped_incomplete, 1);
    assert_eq!(s.counters.recv_messages, 2);
    assert_eq!(s.counters.sent_messages, 2);
}

/// The header of a one-fragment message of `bytes` that asks for an answer.
pub fn data_header(nonce: u64, seq: u32, bytes: usize) -> Header {
    let meta = Meta {
        answer: true,
        report_ns: 0,
    };
    Header::fragment(nonce, seq, meta, bytes, bytes.max(1), 0)
}

/// The server of the stray-frame tests answered the two real messages and
/// ignored the five strays: two malformed, one with another session's
/// nonce, one from a stranger, one of an old message.
pub fn check_strays_ignored(s: &Echoed) {
    assert_eq!(s.received.len(), 2);
    let expected = IgnoredFrames {
        malformed: 2,
        wrong_nonce: 1,
        stranger: 1,
        stale: 1,
        ..IgnoredFrames::default()
    };
    assert_eq!(s.ignored, expected);
}

/// A server without a session refuses what it cannot do, each with its
/// typed error, and stops waiting for a client at the deadline.
pub fn check_refusals<P: Phy>(server: &mut Endpoint<P>) {
    let max = server.caps().max_msg_bytes;
    let e = |r: Result<(), TransportError>| r.unwrap_err();
    assert!(matches!(
        e(server.send(0, 1, ASK)),
        TransportError::NoPeer(0)
    ));
    assert!(matches!(
        e(server.recv(Some(1), Duration::ZERO).map(drop)),
        TransportError::NoPeer(1)
    ));
    assert!(matches!(
        e(server.send(0, max + 1, ASK)),
        TransportError::TooLarge { bytes, max: m } if bytes == max + 1 && m == max
    ));
    assert!(matches!(
        e(server.accept(Duration::from_millis(20)).map(drop)),
        TransportError::Timeout(_)
    ));
}

/// One direction of a lossy relay: counts the Data frames it sees and
/// loses the n-th (1-based), if asked.
pub struct Loss {
    lose: Option<u64>,
    pub data_frames: u64,
}

impl Loss {
    pub fn nth(lose: Option<u64>) -> Loss {
        Loss {
            lose,
            data_frames: 0,
        }
    }

    /// Whether the frame starting at `frame` (its header) goes through.
    pub fn passes(&mut self, frame: &[u8]) -> bool {
        use netgauged::transport::dgram::wire::Kind;
        if !matches!(Header::decode(frame), Ok(h) if h.kind == Kind::Data) {
            return true;
        }
        self.data_frames += 1;
        Some(self.data_frames) != self.lose
    }
}
