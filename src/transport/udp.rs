//! Unprivileged UDP probe transport: the datagram core
//! ([`dgram`](super::dgram)) over a UDP socket.
//!
//! A client [`UdpTransport::connect`]s to one server and opens a session with
//! a Hello carrying a random nonce; the server ([`UdpTransport::listen`])
//! adopts the session of the latest Hello and answers HelloAck. Every later
//! frame carries the nonce; frames with another nonce, from a stranger, or
//! that do not decode are ignored and counted ([`UdpTransport::ignored`]).
//!
//! Messages are cut into fragments that fit one datagram of the path MTU
//! (`IP_MTU` of the connected socket; per peer on the server) and reassembled
//! by `(seq, fragment)`, so a lost datagram costs the caller a
//! [`TransportError::Timeout`] and nothing more.
//!
//! This file is the device ([`UdpPhy`]): a non-blocking socket, connected
//! on the client (sends need no address, and a closed port comes back as
//! ICMP port unreachable: [`TransportError::PeerGone`]), unconnected on the
//! server (any client can say Hello; sends name the session peer). Each
//! receive is one `recvfrom(MSG_DONTWAIT)` timed on the transport's clock;
//! its duration is the datagram's share of the receive overhead.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use super::dgram::phy::{Frame, Route, RxFrame};
use super::dgram::wire::{self, HEADER_LEN};
use super::dgram::{default_options, endpoint_config, Endpoint, EndpointConfig, IdlePolicy, Phy};
use super::sys::socket::{self as sys, RawAddr};
use super::TransportError;
use crate::clock::{Clock, HostClock};

pub use super::dgram::{IgnoredFrames, MIN_FRAG_BYTES};

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
    /// gaps are far shorter), an idle responder costs no CPU. (The
    /// [`IdlePolicy`] of every wait: it yields the CPU after 50 µs.)
    pub spin_window: Duration,
}

default_options!(UdpOptions {
    mtu_bytes: None,
    socket_buffer_bytes: 8 << 20,
    clock: HostClock::default(),
    session_nonce: None,
    spin_window: IdlePolicy::default().sleep_after,
});

impl UdpOptions {
    fn endpoint(&self) -> EndpointConfig {
        let idle = IdlePolicy {
            sleep_after: self.spin_window,
            ..IdlePolicy::default()
        };
        endpoint_config!(self, idle)
    }
}

/// UDP transport, client or server; see the module documentation.
pub type UdpTransport = Endpoint<UdpPhy>;

/// The UDP device: one non-blocking socket.
pub struct UdpPhy {
    sock: UdpSocket,
    /// The socket is connected to the session peer (client).
    connected: bool,
    /// Use this MTU instead of the path MTU.
    mtu_bytes: Option<usize>,
    rx_buf: Vec<u8>,
}

/// Where a UDP frame goes: nothing on a connected socket, else the peer's
/// address in the kernel's form.
#[derive(Clone, Copy)]
pub struct UdpDest(Option<RawAddr>);

impl UdpPhy {
    fn new(sock: UdpSocket, connected: bool, opts: &UdpOptions) -> Result<Self, TransportError> {
        sock.set_nonblocking(true)?;
        let fd = sock.as_fd();
        if opts.socket_buffer_bytes > 0 {
            sys::set_recv_buffer(fd, opts.socket_buffer_bytes);
            sys::set_send_buffer(fd, opts.socket_buffer_bytes);
        }
        Ok(UdpPhy {
            sock,
            connected,
            mtu_bytes: opts.mtu_bytes,
            rx_buf: vec![0; RX_BUF_BYTES],
        })
    }
}

impl Phy for UdpPhy {
    type Addr = SocketAddr;
    type Dest = UdpDest;
    const NAME: &'static str = "udp";

    fn route(&mut self, peer: &SocketAddr) -> Result<Route<UdpDest>, TransportError> {
        let ipv6 = peer.is_ipv6();
        let (dest, kernel_mtu) = if self.connected {
            (UdpDest(None), sys::path_mtu(self.sock.as_fd(), ipv6))
        } else {
            (UdpDest(Some(RawAddr::new(peer))), sys::path_mtu_to(*peer))
        };
        let mtu_bytes = self.mtu_bytes.or(kernel_mtu).unwrap_or(FALLBACK_MTU_BYTES);
        Ok(Route {
            dest,
            mtu_bytes,
            max_frag_bytes: max_frag_bytes(mtu_bytes, ipv6)?,
        })
    }

    #[inline]
    fn send(&mut self, dest: &UdpDest, frame: Frame<'_>) -> Result<bool, TransportError> {
        sys::send_two(
            self.sock.as_fd(),
            dest.0.as_ref(),
            frame.header,
            frame.payload,
        )
    }

    #[inline]
    fn poll<C: Clock>(&mut self, clock: &C) -> Result<Option<RxFrame<SocketAddr>>, TransportError> {
        let mut src = RawAddr::empty();
        let t0 = clock.now();
        let r = sys::recv_from(self.sock.as_fd(), &mut self.rx_buf, Some(&mut src));
        let t1 = clock.now();
        match r {
            Ok(Some(len)) => Ok(Some(RxFrame {
                src: src.socket_addr(),
                // A datagram longer than the buffer (impossible for UDP) is
                // not trusted.
                header: self
                    .rx_buf
                    .get(..len)
                    .and_then(|b| wire::decode_exact(b, 0)),
                cost_ticks: t1.wrapping_sub(t0),
            })),
            Ok(None) => Ok(None),
            // Only a connected socket hears of ICMP port unreachable.
            Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => {
                if self.connected {
                    Err(TransportError::PeerGone(sys::REFUSED.into()))
                } else {
                    Ok(None)
                }
            }
            Err(e) => Err(TransportError::Io(e)),
        }
    }

    fn wait_readable(&mut self, timeout: Duration) {
        sys::wait_readable(self.sock.as_fd(), timeout);
    }

    fn fmt_addr(addr: &SocketAddr, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(addr, f)
    }
}

impl UdpTransport {
    /// Client: open a session with the server at `peer`.
    ///
    /// Sends up to `handshake_attempts` Hellos, each waiting
    /// `handshake_timeout` for the HelloAck. A closed port (ICMP port
    /// unreachable, and no HelloAck on any attempt) is
    /// [`TransportError::PeerGone`], silence is [`TransportError::Timeout`].
    pub fn connect(peer: SocketAddr, opts: UdpOptions) -> Result<Self, TransportError> {
        let bind: SocketAddr = match peer {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(peer)?;
        let phy = UdpPhy::new(sock, true, &opts)?;
        Endpoint::client(phy, opts.clock, opts.endpoint(), peer, opts.session_nonce)
    }

    /// Server: bind `addr` and wait (inside `recv` or [`Self::accept`]) for
    /// a client's Hello.
    pub fn listen(addr: SocketAddr, opts: UdpOptions) -> Result<Self, TransportError> {
        let phy = UdpPhy::new(UdpSocket::bind(addr)?, false, &opts)?;
        Endpoint::server(phy, opts.clock, opts.endpoint())
    }

    /// The session peer, if a session is open.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.peer()
    }
    pub fn local_addr(&self) -> Result<SocketAddr, TransportError> {
        Ok(self.phy().sock.local_addr()?)
    }
    /// Payload bytes per datagram towards the session peer.
    pub fn max_frag_bytes(&self) -> Option<usize> {
        self.frag_bytes()
    }
    /// The socket (for poll-based waiting outside the probe loop).
    pub fn as_raw_fd(&self) -> RawFd {
        self.phy().sock.as_raw_fd()
    }
    /// The socket, borrowed.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.phy().sock.as_fd()
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

/// How the link layer opens a UDP link (`crate::transport::open`).
mod open {
    use super::{UdpOptions, UdpTransport};
    use crate::transport::open::{LinkSpec, Local, Open, OpenError, Peer, Rendezvous};

    fn options(spec: &LinkSpec) -> UdpOptions {
        let d = UdpOptions::default();
        UdpOptions {
            max_msg_bytes: spec.options.max_msg_bytes_at_least(d.max_msg_bytes),
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
                t.gate_hellos_with(gate.clone());
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
#[path = "udp_tests.rs"]
mod tests;
