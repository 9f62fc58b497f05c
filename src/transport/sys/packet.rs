//! AF_PACKET system calls: the raw socket, the interface ioctls, the
//! classic BPF filter, packet socket options and the PACKET_MMAP TPACKET_V2
//! receive ring.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use super::socket::{check, setsockopt, setsockopt_int};
use crate::transport::TransportError;

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
/// Ethernet header: destination, source, EtherType.
const ETH_HDR_LEN: usize = 14;
/// Offset of the link header in a TPACKET_V2 ring slot:
/// TPACKET_ALIGN(TPACKET2_HDRLEN (32 + sizeof sockaddr_ll = 52) + 16) − 14.
const RING_MAC_OFFSET: usize = 80 - ETH_HDR_LEN;

/// What the kernel says about an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub index: u32,
    pub mac: [u8; 6],
    pub mtu_bytes: usize,
}

/// A non-blocking `AF_PACKET`/`SOCK_RAW` socket with protocol 0: it
/// receives nothing until [`bind`] names a protocol, so a filter can be in
/// place first. Without CAP_NET_RAW: [`TransportError::Io`] of kind
/// `PermissionDenied` whose message says so.
pub fn open_socket() -> Result<OwnedFd, TransportError> {
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
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// EPERM/EACCES from `socket(AF_PACKET)` as an error that names the missing
/// capability and the way out.
pub(crate) fn eperm_message(e: io::Error) -> TransportError {
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

/// Bind a packet socket to interface `index` and EtherType `protocol`
/// (0: send only).
pub fn bind(fd: BorrowedFd<'_>, index: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: all-zero is a valid sockaddr_ll.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = index as i32;
    // SAFETY: sll is a valid sockaddr_ll and the length is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    check(rc)
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

fn ioctl_ifreq(
    fd: BorrowedFd<'_>,
    req: libc::c_ulong,
    ifname: &str,
) -> Result<IfReq, TransportError> {
    let mut r = ifreq(ifname)?;
    // SAFETY: r is a writable ifreq-sized, ifreq-laid-out struct; these
    // SIOCGIF* requests read the name and write at most the union.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut r as *mut IfReq) };
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
    interface_info_fd(sock.as_fd(), ifname)
}

/// [`interface_info`] through a socket the caller already has.
pub fn interface_info_fd(
    fd: BorrowedFd<'_>,
    ifname: &str,
) -> Result<InterfaceInfo, TransportError> {
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

/// The classic BPF program: accept frames of `ethertype` whose destination
/// is `mac`, drop everything else.
pub fn filter_program(mac: &[u8; 6], ethertype: u16) -> [libc::sock_filter; 8] {
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    const LD_H_ABS: u16 = 0x28;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const RET_K: u16 = 0x06;
    [
        ins(LD_H_ABS, 0, 0, 12),                // A = EtherType
        ins(JEQ_K, 0, 5, u32::from(ethertype)), // else drop
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

/// Attach a classic BPF program (SO_ATTACH_FILTER); the kernel copies it.
pub fn attach_filter(fd: BorrowedFd<'_>, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // fprog points at `prog`, which lives across the call; the kernel
    // copies the program and does not write through the pointer.
    setsockopt(fd, libc::SOL_SOCKET, SO_ATTACH_FILTER, &fprog)
}

/// PACKET_IGNORE_OUTGOING (Linux ≥ 4.20): the socket does not see its own
/// transmissions looped back.
pub fn ignore_outgoing(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
}

/// PACKET_QDISC_BYPASS: frames go straight to the driver (and past any
/// traffic shaping on the interface).
pub fn qdisc_bypass(fd: BorrowedFd<'_>) -> io::Result<()> {
    setsockopt_int(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1)
}

/// Frames the kernel dropped for this socket since the last call (a full
/// ring or receive buffer), from PACKET_STATISTICS.
pub fn kernel_drops(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut st = [0u32; 2]; // struct tpacket_stats { tp_packets, tp_drops }
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: st is writable and len gives its size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    check(rc).map(|()| u64::from(st[1]))
}

/// A PACKET_MMAP TPACKET_V2 receive ring. (V3 hands frames over per block,
/// on a block timeout of at least a millisecond when traffic is light:
/// useless for latency.)
pub struct Ring {
    base: *mut u8,
    map_bytes: usize,
    frame_bytes: usize,
    frames: usize,
    next: usize,
}

// SAFETY: the mapping is owned by this value alone and only touched through
// &mut self; moving the value to another thread moves that ownership.
unsafe impl Send for Ring {}

impl Ring {
    /// Set up and map a receive ring of about `ring_bytes` on `fd` (before
    /// it is bound), with slots for frames of `mtu_bytes`.
    pub fn map(fd: BorrowedFd<'_>, mtu_bytes: usize, ring_bytes: usize) -> io::Result<Ring> {
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
        // The layout of struct tpacket_req: four u32.
        setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req)?;
        let map_bytes = block_bytes * blocks;
        // SAFETY: maps the ring the kernel just allocated for fd; the result
        // is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            base: base as *mut u8,
            map_bytes,
            frame_bytes,
            frames: req[3] as usize,
            next: 0,
        })
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: i < frames, so the slot lies inside the mapping; every slot
        // starts with the u32 tp_status at a 16-byte-aligned offset; the
        // kernel and we access it atomically.
        unsafe { &*(self.base.add(i * self.frame_bytes) as *const AtomicU32) }
    }

    /// Look at the next slot without a system call: `None` when the kernel
    /// has not filled it; otherwise `f` sees the frame (from the Ethernet
    /// header on; `None` when the slot's lengths are inconsistent) and the
    /// slot goes back to the kernel once `f` returns.
    #[inline]
    pub fn take<R>(&mut self, f: impl FnOnce(Option<&[u8]>) -> R) -> Option<R> {
        let i = self.next;
        let status = self.status(i);
        if status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: i < frames: the slot lies inside the mapping and starts
        // with a tpacket2_hdr; it belongs to us until we store
        // TP_STATUS_KERNEL below.
        let slot = unsafe { self.base.add(i * self.frame_bytes) };
        let rd_u32 = |off: usize| {
            // SAFETY: off < 32 (inside the slot's tpacket2_hdr), aligned.
            unsafe { std::ptr::read_volatile(slot.add(off) as *const u32) }
        };
        let rd_u16 = |off: usize| {
            // SAFETY: as above.
            unsafe { std::ptr::read_volatile(slot.add(off) as *const u16) }
        };
        let (len, snaplen, mac) = (rd_u32(4) as usize, rd_u32(8) as usize, rd_u16(12) as usize);
        let r = if snaplen != len || mac + snaplen > self.frame_bytes {
            f(None)
        } else {
            // SAFETY: [mac, mac + snaplen) lies inside the slot (checked
            // above), which the kernel has filled and handed to us; the
            // slice does not outlive `f`, which returns before the slot goes
            // back to the kernel.
            f(Some(unsafe {
                std::slice::from_raw_parts(slot.add(mac), snaplen)
            }))
        };
        self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
        self.next = (i + 1) % self.frames;
        Some(r)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_bytes are exactly what mmap returned; no
        // reference into the mapping outlives the ring.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.map_bytes) };
    }
}
