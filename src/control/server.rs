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
//! rests ([`accept::ACCEPT_PAUSE`]) rather than wake poll(2) at once, again and
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

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{ClusterKey, ConnConfig, Connection, ControlError, Msg, RejectCounters, Timeouts};
use crate::transport::sys::socket::{poll_fds, server_pollfds};

mod accept;
mod preauth;

pub(crate) use accept::{accept_one, Accept};
use preauth::Preauth;

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
