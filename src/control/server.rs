//! The control-plane server: one pre-authentication thread for every
//! stranger, a fixed pool of workers for authenticated peers only.
//!
//! **Pre-authentication** (`ctl-preauth`): one thread owns the listener
//! and a bounded table of connections that have not proven the key. It
//! sleeps in poll(2) on the listener, those connections and a wake pipe,
//! and runs every handshake as non-blocking steps over whole frames
//! (`conn::ServerHandshake`): the client hello's first byte within
//! [`Timeouts::first_byte`] (200 ms) of the accept, the whole handshake —
//! client hello, server hello, client proof — within
//! [`Timeouts::handshake`] (1 s), each handshake frame at most
//! `MAX_HANDSHAKE_BYTES`. Nothing a legitimate peer needs is committed
//! before the proof: a stranger holds at most one table slot, a little
//! memory and no thread, and a replayed client hello, which earns a server
//! hello with a fresh nonce, cannot produce the proof. When a new
//! connection finds its source at [`ServerConfig::max_pending_per_source`]
//! or the table full ([`ServerConfig::max_pending`]), the *oldest* pending
//! connection (of that source, else of all) is reset and counted as
//! evicted, never the new one: a real peer's handshake takes a round trip
//! or two, so it is the newest and survives any rate of connections an
//! attacker can open, while an attacker's idle connections age out first.
//! When the process is out of descriptors, an accept that fails evicts the
//! oldest pending connection likewise, and with none pending the listener
//! rests ([`ACCEPT_PAUSE`]) rather than wake poll(2) at once, again and
//! again.
//! The listener's backlog is raised and drained on every wake-up, so the
//! kernel's accept queue does not drop a real peer's connection either.
//!
//! **Workers**: an authenticated connection goes to one of
//! [`ServerConfig::max_connections`] workers through a queue as long; if
//! every worker is busy and the queue is full, it is reset and counted as
//! refused (only key holders get this far). A worker reads messages, each
//! frame within the frame deadline, and closes the connection after
//! `idle` without a message, on [`Msg::Bye`], or on the first rejected
//! input (with a reset).
//!
//! Each authenticated connection has a [`ConnId`], passed with its messages
//! and its peer's socket address to [`Handler::handle_from`] and, whatever
//! ends it, to [`Handler::closed`]: state a connection set up (a probe
//! session) can end with it.
//!
//! **Liveness**: the pre-authentication thread wakes at least every
//! [`ServerConfig::beat`] and records the time; [`ControlServer::alive_within`]
//! tells the daemon's watchdog whether it still turns.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use super::conn::{abort_stream, HelloSeen, ServerHandshake};
use super::frame::{check_prefix_max, MAX_HANDSHAKE_BYTES, NONCE_BYTES, PREFIX_BYTES};
use super::{
    ClusterKey, ConnConfig, Connection, ControlError, Msg, RejectCounters, RejectKind, Timeouts,
};
use crate::transport::sys::socket::{poll_fds, server_pollfds, walk_polled};

/// How a [`ControlServer`] runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub node: String,
    pub key: ClusterKey,
    /// Peers allowed to connect; `None` admits any holder of the key.
    pub allowed_peers: Option<Vec<String>>,
    /// Authenticated connections served at once (= worker threads); also
    /// the length of the queue to them.
    pub max_connections: usize,
    /// Connections in the pre-authentication table at once.
    pub max_pending: usize,
    /// Pre-authentication connections from one source address at once.
    pub max_pending_per_source: usize,
    pub timeouts: Timeouts,
    /// Close a connection after this long without a message.
    pub idle: Duration,
    /// The pre-authentication thread wakes at least this often when
    /// nothing happens, to show it is alive (and workers look at the stop
    /// flag this often while waiting for a message).
    pub beat: Duration,
}

impl ServerConfig {
    pub fn new(node: &str, key: ClusterKey) -> Self {
        ServerConfig {
            node: node.to_owned(),
            key,
            allowed_peers: None,
            max_connections: 8,
            max_pending: 1024,
            max_pending_per_source: 64,
            timeouts: Timeouts::default(),
            idle: Duration::from_secs(30),
            beat: Duration::from_secs(5),
        }
    }
}

/// One authenticated connection of a [`ControlServer`], unique within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ConnId(pub u64);

/// Handles authenticated messages; called on a worker thread. The answer,
/// if any, is sent back on the same connection.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, peer: &str, msg: Msg) -> Option<Msg>;

    /// [`Handler::handle`], told which connection the message came on.
    fn handle_on(&self, _conn: ConnId, peer: &str, msg: Msg) -> Option<Msg> {
        self.handle(peer, msg)
    }

    /// [`Handler::handle_on`], told the socket address the authenticated
    /// peer connected from as well (what the server calls).
    fn handle_from(&self, conn: ConnId, _addr: SocketAddr, peer: &str, msg: Msg) -> Option<Msg> {
        self.handle_on(conn, peer, msg)
    }

    /// Connection `conn` from `peer` has ended (closed by the peer, `Bye`,
    /// idle, a rejected frame or shutdown); called once, on its worker.
    fn closed(&self, _conn: ConnId, _peer: &str) {}
}

impl<F> Handler for F
where
    F: Fn(&str, Msg) -> Option<Msg> + Send + Sync + 'static,
{
    fn handle(&self, peer: &str, msg: Msg) -> Option<Msg> {
        self(peer, msg)
    }
}

/// An authenticated message handed to the daemon's control thread by
/// [`ControlServer::spawn_channel`]; answer it with [`Incoming::respond`]
/// (dropping it answers nothing).
#[derive(Debug)]
pub struct Incoming {
    pub peer: String,
    pub msg: Msg,
    reply: Sender<Option<Msg>>,
}

impl Incoming {
    /// Send `reply` (if any) back to the peer.
    pub fn respond(self, reply: Option<Msg>) {
        let _ = self.reply.try_send(reply);
    }
}

struct ChannelHandler {
    tx: Sender<Incoming>,
    wait: Duration,
}

impl Handler for ChannelHandler {
    fn handle(&self, peer: &str, msg: Msg) -> Option<Msg> {
        let (reply, rx) = bounded(1);
        let inc = Incoming {
            peer: peer.to_owned(),
            msg,
            reply,
        };
        self.tx.send_timeout(inc, self.wait).ok()?;
        rx.recv_timeout(self.wait).ok().flatten()
    }
}

/// A pipe whose read end wakes a poll(2) (the pre-authentication thread,
/// the metrics server) when a byte is written to it.
pub(crate) struct WakePipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl WakePipe {
    pub(crate) fn new() -> std::io::Result<WakePipe> {
        let mut fds = [0i32; 2];
        // SAFETY: `fds` is a writable array of two ints, as pipe2 requires.
        let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: pipe2 returned two fresh descriptors owned by nobody else.
        Ok(unsafe {
            WakePipe {
                read: OwnedFd::from_raw_fd(fds[0]),
                write: OwnedFd::from_raw_fd(fds[1]),
            }
        })
    }

    pub(crate) fn wake(&self) {
        // SAFETY: writes one byte from a valid buffer to our own pipe; a
        // full pipe (EAGAIN) already holds a wake-up.
        unsafe { libc::write(self.write.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    }

    /// One poll of a server loop: the set [`server_pollfds`] fills, with
    /// this pipe first, `listener` second and then `conns`; drains the pipe
    /// when it woke the poll. False when the poll failed or was
    /// interrupted (the loop looks at its stop flag and polls again).
    pub(crate) fn poll_server(
        &self,
        fds: &mut Vec<libc::pollfd>,
        listener: RawFd,
        conns: impl Iterator<Item = (RawFd, bool)>,
        timeout_ms: i32,
    ) -> bool {
        server_pollfds(fds, self.read.as_raw_fd(), listener, conns);
        if !poll_fds(fds, timeout_ms) {
            return false;
        }
        if fds[0].revents != 0 {
            self.drain();
        }
        true
    }

    fn drain(&self) {
        let mut b = [0u8; 64];
        // SAFETY: reads into a valid buffer of its length from our own
        // non-blocking pipe.
        while unsafe { libc::read(self.read.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) } > 0 {}
    }
}

/// Milliseconds since `base`, for an atomic "last seen alive".
fn ms_since(base: Instant) -> u64 {
    base.elapsed().as_millis().min(u128::from(u64::MAX)) as u64
}

/// A running control-plane server. Dropping it stops it.
pub struct ControlServer {
    addr: SocketAddr,
    counters: Arc<RejectCounters>,
    stop: Arc<AtomicBool>,
    wake: Arc<WakePipe>,
    base: Instant,
    alive_ms: Arc<AtomicU64>,
    preauth: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

/// Where a pending connection is in its handshake.
enum Stage {
    /// Reading the client hello.
    Hello,
    /// Writing the server hello (`out[sent..]` left).
    ServerHello {
        seen: HelloSeen,
        nonce: [u8; NONCE_BYTES],
        out: Vec<u8>,
        sent: usize,
    },
    /// Reading the client's proof.
    Proof {
        seen: HelloSeen,
        nonce: [u8; NONCE_BYTES],
    },
}

/// A connection that has not proven the key yet.
struct Pending {
    stream: TcpStream,
    addr: SocketAddr,
    accepted: Instant,
    /// Bytes of the frame being read (prefix included) and how many it has.
    frame: [u8; PREFIX_BYTES + MAX_HANDSHAKE_BYTES],
    have: usize,
    stage: Stage,
}

/// What one step of a pending connection came to.
enum Step {
    /// Waiting for the socket (readable or writable).
    Wait,
    /// Authenticated: hand it to a worker.
    Done(Box<Connection>),
    /// Failed: reset it (already counted).
    Drop,
}

impl Pending {
    fn wants_write(&self) -> bool {
        matches!(self.stage, Stage::ServerHello { .. })
    }

    /// A whole frame in `frame[..have]`, or what it still needs; Err: the
    /// peer is gone or sent a bad length.
    fn read_frame(&mut self) -> Result<Option<([u8; PREFIX_BYTES], usize)>, ControlError> {
        loop {
            let want = if self.have < PREFIX_BYTES {
                PREFIX_BYTES
            } else {
                let mut p = [0u8; PREFIX_BYTES];
                p.copy_from_slice(&self.frame[..PREFIX_BYTES]);
                PREFIX_BYTES + check_prefix_max(p, MAX_HANDSHAKE_BYTES)?
            };
            if self.have == want && want > PREFIX_BYTES {
                let mut p = [0u8; PREFIX_BYTES];
                p.copy_from_slice(&self.frame[..PREFIX_BYTES]);
                self.have = 0;
                return Ok(Some((p, want - PREFIX_BYTES)));
            }
            // Exactly the bytes of this frame: what follows (the first
            // message after the proof) stays in the socket for the worker.
            match self.stream.read(&mut self.frame[self.have..want]) {
                Ok(0) => return Err(ControlError::Malformed("closed during handshake")),
                Ok(n) => self.have += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(ControlError::Io(e)),
            }
        }
    }

    /// The next whole frame, or the step to take without one: `Wait` until
    /// it is in, `Drop` (counted) when it breaks a bound or the socket fails.
    fn whole_frame(
        &mut self,
        counters: &RejectCounters,
    ) -> Result<([u8; PREFIX_BYTES], usize), Step> {
        match self.read_frame() {
            Ok(Some(f)) => Ok(f),
            Ok(None) => Err(Step::Wait),
            Err(e) => {
                counters.record_error(&e);
                Err(Step::Drop)
            }
        }
    }

    /// Advance the handshake as far as the socket allows.
    fn step(&mut self, hs: &ServerHandshake<'_>, counters: &RejectCounters) -> Step {
        loop {
            match &mut self.stage {
                Stage::Hello => {
                    let (prefix, len) = match self.whole_frame(counters) {
                        Ok(f) => f,
                        Err(step) => return step,
                    };
                    let body = &self.frame[PREFIX_BYTES..PREFIX_BYTES + len];
                    let Ok(seen) = hs.client_hello(prefix, body) else {
                        return Step::Drop;
                    };
                    let Ok((out, nonce)) = hs.server_hello(&seen) else {
                        return Step::Drop;
                    };
                    self.stage = Stage::ServerHello {
                        seen,
                        nonce,
                        out,
                        sent: 0,
                    };
                }
                Stage::ServerHello { out, sent, .. } => {
                    while *sent < out.len() {
                        match self.stream.write(&out[*sent..]) {
                            Ok(0) => return Step::Drop,
                            Ok(n) => *sent += n,
                            Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            Err(_) => return Step::Drop,
                        }
                    }
                    let Stage::ServerHello { seen, nonce, .. } =
                        std::mem::replace(&mut self.stage, Stage::Hello)
                    else {
                        return Step::Drop;
                    };
                    self.stage = Stage::Proof { seen, nonce };
                }
                Stage::Proof { .. } => {
                    let (prefix, len) = match self.whole_frame(counters) {
                        Ok(f) => f,
                        Err(step) => return step,
                    };
                    let Stage::Proof { seen, nonce } =
                        std::mem::replace(&mut self.stage, Stage::Hello)
                    else {
                        return Step::Drop;
                    };
                    let Ok(stream) = self.stream.try_clone() else {
                        return Step::Drop;
                    };
                    if stream.set_nonblocking(false).is_err() {
                        return Step::Drop;
                    }
                    let body = &self.frame[PREFIX_BYTES..PREFIX_BYTES + len];
                    return match hs.proof(prefix, body, seen, &nonce, stream) {
                        Ok(c) => Step::Done(Box::new(c)),
                        Err(_) => Step::Drop,
                    };
                }
            }
        }
    }
}

/// What the pre-authentication thread needs.
struct Preauth {
    listener: TcpListener,
    conn_cfg: ConnConfig,
    cfg: Arc<ServerConfig>,
    counters: Arc<RejectCounters>,
    stop: Arc<AtomicBool>,
    wake: Arc<WakePipe>,
    base: Instant,
    alive_ms: Arc<AtomicU64>,
    to_workers: Sender<(SocketAddr, Connection)>,
}

/// Connections accepted per wake-up before the pending ones get a turn.
const ACCEPT_BATCH: usize = 256;
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

impl Preauth {
    fn run(self) {
        let cfg = &self.cfg;
        let hs = ServerHandshake::new(&self.conn_cfg, cfg.allowed_peers.as_deref());
        let cap = cfg.max_pending.max(1);
        let per_source = cfg.max_pending_per_source.clamp(1, cap);
        let mut table: Vec<Pending> = Vec::with_capacity(cap);
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(cap + 2);
        let (t_first, t_all) = (cfg.timeouts.first_byte, cfg.timeouts.handshake);
        let mut paused_until: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            // Sleep until something happens, the next handshake deadline,
            // or the beat.
            let now = Instant::now();
            let next = table
                .iter()
                .map(|p| {
                    p.accepted
                        + if matches!(p.stage, Stage::Hello) && p.have == 0 {
                            t_first
                        } else {
                            t_all
                        }
                })
                .chain(paused_until)
                .min()
                .map_or(cfg.beat, |d| d.saturating_duration_since(now));
            // Rounded up: a wake-up before the deadline would only spin.
            let timeout_ms = next
                .min(cfg.beat)
                .as_micros()
                .div_ceil(1000)
                .min(i32::MAX as u128) as i32;
            paused_until = paused_until.filter(|&t| t > now);
            let listener = match paused_until {
                Some(_) => -1, // poll(2) skips a negative descriptor
                None => self.listener.as_raw_fd(),
            };
            let polled = self.wake.poll_server(
                &mut fds,
                listener,
                table
                    .iter()
                    .map(|p| (p.stream.as_raw_fd(), p.wants_write())),
                timeout_ms,
            );
            self.alive_ms.store(ms_since(self.base), Ordering::Relaxed);
            if !polled {
                continue;
            }
            // Pending connections first (the table's order is the fds'),
            // then new ones, so an accepted burst does not delay them.
            walk_polled(
                &mut table,
                &mut fds,
                |p, ready| {
                    let step = if ready {
                        p.step(&hs, &self.counters)
                    } else {
                        Step::Wait
                    };
                    let limit = if matches!(p.stage, Stage::Hello) && p.have == 0 {
                        t_first
                    } else {
                        t_all
                    };
                    match step {
                        Step::Wait if Instant::now() < p.accepted + limit => None,
                        Step::Wait => {
                            self.counters.record(RejectKind::Timeout);
                            Some(Step::Drop)
                        }
                        done_or_drop => Some(done_or_drop),
                    }
                },
                |p, step| match step {
                    Step::Done(conn) => {
                        // `conn` holds its own descriptor of the socket.
                        drop(p.stream);
                        match self.to_workers.try_send((p.addr, *conn)) {
                            Ok(()) => {}
                            Err(TrySendError::Full((_, c)))
                            | Err(TrySendError::Disconnected((_, c))) => {
                                self.counters.record(RejectKind::Refused);
                                c.abort();
                            }
                        }
                    }
                    Step::Wait | Step::Drop => abort_stream(p.stream),
                },
            );
            if fds[1].revents != 0 {
                paused_until = self.accept_some(&mut table, cap, per_source);
            }
        }
        for p in table {
            abort_stream(p.stream);
        }
    }

    /// Accept what the listener holds (up to a batch), evicting the oldest
    /// pending connection of the same source, or of all, to make room.
    /// Out of descriptors, the oldest pending connection is evicted to give
    /// one back (a real peer, the newest, gets it); with none pending, the
    /// listener rests until the instant returned.
    fn accept_some(
        &self,
        table: &mut Vec<Pending>,
        cap: usize,
        per_source: usize,
    ) -> Option<Instant> {
        let mut evicted = false;
        for _ in 0..ACCEPT_BATCH {
            // Out of descriptors, the new connection's source is not known
            // yet: the oldest of the source with the most pending goes (a
            // flood's), not a real peer's handshake in flight.
            let evict = |table: &mut Vec<Pending>| match oldest_of_busiest(table) {
                Some(v) => {
                    self.counters.record(RejectKind::Evicted);
                    abort_stream(table.swap_remove(v).stream);
                    true
                }
                None => false,
            };
            let (stream, addr) = match accept_one(&self.listener, &mut evicted, || evict(table)) {
                Accept::Got(stream, addr) => (stream, addr),
                Accept::Again => continue,
                Accept::Stop(rest) => return rest,
            };
            let src = addr.ip();
            let same = table.iter().filter(|p| p.addr.ip() == src).count();
            let victim = if same >= per_source {
                oldest(table, |p| p.addr.ip() == src)
            } else if table.len() >= cap {
                oldest(table, |_| true)
            } else {
                None
            };
            if let Some(v) = victim {
                self.counters.record(RejectKind::Evicted);
                abort_stream(table.swap_remove(v).stream);
            }
            table.push(Pending {
                stream,
                addr,
                accepted: Instant::now(),
                frame: [0; PREFIX_BYTES + MAX_HANDSHAKE_BYTES],
                have: 0,
                stage: Stage::Hello,
            });
        }
        None
    }
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

/// The oldest pending connection of the source with the most of them.
fn oldest_of_busiest(table: &[Pending]) -> Option<usize> {
    let mut per_source: std::collections::HashMap<IpAddr, usize> = Default::default();
    for p in table {
        *per_source.entry(p.addr.ip()).or_default() += 1;
    }
    let busiest = per_source.into_iter().max_by_key(|&(_, n)| n)?.0;
    oldest(table, |p| p.addr.ip() == busiest)
}

fn oldest(table: &[Pending], which: impl Fn(&Pending) -> bool) -> Option<usize> {
    table
        .iter()
        .enumerate()
        .filter(|(_, p)| which(p))
        .min_by_key(|(_, p)| p.accepted)
        .map(|(i, _)| i)
}

/// The message loop of one authenticated connection; returns when it ends.
fn serve_authenticated(
    mut conn: Connection,
    addr: SocketAddr,
    server: &ServerConfig,
    handler: &dyn Handler,
    stop: &AtomicBool,
    id: ConnId,
) {
    let mut last = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            conn.close();
            return;
        }
        let now = Instant::now();
        let idle_end = last + server.idle;
        if now >= idle_end {
            conn.close();
            return;
        }
        match conn.recv((now + server.beat.min(STOP_POLL)).min(idle_end)) {
            Ok(Msg::Bye) | Err(ControlError::Closed) => return,
            Ok(msg) => {
                last = Instant::now();
                if let Some(reply) = handler.handle_from(id, addr, conn.peer(), msg) {
                    if conn.send(&reply).is_err() {
                        conn.abort();
                        return;
                    }
                }
            }
            Err(ControlError::Idle) => {}
            Err(e) => {
                tracing::debug!(peer = conn.peer(), error = %e, "control message rejected");
                conn.abort();
                return;
            }
        }
    }
}

/// Longest a worker waits for a message before looking at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(500);

/// Backlog of the listening socket: the pre-authentication thread drains
/// it on every wake-up; a long queue rides out a burst of connections.
const LISTEN_BACKLOG: i32 = 1024;

impl ControlServer {
    /// Bind `addr` and serve with `handler`.
    pub fn bind(
        addr: impl ToSocketAddrs,
        cfg: ServerConfig,
        handler: impl Handler,
    ) -> std::io::Result<Self> {
        Self::spawn(TcpListener::bind(addr)?, cfg, handler)
    }

    /// Serve on `listener`, handing messages to a channel of [`Incoming`]
    /// (capacity `capacity`); a worker waits at most the frame timeout for
    /// room in the channel and for the answer.
    pub fn spawn_channel(
        listener: TcpListener,
        cfg: ServerConfig,
        capacity: usize,
    ) -> std::io::Result<(Self, Receiver<Incoming>)> {
        let (tx, rx) = bounded(capacity.max(1));
        let wait = cfg.timeouts.frame;
        Ok((Self::spawn(listener, cfg, ChannelHandler { tx, wait })?, rx))
    }

    /// Serve on `listener` with `handler`.
    pub fn spawn(
        listener: TcpListener,
        cfg: ServerConfig,
        handler: impl Handler,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        // A second listen(2) on a listening socket sets its backlog.
        // SAFETY: listen on a valid socket descriptor; no memory effects.
        unsafe { libc::listen(listener.as_raw_fd(), LISTEN_BACKLOG) };
        let counters = Arc::new(RejectCounters::new());
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(WakePipe::new()?);
        let base = Instant::now();
        let alive_ms = Arc::new(AtomicU64::new(0));
        let n = cfg.max_connections.max(1);
        let (tx, rx) = bounded::<(SocketAddr, Connection)>(n);
        let conn_cfg = ConnConfig {
            node: cfg.node.clone(),
            key: cfg.key.clone(),
            timeouts: cfg.timeouts,
            counters: Some(counters.clone()),
        };
        let cfg = Arc::new(cfg);
        let handler: Arc<dyn Handler> = Arc::new(handler);
        let next_id = Arc::new(AtomicU64::new(1));
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let (rx, cfg, handler, stop, next_id) = (
                rx.clone(),
                cfg.clone(),
                handler.clone(),
                stop.clone(),
                next_id.clone(),
            );
            workers.push(
                std::thread::Builder::new()
                    .name(format!("ctl-worker-{i}"))
                    .spawn(move || {
                        for (addr, conn) in rx.iter() {
                            let id = ConnId(next_id.fetch_add(1, Ordering::Relaxed));
                            let peer = conn.peer().to_owned();
                            serve_authenticated(conn, addr, &cfg, handler.as_ref(), &stop, id);
                            handler.closed(id, &peer);
                        }
                    })?,
            );
        }
        let pre = Preauth {
            listener,
            conn_cfg,
            cfg,
            counters: counters.clone(),
            stop: stop.clone(),
            wake: wake.clone(),
            base,
            alive_ms: alive_ms.clone(),
            to_workers: tx,
        };
        let preauth = std::thread::Builder::new()
            .name("ctl-preauth".into())
            .spawn(move || pre.run())?;
        Ok(ControlServer {
            addr,
            counters,
            stop,
            wake,
            base,
            alive_ms,
            preauth: Some(preauth),
            workers,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The rejection counters, shared by all connections.
    pub fn counters(&self) -> Arc<RejectCounters> {
        self.counters.clone()
    }

    /// Whether the pre-authentication thread has turned within `d` (it
    /// wakes at least every [`ServerConfig::beat`]).
    pub fn alive_within(&self, d: Duration) -> bool {
        ms_since(self.base).saturating_sub(self.alive_ms.load(Ordering::Relaxed))
            <= d.as_millis().min(u128::from(u64::MAX)) as u64
    }

    /// Stop accepting, close all connections, join the threads.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.wake.wake();
        if let Some(p) = self.preauth.take() {
            let _ = p.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}
