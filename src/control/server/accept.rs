//! Accepting connections without blocking, shared by the control
//! server's pre-authentication thread and the metrics server: one
//! accept4(2) a connection, and what to do when the process is out of
//! descriptors (evict, or rest the listener).

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::transport::sys::socket::poll_fds;

/// How long the listener is left unpolled when the process is out of
/// descriptors and no pending connection can give one back: a readable
/// listener that cannot be accepted would otherwise wake poll(2) at once,
/// again and again.
pub(crate) const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Whether an accept failed for want of a descriptor (this process's or
/// the system's), which only closing one cures.
pub(crate) fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// What one accept of a server's batch gave.
pub(crate) enum Accept {
    /// A new connection.
    Got(TcpStream, SocketAddr),
    /// Nothing yet (a connection reset while queued, an interrupt, or a
    /// descriptor just given back by an eviction): accept again.
    Again,
    /// The batch ends; the listener rests until the instant, if one.
    Stop(Option<Instant>),
}

/// One accept of a server's batch. Out of descriptors with a connection
/// waiting, `evict` gives one back (the server's oldest connection that
/// may go; false: none), once per run of failures (`evicted` carries that
/// across the batch and is cleared by a success); with nothing to evict,
/// or a failure again, the listener rests [`ACCEPT_PAUSE`].
pub(crate) fn accept_one(
    listener: &TcpListener,
    evicted: &mut bool,
    evict: impl FnOnce() -> bool,
) -> Accept {
    match accept_nonblocking(listener) {
        Ok((stream, addr)) => {
            *evicted = false;
            Accept::Got(stream, addr)
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => Accept::Stop(None),
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::Interrupted | ErrorKind::ConnectionAborted
            ) =>
        {
            Accept::Again
        }
        // accept(2) reports EMFILE before it looks at the queue: evict
        // only for a connection that is waiting.
        Err(e) if out_of_descriptors(&e) && !has_waiting(listener) => Accept::Stop(None),
        Err(e) if out_of_descriptors(&e) && !*evicted && evict() => {
            *evicted = true;
            Accept::Again
        }
        Err(e) => {
            tracing::debug!(error = %e, "accept failed; listener paused");
            Accept::Stop(Some(Instant::now() + ACCEPT_PAUSE))
        }
    }
}

/// Whether a connection waits in `listener`'s queue (a poll that does
/// not wait).
pub(crate) fn has_waiting(listener: &TcpListener) -> bool {
    let mut fd = [libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    poll_fds(&mut fd, 0) && fd[0].revents & libc::POLLIN != 0
}

/// accept4(2) with SOCK_NONBLOCK | SOCK_CLOEXEC: one system call per
/// connection (an attacker's connection costs the thread little).
pub(crate) fn accept_nonblocking(
    listener: &TcpListener,
) -> std::io::Result<(TcpStream, SocketAddr)> {
    // SAFETY: an all-zero sockaddr_storage is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are valid and writable, `len` holds its size.
    let fd = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: accept4 returned a fresh descriptor owned by nobody else.
    let stream = TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let addr = sockaddr_of(&ss)
        .or_else(|| stream.peer_addr().ok())
        .ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    Ok((stream, addr))
}

fn sockaddr_of(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which
            // is smaller than sockaddr_storage and suitably aligned.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}
