//! The socket layer: [`Endpoint`], one end of a datagram session over any
//! [`Phy`], and its [`Transport`] implementation.
//!
//! A client ([`Endpoint::client`]) opens its session at once (Hello until a
//! HelloAck, see [`session`](super::session)); a server
//! ([`Endpoint::server`]) adopts sessions inside `recv` or
//! [`Endpoint::accept`]. Messages are cut into fragments of the route's
//! `max_frag_bytes`, sent straight from a preallocated payload buffer, and
//! reassembled by [`Reassembly`]. Every wait ends at a deadline on the
//! transport's clock and follows the [`idle`](super::idle) policy. The sum
//! of the receive costs of the frames that delivered a message is its
//! receive overhead (`Received::overhead_ns`); the same clock readings
//! check the deadline. A Bye from the peer is [`TransportError::PeerGone`];
//! dropping an endpoint with a live session sends one (best effort).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::idle::{Idle, IdlePolicy, Pause};
use super::phy::{Frame, Phy, RxFrame, Shown};
use super::reasm::{Offer, Reassembly};
use super::session::{self, classify, HelloGate, Role, Session, Verdict};
use super::wire::{self, Header, Kind, HEADER_LEN};
use super::IgnoredFrames;
use crate::clock::{Clock, HostClock};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

/// What every endpoint is configured with, whatever its device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndpointConfig {
    /// Largest message (and size of the preallocated payload buffer).
    pub max_msg_bytes: usize,
    /// How long the client waits for a HelloAck per attempt.
    pub handshake_timeout: Duration,
    /// How many Hellos the client sends before giving up.
    pub handshake_attempts: u32,
    /// How long a send may spin on a full transmit queue.
    pub send_timeout: Duration,
    /// When waits stop spinning.
    pub idle: IdlePolicy,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            max_msg_bytes: 4 << 20,
            handshake_timeout: Duration::from_millis(200),
            handshake_attempts: 5,
            send_timeout: Duration::from_secs(1),
            idle: IdlePolicy::default(),
        }
    }
}

/// The [`EndpointConfig`] of a transport's options, which name the settings
/// every endpoint has alike, with the idle policy `$idle`.
macro_rules! endpoint_config {
    ($opts:expr, $idle:expr) => {
        $crate::transport::dgram::EndpointConfig {
            max_msg_bytes: $opts.max_msg_bytes,
            handshake_timeout: $opts.handshake_timeout,
            handshake_attempts: $opts.handshake_attempts,
            send_timeout: $opts.send_timeout,
            idle: $idle,
        }
    };
}
pub(crate) use endpoint_config;

/// `impl Default` for a transport's options: the settings every endpoint
/// has (by the names of [`EndpointConfig`]) from
/// `EndpointConfig::default()`, the others as given.
macro_rules! default_options {
    ($ty:ident { $($field:ident: $value:expr),* $(,)? }) => {
        impl Default for $ty {
            fn default() -> Self {
                let core = $crate::transport::dgram::EndpointConfig::default();
                $ty {
                    max_msg_bytes: core.max_msg_bytes,
                    handshake_timeout: core.handshake_timeout,
                    handshake_attempts: core.handshake_attempts,
                    send_timeout: core.send_timeout,
                    $($field: $value),*
                }
            }
        }
    };
}
pub(crate) use default_options;

/// One end of a datagram session over device `P`, timed by clock `C`.
pub struct Endpoint<P: Phy, C: Clock = HostClock> {
    phy: P,
    clock: C,
    role: Role,
    cfg: EndpointConfig,
    idle: Idle,
    session: Option<Session<P::Addr, P::Dest>>,
    /// Set when the session peer said Bye or vanished; cleared by a new
    /// session (server).
    gone: bool,
    sessions_started: u64,
    send_seq: u32,
    tx_payload: Vec<u8>,
    reasm: Reassembly,
    counters: Counters,
    ignored: IgnoredFrames,
    /// Server: when set, only a Hello it admits opens a session.
    gate: Option<Arc<dyn HelloGate<P::Addr>>>,
    /// Clock reading of the last frame sent or received (the idle policy's
    /// "without traffic").
    last_activity: u64,
}

impl<P: Phy, C: Clock> Endpoint<P, C> {
    fn new(phy: P, clock: C, role: Role, cfg: EndpointConfig) -> Result<Self, TransportError> {
        if cfg.max_msg_bytes > u32::MAX as usize {
            return Err(TransportError::Protocol(format!(
                "max_msg_bytes {} does not fit the 32-bit length field",
                cfg.max_msg_bytes
            )));
        }
        Ok(Endpoint {
            idle: Idle::new(&cfg.idle, &clock),
            phy,
            clock,
            role,
            session: None,
            gone: false,
            sessions_started: 0,
            send_seq: 0,
            tx_payload: (0..cfg.max_msg_bytes).map(|i| i as u8).collect(),
            reasm: Reassembly::new(cfg.max_msg_bytes),
            counters: Counters::default(),
            ignored: IgnoredFrames::default(),
            gate: None,
            last_activity: 0,
            cfg,
        })
    }

    /// Client: open a session with `peer` over `phy`, under `nonce` (the one
    /// the control plane agreed on) or a random one.
    ///
    /// Sends up to `handshake_attempts` Hellos, each waiting
    /// `handshake_timeout` for the HelloAck. A peer that refused every
    /// attempt (a closed UDP port) is [`TransportError::PeerGone`], silence
    /// is [`TransportError::Timeout`].
    pub fn client(
        mut phy: P,
        clock: C,
        cfg: EndpointConfig,
        peer: P::Addr,
        nonce: Option<u64>,
    ) -> Result<Self, TransportError> {
        let route = phy.route(&peer)?;
        let mut ep = Self::new(phy, clock, Role::Client, cfg)?;
        ep.session = Some(Session {
            nonce: session::fresh_nonce(nonce),
            peer,
            route,
        });
        ep.handshake()?;
        Ok(ep)
    }

    /// Server: wait (inside `recv` or [`Self::accept`]) for a client's Hello.
    pub fn server(phy: P, clock: C, cfg: EndpointConfig) -> Result<Self, TransportError> {
        Self::new(phy, clock, Role::Server, cfg)
    }

    /// Server: accept only Hellos whose nonce `gate` holds (0: none); others
    /// are ignored and counted as `wrong_nonce`. The daemon's control plane
    /// stores the nonce of the probe session it accepted.
    pub fn gate_hellos(&mut self, gate: Arc<AtomicU64>) {
        self.gate = Some(gate);
    }

    /// Server: accept only Hellos `gate` admits (by nonce and source).
    pub fn gate_hellos_with(&mut self, gate: Arc<dyn HelloGate<P::Addr>>) {
        self.gate = Some(gate);
    }

    /// Server: wait up to `timeout` for a client to open a session; returns
    /// its address. Returns at once if a session is already open.
    pub fn accept(&mut self, timeout: Duration) -> Result<P::Addr, TransportError> {
        let start = self.clock.now();
        let deadline = start.saturating_add(self.ticks(timeout));
        loop {
            if let Some(s) = &self.session {
                return Ok(s.peer);
            }
            match self.poll()? {
                // A Data frame cannot complete without a session, and a Bye
                // only closes one; neither returns here.
                Some(f) => {
                    let _ = self.handle(&f);
                    if self.session.is_none() && self.clock.now() >= deadline {
                        return Err(TransportError::Timeout(timeout));
                    }
                }
                None => {
                    if !self.idle_until(start, deadline) {
                        return Err(TransportError::Timeout(timeout));
                    }
                }
            }
        }
    }

    /// Frames received and not used, by reason.
    pub fn ignored(&self) -> IgnoredFrames {
        IgnoredFrames {
            dropped_incomplete: self.reasm.dropped_incomplete,
            ..self.ignored
        }
    }
    /// The session peer, if a session is open.
    pub fn peer(&self) -> Option<P::Addr> {
        self.session.as_ref().map(|s| s.peer)
    }
    /// The current session's nonce.
    pub fn nonce(&self) -> Option<u64> {
        self.session.as_ref().map(|s| s.nonce)
    }
    /// MTU used towards the session peer.
    pub fn mtu_bytes(&self) -> Option<usize> {
        self.session.as_ref().map(|s| s.route.mtu_bytes)
    }
    /// Payload bytes per frame towards the session peer.
    pub fn frag_bytes(&self) -> Option<usize> {
        self.session.as_ref().map(|s| s.route.max_frag_bytes)
    }
    /// Sessions this server has adopted.
    pub fn sessions_started(&self) -> u64 {
        self.sessions_started
    }
    pub fn role(&self) -> Role {
        self.role
    }
    /// The device.
    pub fn phy(&self) -> &P {
        &self.phy
    }

    fn ticks(&self, d: Duration) -> u64 {
        self.clock.from_ns(d.as_nanos() as f64)
    }

    fn handshake(&mut self) -> Result<(), TransportError> {
        let Some(s) = self.session else {
            return Err(TransportError::NoPeer(0));
        };
        let hello = Header::control(Kind::Hello, s.nonce);
        let per_attempt = self.ticks(self.cfg.handshake_timeout);
        let mut refused = None;
        for _ in 0..self.cfg.handshake_attempts.max(1) {
            let sent = send_frame(
                &mut self.phy,
                &self.clock,
                &s.route.dest,
                &hello,
                &[],
                self.cfg.send_timeout,
            );
            match sent {
                Ok(()) => {}
                Err(TransportError::PeerGone(why)) => refused = Some(why),
                Err(e) => return Err(e),
            }
            let since = self.clock.now();
            let deadline = since.saturating_add(per_attempt);
            loop {
                match self.phy.poll(&self.clock) {
                    Ok(Some(f)) => match classify(self.role, Some((s.peer, s.nonce)), None, &f) {
                        Verdict::HelloAck => return Ok(()),
                        Verdict::Ignore(why) => self.ignored.count(why),
                        _ => self.ignored.unexpected += 1,
                    },
                    Ok(None) => {
                        if !self.idle_until(since, deadline) {
                            break;
                        }
                        continue;
                    }
                    // Refused (nobody on that port yet): the next attempt
                    // may find the peer; this one waits out its time.
                    Err(TransportError::PeerGone(why)) => refused = Some(why),
                    Err(e) => return Err(e),
                }
                if self.clock.now() >= deadline {
                    break;
                }
            }
        }
        match refused {
            Some(why) => Err(TransportError::PeerGone(format!(
                "{} refused the session: {why}",
                Shown::<P>(&s.peer)
            ))),
            None => Err(TransportError::Timeout(
                self.cfg.handshake_timeout * self.cfg.handshake_attempts.max(1),
            )),
        }
    }

    /// One look for a frame; a peer the device knows is gone ends the
    /// session.
    #[inline]
    fn poll(&mut self) -> Result<Option<RxFrame<P::Addr>>, TransportError> {
        let r = self.phy.poll(&self.clock);
        if matches!(r, Err(TransportError::PeerGone(_))) {
            self.gone = true;
        }
        r
    }

    /// Act on one frame; `Ok(Some)` when it completed a message.
    fn handle(&mut self, f: &RxFrame<P::Addr>) -> Result<Option<Received>, TransportError> {
        let session = self.session.as_ref().map(|s| (s.peer, s.nonce));
        let verdict = classify(self.role, session, self.gate.as_deref(), f);
        // Only the session's own frames (and an admitted Hello) are traffic
        // that keeps a responder spinning: a stranger's datagrams, sent
        // more often than the sleep threshold, would otherwise keep it
        // from ever sleeping.
        if matches!(
            verdict,
            Verdict::Data(_) | Verdict::Hello { .. } | Verdict::Bye
        ) {
            self.last_activity = self.clock.now();
        }
        match verdict {
            Verdict::Data(h) => return Ok(self.offer(&h, f.cost_ticks)),
            Verdict::Ignore(why) => self.ignored.count(why),
            Verdict::Hello { src, nonce } => self.adopt(src, nonce)?,
            Verdict::HelloAck => self.ignored.unexpected += 1,
            Verdict::Bye => {
                self.gone = true;
                if self.role == Role::Server {
                    self.session = None;
                    self.reasm.reset();
                }
                let peer = session.map(|(p, _)| p);
                let who = peer.as_ref().map(Shown::<P>);
                return Err(TransportError::PeerGone(match who {
                    Some(w) => format!("{w} said bye"),
                    None => "the peer said bye".into(),
                }));
            }
        }
        Ok(None)
    }

    fn offer(&mut self, h: &Header, cost_ticks: u64) -> Option<Received> {
        match self.reasm.offer(h, cost_ticks) {
            Offer::Complete {
                bytes,
                meta,
                overhead_ticks,
            } => {
                self.counters.received(bytes);
                return Some(Received {
                    peer: 0,
                    bytes,
                    meta,
                    overhead_ns: self.clock.to_ns(overhead_ticks),
                });
            }
            Offer::Partial => {}
            Offer::Stale => self.ignored.stale += 1,
            Offer::Duplicate => self.ignored.duplicate += 1,
            Offer::Inconsistent => self.ignored.malformed += 1,
            Offer::Oversize => self.ignored.oversize += 1,
        }
        None
    }

    /// Server: an admitted Hello from `peer`. The same session again (a
    /// retried Hello) is only re-acknowledged; anything else starts a new
    /// session.
    fn adopt(&mut self, peer: P::Addr, nonce: u64) -> Result<(), TransportError> {
        let same = matches!(&self.session, Some(s) if s.peer == peer && s.nonce == nonce);
        if !same {
            let route = self.phy.route(&peer)?;
            self.session = Some(Session { nonce, peer, route });
            self.reasm.reset();
            self.gone = false;
            self.sessions_started += 1;
            tracing::debug!(
                "{}: session {nonce:#x} with {}, MTU {}",
                P::NAME,
                Shown::<P>(&peer),
                route.mtu_bytes
            );
        }
        let Some(s) = &self.session else {
            return Ok(());
        };
        let ack = Header::control(Kind::HelloAck, nonce);
        // Best effort: a lost ack makes the client retry its Hello.
        let sent = send_frame(
            &mut self.phy,
            &self.clock,
            &s.route.dest,
            &ack,
            &[],
            self.cfg.send_timeout,
        );
        match sent {
            Ok(()) | Err(TransportError::PeerGone(_)) | Err(TransportError::Timeout(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Nothing arrived: pause as the idle policy says, `since` being the
    /// last traffic. False once `deadline` has passed.
    #[inline]
    fn idle_until(&mut self, since: u64, deadline: u64) -> bool {
        let now = self.clock.now();
        if now >= deadline {
            return false;
        }
        match self.idle.pause(now.saturating_sub(since), deadline - now) {
            Pause::Spin => std::hint::spin_loop(),
            Pause::Yield => std::thread::yield_now(),
            Pause::Sleep(ticks) => {
                let ns = self.clock.to_ns(ticks).ceil() as u64;
                self.phy.wait_readable(Duration::from_nanos(ns));
            }
        }
        true
    }
}

/// Encode `h` and send it with `payload`, spinning on a full transmit queue
/// for at most `timeout` (measured on `clock` from the first refusal).
fn send_frame<P: Phy, C: Clock>(
    phy: &mut P,
    clock: &C,
    dest: &P::Dest,
    h: &Header,
    payload: &[u8],
    timeout: Duration,
) -> Result<(), TransportError> {
    let mut hdr = [0u8; HEADER_LEN];
    h.encode(&mut hdr)
        .map_err(|e| TransportError::Protocol(format!("cannot encode frame: {e}")))?;
    debug_assert_eq!(payload.len(), h.frag_len as usize);
    let mut deadline = None;
    loop {
        if phy.send(
            dest,
            Frame {
                header: &hdr,
                payload,
            },
        )? {
            return Ok(());
        }
        let now = clock.now();
        let end = *deadline
            .get_or_insert_with(|| now.saturating_add(clock.from_ns(timeout.as_nanos() as f64)));
        if now >= end {
            return Err(TransportError::Timeout(timeout));
        }
        std::hint::spin_loop();
    }
}

impl<P: Phy, C: Clock> Transport for Endpoint<P, C> {
    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        if peer != 0 {
            return Err(TransportError::NoPeer(peer));
        }
        self.last_activity = self.clock.now();
        if bytes > self.cfg.max_msg_bytes {
            return Err(TransportError::TooLarge {
                bytes,
                max: self.cfg.max_msg_bytes,
            });
        }
        let gone = || TransportError::PeerGone("the session peer has left".into());
        let Some(s) = &self.session else {
            return Err(if self.gone {
                gone()
            } else {
                TransportError::NoPeer(peer)
            });
        };
        if self.gone {
            return Err(gone());
        }
        self.send_seq = self.send_seq.wrapping_add(1);
        let frag = s.route.max_frag_bytes;
        let count = wire::fragment_count(bytes, frag);
        for i in 0..count {
            let h = Header::fragment(s.nonce, self.send_seq, meta, bytes, frag, i);
            let off = h.frag_offset as usize;
            let payload = &self.tx_payload[off..off + h.frag_len as usize];
            let sent = send_frame(
                &mut self.phy,
                &self.clock,
                &s.route.dest,
                &h,
                payload,
                self.cfg.send_timeout,
            );
            if let Err(e) = sent {
                if matches!(e, TransportError::PeerGone(_)) && self.role == Role::Client {
                    self.gone = true;
                }
                return Err(e);
            }
        }
        self.counters.sent(bytes);
        Ok(())
    }

    fn counters(&self) -> Counters {
        self.counters
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
        let deadline = start.saturating_add(self.ticks(timeout));
        if self.role == Role::Client {
            // A prober is never idle while it waits: it spins (then yields)
            // from the start of every wait.
            self.last_activity = self.last_activity.max(start);
        }
        loop {
            match self.poll()? {
                Some(f) => {
                    let now = self.clock.now();
                    if let Some(r) = self.handle(&f)? {
                        return Ok(r);
                    }
                    if now >= deadline {
                        return Err(TransportError::Timeout(timeout));
                    }
                }
                None => {
                    if !self.idle_until(self.last_activity, deadline) {
                        return Err(TransportError::Timeout(timeout));
                    }
                }
            }
        }
    }

    fn caps(&self) -> Caps {
        Caps {
            max_msg_bytes: self.cfg.max_msg_bytes,
            one_sided: false,
            has_recv_overhead: true,
            peers: 1,
        }
    }
}

impl<P: Phy, C: Clock> Drop for Endpoint<P, C> {
    fn drop(&mut self) {
        if let (Some(s), false) = (&self.session, self.gone) {
            let bye = Header::control(Kind::Bye, s.nonce);
            let _ = send_frame(
                &mut self.phy,
                &self.clock,
                &s.route.dest,
                &bye,
                &[],
                Duration::ZERO,
            );
        }
    }
}
