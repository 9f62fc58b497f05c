//! Helpers shared by the integration tests.
#![allow(dead_code)]

use netgauge::{flags, EntryData, RangeData};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A unique scratch path in /dev/shm (falls back to the temp dir), removed
/// on drop.
pub struct TmpPath(pub PathBuf);

impl TmpPath {
    pub fn new(tag: &str) -> TmpPath {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        TmpPath(base.join(format!("ngtest-{tag}-{}-{n}", std::process::id())))
    }
}

impl Drop for TmpPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An entry whose every numeric field is derived from `k`, so a reader can
/// tell whether all fields of what it read come from the same publish.
pub fn derived_entry(peer: &str, transport: &str, k: u64) -> EntryData {
    let x = k as f64;
    EntryData {
        peer: peer.to_string(),
        transport: transport.to_string(),
        ranges: (0..4)
            .map(|r| RangeData {
                from_bytes: r * 1000,
                to_bytes: r * 1000 + 999,
                g_ns: x + 10.0 + r as f64,
                G_ns_per_byte: x + 20.0 + r as f64,
                o_s_ns: x + 30.0 + r as f64,
                o_r_ns: x + 40.0 + r as f64,
                O_s_ns_per_byte: x + 50.0 + r as f64,
                O_r_ns_per_byte: x + 60.0 + r as f64,
            })
            .collect(),
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
    }
}

/// Checks a lookup result against [`derived_entry`] for range `r`:
/// returns the k it was derived from, or None if the fields disagree.
#[allow(non_snake_case)]
pub fn derived_k(p: &netgauge::Params, r: u64) -> Option<u64> {
    let x = p.eel_ns - 1.0;
    let k = x as u64;
    let rf = r as f64;
    let ok = p.L_ns == x + 2.0
        && p.g_ns == x + 10.0 + rf
        && p.G_ns_per_byte == x + 20.0 + rf
        && p.o_s_ns == x + 30.0 + rf
        && p.o_r_ns == x + 40.0 + rf
        && p.O_s_ns_per_byte == x + 50.0 + rf
        && p.O_r_ns_per_byte == x + 60.0 + rf
        && p.o_min_ns == x + 4.0
        && p.o_max_ns == x + 5.0
        && p.g_f_ns == x + 6.0
        && p.S_bytes == k + 3
        && p.f == (k % 1000) as u32 + 1
        && p.samples == k + 11
        && p.measured_unix_ns == k + 13
        && p.range_from_bytes == r * 1000
        && p.range_to_bytes == r * 1000 + 999;
    ok.then_some(k)
}

/// A realistic entry (the numbers of a 2-range LogGPS fit).
pub fn sample_entry(peer: &str, transport: &str) -> EntryData {
    EntryData {
        peer: peer.into(),
        transport: transport.into(),
        ranges: vec![
            RangeData {
                from_bytes: 1,
                to_bytes: 8191,
                g_ns: 500.0,
                G_ns_per_byte: 0.1,
                o_s_ns: 300.0,
                o_r_ns: 250.0,
                O_s_ns_per_byte: 0.0,
                O_r_ns_per_byte: 0.0,
            },
            RangeData {
                from_bytes: 8192,
                to_bytes: 1 << 20,
                g_ns: 4000.0,
                G_ns_per_byte: 0.08,
                o_s_ns: 350.0,
                o_r_ns: 280.0,
                O_s_ns_per_byte: 0.002,
                O_r_ns_per_byte: 0.001,
            },
        ],
        eel_ns: 1500.0,
        L_ns: 950.0,
        S_bytes: Some(8192),
        f: Some(6),
        o_min_ns: 120.0,
        o_max_ns: 900.0,
        g_f_ns: 210.0,
        curve: vec![(1, 1020.0, 3000.0), (2, 570.0, 3400.0), (4, 345.0, 4100.0)],
        ci95: vec![("L".into(), 930.0, 970.0), ("G".into(), 0.095, 0.105)],
        samples: 4096,
        probe_bytes: 1 << 22,
        measured_unix_ns: 1_700_000_000_000_000_000,
        flags: flags::VALID,
    }
}
