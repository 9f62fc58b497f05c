//! The ABI 1.1 block of an entry: statuses, bandwidth, latency
//! percentiles, overlap; read, encoded and checked.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::*;
use crate::types::{EntryData, LookupError};

#[inline]
pub(super) fn load_est(r: &EstimateRaw) -> Estimate {
    Estimate {
        value: f(&r.value),
        lo: f(&r.lo),
        hi: f(&r.hi),
    }
}

#[inline]
pub(super) fn store_est(r: &EstimateRaw, v: &Estimate) {
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
pub(super) const ENTRY_FIELDS_MASK: u64 = (1 << (4 * Field::ALL.len())) - 1;
pub(super) const RANGE_FIELDS_MASK: u64 = (1 << (4 * RangeField::ALL.len())) - 1;
pub(super) const TRANSPORT_FIELDS_MASK: u64 = (1 << (4 * TransportField::ALL.len())) - 1;

pub(super) fn known_statuses(word: u64, fields: usize) -> bool {
    (0..fields).all(|i| Status::from_code(((word >> (4 * i)) & 0xF) as u8).is_known())
}

/// A value the status says is identified must be a finite number.
pub(super) fn finite_if(s: Status, v: f64) -> bool {
    s != Status::Identified || v.is_finite()
}

/// An identified estimate must be a finite value inside a finite interval,
/// within [min, max].
pub(super) fn bracketed_if(s: Status, e: &Estimate, min: f64, max: f64) -> bool {
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
            // An identified G (ns per byte) lies in [0, ∞) with its interval.
            let g_ok = |f: Field, e: &Estimate| bracketed_if(id.get(f), e, 0.0, f64::INFINITY);
            if !g_ok(Field::SustainedG, &b.sustained_G_ns_per_byte)
                || (id.get(Field::SustainedG) == Status::Identified
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
                if !g_ok(Field::BurstG, &b.burst_G_ns_per_byte) {
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
