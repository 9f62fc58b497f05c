//! Typed, bounds-checked access to a mapped segment, and the encoding of
//! entries into / out of its atomic words. Shared by reader and writer.

use core::mem::size_of;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::ext::*;
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

    /// The ABI 1.1 block of entry `i`; None on a 1.0 segment or `i ≥ capacity`.
    #[inline]
    pub(crate) fn entry_ext(&self, copy: usize, i: usize) -> Option<&EntryExtRaw> {
        let x = self.layout.ext?;
        if i >= self.layout.capacity {
            return None;
        }
        let off = self.layout.copy_offset[copy & 1]
            + self.layout.entries_offset
            + i * self.layout.entry_bytes
            + x.entry_ext_offset;
        // SAFETY: the layout was validated with this extension, so
        // entry_bytes ≥ entry_ext_offset + size_of::<EntryExtRaw>() and the
        // block lies inside entry i (i < capacity), inside the mapping; the
        // entry is 64-byte aligned and entry_ext_offset (2304) is a multiple
        // of 64; EntryExtRaw is all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const EntryExtRaw) })
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

    /// Class record `i` (< class_capacity) of a copy.
    #[inline]
    pub(crate) fn class(&self, copy: usize, i: usize) -> Option<&ClassRaw> {
        let x = self.layout.ext?;
        if i >= x.class_capacity {
            return None;
        }
        let off = self.layout.copy_offset[copy & 1] + x.classes_offset + i * size_of::<ClassRaw>();
        // SAFETY: i < class_capacity: inside the class table, which ends at
        // map_slots_offset ≤ meta_ext_end ≤ meta_bytes; classes_offset and
        // the record size are multiples of 8; all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const ClassRaw) })
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
        if i >= x.map_capacity {
            return None;
        }
        let off =
            self.layout.copy_offset[copy & 1] + x.map_records_offset + i * size_of::<MapRaw>();
        // SAFETY: i < map_capacity: inside the record array, which ends at
        // meta_ext_end ≤ meta_bytes; 8-byte aligned; all atomics.
        Some(unsafe { &*(self.map.base().add(off) as *const MapRaw) })
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
    if h.abi_minor.load(Relaxed) == 0 {
        return Ok(layout);
    }
    // ABI ≥ 1.1: the extension's capacities are in the header extension.
    if layout.header_bytes < size_of::<HeaderRaw>() + size_of::<HeaderExtRaw>() {
        return Err("ABI 1.1 segment without its header extension");
    }
    let hx = header_ext_of(map);
    if hx.transport_records.load(Relaxed) as usize != TRANSPORT_RECORDS
        || hx.max_latency.load(Relaxed) as usize != MAX_LATENCY
        || hx.max_k.load(Relaxed) as usize != MAX_K
        || hx.schemes.load(Relaxed) as usize != SCHEMES
    {
        return Err("ABI 1.1 record capacities differ from this reader");
    }
    let ext = ExtLayout::new(
        hx.class_capacity.load(Relaxed) as usize,
        hx.map_capacity.load(Relaxed) as usize,
        hx.map_slots.load(Relaxed) as usize,
    )
    .ok_or("ABI 1.1 class or map capacities out of range")?;
    Layout::from_params_ext(
        layout.capacity,
        layout.hash_slots,
        layout.header_bytes,
        layout.meta_bytes,
        layout.entry_bytes,
        Some(ext),
    )
    .ok_or("ABI 1.1 extension does not fit the declared sizes")
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
    read_params_at(e, msg_bytes).map(|(p, _)| p)
}

/// [`read_params`] and the index of the range it used.
#[inline]
pub(crate) fn read_params_at(e: &EntryRaw, msg_bytes: u64) -> Result<(Params, usize), LookupError> {
    let (_, _, n_ranges, _, _) = split_counts(e.counts.load(Relaxed))?;
    // Ranges are sorted; take the first whose upper end reaches msg_bytes,
    // else the last. Outside [from, to] is flagged as extrapolated.
    let mut ri = n_ranges - 1;
    for (i, cand) in e.ranges[..n_ranges].iter().enumerate() {
        if msg_bytes <= cand.to_bytes.load(Relaxed) {
            ri = i;
            break;
        }
    }
    let r = &e.ranges[ri];
    let from = r.from_bytes.load(Relaxed);
    let to = r.to_bytes.load(Relaxed);
    let mut fl = (e.flags.load(Relaxed) as u32) & flags::ENTRY_MASK;
    if msg_bytes < from || msg_bytes > to {
        fl |= flags::EXTRAPOLATED;
    }
    let p = Params {
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
    };
    Ok((p, ri))
}

/// The statuses that go with a lookup's [`Params`]: the entry-level word
/// and the word of range `range` (0 on a 1.0 segment).
#[inline]
pub(crate) fn read_status(x: Option<&EntryExtRaw>, range: usize) -> ParamsStatus {
    let (entry, word) = match x {
        Some(x) => (
            x.ident_entry.load(Relaxed),
            x.ident_range[range & (MAX_RANGES - 1)].load(Relaxed),
        ),
        None => (0, 0),
    };
    ParamsStatus {
        entry,
        range: word,
        range_index: range as u32,
        reserved: 0,
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, LookupError> {
    String::from_utf8(bytes).map_err(|_| LookupError::Invalid)
}

/// The full entry (allocates; for dumps and the writer's read-back). `x` is
/// the entry's ABI 1.1 block (None on a 1.0 segment: the extension reads as
/// its default).
pub(crate) fn decode_entry(
    e: &EntryRaw,
    x: Option<&EntryExtRaw>,
) -> Result<EntryData, LookupError> {
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
        ext: match x {
            Some(x) => read_ext(x, nr)?.to_data(),
            None => EntryExtData::default(),
        },
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
    let is_class = d.peer.as_bytes().first() == Some(&CLASS_PREFIX);
    if d.flags & flags::CLASS != 0 && !is_class {
        return Err("CLASS flag on a peer name that does not start with '@'");
    }
    let derived = flags::HAS_S
        | flags::HAS_LOGFP
        | flags::HAS_LOGGPS
        | flags::CLASS
        | flags::UNIDENTIFIED
        | flags::SHAPED;
    let mut fl = d.flags & flags::ENTRY_MASK & !derived;
    fl |= check_ext(d)?;
    if is_class {
        fl |= flags::CLASS;
    }
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

/// Writes a checked entry into `e` and, on an ABI 1.1 segment, its
/// extension into `x` (relaxed stores; the caller publishes).
pub(crate) fn encode_entry(
    e: &EntryRaw,
    x: Option<&EntryExtRaw>,
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
    if let Some(x) = x {
        encode_ext(x, &d.ext, d.ranges.len());
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

// ---------------------------------------------------------------- ABI 1.1

#[inline]
fn load_est(r: &EstimateRaw) -> Estimate {
    Estimate {
        value: f(&r.value),
        lo: f(&r.lo),
        hi: f(&r.hi),
    }
}

#[inline]
fn store_est(r: &EstimateRaw, v: &Estimate) {
    r.value.store(v.value.to_bits(), Relaxed);
    r.lo.store(v.lo.to_bits(), Relaxed);
    r.hi.store(v.hi.to_bits(), Relaxed);
}

/// The ABI 1.1 block of an entry with `n_ranges` ranges, copied out
/// without allocating. Counts out of bounds or a range index beyond the
/// entry's ranges are Invalid; status and regime codes this reader does not
/// know are passed on (a later minor may define them).
pub(crate) fn read_ext(x: &EntryExtRaw, n_ranges: usize) -> Result<EntryExt, LookupError> {
    let head = x.head.load(Relaxed);
    let n_lat = ((head >> ext_head::LATENCY_SHIFT) & 0xFF) as usize;
    let n_ov = ((head >> ext_head::OVERLAP_SHIFT) & 0xFF) as usize;
    if n_lat > MAX_LATENCY || n_ranges > MAX_RANGES || (n_ov != 0 && n_ov != n_ranges) {
        return Err(LookupError::Invalid);
    }
    let mut out = EntryExt {
        present: EXT_V11,
        n_latency: n_lat as u32,
        n_overlap: n_ov as u32,
        instability: ((head >> ext_head::INSTABILITY_SHIFT) & 0xFF) as u32,
        checked_unix_ns: x.checked_unix_ns.load(Relaxed),
        changed_unix_ns: x.changed_unix_ns.load(Relaxed),
        ..EntryExt::default()
    };
    out.ident.entry = x.ident_entry.load(Relaxed);
    for (o, w) in out
        .ident
        .range
        .iter_mut()
        .zip(&x.ident_range)
        .take(n_ranges)
    {
        *o = w.load(Relaxed);
    }
    if head & ext_head::BANDWIDTH != 0 {
        let b = &x.bandwidth;
        let info = b.info.load(Relaxed);
        let range_index = info as u32;
        if range_index != NO_RANGE && range_index as usize >= n_ranges {
            return Err(LookupError::Invalid);
        }
        out.present |= EXT_BANDWIDTH;
        out.bandwidth = Bandwidth {
            sustained_G_ns_per_byte: Estimate {
                value: f(&b.sustained_g),
                lo: f(&b.sustained_lo),
                hi: f(&b.sustained_hi),
            },
            burst_G_ns_per_byte: Estimate {
                value: f(&b.burst_g),
                lo: f(&b.burst_lo),
                hi: f(&b.burst_hi),
            },
            burst_bytes: b.burst_bytes.load(Relaxed),
            regime: (info >> 32) as u32,
            range_index,
        };
    }
    if n_lat > 0 {
        out.present |= EXT_LATENCY;
    }
    for (o, r) in out.latency.iter_mut().zip(&x.latency).take(n_lat) {
        *o = LatencyPercentiles {
            size_bytes: r.size_bytes.load(Relaxed),
            samples: r.samples.load(Relaxed),
            min_ns: f(&r.min_ns),
            p50_ns: f(&r.p50_ns),
            p90_ns: f(&r.p90_ns),
            p99_ns: f(&r.p99_ns),
            p999_ns: f(&r.p999_ns),
            max_ns: f(&r.max_ns),
        };
    }
    if n_ov > 0 {
        out.present |= EXT_OVERLAP;
    }
    for (o, r) in out.overlap.iter_mut().zip(&x.overlap).take(n_ov) {
        *o = Overlap {
            send: load_est(&r.send),
            recv: load_est(&r.recv),
        };
    }
    Ok(out)
}

/// Writes a checked extension (all words: unused records are zeroed, so a
/// copy never keeps a previous entry's data).
pub(crate) fn encode_ext(x: &EntryExtRaw, d: &EntryExtData, n_ranges: usize) {
    let st = |w: &AtomicU64, v: f64| w.store(v.to_bits(), Relaxed);
    let mut head = (d.latency.len() as u64) << ext_head::LATENCY_SHIFT
        | (d.overlap.len() as u64) << ext_head::OVERLAP_SHIFT
        | u64::from(d.instability.code()) << ext_head::INSTABILITY_SHIFT;
    if d.bandwidth.is_some() {
        head |= ext_head::BANDWIDTH;
    }
    x.head.store(head, Relaxed);
    x.checked_unix_ns.store(d.checked_unix_ns, Relaxed);
    x.changed_unix_ns.store(d.changed_unix_ns, Relaxed);
    x.ident_entry.store(d.ident.entry, Relaxed);
    for (i, w) in x.ident_range.iter().enumerate() {
        w.store(if i < n_ranges { d.ident.range[i] } else { 0 }, Relaxed);
    }
    for w in &x._reserved {
        w.store(0, Relaxed);
    }
    let b = d.bandwidth.unwrap_or_default();
    let raw = &x.bandwidth;
    raw.info.store(
        u64::from(b.range_index) | u64::from(b.regime) << 32,
        Relaxed,
    );
    st(&raw.sustained_g, b.sustained_G_ns_per_byte.value);
    st(&raw.sustained_lo, b.sustained_G_ns_per_byte.lo);
    st(&raw.sustained_hi, b.sustained_G_ns_per_byte.hi);
    st(&raw.burst_g, b.burst_G_ns_per_byte.value);
    st(&raw.burst_lo, b.burst_G_ns_per_byte.lo);
    st(&raw.burst_hi, b.burst_G_ns_per_byte.hi);
    raw.burst_bytes.store(b.burst_bytes, Relaxed);
    for (i, r) in x.latency.iter().enumerate() {
        let v = d.latency.get(i).copied().unwrap_or_default();
        r.size_bytes.store(v.size_bytes, Relaxed);
        r.samples.store(v.samples, Relaxed);
        st(&r.min_ns, v.min_ns);
        st(&r.p50_ns, v.p50_ns);
        st(&r.p90_ns, v.p90_ns);
        st(&r.p99_ns, v.p99_ns);
        st(&r.p999_ns, v.p999_ns);
        st(&r.max_ns, v.max_ns);
    }
    for (i, r) in x.overlap.iter().enumerate() {
        let v = d.overlap.get(i).copied().unwrap_or_default();
        store_est(&r.send, &v.send);
        store_est(&r.recv, &v.recv);
    }
}

/// Bits of the status words that name no field.
const ENTRY_FIELDS_MASK: u64 = (1 << (4 * Field::ALL.len())) - 1;
const RANGE_FIELDS_MASK: u64 = (1 << (4 * RangeField::ALL.len())) - 1;
const TRANSPORT_FIELDS_MASK: u64 = (1 << (4 * TransportField::ALL.len())) - 1;

fn known_statuses(word: u64, fields: usize) -> bool {
    (0..fields).all(|i| Status::from_code(((word >> (4 * i)) & 0xF) as u8).is_known())
}

/// A value the status says is identified must be a finite number.
fn finite_if(s: Status, v: f64) -> bool {
    s != Status::Identified || v.is_finite()
}

/// An identified estimate must be a finite value inside a finite interval,
/// within [min, max].
fn bracketed_if(s: Status, e: &Estimate, min: f64, max: f64) -> bool {
    s != Status::Identified || (e.is_bracketed() && e.lo >= min && e.hi <= max)
}

/// Checks the ABI 1.1 part of `d` and returns the flags it implies
/// (UNIDENTIFIED, SHAPED, UNSTABLE).
pub(crate) fn check_ext(d: &EntryData) -> Result<u32, &'static str> {
    let x = &d.ext;
    let id = &x.ident;
    let n = d.ranges.len();
    if id.entry & !ENTRY_FIELDS_MASK != 0 {
        return Err("status set for an entry-level field that does not exist");
    }
    if !known_statuses(id.entry, Field::ALL.len()) {
        return Err("reserved status code (11..=14)");
    }
    for (r, w) in id.range.iter().enumerate() {
        if r >= n && *w != 0 {
            return Err("status set for a range the entry does not have");
        }
        if *w & !RANGE_FIELDS_MASK != 0 {
            return Err("status set for a range-level field that does not exist");
        }
        if !known_statuses(*w, RangeField::ALL.len()) {
            return Err("reserved status code (11..=14)");
        }
    }
    let ok = finite_if(id.get(Field::Eel), d.eel_ns)
        && finite_if(id.get(Field::L), d.L_ns)
        && finite_if(id.get(Field::OMin), d.o_min_ns)
        && finite_if(id.get(Field::OMax), d.o_max_ns)
        && finite_if(id.get(Field::Gf), d.g_f_ns);
    if !ok {
        return Err("an identified entry-level value is not a finite number");
    }
    if id.get(Field::S) == Status::Identified && d.S_bytes.is_none() {
        return Err("S identified but the entry has no S");
    }
    if id.get(Field::F) == Status::Identified && d.f.is_none() {
        return Err("f identified but the entry has no f");
    }
    for (i, r) in d.ranges.iter().enumerate() {
        let g = |f: RangeField| id.get_range(i, f);
        let ok = finite_if(g(RangeField::Gap), r.g_ns)
            && finite_if(g(RangeField::GapPerByte), r.G_ns_per_byte)
            && finite_if(g(RangeField::OSend), r.o_s_ns)
            && finite_if(g(RangeField::ORecv), r.o_r_ns)
            && finite_if(g(RangeField::OSendPerByte), r.O_s_ns_per_byte)
            && finite_if(g(RangeField::ORecvPerByte), r.O_r_ns_per_byte);
        if !ok {
            return Err("an identified range value is not a finite number");
        }
    }
    let mut fl = 0;
    match &x.bandwidth {
        None => {
            if id.get(Field::SustainedG) == Status::Identified
                || id.get(Field::BurstG) == Status::Identified
            {
                return Err("bandwidth identified but the entry has no bandwidth block");
            }
        }
        Some(b) => {
            let regime = b.regime().ok_or("unknown bandwidth regime code")?;
            if b.range_index != NO_RANGE && b.range_index as usize >= n {
                return Err("bandwidth range index beyond the entry's ranges");
            }
            if !bracketed_if(
                id.get(Field::SustainedG),
                &b.sustained_G_ns_per_byte,
                0.0,
                f64::INFINITY,
            ) || (id.get(Field::SustainedG) == Status::Identified
                && b.sustained_G_ns_per_byte.value <= 0.0)
            {
                return Err(
                    "identified sustained G is not a positive number inside a finite interval",
                );
            }
            if regime == Regime::Single {
                if b.burst_bytes != 0 || id.get(Field::BurstG) == Status::Identified {
                    return Err("burst values without a burst regime");
                }
            } else {
                if b.burst_bytes == 0 {
                    return Err("burst regime with a burst length of 0 bytes");
                }
                if !bracketed_if(
                    id.get(Field::BurstG),
                    &b.burst_G_ns_per_byte,
                    0.0,
                    f64::INFINITY,
                ) {
                    return Err("identified burst G is not a number ≥ 0 inside a finite interval");
                }
                fl |= flags::SHAPED;
            }
        }
    }
    if x.latency.len() > MAX_LATENCY {
        return Err("more than 8 latency sizes");
    }
    for (i, l) in x.latency.iter().enumerate() {
        let v = [l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns];
        if l.samples == 0 {
            return Err("latency record without samples");
        }
        if i > 0 && x.latency[i - 1].size_bytes >= l.size_bytes {
            return Err("latency sizes not increasing");
        }
        if !v.iter().all(|t| t.is_finite() && *t >= 0.0) || v.windows(2).any(|p| p[0] > p[1]) {
            return Err("latency percentiles must be finite, ≥ 0 and ordered min ≤ p50 ≤ … ≤ max");
        }
    }
    if !x.overlap.is_empty() && x.overlap.len() != n {
        return Err("overlap needs one record per range");
    }
    for r in 0..n {
        let (s, rv) = (
            id.get_range(r, RangeField::OverlapSend),
            id.get_range(r, RangeField::OverlapRecv),
        );
        match x.overlap.get(r) {
            None if s == Status::Identified || rv == Status::Identified => {
                return Err("overlap identified but the entry has no overlap records");
            }
            Some(o)
                if !bracketed_if(s, &o.send, 0.0, 1.0) || !bracketed_if(rv, &o.recv, 0.0, 1.0) =>
            {
                return Err("identified overlap is not a fraction in [0, 1] with its interval");
            }
            _ => {}
        }
    }
    if let Instability::Unknown(_) = x.instability {
        return Err("unknown instability code");
    }
    if x.instability != Instability::None {
        fl |= flags::UNSTABLE;
    }
    if id.any_not_identified(n) {
        fl |= flags::UNIDENTIFIED;
    }
    Ok(fl)
}

// ------------------------------------------------ per-transport records

/// Checks a per-transport record before it is stored.
pub(crate) fn check_transport(t: &TransportExt) -> Result<(), &'static str> {
    if t.present & !(TX_PENALTIES | TX_SHARING | TX_BISECTION) != 0 {
        return Err("unknown present bits");
    }
    if t.n_k.iter().any(|&k| k as usize > MAX_K) {
        return Err("more than 8 flow counts k");
    }
    if (t.present & TX_PENALTIES != 0) != t.n_k.iter().any(|&k| k > 0) {
        return Err("present bits disagree with the penalty counts");
    }
    if t.status & !TRANSPORT_FIELDS_MASK != 0
        || !known_statuses(t.status, TransportField::ALL.len())
    {
        return Err("unknown status field or reserved status code");
    }
    for s in Scheme::ALL {
        let st = t.status(TransportField::penalty(s));
        if t.n_k[s as usize] == 0 && st == Status::Identified {
            return Err("penalties identified but none set");
        }
        if st == Status::Identified
            && !t
                .penalties(s)
                .iter()
                .all(|p| p.is_bracketed() && p.value > 0.0)
        {
            return Err("identified penalty is not a positive number inside a finite interval");
        }
    }
    let sharing = [
        (TransportField::Beta, &t.beta),
        (TransportField::GammaO, &t.gamma_o),
        (TransportField::GammaI, &t.gamma_i),
    ];
    for (field, e) in sharing {
        let st = t.status(field);
        if st == Status::Identified && (t.present & TX_SHARING == 0 || !e.is_bracketed()) {
            return Err(
                "identified sharing parameter is not a finite number inside a finite interval",
            );
        }
    }
    if t.status(TransportField::Beta) == Status::Identified && t.beta.value <= 0.0 {
        return Err("identified β is not positive");
    }
    if t.present & TX_BISECTION != 0 {
        let b = &t.bisection;
        let v = [b.min_bytes_per_s, b.median_bytes_per_s, b.max_bytes_per_s];
        let ok = v.iter().all(|x| x.is_finite() && *x >= 0.0)
            && b.mean_bytes_per_s.is_finite()
            && v[0] <= v[1]
            && v[1] <= v[2]
            && v[0] <= b.mean_bytes_per_s
            && b.mean_bytes_per_s <= v[2];
        if !ok {
            return Err(
                "bisection bandwidths must be finite, ≥ 0 and ordered min ≤ median, mean ≤ max",
            );
        }
        if b.nodes < 2 || b.rounds == 0 {
            return Err("bisection needs ≥ 2 nodes and ≥ 1 round");
        }
    } else if t.status(TransportField::Bisection) == Status::Identified {
        return Err("bisection identified but not set");
    }
    Ok(())
}

/// Writes a checked per-transport record.
pub(crate) fn encode_transport(
    r: &TransportRaw,
    name: &[u64; 2],
    name_len: usize,
    t: &TransportExt,
) {
    store_words(&r.name, name);
    let mut info = name_len as u64;
    for (s, shift) in transport_info::K_SHIFT.iter().enumerate() {
        info |= u64::from(t.n_k[s]) << shift;
    }
    if t.present & TX_SHARING != 0 {
        info |= transport_info::SHARING;
    }
    if t.present & TX_BISECTION != 0 {
        info |= transport_info::BISECTION;
    }
    r.info.store(info, Relaxed);
    r.status.store(t.status, Relaxed);
    r.contention_unix_ns.store(t.contention_unix_ns, Relaxed);
    for (s, row) in r.penalty.iter().enumerate() {
        for (k, e) in row.iter().enumerate() {
            let v = if k < t.n_k[s] as usize {
                t.penalty[s][k]
            } else {
                Estimate::default()
            };
            store_est(e, &v);
        }
    }
    store_est(&r.beta, &t.beta);
    store_est(&r.gamma_o, &t.gamma_o);
    store_est(&r.gamma_i, &t.gamma_i);
    let b = &t.bisection;
    r.bisection_min.store(b.min_bytes_per_s.to_bits(), Relaxed);
    r.bisection_median
        .store(b.median_bytes_per_s.to_bits(), Relaxed);
    r.bisection_mean
        .store(b.mean_bytes_per_s.to_bits(), Relaxed);
    r.bisection_max.store(b.max_bytes_per_s.to_bits(), Relaxed);
    r.bisection_shape
        .store(u64::from(b.nodes) | u64::from(b.rounds) << 32, Relaxed);
    r.bisection_msg_bytes.store(b.msg_bytes, Relaxed);
    r.bisection_unix_ns.store(b.measured_unix_ns, Relaxed);
}

/// The name (packed words, length) of a per-transport record.
#[inline]
pub(crate) fn transport_name(r: &TransportRaw) -> Result<([u64; 2], usize), LookupError> {
    let len = (r.info.load(Relaxed) & 0xFF) as usize;
    if len == 0 || len > TRANSPORT_MAX_BYTES {
        return Err(LookupError::Invalid);
    }
    Ok((load_words(&r.name), len))
}

/// A per-transport record, copied out without allocating.
pub(crate) fn decode_transport(r: &TransportRaw) -> Result<TransportExt, LookupError> {
    let info = r.info.load(Relaxed);
    let mut t = TransportExt::default();
    for (s, shift) in transport_info::K_SHIFT.iter().enumerate() {
        let k = ((info >> shift) & 0xF) as u32;
        if k as usize > MAX_K {
            return Err(LookupError::Invalid);
        }
        t.n_k[s] = k;
        for (o, e) in t.penalty[s].iter_mut().zip(&r.penalty[s]).take(k as usize) {
            *o = load_est(e);
        }
    }
    if t.n_k.iter().any(|&k| k > 0) {
        t.present |= TX_PENALTIES;
    }
    t.status = r.status.load(Relaxed);
    t.contention_unix_ns = r.contention_unix_ns.load(Relaxed);
    if info & transport_info::SHARING != 0 {
        t.present |= TX_SHARING;
        t.beta = load_est(&r.beta);
        t.gamma_o = load_est(&r.gamma_o);
        t.gamma_i = load_est(&r.gamma_i);
    }
    if info & transport_info::BISECTION != 0 {
        t.present |= TX_BISECTION;
        let shape = r.bisection_shape.load(Relaxed);
        t.bisection = Bisection {
            min_bytes_per_s: f(&r.bisection_min),
            median_bytes_per_s: f(&r.bisection_median),
            mean_bytes_per_s: f(&r.bisection_mean),
            max_bytes_per_s: f(&r.bisection_max),
            nodes: shape as u32,
            rounds: (shape >> 32) as u32,
            msg_bytes: r.bisection_msg_bytes.load(Relaxed),
            measured_unix_ns: r.bisection_unix_ns.load(Relaxed),
        };
    }
    Ok(t)
}

/// The per-transport record of copy `c` named (`name`, `len`); Ok(None) when
/// there is none (always on a 1.0 segment).
pub(crate) fn find_transport<'a>(
    seg: &'a Seg,
    c: usize,
    name: &[u64; 2],
    len: usize,
) -> Result<Option<&'a TransportRaw>, LookupError> {
    let Some(me) = seg.meta_ext(c) else {
        return Ok(None);
    };
    let n = me.transport_count.load(Relaxed);
    if n > TRANSPORT_RECORDS as u64 {
        return Err(LookupError::Invalid);
    }
    for r in &me.transports[..n as usize] {
        let (w, l) = transport_name(r)?;
        if l == len && w == *name {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

// ------------------------------------------- coverage classes, the map

/// The map's hash of a peer name (the entry-table hash with an empty
/// transport).
#[inline]
pub(crate) fn map_hash(peer: &[u64; 8], peer_len: usize) -> u64 {
    key_hash(peer, peer_len, &[0; 2], 0)
}

/// (class count, map count) of copy `c`, bounds-checked.
#[inline]
pub(crate) fn ext_counts(seg: &Seg, c: usize) -> Result<(usize, usize), LookupError> {
    let (Some(x), Some(me)) = (seg.layout().ext, seg.meta_ext(c)) else {
        return Ok((0, 0));
    };
    let classes = me.class_count.load(Relaxed);
    let mapped = me.map_count.load(Relaxed);
    if classes > x.class_capacity as u64 || mapped > x.map_capacity as u64 {
        return Err(LookupError::Invalid);
    }
    Ok((classes as usize, mapped as usize))
}

/// The class id `peer` maps to in copy `c`; Ok(None) when it is not mapped
/// (always on a 1.0 segment). Probing is bounded by the slot count.
pub(crate) fn find_class_of(
    seg: &Seg,
    c: usize,
    peer: &[u64; 8],
    peer_len: usize,
) -> Result<Option<usize>, LookupError> {
    let Some(x) = seg.layout().ext else {
        return Ok(None);
    };
    let (classes, mapped) = ext_counts(seg, c)?;
    let hash = map_hash(peer, peer_len);
    let mut i = hash as usize;
    for _ in 0..x.map_slots {
        let v = seg
            .map_slot(c, i)
            .ok_or(LookupError::Invalid)?
            .load(Relaxed);
        if v == 0 {
            return Ok(None);
        }
        if v >> 32 == hash >> 32 {
            let idx = ((v & 0xFFFF_FFFF) as usize)
                .checked_sub(1)
                .ok_or(LookupError::Invalid)?;
            if idx >= mapped {
                return Err(LookupError::Invalid);
            }
            let rec = seg.map_record(c, idx).ok_or(LookupError::Invalid)?;
            let info = rec.info.load(Relaxed);
            if rec.hash.load(Relaxed) == hash
                && (info & 0xFF) as usize == peer_len
                && rec
                    .peer
                    .iter()
                    .zip(peer)
                    .take(peer_len.div_ceil(8))
                    .all(|(s, w)| s.load(Relaxed) == *w)
            {
                let class = (info >> 8) as usize;
                if class >= classes {
                    return Err(LookupError::Invalid);
                }
                return Ok(Some(class));
            }
        }
        i = i.wrapping_add(1);
    }
    Ok(None)
}

/// The name (packed words, length) of class `id` of copy `c`.
#[inline]
pub(crate) fn class_name(seg: &Seg, c: usize, id: usize) -> Result<([u64; 8], usize), LookupError> {
    let r = seg.class(c, id).ok_or(LookupError::Invalid)?;
    let len = r.len.load(Relaxed);
    if len < 2 || len > PEER_MAX_BYTES as u64 {
        return Err(LookupError::Invalid);
    }
    Ok((load_words(&r.name), len as usize))
}

/// The peer of map record `i` of copy `c` and its class id (for dumps and
/// the writer's read-back).
pub(crate) fn map_entry(
    seg: &Seg,
    c: usize,
    i: usize,
) -> Result<([u64; 8], usize, usize), LookupError> {
    let r = seg.map_record(c, i).ok_or(LookupError::Invalid)?;
    let info = r.info.load(Relaxed);
    let len = (info & 0xFF) as usize;
    if len == 0 || len > PEER_MAX_BYTES {
        return Err(LookupError::Invalid);
    }
    Ok((load_words(&r.peer), len, (info >> 8) as usize))
}

/// Packed words as a String (allocates).
pub(crate) fn words_to_string(words: &[u64], len: usize) -> Result<String, LookupError> {
    utf8(unpack_name(words, len))
}

pub(crate) fn store_name_words(dst: &[AtomicU64], src: &[u64]) {
    store_words(dst, src);
}
