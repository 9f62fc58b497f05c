//! ABI 1.2: the hot table, a dense copy of what an index lookup reads.
//!
//! ```text
//! file_bytes     = hot_offset + 2 · capacity · hot_record_bytes
//! hot_offset     = total_bytes rounded up to 4096
//! hot copy c     = hot_offset + c · capacity · hot_record_bytes
//! record i       = hot copy c + i · hot_record_bytes   (HotRaw, 768 B)
//! ```
//!
//! A full entry is 3392 bytes, so at thousands of entries every index
//! lookup lands on a 4 KiB page of its own and pays an address
//! translation on top of 5–6 cache lines. The hot table holds, per entry
//! and contiguous for all entries, exactly the words `lookup_index`,
//! `predict_index_ns` and `lookup_index_status` return: 5⅓ records per
//! page, 3 cache lines per lookup (the range search, the entry-level
//! values, the chosen range), a 4th for the statuses.
//!
//! The table lies after the two copies (`total_bytes`), where every reader
//! since 1.0 looks no further: a 1.0 or 1.1 reader maps `total_bytes` and
//! never sees it. It has two copies like everything else: hot copy `c`
//! belongs to copy `c` and the writer fills a record together with its
//! entry, under the same latch (a reader reads hot copy `seq & 1` and
//! re-checks `seq`), so a record is never read half-written and a writer
//! killed mid-update leaves the published record intact. A reader uses the
//! table when `abi_minor ≥ 2` and [`CAP_HOT`] is set, and falls back to the
//! entry otherwise. A record is checked before it is trusted (its head
//! word, the search array against the chosen range): a corrupt record is
//! an `Invalid` entry, as a corrupt entry is.

use core::mem::size_of;
use core::sync::atomic::AtomicU64;

use super::{RangeRaw, MAX_RANGES};

/// Capability (1.2, informational): the segment carries the hot table.
pub const CAP_HOT: u64 = 1 << 12;

/// Bit positions inside [`HotRaw::head`].
pub mod hot_head {
    /// The entry's flags (bits 0..16, `flags::ENTRY_MASK`).
    pub const FLAGS_MASK: u64 = 0xFFFF;
    /// Number of ranges, 1 ..= MAX_RANGES (bits 16..24).
    pub const RANGES_SHIFT: u32 = 16;
    /// Bits 24..32: zero.
    pub const RESERVED_MASK: u64 = 0xFF00_0000;
    /// LogfP f clamped to u32, 0 = none (bits 32..64).
    pub const F_SHIFT: u32 = 32;
}

/// One record of the hot table: what an index lookup returns, laid out so
/// that a lookup reads 3 cache lines (4 with the statuses).
#[repr(C)]
pub struct HotRaw {
    /// See [`hot_head`].
    pub head: AtomicU64,
    /// `to_bytes` of ranges 0 .. n−1 (the search: the first range whose
    /// upper end reaches the size, else the last); the last range's upper
    /// end is only in its record. Unused words are zero.
    pub range_to_bytes: [AtomicU64; MAX_RANGES - 1],
    pub eel_ns: AtomicU64,
    pub l_ns: AtomicU64,
    pub o_min_ns: AtomicU64,
    pub o_max_ns: AtomicU64,
    pub g_f_ns: AtomicU64,
    /// u64::MAX = none.
    pub s_bytes: AtomicU64,
    pub measured_unix_ns: AtomicU64,
    pub samples: AtomicU64,
    /// The entry's ranges, as in the entry (unused records zero).
    pub ranges: [RangeRaw; MAX_RANGES],
    /// The entry's status words (as in its 1.1 block).
    pub ident_entry: AtomicU64,
    pub ident_range: [AtomicU64; MAX_RANGES],
    /// The entry's `key_hash` (for tools that check a record against its
    /// entry; lookups do not read it).
    pub key_hash: AtomicU64,
    pub _reserved: [AtomicU64; 6],
}

/// The record size this writer uses (a later minor may append: readers
/// accept any multiple of 64 from this size up to [`MAX_HOT_RECORD_BYTES`]).
pub const HOT_RECORD_BYTES: usize = size_of::<HotRaw>();
/// Largest record size a reader accepts.
pub const MAX_HOT_RECORD_BYTES: usize = 4096;

const _: () = {
    assert_layout!(HotRaw: 768; range_to_bytes @ 8, eel_ns @ 64, samples @ 120, ranges @ 128,
        ident_entry @ 640, ident_range @ 648, key_hash @ 712);
    assert!(MAX_RANGES < 256);
};

/// Where the hot table lies, derived from `total_bytes`, the capacity and
/// the record size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotLayout {
    pub record_bytes: usize,
    /// Absolute offset of hot copy 0 (hot copy 1 follows it).
    pub offset: usize,
    /// Bytes of one hot copy: capacity · record_bytes.
    pub copy_bytes: usize,
    /// The file's size: the end of hot copy 1.
    pub file_bytes: usize,
}

impl HotLayout {
    /// The hot table after `total_bytes` for `capacity` records of
    /// `record_bytes`, or None when out of range.
    pub fn new(total_bytes: usize, capacity: usize, record_bytes: usize) -> Option<HotLayout> {
        if record_bytes < HOT_RECORD_BYTES
            || record_bytes % 64 != 0
            || record_bytes > MAX_HOT_RECORD_BYTES
        {
            return None;
        }
        let offset = total_bytes.checked_add(4095)? & !4095;
        let copy_bytes = capacity.checked_mul(record_bytes)?;
        let file_bytes = offset.checked_add(copy_bytes.checked_mul(2)?)?;
        Some(HotLayout {
            record_bytes,
            offset,
            copy_bytes,
            file_bytes,
        })
    }

    /// Absolute offset of record `i` of hot copy `copy` (caller checks
    /// `i < capacity`).
    #[inline]
    pub fn record_offset(&self, copy: usize, i: usize) -> usize {
        self.offset + (copy & 1) * self.copy_bytes + i * self.record_bytes
    }
}
