//! Typed, bounds-checked access to a mapped segment, and the encoding of
//! entries into / out of its atomic words. Shared by reader and writer.
//!
//! - this file: the mapped segment ([`Seg`]), header validation, word
//!   and name helpers;
//! - [`entry`]: the ABI 1.0 entry (counts word, key match, params, encode
//!   and decode);
//! - [`ext`]: the ABI 1.1 block of an entry (statuses, bandwidth,
//!   percentiles, overlap);
//! - [`tables`]: the per-transport records and the coverage-class map;
//! - [`hot`]: the ABI 1.2 hot-table records.

use core::mem::size_of;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use crate::ext::*;
use crate::layout::*;
use crate::sys::Mapping;
use crate::types::LookupError;

/// The [`Params`](crate::types::Params) of a lookup from the entry-level
/// words of `$e` (an [`EntryRaw`] or a [`HotRaw`], which name them alike),
/// the range record `$r` with its bounds, f and the flags.
macro_rules! params_of {
    ($e:expr, $r:expr, $from:expr, $to:expr, $f:expr, $flags:expr) => {
        Params {
            eel_ns: f(&$e.eel_ns),
            L_ns: f(&$e.l_ns),
            o_s_ns: f(&$r.o_s_ns),
            o_r_ns: f(&$r.o_r_ns),
            g_ns: f(&$r.g_ns),
            G_ns_per_byte: f(&$r.big_g_ns_per_byte),
            O_s_ns_per_byte: f(&$r.big_o_s_ns_per_byte),
            O_r_ns_per_byte: f(&$r.big_o_r_ns_per_byte),
            o_min_ns: f(&$e.o_min_ns),
            o_max_ns: f(&$e.o_max_ns),
            g_f_ns: f(&$e.g_f_ns),
            S_bytes: $e.s_bytes.load(Relaxed),
            range_from_bytes: $from,
            range_to_bytes: $to,
            measured_unix_ns: $e.measured_unix_ns.load(Relaxed),
            samples: $e.samples.load(Relaxed),
            f: $f,
            flags: $flags,
        }
    };
}

mod entry;
mod ext;
mod hot;
mod tables;

pub(crate) use entry::*;
pub(crate) use ext::*;
pub(crate) use hot::*;
pub(crate) use tables::*;

/// A mapping together with a layout validated against it.
///
/// Invariant: `layout.file_bytes <= map.len()` (and `total_bytes ≤
/// file_bytes`), the base is page-aligned and every offset in `layout` is a
/// multiple of 64, so every `&HeaderRaw`, `&MetaRaw`, slot, `&EntryRaw` and
/// `&HotRaw` handed out below lies inside the mapping and is properly
/// aligned.
pub(crate) struct Seg {
    map: Mapping,
    layout: Layout,
}

impl Seg {
    /// Validates the header of `map` and wraps it.
    pub(crate) fn new(map: Mapping) -> Result<Seg, &'static str> {
        let layout = validate_header(&map)?;
        Ok(Seg { map, layout })
    }

    #[inline]
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    #[inline]
    pub(crate) fn header(&self) -> &HeaderRaw {
        header_of(&self.map)
    }

    #[inline]
    pub(crate) fn meta(&self, copy: usize) -> &MetaRaw {
        let off = self.layout.copy_offset[copy & 1];
        // SAFETY: off + meta_bytes ≤ total_bytes ≤ mapping length (Layout
        // formula, checked in validate_header); off is a multiple of 64 from a
        // page-aligned base; MetaRaw is all atomics, valid for any bit pattern.
        unsafe { &*(self.map.base().add(off) as *const MetaRaw) }
    }

    /// Slot `i` of copy `copy`; `i` is reduced modulo the slot count.
    #[inline]
    pub(crate) fn slot(&self, copy: usize, i: usize) -> &AtomicU64 {
        let i = i & (self.layout.hash_slots - 1);
        let off = self.layout.copy_offset[copy & 1] + self.layout.slots_offset + 8 * i;
        // SAFETY: i < hash_slots, so the word lies inside the slot array of the
        // copy, inside the mapping; 8-byte aligned.
        unsafe { &*(self.map.base().add(off) as *const AtomicU64) }
    }

    /// Offset of entry `i` of copy `copy` in the mapping; None when
    /// `i ≥ capacity`.
    #[inline]
    fn entry_offset(&self, copy: usize, i: usize) -> Option<usize> {
        if i >= self.layout.capacity {
            return None;
        }
        Some(
            self.layout.copy_offset[copy & 1]
                + self.layout.entries_offset
                + i * self.layout.entry_bytes,
        )
    }

    /// Entry `i` of copy `copy`; None when `i ≥ capacity`.
    #[inline]
    pub(crate) fn entry(&self, copy: usize, i: usize) -> Option<&EntryRaw> {
        let off = self.entry_offset(copy, i)?;
        // SAFETY: i < capacity, so off + entry_bytes ≤ copy end ≤ mapping
        // length; 64-byte aligned; EntryRaw is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const EntryRaw) })
    }

    /// The ABI 1.1 block of entry `i`; None on a 1.0 segment or `i ≥ capacity`.
    #[inline]
    pub(crate) fn entry_ext(&self, copy: usize, i: usize) -> Option<&EntryExtRaw> {
        let x = self.layout.ext?;
        let off = self.entry_offset(copy, i)? + x.entry_ext_offset;
        // SAFETY: the layout was validated with this extension, so
        // entry_bytes ≥ entry_ext_offset + size_of::<EntryExtRaw>() and the
        // block lies inside entry i (i < capacity), inside the mapping; the
        // entry is 64-byte aligned and entry_ext_offset (2304) is a multiple
        // of 64; EntryExtRaw is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const EntryExtRaw) })
    }

    /// Record `i` of hot copy `copy`; None before ABI 1.2 (or without
    /// CAP_HOT) or when `i ≥ capacity`.
    #[inline]
    pub(crate) fn hot(&self, copy: usize, i: usize) -> Option<&HotRaw> {
        let h = self.layout.hot?;
        if i >= self.layout.capacity {
            return None;
        }
        let off = h.record_offset(copy, i);
        // SAFETY: validate_header attached the hot layout only after checking
        // file_bytes = offset + 2 · capacity · record_bytes ≤ map.len(), so
        // with i < capacity the record (record_bytes ≥ size_of::<HotRaw>())
        // lies inside the mapping; offset is a multiple of 4096 and
        // record_bytes of 64 from a page-aligned base; HotRaw is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const HotRaw) })
    }

    /// The ABI 1.1 head of a copy's meta region; None on a 1.0 segment.
    #[inline]
    pub(crate) fn meta_ext(&self, copy: usize) -> Option<&MetaExtRaw> {
        let x = self.layout.ext?;
        let off = self.layout.copy_offset[copy & 1] + x.meta_ext_offset;
        // SAFETY: validated: meta_ext_offset + size_of::<MetaExtRaw>() ≤
        // meta_ext_end ≤ meta_bytes, inside the copy; offset 256 from a
        // 64-byte aligned copy; all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const MetaExtRaw) })
    }

    /// Record `i` of the table of `len` records of `T` at offset `table`
    /// of a copy; None when `i ≥ len`.
    ///
    /// # Safety
    /// The validated layout places the whole table (`len` records of
    /// `size_of::<T>()` bytes from `table`) inside the copy's meta region,
    /// `table` and the record size are multiples of 8, and `T` is all
    /// atomics.
    #[inline]
    unsafe fn ext_record<T>(&self, copy: usize, table: usize, len: usize, i: usize) -> Option<&T> {
        if i >= len {
            return None;
        }
        let off = self.layout.copy_offset[copy & 1] + table + i * size_of::<T>();
        // SAFETY: i < len: inside the table, which the caller's contract puts
        // inside the meta region of the copy, inside the mapping; 8-byte
        // aligned from a 64-byte aligned copy; T is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const T) })
    }

    /// Class record `i` (< class_capacity) of a copy.
    #[inline]
    pub(crate) fn class(&self, copy: usize, i: usize) -> Option<&ClassRaw> {
        let x = self.layout.ext?;
        // SAFETY: the class table ends at map_slots_offset ≤ meta_ext_end ≤
        // meta_bytes; classes_offset and the record size are multiples of 8;
        // all atomics.
        unsafe { self.ext_record(copy, x.classes_offset, x.class_capacity, i) }
    }

    /// Slot `i` (reduced modulo map_slots) of the peer → class map.
    #[inline]
    pub(crate) fn map_slot(&self, copy: usize, i: usize) -> Option<&AtomicU64> {
        let x = self.layout.ext?;
        let i = i & (x.map_slots - 1);
        let off = self.layout.copy_offset[copy & 1] + x.map_slots_offset + 8 * i;
        // SAFETY: i < map_slots: inside the slot array, which ends at
        // map_records_offset ≤ meta_bytes; 8-byte aligned.
        Some(unsafe { &*(self.map.base().add(off) as *const AtomicU64) })
    }

    /// Map record `i` (< map_capacity) of a copy.
    #[inline]
    pub(crate) fn map_record(&self, copy: usize, i: usize) -> Option<&MapRaw> {
        let x = self.layout.ext?;
        // SAFETY: the record array ends at meta_ext_end ≤ meta_bytes;
        // map_records_offset and the record size are multiples of 8; all
        // atomics.
        unsafe { self.ext_record(copy, x.map_records_offset, x.map_capacity, i) }
    }
}

fn header_ext_of(map: &Mapping) -> &HeaderExtRaw {
    // SAFETY: called only after validate_header checked that header_bytes ≥
    // 320 and header_bytes ≤ total_bytes ≤ map.len(); offset 256 of a
    // page-aligned base; all atomics.
    unsafe { &*(map.base().add(size_of::<HeaderRaw>()) as *const HeaderExtRaw) }
}

fn header_of(map: &Mapping) -> &HeaderRaw {
    // SAFETY: callers only use this after checking map.len() ≥ 256 (in
    // validate_header, or via Seg's invariant); the base is page-aligned and
    // HeaderRaw is all atomics. Atomic loads on a PROT_READ mapping are sound
    // for lock-free sizes (u32/u64 on x86-64 and aarch64).
    unsafe { &*(map.base() as *const HeaderRaw) }
}

fn validate_header(map: &Mapping) -> Result<Layout, &'static str> {
    if map.len() < core::mem::size_of::<HeaderRaw>() {
        return Err("file shorter than the header");
    }
    let h = header_of(map);
    // A u32 header word as a size or count.
    let n = |w: &AtomicU32| w.load(Relaxed) as usize;
    if h.magic.load(Relaxed) != MAGIC {
        return Err("bad magic");
    }
    if h.abi_major.load(Relaxed) != ABI_MAJOR {
        return Err("unsupported ABI major version");
    }
    let caps = h.capabilities.load(Relaxed);
    if caps & CAP_INCOMPAT_MASK & !CAP_INCOMPAT_KNOWN != 0 {
        return Err("unknown incompatible capability bits");
    }
    if n(&h.max_ranges) != MAX_RANGES || n(&h.max_curve) != MAX_CURVE || n(&h.max_ci) != MAX_CI {
        return Err("per-entry capacities differ from this ABI");
    }
    let layout = Layout::from_params(
        n(&h.capacity_entries),
        n(&h.hash_slots),
        n(&h.header_bytes),
        n(&h.meta_bytes),
        n(&h.entry_bytes),
    )
    .ok_or("sizes out of range")?;
    if h.copy_bytes.load(Relaxed) != layout.copy_bytes as u64
        || h.copy_offset[0].load(Relaxed) != layout.copy_offset[0] as u64
        || h.copy_offset[1].load(Relaxed) != layout.copy_offset[1] as u64
        || h.total_bytes.load(Relaxed) != layout.total_bytes as u64
    {
        return Err("offsets disagree with the sizes");
    }
    if layout.total_bytes > map.len() {
        return Err("file shorter than its declared size");
    }
    if h.abi_minor.load(Relaxed) == 0 {
        return Ok(layout);
    }
    // ABI ≥ 1.1: the extension's capacities are in the header extension.
    if layout.header_bytes < size_of::<HeaderRaw>() + size_of::<HeaderExtRaw>() {
        return Err("ABI 1.1 segment without its header extension");
    }
    let hx = header_ext_of(map);
    if n(&hx.transport_records) != TRANSPORT_RECORDS
        || n(&hx.max_latency) != MAX_LATENCY
        || n(&hx.max_k) != MAX_K
        || n(&hx.schemes) != SCHEMES
    {
        return Err("ABI 1.1 record capacities differ from this reader");
    }
    let ext = ExtLayout::new(n(&hx.class_capacity), n(&hx.map_capacity), n(&hx.map_slots))
        .ok_or("ABI 1.1 class or map capacities out of range")?;
    let layout = Layout::from_params_ext(
        layout.capacity,
        layout.hash_slots,
        layout.header_bytes,
        layout.meta_bytes,
        layout.entry_bytes,
        Some(ext),
    )
    .ok_or("ABI 1.1 extension does not fit the declared sizes")?;
    if h.abi_minor.load(Relaxed) < 2 || caps & CAP_HOT == 0 {
        return Ok(layout);
    }
    // ABI ≥ 1.2 with the hot table: its place follows from total_bytes.
    let layout = layout
        .with_hot(n(&hx.hot_record_bytes))
        .ok_or("ABI 1.2 hot-table record size out of range")?;
    let hot = layout.hot.ok_or("ABI 1.2 hot table missing")?;
    if hx.hot_offset.load(Relaxed) != hot.offset as u64
        || hx.file_bytes.load(Relaxed) != hot.file_bytes as u64
    {
        return Err("ABI 1.2 hot-table offsets disagree with the sizes");
    }
    if hot.file_bytes > map.len() {
        return Err("file shorter than its hot table");
    }
    Ok(layout)
}

/// The bytes a reader maps for a segment of `size` bytes whose header says
/// `total_bytes` (≤ size): `total_bytes`, or on a 1.2 segment with the hot
/// table the `file_bytes` its header extension declares when that is
/// larger (validate_header checks it against the formula once mapped).
/// `word_at` reads a native-endian u64 of the file (pread).
pub(crate) fn bytes_to_map(
    total_bytes: u64,
    size: u64,
    mut word_at: impl FnMut(u64) -> std::io::Result<u64>,
) -> std::io::Result<u64> {
    use core::mem::offset_of;
    if size < (size_of::<HeaderRaw>() + size_of::<HeaderExtRaw>()) as u64 {
        return Ok(total_bytes);
    }
    // A u32 field: its four bytes within the aligned word that holds it
    // (native order, as the writer stored them).
    let mut u32_at = |off: usize| -> std::io::Result<u64> {
        let word = word_at((off & !7) as u64)?.to_ne_bytes();
        let k = off & 7;
        Ok(u64::from(u32::from_ne_bytes([
            word[k],
            word[k + 1],
            word[k + 2],
            word[k + 3],
        ])))
    };
    let minor = u32_at(offset_of!(HeaderRaw, abi_minor))?;
    let header = u32_at(offset_of!(HeaderRaw, header_bytes))?;
    let caps = word_at(offset_of!(HeaderRaw, capabilities) as u64)?;
    if minor < 2 || caps & CAP_HOT == 0 || header < (size_of::<HeaderRaw>() + 64) as u64 {
        return Ok(total_bytes);
    }
    let file = word_at((size_of::<HeaderRaw>() + offset_of!(HeaderExtRaw, file_bytes)) as u64)?;
    Ok(file.max(total_bytes))
}

/// The index a hash-slot word names when its tag (upper 32 bits) is that
/// of `hash` (see [`slot_word`]): Ok(None) for another tag, Invalid when
/// the index part is 0 (a word of tag | 0 is corrupt: 0 means empty only
/// as a whole word) or the index is not below `n`, the records in use.
#[inline]
pub(crate) fn slot_index(v: u64, hash: u64, n: usize) -> Result<Option<usize>, LookupError> {
    if v >> 32 != hash >> 32 {
        return Ok(None);
    }
    let idx = ((v & 0xFFFF_FFFF) as usize)
        .checked_sub(1)
        .ok_or(LookupError::Invalid)?;
    if idx >= n {
        return Err(LookupError::Invalid);
    }
    Ok(Some(idx))
}

#[inline]
fn f(w: &AtomicU64) -> f64 {
    f64::from_bits(w.load(Relaxed))
}

#[inline]
fn load_words<const W: usize>(src: &[AtomicU64; W]) -> [u64; W] {
    let mut out = [0u64; W];
    for (o, s) in out.iter_mut().zip(src) {
        *o = s.load(Relaxed);
    }
    out
}

fn store_words(dst: &[AtomicU64], src: &[u64]) {
    for (d, s) in dst.iter().zip(src) {
        d.store(*s, Relaxed);
    }
}

/// Reads a NUL-padded name of `len` bytes from `words` (len bounds-checked).
pub(crate) fn read_name(words: &[AtomicU64], len: u64, max: usize) -> Result<String, LookupError> {
    let len = usize::try_from(len).map_err(|_| LookupError::Invalid)?;
    if len > max {
        return Err(LookupError::Invalid);
    }
    let w: Vec<u64> = words.iter().map(|x| x.load(Relaxed)).collect();
    utf8(unpack_name(&w, len))
}

/// Writes a name (already validated to fit) into `words`, NUL-padded.
pub(crate) fn write_name(words: &[AtomicU64], s: &[u8]) {
    let mut bytes = [0u8; 128];
    let n = s.len().min(bytes.len() - 1).min(words.len() * 8 - 1);
    bytes[..n].copy_from_slice(&s[..n]);
    for (i, w) in words.iter().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        w.store(u64::from_le_bytes(b), Relaxed);
    }
}
/// Packed words as a String (allocates).
pub(crate) fn words_to_string(words: &[u64], len: usize) -> Result<String, LookupError> {
    utf8(unpack_name(words, len))
}

pub(crate) fn store_name_words(dst: &[AtomicU64], src: &[u64]) {
    store_words(dst, src);
}

fn utf8(bytes: Vec<u8>) -> Result<String, LookupError> {
    String::from_utf8(bytes).map_err(|_| LookupError::Invalid)
}
