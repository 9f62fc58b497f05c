//! The pre-authentication stage of the control server: the
//! `ctl-preauth` thread's table of connections that have not proven the
//! key, each handshake run as non-blocking steps over whole frames, and
//! the evictions that keep the table bounded (see the parent module).

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};

use super::accept::{accept_one, Accept};
use super::{ms_since, ServerConfig, WakePipe};
use crate::control::conn::{abort_stream, HelloSeen, ServerHandshake};
use crate::control::frame::{check_prefix_max, MAX_HANDSHAKE_BYTES, NONCE_BYTES, PREFIX_BYTES};
use crate::control::{ConnConfig, Connection, ControlError, RejectCounters, RejectKind};
use crate::transport::sys::socket::walk_polled;

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
pub(super) struct Preauth {
    pub(super) listener: TcpListener,
    pub(super) conn_cfg: ConnConfig,
    pub(super) cfg: Arc<ServerConfig>,
    pub(super) counters: Arc<RejectCounters>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) wake: Arc<WakePipe>,
    pub(super) base: Instant,
    pub(super) alive_ms: Arc<AtomicU64>,
    pub(super) to_workers: Sender<(SocketAddr, Connection)>,
}

/// Connections accepted per wake-up before the pending ones get a turn.
const ACCEPT_BATCH: usize = 256;

impl Preauth {
    pub(super) fn run(self) {
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
