//! Socket system calls shared by the UDP and AF_PACKET devices: socket
//! addresses in the kernel's form, one non-blocking `sendmsg` of a header
//! and a payload (two iovecs, no copy), one non-blocking `recvfrom`, socket
//! options (buffer sizes, IP_MTU) and `poll(2)` for readability.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use crate::transport::TransportError;

/// What `send`/`recv` report when the peer's port is closed (an ICMP port
/// unreachable reached a connected socket).
pub const REFUSED: &str = "ICMP port unreachable: the peer's socket is closed";

/// A socket address in the form `sendmsg`/`recvfrom` take.
#[derive(Clone, Copy)]
pub struct RawAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

impl RawAddr {
    /// Room for any address, for `recvfrom` to fill.
    pub fn empty() -> RawAddr {
        RawAddr {
            // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
            storage: unsafe { std::mem::zeroed() },
            len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
        }
    }

    pub fn new(addr: &SocketAddr) -> RawAddr {
        let mut r = RawAddr::empty();
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
                unsafe { std::ptr::write(&mut r.storage as *mut _ as *mut libc::sockaddr_in, sin) };
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
                unsafe {
                    std::ptr::write(&mut r.storage as *mut _ as *mut libc::sockaddr_in6, sin6)
                };
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        r.len = len as libc::socklen_t;
        r
    }

    /// The address, when it is an IPv4 or IPv6 one the kernel filled in.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
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

/// One non-blocking `sendmsg` of `head` followed by `payload` (two iovecs:
/// the payload is not copied) to `to`, or without an address on a connected
/// or interface-bound socket. `Ok(true)`: sent whole; `Ok(false)`: the
/// send queue is full (EAGAIN, ENOBUFS), try again. EINTR is retried; an
/// ICMP port unreachable is [`TransportError::PeerGone`]; a short send is a
/// protocol error (a datagram socket sends all or nothing).
pub fn send_two(
    fd: BorrowedFd<'_>,
    to: Option<&RawAddr>,
    head: &[u8],
    payload: &[u8],
) -> Result<bool, TransportError> {
    let iov = [
        libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
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
    if let Some(d) = to {
        msg.msg_name = &d.storage as *const _ as *mut libc::c_void;
        msg.msg_namelen = d.len;
    }
    let want = head.len() + payload.len();
    loop {
        // SAFETY: msg points at iovecs and an address that live until the
        // call returns; the kernel only reads them.
        let r = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
        if r >= 0 {
            if r as usize != want {
                return Err(TransportError::Protocol(format!(
                    "frame truncated on send: {r} of {want} bytes"
                )));
            }
            return Ok(true);
        }
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::ENOBUFS) => Ok(false),
            Some(libc::ECONNREFUSED) => Err(TransportError::PeerGone(REFUSED.into())),
            _ => Err(TransportError::Io(err)),
        };
    }
}

/// One non-blocking `recvfrom` into `buf` (with the source address into
/// `from` when given). `Ok(Some(len))`: a datagram of `len` bytes (more than
/// `buf.len()` when it was truncated); `Ok(None)`: nothing queued (EAGAIN,
/// EINTR). Other errors are returned as the kernel gave them.
#[inline]
pub fn recv_from(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    from: Option<&mut RawAddr>,
) -> io::Result<Option<usize>> {
    let (name, name_len) = match from {
        Some(a) => {
            a.len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            (
                &mut a.storage as *mut _ as *mut libc::sockaddr,
                &mut a.len as *mut libc::socklen_t,
            )
        }
        None => (std::ptr::null_mut(), std::ptr::null_mut()),
    };
    // SAFETY: buf is a live, writable buffer of buf.len() bytes; name and
    // name_len are null or describe a writable sockaddr_storage and its size.
    let r = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            name,
            name_len,
        )
    };
    if r >= 0 {
        return Ok(Some(r as usize));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
        _ => Err(err),
    }
}

/// Block in poll(2) until `fd` is readable or `timeout` (rounded up to whole
/// milliseconds) has passed.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) {
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd for the duration of the call, and the
    // count 1 matches it; poll does not keep the pointer.
    unsafe {
        libc::poll(&mut pfd, 1, ms);
    }
}

/// poll(2) over `fds` for at most `timeout_ms` (−1: no limit). False when
/// the call failed: interrupted (the caller looks again at once), or
/// anything else, after a 10 ms pause, so that an error that would repeat
/// at once does not spin.
pub fn poll_fds(fds: &mut [libc::pollfd], timeout_ms: i32) -> bool {
    // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs that
    // outlives the call; poll does not keep the pointer.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if rc < 0 {
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            std::thread::sleep(Duration::from_millis(10));
        }
        return false;
    }
    true
}

/// Fills `fds` for one poll of a server loop: the wake pipe and the
/// listener first (for input), then each connection `(fd, writing)`, for
/// output while it has a reply to write, else for input.
pub fn server_pollfds(
    fds: &mut Vec<libc::pollfd>,
    wake: RawFd,
    listener: RawFd,
    conns: impl Iterator<Item = (RawFd, bool)>,
) {
    let pollfd = |fd, writing: bool| libc::pollfd {
        fd,
        events: if writing { libc::POLLOUT } else { libc::POLLIN },
        revents: 0,
    };
    fds.clear();
    fds.push(pollfd(wake, false));
    fds.push(pollfd(listener, false));
    fds.extend(conns.map(|(fd, writing)| pollfd(fd, writing)));
}

/// After a poll of the set [`server_pollfds`] built: walks the connections
/// of `table` (whose pollfds are `fds[2..]`, in the same order) and calls
/// `step` with each and whether its descriptor reported an event. `None`
/// keeps the connection; `Some(outcome)` removes it (and its pollfd) from
/// the set and hands it to `gone` with that outcome.
pub fn walk_polled<T, R>(
    table: &mut Vec<T>,
    fds: &mut Vec<libc::pollfd>,
    mut step: impl FnMut(&mut T, bool) -> Option<R>,
    mut gone: impl FnMut(T, R),
) {
    let mut i = 0;
    let mut k = 2;
    while i < table.len() {
        let ready = fds.get(k).is_some_and(|f| f.revents != 0);
        k += 1;
        match step(&mut table[i], ready) {
            None => i += 1,
            Some(outcome) => {
                let c = table.swap_remove(i);
                // The last one moves to `i`, its pollfd to `k - 1`: it is
                // looked at next, with its own events.
                fds.swap_remove(k - 1);
                k -= 1;
                gone(c, outcome);
            }
        }
    }
}

/// The result of a system call that returns 0 or −1 (and sets errno).
pub fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// setsockopt(2) with the value `v`, a plain C struct or integer the option
/// takes (the kernel copies its bytes and keeps no pointer).
pub fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: &T,
) -> io::Result<()> {
    // SAFETY: v points at a live T for the duration of the call and the
    // length is its size; the kernel only reads those bytes.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    check(rc)
}

/// setsockopt(2) with an `int` value.
pub fn setsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    setsockopt(fd, level, name, &v)
}

/// getsockopt(2) of an `int` value.
pub fn getsockopt_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are writable and len gives v's size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    check(rc).map(|()| v)
}

/// Ask for a send buffer of `bytes`: SO_SNDBUFFORCE (CAP_NET_ADMIN) first,
/// then the unprivileged option, which net.core.wmem_max caps. Best effort.
pub fn set_send_buffer(fd: BorrowedFd<'_>, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, v);
    }
}

/// [`set_send_buffer`] for the receive buffer (net.core.rmem_max).
pub fn set_recv_buffer(fd: BorrowedFd<'_>, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    if setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, v).is_err() {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, v);
    }
}

/// IP_MTU / IPV6_MTU of a connected socket: the path MTU the kernel knows.
pub fn path_mtu(fd: BorrowedFd<'_>, ipv6: bool) -> Option<usize> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    getsockopt_int(fd, level, name)
        .ok()
        .filter(|&v| v > 0)
        .map(|v| v as usize)
}

/// Path MTU towards `peer`, asked through a temporary connected socket (a
/// server socket stays unconnected so that any client can reach it).
pub fn path_mtu_to(peer: SocketAddr) -> Option<usize> {
    let bind: SocketAddr = match peer {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = UdpSocket::bind(bind).ok()?;
    s.connect(peer).ok()?;
    path_mtu(s.as_fd(), peer.is_ipv6())
}
