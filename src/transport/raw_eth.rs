//! Raw Ethernet probe transport: the datagram core ([`dgram`](super::dgram))
//! over AF_PACKET frames with our own EtherType, needing CAP_NET_RAW.
//!
//! # Wire format
//!
//! ```text
//! dst MAC (6) | src MAC (6) | EtherType 0x88B5 (2) | frame::Header (40) | payload
//! ```
//!
//! [`ETHERTYPE`] is 0x88B5, "IEEE Std 802 – Local Experimental EtherType 1":
//! reserved for experiments and private protocols, never assigned to a public
//! protocol, so no switch or host stack treats it specially. Frames shorter
//! than the Ethernet minimum arrive padded; the header's `frag_len` says
//! where the payload ends, and padding is accepted only up to that minimum.
//!
//! # Semantics
//!
//! The same as [`udp`](super::udp) — the same core — with MAC addresses for
//! socket addresses: a client [`RawEthTransport::connect`]s to a peer MAC,
//! a server ([`RawEthTransport::listen`]) adopts the session of the latest
//! Hello. Frames from another MAC than the session peer (`stranger`), with
//! another session's nonce (`wrong_nonce`), or that do not decode
//! (`malformed`) are ignored and counted ([`RawEthTransport::ignored`]).
//! Messages are cut into fragments of at most `MTU − 40` payload bytes (the
//! interface MTU from SIOCGIFMTU): a lost frame costs the caller one
//! [`TransportError::Timeout`], and the next message works.
//!
//! # Device
//!
//! One `AF_PACKET`/`SOCK_RAW` socket bound to one interface (name → ifindex)
//! and to [`ETHERTYPE`] ([`PacketPhy`]). A classic BPF filter, attached
//! before the socket is bound (so nothing else can be queued first), passes
//! only frames of our EtherType addressed to this interface's MAC
//! (SIOCGIFHWADDR); PACKET_IGNORE_OUTGOING keeps the kernel from looping our
//! own transmissions back to us. Frames are sent with `sendmsg` (Ethernet +
//! frame header from the stack, payload straight from a preallocated
//! buffer).
//!
//! Receiving busy-polls, with one of two paths ([`RxMode`]):
//! - [`RxMode::Ring`] (default): a PACKET_MMAP TPACKET_V2 receive ring; the
//!   poll is a load of the next slot's status word, no system call.
//! - [`RxMode::Recv`]: `recvfrom(MSG_DONTWAIT)` per poll.
//!
//! A frame's share of the receive overhead (`Received::overhead_ns`) is the
//! time of the successful receive step that delivered it: the `recvfrom`
//! call, or for the ring the time from seeing a filled slot to handing it
//! back to the kernel.
//!
//! # Privilege
//!
//! Without CAP_NET_RAW `socket(AF_PACKET)` fails with EPERM; the constructors
//! then return [`TransportError::Io`] of kind `PermissionDenied` whose message
//! says so. [`needs_cap_net_raw`] recognises it, so the daemon can log one
//! line and use udp.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::dgram::phy::{Frame, Route, RxFrame};
use super::dgram::wire::{self, HEADER_LEN};
use super::dgram::{
    default_options, endpoint_config, Endpoint, EndpointConfig, IdlePolicy, Phy, MIN_FRAG_BYTES,
};
use super::sys::packet::{self, Ring};
use super::sys::socket as sys;
use super::TransportError;
use crate::clock::{Clock, HostClock};

pub use super::dgram::IgnoredFrames;
pub use super::sys::packet::{interface_info, InterfaceInfo};

/// Our EtherType: IEEE 802 Local Experimental EtherType 1.
pub const ETHERTYPE: u16 = 0x88B5;
/// Ethernet header: destination, source, EtherType.
pub const ETH_HDR_LEN: usize = 14;
/// Smallest Ethernet payload (frames are padded up to it).
const ETH_MIN_PAYLOAD: usize = 46;
/// Bytes before the payload in every frame we send.
pub const PREFIX_LEN: usize = ETH_HDR_LEN + HEADER_LEN;

/// How received frames reach user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxMode {
    /// PACKET_MMAP TPACKET_V2 receive ring, polled without system calls.
    Ring,
    /// `recvfrom(MSG_DONTWAIT)` per poll.
    Recv,
}

impl std::str::FromStr for RxMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ring" => Ok(RxMode::Ring),
            "recv" => Ok(RxMode::Recv),
            other => Err(format!("unknown receive path {other:?} (ring or recv)")),
        }
    }
}

/// Settings of a [`RawEthTransport`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RawEthOptions {
    /// Largest message (and size of the preallocated payload buffer).
    pub max_msg_bytes: usize,
    /// Use this MTU if it is below the interface's.
    pub mtu_bytes: Option<usize>,
    /// How long the client waits for a HelloAck per attempt.
    pub handshake_timeout: Duration,
    /// How many Hellos the client sends before giving up.
    pub handshake_attempts: u32,
    /// How long `send` may spin on a full transmit queue.
    pub send_timeout: Duration,
    /// Receive path.
    pub rx: RxMode,
    /// Size of the receive ring ([`RxMode::Ring`]) or SO_RCVBUF
    /// ([`RxMode::Recv`]); also SO_SNDBUF.
    pub buffer_bytes: usize,
    /// PACKET_QDISC_BYPASS: hand frames straight to the driver. Off by
    /// default: it also bypasses traffic shaping (`tc`) on the interface.
    pub qdisc_bypass: bool,
    /// A wait that found nothing for this long calls `sched_yield` between
    /// polls, so a waiter sharing its core with the peer (or with anything
    /// else) does not starve it. Far above a small-message round trip, so it
    /// does not touch latency measurements; `None`: spin only.
    pub yield_after: Option<Duration>,
    /// Clock for deadlines and receive overhead.
    pub clock: HostClock,
    /// Client: use this session nonce (agreed on the control plane).
    pub session_nonce: Option<u64>,
    /// A wait that found nothing for this long sleeps in poll(2) until a
    /// frame arrives (an idle responder costs no CPU; a probe in progress
    /// never waits this long).
    pub sleep_after: Duration,
}

default_options!(RawEthOptions {
    mtu_bytes: None,
    rx: RxMode::Ring,
    buffer_bytes: 8 << 20,
    qdisc_bypass: false,
    yield_after: IdlePolicy::default().yield_after,
    clock: HostClock::default(),
    session_nonce: None,
    sleep_after: IdlePolicy::default().sleep_after,
});

impl RawEthOptions {
    fn endpoint(&self) -> EndpointConfig {
        let (yield_after, sleep_after) = (self.yield_after, self.sleep_after);
        endpoint_config!(
            self,
            IdlePolicy {
                yield_after,
                sleep_after
            }
        )
    }
}

/// True when `e` is the "no CAP_NET_RAW" error of the constructors.
pub fn needs_cap_net_raw(e: &TransportError) -> bool {
    matches!(e, TransportError::Io(io) if io.kind() == io::ErrorKind::PermissionDenied)
}

/// Parse `aa:bb:cc:dd:ee:ff` (or with `-`).
pub fn parse_mac(s: &str) -> Result<[u8; 6], TransportError> {
    let bad =
        || TransportError::Protocol(format!("bad MAC address {s:?} (want aa:bb:cc:dd:ee:ff)"));
    let mut mac = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for b in &mut mac {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(mac)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    let [a, b, c, d, e, f] = *mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

/// The bytes before a frame's payload: the Ethernet header from `src` to
/// `dst` with [`ETHERTYPE`], then the encoded frame header.
pub fn frame_prefix(dst: &[u8; 6], src: &[u8; 6], header: &[u8; HEADER_LEN]) -> [u8; PREFIX_LEN] {
    let mut p = [0u8; PREFIX_LEN];
    p[0..6].copy_from_slice(dst);
    p[6..12].copy_from_slice(src);
    p[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    p[ETH_HDR_LEN..].copy_from_slice(header);
    p
}

/// Source MAC and frame header of a received Ethernet frame (no header when
/// it is not a well-formed frame of ours: padding is accepted up to the
/// Ethernet minimum, no further).
fn inspect(buf: &[u8]) -> RxFrame<[u8; 6]> {
    let (src, header) = match buf.get(..ETH_HDR_LEN) {
        Some(eth) => {
            let mut src = [0u8; 6];
            src.copy_from_slice(&eth[6..12]);
            let body = &buf[ETH_HDR_LEN..];
            (Some(src), wire::decode_exact(body, ETH_MIN_PAYLOAD))
        }
        None => (None, None),
    };
    RxFrame {
        src,
        header,
        cost_ticks: 0,
    }
}

/// Raw Ethernet transport, client or server; see the module documentation.
pub type RawEthTransport = Endpoint<PacketPhy>;

/// The raw Ethernet device: one AF_PACKET socket on one interface.
pub struct PacketPhy {
    sock: OwnedFd,
    ring: Option<Ring>,
    info: InterfaceInfo,
    mtu_bytes: usize,
    max_frag_bytes: usize,
    /// Receive buffer of [`RxMode::Recv`].
    rx_buf: Vec<u8>,
}

impl PacketPhy {
    fn open(ifname: &str, opts: &RawEthOptions) -> Result<Self, TransportError> {
        // Protocol 0: the socket receives nothing until bound below, after
        // the filter is in place.
        let sock = packet::open_socket()?;
        let fd = sock.as_fd();
        let info = packet::interface_info_fd(fd, ifname)?;
        let mtu_bytes = opts
            .mtu_bytes
            .map_or(info.mtu_bytes, |m| m.min(info.mtu_bytes));
        let max_frag_bytes = mtu_bytes.saturating_sub(HEADER_LEN).min(u16::MAX as usize);
        if max_frag_bytes < MIN_FRAG_BYTES {
            return Err(TransportError::Protocol(format!(
                "MTU {mtu_bytes} of {ifname} leaves {max_frag_bytes} payload bytes per frame \
                 (need {MIN_FRAG_BYTES})"
            )));
        }
        packet::attach_filter(fd, &packet::filter_program(&info.mac, ETHERTYPE))?;
        // Best effort (Linux ≥ 4.20): our own frames are not looped back.
        let _ = packet::ignore_outgoing(fd);
        if opts.qdisc_bypass {
            packet::qdisc_bypass(fd)?;
        }
        sys::set_send_buffer(fd, opts.buffer_bytes);
        let ring = match opts.rx {
            RxMode::Ring => Some(Ring::map(
                fd,
                mtu_bytes.max(info.mtu_bytes),
                opts.buffer_bytes,
            )?),
            RxMode::Recv => {
                sys::set_recv_buffer(fd, opts.buffer_bytes);
                None
            }
        };
        packet::bind(fd, info.index, ETHERTYPE)?;
        tracing::debug!(
            "raw_eth: {ifname} index {} mac {} MTU {mtu_bytes}, {:?}",
            info.index,
            format_mac(&info.mac),
            opts.rx
        );
        Ok(PacketPhy {
            sock,
            ring,
            info,
            mtu_bytes,
            max_frag_bytes,
            rx_buf: vec![0; (info.mtu_bytes + ETH_HDR_LEN + 64).max(2048)],
        })
    }
}

impl Phy for PacketPhy {
    type Addr = [u8; 6];
    type Dest = [u8; 6];
    const NAME: &'static str = "raw_eth";

    fn route(&mut self, peer: &[u8; 6]) -> Result<Route<[u8; 6]>, TransportError> {
        Ok(Route {
            dest: *peer,
            mtu_bytes: self.mtu_bytes,
            max_frag_bytes: self.max_frag_bytes,
        })
    }

    #[inline]
    fn send(&mut self, dest: &[u8; 6], frame: Frame<'_>) -> Result<bool, TransportError> {
        // The socket is bound to the interface: no address needed.
        let prefix = frame_prefix(dest, &self.info.mac, frame.header);
        sys::send_two(self.sock.as_fd(), None, &prefix, frame.payload)
    }

    #[inline]
    fn poll<C: Clock>(&mut self, clock: &C) -> Result<Option<RxFrame<[u8; 6]>>, TransportError> {
        let t0 = clock.now();
        if let Some(ring) = &mut self.ring {
            let Some(f) = ring.take(|data| match data {
                Some(d) => inspect(d),
                None => inspect(&[]),
            }) else {
                return Ok(None);
            };
            let t1 = clock.now();
            return Ok(Some(RxFrame {
                cost_ticks: t1.wrapping_sub(t0),
                ..f
            }));
        }
        let r = sys::recv_from(self.sock.as_fd(), &mut self.rx_buf, None);
        let t1 = clock.now();
        match r {
            Ok(Some(len)) => Ok(Some(RxFrame {
                cost_ticks: t1.wrapping_sub(t0),
                // A frame longer than the buffer was truncated: not ours.
                ..inspect(self.rx_buf.get(..len).unwrap_or(&[]))
            })),
            Ok(None) => Ok(None),
            // The interface went down: nothing arrives, deadlines apply.
            Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => Ok(None),
            Err(e) => Err(TransportError::Io(e)),
        }
    }

    fn wait_readable(&mut self, timeout: Duration) {
        sys::wait_readable(self.sock.as_fd(), timeout);
    }

    fn fmt_addr(addr: &[u8; 6], f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_mac(addr))
    }
}

impl RawEthTransport {
    /// Client: open a session with the server at `peer_mac` on `ifname`.
    ///
    /// Sends up to `handshake_attempts` Hellos, each waiting
    /// `handshake_timeout` for the HelloAck; silence is
    /// [`TransportError::Timeout`].
    pub fn connect(
        ifname: &str,
        peer_mac: [u8; 6],
        opts: RawEthOptions,
    ) -> Result<Self, TransportError> {
        let phy = PacketPhy::open(ifname, &opts)?;
        Endpoint::client(
            phy,
            opts.clock,
            opts.endpoint(),
            peer_mac,
            opts.session_nonce,
        )
    }

    /// Server: bind `ifname` and wait (inside `recv` or [`Self::accept`]) for
    /// a client's Hello.
    pub fn listen(ifname: &str, opts: RawEthOptions) -> Result<Self, TransportError> {
        let phy = PacketPhy::open(ifname, &opts)?;
        Endpoint::server(phy, opts.clock, opts.endpoint())
    }

    /// Frames the kernel dropped for this socket since the last call (a full
    /// ring or receive buffer), from PACKET_STATISTICS.
    pub fn kernel_drops(&self) -> Result<u64, TransportError> {
        Ok(packet::kernel_drops(self.phy().sock.as_fd())?)
    }
    /// The session peer's MAC, if a session is open.
    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        self.peer()
    }
    /// This end's interface.
    pub fn interface(&self) -> InterfaceInfo {
        self.phy().info
    }
    /// Payload bytes per frame.
    pub fn max_frag_bytes(&self) -> usize {
        self.phy().max_frag_bytes
    }
    /// Receive path in use.
    pub fn rx_mode(&self) -> RxMode {
        if self.phy().ring.is_some() {
            RxMode::Ring
        } else {
            RxMode::Recv
        }
    }
    /// The socket (for poll-based waiting outside the probe loop).
    pub fn as_raw_fd(&self) -> RawFd {
        self.phy().sock.as_raw_fd()
    }
}

/// How the link layer opens a raw Ethernet link (`crate::transport::open`).
mod open {
    use super::{RawEthOptions, RawEthTransport};
    use crate::transport::open::{LinkSpec, Local, Open, OpenError, Peer, Rendezvous};

    fn options(spec: &LinkSpec) -> RawEthOptions {
        let d = RawEthOptions::default();
        RawEthOptions {
            max_msg_bytes: spec.options.max_msg_bytes_at_least(d.max_msg_bytes),
            rx: spec.options.raw_rx.unwrap_or(d.rx),
            clock: spec.options.clock,
            session_nonce: spec.options.session_nonce,
            ..d
        }
    }

    impl Open for RawEthTransport {
        fn driver(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            let ifname = spec.device()?;
            let Peer::Mac(mac) = spec.peer else {
                return Err(OpenError::Missing {
                    kind: spec.kind,
                    what: "peer MAC",
                });
            };
            Ok(RawEthTransport::connect(ifname, mac, options(spec))?)
        }

        fn responder(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            let mut t = RawEthTransport::listen(spec.device()?, options(spec))?;
            if let Some(gate) = &spec.options.gate {
                t.gate_hellos_with(gate.clone());
            }
            Ok(t)
        }

        fn local(&self) -> Local {
            Local::Mac {
                mac: self.interface().mac,
                rx: self.rx_mode(),
            }
        }

        fn ignored(&self) -> Option<String> {
            Some(format!("{:?}", RawEthTransport::ignored(self)))
        }

        fn sessions_started(&self) -> u64 {
            RawEthTransport::sessions_started(self)
        }
    }
}

#[cfg(test)]
#[path = "raw_eth_tests.rs"]
mod tests;
