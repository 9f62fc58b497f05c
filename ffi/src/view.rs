//! Typed, bounds-checked access to a mapped segment, and the encoding of
//! entries into / out of its atomic words. Shared by reader and writer.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::layout::*;
use crate::sys::Mapping;
use crate::types::{EntryData, LookupError, Params, RangeData};

/// A mapping together with a layout validated against it.
///
/// Invariant: `layout.total_bytes <= map.len()`, the base is page-aligned and
/// every offset in `layout` is a multiple of 64, so every `&HeaderRaw`,
/// `&MetaRaw`, slot and `&EntryRaw` handed out below lies inside the mapping
/// and is properly aligned.
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

    /// Entry `i` of copy `copy`; None when `i ≥ capacity`.
    #[inline]
    pub(crate) fn entry(&self, copy: usize, i: usize) -> Option<&EntryRaw> {
        if i >= self.layout.capacity {
            return None;
        }
        let off = self.layout.copy_offset[copy & 1]
            + self.layout.entries_offset
            + i * self.layout.entry_bytes;
        // SAFETY: i < capacity, so off + entry_bytes ≤ copy end ≤ mapping
        // length; 64-byte aligned; EntryRaw is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const EntryRaw) })
    }
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
    if h.max_ranges.load(Relaxed) as usize != MAX_RANGES
        || h.max_curve.load(Relaxed) as usize != MAX_CURVE
        || h.max_ci.load(Relaxed) as usize != MAX_CI
    {
        return Err("per-entry capacities differ from this ABI");
    }
    let layout = Layout::from_params(
        h.capacity_entries.load(Relaxed) as usize,
        h.hash_slots.load(Relaxed) as usize,
        h.header_bytes.load(Relaxed) as usize,
        h.meta_bytes.load(Relaxed) as usize,
        h.entry_bytes.load(Relaxed) as usize,
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
    Ok(layout)
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

/// Decoded `counts` word: (peer_len, transport_len, ranges, curve, ci).
#[inline]
pub(crate) fn split_counts(c: u64) -> Result<(usize, usize, usize, usize, usize), LookupError> {
    let b = |shift: u32| ((c >> shift) & 0xFF) as usize;
    let out = (
        b(counts::PEER_LEN_SHIFT),
        b(counts::TRANSPORT_LEN_SHIFT),
        b(counts::RANGES_SHIFT),
        b(counts::CURVE_SHIFT),
        b(counts::CI_SHIFT),
    );
    if out.0 == 0
        || out.0 > PEER_MAX_BYTES
        || out.1 == 0
        || out.1 > TRANSPORT_MAX_BYTES
        || out.2 == 0
        || out.2 > MAX_RANGES
        || out.3 > MAX_CURVE
        || out.4 > MAX_CI
        || c >> 40 != 0
    {
        return Err(LookupError::Invalid);
    }
    Ok(out)
}

/// Whether entry `e` holds exactly this key.
#[inline]
pub(crate) fn entry_matches(
    e: &EntryRaw,
    hash: u64,
    peer: &[u64; 8],
    peer_len: usize,
    transport: &[u64; 2],
    transport_len: usize,
) -> bool {
    if e.key_hash.load(Relaxed) != hash {
        return false;
    }
    let c = e.counts.load(Relaxed);
    if (c & 0xFF) as usize != peer_len || ((c >> 8) & 0xFF) as usize != transport_len {
        return false;
    }
    let pw = peer_len.div_ceil(8);
    for (stored, want) in e.peer.iter().zip(peer).take(pw) {
        if stored.load(Relaxed) != *want {
            return false;
        }
    }
    let tw = transport_len.div_ceil(8);
    for (stored, want) in e.transport.iter().zip(transport).take(tw) {
        if stored.load(Relaxed) != *want {
            return false;
        }
    }
    true
}

/// The hot path: parameters of the range containing `msg_bytes`.
#[inline]
pub(crate) fn read_params(e: &EntryRaw, msg_bytes: u64) -> Result<Params, LookupError> {
    let (_, _, n_ranges, _, _) = split_counts(e.counts.load(Relaxed))?;
    // Ranges are sorted; take the first whose upper end reaches msg_bytes,
    // else the last. Outside [from, to] is flagged as extrapolated.
    let mut r = &e.ranges[n_ranges - 1];
    for cand in &e.ranges[..n_ranges] {
        if msg_bytes <= cand.to_bytes.load(Relaxed) {
            r = cand;
            break;
        }
    }
    let from = r.from_bytes.load(Relaxed);
    let to = r.to_bytes.load(Relaxed);
    let mut fl = (e.flags.load(Relaxed) as u32) & flags::ENTRY_MASK;
    if msg_bytes < from || msg_bytes > to {
        fl |= flags::EXTRAPOLATED;
    }
    Ok(Params {
        eel_ns: f(&e.eel_ns),
        L_ns: f(&e.l_ns),
        o_s_ns: f(&r.o_s_ns),
        o_r_ns: f(&r.o_r_ns),
        g_ns: f(&r.g_ns),
        G_ns_per_byte: f(&r.big_g_ns_per_byte),
        O_s_ns_per_byte: f(&r.big_o_s_ns_per_byte),
        O_r_ns_per_byte: f(&r.big_o_r_ns_per_byte),
        o_min_ns: f(&e.o_min_ns),
        o_max_ns: f(&e.o_max_ns),
        g_f_ns: f(&e.g_f_ns),
        S_bytes: e.s_bytes.load(Relaxed),
        range_from_bytes: from,
        range_to_bytes: to,
        measured_unix_ns: e.measured_unix_ns.load(Relaxed),
        samples: e.samples.load(Relaxed),
        f: e.f.load(Relaxed).min(u64::from(u32::MAX)) as u32,
        flags: fl,
    })
}

fn utf8(bytes: Vec<u8>) -> Result<String, LookupError> {
    String::from_utf8(bytes).map_err(|_| LookupError::Invalid)
}

/// The full entry (allocates; for dumps and the writer's read-back).
pub(crate) fn decode_entry(e: &EntryRaw) -> Result<EntryData, LookupError> {
    let (pl, tl, nr, nc, ni) = split_counts(e.counts.load(Relaxed))?;
    let fl = e.flags.load(Relaxed) as u32;
    let s = e.s_bytes.load(Relaxed);
    let fv = e.f.load(Relaxed);
    let ranges = e.ranges[..nr]
        .iter()
        .map(|r| RangeData {
            from_bytes: r.from_bytes.load(Relaxed),
            to_bytes: r.to_bytes.load(Relaxed),
            g_ns: f(&r.g_ns),
            G_ns_per_byte: f(&r.big_g_ns_per_byte),
            o_s_ns: f(&r.o_s_ns),
            o_r_ns: f(&r.o_r_ns),
            O_s_ns_per_byte: f(&r.big_o_s_ns_per_byte),
            O_r_ns_per_byte: f(&r.big_o_r_ns_per_byte),
        })
        .collect();
    let curve = e.curve[..nc]
        .iter()
        .map(|c| {
            (
                c.peers.load(Relaxed).min(u64::from(u32::MAX)) as u32,
                f(&c.o_ns),
                f(&c.rtt_ns),
            )
        })
        .collect();
    let mut ci95 = Vec::with_capacity(ni);
    for c in &e.ci95[..ni] {
        let words = load_words(&c.name);
        let len = words
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .position(|b| b == 0)
            .ok_or(LookupError::Invalid)?;
        ci95.push((utf8(unpack_name(&words, len))?, f(&c.lo), f(&c.hi)));
    }
    Ok(EntryData {
        peer: utf8(unpack_name(&load_words(&e.peer), pl))?,
        transport: utf8(unpack_name(&load_words(&e.transport), tl))?,
        ranges,
        eel_ns: f(&e.eel_ns),
        L_ns: f(&e.l_ns),
        S_bytes: (fl & flags::HAS_S != 0 && s != u64::MAX).then_some(s),
        f: (fl & flags::HAS_LOGFP != 0 && fv != 0).then(|| fv.min(u64::from(u32::MAX)) as u32),
        o_min_ns: f(&e.o_min_ns),
        o_max_ns: f(&e.o_max_ns),
        g_f_ns: f(&e.g_f_ns),
        curve,
        ci95,
        samples: e.samples.load(Relaxed),
        probe_bytes: e.probe_bytes.load(Relaxed),
        measured_unix_ns: e.measured_unix_ns.load(Relaxed),
        flags: fl,
    })
}

/// Checks that `d` fits the segment and returns its normalised flags and
/// packed names.
pub(crate) fn check_entry(d: &EntryData) -> Result<(u32, [u64; 8], [u64; 2]), &'static str> {
    let peer: [u64; 8] =
        pack_name(d.peer.as_bytes()).ok_or("peer name longer than 63 bytes or has NUL")?;
    let transport: [u64; 2] = pack_name(d.transport.as_bytes())
        .ok_or("transport name longer than 15 bytes or has NUL")?;
    if d.peer.is_empty() || d.transport.is_empty() {
        return Err("empty peer or transport name");
    }
    if d.ranges.is_empty() || d.ranges.len() > MAX_RANGES {
        return Err("need 1..=8 protocol ranges");
    }
    for (i, r) in d.ranges.iter().enumerate() {
        if r.from_bytes > r.to_bytes {
            return Err("range with from_bytes > to_bytes");
        }
        if i > 0 && d.ranges[i - 1].to_bytes >= r.from_bytes {
            return Err("ranges not sorted or overlapping");
        }
    }
    if d.curve.len() > MAX_CURVE {
        return Err("more than 32 curve points");
    }
    if d.ci95.len() > MAX_CI {
        return Err("more than 16 intervals");
    }
    for (name, _, _) in &d.ci95 {
        if pack_name::<4>(name.as_bytes()).is_none() {
            return Err("interval name longer than 31 bytes or has NUL");
        }
    }
    if d.S_bytes == Some(u64::MAX) {
        return Err("S_bytes = u64::MAX is reserved for 'none'");
    }
    if d.f == Some(0) {
        return Err("f = 0 is reserved for 'none'");
    }
    let mut fl =
        d.flags & flags::ENTRY_MASK & !(flags::HAS_S | flags::HAS_LOGFP | flags::HAS_LOGGPS);
    if d.S_bytes.is_some() {
        fl |= flags::HAS_S;
    }
    if d.f.is_some() {
        fl |= flags::HAS_LOGFP;
    }
    if d.ranges
        .iter()
        .any(|r| r.O_s_ns_per_byte != 0.0 || r.O_r_ns_per_byte != 0.0)
    {
        fl |= flags::HAS_LOGGPS;
    }
    Ok((fl, peer, transport))
}

/// Writes a checked entry into `e` (relaxed stores; the caller publishes).
pub(crate) fn encode_entry(
    e: &EntryRaw,
    d: &EntryData,
    fl: u32,
    peer: &[u64; 8],
    transport: &[u64; 2],
    hash: u64,
) {
    let st = |w: &AtomicU64, v: f64| w.store(v.to_bits(), Relaxed);
    e.key_hash.store(hash, Relaxed);
    let c = (d.peer.len() as u64) << counts::PEER_LEN_SHIFT
        | (d.transport.len() as u64) << counts::TRANSPORT_LEN_SHIFT
        | (d.ranges.len() as u64) << counts::RANGES_SHIFT
        | (d.curve.len() as u64) << counts::CURVE_SHIFT
        | (d.ci95.len() as u64) << counts::CI_SHIFT;
    e.counts.store(c, Relaxed);
    e.flags.store(u64::from(fl), Relaxed);
    e.samples.store(d.samples, Relaxed);
    e.probe_bytes.store(d.probe_bytes, Relaxed);
    e.measured_unix_ns.store(d.measured_unix_ns, Relaxed);
    st(&e.eel_ns, d.eel_ns);
    st(&e.l_ns, d.L_ns);
    e.s_bytes.store(d.S_bytes.unwrap_or(u64::MAX), Relaxed);
    e.f.store(u64::from(d.f.unwrap_or(0)), Relaxed);
    st(&e.o_min_ns, d.o_min_ns);
    st(&e.o_max_ns, d.o_max_ns);
    st(&e.g_f_ns, d.g_f_ns);
    store_words(&e.peer, peer);
    store_words(&e.transport, transport);
    for (raw, r) in e.ranges.iter().zip(&d.ranges) {
        raw.from_bytes.store(r.from_bytes, Relaxed);
        raw.to_bytes.store(r.to_bytes, Relaxed);
        st(&raw.g_ns, r.g_ns);
        st(&raw.big_g_ns_per_byte, r.G_ns_per_byte);
        st(&raw.o_s_ns, r.o_s_ns);
        st(&raw.o_r_ns, r.o_r_ns);
        st(&raw.big_o_s_ns_per_byte, r.O_s_ns_per_byte);
        st(&raw.big_o_r_ns_per_byte, r.O_r_ns_per_byte);
    }
    for (raw, (p, o, rtt)) in e.curve.iter().zip(&d.curve) {
        raw.peers.store(u64::from(*p), Relaxed);
        st(&raw.o_ns, *o);
        st(&raw.rtt_ns, *rtt);
    }
    for (raw, (name, lo, hi)) in e.ci95.iter().zip(&d.ci95) {
        let w: [u64; 4] = pack_name(name.as_bytes()).unwrap_or([0; 4]);
        store_words(&raw.name, &w);
        st(&raw.lo, *lo);
        st(&raw.hi, *hi);
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
