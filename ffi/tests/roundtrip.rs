//! Writer → reader round trips, lookup semantics, staleness, re-open, C ABI.

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::{flags, LookupError, Params, Reader, ReaderError, SegmentError, SegmentWriter};
use std::ffi::{CStr, CString};
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::PermissionsExt;

fn writer(p: &TmpPath, cap: usize) -> SegmentWriter {
    SegmentWriter::create_or_open(&p.0, cap, "node001", "tsc 2.9 GHz invariant, lfence;rdtsc")
        .unwrap()
}

#[test]
fn upsert_then_lookup_every_field() {
    let p = TmpPath::new("rt");
    let mut w = writer(&p, 16);
    let e = sample_entry("node002", "rdma");
    assert_eq!(w.upsert(&e).unwrap(), 0);
    assert_eq!(w.upsert(&sample_entry("node003", "udp")).unwrap(), 1);
    assert_eq!(
        std::fs::metadata(&p.0).unwrap().permissions().mode() & 0o777,
        0o644
    );

    let r = Reader::open(&p.0).unwrap();
    assert_eq!(r.entry_count().unwrap(), 2);
    // Small message: range 0.
    let v = r.lookup("node002", "rdma", 100).unwrap();
    assert_eq!(
        v,
        Params {
            eel_ns: 1500.0,
            L_ns: 950.0,
            o_s_ns: 300.0,
            o_r_ns: 250.0,
            g_ns: 500.0,
            G_ns_per_byte: 0.1,
            O_s_ns_per_byte: 0.0,
            O_r_ns_per_byte: 0.0,
            o_min_ns: 120.0,
            o_max_ns: 900.0,
            g_f_ns: 210.0,
            S_bytes: 8192,
            range_from_bytes: 1,
            range_to_bytes: 8191,
            measured_unix_ns: 1_700_000_000_000_000_000,
            samples: 4096,
            f: 6,
            flags: flags::VALID | flags::HAS_S | flags::HAS_LOGFP | flags::HAS_LOGGPS,
        }
    );
    // Range boundaries.
    assert_eq!(
        r.lookup("node002", "rdma", 8191).unwrap().range_to_bytes,
        8191
    );
    let big = r.lookup("node002", "rdma", 8192).unwrap();
    assert_eq!(big.range_from_bytes, 8192);
    assert_eq!(big.O_s_ns_per_byte, 0.002);
    // Outside every range: nearest range, flagged.
    let huge = r.lookup("node002", "rdma", 1 << 30).unwrap();
    assert_eq!(huge.range_from_bytes, 8192);
    assert_ne!(huge.flags & flags::EXTRAPOLATED, 0);
    let zero = r.lookup("node002", "rdma", 0).unwrap();
    assert_eq!(zero.range_from_bytes, 1);
    assert_ne!(zero.flags & flags::EXTRAPOLATED, 0);

    // Prediction: o_s + L + (s−1)G + o_r, plus 2·EEL beyond S, plus LogGPS O.
    assert_eq!(
        r.predict_ns("node002", "rdma", 1).unwrap(),
        300.0 + 950.0 + 250.0
    );
    let s = 101u64;
    assert!(
        (r.predict_ns("node002", "rdma", s).unwrap() - (300.0 + 950.0 + 100.0 * 0.1 + 250.0)).abs()
            < 1e-9
    );
    let s = 10_001u64;
    let want = 350.0
        + 10_000.0 * 0.002
        + 950.0
        + 10_000.0 * 0.08
        + 280.0
        + 10_000.0 * 0.001
        + 2.0 * 1500.0;
    assert!((r.predict_ns("node002", "rdma", s).unwrap() - want).abs() < 1e-9);

    // Index path agrees with the string path.
    let i = r.index("node003", "udp").unwrap();
    assert_eq!(i, 1);
    assert_eq!(
        r.lookup_index(i, 100).unwrap(),
        r.lookup("node003", "udp", 100).unwrap()
    );
    assert_eq!(r.index("node003", "rdma"), None);
    assert_eq!(r.lookup("node004", "rdma", 1), Err(LookupError::NotFound));
    assert_eq!(r.lookup("node002", "sim", 1), Err(LookupError::NotFound));
    assert_eq!(r.lookup("", "sim", 1), Err(LookupError::NotFound));
    assert_eq!(
        r.lookup(&"x".repeat(200), "sim", 1),
        Err(LookupError::NotFound)
    );
    assert_eq!(r.lookup_index(2, 1), Err(LookupError::NotFound));
    assert_eq!(r.lookup_index(usize::MAX, 1), Err(LookupError::NotFound));

    // Full entries read back identically, through the reader and the writer.
    assert_eq!(r.snapshot_entry(0).unwrap().curve, e.curve);
    let mut want_e = e.clone();
    want_e.flags = v.flags;
    assert_eq!(r.snapshot_entry(0).unwrap(), want_e);
    assert_eq!(w.entries()[0], want_e);
    assert_eq!(r.snapshot().unwrap().len(), 2);

    let info = r.info().unwrap();
    assert_eq!(info.node_name, "node001");
    assert_eq!(info.clock_desc, "tsc 2.9 GHz invariant, lfence;rdtsc");
    assert_eq!(info.generation, w.generation());
    assert_eq!(info.writer_pid, std::process::id());
    assert_eq!(info.entry_count, 2);
    assert_eq!(info.capacity_entries, 16);
    assert_eq!(info.seq, 2);
    assert!(r.heartbeat_age_ns().unwrap() < 60_000_000_000);
}

#[test]
fn replace_keeps_index_and_full_is_an_error() {
    let p = TmpPath::new("full");
    let mut w = writer(&p, 2);
    let r = Reader::open(&p.0).unwrap();
    assert_eq!(w.upsert(&derived_entry("a", "udp", 1)).unwrap(), 0);
    assert_eq!(w.upsert(&derived_entry("b", "udp", 2)).unwrap(), 1);
    assert_eq!(w.upsert(&derived_entry("a", "udp", 7)).unwrap(), 0);
    assert_eq!(derived_k(&r.lookup("a", "udp", 5).unwrap(), 0), Some(7));
    assert_eq!(derived_k(&r.lookup("b", "udp", 2500).unwrap(), 2), Some(2));
    assert_eq!(
        w.upsert(&derived_entry("c", "udp", 3)),
        Err(SegmentError::Full { capacity: 2 })
    );
    assert_eq!(r.entry_count().unwrap(), 2);
}

#[test]
fn bad_entries_are_rejected() {
    let p = TmpPath::new("bad");
    let mut w = writer(&p, 4);
    let ok = sample_entry("n", "udp");
    let mut e = ok.clone();
    e.peer = "p".repeat(64);
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.transport = "t".repeat(16);
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.ranges.clear();
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.ranges.swap(0, 1);
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.curve = vec![(1, 0.0, 0.0); 33];
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.ci95 = vec![("x".repeat(32), 0.0, 1.0)];
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    e = ok.clone();
    e.peer = "a\0b".into();
    assert!(matches!(w.upsert(&e), Err(SegmentError::BadEntry(_))));
    // Longest names work.
    e = ok.clone();
    e.peer = "p".repeat(63);
    e.transport = "t".repeat(15);
    e.ci95 = vec![("c".repeat(31), 0.0, 1.0); 16];
    e.ranges = (0..8)
        .map(|i| netgauge::RangeData {
            from_bytes: i * 10,
            to_bytes: i * 10 + 9,
            ..Default::default()
        })
        .collect();
    e.curve = vec![(3, 1.0, 2.0); 32];
    w.upsert(&e).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let back = r.snapshot_entry(0).unwrap();
    assert_eq!(back.peer, e.peer);
    assert_eq!(back.ci95, e.ci95);
    assert_eq!(back.ranges, e.ranges);
    assert_eq!(
        r.lookup(&e.peer, &e.transport, 75)
            .unwrap()
            .range_from_bytes,
        70
    );
}

#[test]
fn staleness_rules() {
    let p = TmpPath::new("stale");
    let mut w = writer(&p, 4);
    w.upsert(&sample_entry("n2", "udp")).unwrap();
    w.upsert(&sample_entry("n3", "udp")).unwrap();
    let mut r = Reader::open(&p.0).unwrap();
    assert!(r.lookup("n2", "udp", 1).is_ok());

    // Entry marked stale.
    w.mark_stale("n2", "udp").unwrap();
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    assert!(r.predict_ns("n2", "udp", 1).is_err());
    assert_ne!(r.snapshot_entry(0).unwrap().flags & flags::STALE, 0);
    assert!(r.lookup("n3", "udp", 1).is_ok());
    assert_eq!(w.mark_stale("n9", "udp"), Err(SegmentError::NotFound));
    // A fresh upsert clears it.
    w.upsert(&sample_entry("n2", "udp")).unwrap();
    assert!(r.lookup("n2", "udp", 1).is_ok());

    // Data too old (measured in 2023): only with a maximum age set.
    r.set_max_age_ns(3600 * 1_000_000_000);
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    r.set_max_age_ns(0);

    // Heartbeat older than the threshold.
    r.set_stale_after_ns(1_000_000);
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    assert_eq!(r.lookup_index(0, 1), Err(LookupError::Stale));
    w.heartbeat();
    r.set_stale_after_ns(netgauge::DEFAULT_STALE_AFTER_NS);
    assert!(r.lookup("n2", "udp", 1).is_ok());

    // Daemon gone.
    w.shutdown();
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    assert_eq!(r.heartbeat_age_ns(), None);
    r.set_stale_after_ns(0);
    assert!(r.lookup("n2", "udp", 1).is_ok());
}

#[test]
fn a_segment_reopened_after_a_clean_stop_stays_stale_until_its_writer_beats() {
    // The previous run's entries are not current before the new writer
    // has reconciled them (the daemon beats after it has).
    let p = TmpPath::new("rebeat");
    let mut w = writer(&p, 4);
    w.upsert(&sample_entry("n2", "udp")).unwrap();
    w.shutdown();
    let r = Reader::open(&p.0).unwrap();
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    let w = writer(&p, 4);
    assert_eq!(w.entries().len(), 1);
    assert_eq!(r.lookup("n2", "udp", 1), Err(LookupError::Stale));
    assert_eq!(r.heartbeat_age_ns(), None);
    w.heartbeat();
    assert!(r.lookup("n2", "udp", 1).is_ok());
}

#[test]
fn reopen_keeps_inode_entries_and_readers() {
    let p = TmpPath::new("reopen");
    let mut w = writer(&p, 8);
    w.upsert(&derived_entry("a", "rdma", 5)).unwrap();
    w.upsert(&derived_entry("b", "rdma", 6)).unwrap();
    let gen1 = w.generation();
    let ino = std::fs::metadata(&p.0).unwrap().ino();
    let r = Reader::open(&p.0).unwrap();

    // A second writer is refused while the first holds the lock.
    let err = SegmentWriter::create_or_open(&p.0, 8, "node001", "x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);

    // Simulate a crash mid-update, then restart.
    w.begin_update_without_publish(&derived_entry("a", "rdma", 99))
        .unwrap();
    drop(w);
    assert_eq!(derived_k(&r.lookup("a", "rdma", 1).unwrap(), 0), Some(5));
    let mut w2 = SegmentWriter::create_or_open(&p.0, 8, "node001-restarted", "clock2").unwrap();
    assert_eq!(std::fs::metadata(&p.0).unwrap().ino(), ino);
    assert_ne!(w2.generation(), gen1);
    assert_eq!(w2.entries().len(), 2);
    // The old reader keeps working and sees the new identity.
    assert_eq!(derived_k(&r.lookup("a", "rdma", 1).unwrap(), 0), Some(5));
    assert_eq!(derived_k(&r.lookup("b", "rdma", 1).unwrap(), 0), Some(6));
    let info = r.info().unwrap();
    assert_eq!(info.generation, w2.generation());
    assert_eq!(info.node_name, "node001-restarted");
    // Updates after the restart reach the old reader; both copies are
    // rewritten, so the crashed half-update never shows up.
    for k in 10..14 {
        w2.upsert(&derived_entry("b", "rdma", k)).unwrap();
        assert_eq!(derived_k(&r.lookup("a", "rdma", 1).unwrap(), 0), Some(5));
        assert_eq!(derived_k(&r.lookup("b", "rdma", 1).unwrap(), 0), Some(k));
    }
    assert_eq!(w2.upsert(&derived_entry("c", "rdma", 1)).unwrap(), 2);
    assert_eq!(r.index("c", "rdma"), Some(2));
    drop(w2);

    // Incompatible capacity: replaced by a new file (new inode).
    let w3 = SegmentWriter::create_or_open(&p.0, 4, "node001", "x").unwrap();
    assert_ne!(std::fs::metadata(&p.0).unwrap().ino(), ino);
    assert_eq!(w3.entries().len(), 0);
    // The old reader's mapping stays valid (old inode) and still answers.
    assert_eq!(derived_k(&r.lookup("a", "rdma", 1).unwrap(), 0), Some(5));
}

/// Bytes of storage the file at `p` has (not its size: a hole has none).
fn stored_bytes(p: &TmpPath) -> u64 {
    std::fs::metadata(&p.0).unwrap().blocks() * 512
}

#[test]
fn a_segment_has_its_storage_before_it_is_written() {
    // Holes would be filled by stores into the mapping, where a full file
    // system is a SIGBUS instead of an error: none, from create on.
    let p = TmpPath::new("alloc");
    let w = writer(&p, 512);
    let len = std::fs::metadata(&p.0).unwrap().len();
    assert!(len > 256 * 1024, "{len}");
    assert!(
        stored_bytes(&p) >= len,
        "{} of {len} bytes stored",
        stored_bytes(&p)
    );
    drop(w);
    // A file with holes (as one written before this rule) gets them filled
    // when it is re-opened in place.
    let f = std::fs::OpenOptions::new().write(true).open(&p.0).unwrap();
    let hole = (len / 2) as libc::off_t & !0xffff;
    // SAFETY: fallocate on a descriptor we own; no memory is passed.
    let rc = unsafe {
        libc::fallocate(
            std::os::fd::AsRawFd::as_raw_fd(&f),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            hole,
            0x10000,
        )
    };
    assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
    assert!(stored_bytes(&p) < len);
    let w = writer(&p, 512);
    assert!(
        stored_bytes(&p) >= len,
        "{} of {len} bytes stored",
        stored_bytes(&p)
    );
    drop(w);
}

#[test]
fn open_errors() {
    let p = TmpPath::new("openerr");
    match Reader::open(&p.0) {
        Err(ReaderError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        other => panic!("{other:?}"),
    }
    std::fs::write(&p.0, b"hello").unwrap();
    assert!(matches!(Reader::open(&p.0), Err(ReaderError::Invalid(_))));
    std::fs::write(&p.0, vec![0u8; 1 << 16]).unwrap();
    let e = Reader::open(&p.0).unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
    assert!(SegmentWriter::create_or_open(&p.0, 0, "n", "c").is_err());
    assert!(SegmentWriter::create_or_open(&p.0, 4, &"n".repeat(64), "c").is_err());
    // A writer replaces garbage.
    let w = SegmentWriter::create_or_open(&p.0, 4, "n", "c").unwrap();
    assert!(Reader::open(&p.0).is_ok());
    drop(w);
}

#[test]
fn c_abi() {
    let p = TmpPath::new("capi");
    let mut w = writer(&p, 8);
    w.upsert(&sample_entry("node002", "rdma")).unwrap();
    let path = CString::new(p.0.to_str().unwrap()).unwrap();
    let peer = c"node002";
    let tr = c"rdma";
    // SAFETY: all pointers are valid C strings / out-params; the reader is
    // closed once at the end.
    unsafe {
        let r = ng_open(path.as_ptr());
        assert!(!r.is_null());
        let mut out = Params::default();
        assert_eq!(ng_lookup(r, peer.as_ptr(), tr.as_ptr(), 100, &mut out), 0);
        assert_eq!(out.g_ns, 500.0);
        assert_eq!(
            ng_lookup(r, c"nodeX".as_ptr(), tr.as_ptr(), 100, &mut out),
            -libc::ENOENT
        );
        assert_eq!(
            ng_lookup(r, core::ptr::null(), tr.as_ptr(), 100, &mut out),
            -libc::EINVAL
        );
        assert_eq!(
            ng_lookup(r, peer.as_ptr(), tr.as_ptr(), 100, core::ptr::null_mut()),
            -libc::EINVAL
        );
        assert_eq!(
            ng_lookup(core::ptr::null(), peer.as_ptr(), tr.as_ptr(), 100, &mut out),
            -libc::EINVAL
        );
        assert_eq!(ng_predict_ns(r, peer.as_ptr(), tr.as_ptr(), 1), 1500.0);
        assert!(ng_predict_ns(r, c"nodeX".as_ptr(), tr.as_ptr(), 1).is_nan());
        let i = ng_index(r, peer.as_ptr(), tr.as_ptr());
        assert_eq!(i, 0);
        assert_eq!(ng_index(r, peer.as_ptr(), c"udp".as_ptr()), -libc::ENOENT);
        // A NULL reader, peer or transport: EINVAL (lookups) or NaN.
        let no_str = core::ptr::null::<core::ffi::c_char>();
        let no_reader = core::ptr::null();
        assert_eq!(
            ng_index(no_reader, peer.as_ptr(), tr.as_ptr()),
            -libc::EINVAL
        );
        assert_eq!(ng_index(r, peer.as_ptr(), no_str), -libc::EINVAL);
        assert_eq!(
            ng_lookup(r, peer.as_ptr(), no_str, 100, &mut out),
            -libc::EINVAL
        );
        assert!(ng_predict_ns(r, no_str, tr.as_ptr(), 1).is_nan());
        assert!(ng_predict_ns(no_reader, peer.as_ptr(), tr.as_ptr(), 1).is_nan());
        let mut o2 = Params::default();
        assert_eq!(ng_lookup_index(r, i, 100, &mut o2), 0);
        assert_eq!(o2, out_for(r, 100));
        assert_eq!(ng_lookup_index(r, -1, 100, &mut o2), -libc::ENOENT);
        assert_eq!(ng_lookup_index(r, 5, 100, &mut o2), -libc::ENOENT);
        assert_eq!(ng_predict_index_ns(r, i, 1), 1500.0);
        assert_eq!(ng_params_predict_ns(&o2, 1), 1500.0);
        assert_eq!(ng_entry_count(r), 1);
        let mut pb = [0 as core::ffi::c_char; 64];
        let mut tb = [0 as core::ffi::c_char; 16];
        assert_eq!(
            ng_entry_name(r, 0, pb.as_mut_ptr(), 64, tb.as_mut_ptr(), 16),
            0
        );
        assert_eq!(CStr::from_ptr(pb.as_ptr()), peer);
        assert_eq!(CStr::from_ptr(tb.as_ptr()), tr);
        assert_eq!(
            ng_entry_name(r, 0, pb.as_mut_ptr(), 4, tb.as_mut_ptr(), 16),
            -libc::ERANGE
        );
        assert_eq!(
            ng_entry_name(r, 1, pb.as_mut_ptr(), 64, tb.as_mut_ptr(), 16),
            -libc::ENOENT
        );
        let mut info: NgInfo = core::mem::zeroed();
        assert_eq!(ng_get_info(r, &mut info), 0);
        assert_eq!(CStr::from_ptr(info.node_name.as_ptr()), c"node001");
        assert_eq!(info.generation, w.generation());
        assert_eq!(info.entry_count, 1);
        assert_eq!(info.capacity_entries, 8);
        assert!(ng_heartbeat_age_ns(r) >= 0);
        assert_eq!(ng_abi_version(), 1 << 16 | 2);
        assert_eq!(
            CStr::from_ptr(ng_strerror(-libc::ESTALE)),
            c"stale: daemon gone or data too old"
        );
        assert_eq!(CStr::from_ptr(ng_strerror(i32::MIN)), c"unknown error");
        w.mark_stale("node002", "rdma").unwrap();
        assert_eq!(
            ng_lookup(r, peer.as_ptr(), tr.as_ptr(), 100, &mut out),
            -libc::ESTALE
        );
        ng_set_stale_after_ns(r, 0);
        ng_set_max_age_ns(r, 0);
        ng_close(r);
        ng_close(core::ptr::null_mut());

        let missing = c"/nonexistent/netgauged-segment";
        assert!(ng_open(missing.as_ptr()).is_null());
        assert_eq!(*libc::__errno_location(), libc::ENOENT);
        std::fs::write(&p.0, vec![7u8; 4096]).unwrap();
        assert!(ng_open(path.as_ptr()).is_null());
        assert_eq!(*libc::__errno_location(), libc::EINVAL);
    }
}

/// # Safety
/// `r` is a live reader.
unsafe fn out_for(r: *const NgReader, s: u64) -> Params {
    let mut o = Params::default();
    // SAFETY: caller contract; o is writable.
    assert_eq!(
        unsafe { ng_lookup(r, c"node002".as_ptr(), c"rdma".as_ptr(), s, &mut o) },
        0
    );
    o
}
