//! The ABI 1.0 entry: its counts word, key match, parameters, encoding
//! and decoding.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::*;
use crate::types::{EntryData, LookupError, Params, RangeData};

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
    let fv = e.f.load(Relaxed).min(u64::from(u32::MAX)) as u32;
    Ok((params_of!(e, r, from, to, fv, fl), ri))
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

/// Writes one protocol range (relaxed stores).
pub(crate) fn store_range(raw: &RangeRaw, r: &RangeData) {
    let st = |w: &AtomicU64, v: f64| w.store(v.to_bits(), Relaxed);
    raw.from_bytes.store(r.from_bytes, Relaxed);
    raw.to_bytes.store(r.to_bytes, Relaxed);
    st(&raw.g_ns, r.g_ns);
    st(&raw.big_g_ns_per_byte, r.G_ns_per_byte);
    st(&raw.o_s_ns, r.o_s_ns);
    st(&raw.o_r_ns, r.o_r_ns);
    st(&raw.big_o_s_ns_per_byte, r.O_s_ns_per_byte);
    st(&raw.big_o_r_ns_per_byte, r.O_r_ns_per_byte);
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
        store_range(raw, r);
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
