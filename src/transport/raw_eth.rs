//! Raw Ethernet probe transport: AF_PACKET frames with our own EtherType and
//! the [`frame`](super::frame) header, needing CAP_NET_RAW.
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
//! The same as [`udp`](super::udp) with MAC addresses for socket addresses:
//! a client [`RawEthTransport::connect`]s to a peer MAC and opens a session
//! with a Hello carrying a random nonce; a server ([`RawEthTransport::listen`])
//! adopts the session of the latest Hello (a new Hello takes over) and
//! answers HelloAck. Every frame carries the nonce and a per-sender message
//! sequence number. Frames from another MAC than the session peer
//! (`stranger`), with another session's nonce (`wrong_nonce`), or that do not
//! decode (`malformed`) are ignored and counted ([`RawEthTransport::ignored`]).
//! Messages are cut into fragments of at most `MTU − 40` payload bytes (the
//! interface MTU from SIOCGIFMTU) and reassembled exactly like udp's (the
//! same reassembly code): a lost frame costs the caller one
//! [`TransportError::Timeout`], and the next message works.
//!
//! # Socket
//!
//! One `AF_PACKET`/`SOCK_RAW` socket bound to one interface (name → ifindex)
//! and to [`ETHERTYPE`]. A classic BPF filter, attached before the socket is
//! bound (so nothing else can be queued first), passes only frames of our
//! EtherType addressed to this interface's MAC (SIOCGIFHWADDR);
//! PACKET_IGNORE_OUTGOING keeps the kernel from looping our own transmissions
//! back to us. Frames are sent with `sendmsg` (Ethernet + frame header from
//! the stack, payload straight from a preallocated buffer).
//!
//! Receiving busy-polls, with one of two paths ([`RxMode`]):
//! - [`RxMode::Ring`] (default): a PACKET_MMAP TPACKET_V2 receive ring; the
//!   poll is a load of the next slot's status word, no system call. (V3 hands
//!   frames over per block, on a block timeout of at least a millisecond when
//!   traffic is light: useless for latency.)
//! - [`RxMode::Recv`]: `recvfrom(MSG_DONTWAIT)` per poll.
//!
//! The receive overhead of a message (`Received::overhead_ns`) is the time of
//! the successful receive steps that delivered its frames: the `recvfrom`
//! calls, or for the ring the time from seeing a filled slot to handing it
//! back to the kernel. Every wait ends at a deadline on the transport's clock.
//!
//! # Privilege
//!
//! Without CAP_NET_RAW `socket(AF_PACKET)` fails with EPERM; the constructors
//! then return [`TransportError::Io`] of kind `PermissionDenied` whose message
//! says so. [`needs_cap_net_raw`] recognises it, so the daemon can log one
//! line and use udp.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::frame::{self, Header, Kind, HEADER_LEN};
use super::udp::{IgnoredFrames, Offer, Reassembly, MIN_FRAG_BYTES};
use super::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};
use crate::clock::{Clock, HostClock};

/// Our EtherType: IEEE 802 Local Experimental EtherType 1.
pub const ETHERTYPE: u16 = 0x88B5;
/// Ethernet header: destination, source, EtherType.
pub const ETH_HDR_LEN: usize = 14;
/// Smallest Ethernet payload (frames are padded up to it).
const ETH_MIN_PAYLOAD: usize = 46;
/// Bytes before the payload in every frame we send.
const PREFIX_LEN: usize = ETH_HDR_LEN + HEADER_LEN;

// Kernel ABI constants (linux/if_packet.h, linux/sockios.h,
// asm-generic/socket.h), spelled out so the code does not depend on which of
// them a libc release exports.
const SIOCGIFMTU: libc::c_ulong = 0x8921;
const SIOCGIFHWADDR: libc::c_ulong = 0x8927;
const SIOCGIFINDEX: libc::c_ulong = 0x8933;
const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const TPACKET_V2: libc::c_int = 1;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const SO_ATTACH_FILTER: libc::c_int = 26;
const ARPHRD_ETHER: u16 = 1;
/// Offset of the link header in a TPACKET_V2 ring slot:
/// TPACKET_ALIGN(TPACKET2_HDRLEN (32 + sizeof sockaddr_ll = 52) + 16) − 14.
const RING_MAC_OFFSET: usize = 80 - ETH_HDR_LEN;

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

impl Default for RawEthOptions {
    fn default() -> Self {
        Self {
            max_msg_bytes: 4 << 20,
            mtu_bytes: None,
            handshake_timeout: Duration::from_millis(200),
            handshake_attempts: 5,
            send_timeout: Duration::from_secs(1),
            rx: RxMode::Ring,
            buffer_bytes: 8 << 20,
            qdisc_bypass: false,
            yield_after: Some(Duration::from_micros(50)),
            clock: HostClock::default(),
            session_nonce: None,
            sleep_after: Duration::from_millis(20),
        }
    }
}

/// What the kernel says about an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub index: u32,
    pub mac: [u8; 6],
    pub mtu_bytes: usize,
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

/// `struct ifreq`: a name and a 24-byte union, of which we use the first
/// bytes (sockaddr for the hardware address, int for MTU and index).
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: [u8; 24],
}

fn ifreq(ifname: &str) -> Result<IfReq, TransportError> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(TransportError::Protocol(format!(
            "bad interface name {ifname:?}"
        )));
    }
    let mut r = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: [0; 24],
    };
    for (d, &s) in r.name.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

fn ioctl_ifreq(fd: RawFd, req: libc::c_ulong, ifname: &str) -> Result<IfReq, TransportError> {
    let mut r = ifreq(ifname)?;
    // SAFETY: r is a writable ifreq-sized, ifreq-laid-out struct; these
    // SIOCGIF* requests read the name and write at most the union.
    let rc = unsafe { libc::ioctl(fd, req as _, &mut r as *mut IfReq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENODEV) {
            return Err(TransportError::Io(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no network interface {ifname:?}"),
            )));
        }
        return Err(TransportError::Io(e));
    }
    Ok(r)
}

/// Index, MAC address and MTU of `ifname` (no privilege needed).
pub fn interface_info(ifname: &str) -> Result<InterfaceInfo, TransportError> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error().into());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    interface_info_fd(sock.as_raw_fd(), ifname)
}

fn interface_info_fd(fd: RawFd, ifname: &str) -> Result<InterfaceInfo, TransportError> {
    let int_at = |r: &IfReq| i32::from_ne_bytes([r.data[0], r.data[1], r.data[2], r.data[3]]);
    let index = int_at(&ioctl_ifreq(fd, SIOCGIFINDEX, ifname)?);
    let mtu = int_at(&ioctl_ifreq(fd, SIOCGIFMTU, ifname)?);
    let hw = ioctl_ifreq(fd, SIOCGIFHWADDR, ifname)?;
    // struct sockaddr: sa_family (u16), then the address bytes.
    let family = u16::from_ne_bytes([hw.data[0], hw.data[1]]);
    if family != ARPHRD_ETHER {
        return Err(TransportError::Protocol(format!(
            "{ifname} is not an Ethernet interface (hardware type {family})"
        )));
    }
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&hw.data[2..8]);
    if index <= 0 || mtu <= 0 {
        return Err(TransportError::Protocol(format!(
            "{ifname}: index {index}, MTU {mtu}"
        )));
    }
    Ok(InterfaceInfo {
        index: index as u32,
        mac,
        mtu_bytes: mtu as usize,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Client,
    Server,
}

/// The current session.
#[derive(Clone, Copy, Debug)]
struct Session {
    nonce: u64,
    peer: [u8; 6],
}

/// A PACKET_MMAP TPACKET_V2 receive ring.
struct Ring {
    base: *mut u8,
    map_bytes: usize,
    frame_bytes: usize,
    frames: usize,
    next: usize,
}

impl Ring {
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: i < frames, so the slot lies inside the mapping; every slot
        // starts with the u32 tp_status at a 16-byte-aligned offset; the
        // kernel and we access it atomically.
        unsafe { &*(self.base.add(i * self.frame_bytes) as *const AtomicU32) }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_bytes are exactly what mmap returned; no
        // reference into the mapping outlives the ring.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_bytes) };
    }
}

/// Metadata of one received frame (the payload itself is not needed).
#[derive(Clone, Copy)]
struct Seen {
    src: [u8; 6],
    /// `None`: did not decode or wrong length.
    header: Option<Header>,
    cost_ticks: u64,
}

/// Raw Ethernet transport, client or server; see the module documentation.
pub struct RawEthTransport {
    sock: OwnedFd,
    fd: RawFd,
    ring: Option<Ring>,
    role: Role,
    opts: RawEthOptions,
    clock: HostClock,
    ifname: String,
    info: InterfaceInfo,
    max_frag_bytes: usize,
    session: Option<Session>,
    gone: bool,
    sessions_started: u64,
    send_seq: u32,
    tx_payload: Vec<u8>,
    rx_buf: Vec<u8>,
    reasm: Reassembly,
    counters: Counters,
    ignored: IgnoredFrames,
    /// Server: when set, only a Hello carrying the nonce it holds opens a
    /// session (0: none); the daemon's control plane sets it.
    hello_gate: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    /// Clock reading of the last frame sent or received: waits that follow
    /// activity spin, a responder nobody talked to for a while sleeps.
    last_activity: u64,
    /// Test hook: drop the n-th Data frame this endpoint would send
    /// (1-based), as a lossy link would.
    #[cfg(test)]
    drop_tx_data_frame: Option<u64>,
    #[cfg(test)]
    tx_data_frames: u64,
}

// SAFETY: the ring mapping is owned by this value alone and only touched
// through &mut self (or &self for reads of atomics); moving the value to
// another thread moves that ownership with it.
unsafe impl Send for RawEthTransport {}

fn eperm_message(e: io::Error) -> TransportError {
    if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
        TransportError::Io(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "raw Ethernet needs CAP_NET_RAW: socket(AF_PACKET, SOCK_RAW) was refused \
             (EPERM); run as root, grant CAP_NET_RAW, or use the udp transport",
        ))
    } else {
        TransportError::Io(e)
    }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: v lives across the call and the length is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The classic BPF program: accept frames of [`ETHERTYPE`] whose
/// destination is `mac`, drop everything else.
fn filter_program(mac: &[u8; 6]) -> [libc::sock_filter; 8] {
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    const LD_H_ABS: u16 = 0x28;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    [
        ins(LD_H_ABS, 0, 0, 12),                // A = EtherType
        ins(JEQ_K, 0, 5, u32::from(ETHERTYPE)), // else drop
        ins(LD_W_ABS, 0, 0, 2),                 // A = dst[2..6]
        ins(
            JEQ_K,
            0,
            3,
            u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]),
        ),
        ins(LD_H_ABS, 0, 0, 0), // A = dst[0..2]
        ins(JEQ_K, 0, 1, u32::from(u16::from_be_bytes([mac[0], mac[1]]))),
        ins(RET_K, 0, 0, 0x0004_0000), // accept (whole frame)
        ins(RET_K, 0, 0, 0),           // drop
    ]
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
        let mut t = Self::open(ifname, Role::Client, opts)?;
        let mut nonce = opts.session_nonce.unwrap_or_else(rand::random::<u64>);
        if nonce == 0 {
            nonce = 1;
        }
        t.session = Some(Session {
            nonce,
            peer: peer_mac,
        });
        t.handshake()?;
        Ok(t)
    }

    /// Server: bind `ifname` and wait (inside `recv` or [`Self::accept`]) for
    /// a client's Hello.
    pub fn listen(ifname: &str, opts: RawEthOptions) -> Result<Self, TransportError> {
        Self::open(ifname, Role::Server, opts)
    }

    fn open(ifname: &str, role: Role, opts: RawEthOptions) -> Result<Self, TransportError> {
        if opts.max_msg_bytes > u32::MAX as usize {
            return Err(TransportError::Protocol(format!(
                "max_msg_bytes {} does not fit the 32-bit length field",
                opts.max_msg_bytes
            )));
        }
        // Protocol 0: the socket receives nothing until bound below, after
        // the filter is in place.
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        };
        if fd < 0 {
            return Err(eperm_message(io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        let info = interface_info_fd(fd, ifname)?;
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

        let prog = filter_program(&info.mac);
        let fprog = libc::sock_fprog {
            len: prog.len() as u16,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: fprog points at `prog`, which lives across the call; the
        // kernel copies the program.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_ATTACH_FILTER,
                &fprog as *const libc::sock_fprog as *const libc::c_void,
                std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error().into());
        }
        // Best effort (Linux ≥ 4.20): our own frames are not looped back.
        let _ = setsockopt_int(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        if opts.qdisc_bypass {
            setsockopt_int(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1)?;
        }
        let buf = opts.buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf).is_err() {
            let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, buf);
        }
        let ring = match opts.rx {
            RxMode::Ring => Some(Self::map_ring(
                fd,
                mtu_bytes.max(info.mtu_bytes),
                opts.buffer_bytes,
            )?),
            RxMode::Recv => {
                if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf).is_err() {
                    let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, buf);
                }
                None
            }
        };

        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETHERTYPE.to_be();
        sll.sll_ifindex = info.index as i32;
        // SAFETY: sll is a valid sockaddr_ll and the length is its size.
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error().into());
        }
        let tx_payload = (0..opts.max_msg_bytes).map(|i| i as u8).collect();
        tracing::debug!(
            "raw_eth: {ifname} index {} mac {} MTU {mtu_bytes}, {:?}",
            info.index,
            format_mac(&info.mac),
            opts.rx
        );
        Ok(RawEthTransport {
            fd,
            sock,
            ring,
            role,
            opts,
            clock: opts.clock,
            ifname: ifname.to_owned(),
            info,
            max_frag_bytes,
            session: None,
            gone: false,
            sessions_started: 0,
            send_seq: 0,
            tx_payload,
            rx_buf: vec![0; (info.mtu_bytes + ETH_HDR_LEN + 64).max(2048)],
            reasm: Reassembly::new(opts.max_msg_bytes),
            counters: Counters::default(),
            ignored: IgnoredFrames::default(),
            hello_gate: None,
            last_activity: 0,
            #[cfg(test)]
            drop_tx_data_frame: None,
            #[cfg(test)]
            tx_data_frames: 0,
        })
    }

    /// Set up and map a TPACKET_V2 receive ring of about `ring_bytes`.
    fn map_ring(fd: RawFd, mtu_bytes: usize, ring_bytes: usize) -> Result<Ring, TransportError> {
        setsockopt_int(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V2)?;
        let frame_bytes = (RING_MAC_OFFSET + ETH_HDR_LEN + mtu_bytes)
            .next_power_of_two()
            .max(2048);
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let block_bytes = frame_bytes.max(page).max(1 << 16);
        let blocks = (ring_bytes / block_bytes).max(4);
        let req: [u32; 4] = [
            block_bytes as u32,
            blocks as u32,
            frame_bytes as u32,
            (blocks * (block_bytes / frame_bytes)) as u32,
        ];
        // SAFETY: req has the layout of struct tpacket_req (four u32) and
        // lives across the call.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                SOL_PACKET,
                PACKET_RX_RING,
                req.as_ptr() as *const libc::c_void,
                std::mem::size_of_val(&req) as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error().into());
        }
        let map_bytes = block_bytes * blocks;
        // SAFETY: maps the ring the kernel just allocated for fd; the result
        // is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error().into());
        }
        Ok(Ring {
            base: base as *mut u8,
            map_bytes,
            frame_bytes,
            frames: req[3] as usize,
            next: 0,
        })
    }

    fn handshake(&mut self) -> Result<(), TransportError> {
        let Some(s) = self.session else {
            return Err(TransportError::NoPeer(0));
        };
        let hello = Header::control(Kind::Hello, s.nonce);
        let per_attempt = self
            .clock
            .from_ns(self.opts.handshake_timeout.as_nanos() as f64);
        for _ in 0..self.opts.handshake_attempts.max(1) {
            self.send_frame(&hello, 0, 0)?;
            let sent = self.clock.now();
            let deadline = sent.saturating_add(per_attempt);
            let yield_ticks = self.yield_ticks();
            loop {
                if let Some(f) = self.poll_frame()? {
                    match f.header {
                        Some(h)
                            if h.kind == Kind::HelloAck
                                && h.nonce == s.nonce
                                && f.src == s.peer =>
                        {
                            return Ok(());
                        }
                        Some(_) if f.src != s.peer => self.ignored.stranger += 1,
                        Some(_) => self.ignored.unexpected += 1,
                        None => self.ignored.malformed += 1,
                    }
                } else {
                    self.idle(sent, yield_ticks);
                }
                if self.clock.now() >= deadline {
                    break;
                }
            }
        }
        Err(TransportError::Timeout(
            self.opts.handshake_timeout * self.opts.handshake_attempts.max(1),
        ))
    }

    /// Server: wait up to `timeout` for a client to open a session; returns
    /// its MAC. Returns at once if a session is already open.
    pub fn accept(&mut self, timeout: Duration) -> Result<[u8; 6], TransportError> {
        let start = self.clock.now();
        let deadline = start.saturating_add(self.clock.from_ns(timeout.as_nanos() as f64));
        let yield_ticks = self.yield_ticks();
        loop {
            if let Some(s) = self.session {
                return Ok(s.peer);
            }
            match self.poll_frame()? {
                Some(f) => {
                    let _ = self.handle_frame(&f);
                }
                None => self.idle(start, yield_ticks),
            }
            if self.clock.now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
        }
    }

    /// Classify a received Ethernet frame of `len` bytes.
    #[inline]
    fn inspect(buf: &[u8], cost_ticks: u64) -> Seen {
        let mut src = [0u8; 6];
        if buf.len() < ETH_HDR_LEN {
            return Seen {
                src,
                header: None,
                cost_ticks,
            };
        }
        src.copy_from_slice(&buf[6..12]);
        let body = &buf[ETH_HDR_LEN..];
        let header = match Header::decode(body) {
            Ok(h)
                if body.len() == h.frame_len()
                    || (h.frame_len() < ETH_MIN_PAYLOAD && body.len() == ETH_MIN_PAYLOAD) =>
            {
                Some(h)
            }
            _ => None,
        };
        Seen {
            src,
            header,
            cost_ticks,
        }
    }

    /// One non-blocking look for a frame. `Ok(None)` when nothing is queued.
    #[inline]
    fn poll_frame(&mut self) -> Result<Option<Seen>, TransportError> {
        let t0 = self.clock.now();
        if let Some(ring) = &mut self.ring {
            let i = ring.next;
            let status = ring.status(i);
            if status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return Ok(None);
            }
            // SAFETY: the slot belongs to us until we store TP_STATUS_KERNEL;
            // it lies inside the mapping and starts with a tpacket2_hdr.
            let slot = unsafe { ring.base.add(i * ring.frame_bytes) };
            let rd_u32 = |off: usize| {
                // SAFETY: off < 32 (inside the slot's tpacket2_hdr), aligned.
                unsafe { std::ptr::read_volatile(slot.add(off) as *const u32) }
            };
            let rd_u16 = |off: usize| {
                // SAFETY: as above.
                unsafe { std::ptr::read_volatile(slot.add(off) as *const u16) }
            };
            let (len, snaplen, mac) = (rd_u32(4) as usize, rd_u32(8) as usize, rd_u16(12) as usize);
            let seen = if snaplen != len || mac + snaplen > ring.frame_bytes {
                Seen {
                    src: [0; 6],
                    header: None,
                    cost_ticks: 0,
                }
            } else {
                // SAFETY: [mac, mac + snaplen) lies inside the slot (checked
                // above), which the kernel has filled and handed to us.
                let data = unsafe { std::slice::from_raw_parts(slot.add(mac), snaplen) };
                Self::inspect(data, 0)
            };
            status.store(TP_STATUS_KERNEL, Ordering::Release);
            ring.next = (i + 1) % ring.frames;
            let t1 = self.clock.now();
            return Ok(Some(Seen {
                cost_ticks: t1.wrapping_sub(t0),
                ..seen
            }));
        }
        // SAFETY: rx_buf is a live, writable buffer of rx_buf.len() bytes;
        // no source address is asked for.
        let r = unsafe {
            libc::recvfrom(
                self.fd,
                self.rx_buf.as_mut_ptr() as *mut libc::c_void,
                self.rx_buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        let t1 = self.clock.now();
        if r >= 0 {
            let len = r as usize;
            let cost = t1.wrapping_sub(t0);
            if len > self.rx_buf.len() {
                return Ok(Some(Seen {
                    src: [0; 6],
                    header: None,
                    cost_ticks: cost,
                }));
            }
            return Ok(Some(Self::inspect(&self.rx_buf[..len], cost)));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            // The interface went down: nothing arrives, deadlines apply.
            Some(libc::ENETDOWN) => Ok(None),
            _ => Err(TransportError::Io(err)),
        }
    }

    /// Act on one frame; `Ok(Some)` when it completed a message.
    fn handle_frame(&mut self, f: &Seen) -> Result<Option<Received>, TransportError> {
        let Some(h) = f.header else {
            self.ignored.malformed += 1;
            return Ok(None);
        };
        if self.role == Role::Server && h.kind == Kind::Hello {
            if let Some(gate) = &self.hello_gate {
                let allowed = gate.load(std::sync::atomic::Ordering::Acquire);
                if allowed == 0 || allowed != h.nonce {
                    self.ignored.wrong_nonce += 1;
                    return Ok(None);
                }
            }
            self.adopt(f.src, h.nonce)?;
            return Ok(None);
        }
        let Some(s) = self.session else {
            self.ignored.stranger += 1;
            return Ok(None);
        };
        if f.src != s.peer {
            self.ignored.stranger += 1;
            return Ok(None);
        }
        if h.nonce != s.nonce {
            self.ignored.wrong_nonce += 1;
            return Ok(None);
        }
        match h.kind {
            Kind::Data => match self.reasm.offer(&h, f.cost_ticks) {
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
                Err(TransportError::PeerGone(format!(
                    "{} said bye",
                    format_mac(&s.peer)
                )))
            }
            Kind::Hello | Kind::HelloAck => {
                self.ignored.unexpected += 1;
                Ok(None)
            }
        }
    }

    /// Server: a Hello from `peer`. The same session again (a retried
    /// Hello) is only re-acknowledged; anything else starts a new session.
    fn adopt(&mut self, peer: [u8; 6], nonce: u64) -> Result<(), TransportError> {
        let same = matches!(self.session, Some(s) if s.peer == peer && s.nonce == nonce);
        if !same {
            self.session = Some(Session { nonce, peer });
            self.reasm.reset();
            self.gone = false;
            self.sessions_started += 1;
            tracing::debug!(
                "raw_eth: session {nonce:#x} with {} on {}",
                format_mac(&peer),
                self.ifname
            );
        }
        // Best effort: a lost ack makes the client retry its Hello.
        match self.send_frame(&Header::control(Kind::HelloAck, nonce), 0, 0) {
            Ok(()) | Err(TransportError::Timeout(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Send one frame to the session peer: Ethernet and frame header from
    /// the stack, `tx_payload[off..off + len]` by reference. Spins on a full
    /// queue for at most `send_timeout`.
    fn send_frame(&mut self, h: &Header, off: usize, len: usize) -> Result<(), TransportError> {
        let Some(s) = self.session else {
            return Err(TransportError::NoPeer(0));
        };
        #[cfg(test)]
        if h.kind == Kind::Data {
            self.tx_data_frames += 1;
            if Some(self.tx_data_frames) == self.drop_tx_data_frame {
                return Ok(());
            }
        }
        let mut prefix = [0u8; PREFIX_LEN];
        prefix[0..6].copy_from_slice(&s.peer);
        prefix[6..12].copy_from_slice(&self.info.mac);
        prefix[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
        h.encode(&mut prefix[ETH_HDR_LEN..])
            .map_err(|e| TransportError::Protocol(format!("cannot encode frame: {e}")))?;
        let payload = &self.tx_payload[off..off + len];
        debug_assert_eq!(len, h.frag_len as usize);
        let iov = [
            libc::iovec {
                iov_base: prefix.as_ptr() as *mut libc::c_void,
                iov_len: PREFIX_LEN,
            },
            libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: len,
            },
        ];
        // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = if len == 0 { 1 } else { 2 };
        let want = PREFIX_LEN + len;
        let mut deadline = None;
        loop {
            // SAFETY: msg points at iovecs that live until the call returns;
            // the kernel only reads them. The socket is bound to the
            // interface, so no address is needed.
            let r = unsafe { libc::sendmsg(self.fd, &msg, libc::MSG_DONTWAIT) };
            if r >= 0 {
                if r as usize != want {
                    return Err(TransportError::Protocol(format!(
                        "frame truncated on send: {r} of {want} bytes"
                    )));
                }
                return Ok(());
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    let now = self.clock.now();
                    let end = *deadline.get_or_insert_with(|| {
                        now.saturating_add(
                            self.clock.from_ns(self.opts.send_timeout.as_nanos() as f64),
                        )
                    });
                    if now >= end {
                        return Err(TransportError::Timeout(self.opts.send_timeout));
                    }
                    std::hint::spin_loop();
                }
                _ => return Err(TransportError::Io(err)),
            }
        }
    }

    /// Ticks after which an empty wait starts yielding (`u64::MAX`: never).
    fn yield_ticks(&self) -> u64 {
        self.opts
            .yield_after
            .map_or(u64::MAX, |d| self.clock.from_ns(d.as_nanos() as f64))
    }

    /// Nothing arrived: spin, or yield the CPU once the wait that began at
    /// `since` has lasted `yield_ticks`.
    #[inline]
    fn idle(&self, since: u64, yield_ticks: u64) {
        let waited = self.clock.now().wrapping_sub(since);
        if waited >= self.clock.from_ns(self.opts.sleep_after.as_nanos() as f64) {
            let mut pfd = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is a valid pollfd for the call and the count 1
            // matches it; poll keeps no pointer. 10 ms at most, so the
            // caller's deadline is checked often enough.
            unsafe { libc::poll(&mut pfd, 1, 10) };
        } else if waited >= yield_ticks {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        } else {
            std::hint::spin_loop();
        }
    }

    /// Server: accept only Hellos whose nonce `gate` holds; others are
    /// ignored and counted as `wrong_nonce`.
    pub fn gate_hellos(&mut self, gate: std::sync::Arc<std::sync::atomic::AtomicU64>) {
        self.hello_gate = Some(gate);
    }

    /// Frames received and not used, by reason.
    pub fn ignored(&self) -> IgnoredFrames {
        IgnoredFrames {
            dropped_incomplete: self.reasm.dropped_incomplete,
            ..self.ignored
        }
    }
    /// Frames the kernel dropped for this socket since the last call (a full
    /// ring or receive buffer), from PACKET_STATISTICS.
    pub fn kernel_drops(&self) -> Result<u64, TransportError> {
        let mut st = [0u32; 2]; // struct tpacket_stats { tp_packets, tp_drops }
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: st is writable and len gives its size.
        let rc = unsafe {
            libc::getsockopt(
                self.fd,
                SOL_PACKET,
                PACKET_STATISTICS,
                st.as_mut_ptr() as *mut libc::c_void,
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error().into());
        }
        Ok(u64::from(st[1]))
    }
    /// The session peer's MAC, if a session is open.
    pub fn peer_mac(&self) -> Option<[u8; 6]> {
        self.session.map(|s| s.peer)
    }
    /// This end's interface.
    pub fn interface(&self) -> InterfaceInfo {
        self.info
    }
    /// The current session's nonce.
    pub fn nonce(&self) -> Option<u64> {
        self.session.map(|s| s.nonce)
    }
    /// Payload bytes per frame.
    pub fn max_frag_bytes(&self) -> usize {
        self.max_frag_bytes
    }
    /// Receive path in use.
    pub fn rx_mode(&self) -> RxMode {
        if self.ring.is_some() {
            RxMode::Ring
        } else {
            RxMode::Recv
        }
    }
    /// Sessions this server has adopted.
    pub fn sessions_started(&self) -> u64 {
        self.sessions_started
    }
    /// The socket (for poll-based waiting outside the probe loop).
    pub fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl Transport for RawEthTransport {
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
        self.last_activity = self.clock.now();
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
        let frag = self.max_frag_bytes;
        let count = frame::fragment_count(bytes, frag);
        for i in 0..count {
            let off = i * frag;
            let len = frag.min(bytes - off);
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
            self.send_frame(&h, off, len)?;
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
        // A prober spins from the start of every wait; a responder from its
        // last frame, so an idle one sleeps.
        let first = if self.role == Role::Client {
            self.last_activity.max(start)
        } else {
            self.last_activity
        };
        let (mut since, yield_ticks) = (first, self.yield_ticks());
        loop {
            match self.poll_frame()? {
                Some(f) => {
                    since = self.clock.now();
                    self.last_activity = since;
                    if let Some(r) = self.handle_frame(&f)? {
                        return Ok(r);
                    }
                }
                None => self.idle(since, yield_ticks),
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

impl Drop for RawEthTransport {
    fn drop(&mut self) {
        if self.session.is_some() && !self.gone {
            self.opts.send_timeout = Duration::ZERO;
            let nonce = self.session.map_or(0, |s| s.nonce);
            let _ = self.send_frame(&Header::control(Kind::Bye, nonce), 0, 0);
        }
    }
}

/// How the link layer opens a raw Ethernet link (`crate::transport::open`).
mod open {
    use super::{RawEthOptions, RawEthTransport};
    use crate::transport::open::{LinkSpec, Local, Open, OpenError, Peer, Rendezvous};

    fn options(spec: &LinkSpec) -> RawEthOptions {
        let d = RawEthOptions::default();
        RawEthOptions {
            max_msg_bytes: spec
                .options
                .max_msg_bytes
                .map_or(d.max_msg_bytes, |m| m.max(d.max_msg_bytes)),
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
                t.gate_hellos(gate.clone());
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
mod tests {
    use super::*;
    use std::process::Command;
    use std::sync::atomic::AtomicUsize;
    use std::thread::JoinHandle;

    const LONG: Duration = Duration::from_secs(10);

    #[test]
    fn macs_parse_and_format() {
        let m = parse_mac("AA:bb:0c:d:ee:ff").unwrap();
        assert_eq!(m, [0xaa, 0xbb, 0x0c, 0x0d, 0xee, 0xff]);
        assert_eq!(format_mac(&m), "aa:bb:0c:0d:ee:ff");
        assert_eq!(parse_mac("02-00-00-00-00-01").unwrap()[5], 1);
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:fg",
            "aaa:bb:cc:dd:ee:f",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
        assert!(RxMode::from_str("ring").is_ok() && "recv".parse::<RxMode>().is_ok());
        assert!("xdp".parse::<RxMode>().is_err());
    }

    use std::str::FromStr;

    /// Run the classic BPF program the way the kernel does, for the few
    /// opcodes it uses.
    fn run_filter(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
        let (mut pc, mut a) = (0usize, 0u32);
        loop {
            let i = prog[pc];
            match i.code {
                0x28 => {
                    let k = i.k as usize;
                    let Some(b) = pkt.get(k..k + 2) else { return 0 };
                    a = u32::from(u16::from_be_bytes([b[0], b[1]]));
                }
                0x20 => {
                    let k = i.k as usize;
                    let Some(b) = pkt.get(k..k + 4) else { return 0 };
                    a = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
                }
                0x15 => {
                    pc += usize::from(if a == i.k { i.jt } else { i.jf });
                }
                0x06 => return i.k,
                c => panic!("opcode {c:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn filter_passes_only_our_ethertype_to_our_mac() {
        let me = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        let prog = filter_program(&me);
        let frame = |dst: [u8; 6], et: u16| {
            let mut f = vec![0u8; 60];
            f[0..6].copy_from_slice(&dst);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
            f[12..14].copy_from_slice(&et.to_be_bytes());
            f
        };
        assert!(run_filter(&prog, &frame(me, ETHERTYPE)) > 0);
        assert_eq!(run_filter(&prog, &frame(me, 0x0800)), 0);
        assert_eq!(run_filter(&prog, &frame(me, 0x88B6)), 0);
        let mut other = me;
        other[5] ^= 1;
        assert_eq!(run_filter(&prog, &frame(other, ETHERTYPE)), 0);
        other = me;
        other[0] ^= 0x80;
        assert_eq!(run_filter(&prog, &frame(other, ETHERTYPE)), 0);
        assert_eq!(run_filter(&prog, &frame([0xff; 6], ETHERTYPE)), 0);
        assert_eq!(run_filter(&prog, &[0u8; 10]), 0);
    }

    #[test]
    fn padded_and_truncated_frames() {
        let mut f = [0u8; ETH_HDR_LEN + ETH_MIN_PAYLOAD + 10];
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 7]);
        let h = Header {
            kind: Kind::Data,
            answer: true,
            nonce: 5,
            seq: 1,
            frag_offset: 0,
            msg_len: 2,
            report_ns: 0,
            frag_index: 0,
            frag_count: 1,
            frag_len: 2,
        };
        h.encode(&mut f[ETH_HDR_LEN..]).unwrap();
        let exact = ETH_HDR_LEN + HEADER_LEN + 2;
        let s = RawEthTransport::inspect(&f[..exact], 3);
        assert_eq!((s.header, s.src[5], s.cost_ticks), (Some(h), 7, 3));
        // Padded to the Ethernet minimum: fine; beyond it: not ours.
        assert_eq!(
            RawEthTransport::inspect(&f[..ETH_HDR_LEN + ETH_MIN_PAYLOAD], 0).header,
            Some(h)
        );
        assert_eq!(
            RawEthTransport::inspect(&f[..ETH_HDR_LEN + ETH_MIN_PAYLOAD + 1], 0).header,
            None
        );
        assert_eq!(RawEthTransport::inspect(&f[..exact - 1], 0).header, None);
        assert_eq!(RawEthTransport::inspect(&f[..5], 0).header, None);
    }

    #[test]
    fn random_frames_never_panic() {
        use rand::{Rng, RngCore, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(0x7261_775f_6574_6831);
        let mut good = [0u8; ETH_HDR_LEN + HEADER_LEN + 100];
        let h = Header {
            kind: Kind::Data,
            answer: false,
            nonce: 9,
            seq: 3,
            frag_offset: 0,
            msg_len: 100,
            report_ns: 1,
            frag_index: 0,
            frag_count: 1,
            frag_len: 100,
        };
        h.encode(&mut good[ETH_HDR_LEN..]).unwrap();
        let mut buf = vec![0u8; 256];
        let mut accepted = 0;
        for i in 0..50_000 {
            let len = rng.gen_range(0..buf.len());
            if i & 1 == 0 {
                rng.fill_bytes(&mut buf[..len]);
            } else {
                let n = len.min(good.len());
                buf[..n].copy_from_slice(&good[..n]);
                for _ in 0..rng.gen_range(0..3) {
                    if n > 0 {
                        buf[rng.gen_range(0..n)] = rng.gen();
                    }
                }
            }
            let s = RawEthTransport::inspect(&buf[..len], 0);
            if let Some(h) = s.header {
                accepted += 1;
                assert!(ETH_HDR_LEN + h.frame_len() <= len);
            }
        }
        assert!(accepted > 0);
    }

    #[test]
    fn unknown_interface_is_a_clear_error() {
        match interface_info("ng-no-such0") {
            Err(TransportError::Io(e)) => {
                assert_eq!(e.kind(), io::ErrorKind::NotFound);
                assert!(e.to_string().contains("ng-no-such0"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(interface_info("").is_err());
        assert!(interface_info("a-name-far-too-long").is_err());
        let lo = interface_info("lo");
        assert!(matches!(lo, Err(TransportError::Protocol(_))), "{lo:?}");
        let e = eperm_message(io::Error::from_raw_os_error(libc::EPERM));
        assert!(
            needs_cap_net_raw(&e) && e.to_string().contains("CAP_NET_RAW"),
            "{e}"
        );
        assert!(!needs_cap_net_raw(&TransportError::Io(
            io::Error::from_raw_os_error(libc::ENODEV)
        )));
    }

    // --- on a veth pair inside a private network namespace (root only) ---

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    /// A network namespace holding a veth pair `rea` <-> `reb`; deleted on
    /// drop (also when a test fails).
    struct Netns(String);

    impl Netns {
        fn new(mtu: usize) -> Option<Netns> {
            if !is_root() {
                eprintln!("skipped: raw_eth tests need root (network namespaces, CAP_NET_RAW)");
                return None;
            }
            static N: AtomicUsize = AtomicUsize::new(0);
            let name = format!(
                "ngre-u{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            );
            let ns = Netns(name.clone());
            let ip = |args: &[&str]| {
                let st = Command::new("ip").args(args).status().expect("run ip");
                assert!(st.success(), "ip {args:?}");
            };
            ip(&["netns", "add", &name]);
            ip(&[
                "-n", &name, "link", "add", "rea", "type", "veth", "peer", "name", "reb",
            ]);
            for dev in ["rea", "reb"] {
                ip(&[
                    "-n",
                    &name,
                    "link",
                    "set",
                    dev,
                    "mtu",
                    &mtu.to_string(),
                    "up",
                ]);
            }
            Some(ns)
        }

        /// Run `f` on a thread inside the namespace (sockets keep it).
        fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
            let path = format!("/var/run/netns/{}", self.0);
            std::thread::spawn(move || {
                let file = std::fs::File::open(&path).expect("open netns");
                // SAFETY: file is an open netns descriptor; setns affects
                // only this thread.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", io::Error::last_os_error());
                f()
            })
            .join()
            .expect("thread in netns")
        }
    }

    impl Drop for Netns {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }

    fn opts(rx: RxMode) -> RawEthOptions {
        RawEthOptions {
            handshake_timeout: Duration::from_millis(300),
            handshake_attempts: 10,
            rx,
            buffer_bytes: 4 << 20,
            ..RawEthOptions::default()
        }
    }

    #[derive(Debug)]
    struct ServerResult {
        counters: Counters,
        ignored: IgnoredFrames,
        sessions: u64,
        received: Vec<Received>,
    }

    /// An echo server on `reb` (answers every `answer` message with one of
    /// the same size, reporting its o_r), ending on Bye or after a long
    /// silence. Returns the client's MAC... i.e. the server's MAC and thread.
    fn echo_server(
        ns: &Netns,
        o: RawEthOptions,
        drop_tx: Option<u64>,
    ) -> ([u8; 6], JoinHandle<ServerResult>) {
        let mut server = ns.run(move || RawEthTransport::listen("reb", o).unwrap());
        server.drop_tx_data_frame = drop_tx;
        let mac = server.interface().mac;
        let h = std::thread::spawn(move || {
            let mut received = Vec::new();
            let mut idle_ms = 0;
            while idle_ms < 20_000 {
                match server.recv(None, Duration::from_millis(100)) {
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
                received,
            }
        });
        (mac, h)
    }

    fn client(ns: &Netns, mac: [u8; 6], o: RawEthOptions) -> RawEthTransport {
        ns.run(move || RawEthTransport::connect("rea", mac, o).unwrap())
    }

    fn ping(c: &mut RawEthTransport, bytes: usize) -> Received {
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
        assert!(!r.meta.answer);
        r
    }

    fn ping_pong(rx: RxMode, mtu: usize) {
        let Some(ns) = Netns::new(mtu) else { return };
        let o = opts(rx);
        let (mac, h) = echo_server(&ns, o, None);
        let mut c = client(&ns, mac, o);
        assert_eq!(c.rx_mode(), rx);
        assert_eq!(c.max_frag_bytes(), mtu - HEADER_LEN);
        assert_eq!(c.interface().mtu_bytes, mtu);
        assert_eq!(c.peer_mac(), Some(mac));
        assert_ne!(c.nonce(), Some(0));
        let sizes = [0usize, 1, 45, mtu - HEADER_LEN, mtu, 64 << 10, 1 << 20];
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
        assert_eq!(c.ignored(), IgnoredFrames::default());
        assert_eq!(c.kernel_drops().unwrap(), 0);
        let nonce = c.nonce();
        drop(c);
        let s = h.join().unwrap();
        assert_eq!(s.sessions, 1);
        assert_eq!(s.counters.recv_messages, n);
        assert_eq!(s.counters.sent_bytes, total);
        assert!(s
            .received
            .iter()
            .all(|r| r.meta.answer && r.meta.report_ns == 7));
        assert_eq!(s.ignored, IgnoredFrames::default());
        assert!(nonce.is_some());
    }

    #[test]
    fn ping_pong_ring_mtu_1500() {
        ping_pong(RxMode::Ring, 1500);
    }

    #[test]
    fn ping_pong_recv_mtu_1500() {
        ping_pong(RxMode::Recv, 1500);
    }

    #[test]
    fn ping_pong_ring_jumbo() {
        ping_pong(RxMode::Ring, 9000);
    }

    #[test]
    fn lost_frame_times_out_then_next_message_succeeds() {
        let Some(ns) = Netns::new(1500) else { return };
        let o = opts(RxMode::Ring);
        // The server loses the first frame of its second answer.
        let (mac, h) = echo_server(&ns, o, Some(1));
        let mut c = client(&ns, mac, o);
        // The client loses the middle frame of its first request.
        c.drop_tx_data_frame = Some(2);
        let meta = Meta {
            answer: true,
            report_ns: 7,
        };
        let short = Duration::from_millis(300);
        // 1: 3 frames sent, 2 arrive: no answer.
        c.send(0, 4000, meta).unwrap();
        let e = c.recv(Some(0), short).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(d) if d == short), "{e}");
        // 2: the request arrives (dropping the incomplete #1); its answer
        // (the server's first data frames: #1 is lost)
        // loses a frame.
        c.send(0, 4000, meta).unwrap();
        let e = c.recv(Some(0), short).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        // 3: everything arrives; the incomplete answer #2 is dropped.
        let r = ping(&mut c, 4000);
        assert!(r.overhead_ns > 0.0);
        assert_eq!(c.ignored().dropped_incomplete, 1);
        assert_eq!(c.counters().recv_messages, 1);
        drop(c);
        let s = h.join().unwrap();
        assert_eq!(s.ignored.dropped_incomplete, 1);
        assert_eq!(s.counters.recv_messages, 2);
        assert_eq!(s.counters.sent_messages, 2);
    }

    /// A raw socket in the namespace, sending hand-made frames on `dev`.
    fn injector(ns: &Netns, dev: &'static str) -> (OwnedFd, InterfaceInfo) {
        ns.run(move || {
            // SAFETY: plain socket(2) call; checked below.
            let fd =
                unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
            assert!(fd >= 0);
            // SAFETY: fresh descriptor we own.
            let sock = unsafe { OwnedFd::from_raw_fd(fd) };
            let info = interface_info(dev).unwrap();
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_ifindex = info.index as i32;
            // SAFETY: valid sockaddr_ll of the given size.
            let rc = unsafe {
                libc::bind(
                    fd,
                    &sll as *const _ as *const libc::sockaddr,
                    std::mem::size_of_val(&sll) as u32,
                )
            };
            assert_eq!(rc, 0);
            (sock, info)
        })
    }

    fn inject(sock: &OwnedFd, dst: [u8; 6], src: [u8; 6], body: &[u8]) {
        let mut f = Vec::with_capacity(ETH_HDR_LEN + body.len());
        f.extend_from_slice(&dst);
        f.extend_from_slice(&src);
        f.extend_from_slice(&ETHERTYPE.to_be_bytes());
        f.extend_from_slice(body);
        // SAFETY: f is a live buffer of f.len() bytes.
        let r = unsafe {
            libc::send(
                sock.as_raw_fd(),
                f.as_ptr() as *const libc::c_void,
                f.len(),
                0,
            )
        };
        assert_eq!(r as usize, f.len(), "{}", io::Error::last_os_error());
    }

    fn data_frame(nonce: u64, seq: u32, bytes: u32) -> Vec<u8> {
        let h = Header {
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
        };
        let mut v = vec![0u8; h.frame_len()];
        h.encode(&mut v).unwrap();
        v
    }

    #[test]
    fn wrong_nonce_stranger_malformed_and_stale_frames_are_ignored_and_counted() {
        let Some(ns) = Netns::new(1500) else { return };
        let o = opts(RxMode::Ring);
        let (server_mac, h) = echo_server(&ns, o, None);
        let mut c = client(&ns, server_mac, o);
        ping(&mut c, 10); // the server's newest seq is now 1
        let nonce = c.nonce().unwrap();
        let client_mac = c.interface().mac;
        let (inj, _) = injector(&ns, "rea");
        let stranger = [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01];
        // Wrong nonce, from the client's MAC.
        inject(
            &inj,
            server_mac,
            client_mac,
            &data_frame(nonce ^ 1, 100, 10),
        );
        // Right nonce, from a stranger; a stranger's Hello-less Bye.
        inject(&inj, server_mac, stranger, &data_frame(nonce, 100, 10));
        // Garbage and a truncated frame from the client's MAC.
        inject(
            &inj,
            server_mac,
            client_mac,
            b"not a frame at all, not at all, no",
        );
        inject(
            &inj,
            server_mac,
            client_mac,
            &data_frame(nonce, 100, 10)[..HEADER_LEN + 5],
        );
        // An old message (seq 0 < 1), right nonce and MAC.
        inject(&inj, server_mac, client_mac, &data_frame(nonce, 0, 10));
        // Another EtherType and another destination never reach the socket.
        let mut other = client_mac;
        other[5] ^= 0x40;
        inject(&inj, other, client_mac, &data_frame(nonce, 100, 10));
        // None of these was answered; a real message still works.
        let e = c.recv(Some(0), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, TransportError::Timeout(_)), "{e}");
        ping(&mut c, 10);
        assert_eq!(c.ignored(), IgnoredFrames::default());
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
    fn a_new_hello_takes_over_and_bye_is_peer_gone() {
        let Some(ns) = Netns::new(1500) else { return };
        let o = opts(RxMode::Recv);
        let (mac, h) = echo_server(&ns, o, None);
        let mut a = client(&ns, mac, o);
        ping(&mut a, 10);
        // A second client on the same interface (same MAC, new nonce).
        let mut b = client(&ns, mac, o);
        ping(&mut b, 20);
        // A's frames now carry a stale nonce: ignored, A times out.
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
        ping(&mut b, 30);
        a.session = None; // A leaves without a Bye
        drop(a);
        drop(b); // Bye: the server ends
        let s = h.join().unwrap();
        assert_eq!(s.sessions, 2);
        assert_eq!(
            s.received.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            [10, 20, 30]
        );
        assert_eq!(s.ignored.wrong_nonce, 1);

        // A server that says Bye: the client's next wait is PeerGone.
        let (mac, _h) = {
            let mut server = ns.run(move || RawEthTransport::listen("reb", o).unwrap());
            let mac = server.interface().mac;
            (
                mac,
                std::thread::spawn(move || {
                    server.accept(LONG).unwrap();
                    let r = server.recv(Some(0), LONG).unwrap();
                    server.send(0, r.bytes, Meta::default()).unwrap();
                }),
            )
        };
        let mut c = client(&ns, mac, o);
        ping(&mut c, 10);
        _h.join().unwrap();
        let e = c.recv(Some(0), LONG).unwrap_err();
        assert!(matches!(e, TransportError::PeerGone(_)), "{e}");
        assert!(matches!(
            c.send(0, 1, Meta::default()),
            Err(TransportError::PeerGone(_))
        ));
    }

    #[test]
    fn silent_peer_is_a_timeout_not_a_hang() {
        let Some(ns) = Netns::new(1500) else { return };
        let o = RawEthOptions {
            handshake_timeout: Duration::from_millis(50),
            handshake_attempts: 3,
            ..opts(RxMode::Ring)
        };
        let r = ns
            .run(move || RawEthTransport::connect("rea", [0x02, 0, 0, 0, 0, 0x42], o).map(|_| ()));
        assert!(
            matches!(r, Err(TransportError::Timeout(d)) if d == Duration::from_millis(150)),
            "{r:?}"
        );
        let mut server = ns.run(move || RawEthTransport::listen("reb", o).unwrap());
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
        let small = RawEthOptions {
            mtu_bytes: Some(100),
            ..o
        };
        let r = ns.run(move || RawEthTransport::listen("reb", small).map(|_| ()));
        assert!(matches!(r, Err(TransportError::Protocol(_))), "{r:?}");
    }
}
