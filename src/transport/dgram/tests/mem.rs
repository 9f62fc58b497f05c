//! The tests' in-memory network: a device ([`MemPhy`]) whose frames wait
//! in a [`Port`] the test reads and fills, frames written byte by byte,
//! and a client and server with an open session ([`pair`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::clock::{Clock, VirtualClock};
use crate::transport::dgram::idle::IdlePolicy;
use crate::transport::dgram::phy::{Frame, Phy, Route, RxFrame};
use crate::transport::dgram::wire::{self, HEADER_LEN};
use crate::transport::dgram::{Endpoint, EndpointConfig};
use crate::transport::{Meta, TransportError};

/// A node of the in-memory network.
pub(super) type Addr = u8;
/// What a poll that finds nothing costs, and what receiving one frame costs
/// (its share of the receive overhead), in virtual nanoseconds.
pub(super) const EMPTY_POLL_NS: f64 = 1000.0;
pub(super) const RX_COST_NS: f64 = 250.0;
/// Payload bytes per frame on the in-memory link.
pub(super) const FRAG: usize = 100;
/// The client of [`pair`].
pub(super) const CLIENT: Addr = 2;
/// The server of [`pair`], and the node every client connects to.
pub(super) const SERVER: Addr = 1;
/// The session nonce of the tests (every byte different, to see the order).
pub(super) const NONCE: u64 = 0x0123_4567_89ab_cdef;

/// One endpoint's side of the network, shared with the test.
#[derive(Default)]
pub(super) struct Port {
    /// Frames waiting to be received, with their source.
    pub(super) rx: VecDeque<(Addr, Vec<u8>)>,
    /// Frames sent, with their destination.
    pub(super) tx: Vec<(Addr, Vec<u8>)>,
    /// Sends refused (a full queue) before the next one goes through.
    pub(super) busy: u32,
    /// Polls that report the peer gone (an ICMP port unreachable).
    pub(super) refuse: u32,
    /// Sleeps in `wait_readable`: (virtual ns at the start, ns asked for).
    pub(super) sleeps: Vec<(f64, f64)>,
}

pub(super) struct MemPhy {
    port: Rc<RefCell<Port>>,
    clock: VirtualClock,
}

pub(super) fn ps(ns: f64) -> u64 {
    (ns * VirtualClock::PS_PER_NS) as u64
}

impl Phy for MemPhy {
    type Addr = Addr;
    type Dest = Addr;
    const NAME: &'static str = "mem";

    fn route(&mut self, peer: &Addr) -> Result<Route<Addr>, TransportError> {
        Ok(Route {
            dest: *peer,
            mtu_bytes: FRAG + HEADER_LEN,
            max_frag_bytes: FRAG,
        })
    }

    fn send(&mut self, dest: &Addr, frame: Frame<'_>) -> Result<bool, TransportError> {
        let mut p = self.port.borrow_mut();
        if p.busy > 0 {
            p.busy -= 1;
            self.clock.spin(ps(1000.0));
            return Ok(false);
        }
        p.tx.push((*dest, [&frame.header[..], frame.payload].concat()));
        Ok(true)
    }

    fn poll<C: Clock>(&mut self, clock: &C) -> Result<Option<RxFrame<Addr>>, TransportError> {
        let mut p = self.port.borrow_mut();
        if p.refuse > 0 {
            p.refuse -= 1;
            return Err(TransportError::PeerGone("refused".into()));
        }
        let t0 = clock.now();
        let Some((src, bytes)) = p.rx.pop_front() else {
            self.clock.spin(ps(EMPTY_POLL_NS));
            return Ok(None);
        };
        self.clock.spin(ps(RX_COST_NS));
        Ok(Some(RxFrame {
            src: Some(src),
            header: wire::decode_exact(&bytes, 0),
            cost_ticks: clock.now() - t0,
        }))
    }

    fn wait_readable(&mut self, timeout: Duration) {
        let mut p = self.port.borrow_mut();
        p.sleeps
            .push((self.clock.now_ns(), timeout.as_nanos() as f64));
        if p.rx.is_empty() {
            self.clock.spin(ps(timeout.as_nanos() as f64));
        }
    }

    fn fmt_addr(addr: &Addr, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node{addr}")
    }
}

pub(super) type Ep = Endpoint<MemPhy, VirtualClock>;

pub(super) fn cfg() -> EndpointConfig {
    EndpointConfig {
        max_msg_bytes: 4096,
        handshake_timeout: Duration::from_millis(1),
        handshake_attempts: 3,
        send_timeout: Duration::from_millis(1),
        idle: IdlePolicy::default(),
    }
}

pub(super) fn device(clock: &VirtualClock) -> (MemPhy, Rc<RefCell<Port>>) {
    let port = Rc::new(RefCell::new(Port::default()));
    let phy = MemPhy {
        port: port.clone(),
        clock: clock.clone(),
    };
    (phy, port)
}

/// A frame written byte by byte, as the wire format says (not through
/// `Header::encode`), followed by `payload`.
#[allow(clippy::too_many_arguments)]
pub(super) fn by_hand(
    kind: u8,
    flags: u8,
    nonce: u64,
    seq: u32,
    offset: u32,
    msg_len: u32,
    report_ns: u32,
    index: u32,
    count: u32,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = vec![0x4E, 0x47, 1, kind, flags, 0];
    f.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    f.extend_from_slice(&nonce.to_le_bytes());
    for v in [seq, offset, msg_len, report_ns, index, count] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(payload);
    f
}

pub(super) fn control(kind: u8, nonce: u64) -> Vec<u8> {
    by_hand(kind, 0, nonce, 0, 0, 0, 0, 0, 0, &[])
}

/// The sender's payload: byte i of a message is `i as u8`.
pub(super) fn pattern(range: std::ops::Range<usize>) -> Vec<u8> {
    range.map(|i| i as u8).collect()
}

/// The frames `port` sent, taken out of it.
pub(super) fn sent(port: &Rc<RefCell<Port>>) -> Vec<(Addr, Vec<u8>)> {
    std::mem::take(&mut port.borrow_mut().tx)
}

/// Move what `from` (node `src`) sent to `to`, through `link`, which may
/// lose, reorder, duplicate or add frames.
pub(super) fn pump(
    from: &Rc<RefCell<Port>>,
    src: Addr,
    to: &Rc<RefCell<Port>>,
    link: impl FnOnce(Vec<Vec<u8>>) -> Vec<Vec<u8>>,
) {
    let frames = sent(from).into_iter().map(|(_, f)| f).collect();
    to.borrow_mut()
        .rx
        .extend(link(frames).into_iter().map(|f| (src, f)));
}

pub(super) fn as_is(v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v
}

/// A client and a server with an open session under [`NONCE`].
pub(super) struct Pair {
    pub(super) clock: VirtualClock,
    pub(super) client: Ep,
    pub(super) cport: Rc<RefCell<Port>>,
    pub(super) server: Ep,
    pub(super) sport: Rc<RefCell<Port>>,
}

pub(super) fn pair() -> Pair {
    let clock = VirtualClock::new();
    let (sphy, sport) = device(&clock);
    let mut server = Ep::server(sphy, clock.clone(), cfg()).unwrap();
    let (cphy, cport) = device(&clock);
    cport.borrow_mut().rx.push_back((SERVER, control(2, NONCE)));
    let client = Ep::client(cphy, clock.clone(), cfg(), SERVER, Some(NONCE)).unwrap();
    pump(&cport, CLIENT, &sport, as_is);
    assert_eq!(server.accept(Duration::from_millis(1)).unwrap(), CLIENT);
    sent(&sport); // the HelloAck the client no longer waits for
    Pair {
        clock,
        client,
        cport,
        server,
        sport,
    }
}

pub(super) const ASK: Meta = Meta {
    answer: true,
    report_ns: 7,
};
