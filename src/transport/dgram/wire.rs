//! The wire layer of the datagram core: the frame header every UDP
//! datagram and raw Ethernet payload starts with. No state, no I/O.
//!
//! Every datagram or Ethernet payload starts with one fixed, versioned,
//! little-endian header of [`HEADER_LEN`] bytes, followed by `frag_len`
//! payload bytes. Bytes after those (Ethernet minimum-size padding) are
//! ignored.
//!
//! ```text
//! offset size field
//!  0     2    magic        0x474E ("NG" on the wire)
//!  2     1    version      1
//!  3     1    kind         1 Hello, 2 HelloAck, 3 Data, 4 Bye
//!  4     1    flags        bit 0: answer (the receiver must answer)
//!  5     1    reserved     0
//!  6     2    frag_len     payload bytes in this frame
//!  8     8    nonce        session nonce chosen by the client's Hello
//! 16     4    seq          message sequence number (per sender, wrapping)
//! 20     4    frag_offset  offset of this fragment in the message
//! 24     4    msg_len      total message length, bytes
//! 28     4    report_ns    a measurement reported to the receiver, ns
//! 32     4    frag_index   index of this fragment (0-based)
//! 36     4    frag_count   number of fragments in the message
//! ```
//!
//! Invariants checked by [`Header::decode`] (and by [`Header::encode`], so an
//! encoder never emits what a decoder rejects):
//! - Data: `frag_index < frag_count`, `frag_offset + frag_len <= msg_len`,
//!   the fragment is the last one exactly when it ends at `msg_len`, an empty
//!   message is one empty fragment, otherwise fragments are non-empty.
//! - Hello, HelloAck, Bye: no flags and every fragment field zero.

use crate::transport::Meta;

/// Magic number, first two bytes of every frame.
pub const MAGIC: u16 = 0x474E;
/// Wire format version this code speaks.
pub const VERSION: u8 = 1;
/// Size of the header on the wire.
pub const HEADER_LEN: usize = 40;
/// Flag bit: the receiver must answer this message.
pub const FLAG_ANSWER: u8 = 0x01;

/// Frame kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Client → server: start a session with this nonce.
    Hello = 1,
    /// Server → client: session accepted (echoes the nonce).
    HelloAck = 2,
    /// A fragment of a message.
    Data = 3,
    /// End of session (best effort).
    Bye = 4,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        match b {
            1 => Some(Kind::Hello),
            2 => Some(Kind::HelloAck),
            3 => Some(Kind::Data),
            4 => Some(Kind::Bye),
            _ => None,
        }
    }
}

/// Why bytes are not a valid frame (or a header cannot be encoded).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    #[error("unsupported version {0}")]
    BadVersion(u8),
    #[error("unknown kind {0}")]
    BadKind(u8),
    #[error("unknown flags {0:#04x} for this kind")]
    BadFlags(u8),
    #[error("reserved byte is {0}, not 0")]
    Reserved(u8),
    #[error("inconsistent fragment fields: {0}")]
    BadFragment(&'static str),
    #[error("buffer of {have} bytes cannot hold {need}")]
    BufferTooSmall { need: usize, have: usize },
}

/// The decoded frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    /// The receiver must answer this message with one of the same size.
    pub answer: bool,
    pub nonce: u64,
    pub seq: u32,
    pub frag_offset: u32,
    pub msg_len: u32,
    pub report_ns: u32,
    pub frag_index: u32,
    pub frag_count: u32,
    pub frag_len: u16,
}

impl Header {
    /// A control frame (Hello, HelloAck, Bye) for `nonce`.
    pub fn control(kind: Kind, nonce: u64) -> Header {
        Header {
            kind,
            answer: false,
            nonce,
            seq: 0,
            frag_offset: 0,
            msg_len: 0,
            report_ns: 0,
            frag_index: 0,
            frag_count: 0,
            frag_len: 0,
        }
    }

    /// Fragment `index` of message `seq` of `msg_len` bytes cut into pieces
    /// of `frag_bytes` (the last one shorter), carrying `meta`.
    pub fn fragment(
        nonce: u64,
        seq: u32,
        meta: Meta,
        msg_len: usize,
        frag_bytes: usize,
        index: usize,
    ) -> Header {
        let offset = index * frag_bytes;
        Header {
            kind: Kind::Data,
            answer: meta.answer,
            nonce,
            seq,
            frag_offset: offset as u32,
            msg_len: msg_len as u32,
            report_ns: meta.report_ns,
            frag_index: index as u32,
            frag_count: fragment_count(msg_len, frag_bytes) as u32,
            frag_len: frag_bytes.min(msg_len.saturating_sub(offset)) as u16,
        }
    }

    /// Bytes of the whole frame: header plus this fragment's payload.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.frag_len as usize
    }

    fn check(&self) -> Result<(), FrameError> {
        match self.kind {
            Kind::Data => {
                let end = self.frag_offset as u64 + self.frag_len as u64;
                if self.frag_count == 0 {
                    return Err(FrameError::BadFragment("zero fragment count"));
                }
                if self.frag_index >= self.frag_count {
                    return Err(FrameError::BadFragment("fragment index out of range"));
                }
                if end > self.msg_len as u64 {
                    return Err(FrameError::BadFragment("fragment ends past the message"));
                }
                let last = self.frag_index + 1 == self.frag_count;
                if last != (end == self.msg_len as u64) {
                    return Err(FrameError::BadFragment(
                        "only the last fragment ends at the message end",
                    ));
                }
                if self.msg_len == 0 {
                    if self.frag_count != 1 {
                        return Err(FrameError::BadFragment(
                            "empty message in several fragments",
                        ));
                    }
                } else if self.frag_len == 0 {
                    return Err(FrameError::BadFragment("empty fragment"));
                } else if self.frag_count > self.msg_len {
                    return Err(FrameError::BadFragment("more fragments than bytes"));
                }
                Ok(())
            }
            Kind::Hello | Kind::HelloAck | Kind::Bye => {
                if self.answer {
                    return Err(FrameError::BadFlags(FLAG_ANSWER));
                }
                if self.frag_len != 0
                    || self.frag_offset != 0
                    || self.msg_len != 0
                    || self.frag_index != 0
                    || self.frag_count != 0
                {
                    return Err(FrameError::BadFragment(
                        "control frame with fragment fields",
                    ));
                }
                Ok(())
            }
        }
    }

    /// Write the header into `buf[..HEADER_LEN]` (no allocation). The caller
    /// puts `frag_len` payload bytes after it. Returns [`HEADER_LEN`].
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        self.check()?;
        let Some(b) = buf.get_mut(..HEADER_LEN) else {
            return Err(FrameError::BufferTooSmall {
                need: HEADER_LEN,
                have: buf.len(),
            });
        };
        b[0..2].copy_from_slice(&MAGIC.to_le_bytes());
        b[2] = VERSION;
        b[3] = self.kind as u8;
        b[4] = if self.answer { FLAG_ANSWER } else { 0 };
        b[5] = 0;
        b[6..8].copy_from_slice(&self.frag_len.to_le_bytes());
        b[8..16].copy_from_slice(&self.nonce.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.frag_offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.msg_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.report_ns.to_le_bytes());
        b[32..36].copy_from_slice(&self.frag_index.to_le_bytes());
        b[36..40].copy_from_slice(&self.frag_count.to_le_bytes());
        Ok(HEADER_LEN)
    }

    /// Parse and validate a frame. `buf` must hold the header and at least
    /// `frag_len` payload bytes; anything after is ignored (padding).
    pub fn decode(buf: &[u8]) -> Result<Header, FrameError> {
        let Some(b) = buf.get(..HEADER_LEN) else {
            return Err(FrameError::Truncated {
                need: HEADER_LEN,
                have: buf.len(),
            });
        };
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let magic = u16_at(0);
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        if b[2] != VERSION {
            return Err(FrameError::BadVersion(b[2]));
        }
        let kind = Kind::from_u8(b[3]).ok_or(FrameError::BadKind(b[3]))?;
        let flags = b[4];
        if flags & !FLAG_ANSWER != 0 {
            return Err(FrameError::BadFlags(flags));
        }
        if b[5] != 0 {
            return Err(FrameError::Reserved(b[5]));
        }
        let mut nonce = [0u8; 8];
        nonce.copy_from_slice(&b[8..16]);
        let h = Header {
            kind,
            answer: flags & FLAG_ANSWER != 0,
            nonce: u64::from_le_bytes(nonce),
            seq: u32_at(16),
            frag_offset: u32_at(20),
            msg_len: u32_at(24),
            report_ns: u32_at(28),
            frag_index: u32_at(32),
            frag_count: u32_at(36),
            frag_len: u16_at(6),
        };
        h.check()?;
        if buf.len() < h.frame_len() {
            return Err(FrameError::Truncated {
                need: h.frame_len(),
                have: buf.len(),
            });
        }
        Ok(h)
    }

    /// The payload of a frame whose header `self` was decoded from `buf`.
    pub fn payload<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(HEADER_LEN..self.frame_len()).unwrap_or(&[])
    }
}

/// Number of fragments a message of `msg_len` bytes takes with at most
/// `max_frag_bytes` payload bytes per frame (an empty message takes one).
pub fn fragment_count(msg_len: usize, max_frag_bytes: usize) -> usize {
    if msg_len == 0 {
        1
    } else {
        msg_len.div_ceil(max_frag_bytes.max(1))
    }
}

/// The header of a received frame `body` (header, payload, then any
/// padding), or `None` when it does not decode or its length is not the
/// header's: exactly [`Header::frame_len`] bytes, or — for a frame shorter
/// than `padded_to` — exactly `padded_to` (a link that pads short frames,
/// as Ethernet does to its 46-byte minimum payload; 0 for none).
#[inline]
pub fn decode_exact(body: &[u8], padded_to: usize) -> Option<Header> {
    match Header::decode(body) {
        Ok(h)
            if body.len() == h.frame_len()
                || (h.frame_len() < padded_to && body.len() == padded_to) =>
        {
            Some(h)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
