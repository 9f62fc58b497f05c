//! A small control-plane server: one accept thread and a fixed pool of
//! connection workers.
//!
//! The accept thread hands each new connection to an idle worker through a
//! bounded queue; when every worker is busy and the queue is full, the
//! connection is reset at once and counted as [`RejectKind::Refused`]. Each
//! worker authenticates its connection within the handshake deadline, then
//! reads messages, each frame within the frame deadline, and closes the
//! connection after `idle` without a message, on [`Msg::Bye`], or on the
//! first rejected input (with a reset). A slow or malicious client thus holds
//! one worker for at most one deadline and never blocks the others.
//!
//! Each authenticated connection has a [`ConnId`], passed with its messages
//! to [`Handler::handle_on`] and, whatever ends it, to [`Handler::closed`]:
//! state a connection set up (a probe session) can end with it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use super::conn::abort_stream;
use super::{
    ClusterKey, ConnConfig, Connection, ControlError, Msg, RejectCounters, RejectKind, Timeouts,
};

/// How a [`ControlServer`] runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub node: String,
    pub key: ClusterKey,
    /// Peers allowed to connect; `None` admits any holder of the key.
    pub allowed_peers: Option<Vec<String>>,
    /// Connections served at once (= worker threads); also the queue length.
    pub max_connections: usize,
    pub timeouts: Timeouts,
    /// Close a connection after this long without a message.
    pub idle: Duration,
}

impl ServerConfig {
    pub fn new(node: &str, key: ClusterKey) -> Self {
        ServerConfig {
            node: node.to_owned(),
            key,
            allowed_peers: None,
            max_connections: 8,
            timeouts: Timeouts::default(),
            idle: Duration::from_secs(30),
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

/// A running control-plane server. Dropping it stops it.
pub struct ControlServer {
    addr: SocketAddr,
    counters: Arc<RejectCounters>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

/// Longest a worker waits before looking at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

fn serve(
    stream: TcpStream,
    cfg: &ConnConfig,
    server: &ServerConfig,
    handler: &dyn Handler,
    stop: &AtomicBool,
    id: ConnId,
) {
    let probe = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let conn = match Connection::server(stream, cfg, server.allowed_peers.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "control handshake failed");
            abort_stream(probe);
            return;
        }
    };
    drop(probe);
    let peer = conn.peer().to_owned();
    serve_authenticated(conn, server, handler, stop, id);
    handler.closed(id, &peer);
}

/// The message loop of one authenticated connection; returns when it ends.
fn serve_authenticated(
    mut conn: Connection,
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
        match conn.recv((now + STOP_POLL).min(idle_end)) {
            Ok(Msg::Bye) | Err(ControlError::Closed) => return,
            Ok(msg) => {
                last = Instant::now();
                if let Some(reply) = handler.handle_on(id, conn.peer(), msg) {
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
        let counters = Arc::new(RejectCounters::new());
        let stop = Arc::new(AtomicBool::new(false));
        let n = cfg.max_connections.max(1);
        let (tx, rx) = bounded::<TcpStream>(n);
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
            let (rx, cfg, conn_cfg, handler, stop, next_id) = (
                rx.clone(),
                cfg.clone(),
                conn_cfg.clone(),
                handler.clone(),
                stop.clone(),
                next_id.clone(),
            );
            workers.push(
                std::thread::Builder::new()
                    .name(format!("ctl-worker-{i}"))
                    .spawn(move || {
                        for stream in rx.iter() {
                            let id = ConnId(next_id.fetch_add(1, Ordering::Relaxed));
                            serve(stream, &conn_cfg, &cfg, handler.as_ref(), &stop, id);
                        }
                    })?,
            );
        }
        let (c, s) = (counters.clone(), stop.clone());
        let accept = std::thread::Builder::new()
            .name("ctl-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if s.load(Ordering::Relaxed) {
                        break;
                    }
                    match stream {
                        Ok(stream) => match tx.try_send(stream) {
                            Ok(()) => {}
                            Err(TrySendError::Full(stream)) => {
                                c.record(RejectKind::Refused);
                                abort_stream(stream);
                            }
                            Err(TrySendError::Disconnected(_)) => break,
                        },
                        // Out of descriptors and the like: back off briefly.
                        Err(e) => {
                            tracing::warn!(error = %e, "control accept failed");
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })?;
        Ok(ControlServer {
            addr,
            counters,
            stop,
            accept: Some(accept),
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

    /// Stop accepting, close all connections, join the threads.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(accept) = self.accept.take() {
            // Wake the blocking accept with a connection of our own.
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake.ip() {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                });
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            let _ = accept.join();
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
