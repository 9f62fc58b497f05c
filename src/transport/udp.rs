//! Unprivileged UDP probe transport with the [`frame`](super::frame) header.
//!
//! A client [`UdpTransport::connect`]s to one server and opens a session with
//! a Hello carrying a random nonce; the server ([`UdpTransport::listen`])
//! adopts the session of the latest Hello and answers HelloAck. Every later
//! frame carries the nonce; frames with another nonce, from a stranger, or
//! that do not decode are ignored and counted ([`UdpTransport::ignored`]).
//!
//! Messages are cut into fragments that fit one datagram of the path MTU
//! (`IP_MTU` of the connected socket; per peer on the server) and reassembled
//! by `(seq, fragment)`. A fragment of a newer message drops an incomplete
//! older one, older messages and duplicates are discarded, so a lost datagram
//! costs the caller a [`TransportError::Timeout`] and nothing more.
//!
//! The socket is non-blocking; `recv` busy-polls with `MSG_DONTWAIT`, timing
//! every receive call with the transport's clock. The sum of the durations of
//! the successful calls that delivered a message's datagrams is its receive
//! overhead (`Received::overhead_ns`). The same timestamps check the
//! deadline, so the check costs nothing extra.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use super::frame::{self, Header, Kind, HEADER_LEN};
use super::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};
use crate::clock::{Clock, HostClock};

/// Smallest fragment payload accepted from a peer; bounds the reassembly
/// bitmap (`max_msg_bytes / MIN_FRAG_BYTES` bits).
pub const MIN_FRAG_BYTES: usize = 64;
/// MTU assumed when the kernel cannot tell.
pub const FALLBACK_MTU_BYTES: usize = 1500;
/// Receive buffer: larger than any UDP datagram.
const RX_BUF_BYTES: usize = 65_536;

/// Settings of a [`UdpTransport`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UdpOptions {
    /// Largest message (and size of the preallocated payload buffer).
    pub max_msg_bytes: usize,
    /// Use this MTU instead of the path MTU the kernel reports.
    pub mtu_bytes: Option<usize>,
    /// How long the client waits for a HelloAck per attempt.
    pub handshake_timeout: Duration,
    /// How many Hellos the client sends before giving up.
    pub handshake_attempts: u32,
    /// How long `send` may spin on a full socket send buffer.
    pub send_timeout: Duration,
    /// SO_RCVBUF / SO_SNDBUF to ask for (SO_*BUFFORCE when privileged), so a
    /// whole burst of fragments fits while the receiver is not scheduled.
    pub socket_buffer_bytes: usize,
    /// Clock for deadlines and receive overhead.
    pub clock: HostClock,
    /// Client: use this session nonce (agreed on the control plane) instead
    /// of a random one.
    pub session_nonce: Option<u64>,
    /// `recv` busy-polls for this long after the last datagram, then sleeps
    /// in poll(2) until one arrives: a probe in progress never sleeps (its
    /// gaps are far shorter), an idle responder costs no CPU.
    pub spin_window: Duration,
}

impl Default for UdpOptions {
    fn default() -> Self {
        Self {
            max_msg_bytes: 4 << 20,
            mtu_bytes: None,
            handshake_timeout: Duration::from_millis(200),
            handshake_attempts: 5,
            send_timeout: Duration::from_secs(1),
            socket_buffer_bytes: 8 << 20,
            clock: HostClock::default(),
            session_nonce: None,
            spin_window: Duration::from_millis(20),
        }
    }
}

/// Frames this endpoint received and did not use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IgnoredFrames {
    /// Did not decode, wrong datagram length, or inconsistent with the other
    /// fragments of their message.
    pub malformed: u64,
    /// From the session peer but with another session's nonce.
    pub wrong_nonce: u64,
    /// From an address that is not the session peer (or before any session).
    pub stranger: u64,
    /// Fragments of a message older than the newest one seen.
    pub stale: u64,
    /// Fragments already received.
    pub duplicate: u64,
    /// Messages larger than `max_msg_bytes` or in too many fragments.
    pub oversize: u64,
    /// Valid frames of a kind this role does not expect (e.g. a Hello at the
    /// client, a repeated HelloAck).
    pub unexpected: u64,
    /// Incomplete messages dropped because a newer one started.
    pub dropped_incomplete: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

/// A socket address in the form `sendmsg` wants.
#[derive(Clone, Copy)]
struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    fn new(addr: &SocketAddr) -> RawAddr {
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match addr {
            SocketAddr::V4(a) => {
                let sin = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                // SAFETY: sockaddr_storage is larger than and aligned for
                // sockaddr_in; we write one value at its start.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(a) => {
                let sin6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                // SAFETY: as above, for sockaddr_in6.
                unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        RawAddr {
            storage,
            len: len as libc::socklen_t,
        }
    }

    fn socket_addr(&self) -> Option<SocketAddr> {
        match self.storage.ss_family as libc::c_int {
            libc::AF_INET if self.len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
                // SAFETY: the family says the storage holds a sockaddr_in, the
                // kernel wrote at least its size, and storage is aligned for it.
                let sin = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in) };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(sin.sin_port),
                )))
            }
            libc::AF_INET6 if self.len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above, for sockaddr_in6.
                let sin6 = unsafe { &*(&self.storage as *const _ as *const libc::sockaddr_in6) };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

/// The current session.
#[derive(Clone, Copy)]
struct Session {
    nonce: u64,
    peer: SocketAddr,
    /// Destination for `sendmsg` on the (unconnected) server socket.
    peer_raw: RawAddr,
    mtu_bytes: usize,
    max_frag_bytes: usize,
}

/// Outcome of offering one data fragment to the reassembly (shared with
/// `raw_eth`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Offer {
    Partial,
    Complete {
        bytes: usize,
        meta: Meta,
        overhead_ticks: u64,
    },
    Stale,
    Duplicate,
    Inconsistent,
    Oversize,
}

/// Reassembly of one message at a time, by (seq, fragment index) (shared
/// with `raw_eth`).
pub(crate) struct Reassembly {
    /// A message has been seen in this session; `seq` is the newest.
    active: bool,
    seq: u32,
    complete: bool,
    msg_len: u32,
    frag_count: u32,
    got_bytes: u64,
    got_frags: u32,
    overhead_ticks: u64,
    meta: Meta,
    /// One bit per fragment; preallocated for the most fragments accepted.
    bitmap: Vec<u64>,
    max_msg_bytes: usize,
    pub(crate) dropped_incomplete: u64,
}

/// `a` is newer than `b` in wrapping sequence space.
fn seq_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Reassembly {
    pub(crate) fn new(max_msg_bytes: usize) -> Self {
        let max_frags = max_msg_bytes / MIN_FRAG_BYTES + 1;
        Reassembly {
            active: false,
            seq: 0,
            complete: false,
            msg_len: 0,
            frag_count: 0,
            got_bytes: 0,
            got_frags: 0,
            overhead_ticks: 0,
            meta: Meta::default(),
            bitmap: vec![0; max_frags.div_ceil(64)],
            max_msg_bytes,
            dropped_incomplete: 0,
        }
    }

    /// Forget the session's messages (a new session starts).
    pub(crate) fn reset(&mut self) {
        self.active = false;
        self.complete = false;
    }

    fn max_frags(&self) -> usize {
        self.bitmap.len() * 64
    }

    /// Offer a decoded Data fragment whose datagram took `cost_ticks` to
    /// receive.
    pub(crate) fn offer(&mut self, h: &Header, cost_ticks: u64) -> Offer {
        if h.msg_len as usize > self.max_msg_bytes || h.frag_count as usize > self.max_frags() {
            return Offer::Oversize;
        }
        if !self.active || seq_newer(h.seq, self.seq) {
            if self.active && !self.complete && self.got_frags > 0 {
                self.dropped_incomplete += 1;
            }
            self.active = true;
            self.seq = h.seq;
            self.complete = false;
            self.msg_len = h.msg_len;
            self.frag_count = h.frag_count;
            self.got_bytes = 0;
            self.got_frags = 0;
            self.overhead_ticks = 0;
            self.meta = Meta {
                answer: h.answer,
                report_ns: h.report_ns,
            };
            let words = (h.frag_count as usize).div_ceil(64);
            self.bitmap[..words].fill(0);
        } else if h.seq != self.seq {
            return Offer::Stale;
        } else if self.complete {
            return Offer::Duplicate;
        } else if h.msg_len != self.msg_len || h.frag_count != self.frag_count {
            return Offer::Inconsistent;
        }
        let (word, bit) = (h.frag_index as usize / 64, h.frag_index % 64);
        if self.bitmap[word] & (1 << bit) != 0 {
            return Offer::Duplicate;
        }
        self.bitmap[word] |= 1 << bit;
        self.got_frags += 1;
        self.got_bytes += h.frag_len as u64;
        self.overhead_ticks += cost_ticks;
        if self.got_frags < self.frag_count {
            return Offer::Partial;
        }
        self.complete = true;
        if self.got_bytes != self.msg_len as u64 {
            // Overlapping fragments: not a message this sender could make.
            return Offer::Inconsistent;
        }
        Offer::Complete {
            bytes: self.msg_len as usize,
            meta: self.meta,
            overhead_ticks: self.overhead_ticks,
        }
    }
}

/// UDP transport, client or server; see the module documentation.
pub struct UdpTransport {
    sock: UdpSocket,
    fd: RawFd,
    role: Role,
    opts: UdpOptions,
    clock: HostClock,
    session: Option<Session>,
    /// Set when the session peer said Bye or vanished; cleared by a new
    /// session (server).
    gone: bool,
    sessions_started: u64,
    send_seq: u32,
    tx_payload: Vec<u8>,
    rx_buf: Vec<u8>,
    reasm: Reassembly,
    counters: Counters,
    ignored: IgnoredFrames,
    /// Server: when set, only a Hello carrying the nonce it holds opens a
    /// session (0: none is authorized). The daemon's control plane stores the
    /// nonce of the probe session it accepted.
    hello_gate: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Clock reading of the last datagram sent or received (see
    /// `spin_window`): a client that just sent is busy-waiting for its
    /// answer; a responder nobody talked to for a while sleeps.
    last_rx_ticks: u64,
    spin_ticks: u64,
    /// After this long without a datagram, polls yield the CPU in between.
    yield_ticks: u64,
}

/// One datagram as it came off the socket.
struct Datagram {
    len: usize,
    src: RawAddr,
    cost_ticks: u64,
}

impl UdpTransport {
    /// Client: open a session with the server at `peer`.
    ///
    /// Sends up to `handshake_attempts` Hellos, each waiting
    /// `handshake_timeout` for the HelloAck. A refused port on every attempt
    /// is [`TransportError::PeerGone`], silence is [`TransportError::Timeout`].
    pub fn connect(peer: SocketAddr, opts: UdpOptions) -> Result<Self, TransportError> {
        let bind: SocketAddr = match peer {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(peer)?;
        let mtu_bytes = opts
            .mtu_bytes
            .or_else(|| path_mtu(sock.as_raw_fd(), peer.is_ipv6()))
            .unwrap_or(FALLBACK_MTU_BYTES);
        let mut nonce = opts.session_nonce.unwrap_or_else(rand::random::<u64>);
        if nonce == 0 {
            nonce = 1;
        }
        let session = Session {
            nonce,
            peer,
            peer_raw: RawAddr::new(&peer),
            mtu_bytes,
            max_frag_bytes: max_frag_bytes(mtu_bytes, peer.is_ipv6())?,
        };
        let mut t = Self::with_socket(sock, Role::Client, opts)?;
        t.session = Some(session);
        t.handshake()?;
        Ok(t)
    }

    /// Server: bind `addr` and wait (inside `recv` or [`Self::accept`]) for
    /// a client's Hello.
    pub fn listen(addr: SocketAddr, opts: UdpOptions) -> Result<Self, TransportError> {
        let sock = UdpSocket::bind(addr)?;
        Self::with_socket(sock, Role::Server, opts)
    }

    fn with_socket(sock: UdpSocket, role: Role, opts: UdpOptions) -> Result<Self, TransportError> {
        if opts.max_msg_bytes > u32::MAX as usize {
            return Err(TransportError::Protocol(format!(
                "max_msg_bytes {} does not fit the 32-bit length field",
                opts.max_msg_bytes
            )));
        }
        sock.set_nonblocking(true)?;
        set_buffer_sizes(&sock, opts.socket_buffer_bytes);
        let fd = sock.as_raw_fd();
        let tx_payload = (0..opts.max_msg_bytes).map(|i| i as u8).collect();
        Ok(UdpTransport {
            sock,
            fd,
            role,
            opts,
            clock: opts.clock,
            session: None,
            gone: false,
            sessions_started: 0,
            send_seq: 0,
            tx_payload,
            rx_buf: vec![0; RX_BUF_BYTES],
            reasm: Reassembly::new(opts.max_msg_bytes),
            counters: Counters::default(),
            ignored: IgnoredFrames::default(),
            hello_gate: None,
            last_rx_ticks: 0,
            spin_ticks: opts.clock.from_ns(opts.spin_window.as_nanos() as f64),
            yield_ticks: opts.clock.from_ns(50_000.0),
        })
    }

    /// Server: accept only Hellos whose nonce `gate` holds (see
    /// `hello_gate`); others are ignored and counted as `wrong_nonce`.
    pub fn gate_hellos(&mut self, gate: std::sync::Arc<std::sync::atomic::AtomicU64>) {
        self.hello_gate = Some(gate);
    }

    fn handshake(&mut self) -> Result<(), TransportError> {
        let Some(s) = self.session else {
            return Err(TransportError::NoPeer(0));
        };
        let hello = Header::control(Kind::Hello, s.nonce);
        let per_attempt = self
            .clock
            .from_ns(self.opts.handshake_timeout.as_nanos() as f64);
        let mut refused = false;
        for _ in 0..self.opts.handshake_attempts.max(1) {
            match send_frame(
                self.fd,
                None,
                &hello,
                &[],
                &self.clock,
                self.opts.send_timeout,
            ) {
                Ok(()) => {}
                Err(TransportError::PeerGone(_)) => refused = true,
                Err(e) => return Err(e),
            }
            let deadline = self.clock.now().saturating_add(per_attempt);
            loop {
                match self.recv_datagram() {
                    Ok(Some(d)) => match Header::decode(&self.rx_buf[..d.len]) {
                        Ok(h) if h.frame_len() == d.len => {
                            if h.kind == Kind::HelloAck && h.nonce == s.nonce {
                                return Ok(());
                            }
                            self.ignored.unexpected += 1;
                        }
                        _ => self.ignored.malformed += 1,
                    },
                    Ok(None) => std::hint::spin_loop(),
                    Err(TransportError::PeerGone(_)) => refused = true,
                    Err(e) => return Err(e),
                }
                if self.clock.now() >= deadline {
                    break;
                }
            }
        }
        let total = self.opts.handshake_timeout * self.opts.handshake_attempts.max(1);
        if refused {
            Err(TransportError::PeerGone(format!(
                "{}: connection refused (no server on that port)",
                s.peer
            )))
        } else {
            Err(TransportError::Timeout(total))
        }
    }

    /// Server: wait up to `timeout` for a client to open a session; returns
    /// its address. Returns at once if a session is already open.
    pub fn accept(&mut self, timeout: Duration) -> Result<SocketAddr, TransportError> {
        let deadline = self
            .clock
            .now()
            .saturating_add(self.clock.from_ns(timeout.as_nanos() as f64));
        loop {
            if let Some(s) = self.session {
                return Ok(s.peer);
            }
            match self.recv_datagram()? {
                Some(d) => {
                    // A Data frame cannot complete without a session, and a
                    // Bye only closes one; neither returns here.
                    let _ = self.handle_datagram(&d);
                }
                None => std::hint::spin_loop(),
            }
            if self.clock.now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
        }
    }

    /// One non-blocking receive, timed. `Ok(None)` when nothing is queued.
    #[inline]
    fn recv_datagram(&mut self) -> Result<Option<Datagram>, TransportError> {
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut src = RawAddr {
            storage: unsafe { std::mem::zeroed() },
            len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        };
        let t0 = self.clock.now();
        // SAFETY: rx_buf is a live, writable buffer of rx_buf.len() bytes;
        // src.storage/src.len describe a writable sockaddr_storage.
        let r = unsafe {
            libc::recvfrom(
                self.fd,
                self.rx_buf.as_mut_ptr() as *mut libc::c_void,
                self.rx_buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                &mut src.storage as *mut _ as *mut libc::sockaddr,
                &mut src.len,
            )
        };
        let t1 = self.clock.now();
        if r >= 0 {
            let len = r as usize;
            if len > self.rx_buf.len() {
                // Cannot happen for UDP (buffer > max datagram); never trust it.
                self.ignored.malformed += 1;
                return Ok(None);
            }
            return Ok(Some(Datagram {
                len,
                src,
                cost_ticks: t1.wrapping_sub(t0),
            }));
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            Some(libc::ECONNREFUSED) => {
                if self.role == Role::Client {
                    self.gone = true;
                    Err(TransportError::PeerGone(
                        "ICMP port unreachable: the peer's socket is closed".into(),
                    ))
                } else {
                    Ok(None)
                }
            }
            _ => Err(TransportError::Io(err)),
        }
    }

    /// Act on one datagram; `Ok(Some)` when it completed a message.
    fn handle_datagram(&mut self, d: &Datagram) -> Result<Option<Received>, TransportError> {
        let h = match Header::decode(&self.rx_buf[..d.len]) {
            Ok(h) if h.frame_len() == d.len => h,
            _ => {
                self.ignored.malformed += 1;
                return Ok(None);
            }
        };
        let src = d.src.socket_addr();
        if self.role == Role::Server && h.kind == Kind::Hello {
            if let Some(gate) = &self.hello_gate {
                let allowed = gate.load(std::sync::atomic::Ordering::Acquire);
                if allowed == 0 || allowed != h.nonce {
                    self.ignored.wrong_nonce += 1;
                    return Ok(None);
                }
            }
            if let Some(src) = src {
                self.adopt(src, &d.src, h.nonce)?;
            } else {
                self.ignored.malformed += 1;
            }
            return Ok(None);
        }
        let Some(s) = self.session else {
            self.ignored.stranger += 1;
            return Ok(None);
        };
        if src != Some(s.peer) {
            self.ignored.stranger += 1;
            return Ok(None);
        }
        if h.nonce != s.nonce {
            self.ignored.wrong_nonce += 1;
            return Ok(None);
        }
        match h.kind {
            Kind::Data => match self.reasm.offer(&h, d.cost_ticks) {
                Offer::Partial => Ok(None),
                Offer::Complete {
                    bytes,
                    meta,
                    overhead_ticks,
                } => {
                    self.counters.recv_bytes += bytes as u64;
                    self.counters.recv_messages += 1;
                    Ok(Some(Received {
                        peer: 0,
                        bytes,
                        meta,
                        overhead_ns: self.clock.to_ns(overhead_ticks),
                    }))
                }
                Offer::Stale => {
                    self.ignored.stale += 1;
                    Ok(None)
                }
                Offer::Duplicate => {
                    self.ignored.duplicate += 1;
                    Ok(None)
                }
                Offer::Inconsistent => {
                    self.ignored.malformed += 1;
                    Ok(None)
                }
                Offer::Oversize => {
                    self.ignored.oversize += 1;
                    Ok(None)
                }
            },
            Kind::Bye => {
                self.gone = true;
                if self.role == Role::Server {
                    self.session = None;
                    self.reasm.reset();
                }
                Err(TransportError::PeerGone(format!("{} said bye", s.peer)))
            }
            Kind::Hello | Kind::HelloAck => {
                self.ignored.unexpected += 1;
                Ok(None)
            }
        }
    }

    /// Server: a Hello from `peer`. The same session again (a retried
    /// Hello) is only re-acknowledged; anything else starts a new session.
    fn adopt(&mut self, peer: SocketAddr, raw: &RawAddr, nonce: u64) -> Result<(), TransportError> {
        let same = matches!(self.session, Some(s) if s.peer == peer && s.nonce == nonce);
        if !same {
            let mtu_bytes = self
                .opts
                .mtu_bytes
                .or_else(|| path_mtu_to(peer))
                .unwrap_or(FALLBACK_MTU_BYTES);
            self.session = Some(Session {
                nonce,
                peer,
                peer_raw: *raw,
                mtu_bytes,
                max_frag_bytes: max_frag_bytes(mtu_bytes, peer.is_ipv6())?,
            });
            self.reasm.reset();
            self.gone = false;
            self.sessions_started += 1;
            tracing::debug!("udp: session {nonce:#x} with {peer}, MTU {mtu_bytes}");
        }
        let ack = Header::control(Kind::HelloAck, nonce);
        // Best effort: a lost ack makes the client retry its Hello.
        match send_frame(
            self.fd,
            Some(raw),
            &ack,
            &[],
            &self.clock,
            self.opts.send_timeout,
        ) {
            Ok(()) | Err(TransportError::PeerGone(_)) | Err(TransportError::Timeout(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Frames received and not used, by reason.
    pub fn ignored(&self) -> IgnoredFrames {
        IgnoredFrames {
            dropped_incomplete: self.reasm.dropped_incomplete,
            ..self.ignored
        }
    }
    /// The session peer, if a session is open.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.session.map(|s| s.peer)
    }
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.sock.local_addr()?)
    }
    /// The current session's nonce.
    pub fn nonce(&self) -> Option<u64> {
        self.session.map(|s| s.nonce)
    }
    /// MTU used towards the session peer.
    pub fn mtu_bytes(&self) -> Option<usize> {
        self.session.map(|s| s.mtu_bytes)
    }
    /// Payload bytes per datagram towards the session peer.
    pub fn max_frag_bytes(&self) -> Option<usize> {
        self.session.map(|s| s.max_frag_bytes)
    }
    /// Sessions this server has adopted.
    pub fn sessions_started(&self) -> u64 {
        self.sessions_started
    }
}

impl Transport for UdpTransport {
    fn caps(&self) -> Caps {
        Caps {
            max_msg_bytes: self.opts.max_msg_bytes,
            one_sided: false,
            has_recv_overhead: true,
            peers: 1,
        }
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        if peer != 0 {
            return Err(TransportError::NoPeer(peer));
        }
        self.last_rx_ticks = self.clock.now();
        if bytes > self.opts.max_msg_bytes {
            return Err(TransportError::TooLarge {
                bytes,
                max: self.opts.max_msg_bytes,
            });
        }
        let Some(s) = self.session else {
            return Err(if self.gone {
                TransportError::PeerGone("the session peer has left".into())
            } else {
                TransportError::NoPeer(peer)
            });
        };
        if self.gone {
            return Err(TransportError::PeerGone("the session peer has left".into()));
        }
        self.send_seq = self.send_seq.wrapping_add(1);
        let count = frame::fragment_count(bytes, s.max_frag_bytes);
        let dest = match self.role {
            Role::Client => None,
            Role::Server => Some(&s.peer_raw),
        };
        for i in 0..count {
            let off = i * s.max_frag_bytes;
            let len = s.max_frag_bytes.min(bytes - off);
            let h = Header {
                kind: Kind::Data,
                answer: meta.answer,
                nonce: s.nonce,
                seq: self.send_seq,
                frag_offset: off as u32,
                msg_len: bytes as u32,
                report_ns: meta.report_ns,
                frag_index: i as u32,
                frag_count: count as u32,
                frag_len: len as u16,
            };
            let r = send_frame(
                self.fd,
                dest,
                &h,
                &self.tx_payload[off..off + len],
                &self.clock,
                self.opts.send_timeout,
            );
            if let Err(e) = r {
                if matches!(e, TransportError::PeerGone(_)) && self.role == Role::Client {
                    self.gone = true;
                }
                return Err(e);
            }
        }
        self.counters.sent_bytes += bytes as u64;
        self.counters.sent_messages += 1;
        Ok(())
    }

    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        if let Some(p) = from.filter(|&p| p != 0) {
            return Err(TransportError::NoPeer(p));
        }
        if self.gone && self.role == Role::Client {
            return Err(TransportError::PeerGone("the session peer has left".into()));
        }
        let start = self.clock.now();
        let deadline = start.saturating_add(self.clock.from_ns(timeout.as_nanos() as f64));
        if self.role == Role::Client {
            // A prober is never idle while it waits: it spins (then yields)
            // for a spin window from the start of every wait.
            self.last_rx_ticks = self.last_rx_ticks.max(start);
        }
        loop {
            match self.recv_datagram()? {
                Some(d) => {
                    self.last_rx_ticks = self.clock.now();
                    if let Some(r) = self.handle_datagram(&d)? {
                        return Ok(r);
                    }
                }
                None => {
                    let now = self.clock.now();
                    let quiet = now.saturating_sub(self.last_rx_ticks);
                    if quiet > self.spin_ticks && now < deadline {
                        // Idle: sleep until the socket is readable, at most
                        // 10 ms at a time (the deadline is checked below).
                        let left_ms = self.clock.to_ns(deadline - now) / 1e6;
                        wait_readable(self.fd, left_ms.clamp(0.0, 10.0).ceil() as i32);
                    } else if quiet > self.yield_ticks {
                        // Nothing for a while: let a peer that shares this
                        // core run (far above a small-message round trip).
                        // SAFETY: sched_yield has no preconditions.
                        unsafe { libc::sched_yield() };
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
            if self.clock.now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
        }
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

impl Drop for UdpTransport {
    fn drop(&mut self) {
        if let (Some(s), false) = (self.session, self.gone) {
            let bye = Header::control(Kind::Bye, s.nonce);
            let dest = (self.role == Role::Server).then_some(&s.peer_raw);
            let _ = send_frame(self.fd, dest, &bye, &[], &self.clock, Duration::ZERO);
        }
    }
}

/// Block in poll(2) until `fd` is readable or `timeout_ms` passed.
fn wait_readable(fd: RawFd, timeout_ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd for the duration of the call, and the
    // count 1 matches it; poll does not keep the pointer.
    unsafe {
        libc::poll(&mut pfd, 1, timeout_ms);
    }
}

/// Send one frame: header from the stack, payload straight from the caller's
/// buffer (two iovecs, no copy, no allocation). Spins on a full socket buffer
/// for at most `send_timeout`.
fn send_frame(
    fd: RawFd,
    dest: Option<&RawAddr>,
    h: &Header,
    payload: &[u8],
    clock: &HostClock,
    send_timeout: Duration,
) -> Result<(), TransportError> {
    let mut hdr = [0u8; HEADER_LEN];
    h.encode(&mut hdr)
        .map_err(|e| TransportError::Protocol(format!("cannot encode frame: {e}")))?;
    debug_assert_eq!(payload.len(), h.frag_len as usize);
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: HEADER_LEN,
        },
        libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        },
    ];
    // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = if payload.is_empty() { 1 } else { 2 };
    if let Some(d) = dest {
        msg.msg_name = &d.storage as *const _ as *mut libc::c_void;
        msg.msg_namelen = d.len;
    }
    let want = HEADER_LEN + payload.len();
    let mut deadline = None;
    loop {
        // SAFETY: msg points at iovecs and an address that live until the
        // call returns; the kernel only reads them.
        let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT) };
        if r >= 0 {
            if r as usize != want {
                return Err(TransportError::Protocol(format!(
                    "datagram truncated on send: {r} of {want} bytes"
                )));
            }
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                let now = clock.now();
                let end = *deadline.get_or_insert_with(|| {
                    now.saturating_add(clock.from_ns(send_timeout.as_nanos() as f64))
                });
                if now >= end {
                    return Err(TransportError::Timeout(send_timeout));
                }
                std::hint::spin_loop();
            }
            Some(libc::ECONNREFUSED) => {
                return Err(TransportError::PeerGone(
                    "ICMP port unreachable: the peer's socket is closed".into(),
                ))
            }
            _ => return Err(TransportError::Io(err)),
        }
    }
}

/// Largest payload per datagram for a path MTU.
fn max_frag_bytes(mtu_bytes: usize, ipv6: bool) -> Result<usize, TransportError> {
    let ip_hdr = if ipv6 { 40 } else { 20 };
    // Largest UDP payload: 65535 minus the UDP header (and the IPv4 header,
    // which counts in IPv4's total length).
    let max_udp_payload = if ipv6 { 65_535 - 8 } else { 65_535 - 8 - 20 };
    let datagram = mtu_bytes.saturating_sub(ip_hdr + 8).min(max_udp_payload);
    let frag = datagram.saturating_sub(HEADER_LEN);
    if frag < MIN_FRAG_BYTES {
        return Err(TransportError::Protocol(format!(
            "MTU {mtu_bytes} leaves {frag} payload bytes per datagram (need {MIN_FRAG_BYTES})"
        )));
    }
    Ok(frag)
}

/// IP_MTU / IPV6_MTU of a connected socket.
fn path_mtu(fd: RawFd, ipv6: bool) -> Option<usize> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are writable and len gives v's size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0 && v > 0).then_some(v as usize)
}

/// Path MTU towards `peer`, asked through a temporary connected socket (the
/// server socket stays unconnected so that any client can say Hello).
fn path_mtu_to(peer: SocketAddr) -> Option<usize> {
    let bind: SocketAddr = match peer.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.connect(peer).ok()?;
    path_mtu(s.as_raw_fd(), peer.is_ipv6())
}

/// Ask for large socket buffers: SO_*BUFFORCE (CAP_NET_ADMIN) first, then
/// the unprivileged option, capped by net.core.[rw]mem_max.
fn set_buffer_sizes(sock: &UdpSocket, bytes: usize) {
    use nix::sys::socket::{setsockopt, sockopt};
    if bytes == 0 {
        return;
    }
    if setsockopt(sock, sockopt::RcvBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, sockopt::RcvBuf, &bytes);
    }
    if setsockopt(sock, sockopt::SndBufForce, &bytes).is_err() {
        let _ = setsockopt(sock, sockopt::SndBuf, &bytes);
    }
}

/// How the link layer opens a UDP link (`crate::transport::open`).
mod open {
    use super::{UdpOptions, UdpTransport};
    use crate::transport::open::{LinkSpec, Local, Open, OpenError, Peer, Rendezvous};

    fn options(spec: &LinkSpec) -> UdpOptions {
        let d = UdpOptions::default();
        UdpOptions {
            max_msg_bytes: spec
                .options
                .max_msg_bytes
                .map_or(d.max_msg_bytes, |m| m.max(d.max_msg_bytes)),
            clock: spec.options.clock,
            session_nonce: spec.options.session_nonce,
            ..d
        }
    }

    impl Open for UdpTransport {
        fn driver(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            let Peer::Addr(addr) = spec.peer else {
                return Err(OpenError::Missing {
                    kind: spec.kind,
                    what: "peer address",
                });
            };
            Ok(UdpTransport::connect(addr, options(spec))?)
        }

        fn responder(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            let addr = spec.options.listen.ok_or(OpenError::Missing {
                kind: spec.kind,
                what: "listen address",
            })?;
            let mut t = UdpTransport::listen(addr, options(spec))?;
            if let Some(gate) = &spec.options.gate {
                t.gate_hellos(gate.clone());
            }
            Ok(t)
        }

        fn local(&self) -> Local {
            self.local_addr().map_or(Local::None, Local::Addr)
        }

        fn sessions_started(&self) -> u64 {
            UdpTransport::sessions_started(self)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::mono_raw_ns;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread::JoinHandle;

    const LONG: Duration = Duration::from_secs(10);

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

    #[derive(Debug)]
    struct ServerResult {
        counters: Counters,
        ignored: IgnoredFrames,
        sessions: u64,
        nonce: Option<u64>,
        received: Vec<Received>,
    }

    /// A server thread that answers every message flagged `answer` with one
    /// of the same size (reporting its receive overhead) and ends when its
    /// client says Bye (or after a long idle time, so a test cannot hang).
    fn echo_server(o: UdpOptions) -> (SocketAddr, JoinHandle<ServerResult>) {
        let mut server = UdpTransport::listen(lo(), o).unwrap();
        let addr = server.local_addr().unwrap();
        let h = std::thread::spawn(move || {
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
            ServerResult {
                counters: server.counters(),
                ignored: server.ignored(),
                sessions: server.sessions_started(),
                nonce,
                received,
            }
        });
        (addr, h)
    }

    fn ping(c: &mut UdpTransport, bytes: usize) -> Received {
        c.send(
            0,
            bytes,
            Meta {
                answer: true,
                report_ns: 7,
            },
        )
        .unwrap();
        let r = c.recv(Some(0), LONG).unwrap();
        assert_eq!(r.bytes, bytes);
        assert_eq!(r.peer, 0);
        assert!(!r.meta.answer);
        r
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
        let sizes = [0usize, 1, 1500, 64 << 10, 1 << 20];
        let (addr, h) = echo_server(o);
        let mut c = UdpTransport::connect(addr, o).unwrap();
        if let Some(f) = expect_frag_bytes {
            assert_eq!(c.max_frag_bytes(), Some(f));
        }
        let mut total = 0u64;
        for &s in &sizes {
            for _ in 0..3 {
                let r = ping(&mut c, s);
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
        assert_eq!(c.ignored().malformed, 0);
        assert_eq!(c.ignored().dropped_incomplete, 0);
        drop(c);
        let s = h.join().unwrap();
        assert_eq!(s.counters.recv_messages, n);
        assert_eq!(s.counters.sent_bytes, total);
        assert!(s
            .received
            .iter()
            .all(|r| r.meta.answer && r.meta.report_ns == 7));
        assert_eq!(s.ignored, IgnoredFrames::default());
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

    /// A UDP relay between one client and `server` that drops the n-th Data
    /// datagram (1-based) in each direction, if asked.
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
            let (mut fwd, mut bwd) = (0u64, 0u64);
            let is_data = |b: &[u8]| matches!(Header::decode(b), Ok(h) if h.kind == Kind::Data);
            while !stop2.load(Ordering::Relaxed) {
                let mut fds = [
                    libc::pollfd {
                        fd: front.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: back.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                // SAFETY: fds is a valid array of two pollfd structs.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, 20) };
                while let Ok((n, from)) = front.recv_from(&mut buf) {
                    client = Some(from);
                    if is_data(&buf[..n]) {
                        fwd += 1;
                        if Some(fwd) == drop_fwd {
                            continue;
                        }
                    }
                    let _ = back.send(&buf[..n]);
                }
                while let Ok(n) = back.recv(&mut buf) {
                    if is_data(&buf[..n]) {
                        bwd += 1;
                        if Some(bwd) == drop_back {
                            continue;
                        }
                    }
                    if let Some(c) = client {
                        let _ = front.send_to(&buf[..n], c);
                    }
                }
            }
            (fwd, bwd)
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
        let meta = Meta {
            answer: true,
            report_ns: 7,
        };
        let short = Duration::from_millis(400);

        // 1: request loses a fragment: 3 datagrams sent, 2 arrive.
        c.send(0, 4000, meta).unwrap();
        let e = c.recv(Some(0), short).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        // 2: request arrives (server drops the incomplete #1), answer loses
        // its first fragment (answers' data datagrams: 1..3 = this one).
        c.send(0, 4000, meta).unwrap();
        let e = c.recv(Some(0), short).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        // 3: everything arrives.
        let r = ping(&mut c, 4000);
        assert!(r.overhead_ns > 0.0);
        assert_eq!(c.ignored().dropped_incomplete, 1);
        assert_eq!(c.counters().recv_messages, 1);
        drop(c);
        let s = sh.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        let (fwd, bwd) = ph.join().unwrap();
        assert_eq!(fwd, 9);
        assert_eq!(bwd, 6);
        assert_eq!(s.ignored.dropped_incomplete, 1);
        assert_eq!(s.counters.recv_messages, 2);
        assert_eq!(s.counters.sent_messages, 2);
    }

    fn data_header(nonce: u64, seq: u32, bytes: u32) -> Header {
        Header {
            kind: Kind::Data,
            answer: true,
            nonce,
            seq,
            frag_offset: 0,
            msg_len: bytes,
            report_ns: 0,
            frag_index: 0,
            frag_count: 1,
            frag_len: bytes as u16,
        }
    }

    #[test]
    fn wrong_nonce_stranger_malformed_and_stale_frames_are_ignored_and_counted() {
        let (addr, h) = echo_server(opts());
        let mut c = UdpTransport::connect(addr, opts()).unwrap();
        ping(&mut c, 10); // server's newest seq is now 1
        let nonce = c.nonce().unwrap();
        let payload = [0u8; 10];
        let clock = c.clock;
        // Wrong nonce, from the session peer's own address.
        let bad = data_header(nonce ^ 1, 100, 10);
        send_frame(c.fd, None, &bad, &payload, &clock, LONG).unwrap();
        // Right nonce, from a stranger.
        let mut f = [0u8; HEADER_LEN + 10];
        data_header(nonce, 100, 10).encode(&mut f).unwrap();
        let stranger = UdpSocket::bind(lo()).unwrap();
        stranger.send_to(&f, addr).unwrap();
        // Garbage and a truncated frame from the peer.
        c.sock.send(b"not a frame").unwrap();
        c.sock.send(&f[..HEADER_LEN + 5]).unwrap();
        // An old message (seq 0 < 1), right nonce and address.
        send_frame(
            c.fd,
            None,
            &data_header(nonce, 0, 10),
            &payload,
            &clock,
            LONG,
        )
        .unwrap();
        // None of these was answered; a real message still works.
        let e = c.recv(Some(0), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        ping(&mut c, 10);
        drop(c);
        let s = h.join().unwrap();
        assert_eq!(s.received.len(), 2);
        assert_eq!(
            s.ignored,
            IgnoredFrames {
                malformed: 2,
                wrong_nonce: 1,
                stranger: 1,
                stale: 1,
                ..IgnoredFrames::default()
            }
        );
    }

    #[test]
    fn a_new_hello_takes_over_the_session() {
        let (addr, h) = echo_server(opts());
        let mut a = UdpTransport::connect(addr, opts()).unwrap();
        ping(&mut a, 10);
        let mut b = UdpTransport::connect(addr, opts()).unwrap();
        ping(&mut b, 20);
        // A is now a stranger: its request is ignored, it times out.
        a.send(
            0,
            10,
            Meta {
                answer: true,
                report_ns: 0,
            },
        )
        .unwrap();
        let e = a.recv(Some(0), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        drop(a); // its Bye is a stranger's too
        ping(&mut b, 30);
        drop(b);
        let s = h.join().unwrap();
        assert_eq!(s.sessions, 2);
        assert_eq!(
            s.received.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            [10, 20, 30]
        );
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
            .send(
                0,
                100,
                Meta {
                    answer: true,
                    report_ns: 0,
                },
            )
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
        assert!(matches!(
            server.send(0, 1, Meta::default()),
            Err(TransportError::NoPeer(0))
        ));
        assert!(matches!(
            server.recv(Some(1), Duration::ZERO),
            Err(TransportError::NoPeer(1))
        ));
        assert!(matches!(
            server.send(0, (4 << 20) + 1, Meta::default()),
            Err(TransportError::TooLarge { .. })
        ));
        assert!(matches!(
            server.accept(Duration::from_millis(20)),
            Err(TransportError::Timeout(_))
        ));
        assert!(max_frag_bytes(100, false).is_err());
        assert_eq!(max_frag_bytes(1500, false).unwrap(), 1432);
        assert_eq!(max_frag_bytes(1500, true).unwrap(), 1412);
        assert_eq!(max_frag_bytes(65_536, false).unwrap(), 65_507 - HEADER_LEN);
        assert_eq!(
            max_frag_bytes(65_536, true).unwrap(),
            65_536 - 48 - HEADER_LEN
        );
    }

    #[test]
    fn raw_addr_round_trips() {
        for a in ["127.0.0.1:4242", "[::1]:9", "[fe80::1%2]:1"] {
            let a: SocketAddr = a.parse().unwrap();
            assert_eq!(RawAddr::new(&a).socket_addr(), Some(a));
        }
    }

    // --- reassembly, as a pure state machine ---------------------------

    fn frag(seq: u32, msg_len: u32, frag_bytes: u32, idx: u32) -> Header {
        let count = frame::fragment_count(msg_len as usize, frag_bytes as usize) as u32;
        let off = idx * frag_bytes;
        Header {
            kind: Kind::Data,
            answer: seq % 2 == 1,
            nonce: 1,
            seq,
            frag_offset: off,
            msg_len,
            report_ns: seq,
            frag_index: idx,
            frag_count: count,
            frag_len: frag_bytes.min(msg_len - off) as u16,
        }
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
            r.offer(&frag(11, 1000, 1000, 0), 1).clone(),
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
    fn gated_server_accepts_only_the_authorized_nonce() {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::Arc;
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
}
