//! The ABI 1.2 hot table: every index lookup answers exactly what the same
//! lookup over the full entry answers (the name lookups still read the
//! entry), for every range count, at and around every range bound, across
//! updates that shrink an entry, both copies, a re-open, stale marks; and
//! the record's words sit where the ABI says.

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::layout::{key_hash, pack_name, Layout, HOT_RECORD_BYTES, MAX_RANGES};
use netgauge::{flags, EntryData, Params, RangeData, RangeField, Reader, SegmentWriter, Status};

/// derived_entry(k) with `n` ranges [1000 r + 100, 1000 r + 899] (gaps
/// between them) and statuses only for those ranges.
fn entry_n(peer: &str, transport: &str, k: u64, n: usize) -> EntryData {
    let mut d = derived_entry(peer, transport, k);
    d.ranges = (0..n as u64)
        .map(|r| RangeData {
            from_bytes: 1000 * r + 100,
            to_bytes: 1000 * r + 899,
            ..derived_range(k, r)
        })
        .collect();
    d.ext.ident.range = [0; MAX_RANGES];
    d.ext
        .ident
        .set_all_ranges(n, RangeField::Gap, Status::Identified);
    if n > 1 {
        d.ext
            .ident
            .not_identified_range(n - 1, RangeField::ORecv, netgauge::Reason::Negative);
    }
    d.ext.overlap.clear();
    d.ext.bandwidth = None;
    d.ext
        .ident
        .set(netgauge::Field::SustainedG, Status::NotAssessed);
    d.ext
        .ident
        .set(netgauge::Field::BurstG, Status::NotAssessed);
    d
}

/// Sizes at and around every bound of `d`'s ranges, and the extremes.
fn sizes(d: &EntryData) -> Vec<u64> {
    let mut s = vec![0, 1, u64::MAX];
    for r in &d.ranges {
        for v in [r.from_bytes, r.to_bytes] {
            s.extend([v - 1, v, v + 1]);
        }
    }
    s
}

/// Asserts that every index lookup of `r` answers as the lookups over the
/// entry do (Rust and C).
fn assert_same(r: &Reader, cr: *mut NgReader, d: &EntryData) {
    let i = r.index(&d.peer, &d.transport).unwrap();
    for s in sizes(d) {
        let by_name = r.lookup(&d.peer, &d.transport, s);
        assert_eq!(r.lookup_index(i, s), by_name, "{} {s}", d.peer);
        let status = r.lookup_status(&d.peer, &d.transport, s);
        assert_eq!(r.lookup_index_status(i, s), status, "{} {s}", d.peer);
        assert_eq!(
            r.predict_index_ns(i, s).ok(),
            by_name.ok().map(|p| p.predict_ns(s))
        );
        let mut out = Params::default();
        // SAFETY: a live reader and a valid out-pointer.
        let rc = unsafe { ng_lookup_index(cr, i as i32, s, &mut out) };
        match by_name {
            Ok(p) => assert_eq!((rc, out), (0, p)),
            Err(e) => assert_eq!(rc, e.errno()),
        }
    }
}

#[test]
fn index_lookups_answer_as_the_entry_does() {
    let p = TmpPath::new("hot");
    let mut w = SegmentWriter::create_or_open(&p.0, 32, "node001", "tsc").unwrap();
    let mut all = Vec::new();
    for n in 1..=MAX_RANGES {
        for (t, k) in [("rdma", n as u64), ("udp", 100 + n as u64)] {
            let mut d = entry_n(&format!("n{n}"), t, k, n);
            if n == 2 {
                d.S_bytes = None;
                d.f = None;
                d.ext.ident.set(netgauge::Field::S, Status::NotAssessed);
                d.ext.ident.set(netgauge::Field::F, Status::NotAssessed);
            }
            if n == 3 {
                d.f = Some(u32::MAX);
                d.flags |= flags::DEGRADED | flags::RESTORED;
            }
            w.upsert(&d).unwrap();
            all.push(d);
        }
    }
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    let cr = c_reader(&p.0, 0);
    assert_eq!(r.info().unwrap().abi_minor, 2);
    assert_ne!(
        r.info().unwrap().capabilities & netgauge::layout::CAP_HOT,
        0
    );
    for d in &all {
        assert_same(&r, cr, d);
    }
    // Updates that shrink and grow an entry, published into both copies
    // in turn: nothing of the previous version shows through.
    for (round, n) in [8usize, 1, 5, 2, 8, 3].into_iter().enumerate() {
        let d = entry_n("n4", "rdma", 1000 + round as u64, n);
        w.upsert(&d).unwrap();
        assert_same(&r, cr, &d);
        let seen = r.lookup_index(r.index("n4", "rdma").unwrap(), u64::MAX);
        assert_eq!(seen.unwrap().range_to_bytes, 1000 * (n as u64 - 1) + 899);
    }
    // Stale marks reach the index path.
    w.mark_stale("n5", "udp").unwrap();
    let i = r.index("n5", "udp").unwrap();
    assert_eq!(r.lookup_index(i, 1), Err(netgauge::LookupError::Stale));
    // A writer that re-opens the segment rewrites both copies: the index
    // path still agrees.
    let gen = w.generation();
    drop(w);
    let w = SegmentWriter::create_or_open(&p.0, 32, "node001", "tsc").unwrap();
    assert_ne!(w.generation(), gen);
    for d in all.iter().filter(|d| d.peer != "n4" && d.peer != "n5") {
        assert_same(&r, cr, d);
    }
    // SAFETY: closing the reader opened above.
    unsafe { ng_close(cr) };
}

/// The words of a record where the ABI puts them (a C reader or a tool
/// may read them directly).
#[test]
fn the_record_layout_is_the_abi() {
    let p = TmpPath::new("hotlayout");
    let mut w = SegmentWriter::create_or_open(&p.0, 8, "node001", "tsc").unwrap();
    w.upsert(&entry_n("a", "rdma", 1, 2)).unwrap();
    let mut d = entry_n("bb", "udp", 7, 3);
    d.f = Some(42);
    w.upsert(&d).unwrap();
    let b = std::fs::read(&p.0).unwrap();
    let layout = Layout::new(8).unwrap();
    let hot = layout.hot.unwrap();
    assert_eq!(hot.record_bytes, HOT_RECORD_BYTES);
    assert_eq!(b.len(), layout.file_bytes);
    let word = |off: usize| u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
    // Header extension: record size, offset, file size.
    assert_eq!(word(280) >> 32, 768);
    assert_eq!(word(288), hot.offset as u64);
    assert_eq!(word(296), b.len() as u64);
    let seq = word(192);
    let rec = hot.record_offset((seq & 1) as usize, 1);
    let fl = Reader::open(&p.0).unwrap().snapshot_entry(1).unwrap().flags;
    assert_eq!(word(rec), u64::from(fl) | 3 << 16 | 42 << 32);
    assert_eq!(
        (1..8).map(|i| word(rec + 8 * i)).collect::<Vec<_>>(),
        vec![899, 1899, 0, 0, 0, 0, 0]
    );
    assert_eq!(f64::from_bits(word(rec + 64)), d.eel_ns);
    assert_eq!(word(rec + 120), d.samples);
    for (ri, r) in d.ranges.iter().enumerate() {
        let at = rec + 128 + 64 * ri;
        assert_eq!((word(at), word(at + 8)), (r.from_bytes, r.to_bytes));
        assert_eq!(f64::from_bits(word(at + 16)), r.g_ns);
    }
    assert_eq!(word(rec + 128 + 64 * 3), 0, "unused ranges are zero");
    assert_eq!(word(rec + 640), d.ext.ident.entry);
    assert_eq!(word(rec + 648 + 8 * 2), d.ext.ident.range[2]);
    let pw: [u64; 8] = pack_name(b"bb").unwrap();
    let tw: [u64; 2] = pack_name(b"udp").unwrap();
    assert_eq!(word(rec + 712), key_hash(&pw, 2, &tw, 3));
}
