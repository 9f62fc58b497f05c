//! One authenticated control connection over a `TcpStream`, with deadlines
//! on every read and write.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::RngCore;

use super::frame::{
    check_prefix, handshake_mac, session_macs, unix_now_ns, FrameKind, HelloPayload, Opener,
    Sealer, NONCE_BYTES, PREFIX_BYTES,
};
use super::msg::encode;
use super::{ClusterKey, ControlError, Msg, RejectCounters, MAX_NODE_NAME_BYTES};

/// Deadlines of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// Connecting side: the TCP connect.
    pub connect: Duration,
    /// The whole handshake after the connect (client hello, server hello,
    /// client proof). The accepting side counts it from the accept.
    pub handshake: Duration,
    /// Accepting side: the client hello's first byte must arrive within
    /// this of the accept.
    pub first_byte: Duration,
    /// One frame, from its first byte to its last (reading), or the whole
    /// frame (writing).
    pub frame: Duration,
    /// Reject frames whose timestamp differs from the local clock by more
    /// than this; `None` (default) trusts counters and nonces alone.
    pub max_clock_skew: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(2),
            handshake: Duration::from_secs(1),
            first_byte: Duration::from_millis(200),
            frame: Duration::from_secs(2),
            max_clock_skew: None,
        }
    }
}

/// Who this node is and how it authenticates.
#[derive(Debug, Clone)]
pub struct ConnConfig {
    /// This node's name (1..=64 bytes).
    pub node: String,
    pub key: ClusterKey,
    pub timeouts: Timeouts,
    /// Where rejections are counted, if anywhere.
    pub counters: Option<Arc<RejectCounters>>,
}

impl ConnConfig {
    pub fn new(node: &str, key: ClusterKey) -> Self {
        ConnConfig {
            node: node.to_owned(),
            key,
            timeouts: Timeouts::default(),
            counters: None,
        }
    }
}

/// Why [`move_by`] stopped.
enum MoveFail {
    Timeout,
    Eof,
    Io(std::io::Error),
}

/// Moves `len` bytes by `deadline`: `step(done, left)` reads or writes
/// from offset `done`, waiting at most `left`, and says how many bytes it
/// moved (0: the peer closed).
fn move_by(
    len: usize,
    deadline: Instant,
    mut step: impl FnMut(usize, Duration) -> std::io::Result<usize>,
) -> Result<(), MoveFail> {
    let mut done = 0;
    while done < len {
        let now = Instant::now();
        if now >= deadline {
            return Err(MoveFail::Timeout);
        }
        let left = (deadline - now).max(Duration::from_micros(1));
        match step(done, left) {
            Ok(0) => return Err(MoveFail::Eof),
            Ok(n) => done += n,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(MoveFail::Io(e)),
        }
    }
    Ok(())
}

fn read_by(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<(), MoveFail> {
    move_by(buf.len(), deadline, |got, left| {
        stream.set_read_timeout(Some(left))?;
        stream.read(&mut buf[got..])
    })
}

fn write_by(stream: &mut TcpStream, buf: &[u8], deadline: Instant) -> Result<(), ControlError> {
    move_by(buf.len(), deadline, |sent, left| {
        stream.set_write_timeout(Some(left))?;
        stream.write(&buf[sent..])
    })
    .map_err(|f| match f {
        MoveFail::Timeout => ControlError::Timeout,
        MoveFail::Eof => ControlError::Closed,
        MoveFail::Io(e) => ControlError::Io(e),
    })
}

/// Read one frame: the prefix must start by `start_deadline` (else `Idle`),
/// then the whole frame must be in by `frame_deadline(first byte time)`.
fn read_frame(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    start_deadline: Instant,
    frame_timeout: Duration,
) -> Result<[u8; PREFIX_BYTES], ControlError> {
    let mut prefix = [0u8; PREFIX_BYTES];
    match read_by(stream, &mut prefix[..1], start_deadline) {
        Ok(()) => {}
        Err(MoveFail::Timeout) => return Err(ControlError::Idle),
        Err(MoveFail::Eof) => return Err(ControlError::Closed),
        Err(MoveFail::Io(e)) => return Err(ControlError::Io(e)),
    }
    let deadline = Instant::now() + frame_timeout;
    let mid = |f: MoveFail| match f {
        MoveFail::Timeout => ControlError::Timeout,
        MoveFail::Eof => ControlError::Malformed("connection closed mid-frame"),
        MoveFail::Io(e) => ControlError::Io(e),
    };
    read_by(stream, &mut prefix[1..], deadline).map_err(mid)?;
    // The size limit is checked before the body buffer grows.
    let len = check_prefix(prefix)?;
    buf.clear();
    buf.resize(len, 0);
    read_by(stream, buf, deadline).map_err(mid)?;
    Ok(prefix)
}

/// Abort a stream with a reset (no TIME_WAIT, no lingering data).
pub(crate) fn abort_stream(stream: TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = nix::sys::socket::setsockopt(&stream, nix::sys::socket::sockopt::Linger, &linger);
    drop(stream);
}

/// An authenticated control connection. Any rejected input poisons it:
/// later calls return [`ControlError::Poisoned`]; drop or [`abort`] it.
///
/// [`abort`]: Connection::abort
pub struct Connection {
    stream: TcpStream,
    peer: String,
    sealer: Sealer,
    opener: Opener,
    buf: Vec<u8>,
    timeouts: Timeouts,
    counters: Option<Arc<RejectCounters>>,
    poisoned: bool,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.peer)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

fn check_name(name: &str) -> Result<(), ControlError> {
    if name.is_empty() || name.len() > MAX_NODE_NAME_BYTES {
        return Err(ControlError::Encode(format!(
            "node name {name:?} must be 1..={MAX_NODE_NAME_BYTES} bytes"
        )));
    }
    Ok(())
}

fn fresh_nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut n);
    n
}

fn count(counters: &Option<Arc<RejectCounters>>, err: ControlError) -> ControlError {
    if let Some(c) = counters {
        c.record_error(&err);
    }
    err
}

/// The accepting side of the handshake as steps over whole frames, so the
/// control server can run many handshakes from one thread without
/// blocking (`server.rs`): check the client hello, write the server hello,
/// check the client's proof. Nothing is committed to a connection before
/// the proof: it shows the client holds the key *for this connection*
/// (it is tagged with the session key, which depends on the server's fresh
/// nonce), so a replayed client hello gets no further than a server hello.
pub(crate) struct ServerHandshake<'a> {
    cfg: &'a ConnConfig,
    allowed: Option<&'a [String]>,
}

/// A client hello that passed every check.
pub(crate) struct HelloSeen {
    pub peer: String,
    pub client_nonce: [u8; NONCE_BYTES],
}

impl<'a> ServerHandshake<'a> {
    pub fn new(cfg: &'a ConnConfig, allowed: Option<&'a [String]>) -> Self {
        ServerHandshake { cfg, allowed }
    }

    /// Check a client hello (counted if rejected).
    pub fn client_hello(
        &self,
        prefix: [u8; PREFIX_BYTES],
        body: &[u8],
    ) -> Result<HelloSeen, ControlError> {
        let cfg = self.cfg;
        Opener::new(
            handshake_mac(&cfg.key),
            FrameKind::ClientHello,
            &cfg.node,
            None,
        )
        .open_hello(prefix, body)
        .and_then(|h| {
            if h.hello.to != cfg.node {
                return Err(ControlError::UnknownPeer(h.hello.to));
            }
            if self.allowed.is_some_and(|list| !list.contains(&h.sender)) {
                return Err(ControlError::UnknownPeer(h.sender));
            }
            Ok(HelloSeen {
                peer: h.sender,
                client_nonce: h.hello.nonce,
            })
        })
        .map_err(|e| count(&cfg.counters, e))
    }

    /// The server hello for `seen` with a fresh nonce: (frame, nonce).
    pub fn server_hello(
        &self,
        seen: &HelloSeen,
    ) -> Result<(Vec<u8>, [u8; NONCE_BYTES]), ControlError> {
        check_name(&self.cfg.node)?;
        let r_s = fresh_nonce();
        let hello = encode(&HelloPayload {
            to: seen.peer.clone(),
            nonce: r_s,
        })?;
        let frame = Sealer::new(
            handshake_mac(&self.cfg.key),
            FrameKind::ServerHello,
            &self.cfg.node,
        )
        .seal_payload(&hello, unix_now_ns())?;
        Ok((frame, r_s))
    }

    /// Check the client's proof; on success the connection is established
    /// over `stream` (which the caller has made blocking again).
    pub fn proof(
        &self,
        prefix: [u8; PREFIX_BYTES],
        body: &[u8],
        seen: HelloSeen,
        server_nonce: &[u8; NONCE_BYTES],
        stream: TcpStream,
    ) -> Result<Connection, (ControlError, TcpStream)> {
        let cfg = self.cfg;
        let (c2s, s2c) = session_macs(
            &cfg.key,
            &seen.peer,
            &cfg.node,
            &seen.client_nonce,
            server_nonce,
        );
        if let Err(e) = Opener::new(
            c2s.clone(),
            FrameKind::ClientProof,
            &cfg.node,
            Some(&seen.peer),
        )
        .open_proof(prefix, body)
        {
            return Err((count(&cfg.counters, e), stream));
        }
        Ok(Connection {
            stream,
            sealer: Sealer::new(s2c, FrameKind::Data, &cfg.node),
            opener: Opener::new(c2s, FrameKind::Data, &cfg.node, Some(&seen.peer))
                .with_max_skew(cfg.timeouts.max_clock_skew),
            peer: seen.peer,
            buf: Vec::new(),
            timeouts: cfg.timeouts,
            counters: cfg.counters.clone(),
            poisoned: false,
        })
    }
}

impl Connection {
    /// Connect to `addr`, which must be node `peer`, and authenticate.
    pub fn connect(addr: SocketAddr, peer: &str, cfg: &ConnConfig) -> Result<Self, ControlError> {
        let stream = TcpStream::connect_timeout(&addr, cfg.timeouts.connect)?;
        Self::client(stream, peer, cfg)
    }

    /// Authenticate as the connecting side over an established stream:
    /// client hello, server hello, then the proof that this side holds the
    /// key for this connection (see [`super`]).
    pub fn client(
        mut stream: TcpStream,
        peer: &str,
        cfg: &ConnConfig,
    ) -> Result<Self, ControlError> {
        check_name(&cfg.node)?;
        check_name(peer)?;
        stream.set_nodelay(true)?;
        let deadline = Instant::now() + cfg.timeouts.handshake;
        let hs = handshake_mac(&cfg.key);
        let r_c = fresh_nonce();
        let hello = encode(&HelloPayload {
            to: peer.to_owned(),
            nonce: r_c,
        })?;
        let frame = Sealer::new(hs.clone(), FrameKind::ClientHello, &cfg.node)
            .seal_payload(&hello, unix_now_ns())?;
        write_by(&mut stream, &frame, deadline)?;
        let mut buf = Vec::new();
        let reply = read_frame(&mut stream, &mut buf, deadline, cfg.timeouts.handshake)
            .map_err(|e| match e {
                ControlError::Idle => ControlError::Timeout,
                ControlError::Closed => ControlError::Malformed("closed during handshake"),
                e => e,
            })
            .and_then(|prefix| {
                Opener::new(hs, FrameKind::ServerHello, &cfg.node, Some(peer))
                    .open_hello(prefix, &buf)
            })
            .and_then(|h| {
                if h.hello.to != cfg.node {
                    Err(ControlError::UnknownPeer(h.hello.to))
                } else {
                    Ok(h)
                }
            })
            .map_err(|e| count(&cfg.counters, e))?;
        let (c2s, s2c) = session_macs(&cfg.key, &cfg.node, peer, &r_c, &reply.hello.nonce);
        let proof = Sealer::new(c2s.clone(), FrameKind::ClientProof, &cfg.node)
            .seal_payload(&[], unix_now_ns())?;
        write_by(&mut stream, &proof, deadline)?;
        Ok(Connection {
            stream,
            peer: peer.to_owned(),
            sealer: Sealer::new(c2s, FrameKind::Data, &cfg.node),
            opener: Opener::new(s2c, FrameKind::Data, &cfg.node, Some(peer))
                .with_max_skew(cfg.timeouts.max_clock_skew),
            buf,
            timeouts: cfg.timeouts,
            counters: cfg.counters.clone(),
            poisoned: false,
        })
    }

    /// Abort a stream that failed its handshake (reset, no TIME_WAIT).
    pub fn abort_stream(stream: TcpStream) {
        abort_stream(stream)
    }

    /// The authenticated peer's node name.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// The peer's socket address.
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.stream.peer_addr().ok()
    }

    /// Whether an earlier error made this connection unusable.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// Send one message; the whole frame must be written within the frame
    /// timeout.
    pub fn send(&mut self, msg: &Msg) -> Result<(), ControlError> {
        if self.poisoned {
            return Err(ControlError::Poisoned);
        }
        let frame = self.sealer.seal(msg)?;
        let deadline = Instant::now() + self.timeouts.frame;
        let r = write_by(&mut self.stream, &frame, deadline);
        self.poisoned = r.is_err();
        r
    }

    /// Receive one message. A frame must start before `deadline` (else
    /// [`ControlError::Idle`], and the connection stays usable) and be
    /// complete within the frame timeout of its first byte (else
    /// [`ControlError::Timeout`]). Any rejection is counted and poisons the
    /// connection.
    pub fn recv(&mut self, deadline: Instant) -> Result<Msg, ControlError> {
        if self.poisoned {
            return Err(ControlError::Poisoned);
        }
        let r = read_frame(
            &mut self.stream,
            &mut self.buf,
            deadline,
            self.timeouts.frame,
        )
        .and_then(|prefix| self.opener.open(prefix, &self.buf));
        match r {
            Ok(msg) => Ok(msg),
            Err(ControlError::Idle) => Err(ControlError::Idle),
            Err(e) => {
                self.poisoned = true;
                Err(count(&self.counters, e))
            }
        }
    }

    /// Send `msg` and wait for the answer until `deadline`.
    pub fn request(&mut self, msg: &Msg, deadline: Instant) -> Result<Msg, ControlError> {
        self.send(msg)?;
        self.recv(deadline)
    }

    /// Run `work` while a helper thread sends `alive` every `every`, so the
    /// peer (whose server ends a connection idle for too long, and whose
    /// session has a TTL) knows this side is still at work. Sending stops
    /// at the first error (the connection is then poisoned, and the caller
    /// learns of it at its next use) and when `work` returns. If no thread
    /// can be started, `work` runs without keep-alive, with a warning.
    pub fn keep_alive_during<R>(
        &mut self,
        alive: &Msg,
        every: Duration,
        work: impl FnOnce() -> R,
    ) -> R {
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        std::thread::scope(|scope| {
            let spawned = std::thread::Builder::new()
                .name("ng-keepalive".into())
                .spawn_scoped(scope, move || {
                    while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                        stopped.recv_timeout(every)
                    {
                        if self.send(alive).is_err() {
                            break;
                        }
                    }
                });
            if let Err(e) = spawned {
                tracing::warn!("no keep-alive thread ({e}): a long run may lose its session");
            }
            let r = work();
            drop(stop);
            r
        })
    }

    /// Send [`Msg::Bye`] (best effort) and close.
    pub fn close(mut self) {
        let _ = self.send(&Msg::Bye);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    /// Close with a reset, without a goodbye (after a rejection).
    pub fn abort(self) {
        abort_stream(self.stream)
    }
}
