//! The segment's ABI 1.1 tables: per-transport records (contention,
//! sharing, bisection) and the coverage-class map.

use core::sync::atomic::Ordering::Relaxed;

use super::ext::{known_statuses, load_est, store_est, TRANSPORT_FIELDS_MASK};
use super::*;
use crate::types::LookupError;

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
        if let Some(idx) = slot_index(v, hash, mapped)? {
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
