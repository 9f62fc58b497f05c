//! Test code written against the ABI 1.0 API of the `netgauge` crate only,
//! so that it compiles both here and in the 1.0 probe program that
//! `compat.rs` builds from the 1.0 sources (it copies this file there): the
//! entries both sides write and the lines both readers' answers are
//! printed as come from this one text.

use netgauge::{flags, EntryData, Params, RangeData, Reader};

/// The ABI 1.0 fields of an entry, every number derived from `k`, so a
/// reader can tell whether all fields of what it read come from the same
/// publish (`derived_k` checks a lookup against it).
pub fn derived_entry_1_0(peer: &str, transport: &str, k: u64) -> EntryData {
    let x = k as f64;
    EntryData {
        peer: peer.to_string(),
        transport: transport.to_string(),
        ranges: (0..4).map(|r| derived_range(k, r)).collect(),
        eel_ns: x + 1.0,
        L_ns: x + 2.0,
        S_bytes: Some(k + 3),
        f: Some((k % 1000) as u32 + 1),
        o_min_ns: x + 4.0,
        o_max_ns: x + 5.0,
        g_f_ns: x + 6.0,
        curve: (0..8)
            .map(|p| (p + 1, x + 7.0 + p as f64, x + 8.0 + p as f64))
            .collect(),
        ci95: vec![
            ("L".into(), x - 1.0, x + 9.0),
            ("G".into(), x - 2.0, x + 10.0),
        ],
        samples: k + 11,
        probe_bytes: k + 12,
        measured_unix_ns: k + 13,
        flags: flags::VALID,
        ..Default::default()
    }
}

/// Range `r` of [`derived_entry_1_0`]: [1000 r, 1000 r + 999], the values
/// derived from `k` and `r`.
pub fn derived_range(k: u64, r: u64) -> RangeData {
    let x = k as f64;
    RangeData {
        from_bytes: r * 1000,
        to_bytes: r * 1000 + 999,
        g_ns: x + 10.0 + r as f64,
        G_ns_per_byte: x + 20.0 + r as f64,
        o_s_ns: x + 30.0 + r as f64,
        o_r_ns: x + 40.0 + r as f64,
        O_s_ns_per_byte: x + 50.0 + r as f64,
        O_r_ns_per_byte: x + 60.0 + r as f64,
    }
}

/// Every ABI 1.0 field of a lookup's answer, each number in Rust's
/// round-trip form.
pub fn params_line(p: &Params) -> String {
    format!(
        "eel={:?} L={:?} o_s={:?} o_r={:?} g={:?} G={:?} O_s={:?} O_r={:?} o_min={:?} o_max={:?} g_f={:?} S={} from={} to={} measured={} samples={} f={} flags={:#x}",
        p.eel_ns, p.L_ns, p.o_s_ns, p.o_r_ns, p.g_ns, p.G_ns_per_byte, p.O_s_ns_per_byte,
        p.O_r_ns_per_byte, p.o_min_ns, p.o_max_ns, p.g_f_ns, p.S_bytes, p.range_from_bytes,
        p.range_to_bytes, p.measured_unix_ns, p.samples, p.f, p.flags
    )
}

/// Every ABI 1.0 field of an entry of a snapshot.
pub fn entry_line(e: &EntryData) -> String {
    format!(
        "{} {} flags={:#x} ranges={:?} eel={:?} L={:?} S={:?} f={:?} o_min={:?} o_max={:?} g_f={:?} curve={:?} ci95={:?} samples={} probe_bytes={} measured={}",
        e.peer, e.transport, e.flags, e.ranges, e.eel_ns, e.L_ns, e.S_bytes, e.f, e.o_min_ns,
        e.o_max_ns, e.g_f_ns, e.curve, e.ci95, e.samples, e.probe_bytes, e.measured_unix_ns
    )
}

/// What `r` answers through the ABI 1.0 functions (info, lookup, index,
/// lookup_index, snapshot) to each (peer, transport, size) of `queries`,
/// one line per answer.
pub fn answers_1_0(r: &Reader, queries: &[(&str, &str, u64)]) -> String {
    let i = r.info().unwrap();
    let mut s = format!(
        "info major={} minor={} caps={:#x} capacity={} count={} node={} clock={} gen={}\n",
        i.abi_major,
        i.abi_minor,
        i.capabilities,
        i.capacity_entries,
        i.entry_count,
        i.node_name,
        i.clock_desc,
        i.generation
    );
    for &(p, t, n) in queries {
        match r.lookup(p, t, n) {
            Ok(v) => s += &format!("lookup {p} {t} {n} {}\n", params_line(&v)),
            Err(e) => s += &format!("lookup {p} {t} {n} err {e}\n"),
        }
        match r.index(p, t) {
            Some(i) => match r.lookup_index(i, n) {
                Ok(v) => s += &format!("index {p} {t} {n} {i} {}\n", params_line(&v)),
                Err(e) => s += &format!("index {p} {t} {n} {i} err {e}\n"),
            },
            None => s += &format!("index {p} {t} {n} none\n"),
        }
    }
    for e in r.snapshot().unwrap() {
        s += &format!("entry {}\n", entry_line(&e));
    }
    s
}
