//! "Myrinet-style" two-sided message transport (GM/MX semantics) over verbs
//! SEND/RECV on an RC queue pair.
//!
//! - **Tokens.** Each side pre-posts `DATA_TOKENS + CTRL_TOKENS` receive
//!   buffers of `HDR + eager_max` bytes. A data-class message (EAGER,
//!   RNDV_REQ) needs a credit; the sender starts with the peer's
//!   `DATA_TOKENS` credits and gets them back piggy-backed in the header of
//!   the peer's next message, or in an explicit CREDIT message once half of
//!   them are owed. Control messages (CREDIT, RNDV_FIN) use the reserved
//!   control tokens: at most one FIN (a sender blocks until its rendezvous
//!   finishes) and two CREDITs (each returns half the data credits) can be
//!   in flight, fewer than `CTRL_TOKENS`. So a receive buffer is always
//!   posted when a message arrives: the QP runs with `rnr_retry = 0`, and an
//!   RNR would be an error, not a silent retry.
//! - **Eager** (s ≤ eager_max): the payload is copied from the application
//!   buffer into a registered bounce buffer behind the header and sent; the
//!   receiver copies it out of the token into its application buffer and
//!   re-posts the token.
//! - **Rendezvous** (s > eager_max): a RNDV_REQ (header only) announces the
//!   size; the receiver RDMA-READs the payload from the sender's registered
//!   application buffer, then answers RNDV_FIN; the sender's `send` (post +
//!   local completion: the buffer is reusable) returns on the FIN. The extra
//!   round trip is the protocol change the estimator must find at eager_max.
//! - **Receive overhead** (`Received::overhead_ns`): from just before the
//!   `ibv_poll_cq` call that returned the completion to after the copy-out
//!   and the re-post of the token (for a rendezvous, the CPU time around
//!   the READ, not the wait for it).
//!
//! Nothing in the message path allocates (the queue of messages that arrive
//! while a send waits is preallocated) or makes a system call besides the
//! provider's own post/poll.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::open::{LinkSpec, Open, OpenError, Rendezvous};
use super::qp::{self, VerbsOptions, YIELD_AFTER};
use super::{
    check_from, check_send, Caps, Counters, Kind, Meta, PeerId, Received, Transport, TransportError,
};
use crate::clock::{Clock, HostClock, SpinDeadline};
use crate::verbs::exchange;
use crate::verbs::{self, Access, Completion, Cq, Link, Mr, RecvWr, SendOp, SendWr, VerbsError};

/// Data-class receive tokens each side posts (= the peer's credits).
pub const DATA_TOKENS: u32 = 16;
/// Extra tokens for control messages (CREDIT, RNDV_FIN).
pub const CTRL_TOKENS: u32 = 4;
/// Message header bytes.
pub const HDR_BYTES: usize = 16;
/// Default eager/rendezvous threshold.
pub const DEFAULT_EAGER_MAX_BYTES: usize = 16 * 1024;

const KIND_EAGER: u8 = 1;
const KIND_RNDV_REQ: u8 = 2;
const KIND_RNDV_FIN: u8 = 3;
const KIND_CREDIT: u8 = 4;
const FLAG_ANSWER: u8 = 1;

const WR_SEND: u64 = 1;
const WR_READ: u64 = 2;
const WR_CTRL: u64 = 3;

/// The header at the start of every message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    kind: u8,
    flags: u8,
    credits: u16,
    len: u32,
    report_ns: u32,
}

impl Header {
    fn encode(&self) -> [u8; HDR_BYTES] {
        let mut b = [0u8; HDR_BYTES];
        b[0] = self.kind;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.credits.to_le_bytes());
        b[4..8].copy_from_slice(&self.len.to_le_bytes());
        b[8..12].copy_from_slice(&self.report_ns.to_le_bytes());
        b
    }
    fn decode(b: &[u8; HDR_BYTES]) -> Header {
        Header {
            kind: b[0],
            flags: b[1],
            credits: u16::from_le_bytes([b[2], b[3]]),
            len: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            report_ns: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
}

/// Settings specific to the message transport.
#[derive(Clone, Debug)]
pub struct MsgOptions {
    pub verbs: VerbsOptions,
    /// Largest eager message; larger ones use the rendezvous.
    pub eager_max_bytes: usize,
}

fn round64(x: usize) -> usize {
    x.div_ceil(64) * 64
}

/// Offsets of the regions inside the one registered buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    token_bytes: usize,
    tokens: usize,
    bounce_off: usize,
    ctrl_off: usize,
    app_tx_off: usize,
    app_rx_off: usize,
    app_bytes: usize,
    total: usize,
}

impl Layout {
    fn new(eager_max: usize, max_msg: usize) -> Layout {
        let token_bytes = round64(HDR_BYTES + eager_max);
        let tokens = (DATA_TOKENS + CTRL_TOKENS) as usize;
        let bounce_off = tokens * token_bytes;
        let ctrl_off = bounce_off + token_bytes;
        let app_tx_off = ctrl_off + 64;
        let app_bytes = round64(max_msg.max(1));
        let app_rx_off = app_tx_off + app_bytes;
        Layout {
            token_bytes,
            tokens,
            bounce_off,
            ctrl_off,
            app_tx_off,
            app_rx_off,
            app_bytes,
            total: app_rx_off + app_bytes,
        }
    }
}

/// The two-sided message transport (one peer).
pub struct VerbsMsgTransport {
    link: Link,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    mr: Mr,
    lay: Layout,
    recv_wrs: Vec<RecvWr>,
    send_wr: SendWr,
    ctrl_wr: SendWr,
    read_wr: SendWr,
    peer_app_addr: u64,
    peer_rkey: u32,
    eager_max: usize,
    max_msg: usize,
    max_inline: usize,
    credits: u32,
    to_return: u32,
    fins: u32,
    ready: VecDeque<Received>,
    clock: HostClock,
    send_timeout: Duration,
    counters: Counters,
    /// Explicit CREDIT messages sent and RNDV round trips done (diagnostics).
    pub credit_messages: u64,
    pub rendezvous: u64,
}

impl VerbsMsgTransport {
    fn open_link(o: &MsgOptions) -> Result<Link, VerbsError> {
        let mut lo = o.verbs.link.clone();
        lo.max_recv_wr = DATA_TOKENS + CTRL_TOKENS;
        lo.max_send_wr = lo.max_send_wr.max(8);
        lo.rnr_retry = 0;
        Link::open(&lo)
    }

    fn register(link: &Link, lay: &Layout, huge: bool) -> Result<Mr, VerbsError> {
        Mr::new(
            &link.pd,
            lay.total,
            Access {
                remote_write: false,
                remote_read: true,
            },
            huge,
        )
    }

    fn endpoint(
        link: &Link,
        mr: &Mr,
        lay: &Layout,
        eager: usize,
        max_msg: usize,
    ) -> exchange::Endpoint {
        let mut ep = link.endpoint(Kind::Msg, mr);
        ep.addr = mr.addr() + lay.app_tx_off as u64;
        ep.size_bytes = lay.app_bytes as u64;
        ep.tokens = DATA_TOKENS;
        ep.token_bytes = lay.token_bytes as u32;
        ep.eager_max_bytes = eager as u32;
        ep.max_msg_bytes = max_msg as u64;
        ep
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        mut link: Link,
        mr: Mr,
        lay: Layout,
        eager: usize,
        max_msg: usize,
        peer: exchange::Endpoint,
        o: &MsgOptions,
    ) -> Result<Self, VerbsError> {
        if (peer.token_bytes as usize) < HDR_BYTES + eager.min(max_msg) && eager > 0 {
            return Err(VerbsError::Invalid(format!(
                "peer tokens of {} bytes cannot hold eager messages of {eager} bytes",
                peer.token_bytes
            )));
        }
        if peer.tokens < 2 {
            return Err(VerbsError::Invalid(format!(
                "peer posts only {} tokens",
                peer.tokens
            )));
        }
        let mut recv_wrs = Vec::with_capacity(lay.tokens);
        for i in 0..lay.tokens {
            let addr = mr.addr() + (i * lay.token_bytes) as u64;
            recv_wrs.push(RecvWr::new(i as u64, &mr, addr, lay.token_bytes as u32));
        }
        for wr in recv_wrs.iter_mut() {
            link.qp.post_recv(wr)?;
        }
        link.connect(&peer)?;
        let max_msg = max_msg
            .min(peer.size_bytes as usize)
            .min(peer.max_msg_bytes as usize);
        let mut send_wr = SendWr::new(SendOp::Send, WR_SEND, &mr);
        send_wr.set_local(mr.addr() + lay.bounce_off as u64, 0);
        let mut ctrl_wr = SendWr::new(SendOp::Send, WR_CTRL, &mr);
        ctrl_wr.set_local(mr.addr() + lay.ctrl_off as u64, HDR_BYTES as u32);
        let mut read_wr = SendWr::new(SendOp::RdmaRead, WR_READ, &mr);
        read_wr.set_local(mr.addr() + lay.app_rx_off as u64, 0);
        let max_inline = link.qp.max_inline_bytes() as usize;
        ctrl_wr.set_inline(HDR_BYTES <= max_inline);
        Ok(VerbsMsgTransport {
            send_cq: link.send_cq.clone(),
            recv_cq: link.recv_cq.clone(),
            link,
            mr,
            lay,
            recv_wrs,
            send_wr,
            ctrl_wr,
            read_wr,
            peer_app_addr: peer.addr,
            peer_rkey: peer.rkey,
            eager_max: eager,
            max_msg,
            max_inline,
            credits: peer.tokens,
            to_return: 0,
            fins: 0,
            ready: VecDeque::with_capacity(4 * lay.tokens),
            clock: o.verbs.clock,
            send_timeout: o.verbs.send_timeout,
            counters: Counters::default(),
            credit_messages: 0,
            rendezvous: 0,
        })
    }

    pub fn eager_max_bytes(&self) -> usize {
        self.eager_max
    }
    pub fn max_inline_bytes(&self) -> usize {
        self.max_inline
    }
    pub fn device(&self) -> &str {
        self.link.ctx.name()
    }

    fn base(&self) -> *mut u8 {
        self.mr.as_ptr()
    }

    /// Wait for the one outstanding send-queue operation to complete.
    fn wait_send(&mut self, wr_id: u64, what: &str) -> Result<(), TransportError> {
        let mut deadline = SpinDeadline::new(&self.clock, self.send_timeout)
            .yielding_after(&self.clock, YIELD_AFTER);
        loop {
            match self.send_cq.poll() {
                Ok(Some(c)) => return check_completion(&c, wr_id, what),
                Ok(None) => {}
                Err(e) => return Err(TransportError::Protocol(e.to_string())),
            }
            if deadline.expired(&self.clock) {
                return Err(TransportError::Timeout(self.send_timeout));
            }
            std::hint::spin_loop();
        }
    }

    /// Send a header-only control message (no credit needed).
    fn send_ctrl(&mut self, kind: u8) -> Result<(), TransportError> {
        let h = Header {
            kind,
            flags: 0,
            credits: self.take_returns(),
            len: 0,
            report_ns: 0,
        };
        let bytes = h.encode();
        // SAFETY: the control slot is 64 bytes inside our registration; the
        // previous control send completed, so the NIC is not reading it.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base().add(self.lay.ctrl_off),
                HDR_BYTES,
            )
        };
        self.link
            .qp
            .post_send(&mut self.ctrl_wr)
            .map_err(|e| TransportError::PeerGone(e.to_string()))?;
        self.wait_send(WR_CTRL, "control send")
    }

    fn take_returns(&mut self) -> u16 {
        let r = self.to_return.min(u32::from(u16::MAX));
        self.to_return -= r;
        r as u16
    }

    fn repost(&mut self, token: usize) -> Result<(), TransportError> {
        let wr = &mut self.recv_wrs[token];
        self.link
            .qp
            .post_recv(wr)
            .map_err(|e| TransportError::PeerGone(e.to_string()))
    }

    /// Handle one receive completion seen by a poll started at `t0`.
    /// Returns a message for the application, if it was one.
    fn process(&mut self, c: Completion, t0: u64) -> Result<Option<Received>, TransportError> {
        check_completion(&c, c.wr_id, "receive")?;
        let token = c.wr_id as usize;
        if token >= self.lay.tokens || (c.byte_len as usize) < HDR_BYTES {
            return Err(TransportError::Protocol(format!(
                "receive completion for token {token} with {} bytes",
                c.byte_len
            )));
        }
        let tok = self.lay.token_bytes * token;
        let mut hb = [0u8; HDR_BYTES];
        // SAFETY: the token lies inside our registration and its receive has
        // completed, so the NIC no longer writes it.
        unsafe { std::ptr::copy_nonoverlapping(self.base().add(tok), hb.as_mut_ptr(), HDR_BYTES) };
        let h = Header::decode(&hb);
        self.credits += u32::from(h.credits);
        let meta = Meta {
            answer: h.flags & FLAG_ANSWER != 0,
            report_ns: h.report_ns,
        };
        match h.kind {
            KIND_CREDIT => {
                self.repost(token)?;
                Ok(None)
            }
            KIND_RNDV_FIN => {
                self.repost(token)?;
                self.fins += 1;
                Ok(None)
            }
            KIND_EAGER => {
                let len = h.len as usize;
                if len > self.eager_max || HDR_BYTES + len > c.byte_len as usize {
                    return Err(TransportError::Protocol(format!(
                        "eager message of {len} bytes in a {} byte receive",
                        c.byte_len
                    )));
                }
                // SAFETY: len ≤ eager_max, so source (token payload) and
                // destination (application rx buffer, ≥ eager_max when
                // max_msg ≥ eager_max, checked against app_bytes below) are
                // inside our registration and do not overlap.
                let n = len.min(self.lay.app_bytes);
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.base().add(tok + HDR_BYTES),
                        self.base().add(self.lay.app_rx_off),
                        n,
                    )
                };
                self.repost(token)?;
                self.to_return += 1;
                let t1 = self.clock.now();
                Ok(Some(self.received(
                    len,
                    meta,
                    self.clock.to_ns(t1.wrapping_sub(t0)),
                )))
            }
            KIND_RNDV_REQ => {
                let len = h.len as usize;
                if len > self.lay.app_bytes {
                    return Err(TransportError::Protocol(format!(
                        "rendezvous of {len} bytes exceeds the {} byte buffer",
                        self.lay.app_bytes
                    )));
                }
                self.repost(token)?;
                self.to_return += 1;
                self.read_wr
                    .set_local(self.mr.addr() + self.lay.app_rx_off as u64, len as u32);
                self.read_wr.set_remote(self.peer_app_addr, self.peer_rkey);
                self.link
                    .qp
                    .post_send(&mut self.read_wr)
                    .map_err(|e| TransportError::PeerGone(e.to_string()))?;
                let t1 = self.clock.now();
                self.wait_send(WR_READ, "rendezvous RDMA read")?;
                let t2 = self.clock.now();
                self.send_ctrl(KIND_RNDV_FIN)?;
                let t3 = self.clock.now();
                let cpu = t1.wrapping_sub(t0).wrapping_add(t3.wrapping_sub(t2));
                self.rendezvous += 1;
                Ok(Some(self.received(len, meta, self.clock.to_ns(cpu))))
            }
            k => Err(TransportError::Protocol(format!(
                "unknown message kind {k}"
            ))),
        }
    }

    fn received(&mut self, len: usize, meta: Meta, overhead_ns: f64) -> Received {
        self.counters.received(len);
        Received {
            peer: 0,
            bytes: len,
            meta,
            overhead_ns,
        }
    }

    /// Poll the receive queue once; queue any application message.
    fn poll_into_ready(&mut self) -> Result<bool, TransportError> {
        let t0 = self.clock.now();
        match self.recv_cq.poll() {
            Ok(Some(c)) => {
                if let Some(r) = self.process(c, t0)? {
                    if self.ready.len() == self.ready.capacity() {
                        return Err(TransportError::Protocol(
                            "more unread messages than tokens".into(),
                        ));
                    }
                    self.ready.push_back(r);
                }
                Ok(true)
            }
            Ok(None) => Ok(false),
            Err(e) => Err(TransportError::Protocol(e.to_string())),
        }
    }

    /// Return owed credits explicitly once half the peer's are owed.
    fn maybe_return_credits(&mut self) -> Result<(), TransportError> {
        if self.to_return >= DATA_TOKENS / 2 {
            self.send_ctrl(KIND_CREDIT)?;
            self.credit_messages += 1;
        }
        Ok(())
    }

    /// Spin until `done(self)` holds, processing arrivals, with a deadline.
    fn wait_until(
        &mut self,
        timeout: Duration,
        done: impl Fn(&Self) -> bool,
    ) -> Result<(), TransportError> {
        let mut deadline =
            SpinDeadline::new(&self.clock, timeout).yielding_after(&self.clock, YIELD_AFTER);
        while !done(self) {
            if !self.poll_into_ready()? {
                if deadline.expired(&self.clock) {
                    return Err(TransportError::Timeout(timeout));
                }
                if deadline.at_checkpoint() {
                    self.maybe_return_credits()?;
                }
                std::hint::spin_loop();
            }
        }
        Ok(())
    }
}

fn check_completion(c: &Completion, want: u64, what: &str) -> Result<(), TransportError> {
    if !c.ok() {
        return Err(TransportError::PeerGone(format!(
            "{what} completed with status {} ({})",
            verbs::wc_status_str(c.status),
            c.status
        )));
    }
    if c.wr_id != want {
        return Err(TransportError::Protocol(format!(
            "{what}: completion of work request {} while waiting for {want}",
            c.wr_id
        )));
    }
    Ok(())
}

/// The local end of a message session before the endpoint exchange, for
/// exchanges over another channel (the daemon's control plane). The asking
/// side uses [`MsgSetup::new`] (its own eager threshold and maximum size),
/// the answering side [`MsgSetup::answering`] (it adopts the asker's,
/// capped by its own maximum). Receive tokens are posted by
/// [`connect`](Self::connect) before the QP can receive.
pub struct MsgSetup {
    link: Link,
    mr: Mr,
    lay: Layout,
    eager: usize,
    max_msg: usize,
}

impl MsgSetup {
    pub fn new(o: &MsgOptions) -> Result<Self, VerbsError> {
        let link = VerbsMsgTransport::open_link(o)?;
        Self::build(link, o.eager_max_bytes, o.verbs.max_msg_bytes, o)
    }

    /// Lay out and register the buffers for `eager` / `max_msg`.
    fn build(link: Link, eager: usize, max_msg: usize, o: &MsgOptions) -> Result<Self, VerbsError> {
        let lay = Layout::new(eager, max_msg);
        let mr = VerbsMsgTransport::register(&link, &lay, o.verbs.huge_pages)?;
        Ok(MsgSetup {
            link,
            mr,
            lay,
            eager,
            max_msg,
        })
    }

    pub fn answering(peer: &exchange::Endpoint, o: &MsgOptions) -> Result<Self, VerbsError> {
        Self::answering_with(VerbsMsgTransport::open_link(o)?, peer, o)
    }

    fn answering_with(
        link: Link,
        peer: &exchange::Endpoint,
        o: &MsgOptions,
    ) -> Result<Self, VerbsError> {
        let max_msg = (peer.max_msg_bytes as usize).min(o.verbs.max_msg_bytes);
        let eager = (peer.eager_max_bytes as usize).min(max_msg.max(1));
        Self::build(link, eager, max_msg, o)
    }

    pub fn endpoint(&self) -> exchange::Endpoint {
        VerbsMsgTransport::endpoint(&self.link, &self.mr, &self.lay, self.eager, self.max_msg)
    }

    /// Post the receive tokens and connect the QP to `peer`.
    pub fn connect(
        self,
        peer: exchange::Endpoint,
        o: &MsgOptions,
    ) -> Result<VerbsMsgTransport, VerbsError> {
        VerbsMsgTransport::finish(
            self.link,
            self.mr,
            self.lay,
            self.eager,
            self.max_msg,
            peer,
            o,
        )
    }
}

impl Transport for VerbsMsgTransport {
    fn caps(&self) -> Caps {
        Caps::single(Kind::Msg, self.max_msg)
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        check_send(peer, bytes, self.max_msg)?;
        if self.credits == 0 {
            self.wait_until(self.send_timeout, |t| t.credits > 0)?;
        }
        self.credits -= 1;
        let eager = bytes <= self.eager_max;
        let h = Header {
            kind: if eager { KIND_EAGER } else { KIND_RNDV_REQ },
            flags: if meta.answer { FLAG_ANSWER } else { 0 },
            credits: self.take_returns(),
            len: bytes as u32,
            report_ns: meta.report_ns,
        };
        let hb = h.encode();
        let bounce = self.lay.bounce_off;
        let wire = if eager { HDR_BYTES + bytes } else { HDR_BYTES };
        // SAFETY: the bounce buffer holds HDR + eager_max bytes inside our
        // registration; for an eager message bytes ≤ eager_max and the
        // application tx buffer holds ≥ bytes; the regions do not overlap.
        // The previous send completed, so the NIC is not reading them.
        unsafe {
            std::ptr::copy_nonoverlapping(hb.as_ptr(), self.base().add(bounce), HDR_BYTES);
            if eager {
                std::ptr::copy_nonoverlapping(
                    self.base().add(self.lay.app_tx_off),
                    self.base().add(bounce + HDR_BYTES),
                    bytes,
                );
            }
        }
        self.send_wr
            .set_local(self.mr.addr() + bounce as u64, wire as u32);
        self.send_wr.set_inline(wire <= self.max_inline);
        self.link
            .qp
            .post_send(&mut self.send_wr)
            .map_err(|e| TransportError::PeerGone(e.to_string()))?;
        self.wait_send(WR_SEND, "send")?;
        if !eager {
            // The buffer is reusable once the peer has read it.
            let want = self.fins + 1;
            self.wait_until(self.send_timeout, |t| t.fins >= want)?;
        }
        self.counters.sent(bytes);
        Ok(())
    }

    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        check_from(from)?;
        if let Some(r) = self.ready.pop_front() {
            return Ok(r);
        }
        self.maybe_return_credits()?;
        self.wait_until(timeout, |t| !t.ready.is_empty())?;
        self.ready
            .pop_front()
            .ok_or_else(|| TransportError::Protocol("lost a queued message".into()))
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

impl MsgOptions {
    /// The options of `spec`: the verbs options and its eager threshold.
    pub fn of(spec: &LinkSpec) -> Result<MsgOptions, OpenError> {
        Ok(MsgOptions {
            verbs: qp::options(spec)?,
            eager_max_bytes: spec.options.verbs.eager_max_bytes,
        })
    }
}

impl Open for VerbsMsgTransport {
    /// Opens the device and registers the buffers, then releases them.
    fn check(spec: &LinkSpec) -> Result<(), OpenError> {
        drop(MsgSetup::new(&MsgOptions::of(spec)?)?);
        Ok(())
    }

    fn driver(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let o = MsgOptions::of(spec)?;
        let s = MsgSetup::new(&o)?;
        qp::drive(s.endpoint(), rdv, |peer| s.connect(peer, &o))
    }

    /// The answering end adopts the driver's eager threshold and maximum
    /// size (capped by its own maximum).
    fn responder(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let o = MsgOptions::of(spec)?;
        let peer = rdv.peer_endpoint(Kind::Msg)?;
        let s = MsgSetup::answering(&peer, &o)?;
        qp::answer(s.endpoint(), peer, rdv, |peer| s.connect(peer, &o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            kind: KIND_RNDV_REQ,
            flags: FLAG_ANSWER,
            credits: 9,
            len: 70_000,
            report_ns: 1234,
        };
        assert_eq!(Header::decode(&h.encode()), h);
    }

    #[test]
    fn layout_regions_are_disjoint_and_aligned() {
        let l = Layout::new(16_384, 65_536);
        assert_eq!(l.token_bytes, round64(16_400));
        assert_eq!(l.tokens, (DATA_TOKENS + CTRL_TOKENS) as usize);
        assert!(l.bounce_off >= l.tokens * l.token_bytes);
        assert!(l.ctrl_off >= l.bounce_off + HDR_BYTES + 16_384);
        assert!(l.app_tx_off >= l.ctrl_off + HDR_BYTES);
        assert_eq!(l.app_rx_off, l.app_tx_off + 65_536);
        assert_eq!(l.total, l.app_rx_off + 65_536);
        for off in [l.bounce_off, l.ctrl_off, l.app_tx_off, l.app_rx_off] {
            assert_eq!(off % 64, 0);
        }
    }

    #[test]
    fn control_tokens_cover_the_worst_case() {
        // One FIN (a sender blocks until its rendezvous ends) plus the
        // CREDIT messages that can be unread: each returns ≥ DATA_TOKENS/2.
        let credit_msgs = DATA_TOKENS / (DATA_TOKENS / 2);
        assert!(credit_msgs < CTRL_TOKENS);
    }
}
