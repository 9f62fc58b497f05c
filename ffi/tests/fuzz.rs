//! Corrupted or truncated segments: the reader returns errors (EINVAL /
//! ReaderError::Invalid), never crashes. Seeded random corruptions of a
//! valid segment, run in-process (a crash would fail the test binary), plus
//! targeted corruptions of every structural field with the exact expected
//! error, for the ABI 1.0 part, the 1.1 extension (header extension,
//! per-transport records, classes, the peer → class map, entry blocks) and
//! the 1.2 hot table.

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::layout::{Layout, CAP_HOT, MAX_RANGES};
use netgauge::{
    EntryExt, LookupError, Params, Reader, ReaderError, SegmentWriter, Status, TransportExt,
};

const CAP: usize = 8;
const CASES: u64 = 4000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const NAMES: [(&str, &str); 5] = [
    ("node002", "rdma"),
    ("node003", "udp"),
    ("a", "rdma"),
    ("b", "rdma"),
    ("a-much-longer-host-name.cluster.example.org", "mpi"),
];

/// Peers mapped to classes (they have no entries of their own).
const MAPPED: [&str; 3] = ["m1", "m2", "m3"];

fn valid_segment() -> Vec<u8> {
    let p = TmpPath::new("fuzzsrc");
    let mut w = SegmentWriter::create_or_open(&p.0, CAP, "node001", "tsc").unwrap();
    w.upsert(&sample_entry_ext(NAMES[0].0, NAMES[0].1)).unwrap();
    w.upsert(&sample_entry(NAMES[1].0, NAMES[1].1)).unwrap();
    w.upsert(&derived_entry(NAMES[2].0, NAMES[2].1, 5)).unwrap();
    w.upsert(&derived_entry(NAMES[3].0, NAMES[3].1, 6)).unwrap();
    w.upsert(&derived_entry(NAMES[4].0, NAMES[4].1, 7)).unwrap();
    w.upsert(&derived_entry("@sw0", "rdma", 8)).unwrap();
    w.set_peer_classes([("m1", "@sw0"), ("m2", "@sw0"), ("m3", "@sw1")])
        .unwrap();
    w.set_transport_ext("rdma", &sample_transport_ext(0.0))
        .unwrap();
    w.set_transport_ext("udp", &sample_transport_ext(0.5))
        .unwrap();
    std::fs::read(&p.0).unwrap()
}

/// [`valid_segment`], its layout and the copy its latch sequence publishes.
fn valid_published() -> (Vec<u8>, Layout, usize) {
    let good = valid_segment();
    let layout = Layout::new(CAP).unwrap();
    let seq = u64::from_le_bytes(good[192..200].try_into().unwrap());
    (good, layout, (seq & 1) as usize)
}

#[derive(Default, Debug)]
struct Outcomes {
    open_invalid: u64,
    open_ok: u64,
    lookups_ok: u64,
    lookups_invalid: u64,
    lookups_notfound: u64,
    busy: u64,
}

/// Everything a reader can be asked; returns nothing, must not crash.
fn exercise(r: &mut Reader, o: &mut Outcomes) {
    r.set_stale_after_ns(0);
    let mut tally = |res: Result<(), LookupError>| match res {
        Ok(()) => o.lookups_ok += 1,
        Err(LookupError::Invalid) => o.lookups_invalid += 1,
        Err(LookupError::NotFound) => o.lookups_notfound += 1,
        Err(LookupError::Busy) => o.busy += 1,
        Err(LookupError::Stale) => {}
    };
    tally(r.entry_count().map(|_| ()));
    tally(r.info().map(|_| ()));
    tally(r.snapshot().map(|_| ()));
    for (p, t) in NAMES {
        for s in [0, 1, 999, 5000, u64::MAX] {
            tally(r.lookup(p, t, s).map(|v| {
                // NaN-safety: prediction is total over any bits.
                let _ = v.predict_ns(s);
            }));
        }
        tally(r.try_index(p, t).map(|_| ()));
        tally(r.predict_ns(p, t, 100).map(|_| ()));
    }
    for i in 0..CAP + 2 {
        tally(r.lookup_index(i, 100).map(|_| ()));
        tally(r.lookup_index_status(i, u64::MAX).map(|_| ()));
        tally(r.snapshot_entry(i).map(|_| ()));
        tally(r.entry_ext_index(i).map(|x| {
            // Whatever the bits, the accessors stay in bounds.
            let _ = (x.latency().len(), x.overlap().len(), x.bandwidth());
            let _ = x.ident.problems(8);
        }));
    }
    // ABI 1.1 lookups.
    for p in NAMES.iter().map(|n| n.0).chain(MAPPED) {
        for t in ["rdma", "udp"] {
            tally(r.lookup_or_class(p, t, 1000).map(|_| ()));
            tally(r.lookup_status(p, t, 5000).map(|_| ()));
            tally(r.index_or_class(p, t).map(|_| ()));
            tally(r.entry_ext(p, t).map(|_| ()));
        }
        tally(r.peer_class(p).map(|_| ()));
    }
    for t in ["rdma", "udp", "raw"] {
        tally(r.transport_ext(t).map(|t| {
            let _ = (t.penalties(netgauge::Scheme::Mixed), t.bisection());
        }));
    }
    tally(r.class_map().map(|_| ()));
    tally(r.transports_ext().map(|_| ()));
}

fn write_case(path: &std::path::Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
}

/// Writes `bytes` to `p` and opens a reader of it without the heartbeat
/// rule.
fn open_case(p: &TmpPath, bytes: &[u8]) -> Reader {
    write_case(&p.0, bytes);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    r
}

#[test]
fn random_corruptions_and_truncations_never_crash() {
    let good = valid_segment();
    let layout = Layout::new(CAP).unwrap();
    assert_eq!(good.len(), layout.file_bytes);
    let hot = layout.hot.unwrap();
    let p = TmpPath::new("fuzz");
    let mut rng = Rng(0x005e_ed0f_f022);
    let mut o = Outcomes::default();
    let mut truncations = 0;
    for case in 0..CASES {
        let mut b = good.clone();
        let kind = case % 6;
        match kind {
            // Truncation: always refused at open.
            0 => {
                let len = rng.below(b.len() as u64) as usize;
                b.truncate(len);
            }
            // A few random bytes anywhere.
            1 => {
                for _ in 0..1 + rng.below(8) {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
            }
            // Aligned words set to hostile values, biased to the header,
            // metadata, slots and entry heads, and to the structural words
            // of the 1.1 extension.
            2 | 3 => {
                for _ in 0..1 + rng.below(4) {
                    let region = rng.below(9);
                    let copy = rng.below(2) as usize;
                    let base = layout.copy_offset[copy];
                    let x = layout.ext.unwrap();
                    let entry = base
                        + layout.entries_offset
                        + rng.below(CAP as u64) as usize * layout.entry_bytes;
                    let off = match region {
                        0 => rng.below(320 / 8) as usize * 8,
                        1 => base + rng.below(256 / 8) as usize * 8,
                        2 => {
                            base + layout.slots_offset
                                + rng.below(layout.hash_slots as u64) as usize * 8
                        }
                        3 => entry + rng.below(256 / 8) as usize * 8,
                        // Entry extension: head, identification, bandwidth info.
                        4 => entry + x.entry_ext_offset + rng.below(136 / 8) as usize * 8,
                        // Meta extension head and the first transport records' heads.
                        5 => {
                            base + x.meta_ext_offset
                                + [0, 8, 16, 64, 80, 64 + 832, 64 + 832 + 16][rng.below(7) as usize]
                        }
                        // Class table, map slots, map records.
                        6 => base + x.classes_offset + rng.below(3 * 72 / 8) as usize * 8,
                        // Hot-table records: head, search array, the
                        // first ranges' bounds.
                        7 => {
                            hot.record_offset(copy, rng.below(CAP as u64) as usize)
                                + [0, 8, 16, 56, 128, 136, 192, 200][rng.below(8) as usize]
                        }
                        _ => {
                            base + x.map_slots_offset
                                + rng.below(((x.meta_ext_end - x.map_slots_offset) / 8) as u64)
                                    as usize
                                    * 8
                        }
                    };
                    let v = match rng.below(8) {
                        0 => 0,
                        1 => u64::MAX,
                        2 => f64::NAN.to_bits(),
                        3 => rng.below(300),
                        4 => 1 << rng.below(64),
                        5 => u64::from_le_bytes(b[off..off + 8].try_into().unwrap()) ^ 0xFF00,
                        _ => rng.next(),
                    };
                    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            // A whole region of random bytes.
            4 => {
                let start = rng.below(b.len() as u64) as usize;
                let len = (rng.below(512) as usize).min(b.len() - start);
                for x in &mut b[start..start + len] {
                    *x = rng.next() as u8;
                }
            }
            // Corrupt, then truncate or extend.
            _ => {
                let i = rng.below(b.len() as u64) as usize;
                b[i] = rng.next() as u8;
                if rng.below(2) == 0 {
                    b.truncate(layout.file_bytes - 1 - rng.below(64) as usize);
                } else {
                    b.extend((0..rng.below(5000)).map(|_| rng.next() as u8));
                }
            }
        }
        write_case(&p.0, &b);
        match Reader::open(&p.0) {
            Ok(mut r) => {
                assert!(
                    b.len() >= layout.file_bytes,
                    "case {case}: truncated file ({} bytes) opened",
                    b.len()
                );
                o.open_ok += 1;
                exercise(&mut r, &mut o);
            }
            Err(ReaderError::Invalid(_)) => o.open_invalid += 1,
            Err(e) => panic!("case {case}: unexpected open error {e}"),
        }
        if b.len() < layout.file_bytes {
            truncations += 1;
        }
    }
    eprintln!("fuzz: {CASES} cases, {truncations} truncated: {o:?}");
    assert_eq!(o.busy, 0, "a static file can never be 'busy'");
    assert!(o.open_invalid >= truncations);
    assert!(
        o.open_ok > CASES / 3,
        "too few cases reached the lookups: {o:?}"
    );
    assert!(
        o.lookups_invalid > 1000,
        "corruption rarely detected: {o:?}"
    );
    assert!(o.lookups_ok > 1000, "{o:?}");
}

fn le_put(b: &mut [u8], off: usize, v: u64, width: usize) {
    b[off..off + width].copy_from_slice(&v.to_le_bytes()[..width]);
}

#[test]
fn each_structural_header_field_is_validated() {
    let good = valid_segment();
    let p = TmpPath::new("fuzzhdr");
    // (offset, width, bad value)
    let cases: &[(usize, usize, u64)] = &[
        (0, 8, 0x1122_3344_5566_7788),      // magic
        (8, 4, 2),                          // abi_major
        (16, 4, 128),                       // header_bytes too small
        (16, 4, 384),                       // header_bytes inconsistent with offsets
        (16, 4, 256),                       // header_bytes without the 1.1 extension
        (20, 4, 255),                       // meta_bytes misaligned
        (24, 4, 2240),                      // entry_bytes too small
        (24, 4, 3392 + 64),                 // entry_bytes inconsistent with total
        (24, 4, 2304),                      // entry_bytes too small for 1.1
        (28, 4, 0),                         // capacity 0
        (28, 4, 9),                         // capacity inconsistent
        (28, 4, 1 << 20),                   // capacity absurd
        (32, 4, 12),                        // hash_slots not a power of two
        (32, 4, 8),                         // hash_slots ≤ capacity
        (36, 4, MAX_RANGES as u64 + 1),     // max_ranges
        (40, 4, 31),                        // max_curve
        (44, 4, 17),                        // max_ci
        (48, 8, u64::MAX),                  // total_bytes
        (48, 8, good.len() as u64 + 8),     // total_bytes beyond the file
        (56, 8, 4096),                      // copy_bytes
        (64, 8, 0),                         // copy_offset[0]
        (72, 8, u64::MAX - 7),              // copy_offset[1]
        (80, 8, 1 << 40),                   // unknown incompatible capability
        (256, 4, 0),                        // class_capacity 0
        (256, 4, 1025),                     // class_capacity beyond MAX_CLASSES
        (256, 4, 9),                        // class_capacity inconsistent with meta_bytes
        (260, 4, 0),                        // map_capacity 0
        (260, 4, 16),                       // map_capacity ≥ map_slots
        (264, 4, 12),                       // map_slots not a power of two
        (264, 4, 1 << 20),                  // map_slots absurd
        (268, 4, 9),                        // transport_records
        (272, 4, 9),                        // max_latency
        (276, 4, 7),                        // max_k
        (280, 4, 4),                        // schemes
        (284, 4, 0),                        // hot_record_bytes 0 with CAP_HOT
        (284, 4, 704),                      // hot_record_bytes below the record
        (284, 4, 800),                      // hot_record_bytes misaligned
        (284, 4, 832),                      // hot_record_bytes inconsistent
        (288, 8, 0),                        // hot_offset
        (288, 8, 1 << 40),                  // hot_offset absurd
        (296, 8, 4096),                     // file_bytes short of the table
        (296, 8, good.len() as u64 + 4096), // file_bytes beyond the file
    ];
    for &(off, width, v) in cases {
        let mut b = good.clone();
        le_put(&mut b, off, v, width);
        write_case(&p.0, &b);
        match Reader::open(&p.0) {
            Err(ReaderError::Invalid(_)) => {}
            other => panic!("offset {off} = {v:#x}: expected Invalid, got {other:?}"),
        }
        // And through the C ABI: NULL + errno EINVAL.
        let c = std::ffi::CString::new(p.0.to_str().unwrap()).unwrap();
        // SAFETY: valid C string; errno read right after.
        unsafe {
            assert!(ng_open(c.as_ptr()).is_null());
            assert_eq!(*libc::__errno_location(), libc::EINVAL);
        }
    }
    // Unknown *compatible* capability bits and a newer minor are accepted.
    let mut b = good.clone();
    le_put(&mut b, 80, 1 << 20 | 0x1f, 8);
    le_put(&mut b, 12, 7, 4);
    write_case(&p.0, &b);
    assert!(Reader::open(&p.0).is_ok());
    // A 1.1-sized segment that says minor 0 is read as 1.0: the extension
    // is absent, the 1.0 data is all there.
    let mut b = good.clone();
    le_put(&mut b, 12, 0, 4);
    write_case(&p.0, &b);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    assert_eq!(r.entry_ext("node002", "rdma").unwrap().present, 0);
    assert_eq!(r.transport_ext("rdma"), Err(LookupError::NotFound));
    assert_eq!(r.peer_class("m1").unwrap(), None);
    assert_eq!(
        r.lookup_or_class("m1", "rdma", 1),
        Err(LookupError::NotFound)
    );
    assert_eq!(r.lookup("node002", "rdma", 100).unwrap().g_ns, 500.0);
}

#[test]
fn each_structural_payload_field_is_validated() {
    let (good, layout, copy) = valid_published();
    let c = layout.copy_offset[copy];
    let entry = |i: usize| c + layout.entries_offset + i * layout.entry_bytes;
    let p = TmpPath::new("fuzzpay");
    let counts_of =
        |b: &[u8], i: usize| u64::from_le_bytes(b[entry(i) + 8..entry(i) + 16].try_into().unwrap());

    // The index path reads the entry's hot-table record, which these
    // corruptions of the entry leave intact: it answers as before, except
    // where entry_count is corrupt (`want_index`).
    let pg = TmpPath::new("fuzzpay-good");
    write_case(&pg.0, &good);
    let mut rg = Reader::open(&pg.0).unwrap();
    rg.set_stale_after_ns(0);
    let want_hot = rg.lookup_index(0, 100);
    assert!(want_hot.is_ok());
    let check =
        |b: &[u8], what: &str, want_string: LookupError, want_index: Option<LookupError>| {
            write_case(&p.0, b);
            let mut r = Reader::open(&p.0).unwrap();
            r.set_stale_after_ns(0);
            assert_eq!(
                r.lookup("node002", "rdma", 100),
                Err(want_string),
                "{what}: string path"
            );
            let want = want_index.map_or(want_hot, Err);
            assert_eq!(r.lookup_index(0, 100), want, "{what}: index path");
            let cr = c_reader(&p.0, 0);
            // SAFETY: valid pointers; the reader is closed before leaving.
            unsafe {
                let mut out = Params::default();
                assert_eq!(
                    ng_lookup_index(cr, 0, 100, &mut out),
                    want.map_or_else(|e| e.errno(), |_| 0),
                    "{what}: C index path"
                );
                assert_eq!(ng_predict_index_ns(cr, 0, 100).is_nan(), want.is_err());
                ng_close(cr);
            }
        };

    // entry_count beyond capacity.
    let mut b = good.clone();
    le_put(&mut b, c, CAP as u64 + 1, 8);
    check(
        &b,
        "entry_count",
        LookupError::Invalid,
        Some(LookupError::Invalid),
    );

    // counts: zero ranges, too many ranges, empty peer, long peer, junk bits.
    let base = counts_of(&good, 0);
    for (what, v) in [
        ("0 ranges", base & !(0xFF << 16)),
        ("9 ranges", (base & !(0xFF << 16)) | (9 << 16)),
        ("33 curve points", (base & !(0xFF << 24)) | (33 << 24)),
        ("17 intervals", (base & !(0xFF << 32)) | (17 << 32)),
        ("high bits", base | (1 << 50)),
    ] {
        let mut b = good.clone();
        le_put(&mut b, entry(0) + 8, v, 8);
        check(&b, what, LookupError::Invalid, None);
    }
    // A changed peer length no longer matches the name: unknown by name,
    // and invalid by index when out of bounds.
    let mut b = good.clone();
    le_put(&mut b, entry(0) + 8, base & !0xFF, 8);
    check(&b, "peer_len 0", LookupError::NotFound, None);
    let mut b = good.clone();
    le_put(&mut b, entry(0) + 8, (base & !0xFF) | 64, 8);
    check(&b, "peer_len 64", LookupError::NotFound, None);

    // A slot pointing past entry_count.
    let mut b = good.clone();
    let slots = c + layout.slots_offset;
    for s in 0..layout.hash_slots {
        let off = slots + 8 * s;
        let w = u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
        if w != 0 {
            le_put(&mut b, off, (w & !0xFFFF_FFFF) | 200, 8);
        }
    }
    write_case(&p.0, &b);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    for (peer, t) in NAMES {
        assert_eq!(r.lookup(peer, t, 1), Err(LookupError::Invalid), "{peer}");
    }
    // A full table (no empty slot) terminates: bounded probing.
    let mut b = good.clone();
    for s in 0..layout.hash_slots {
        le_put(&mut b, slots + 8 * s, 0xDEAD_BEEF_0000_0001, 8);
    }
    write_case(&p.0, &b);
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(0);
    assert_eq!(r.lookup("zz", "rdma", 1), Err(LookupError::NotFound));
    // Non-UTF-8 names in a dump are an error, not a panic.
    let mut b = good.clone();
    b[entry(0) + 128] = 0xFF;
    write_case(&p.0, &b);
    let r = Reader::open(&p.0).unwrap();
    assert_eq!(r.snapshot_entry(0), Err(LookupError::Invalid));
}

/// The ABI 1.1 words, one at a time: each corruption gives its exact error
/// from the 1.1 lookups, and never disturbs the 1.0 lookups.
#[test]
fn each_structural_extension_field_is_validated() {
    let (good, layout, copy) = valid_published();
    let x = layout.ext.unwrap();
    let c = layout.copy_offset[copy];
    let entry = |i: usize| c + layout.entries_offset + i * layout.entry_bytes;
    let ext = |i: usize| entry(i) + x.entry_ext_offset;
    let meta_ext = c + x.meta_ext_offset;
    let rd = |b: &[u8], off: usize| u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
    let p = TmpPath::new("fuzzext");
    let open = |b: &[u8]| open_case(&p, b);
    // The 1.0 answers a corruption of the extension must leave alone.
    let plain = open(&good).lookup("node002", "rdma", 100).unwrap();
    let plain_k = derived_k(&open(&good).lookup("a", "rdma", 100).unwrap(), 0);
    let check_10 = |r: &Reader, what: &str| {
        assert_eq!(
            r.lookup("node002", "rdma", 100),
            Ok(plain),
            "{what}: 1.0 lookup"
        );
        assert_eq!(
            derived_k(&r.lookup("a", "rdma", 100).unwrap(), 0),
            plain_k,
            "{what}"
        );
    };

    // Entry extension counts: latency > 8, overlap neither 0 nor n_ranges,
    // a bandwidth range index beyond the ranges (entry 0 has 2 ranges).
    let head = rd(&good, ext(0));
    let bw_info = rd(&good, ext(0) + 128);
    for (what, off, v) in [
        ("9 latency sizes", ext(0), (head & !(0xFF << 8)) | 9 << 8),
        ("255 latency sizes", ext(0), head | 0xFF << 8),
        (
            "1 overlap for 2 ranges",
            ext(0),
            (head & !(0xFF << 16)) | 1 << 16,
        ),
        ("9 overlaps", ext(0), (head & !(0xFF << 16)) | 9 << 16),
        (
            "range index 2 of 2",
            ext(0) + 128,
            (bw_info & !0xFFFF_FFFF) | 2,
        ),
    ] {
        let mut b = good.clone();
        le_put(&mut b, off, v, 8);
        let r = open(&b);
        assert_eq!(
            r.entry_ext("node002", "rdma"),
            Err(LookupError::Invalid),
            "{what}"
        );
        assert_eq!(r.entry_ext_index(0), Err(LookupError::Invalid), "{what}");
        assert_eq!(r.snapshot_entry(0), Err(LookupError::Invalid), "{what}");
        check_10(&r, what);
        // And through the C ABI.
        let cr = c_reader(&p.0, 0);
        // SAFETY: valid pointers; the reader is closed before leaving.
        unsafe {
            let mut out = EntryExt::default();
            assert_eq!(
                ng_get_entry_ext_index(cr, 0, &mut out),
                -libc::EINVAL,
                "{what}"
            );
            ng_close(cr);
        }
    }
    // Every status code in every nibble decodes (reserved codes as
    // "not identified, reason unknown"); an unknown regime code is passed on.
    for code in 0..16u64 {
        let mut b = good.clone();
        le_put(&mut b, ext(0) + 24, code * 0x1111_1111_1111_1111, 8);
        le_put(&mut b, ext(0) + 32, code * 0x1111_1111_1111_1111, 8);
        le_put(&mut b, ext(0) + 128, bw_info | 0xFFFF_FFFF << 32, 8);
        let r = open(&b);
        let e = r.entry_ext("node002", "rdma").unwrap();
        assert_eq!(
            e.ident.get(netgauge::Field::BurstG),
            Status::from_code(code as u8)
        );
        assert_eq!(
            e.ident.get_range(0, netgauge::RangeField::OverlapRecv),
            Status::from_code(code as u8)
        );
        assert_eq!(e.bandwidth().unwrap().regime(), None);
        assert_eq!(e.ident.any_not_identified(1), code >= 2);
        check_10(&r, "status codes");
    }
    // NaN and huge values are data: read back as they are.
    let mut b = good.clone();
    le_put(&mut b, ext(0) + 192 + 16, f64::NAN.to_bits(), 8);
    le_put(&mut b, ext(0) + 192, u64::MAX, 8);
    le_put(&mut b, ext(0) + 128 + 56, u64::MAX, 8);
    let e = open(&b).entry_ext("node002", "rdma").unwrap();
    assert!(e.latency()[0].min_ns.is_nan());
    assert_eq!(e.latency()[0].size_bytes, u64::MAX);
    assert_eq!(e.bandwidth().unwrap().burst_bytes, u64::MAX);

    // Meta extension counts.
    for (what, off, v) in [
        ("transport_count 9", meta_ext, 9u64),
        ("class_count > capacity", meta_ext + 8, CAP as u64 + 1),
        ("map_count > capacity", meta_ext + 16, CAP as u64 + 1),
    ] {
        let mut b = good.clone();
        le_put(&mut b, off, v, 8);
        let r = open(&b);
        let want = LookupError::Invalid;
        match what {
            "transport_count 9" => {
                assert_eq!(r.transport_ext("rdma"), Err(want), "{what}");
                assert_eq!(r.transports_ext(), Err(want), "{what}");
            }
            _ => {
                assert_eq!(r.lookup_or_class("m1", "rdma", 1), Err(want), "{what}");
                assert_eq!(r.class_map(), Err(want), "{what}");
            }
        }
        check_10(&r, what);
    }
    // Transport record: name length 0 or 16, a k count of 9.
    let tr = meta_ext + 64;
    let info = rd(&good, tr + 16);
    for (what, v) in [
        ("name length 0", info & !0xFF),
        ("name length 16", (info & !0xFF) | 16),
        ("k = 9", (info & !(0xF << 8)) | 9 << 8),
    ] {
        let mut b = good.clone();
        le_put(&mut b, tr + 16, v, 8);
        let r = open(&b);
        assert_eq!(r.transport_ext("rdma"), Err(LookupError::Invalid), "{what}");
        check_10(&r, what);
        let cr = c_reader(&p.0, 0);
        // SAFETY: valid pointers; the reader is closed before leaving.
        unsafe {
            let mut t = TransportExt::default();
            assert_eq!(
                ng_get_transport_ext(cr, c"rdma".as_ptr(), &mut t),
                -libc::EINVAL
            );
            ng_close(cr);
        }
    }
    // Class names of length 0, 1 (just '@'), 64.
    for len in [0u64, 1, 64] {
        let mut b = good.clone();
        le_put(&mut b, c + x.classes_offset, len, 8);
        let r = open(&b);
        assert_eq!(
            r.lookup_or_class("m1", "rdma", 1),
            Err(LookupError::Invalid),
            "{len}"
        );
        assert_eq!(r.peer_class("m1"), Err(LookupError::Invalid), "{len}");
        check_10(&r, "class name length");
    }
    // Map: a slot word whose index part is 0 (would underflow), a slot past
    // map_count, a record whose class id is past class_count, a record
    // whose peer length is 0.
    let slots = c + x.map_slots_offset;
    let used: Vec<usize> = (0..x.map_slots)
        .filter(|s| rd(&good, slots + 8 * s) != 0)
        .collect();
    assert_eq!(used.len(), 3);
    for (what, f) in [("index 0", 0u64), ("index past map_count", 4)] {
        let mut b = good.clone();
        for s in &used {
            let w = rd(&b, slots + 8 * s);
            le_put(&mut b, slots + 8 * s, (w & !0xFFFF_FFFF) | f, 8);
        }
        let r = open(&b);
        for m in MAPPED {
            assert_eq!(
                r.lookup_or_class(m, "rdma", 1),
                Err(LookupError::Invalid),
                "{what}"
            );
        }
        check_10(&r, what);
    }
    let rec = c + x.map_records_offset;
    let info = rd(&good, rec + 64);
    let mut b = good.clone();
    le_put(&mut b, rec + 64, (info & 0xFF) | 7 << 8, 8);
    let r = open(&b);
    assert_eq!(
        r.lookup_or_class("m1", "rdma", 1),
        Err(LookupError::Invalid)
    );
    assert_eq!(r.class_map(), Err(LookupError::Invalid));
    let mut b = good.clone();
    le_put(&mut b, rec + 64, info & !0xFF, 8);
    let r = open(&b);
    assert_eq!(r.class_map(), Err(LookupError::Invalid));
    // "m1" no longer matches its record: unknown, not invalid.
    assert_eq!(
        r.lookup_or_class("m1", "rdma", 1),
        Err(LookupError::NotFound)
    );
    // A full map table (no empty slot) terminates: bounded probing.
    let mut b = good.clone();
    for s in 0..x.map_slots {
        le_put(&mut b, slots + 8 * s, 0xDEAD_BEEF_0000_0001, 8);
    }
    let r = open(&b);
    assert_eq!(
        r.lookup_or_class("zz", "rdma", 1),
        Err(LookupError::NotFound)
    );
    // The same for the 1.0 entry table's slot word with index part 0.
    let eslots = c + layout.slots_offset;
    let mut b = good.clone();
    for s in 0..layout.hash_slots {
        let w = rd(&b, eslots + 8 * s);
        if w != 0 {
            le_put(&mut b, eslots + 8 * s, w & !0xFFFF_FFFF, 8);
        }
    }
    let r = open(&b);
    assert_eq!(r.lookup("node002", "rdma", 1), Err(LookupError::Invalid));
}

/// The ABI 1.2 hot table: a corrupt record is an Invalid entry for the
/// index lookups (Rust and C), never an answer, while the name lookups,
/// which read the entry, are undisturbed; a segment without CAP_HOT is read
/// from its entries.
#[test]
fn each_structural_hot_field_is_validated() {
    let (good, layout, copy) = valid_published();
    let hot = layout.hot.unwrap();
    let p = TmpPath::new("fuzzhot");
    let open = |b: &[u8]| open_case(&p, b);
    let r = open(&good);
    // "a"/"rdma" is derived_entry(k = 5): ranges [1000 r, 1000 r + 999].
    let idx = r.index("a", "rdma").unwrap();
    let rec = hot.record_offset(copy, idx);
    let head = u64::from_le_bytes(good[rec..rec + 8].try_into().unwrap());
    let by_name = r.lookup("a", "rdma", 100).unwrap();
    assert_eq!(r.lookup_index(idx, 100), Ok(by_name));
    assert_eq!(derived_k(&by_name, 0), Some(5));
    drop(r);
    let invalid = |b: &[u8], what: &str, size: u64| {
        let r = open(b);
        assert_eq!(
            r.lookup_index(idx, size),
            Err(LookupError::Invalid),
            "{what}"
        );
        assert_eq!(
            r.lookup_index_status(idx, size).map(|_| ()),
            Err(LookupError::Invalid),
            "{what}: status"
        );
        assert_eq!(
            r.predict_index_ns(idx, size).map(|_| ()),
            Err(LookupError::Invalid),
            "{what}: predict"
        );
        // The entry itself is intact: the name lookups answer from it.
        assert_eq!(r.lookup("a", "rdma", 100), Ok(by_name), "{what}: name");
        let cr = c_reader(&p.0, 0);
        // SAFETY: valid pointers; the reader is closed before leaving.
        unsafe {
            let mut out = Params::default();
            assert_eq!(
                ng_lookup_index(cr, idx as i32, size, &mut out),
                -libc::EINVAL,
                "{what}: C"
            );
            ng_close(cr);
        }
    };
    let rng = 0xFF_u64 << 16;
    for (what, v) in [
        ("0 ranges", head & !rng),
        ("9 ranges", (head & !rng) | 9 << 16),
        ("255 ranges", head | rng),
        ("reserved bits", head | 1 << 24),
    ] {
        let mut b = good.clone();
        le_put(&mut b, rec, v, 8);
        invalid(&b, what, 100);
    }
    // A record the writer never wrote (all zero).
    let mut b = good.clone();
    b[rec..rec + hot.record_bytes].fill(0);
    invalid(&b, "zeroed record", 100);
    // The search array disagrees with the range it selects.
    let mut b = good.clone();
    le_put(&mut b, rec + 8, 500, 8);
    invalid(&b, "search word 0", 100);
    // ... which only matters to the sizes whose search stops there: 2500
    // goes past word 0 to range 2, whose words agree.
    let r = open(&b);
    assert_eq!(r.lookup_index(idx, 2500), r.lookup("a", "rdma", 2500));
    assert!(r.lookup_index(idx, 2500).is_ok());
    drop(r);
    // A range record with from > to.
    let mut b = good.clone();
    le_put(&mut b, rec + 128, 5000, 8);
    invalid(&b, "range 0 from > to", 100);
    // The last range (no search word) is checked for from ≤ to as well.
    let mut b = good.clone();
    le_put(&mut b, rec + 128 + 3 * 64, 1 << 40, 8);
    invalid(&b, "last range from > to", 1 << 20);

    // Without CAP_HOT a 1.2 reader reads the entries: the corrupt record
    // is not used.
    let mut b = good.clone();
    le_put(&mut b, rec, 0, 8);
    let caps = u64::from_le_bytes(b[80..88].try_into().unwrap());
    le_put(&mut b, 80, caps & !CAP_HOT, 8);
    let r = open(&b);
    assert_eq!(r.lookup_index(idx, 100), Ok(by_name));
    // Nor does a reader that takes the segment for 1.1 (minor 1).
    let mut b = good.clone();
    le_put(&mut b, rec, 0, 8);
    le_put(&mut b, 12, 1, 4);
    let r = open(&b);
    assert_eq!(r.lookup_index(idx, 100), Ok(by_name));
}
