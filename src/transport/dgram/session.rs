//! The session layer: which frames belong to the session, and who may open
//! one.
//!
//! A client opens a session with a Hello carrying a random nonce (or the
//! nonce the control plane agreed on) and waits for the HelloAck that
//! echoes it, retrying. A server adopts the session of the latest Hello it
//! admits — a new Hello takes over — and acknowledges every Hello (a
//! retried one only again). Every later frame carries the nonce. A frame
//! from another address than the session peer is a stranger's; one from the
//! peer with another nonce belongs to another session; both are ignored
//! and counted. Bye ends the session.
//!
//! [`classify`] is that decision for one received frame, a pure function of
//! the role, the session and the gate; the endpoint acts on its verdict.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};

use super::phy::{Route, RxFrame};
use super::wire::{Header, Kind};

/// Which end of a session this endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Opens the session (the prober).
    Client,
    /// Adopts sessions (the responder).
    Server,
}

/// The current session.
#[derive(Clone, Copy, Debug)]
pub struct Session<A, D> {
    pub nonce: u64,
    pub peer: A,
    pub route: Route<D>,
}

/// Decides whether a Hello may open a session on a server.
///
/// The control plane authenticates a peer before it lets it probe; the gate
/// is how that decision reaches the responder. It sees the Hello's nonce
/// and its source address, so a gate can bind the session to the address
/// the control plane authenticated as well as to the nonce it agreed.
pub trait HelloGate<A>: Send + Sync {
    fn admits(&self, nonce: u64, src: &A) -> bool;
}

/// The nonce the control plane accepted (0: none): only a Hello carrying it
/// opens a session, from any source.
impl<A> HelloGate<A> for AtomicU64 {
    fn admits(&self, nonce: u64, _src: &A) -> bool {
        let allowed = self.load(Ordering::Acquire);
        allowed != 0 && allowed == nonce
    }
}

/// Who may open the gated session besides knowing its nonce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateSource {
    /// A session whose data does not pass the datagram responders (verbs
    /// queue pairs, bound to the endpoints exchanged on the authenticated
    /// connection): its nonce is open, and no datagram Hello is admitted
    /// with it, from anywhere (the nonce travels in clear).
    Elsewhere,
    /// Datagrams from this IP address only (UDP: the address the control
    /// connection was authenticated from; the port may differ).
    Ip(IpAddr),
    /// Frames from this MAC only (raw Ethernet: the MAC the driver named
    /// inside its authenticated request).
    Mac([u8; 6]),
}

/// The data plane's admission, as the control plane decided it: the nonce
/// of the one session it accepted *and* the source it authenticated. The
/// nonce travels in clear in every frame, so a nonce alone admits whoever
/// sniffs it; bound to the source, a stranger needs the authenticated
/// peer's address (UDP) or MAC (raw) as well. Lock-free: the control plane
/// writes it, the responder reads it on each Hello (never per message).
#[derive(Debug, Default)]
pub struct SessionGate {
    /// The admitted nonce; 0: none. Written last on open, first on close.
    nonce: AtomicU64,
    /// 0: no datagram source; 1: an IP address (`ip`); 2: a MAC (`mac`).
    what: AtomicU64,
    /// The IP address as IPv6 (IPv4 mapped), high and low 64 bits.
    ip: [AtomicU64; 2],
    mac: AtomicU64,
}

impl SessionGate {
    pub fn new() -> SessionGate {
        SessionGate::default()
    }

    /// Admit session `nonce` (not 0) from `source` only.
    pub fn open(&self, nonce: u64, source: GateSource) {
        // Closed while the source changes: a Hello checked meanwhile sees 0.
        self.nonce.store(0, Ordering::Release);
        let (what, ip, mac) = match source {
            GateSource::Elsewhere => (0, 0u128, 0),
            GateSource::Ip(a) => (1, ipv6_bits(a), 0),
            GateSource::Mac(m) => (2, 0, mac_bits(m)),
        };
        self.what.store(what, Ordering::Relaxed);
        self.ip[0].store((ip >> 64) as u64, Ordering::Relaxed);
        self.ip[1].store(ip as u64, Ordering::Relaxed);
        self.mac.store(mac, Ordering::Relaxed);
        self.nonce.store(nonce, Ordering::Release);
    }

    /// Admit nothing.
    pub fn close(&self) {
        self.nonce.store(0, Ordering::Release);
    }

    /// The admitted nonce (0: none).
    pub fn nonce(&self) -> u64 {
        self.nonce.load(Ordering::Acquire)
    }

    /// The nonce word itself (a responder's policy watches it).
    pub fn nonce_word(&self) -> &AtomicU64 {
        &self.nonce
    }

    /// Whether a Hello with `nonce` from `src` opens the session: the
    /// nonce matches, and so does the source, read between two loads of
    /// the nonce that agree (a gate re-opened meanwhile admits nothing).
    fn admits_with(&self, nonce: u64, src: impl FnOnce(u64, u128, u64) -> bool) -> bool {
        let n1 = self.nonce.load(Ordering::Acquire);
        if n1 == 0 || n1 != nonce {
            return false;
        }
        let what = self.what.load(Ordering::Relaxed);
        let ip = (u128::from(self.ip[0].load(Ordering::Relaxed)) << 64)
            | u128::from(self.ip[1].load(Ordering::Relaxed));
        let mac = self.mac.load(Ordering::Relaxed);
        let ok = src(what, ip, mac);
        std::sync::atomic::fence(Ordering::Acquire);
        ok && self.nonce.load(Ordering::Relaxed) == n1
    }
}

fn ipv6_bits(a: IpAddr) -> u128 {
    let v6 = match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    u128::from(v6)
}

/// A MAC as a word with a marker bit, so no MAC reads as "none".
fn mac_bits(m: [u8; 6]) -> u64 {
    (1u64 << 48) | m.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// UDP: the nonce, and the source IP when the gate names one.
impl HelloGate<SocketAddr> for SessionGate {
    fn admits(&self, nonce: u64, src: &SocketAddr) -> bool {
        let from = ipv6_bits(src.ip());
        self.admits_with(nonce, |what, ip, _| match what {
            // Both sides IPv6, IPv4 as mapped: a dual-stack socket's
            // ::ffff:a.b.c.d and a.b.c.d compare equal.
            1 => ip == from,
            _ => false,
        })
    }
}

/// Raw Ethernet: the nonce, and the source MAC when the gate names one.
impl HelloGate<[u8; 6]> for SessionGate {
    fn admits(&self, nonce: u64, src: &[u8; 6]) -> bool {
        let from = mac_bits(*src);
        self.admits_with(nonce, |what, _, mac| match what {
            2 => mac == from,
            _ => false,
        })
    }
}

/// A session nonce: `given`, or a random one; never 0 (0 means "none").
pub fn fresh_nonce(given: Option<u64>) -> u64 {
    match given.unwrap_or_else(rand::random::<u64>) {
        0 => 1,
        n => n,
    }
}

/// Why a frame was ignored (a field of
/// [`IgnoredFrames`](super::IgnoredFrames)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Did not decode, wrong length, or inconsistent with its message.
    Malformed,
    /// From the session peer, with another session's nonce; or a Hello the
    /// gate did not admit.
    WrongNonce,
    /// Not from the session peer, or no session.
    Stranger,
    /// A valid frame of a kind this role does not expect here.
    Unexpected,
}

/// What a received frame is to this endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<A> {
    Ignore(Reason),
    /// Server: an admitted Hello from `src`.
    Hello {
        src: A,
        nonce: u64,
    },
    /// The session's HelloAck.
    HelloAck,
    /// A data fragment of the session.
    Data(Header),
    /// The session peer said Bye.
    Bye,
}

/// Classify one received frame for an endpoint in `role` whose session (if
/// any) is with `session.0` under nonce `session.1`.
pub fn classify<A: Copy + Eq>(
    role: Role,
    session: Option<(A, u64)>,
    gate: Option<&dyn HelloGate<A>>,
    f: &RxFrame<A>,
) -> Verdict<A> {
    let Some(h) = f.header else {
        return Verdict::Ignore(Reason::Malformed);
    };
    if role == Role::Server && h.kind == Kind::Hello {
        let Some(src) = f.src else {
            return Verdict::Ignore(Reason::Malformed);
        };
        if gate.is_some_and(|g| !g.admits(h.nonce, &src)) {
            return Verdict::Ignore(Reason::WrongNonce);
        }
        return Verdict::Hello {
            src,
            nonce: h.nonce,
        };
    }
    let Some((peer, nonce)) = session else {
        return Verdict::Ignore(Reason::Stranger);
    };
    if f.src != Some(peer) {
        return Verdict::Ignore(Reason::Stranger);
    }
    if h.nonce != nonce {
        return Verdict::Ignore(Reason::WrongNonce);
    }
    match (h.kind, role) {
        (Kind::Data, _) => Verdict::Data(h),
        (Kind::Bye, _) => Verdict::Bye,
        (Kind::HelloAck, Role::Client) => Verdict::HelloAck,
        (Kind::Hello, _) | (Kind::HelloAck, Role::Server) => Verdict::Ignore(Reason::Unexpected),
    }
}
