//! Helpers shared by the integration tests.
#![allow(dead_code)]

use netgauge::capi::{ng_open, ng_set_stale_after_ns, NgReader};
use netgauge::{
    flags, Bandwidth, EntryExt, EntryExtData, Estimate, Field, Identification, Instability,
    LatencyPercentiles, Overlap, RangeData, RangeField, Reason, Regime, Status,
};
use netgauge::{EntryData, Scheme, TransportExt};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

mod abi10;
pub use abi10::*;

/// Runs `cmd` and asserts that it succeeded (its status, stdout and stderr
/// as the message if not; `what` names it); returns its output.
pub fn run(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A reader of `path` through the C ABI (`ng_open`, asserted to succeed),
/// with its heartbeat threshold set to `stale_after_ns`; the caller closes
/// it with `ng_close`.
pub fn c_reader(path: &std::path::Path, stale_after_ns: u64) -> *mut NgReader {
    let path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    let r = unsafe { ng_open(path.as_ptr()) };
    assert!(!r.is_null(), "ng_open({path:?})");
    // SAFETY: r is a live reader, not yet shared.
    unsafe { ng_set_stale_after_ns(r, stale_after_ns) };
    r
}

/// `count` peer names `<prefix>000`, `<prefix>001`, … as C strings.
pub fn c_names(prefix: &str, count: usize) -> Vec<std::ffi::CString> {
    (0..count)
        .map(|i| std::ffi::CString::new(format!("{prefix}{i:03}")).unwrap())
        .collect()
}

/// The directory holding the libnetgauge.{so,a} cargo built with this test.
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    // deps/ holds the copy built with this test; target/<profile>/ may hold
    // an older uplifted one.
    for d in [deps, deps.parent().unwrap()] {
        if d.join("libnetgauge.so").is_file() && d.join("libnetgauge.a").is_file() {
            return d.to_path_buf();
        }
    }
    panic!("libnetgauge.so / .a not found next to {}", exe.display());
}

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
        // The writer's lock file beside it.
        let mut lock = self.0.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}

/// An entry whose every numeric field is derived from `k`, so a reader can
/// tell whether all fields of what it read come from the same publish: the
/// 1.0 fields of [`derived_entry_1_0`] and the 1.1 part of [`derived_ext`].
pub fn derived_entry(peer: &str, transport: &str, k: u64) -> EntryData {
    EntryData {
        ext: derived_ext(k),
        ..derived_entry_1_0(peer, transport, k)
    }
}

/// The ABI 1.1 part of [`derived_entry`]: every number derived from `k`.
pub fn derived_ext(k: u64) -> EntryExtData {
    let x = k as f64;
    let mut ident = Identification::default();
    for f in Field::ALL {
        ident.set(f, Status::Identified);
    }
    ident.set_all_ranges(4, RangeField::Gap, Status::Identified);
    ident.set_all_ranges(4, RangeField::GapPerByte, Status::Identified);
    EntryExtData {
        ident,
        checked_unix_ns: k + 14,
        changed_unix_ns: k + 15,
        instability: Instability::None,
        bandwidth: Some(
            Bandwidth::sustained(Estimate::new(x + 70.0, x + 69.0, x + 71.0), Some(3)).with_burst(
                Regime::TokenBucket,
                Estimate::new(x + 72.0, x + 71.5, x + 72.5),
                k + 16,
            ),
        ),
        latency: (0..8u64)
            .map(|i| {
                let b = x + 80.0 + 10.0 * i as f64;
                LatencyPercentiles {
                    size_bytes: 1 << i,
                    samples: k + 17 + i,
                    min_ns: b,
                    p50_ns: b + 1.0,
                    p90_ns: b + 2.0,
                    p99_ns: b + 3.0,
                    p999_ns: b + 4.0,
                    max_ns: b + 5.0,
                }
            })
            .collect(),
        overlap: (0..4)
            .map(|r| Overlap {
                send: Estimate::new(x + 90.0 + r as f64, x, x + 200.0),
                recv: Estimate::new(x + 95.0 + r as f64, x, x + 200.0),
            })
            .collect(),
    }
}

/// Checks an extension read back against [`derived_ext`]: the k it was
/// derived from, or None if any field disagrees (a torn read). Allocates
/// nothing (it runs under the seccomp filter).
pub fn derived_ext_k(e: &EntryExt) -> Option<u64> {
    use netgauge::ext::{EXT_BANDWIDTH, EXT_LATENCY, EXT_OVERLAP, EXT_V11};
    let k = e.checked_unix_ns.checked_sub(14)?;
    let x = k as f64;
    let b = e.bandwidth()?;
    // Every entry-level field identified; g and G of the 4 ranges.
    let ident_ok = e.ident.entry == 0x1_1111_1111
        && e.ident.range[..4].iter().all(|&w| w == 0x11)
        && e.ident.range[4..].iter().all(|&w| w == 0);
    let latency_ok = e.latency().len() == 8
        && e.latency().iter().enumerate().all(|(i, l)| {
            let b = x + 80.0 + 10.0 * i as f64;
            l.size_bytes == 1 << i
                && l.samples == k + 17 + i as u64
                && [l.min_ns, l.p50_ns, l.p90_ns, l.p99_ns, l.p999_ns, l.max_ns]
                    == [b, b + 1.0, b + 2.0, b + 3.0, b + 4.0, b + 5.0]
        });
    let overlap_ok = e.overlap().len() == 4
        && e.overlap().iter().enumerate().all(|(r, o)| {
            o.send == Estimate::new(x + 90.0 + r as f64, x, x + 200.0)
                && o.recv == Estimate::new(x + 95.0 + r as f64, x, x + 200.0)
        });
    let ok = e.present == EXT_V11 | EXT_BANDWIDTH | EXT_LATENCY | EXT_OVERLAP
        && e.changed_unix_ns == k + 15
        && e.instability == 0
        && ident_ok
        && b.sustained_G_ns_per_byte == Estimate::new(x + 70.0, x + 69.0, x + 71.0)
        && b.burst_G_ns_per_byte == Estimate::new(x + 72.0, x + 71.5, x + 72.5)
        && b.burst_bytes == k + 16
        && b.regime == Regime::TokenBucket as u32
        && b.range_index == 3
        && latency_ok
        && overlap_ok;
    ok.then_some(k)
}

/// A realistic ABI 1.1 entry: [`sample_entry`] plus statuses (S not
/// applicable, the second range's g negative), a token-bucket bandwidth,
/// three latency sizes and overlap for both ranges.
pub fn sample_entry_ext(peer: &str, transport: &str) -> EntryData {
    let mut e = sample_entry(peer, transport);
    let id = &mut e.ext.ident;
    id.set(Field::Eel, Status::Identified);
    id.set(Field::L, Status::Identified);
    id.not_identified(Field::S, Reason::NotApplicable);
    id.set(Field::SustainedG, Status::Identified);
    id.set(Field::BurstG, Status::Identified);
    id.set_all_ranges(2, RangeField::GapPerByte, Status::Identified);
    id.set_range(0, RangeField::Gap, Status::Identified);
    id.not_identified_range(1, RangeField::Gap, Reason::Negative);
    id.set_all_ranges(2, RangeField::OverlapSend, Status::Identified);
    id.set_all_ranges(2, RangeField::OverlapRecv, Status::Identified);
    e.ext.checked_unix_ns = 1_700_000_060_000_000_000;
    e.ext.bandwidth = Some(
        Bandwidth::sustained(Estimate::new(8.6, 8.4, 8.8), Some(1)).with_burst(
            Regime::TokenBucket,
            Estimate::new(0.55, 0.5, 0.6),
            32 * 1024,
        ),
    );
    e.ext.latency = [1u64, 64, 1024]
        .iter()
        .enumerate()
        .map(|(i, &s)| LatencyPercentiles {
            size_bytes: s,
            samples: 1000 + i as u64,
            min_ns: 1400.0 + i as f64,
            p50_ns: 1500.0,
            p90_ns: 1600.0,
            p99_ns: 4000.0,
            p999_ns: 40_000.0,
            max_ns: 90_000.0,
        })
        .collect();
    e.ext.overlap = vec![
        Overlap {
            send: Estimate::new(0.6, 0.55, 0.65),
            recv: Estimate::new(0.1, 0.05, 0.15),
        },
        Overlap {
            send: Estimate::new(0.9, 0.85, 0.95),
            recv: Estimate::new(0.0, 0.0, 0.05),
        },
    ];
    e
}

/// A per-transport record: outgoing and incoming penalties for k = 1..=5
/// (k flows share one link: k with ±3 %), mixed not measured, a sharing
/// fit, a bisection result.
pub fn sample_transport_ext(seed: f64) -> TransportExt {
    let mut t = TransportExt::default();
    let p: Vec<Estimate> = (1..=5)
        .map(|k| {
            let v = k as f64 + seed;
            Estimate::new(v, v * 0.97, v * 1.03)
        })
        .collect();
    t.set_penalties(Scheme::Outgoing, &p, Status::Identified)
        .unwrap();
    t.set_penalties(Scheme::Incoming, &p[..4], Status::Identified)
        .unwrap();
    t.set_status(
        netgauge::TransportField::PenaltyMixed,
        Status::NotIdentified(Reason::NotMeasured),
    );
    t.contention_unix_ns = 1_700_000_100_000_000_000;
    t.set_sharing(
        (Estimate::new(0.75, 0.7, 0.8), Status::Identified),
        (Estimate::new(0.115, 0.1, 0.13), Status::Identified),
        (
            Estimate::new(0.036, -0.01, 0.08),
            Status::NotIdentified(Reason::CrossesZero),
        ),
    );
    t.set_bisection(
        netgauge::Bisection {
            min_bytes_per_s: 1.0e8 + seed,
            median_bytes_per_s: 1.2e8,
            mean_bytes_per_s: 1.15e8,
            max_bytes_per_s: 1.25e8,
            nodes: 16,
            rounds: 10,
            msg_bytes: 1 << 20,
            measured_unix_ns: 1_700_000_200_000_000_000,
        },
        Status::Identified,
    );
    t
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
        ext: EntryExtData::default(),
    }
}
