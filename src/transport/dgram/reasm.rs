//! Reassembly of fragmented messages, one message at a time.
//!
//! Fragments are matched by (sequence number, fragment index). A fragment
//! of a newer message drops an incomplete older one (counted), fragments of
//! older messages are stale and duplicates are discarded, so a lost frame
//! costs one message and nothing more. The bitmap of received fragments is
//! allocated once, for the most fragments a message may have
//! (`max_msg_bytes / MIN_FRAG_BYTES + 1`): offering a fragment allocates
//! nothing.

use super::wire::Header;
use super::MIN_FRAG_BYTES;
use crate::transport::Meta;

/// Outcome of offering one data fragment to the reassembly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Offer {
    Partial,
    Complete {
        bytes: usize,
        meta: Meta,
        overhead_ticks: u64,
    },
    Stale,
    Duplicate,
    Inconsistent,
    Oversize,
}

/// Reassembly of one message at a time, by (seq, fragment index).
pub struct Reassembly {
    /// A message has been seen in this session; `seq` is the newest.
    active: bool,
    seq: u32,
    complete: bool,
    msg_len: u32,
    frag_count: u32,
    got_bytes: u64,
    got_frags: u32,
    overhead_ticks: u64,
    meta: Meta,
    /// One bit per fragment; preallocated for the most fragments accepted.
    bitmap: Vec<u64>,
    max_msg_bytes: usize,
    pub dropped_incomplete: u64,
}

/// `a` is newer than `b` in wrapping sequence space.
fn seq_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl Reassembly {
    pub fn new(max_msg_bytes: usize) -> Self {
        let max_frags = max_msg_bytes / MIN_FRAG_BYTES + 1;
        Reassembly {
            active: false,
            seq: 0,
            complete: false,
            msg_len: 0,
            frag_count: 0,
            got_bytes: 0,
            got_frags: 0,
            overhead_ticks: 0,
            meta: Meta::default(),
            bitmap: vec![0; max_frags.div_ceil(64)],
            max_msg_bytes,
            dropped_incomplete: 0,
        }
    }

    /// Forget the session's messages (a new session starts).
    pub fn reset(&mut self) {
        self.active = false;
        self.complete = false;
    }

    fn max_frags(&self) -> usize {
        self.bitmap.len() * 64
    }

    /// Offer a decoded Data fragment whose datagram took `cost_ticks` to
    /// receive.
    pub fn offer(&mut self, h: &Header, cost_ticks: u64) -> Offer {
        if h.msg_len as usize > self.max_msg_bytes || h.frag_count as usize > self.max_frags() {
            return Offer::Oversize;
        }
        if !self.active || seq_newer(h.seq, self.seq) {
            if self.active && !self.complete && self.got_frags > 0 {
                self.dropped_incomplete += 1;
            }
            self.active = true;
            self.seq = h.seq;
            self.complete = false;
            self.msg_len = h.msg_len;
            self.frag_count = h.frag_count;
            self.got_bytes = 0;
            self.got_frags = 0;
            self.overhead_ticks = 0;
            self.meta = Meta {
                answer: h.answer,
                report_ns: h.report_ns,
            };
            let words = (h.frag_count as usize).div_ceil(64);
            self.bitmap[..words].fill(0);
        } else if h.seq != self.seq {
            return Offer::Stale;
        } else if self.complete {
            return Offer::Duplicate;
        } else if h.msg_len != self.msg_len || h.frag_count != self.frag_count {
            return Offer::Inconsistent;
        }
        let (word, bit) = (h.frag_index as usize / 64, h.frag_index % 64);
        if self.bitmap[word] & (1 << bit) != 0 {
            return Offer::Duplicate;
        }
        self.bitmap[word] |= 1 << bit;
        self.got_frags += 1;
        self.got_bytes += h.frag_len as u64;
        self.overhead_ticks += cost_ticks;
        if self.got_frags < self.frag_count {
            return Offer::Partial;
        }
        self.complete = true;
        if self.got_bytes != self.msg_len as u64 {
            // Overlapping fragments: not a message this sender could make.
            return Offer::Inconsistent;
        }
        Offer::Complete {
            bytes: self.msg_len as usize,
            meta: self.meta,
            overhead_ticks: self.overhead_ticks,
        }
    }
}
