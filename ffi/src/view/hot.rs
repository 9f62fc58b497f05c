//! The ABI 1.2 hot-table record: encoded with its entry by the writer,
//! read by the index lookups.

use core::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::types::{EntryData, LookupError, Params, RangeData};

/// [`read_params_at`] from a hot record: the same answer from 3 cache
/// lines. A record whose head is out of range, or whose search array
/// disagrees with the chosen range's record, is Invalid.
#[inline]
pub(crate) fn read_hot_params_at(
    h: &HotRaw,
    msg_bytes: u64,
) -> Result<(Params, usize), LookupError> {
    let head = h.head.load(Relaxed);
    let n = ((head >> hot_head::RANGES_SHIFT) & 0xFF) as usize;
    if n == 0 || n > MAX_RANGES || head & hot_head::RESERVED_MASK != 0 {
        return Err(LookupError::Invalid);
    }
    // Ranges are sorted; the first whose upper end reaches msg_bytes, else
    // the last (as read_params_at does over the entry's ranges).
    let mut ri = n - 1;
    let mut searched = None;
    for (i, to) in h.range_to_bytes[..n - 1].iter().enumerate() {
        let to = to.load(Relaxed);
        if msg_bytes <= to {
            ri = i;
            searched = Some(to);
            break;
        }
    }
    let r = &h.ranges[ri];
    let from = r.from_bytes.load(Relaxed);
    let to = r.to_bytes.load(Relaxed);
    if from > to || searched.is_some_and(|s| s != to) {
        return Err(LookupError::Invalid);
    }
    let mut fl = (head & hot_head::FLAGS_MASK) as u32;
    if msg_bytes < from || msg_bytes > to {
        fl |= flags::EXTRAPOLATED;
    }
    let fv = (head >> hot_head::F_SHIFT) as u32;
    Ok((params_of!(h, r, from, to, fv, fl), ri))
}

/// [`read_status`] from a hot record.
#[inline]
pub(crate) fn read_hot_status(h: &HotRaw, range: usize) -> ParamsStatus {
    ParamsStatus {
        entry: h.ident_entry.load(Relaxed),
        range: h.ident_range[range & (MAX_RANGES - 1)].load(Relaxed),
        range_index: range as u32,
        reserved: 0,
    }
}

/// Writes the hot record of a checked entry (every word: unused ranges and
/// search words are zeroed, so a record never keeps a previous entry's
/// data). `fl` are the entry's normalised flags, `hash` its key hash.
pub(crate) fn encode_hot(h: &HotRaw, d: &EntryData, fl: u32, hash: u64) {
    let n = d.ranges.len();
    let fv = u64::from(d.f.unwrap_or(0));
    let head = u64::from(fl) & hot_head::FLAGS_MASK
        | (n as u64) << hot_head::RANGES_SHIFT
        | fv << hot_head::F_SHIFT;
    h.head.store(head, Relaxed);
    for (i, w) in h.range_to_bytes.iter().enumerate() {
        let to = if i + 1 < n { d.ranges[i].to_bytes } else { 0 };
        w.store(to, Relaxed);
    }
    let st = |w: &AtomicU64, v: f64| w.store(v.to_bits(), Relaxed);
    st(&h.eel_ns, d.eel_ns);
    st(&h.l_ns, d.L_ns);
    st(&h.o_min_ns, d.o_min_ns);
    st(&h.o_max_ns, d.o_max_ns);
    st(&h.g_f_ns, d.g_f_ns);
    h.s_bytes.store(d.S_bytes.unwrap_or(u64::MAX), Relaxed);
    h.measured_unix_ns.store(d.measured_unix_ns, Relaxed);
    h.samples.store(d.samples, Relaxed);
    let zero = RangeData::default();
    for (i, raw) in h.ranges.iter().enumerate() {
        store_range(raw, d.ranges.get(i).unwrap_or(&zero));
    }
    h.ident_entry.store(d.ext.ident.entry, Relaxed);
    for (i, w) in h.ident_range.iter().enumerate() {
        w.store(if i < n { d.ext.ident.range[i] } else { 0 }, Relaxed);
    }
    h.key_hash.store(hash, Relaxed);
    for w in &h._reserved {
        w.store(0, Relaxed);
    }
}
