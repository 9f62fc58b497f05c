//! ns per lookup (index path, string path, Rust API and C ABI), reader
//! throughput while the writer republishes flat out, and the alternative a
//! user would otherwise use: re-reading and parsing a JSON file per lookup.
//! Then the same at cluster scale: a segment for 4096 peers × {rdma, udp}
//! plus 64 coverage classes × {rdma, udp, raw}, the 4096 peers mapped to
//! the classes, every entry carrying the ABI 1.1 blocks (and the ABI 1.2
//! hot-table records the index lookups read); lookups in a scattered order
//! over all 4096 peers, own entries and class fallback.
//!
//! Run: cargo bench -p netgauge-ffi --bench lookup
//! Plain measurement (no criterion): each figure is the best of 9 runs of
//! 10^6 lookups, timed with the thread's CPU clock so that time spent
//! descheduled on a shared machine does not count. The with-writer figures
//! are wall-clock throughput over 2 s.

use netgauge::capi::{
    ng_close, ng_get_entry_ext_index, ng_index, ng_index_or_class, ng_lookup, ng_lookup_index,
    ng_lookup_or_class, ng_open, ng_set_stale_after_ns, NgReader,
};
use netgauge::writer::SegmentOptions;
use netgauge::{
    flags, Bandwidth, EntryData, EntryExt, Estimate, Field, LatencyPercentiles, Params, RangeData,
    RangeField, Reader, Regime, SegmentWriter, Status,
};
use std::ffi::{c_int, CString};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PEERS: usize = 64;

/// Message sizes the lookups cycle through (every protocol range, and
/// sizes below and above them).
const SIZES: [u64; 8] = [8, 100, 1000, 5000, 70_000, 200_000, 1 << 20, 3];

/// The message size of lookup `i`.
fn size(i: u64) -> u64 {
    SIZES[(i & 7) as usize]
}

fn entry(peer: &str, transport: &str, k: u64) -> EntryData {
    let x = k as f64;
    EntryData {
        peer: peer.into(),
        transport: transport.into(),
        ranges: (0..4u64)
            .map(|r| RangeData {
                from_bytes: if r == 0 { 1 } else { 1 << (4 * r + 2) },
                to_bytes: (1 << (4 * r + 6)) - 1,
                g_ns: 500.0 + x,
                G_ns_per_byte: 0.1,
                o_s_ns: 300.0,
                o_r_ns: 250.0,
                O_s_ns_per_byte: 0.001,
                O_r_ns_per_byte: 0.001,
            })
            .collect(),
        eel_ns: 1500.0,
        L_ns: 950.0 + x,
        S_bytes: Some(8192),
        f: Some(6),
        o_min_ns: 120.0,
        o_max_ns: 900.0,
        g_f_ns: 210.0,
        curve: (1..=16)
            .map(|p| (p, 100.0 + p as f64, 1000.0 * p as f64))
            .collect(),
        ci95: vec![("L".into(), 930.0, 970.0), ("G".into(), 0.09, 0.11)],
        samples: 4096,
        probe_bytes: 1 << 20,
        measured_unix_ns: 1_700_000_000_000_000_000 + k,
        flags: flags::VALID,
        ext: Default::default(),
    }
}

fn peer(i: usize) -> String {
    format!("node{i:03}.cluster")
}

/// The time of `clock` (`clock_gettime`).
fn clock_now(clock: libc::clockid_t) -> libc::timespec {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts
}

/// This thread's CPU time in ns: on a shared, oversubscribed machine it
/// leaves out the time the thread spent descheduled.
fn thread_cpu_ns() -> u64 {
    let ts = clock_now(libc::CLOCK_THREAD_CPUTIME_ID);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Best-of-9 ns (thread CPU time) per operation of `op` over `n` iterations.
fn ns_per_op(n: u64, mut op: impl FnMut(u64)) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..9 {
        let t = thread_cpu_ns();
        for i in 0..n {
            op(i);
        }
        best = best.min((thread_cpu_ns() - t) as f64 / n as f64);
    }
    best
}

/// [`ns_per_op`] of a call whose result is kept alive (`black_box`) so the
/// call is not optimised away.
fn ns_per_call<T>(n: u64, mut call: impl FnMut(u64) -> T) -> f64 {
    ns_per_op(n, |i| {
        black_box(call(i));
    })
}

/// [`ns_per_op`] of a C call that writes into an out-value: `call(i, out)`
/// returns the call's code; code and out-value are kept alive
/// (`black_box`) so the call is not optimised away.
fn c_ns_per_op<T: Default>(n: u64, mut call: impl FnMut(u64, &mut T) -> c_int) -> f64 {
    let mut out = T::default();
    ns_per_op(n, |i| {
        let rc = call(i, &mut out);
        black_box((rc, &out));
    })
}

/// A C reader of `path` with a heartbeat threshold no run can reach; the
/// caller closes it with `ng_close`.
fn c_reader(path: &std::path::Path) -> *mut NgReader {
    let path = CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    let cr = unsafe { ng_open(path.as_ptr()) };
    assert!(!cr.is_null());
    // SAFETY: cr is live and not shared.
    unsafe { ng_set_stale_after_ns(cr, 3_600_000_000_000) };
    cr
}

fn json_of(entries: &[EntryData]) -> String {
    let mut s = String::from("{\"entries\":[");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let ranges: Vec<String> = e
            .ranges
            .iter()
            .map(|r| {
                format!(
                    "{{\"from_bytes\":{},\"to_bytes\":{},\"g_ns\":{},\"G_ns_per_byte\":{},\"o_s_ns\":{},\"o_r_ns\":{},\"O_s_ns_per_byte\":{},\"O_r_ns_per_byte\":{}}}",
                    r.from_bytes, r.to_bytes, r.g_ns, r.G_ns_per_byte, r.o_s_ns, r.o_r_ns, r.O_s_ns_per_byte, r.O_r_ns_per_byte
                )
            })
            .collect();
        let curve: Vec<String> = e
            .curve
            .iter()
            .map(|(p, o, r)| format!("[{p},{o},{r}]"))
            .collect();
        s.push_str(&format!(
            "{{\"peer\":\"{}\",\"transport\":\"{}\",\"eel_ns\":{},\"L_ns\":{},\"S_bytes\":{},\"f\":{},\"o_min_ns\":{},\"o_max_ns\":{},\"g_f_ns\":{},\"samples\":{},\"measured_unix_ns\":{},\"flags\":{},\"ranges\":[{}],\"curve\":[{}]}}",
            e.peer, e.transport, e.eel_ns, e.L_ns, e.S_bytes.unwrap(), e.f.unwrap(), e.o_min_ns, e.o_max_ns, e.g_f_ns, e.samples, e.measured_unix_ns, e.flags, ranges.join(","), curve.join(",")
        ));
    }
    s.push_str("]}");
    s
}

/// What a user would otherwise do: re-read the file, parse, search.
fn json_lookup(path: &std::path::Path, peer: &str, transport: &str, s: u64) -> Option<(f64, f64)> {
    let bytes = std::fs::read(path).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let e = v["entries"]
        .as_array()?
        .iter()
        .find(|e| e["peer"] == peer && e["transport"] == transport)?;
    let ranges = e["ranges"].as_array()?;
    let r = ranges
        .iter()
        .find(|r| r["to_bytes"].as_u64().is_some_and(|t| s <= t))
        .or(ranges.last())?;
    Some((e["L_ns"].as_f64()?, r["g_ns"].as_f64()?))
}

/// Prints a table of (operation, ns per lookup) under the header
/// `title`, the operations padded to `width`.
fn print_table(title: &str, width: usize, rows: &[(&str, f64)]) {
    println!("{title:<width$} {:>10}", "ns/lookup");
    for (name, ns) in rows {
        println!("{name:<width$} {ns:>10.1}");
    }
}

fn main() {
    // cargo passes --bench; nothing to parse.
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    let seg = std::path::PathBuf::from(format!("{dir}/ngbench-{}", std::process::id()));
    let json = std::path::PathBuf::from(format!("{dir}/ngbench-{}.json", std::process::id()));
    let mut w = SegmentWriter::create_or_open(&seg, 256, "bench-node", "tsc").unwrap();
    let mut all = Vec::new();
    for i in 0..PEERS {
        for t in ["rdma", "udp"] {
            let e = entry(&peer(i), t, i as u64);
            w.upsert(&e).unwrap();
            all.push(e);
        }
    }
    std::fs::write(&json, json_of(&all)).unwrap();
    let mut r = Reader::open(&seg).unwrap();
    r.set_stale_after_ns(3_600_000_000_000);
    let names: Vec<String> = (0..PEERS).map(peer).collect();
    let cnames: Vec<CString> = names
        .iter()
        .map(|n| CString::new(n.as_str()).unwrap())
        .collect();
    let n = 1_000_000u64;
    let pick = |i: u64| (i as usize) & (PEERS - 1);

    println!(
        "netgauge segment lookup benchmark ({} entries, capacity 256)",
        2 * PEERS
    );
    let idx: Vec<usize> = (0..PEERS)
        .map(|i| r.index(&names[i], "rdma").unwrap())
        .collect();
    let rust_index = ns_per_call(n, |i| r.lookup_index(idx[pick(i)], size(i)).unwrap());
    r.set_stale_after_ns(0);
    let rust_index_no_hb = ns_per_call(n, |i| r.lookup_index(idx[pick(i)], size(i)).unwrap());
    r.set_stale_after_ns(3_600_000_000_000);
    let coarse_clock = ns_per_call(n, |_| clock_now(libc::CLOCK_REALTIME_COARSE).tv_nsec);
    let rust_string = ns_per_call(n, |i| r.lookup(&names[pick(i)], "rdma", size(i)).unwrap());
    let rust_predict = ns_per_call(n, |i| r.predict_index_ns(idx[pick(i)], size(i)).unwrap());
    // Closed below.
    let cr = c_reader(&seg);
    let cidx: Vec<i32> = cnames
        .iter()
        // SAFETY: valid pointers.
        .map(|c| unsafe { ng_index(cr, c.as_ptr(), c"rdma".as_ptr()) })
        .collect();
    let c_index = c_ns_per_op(n, |i, out: &mut Params| {
        // SAFETY: valid pointers.
        unsafe { ng_lookup_index(cr, cidx[pick(i)], size(i), out) }
    });
    let c_string = c_ns_per_op(n, |i, out: &mut Params| {
        // SAFETY: valid pointers.
        unsafe { ng_lookup(cr, cnames[pick(i)].as_ptr(), c"rdma".as_ptr(), size(i), out) }
    });
    let json_ns = ns_per_call(2000, |i| {
        json_lookup(&json, &names[pick(i)], "rdma", size(i)).unwrap()
    });

    print_table(
        "operation",
        44,
        &[
            ("Rust  lookup_index (index path)", rust_index),
            ("Rust  lookup_index, heartbeat rule off", rust_index_no_hb),
            ("      (CLOCK_REALTIME_COARSE read alone)", coarse_clock),
            ("Rust  lookup (string path)", rust_string),
            ("Rust  predict_index_ns", rust_predict),
            ("C     ng_lookup_index (index path)", c_index),
            ("C     ng_lookup (string path)", c_string),
            ("JSON  re-read + parse file per lookup", json_ns),
        ],
    );

    // Throughput while the writer republishes as fast as it can.
    let stop = Arc::new(AtomicBool::new(false));
    let publishes = Arc::new(AtomicU64::new(0));
    let (stop_w, pubs_w) = (stop.clone(), publishes.clone());
    let writer = std::thread::spawn(move || {
        let mut k = 0u64;
        while !stop_w.load(Ordering::Relaxed) {
            let i = (k as usize) % PEERS;
            w.upsert(&entry(&peer(i), "rdma", k)).unwrap();
            k += 1;
            pubs_w.store(k, Ordering::Relaxed);
        }
        w
    });
    let window = Duration::from_secs(2);
    for (label, string) in [("index", false), ("string", true)] {
        let t = Instant::now();
        let p0 = publishes.load(Ordering::Relaxed);
        let (mut ok, mut busy, mut i) = (0u64, 0u64, 0u64);
        while t.elapsed() < window {
            for _ in 0..1000 {
                let k = pick(i);
                let res = if string {
                    r.lookup(&names[k], "rdma", size(i))
                } else {
                    r.lookup_index(idx[k], size(i))
                };
                match res {
                    Ok(v) => {
                        black_box(v);
                        ok += 1
                    }
                    Err(_) => busy += 1,
                }
                i += 1;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        let pubs = publishes.load(Ordering::Relaxed) - p0;
        println!(
            "with active writer ({label} path): {:.1} M lookups/s, {:.1} ns/lookup, {} EAGAIN, writer {:.0} publishes/s",
            ok as f64 / secs / 1e6,
            secs * 1e9 / (ok + busy) as f64,
            busy,
            pubs as f64 / secs
        );
    }
    stop.store(true, Ordering::Relaxed);
    drop(writer.join().unwrap());
    // SAFETY: closing the reader opened above.
    unsafe { ng_close(cr) };
    let _ = std::fs::remove_file(&seg);
    let _ = std::fs::remove_file(&json);
    println!(
        "goal: <= 20 ns per index lookup, <= 100 ns per string lookup; JSON re-read is {:.0}x slower than the string path",
        json_ns / rust_string
    );
    println!();
    scale(dir);
}

/// Peers, classes and the order lookups visit them in at scale.
const SCALE_PEERS: usize = 4096;
const SCALE_CLASSES: usize = 64;

fn scale_peer(i: usize) -> String {
    format!("node{i:04}.cluster")
}

/// A 1.1 entry: [`entry`] plus statuses, bandwidth, 4 latency sizes.
fn entry_ext(peer: &str, transport: &str, k: u64) -> EntryData {
    let mut e = entry(peer, transport, k);
    let id = &mut e.ext.ident;
    for f in [Field::Eel, Field::L, Field::SustainedG] {
        id.set(f, Status::Identified);
    }
    for f in [RangeField::Gap, RangeField::GapPerByte] {
        id.set_all_ranges(4, f, Status::Identified);
    }
    e.ext.checked_unix_ns = 1_700_000_000_000_000_000 + k;
    e.ext.bandwidth = Some(Bandwidth::sustained(
        Estimate::new(0.1, 0.099, 0.101),
        Some(3),
    ));
    e.ext.latency = (0..4)
        .map(|i| LatencyPercentiles {
            size_bytes: 1 << (4 * i),
            samples: 1000,
            min_ns: 1400.0,
            p50_ns: 1500.0,
            p90_ns: 1600.0,
            p99_ns: 2000.0,
            p999_ns: 5000.0,
            max_ns: 9000.0,
        })
        .collect();
    if k % 2 == 1 {
        let b = e.ext.bandwidth.unwrap();
        e.ext.bandwidth = Some(b.with_burst(
            Regime::TokenBucket,
            Estimate::new(0.01, 0.009, 0.011),
            1 << 15,
        ));
    }
    e
}

/// The cluster-scale figures: 4096 peers, class fallback, 1.1 lookups.
fn scale(dir: &str) {
    let seg = std::path::PathBuf::from(format!("{dir}/ngbench-scale-{}", std::process::id()));
    let capacity = SCALE_PEERS * 2 + SCALE_CLASSES * 3;
    let opts = SegmentOptions {
        capacity_entries: capacity,
        class_capacity: SCALE_CLASSES,
        map_capacity: SCALE_PEERS,
    };
    let mut w = SegmentWriter::create_or_open_with(&seg, &opts, "bench-node", "tsc").unwrap();
    let names: Vec<String> = (0..SCALE_PEERS).map(scale_peer).collect();
    let classes: Vec<String> = (0..SCALE_CLASSES).map(|c| format!("@leaf{c:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        for t in ["rdma", "udp"] {
            w.upsert(&entry_ext(n, t, i as u64)).unwrap();
        }
    }
    for (c, name) in classes.iter().enumerate() {
        for t in ["rdma", "udp", "raw"] {
            w.upsert(&entry_ext(name, t, 10_000 + c as u64)).unwrap();
        }
    }
    w.set_peer_classes(names.iter().enumerate().map(|(i, n)| {
        (
            n.as_str(),
            classes[i * SCALE_CLASSES / SCALE_PEERS].as_str(),
        )
    }))
    .unwrap();
    let bytes = std::fs::metadata(&seg).unwrap().len();
    let mut r = Reader::open(&seg).unwrap();
    r.set_stale_after_ns(3_600_000_000_000);
    // A scattered visiting order: a multiplicative permutation of 0..4096.
    let order: Vec<usize> = (0..SCALE_PEERS)
        .map(|i| (i * 2_654_435_761) % SCALE_PEERS)
        .collect();
    let idx: Vec<usize> = order
        .iter()
        .map(|&p| r.index(&names[p], "rdma").unwrap())
        .collect();
    let class_idx: Vec<usize> = order
        .iter()
        .map(|&p| r.index_or_class(&names[p], "raw").unwrap())
        .collect();
    let onames: Vec<&str> = order.iter().map(|&p| names[p].as_str()).collect();
    let n = 1_000_000u64;
    let pick = |i: u64| (i as usize) & (SCALE_PEERS - 1);

    let mut rows: Vec<(&str, f64)> = vec![
        (
            "Rust  lookup_index (own entry)",
            ns_per_call(n, |i| r.lookup_index(idx[pick(i)], size(i)).unwrap()),
        ),
        // A rank's partners: 64 peers of the 4096 (scattered over the segment).
        (
            "Rust  lookup_index (own entry, 64 of the peers)",
            ns_per_call(n, |i| {
                r.lookup_index(idx[(i as usize) & 63], size(i)).unwrap()
            }),
        ),
        (
            "Rust  lookup_index (class entry, from index_or_class)",
            ns_per_call(n, |i| r.lookup_index(class_idx[pick(i)], size(i)).unwrap()),
        ),
        (
            "Rust  lookup_index_status",
            ns_per_call(n, |i| r.lookup_index_status(idx[pick(i)], size(i)).unwrap()),
        ),
        (
            "Rust  lookup (string, own entry)",
            ns_per_call(n, |i| r.lookup(onames[pick(i)], "rdma", size(i)).unwrap()),
        ),
        (
            "Rust  lookup_or_class (string, own entry)",
            ns_per_call(n, |i| {
                r.lookup_or_class(onames[pick(i)], "udp", size(i)).unwrap()
            }),
        ),
        (
            "Rust  lookup_or_class (string, class fallback)",
            ns_per_call(n, |i| {
                r.lookup_or_class(onames[pick(i)], "raw", size(i)).unwrap()
            }),
        ),
        (
            "Rust  lookup_status (string, class fallback)",
            ns_per_call(n, |i| {
                r.lookup_status(onames[pick(i)], "raw", size(i)).unwrap()
            }),
        ),
        (
            "Rust  index_or_class (string, class fallback)",
            ns_per_call(n, |i| r.index_or_class(onames[pick(i)], "raw").unwrap()),
        ),
        (
            "Rust  entry_ext_index (1064-byte copy)",
            ns_per_call(n, |i| r.entry_ext_index(idx[pick(i)]).unwrap()),
        ),
    ];
    // Closed below.
    let cr = c_reader(&seg);
    let cnames: Vec<CString> = onames.iter().map(|n| CString::new(*n).unwrap()).collect();
    let cidx: Vec<i32> = cnames
        .iter()
        // SAFETY: valid pointers.
        .map(|c| unsafe { ng_index(cr, c.as_ptr(), c"rdma".as_ptr()) })
        .collect();
    let cclass: Vec<i32> = cnames
        .iter()
        // SAFETY: valid pointers.
        .map(|c| unsafe { ng_index_or_class(cr, c.as_ptr(), c"raw".as_ptr()) })
        .collect();
    rows.extend([
        (
            "C     ng_lookup_index (own entry)",
            c_ns_per_op(n, |i, out: &mut Params| {
                // SAFETY: valid pointers.
                unsafe { ng_lookup_index(cr, cidx[pick(i)], size(i), out) }
            }),
        ),
        (
            "C     ng_lookup_index (own entry, 64 of the peers)",
            c_ns_per_op(n, |i, out: &mut Params| {
                // SAFETY: valid pointers.
                unsafe { ng_lookup_index(cr, cidx[(i as usize) & 63], size(i), out) }
            }),
        ),
        (
            "C     ng_lookup_index (class entry)",
            c_ns_per_op(n, |i, out: &mut Params| {
                // SAFETY: valid pointers.
                unsafe { ng_lookup_index(cr, cclass[pick(i)], size(i), out) }
            }),
        ),
        (
            "C     ng_lookup (string, own entry)",
            c_ns_per_op(n, |i, out: &mut Params| {
                // SAFETY: valid pointers.
                unsafe { ng_lookup(cr, cnames[pick(i)].as_ptr(), c"rdma".as_ptr(), size(i), out) }
            }),
        ),
        (
            "C     ng_lookup_or_class (string, class fallback)",
            c_ns_per_op(n, |i, out: &mut Params| {
                // SAFETY: valid pointers.
                unsafe {
                    ng_lookup_or_class(cr, cnames[pick(i)].as_ptr(), c"raw".as_ptr(), size(i), out)
                }
            }),
        ),
        (
            "C     ng_get_entry_ext_index",
            c_ns_per_op(n, |i, out: &mut EntryExt| {
                // SAFETY: valid pointers.
                unsafe { ng_get_entry_ext_index(cr, cidx[pick(i)], out) }
            }),
        ),
    ]);
    // SAFETY: closing the reader opened above.
    unsafe { ng_close(cr) };

    let layout = netgauge::layout::Layout::new(capacity).unwrap();
    println!(
        "cluster scale: {} entries ({SCALE_PEERS} peers x 2 transports + {SCALE_CLASSES} classes x 3), \
         {SCALE_PEERS} peers mapped, entry {} B, hot-table record {} B, segment file {:.1} MiB",
        capacity,
        layout.entry_bytes,
        layout.hot.map_or(0, |h| h.record_bytes),
        bytes as f64 / (1 << 20) as f64
    );
    print_table("operation (heartbeat rule on)", 52, &rows);
    drop(w);
    let _ = std::fs::remove_file(&seg);
}
