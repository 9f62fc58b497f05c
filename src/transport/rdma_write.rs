//! One-sided RDMA-write probe transport over an RC queue pair.
//!
//! Each side registers one pinned buffer of two slots: `rx` (the peer writes
//! into it) and `tx` (the source of our writes). A message of `s` bytes is
//! written so that it ENDS at the end of the peer's `rx` slot; its last 16
//! bytes are a trailer (for `s < 16`, 16 bytes are written):
//!
//! ```text
//! end-16: report_ns u32 | seq u32        (word B)
//! end-8:  len u31 + answer bit u32 | seq u32   (word A, the stamp)
//! ```
//!
//! The receiver spins on the stamp (an atomic 8-byte load of the last 8
//! bytes of its `rx` slot) until its sequence number changes, then checks
//! that B carries the same sequence (so a newer write still being placed is
//! never mixed with an older stamp). RC delivers in order, so when the stamp
//! jumps by k, k messages have fully arrived: `recv` returns them one by one
//! (the earlier ones without meta: within a PRTT burst only the last one
//! carries `answer`).
//!
//! The work request is built once; sends up to the device's inline limit go
//! inline; the sender busy-polls its signaled completion. The loop makes no
//! allocation and no system call of its own (the provider's doorbell is the
//! transport's own). One-sided: o_r = 0.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::open::{LinkSpec, Open, OpenError, Rendezvous};
pub use super::qp::VerbsOptions;
use super::qp::{self, YIELD_AFTER};
use super::{
    check_from, check_send, Caps, Counters, Kind, Meta, PeerId, Received, Transport, TransportError,
};
use crate::clock::{HostClock, SpinDeadline};
use crate::verbs::exchange;
use crate::verbs::{self, Access, Cq, Link, Mr, SendOp, SendWr, VerbsError};

/// Bytes of the trailer at the end of every written message.
pub const TRAILER_BYTES: usize = 16;
const ANSWER_BIT: u32 = 1 << 31;

/// Round up to a multiple of 64 (stamp alignment and cache lines).
fn slot_bytes(max_msg: usize) -> usize {
    max_msg.max(TRAILER_BYTES).div_ceil(64) * 64
}

fn next_seq(s: u32) -> u32 {
    if s == u32::MAX {
        1
    } else {
        s + 1
    }
}

/// The RDMA-write transport (one peer).
pub struct RdmaWriteTransport {
    link: Link,
    send_cq: Arc<Cq>,
    mr: Mr,
    slot: usize,
    wr: SendWr,
    remote_end: u64,
    remote_rkey: u32,
    max_inline: usize,
    max_msg: usize,
    send_seq: u32,
    seen_seq: u32,
    delivered_seq: u32,
    latest_len: usize,
    latest_meta: Meta,
    clock: HostClock,
    send_timeout: Duration,
    counters: Counters,
    path_mtu_bytes: usize,
    /// Posted writes not yet retired by a signaled completion.
    outstanding: u32,
    /// Writes posted since the last signaled one.
    unsignaled: u32,
    sq_depth: u32,
}

/// Inline writes per signaled one.
const SIGNAL_EVERY: u32 = 4;

impl RdmaWriteTransport {
    fn local(o: &VerbsOptions) -> Result<(Link, Mr, usize), VerbsError> {
        if o.max_msg_bytes >= ANSWER_BIT as usize {
            return Err(VerbsError::Invalid(format!(
                "max message of {} bytes exceeds 2^31−1",
                o.max_msg_bytes
            )));
        }
        let mut lo = o.link.clone();
        lo.max_send_wr = lo.max_send_wr.max(2 * SIGNAL_EVERY);
        lo.max_recv_wr = lo.max_recv_wr.max(1);
        let link = Link::open(&lo)?;
        let slot = slot_bytes(o.max_msg_bytes);
        let mr = Mr::new(
            &link.pd,
            2 * slot,
            Access {
                remote_write: true,
                remote_read: false,
            },
            o.huge_pages,
        )?;
        Ok((link, mr, slot))
    }

    fn endpoint(link: &Link, mr: &Mr, slot: usize, max_msg: usize) -> exchange::Endpoint {
        let mut ep = link.endpoint(Kind::Rdma, mr);
        // The peer may write only into the rx slot (the first one).
        ep.size_bytes = slot as u64;
        ep.max_msg_bytes = max_msg as u64;
        ep
    }

    fn finish(
        mut link: Link,
        mr: Mr,
        slot: usize,
        peer: exchange::Endpoint,
        o: &VerbsOptions,
    ) -> Result<Self, VerbsError> {
        if peer.size_bytes < TRAILER_BYTES as u64 {
            return Err(VerbsError::Invalid(format!(
                "peer offers a target buffer of only {} bytes",
                peer.size_bytes
            )));
        }
        link.connect(&peer)?;
        let max_msg = o
            .max_msg_bytes
            .min(peer.size_bytes as usize)
            .min(peer.max_msg_bytes as usize)
            .min(link.port.max_msg_bytes.max(TRAILER_BYTES as u32) as usize);
        let wr = SendWr::new(SendOp::RdmaWrite, 1, &mr);
        Ok(RdmaWriteTransport {
            send_cq: link.send_cq.clone(),
            max_inline: link.qp.max_inline_bytes() as usize,
            path_mtu_bytes: link.path_mtu_bytes(&peer),
            link,
            mr,
            slot,
            wr,
            remote_end: peer.addr + peer.size_bytes,
            remote_rkey: peer.rkey,
            max_msg,
            send_seq: 0,
            seen_seq: 0,
            delivered_seq: 0,
            latest_len: 0,
            latest_meta: Meta::default(),
            clock: o.clock,
            send_timeout: o.send_timeout,
            counters: Counters::default(),
            outstanding: 0,
            unsignaled: 0,
            sq_depth: o.link.max_send_wr.max(4).max(2 * SIGNAL_EVERY),
        })
    }

    /// Inline payload limit the device granted.
    pub fn max_inline_bytes(&self) -> usize {
        self.max_inline
    }
    pub fn path_mtu_bytes(&self) -> usize {
        self.path_mtu_bytes
    }
    pub fn device(&self) -> &str {
        self.link.ctx.name()
    }
    /// Reap send completions: one poll, or (`wait`) until one arrives
    /// within the send timeout. Each signaled completion retires the
    /// writes it covers (its wr_id). An error completion (e.g. retries
    /// exceeded towards a dead peer) is `PeerGone`.
    fn reap(&mut self, wait: bool) -> Result<(), TransportError> {
        let mut deadline = SpinDeadline::new(&self.clock, self.send_timeout)
            .yielding_after(&self.clock, YIELD_AFTER);
        loop {
            match self.send_cq.poll() {
                Ok(Some(c)) if c.ok() => {
                    self.outstanding = self.outstanding.saturating_sub(c.wr_id as u32);
                    return Ok(());
                }
                Ok(Some(c)) => {
                    return Err(TransportError::PeerGone(format!(
                        "RDMA write completed with status {} ({})",
                        verbs::wc_status_str(c.status),
                        c.status
                    )))
                }
                Ok(None) if !wait => return Ok(()),
                Ok(None) => {}
                Err(e) => return Err(TransportError::Protocol(e.to_string())),
            }
            if deadline.expired(&self.clock) {
                return Err(TransportError::Timeout(self.send_timeout));
            }
            std::hint::spin_loop();
        }
    }

    #[inline]
    fn stamp(&self) -> &AtomicU64 {
        // SAFETY: the rx slot is [0, slot) of our mapping, slot is a
        // multiple of 64 and the mapping page-aligned, so slot−8 is an
        // aligned 8-byte word inside it, alive as long as self. The NIC
        // writes it concurrently, which is why it is read atomically.
        unsafe { &*(self.mr.as_ptr().add(self.slot - 8) as *const AtomicU64) }
    }

    #[inline]
    fn word_b(&self) -> &AtomicU64 {
        // SAFETY: as for `stamp`, the word before it.
        unsafe { &*(self.mr.as_ptr().add(self.slot - 16) as *const AtomicU64) }
    }

    /// Look at the stamp once; true when a newer message has arrived.
    #[inline]
    fn poll_stamp(&mut self) -> bool {
        let a = self.stamp().load(Ordering::Acquire);
        let seq = (a >> 32) as u32;
        if seq == 0 || seq == self.seen_seq {
            return false;
        }
        let b = self.word_b().load(Ordering::Acquire);
        let a2 = self.stamp().load(Ordering::Acquire);
        if a2 != a || (b >> 32) as u32 != seq {
            // A newer write is being placed; look again.
            return false;
        }
        let lo = a as u32;
        self.seen_seq = seq;
        self.latest_len = (lo & !ANSWER_BIT) as usize;
        self.latest_meta = Meta {
            answer: lo & ANSWER_BIT != 0,
            report_ns: b as u32,
        };
        true
    }

    fn deliver(&mut self) -> Received {
        self.delivered_seq = next_seq(self.delivered_seq);
        let meta = if self.delivered_seq == self.seen_seq {
            self.latest_meta
        } else {
            Meta::default()
        };
        self.counters.received(self.latest_len);
        Received {
            peer: 0,
            bytes: self.latest_len,
            meta,
            overhead_ns: 0.0,
        }
    }
}

/// The local end of an RDMA-write session before the endpoint exchange:
/// [`endpoint`](Self::endpoint) is what to send the peer,
/// [`connect`](Self::connect) takes the peer's answer. Its queue pair must
/// reach RTR before the peer writes: the side that answers connects before
/// it sends its endpoint, and the side that asked connects before its
/// first message.
pub struct RdmaWriteSetup {
    link: Link,
    mr: Mr,
    slot: usize,
}

impl RdmaWriteSetup {
    /// Open the device, register the buffers (pinned), create the QP.
    pub fn new(o: &VerbsOptions) -> Result<Self, VerbsError> {
        let (link, mr, slot) = RdmaWriteTransport::local(o)?;
        Ok(RdmaWriteSetup { link, mr, slot })
    }
    pub fn endpoint(&self, o: &VerbsOptions) -> exchange::Endpoint {
        RdmaWriteTransport::endpoint(&self.link, &self.mr, self.slot, o.max_msg_bytes)
    }
    /// Connect the QP to `peer` (INIT → RTR → RTS).
    pub fn connect(
        self,
        peer: exchange::Endpoint,
        o: &VerbsOptions,
    ) -> Result<RdmaWriteTransport, VerbsError> {
        RdmaWriteTransport::finish(self.link, self.mr, self.slot, peer, o)
    }
}

impl Transport for RdmaWriteTransport {
    fn caps(&self) -> Caps {
        Caps::single(Kind::Rdma, self.max_msg)
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        check_send(peer, bytes, self.max_msg)?;
        self.send_seq = next_seq(self.send_seq);
        let seq = u64::from(self.send_seq) << 32;
        let lo = bytes as u32 | if meta.answer { ANSWER_BIT } else { 0 };
        let wire = bytes.max(TRAILER_BYTES);
        let tx = self.mr.as_ptr() as usize + self.slot; // tx slot start
        let tx_end = tx + self.slot;
        // SAFETY: tx_end−16 .. tx_end is the aligned end of our tx slot; the
        // previous write's completion was reaped, so the NIC does not read
        // it now.
        unsafe {
            std::ptr::write_volatile((tx_end - 16) as *mut u64, seq | u64::from(meta.report_ns));
            std::ptr::write_volatile((tx_end - 8) as *mut u64, seq | u64::from(lo));
        }
        let inline = wire <= self.max_inline;
        // Free a send-queue slot first if the queue is full.
        if self.outstanding + 1 >= self.sq_depth {
            self.reap(true)?;
        }
        self.unsignaled += 1;
        // An inline write's source is reusable when the post returns (the
        // local completion in the MPI sense), so only every SIGNAL_EVERY-th
        // inline write asks for a completion, reaped later; a write from the
        // buffer is signaled and waited for before `send` returns.
        let signaled = !inline || self.unsignaled >= SIGNAL_EVERY;
        self.wr.set_local((tx_end - wire) as u64, wire as u32);
        self.wr
            .set_remote(self.remote_end - wire as u64, self.remote_rkey);
        self.wr.set_inline(inline);
        self.wr.set_signaled(signaled);
        self.wr.set_wr_id(u64::from(self.unsignaled));
        self.link
            .qp
            .post_send(&mut self.wr)
            .map_err(|e| TransportError::PeerGone(e.to_string()))?;
        self.outstanding += 1;
        if signaled {
            self.unsignaled = 0;
        }
        if inline {
            self.reap(false)?;
        } else {
            while self.outstanding > 0 {
                self.reap(true)?;
            }
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
        if self.delivered_seq != self.seen_seq || self.poll_stamp() {
            return Ok(self.deliver());
        }
        let mut deadline =
            SpinDeadline::new(&self.clock, timeout).yielding_after(&self.clock, YIELD_AFTER);
        loop {
            if self.poll_stamp() {
                return Ok(self.deliver());
            }
            if deadline.expired(&self.clock) {
                return Err(TransportError::Timeout(timeout));
            }
            if deadline.at_checkpoint() {
                // Reap our own writes meanwhile; a failed one ends the wait.
                self.reap(false)?;
            }
            std::hint::spin_loop();
        }
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

impl Open for RdmaWriteTransport {
    /// Opens the device and registers the buffers, then releases them: a
    /// device, port, GID or `RLIMIT_MEMLOCK` problem shows here.
    fn check(spec: &LinkSpec) -> Result<(), OpenError> {
        drop(RdmaWriteSetup::new(&qp::options(spec)?)?);
        Ok(())
    }

    fn driver(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let o = qp::options(spec)?;
        let s = RdmaWriteSetup::new(&o)?;
        let t = qp::drive(s.endpoint(&o), rdv, |peer| s.connect(peer, &o))?;
        tracing::info!(
            "rdma: {} inline ≤ {} B, path MTU {} B",
            t.device(),
            t.max_inline_bytes(),
            t.path_mtu_bytes()
        );
        Ok(t)
    }

    fn responder(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let o = qp::options(spec)?;
        let s = RdmaWriteSetup::new(&o)?;
        let peer = rdv.peer_endpoint(Kind::Rdma)?;
        qp::answer(s.endpoint(&o), peer, rdv, |peer| s.connect(peer, &o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_aligned_and_hold_the_trailer() {
        assert_eq!(slot_bytes(1), 64);
        assert_eq!(slot_bytes(64), 64);
        assert_eq!(slot_bytes(65), 128);
        assert_eq!(slot_bytes(65_536), 65_536);
    }

    #[test]
    fn sequence_skips_zero() {
        assert_eq!(next_seq(0), 1);
        assert_eq!(next_seq(7), 8);
        assert_eq!(next_seq(u32::MAX), 1);
    }
}
