//! The segment's binary layout (ABI 1.0).
//!
//! ```text
//! offset 0                 HeaderRaw          (header_bytes, 256 in ABI 1.0)
//! copy_offset[0]           copy 0: MetaRaw    (meta_bytes, 256)
//!                                  slots      (hash_slots × u64, padded to 64 B)
//!                                  EntryRaw × capacity (entry_bytes each, 2304)
//! copy_offset[1]           copy 1: same shape
//! total_bytes
//! ```
//!
//! Every word is an atomic (`AtomicU64`/`AtomicU32`, same size and alignment as
//! the plain integers); `f64` values are stored as their IEEE-754 bits. Names
//! are NUL-padded bytes packed little-endian into `u64` words.
//!
//! The header is written when the segment is created; a writer that re-opens
//! the segment rewrites only `generation`, `writer_pid` and the heartbeat. The
//! daemon's identity (generation, pid, node name, clock description) is also
//! carried in each copy's [`MetaRaw`], where the latch seqlock protects the
//! multi-word strings from being read half-rewritten during a daemon restart.
//!
//! Compatibility: a reader accepts any segment with the same `abi_major`.
//! Minor versions only append: `header_bytes`, `meta_bytes` and `entry_bytes`
//! may grow (new fields after the ones defined here), never shrink; offsets
//! are derived from those sizes by the fixed formula in [`Layout::from_params`].
//! Capability bits are never reused; the upper 32 bits are "incompatible"
//! features a reader must understand (it refuses unknown ones), the lower 32
//! bits are informational.

use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// `b"NGSEGMNT"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NGSEGMNT");
/// ABI major version: a change here breaks every reader.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: append-only additions.
pub const ABI_MINOR: u32 = 0;

/// Protocol ranges stored per entry.
pub const MAX_RANGES: usize = 8;
/// o(P)/RTT(P) curve points stored per entry.
pub const MAX_CURVE: usize = 32;
/// Named 95 % intervals stored per entry.
pub const MAX_CI: usize = 16;
/// Longest peer (host) name, bytes.
pub const PEER_MAX_BYTES: usize = 63;
/// Longest transport name, bytes.
pub const TRANSPORT_MAX_BYTES: usize = 15;
/// Longest interval name, bytes.
pub const CI_NAME_MAX_BYTES: usize = 31;
/// Longest node name, bytes.
pub const NODE_MAX_BYTES: usize = 63;
/// Longest clock description, bytes.
pub const CLOCK_DESC_MAX_BYTES: usize = 127;
/// Largest capacity a segment may declare.
pub const MAX_CAPACITY: usize = 1 << 16;

/// Capability: entries carry LogGPS size-linear overheads O_s/O_r.
pub const CAP_LOGGPS: u64 = 1 << 0;
/// Capability: entries carry LogfP f, o_min, o_max and g_f.
pub const CAP_LOGFP: u64 = 1 << 1;
/// Capability: entries carry named 95 % intervals.
pub const CAP_CI95: u64 = 1 << 2;
/// Capability: entries carry the measured o(P)/RTT(P) curve.
pub const CAP_CURVE: u64 = 1 << 3;
/// Capability: the heartbeat word holds CLOCK_REALTIME nanoseconds.
pub const CAP_HEARTBEAT_REALTIME_NS: u64 = 1 << 4;
/// Bits a reader must understand to use the segment.
pub const CAP_INCOMPAT_MASK: u64 = 0xFFFF_FFFF_0000_0000;
/// Incompatible-feature bits this reader understands (none in ABI 1.0).
pub const CAP_INCOMPAT_KNOWN: u64 = 0;
/// What this writer sets.
pub const CAPABILITIES: u64 =
    CAP_LOGGPS | CAP_LOGFP | CAP_CI95 | CAP_CURVE | CAP_HEARTBEAT_REALTIME_NS;

/// Entry and lookup flags (u32).
pub mod flags {
    /// The entry holds a usable fit.
    pub const VALID: u32 = 1 << 0;
    /// The fitted L came out negative (EEL < o_s + o_r).
    pub const L_NEGATIVE: u32 = 1 << 1;
    /// The fit is degraded (few samples, wide intervals, fallback clock …).
    pub const DEGRADED: u32 = 1 << 2;
    /// The writer marked the entry stale (peer unreachable, re-probe due).
    pub const STALE: u32 = 1 << 3;
    /// f, o_min, o_max and g_f are set (LogfP).
    pub const HAS_LOGFP: u32 = 1 << 4;
    /// S (rendezvous threshold, LogGPS) is set.
    pub const HAS_S: u32 = 1 << 5;
    /// Some range has non-zero O_s/O_r (LogGPS overheads).
    pub const HAS_LOGGPS: u32 = 1 << 6;
    /// Lookup result only: msg_bytes lies outside every protocol range; the
    /// nearest range was used.
    pub const EXTRAPOLATED: u32 = 1 << 16;
    /// Bits a writer may store in an entry (the rest is reserved).
    pub const ENTRY_MASK: u32 = 0xFFFF;
}

/// The header at offset 0.
#[repr(C)]
pub struct HeaderRaw {
    pub magic: AtomicU64,
    pub abi_major: AtomicU32,
    pub abi_minor: AtomicU32,
    pub header_bytes: AtomicU32,
    pub meta_bytes: AtomicU32,
    pub entry_bytes: AtomicU32,
    pub capacity_entries: AtomicU32,
    pub hash_slots: AtomicU32,
    pub max_ranges: AtomicU32,
    pub max_curve: AtomicU32,
    pub max_ci: AtomicU32,
    pub total_bytes: AtomicU64,
    pub copy_bytes: AtomicU64,
    pub copy_offset: [AtomicU64; 2],
    pub capabilities: AtomicU64,
    /// Random per daemon start (never 0 once written).
    pub generation: AtomicU64,
    pub writer_pid: AtomicU64,
    pub created_unix_ns: AtomicU64,
    pub _reserved0: [AtomicU64; 2],
    /// CLOCK_REALTIME nanoseconds of the writer's last heartbeat; 0 = the
    /// writer shut down. Own cache line.
    pub heartbeat_unix_ns: AtomicU64,
    pub _pad1: [AtomicU64; 7],
    /// Latch sequence: readers read copy `seq & 1`. Own cache line.
    pub seq: AtomicU64,
    pub _pad2: [AtomicU64; 7],
}

/// Per-copy metadata.
#[repr(C)]
pub struct MetaRaw {
    pub entry_count: AtomicU64,
    pub generation: AtomicU64,
    pub writer_pid: AtomicU64,
    pub published_unix_ns: AtomicU64,
    pub node_len: AtomicU64,
    pub clock_len: AtomicU64,
    pub _reserved: [AtomicU64; 2],
    pub node_name: [AtomicU64; 8],
    pub clock_desc: [AtomicU64; 16],
}

/// One protocol range (f64 fields as bits, sizes as u64).
#[repr(C)]
pub struct RangeRaw {
    pub from_bytes: AtomicU64,
    pub to_bytes: AtomicU64,
    pub g_ns: AtomicU64,
    pub big_g_ns_per_byte: AtomicU64,
    pub o_s_ns: AtomicU64,
    pub o_r_ns: AtomicU64,
    pub big_o_s_ns_per_byte: AtomicU64,
    pub big_o_r_ns_per_byte: AtomicU64,
}

/// One point of the o(P) / RTT(P) curve.
#[repr(C)]
pub struct CurveRaw {
    pub peers: AtomicU64,
    pub o_ns: AtomicU64,
    pub rtt_ns: AtomicU64,
}

/// One named 95 % interval.
#[repr(C)]
pub struct CiRaw {
    pub name: [AtomicU64; 4],
    pub lo: AtomicU64,
    pub hi: AtomicU64,
}

/// Bit positions inside [`EntryRaw::counts`].
pub mod counts {
    pub const PEER_LEN_SHIFT: u32 = 0;
    pub const TRANSPORT_LEN_SHIFT: u32 = 8;
    pub const RANGES_SHIFT: u32 = 16;
    pub const CURVE_SHIFT: u32 = 24;
    pub const CI_SHIFT: u32 = 32;
}

/// One (peer, transport) entry.
#[repr(C)]
pub struct EntryRaw {
    /// [`key_hash`] of the names.
    pub key_hash: AtomicU64,
    /// peer_len | transport_len << 8 | n_ranges << 16 | n_curve << 24 | n_ci << 32.
    pub counts: AtomicU64,
    pub flags: AtomicU64,
    pub samples: AtomicU64,
    pub probe_bytes: AtomicU64,
    pub measured_unix_ns: AtomicU64,
    pub eel_ns: AtomicU64,
    pub l_ns: AtomicU64,
    /// u64::MAX = none.
    pub s_bytes: AtomicU64,
    /// 0 = none.
    pub f: AtomicU64,
    pub o_min_ns: AtomicU64,
    pub o_max_ns: AtomicU64,
    pub g_f_ns: AtomicU64,
    pub _reserved: [AtomicU64; 3],
    pub peer: [AtomicU64; 8],
    pub transport: [AtomicU64; 2],
    pub _reserved2: [AtomicU64; 6],
    pub ranges: [RangeRaw; MAX_RANGES],
    pub curve: [CurveRaw; MAX_CURVE],
    pub ci95: [CiRaw; MAX_CI],
}

// Compile-time layout assertions: these numbers are the ABI.
const _: () = {
    assert!(size_of::<HeaderRaw>() == 256);
    assert!(offset_of!(HeaderRaw, abi_major) == 8);
    assert!(offset_of!(HeaderRaw, header_bytes) == 16);
    assert!(offset_of!(HeaderRaw, entry_bytes) == 24);
    assert!(offset_of!(HeaderRaw, hash_slots) == 32);
    assert!(offset_of!(HeaderRaw, total_bytes) == 48);
    assert!(offset_of!(HeaderRaw, copy_bytes) == 56);
    assert!(offset_of!(HeaderRaw, copy_offset) == 64);
    assert!(offset_of!(HeaderRaw, capabilities) == 80);
    assert!(offset_of!(HeaderRaw, generation) == 88);
    assert!(offset_of!(HeaderRaw, writer_pid) == 96);
    assert!(offset_of!(HeaderRaw, created_unix_ns) == 104);
    assert!(offset_of!(HeaderRaw, heartbeat_unix_ns) == 128);
    assert!(offset_of!(HeaderRaw, seq) == 192);

    assert!(size_of::<MetaRaw>() == 256);
    assert!(offset_of!(MetaRaw, node_name) == 64);
    assert!(offset_of!(MetaRaw, clock_desc) == 128);

    assert!(size_of::<RangeRaw>() == 64);
    assert!(size_of::<CurveRaw>() == 24);
    assert!(size_of::<CiRaw>() == 48);

    assert!(size_of::<EntryRaw>() == 2304);
    assert!(offset_of!(EntryRaw, counts) == 8);
    assert!(offset_of!(EntryRaw, flags) == 16);
    assert!(offset_of!(EntryRaw, measured_unix_ns) == 40);
    assert!(offset_of!(EntryRaw, eel_ns) == 48);
    assert!(offset_of!(EntryRaw, s_bytes) == 64);
    assert!(offset_of!(EntryRaw, g_f_ns) == 96);
    assert!(offset_of!(EntryRaw, peer) == 128);
    assert!(offset_of!(EntryRaw, transport) == 192);
    assert!(offset_of!(EntryRaw, ranges) == 256);
    assert!(offset_of!(EntryRaw, curve) == 768);
    assert!(offset_of!(EntryRaw, ci95) == 1536);

    // Names fit their word arrays with a terminating NUL.
    assert!(PEER_MAX_BYTES < 8 * 8);
    assert!(TRANSPORT_MAX_BYTES < 2 * 8);
    assert!(CI_NAME_MAX_BYTES < 4 * 8);
    assert!(NODE_MAX_BYTES < 8 * 8);
    assert!(CLOCK_DESC_MAX_BYTES < 16 * 8);
    // Counts fit their 8-bit fields.
    assert!(MAX_RANGES < 256 && MAX_CURVE < 256 && MAX_CI < 256);
};

/// Byte offsets of one segment, derived from its sizes by a fixed formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub capacity: usize,
    pub hash_slots: usize,
    pub header_bytes: usize,
    pub meta_bytes: usize,
    pub entry_bytes: usize,
    /// Offset of the slot array inside a copy.
    pub slots_offset: usize,
    /// Offset of entry 0 inside a copy.
    pub entries_offset: usize,
    pub copy_bytes: usize,
    pub copy_offset: [usize; 2],
    pub total_bytes: usize,
}

const LIMIT_STRUCT_BYTES: usize = 1 << 20;

fn round_up_64(x: usize) -> Option<usize> {
    x.checked_add(63).map(|v| v & !63)
}

impl Layout {
    /// The layout this crate writes for `capacity` entries.
    pub fn new(capacity: usize) -> Option<Layout> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return None;
        }
        let hash_slots = (2 * capacity).next_power_of_two();
        Layout::from_params(
            capacity,
            hash_slots,
            size_of::<HeaderRaw>(),
            size_of::<MetaRaw>(),
            size_of::<EntryRaw>(),
        )
    }

    /// The layout for the given sizes, or None when they are out of range
    /// (too small for this ABI, misaligned, too large, overflowing).
    pub fn from_params(
        capacity: usize,
        hash_slots: usize,
        header_bytes: usize,
        meta_bytes: usize,
        entry_bytes: usize,
    ) -> Option<Layout> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return None;
        }
        if !hash_slots.is_power_of_two() || hash_slots <= capacity || hash_slots > 4 * MAX_CAPACITY
        {
            return None;
        }
        let sized = |v: usize, min: usize| v >= min && v % 64 == 0 && v <= LIMIT_STRUCT_BYTES;
        if !sized(header_bytes, size_of::<HeaderRaw>())
            || !sized(meta_bytes, size_of::<MetaRaw>())
            || !sized(entry_bytes, size_of::<EntryRaw>())
        {
            return None;
        }
        let slots_offset = meta_bytes;
        let entries_offset = round_up_64(slots_offset.checked_add(hash_slots.checked_mul(8)?)?)?;
        let copy_bytes = entries_offset.checked_add(capacity.checked_mul(entry_bytes)?)?;
        let copy0 = header_bytes;
        let copy1 = copy0.checked_add(copy_bytes)?;
        let total_bytes = copy1.checked_add(copy_bytes)?;
        Some(Layout {
            capacity,
            hash_slots,
            header_bytes,
            meta_bytes,
            entry_bytes,
            slots_offset,
            entries_offset,
            copy_bytes,
            copy_offset: [copy0, copy1],
            total_bytes,
        })
    }
}

/// Packs `s` into NUL-padded little-endian words; None if it does not fit
/// with a terminating NUL or contains a NUL.
#[inline]
pub fn pack_name<const W: usize>(s: &[u8]) -> Option<[u64; W]> {
    if s.len() >= W * 8 || s.contains(&0) {
        return None;
    }
    let mut bytes = [0u8; 128];
    bytes[..s.len()].copy_from_slice(s);
    let mut words = [0u64; W];
    for (i, w) in words.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        *w = u64::from_le_bytes(b);
    }
    Some(words)
}

/// Unpacks `len` bytes from words (caller bounds-checked `len < 8·W`).
pub fn unpack_name(words: &[u64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[inline]
fn mix(mut h: u64) -> u64 {
    // murmur3 fmix64
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The name-table hash of a (peer, transport) pair, over the packed words.
/// Only the words that hold bytes are hashed (padding is zero anyway).
#[inline]
pub fn key_hash(
    peer: &[u64; 8],
    peer_len: usize,
    transport: &[u64; 2],
    transport_len: usize,
) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (peer_len as u64) | ((transport_len as u64) << 8);
    let pw = peer_len.div_ceil(8).min(8);
    for w in &peer[..pw] {
        h = (h ^ *w).wrapping_mul(K).rotate_left(29);
    }
    let tw = transport_len.div_ceil(8).min(2);
    for w in &transport[..tw] {
        h = (h ^ *w).wrapping_mul(K).rotate_left(29);
    }
    mix(h)
}

/// Slot word: `tag << 32 | (index + 1)`, 0 = empty.
#[inline]
pub fn slot_word(hash: u64, index: usize) -> u64 {
    (hash & 0xFFFF_FFFF_0000_0000) | (index as u64 + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_formula() {
        let l = Layout::new(4).unwrap();
        assert_eq!(l.hash_slots, 8);
        assert_eq!(l.slots_offset, 256);
        assert_eq!(l.entries_offset, 256 + 64);
        assert_eq!(l.copy_bytes, 320 + 4 * 2304);
        assert_eq!(l.copy_offset, [256, 256 + l.copy_bytes]);
        assert_eq!(l.total_bytes, 256 + 2 * l.copy_bytes);
        assert!(Layout::new(0).is_none());
        assert!(Layout::new(MAX_CAPACITY + 1).is_none());
        assert!(Layout::from_params(4, 6, 256, 256, 2304).is_none());
        assert!(Layout::from_params(4, 8, 255, 256, 2304).is_none());
        assert!(Layout::from_params(4, 8, 256, 256, 2240).is_none());
    }

    #[test]
    fn names_pack_and_hash() {
        let p: [u64; 8] = pack_name(b"node017").unwrap();
        let t: [u64; 2] = pack_name(b"rdma").unwrap();
        assert_eq!(unpack_name(&p, 7), b"node017");
        assert!(pack_name::<2>(b"0123456789abcdef").is_none());
        assert!(pack_name::<2>(b"0123456789abcde").is_some());
        assert!(pack_name::<2>(b"a\0b").is_none());
        let h = key_hash(&p, 7, &t, 4);
        let t2: [u64; 2] = pack_name(b"udp").unwrap();
        assert_ne!(h, key_hash(&p, 7, &t2, 3));
        // Moving a byte from peer to transport changes the hash.
        let p2: [u64; 8] = pack_name(b"node01").unwrap();
        let t3: [u64; 2] = pack_name(b"7rdma").unwrap();
        assert_ne!(h, key_hash(&p2, 6, &t3, 5));
    }
}
