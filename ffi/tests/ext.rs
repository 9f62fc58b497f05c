//! ABI 1.1 through the writer and the reader: identification, provenance,
//! bandwidth, latency percentiles, overlap, per-transport records, coverage
//! classes and the class-fallback lookup, in Rust and through the C ABI.

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::ext::{EXT_BANDWIDTH, EXT_LATENCY, EXT_OVERLAP, EXT_V11, NO_RANGE};
use netgauge::writer::SegmentOptions;
use netgauge::{
    flags, Bandwidth, EntryExt, Estimate, Field, Instability, LatencyPercentiles, LookupError,
    Overlap, Params, RangeField, Reader, Reason, Regime, Scheme, SegmentError, SegmentWriter,
    Status, TransportExt, TransportField,
};
use std::ffi::{CStr, CString};

fn writer(p: &TmpPath, cap: usize) -> SegmentWriter {
    SegmentWriter::create_or_open(&p.0, cap, "node001", "tsc").unwrap()
}

/// A writer of 8 entries holding `sample_entry_ext("node002", "raw")`, and
/// that entry.
fn writer_with_sample_ext(p: &TmpPath) -> (SegmentWriter, netgauge::EntryData) {
    let mut w = writer(p, 8);
    let e = sample_entry_ext("node002", "raw");
    w.upsert(&e).unwrap();
    (w, e)
}

#[test]
fn extension_round_trips_and_sets_flags() {
    let p = TmpPath::new("ext-rt");
    let (mut w, e) = writer_with_sample_ext(&p);
    w.upsert(&sample_entry("node003", "udp")).unwrap();
    let r = Reader::open(&p.0).unwrap();
    assert_eq!(r.info().unwrap().abi_minor, 2);

    // Flags the writer derives: UNIDENTIFIED (g of range 1, S), SHAPED.
    let v = r.lookup("node002", "raw", 100).unwrap();
    let base = flags::VALID | flags::HAS_S | flags::HAS_LOGFP | flags::HAS_LOGGPS;
    assert_eq!(v.flags, base | flags::UNIDENTIFIED | flags::SHAPED);
    // An entry without 1.1 data has none of them, and states nothing.
    assert_eq!(r.lookup("node003", "udp", 100).unwrap().flags, base);
    let x0 = r.entry_ext("node003", "udp").unwrap();
    assert_eq!(x0.present, EXT_V11);
    assert_eq!(x0.ident.entry, 0);
    assert!(x0.bandwidth().is_none() && x0.latency().is_empty() && x0.overlap().is_empty());

    // Everything reads back, allocation-free and owned.
    let x = r.entry_ext("node002", "raw").unwrap();
    assert_eq!(
        x.present,
        EXT_V11 | EXT_BANDWIDTH | EXT_LATENCY | EXT_OVERLAP
    );
    assert_eq!(x.to_data(), e.ext);
    assert_eq!(x, r.entry_ext_index(0).unwrap());
    assert_eq!(
        x.ident.get(Field::S),
        Status::NotIdentified(Reason::NotApplicable)
    );
    assert_eq!(
        x.ident.get_range(1, RangeField::Gap),
        Status::NotIdentified(Reason::Negative)
    );
    assert_eq!(x.ident.get_range(0, RangeField::Gap), Status::Identified);
    let b = x.bandwidth().unwrap();
    assert_eq!(b.regime(), Some(Regime::TokenBucket));
    assert_eq!(b.burst_bytes, 32 * 1024);
    assert_eq!(b.range(), Some(1));
    assert!((b.sustained_bytes_per_s() - 1e9 / 8.6).abs() < 1e-3);
    assert_eq!(x.latency().len(), 3);
    assert_eq!(x.latency()[2].size_bytes, 1024);
    assert_eq!(x.overlap()[1].send, Estimate::new(0.9, 0.85, 0.95));
    let mut want = e.clone();
    want.flags = v.flags;
    assert_eq!(r.snapshot_entry(0).unwrap(), want);
    assert_eq!(w.entries()[0], want);
    assert_eq!(
        x.ident.problems(2),
        vec![
            (None, "S", Reason::NotApplicable),
            (Some(1), "g", Reason::Negative)
        ]
    );

    // Replacing the entry with one that states nothing clears every block
    // and the derived flags.
    let mut plain = e.clone();
    plain.ext = Default::default();
    w.upsert(&plain).unwrap();
    let x = r.entry_ext("node002", "raw").unwrap();
    assert_eq!(x.present, EXT_V11);
    assert_eq!(x.latency, EntryExt::default().latency);
    assert_eq!(r.lookup("node002", "raw", 1).unwrap().flags, base);
    assert_eq!(r.entry_ext("nodeX", "raw"), Err(LookupError::NotFound));
    assert_eq!(r.entry_ext_index(2), Err(LookupError::NotFound));
}

#[test]
fn provenance_flags_and_times() {
    let p = TmpPath::new("ext-prov");
    let mut w = writer(&p, 8);
    let mut e = sample_entry("node002", "udp");
    e.flags |= flags::RESTORED | flags::CHANGED;
    e.ext.checked_unix_ns = 5;
    e.ext.changed_unix_ns = 7;
    w.upsert(&e).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let v = r.lookup("node002", "udp", 1).unwrap();
    assert_ne!(v.flags & flags::RESTORED, 0);
    assert_ne!(v.flags & flags::CHANGED, 0);
    assert_eq!(v.flags & (flags::UNSTABLE | flags::CLASS), 0);
    assert_eq!(v.measured_unix_ns, e.measured_unix_ns);
    let x = r.entry_ext("node002", "udp").unwrap();
    assert_eq!((x.checked_unix_ns, x.changed_unix_ns), (5, 7));

    // A stated cause of instability sets UNSTABLE; the flag alone is kept.
    e.flags &= !flags::RESTORED;
    e.ext.instability = Instability::SharedCore;
    w.upsert(&e).unwrap();
    let v = r.lookup("node002", "udp", 1).unwrap();
    assert_eq!(
        v.flags & (flags::UNSTABLE | flags::RESTORED),
        flags::UNSTABLE
    );
    assert_eq!(
        r.entry_ext("node002", "udp").unwrap().instability(),
        Instability::SharedCore
    );
    e.ext.instability = Instability::None;
    e.flags |= flags::UNSTABLE;
    w.upsert(&e).unwrap();
    assert_ne!(
        r.lookup("node002", "udp", 1).unwrap().flags & flags::UNSTABLE,
        0
    );

    // Derived flags a producer sets by hand are recomputed, not trusted.
    e.flags |= flags::UNIDENTIFIED | flags::SHAPED;
    w.upsert(&e).unwrap();
    let v = r.lookup("node002", "udp", 1).unwrap();
    assert_eq!(v.flags & (flags::UNIDENTIFIED | flags::SHAPED), 0);
}

/// Each entry is refused with a reason naming what is wrong.
#[test]
fn writer_validates_the_extension() {
    let p = TmpPath::new("ext-bad");
    let (mut w, ok) = writer_with_sample_ext(&p);
    type Edit = fn(&mut netgauge::EntryData);
    let cases: &[(&str, Edit)] = &[
        ("reserved status code", |e| {
            e.ext
                .ident
                .set(Field::L, Status::NotIdentified(Reason::Unknown(12)))
        }),
        ("entry-level field that does not exist", |e| {
            e.ext.ident.entry |= 1 << 60
        }),
        ("range the entry does not have", |e| {
            e.ext
                .ident
                .set_range(2, RangeField::Gap, Status::Identified)
        }),
        ("entry-level value is not a finite", |e| e.eel_ns = f64::NAN),
        ("range value is not a finite", |e| {
            e.ranges[1].G_ns_per_byte = f64::INFINITY
        }),
        ("S identified but the entry has no S", |e| {
            e.ext.ident.set(Field::S, Status::Identified);
            e.S_bytes = None;
        }),
        ("f identified", |e| {
            e.ext.ident.set(Field::F, Status::Identified);
            e.f = None;
        }),
        ("no bandwidth block", |e| e.ext.bandwidth = None),
        ("unknown bandwidth regime", |e| {
            e.ext.bandwidth.as_mut().unwrap().regime = 3
        }),
        ("range index beyond", |e| {
            e.ext.bandwidth.as_mut().unwrap().range_index = 2
        }),
        ("sustained G", |e| {
            e.ext.bandwidth.as_mut().unwrap().sustained_G_ns_per_byte = Estimate::new(8.6, 8.7, 8.8)
        }),
        ("sustained G", |e| {
            e.ext.bandwidth.as_mut().unwrap().sustained_G_ns_per_byte = Estimate::new(0.0, 0.0, 0.0)
        }),
        ("burst G", |e| {
            e.ext.bandwidth.as_mut().unwrap().burst_G_ns_per_byte = Estimate::NONE
        }),
        ("burst length of 0", |e| {
            e.ext.bandwidth.as_mut().unwrap().burst_bytes = 0
        }),
        ("burst values without a burst regime", |e| {
            e.ext.bandwidth.as_mut().unwrap().regime = Regime::Single as u32
        }),
        ("more than 8 latency sizes", |e| {
            e.ext.latency = (1..=9)
                .map(|s| LatencyPercentiles {
                    size_bytes: s,
                    samples: 1,
                    ..Default::default()
                })
                .collect()
        }),
        ("latency sizes not increasing", |e| {
            e.ext.latency[1].size_bytes = 1
        }),
        ("latency record without samples", |e| {
            e.ext.latency[0].samples = 0
        }),
        ("ordered", |e| e.ext.latency[0].p99_ns = 1.0),
        ("finite", |e| e.ext.latency[0].max_ns = f64::NAN),
        ("one record per range", |e| {
            e.ext.overlap.pop();
        }),
        ("overlap identified but the entry has no overlap", |e| {
            e.ext.overlap.clear()
        }),
        ("fraction in [0, 1]", |e| {
            e.ext.overlap[0].send = Estimate::new(1.2, 1.1, 1.3)
        }),
        ("fraction in [0, 1]", |e| {
            e.ext.overlap[1].recv = Estimate::new(0.0, -0.1, 0.1)
        }),
        ("unknown instability code", |e| {
            e.ext.instability = Instability::Unknown(9)
        }),
        ("CLASS flag on a peer name", |e| e.flags |= flags::CLASS),
    ];
    for (want, edit) in cases {
        let mut e = ok.clone();
        edit(&mut e);
        match w.upsert(&e) {
            Err(SegmentError::BadEntry(why)) => {
                assert!(why.contains(want), "{want}: got {why}")
            }
            other => panic!("{want}: expected BadEntry, got {other:?}"),
        }
    }
    // Not identified values may be anything (NaN, negative, out of range).
    let mut e = ok.clone();
    e.ext
        .ident
        .not_identified_range(0, RangeField::OverlapSend, Reason::Unstable);
    e.ext.overlap[0].send = Estimate::new(f64::NAN, -3.0, 7.0);
    e.ext
        .ident
        .not_identified(Field::SustainedG, Reason::WideInterval);
    e.ext.bandwidth.as_mut().unwrap().sustained_G_ns_per_byte = Estimate::NONE;
    e.eel_ns = f64::NAN;
    e.ext.ident.not_identified(Field::Eel, Reason::NotMeasured);
    w.upsert(&e).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let x = r.entry_ext("node002", "raw").unwrap();
    assert!(x.overlap()[0].send.value.is_nan());
    assert!(x
        .bandwidth()
        .unwrap()
        .sustained_G_ns_per_byte
        .value
        .is_nan());
    assert_eq!(
        x.ident.get(Field::Eel),
        Status::NotIdentified(Reason::NotMeasured)
    );
    // The 1.0 view of the same entry is unchanged by the statuses.
    assert!(r.lookup("node002", "raw", 1).unwrap().eel_ns.is_nan());
}

fn class_segment(p: &TmpPath) -> SegmentWriter {
    let mut w = writer(p, 16);
    w.upsert(&derived_entry("n1", "udp", 1)).unwrap();
    w.upsert(&derived_entry("@leaf0", "udp", 100)).unwrap();
    w.upsert(&derived_entry("@leaf0", "rdma", 101)).unwrap();
    w.upsert(&derived_entry("@leaf1", "udp", 110)).unwrap();
    w.set_peer_classes([
        ("n1", "@leaf0"),
        ("n2", "@leaf0"),
        ("n3", "@leaf1"),
        ("n4", "@leaf9"),
    ])
    .unwrap();
    w
}

#[test]
fn class_fallback_lookups() {
    let p = TmpPath::new("ext-class");
    let mut w = class_segment(&p);
    let r = Reader::open(&p.0).unwrap();

    // A pair with its own entry: exactly what lookup answers.
    let own = r.lookup_or_class("n1", "udp", 5).unwrap();
    assert_eq!(own, r.lookup("n1", "udp", 5).unwrap());
    assert_eq!(own.flags & flags::CLASS, 0);
    assert_eq!(derived_k(&own, 0), Some(1));
    // Without one: the class's entry for that transport, flagged.
    let c = r.lookup_or_class("n2", "udp", 1500).unwrap();
    assert_eq!(derived_k(&c, 1), Some(100));
    assert_ne!(c.flags & flags::CLASS, 0);
    assert_eq!(
        derived_k(&r.lookup_or_class("n1", "rdma", 5).unwrap(), 0),
        Some(101)
    );
    assert_eq!(
        derived_k(&r.lookup_or_class("n3", "udp", 5).unwrap(), 0),
        Some(110)
    );
    // The 1.0 lookup keeps its exact behaviour.
    assert_eq!(r.lookup("n2", "udp", 5), Err(LookupError::NotFound));
    // Class entries are entries: CLASS is stored on them.
    let ce = r.lookup("@leaf0", "udp", 5).unwrap();
    assert_ne!(ce.flags & flags::CLASS, 0);
    // No entry for the transport in the class, a class without entries, an
    // unmapped peer: NotFound.
    assert_eq!(
        r.lookup_or_class("n3", "rdma", 5),
        Err(LookupError::NotFound)
    );
    assert_eq!(
        r.lookup_or_class("n4", "udp", 5),
        Err(LookupError::NotFound)
    );
    assert_eq!(
        r.lookup_or_class("n5", "udp", 5),
        Err(LookupError::NotFound)
    );
    assert_eq!(r.lookup_or_class("", "udp", 5), Err(LookupError::NotFound));

    // Index path: own index, else the class entry's index.
    assert_eq!(r.index_or_class("n1", "udp"), Ok(0));
    assert_eq!(r.index_or_class("n2", "udp"), Ok(1));
    assert_eq!(r.index_or_class("n2", "rdma"), Ok(2));
    assert_eq!(r.index_or_class("n5", "udp"), Err(LookupError::NotFound));
    let by_index = r.lookup_index(1, 1500).unwrap();
    assert_eq!(by_index, c);

    // Map queries.
    assert_eq!(r.peer_class("n2").unwrap().as_deref(), Some("@leaf0"));
    assert_eq!(r.peer_class("n5").unwrap(), None);
    assert_eq!(w.peer_class("n3"), Some("@leaf1"));
    let map = r.class_map().unwrap();
    assert_eq!(map.len(), 4);
    assert_eq!(map[3], ("n4".to_string(), "@leaf9".to_string()));

    // A stale own entry stays stale: the class does not stand in for it.
    w.mark_stale("n1", "udp").unwrap();
    assert_eq!(r.lookup_or_class("n1", "udp", 5), Err(LookupError::Stale));
    // A measured pair takes over from its class at once.
    w.upsert(&derived_entry("n2", "udp", 7)).unwrap();
    let v = r.lookup_or_class("n2", "udp", 5).unwrap();
    assert_eq!((derived_k(&v, 0), v.flags & flags::CLASS), (Some(7), 0));
    // Re-mapping moves a peer; all or nothing on errors.
    w.set_peer_classes([("n3", "@leaf0")]).unwrap();
    assert_eq!(
        derived_k(&r.lookup_or_class("n3", "udp", 5).unwrap(), 0),
        Some(100)
    );
    let before = r.class_map().unwrap();
    for bad in [
        [("n6", "@leaf0"), ("@n7", "@leaf0")],
        [("n6", "@leaf0"), ("n7", "leaf0")],
        [("n6", "@leaf0"), ("n7", "@")],
        [("n6", "@leaf0"), ("", "@leaf0")],
    ] {
        assert!(
            matches!(w.set_peer_classes(bad), Err(SegmentError::BadClass(_))),
            "{bad:?}"
        );
    }
    assert_eq!(r.class_map().unwrap(), before);
    // The class table and the map are bounded by the segment's options.
    let many: Vec<String> = (0..20).map(|i| format!("m{i}")).collect();
    let err = w
        .set_peer_classes(many.iter().map(|p| (p.as_str(), "@leaf0")))
        .unwrap_err();
    assert_eq!(
        err,
        SegmentError::TableFull {
            table: "peer → class map",
            capacity: 16
        }
    );
    let classes: Vec<String> = (0..20).map(|i| format!("@c{i}")).collect();
    let err = w
        .set_peer_classes(classes.iter().map(|c| ("n1", c.as_str())))
        .unwrap_err();
    assert!(matches!(
        err,
        SegmentError::TableFull { table: "class", .. }
    ));
    assert_eq!(r.class_map().unwrap(), before);
}

#[test]
fn transport_records() {
    let p = TmpPath::new("ext-tx");
    let mut w = writer(&p, 8);
    let r = Reader::open(&p.0).unwrap();
    assert_eq!(r.transport_ext("udp"), Err(LookupError::NotFound));
    let t = sample_transport_ext(0.0);
    w.set_transport_ext("udp", &t).unwrap();
    w.set_transport_ext("rdma", &sample_transport_ext(0.5))
        .unwrap();
    let got = r.transport_ext("udp").unwrap();
    assert_eq!(got, t);
    assert_eq!(got.penalties(Scheme::Outgoing).len(), 5);
    assert_eq!(got.penalties(Scheme::Mixed).len(), 0);
    assert_eq!(got.penalty(Scheme::Incoming, 4).unwrap().value, 4.0);
    assert_eq!(got.penalty(Scheme::Incoming, 5), None);
    assert_eq!(
        got.status(TransportField::GammaI),
        Status::NotIdentified(Reason::CrossesZero)
    );
    assert_eq!(got.sharing().unwrap()[0].value, 0.75);
    assert_eq!(got.bisection().unwrap().nodes, 16);
    assert_eq!(
        r.transport_ext("rdma")
            .unwrap()
            .penalty(Scheme::Outgoing, 1)
            .unwrap()
            .value,
        1.5
    );
    assert_eq!(r.transport_ext("raw"), Err(LookupError::NotFound));
    assert_eq!(r.transport_ext(""), Err(LookupError::NotFound));
    // Replace in place.
    let mut t2 = t;
    t2.set_penalties(
        Scheme::Mixed,
        &[Estimate::new(2.0, 1.9, 2.1)],
        Status::Identified,
    )
    .unwrap();
    w.set_transport_ext("udp", &t2).unwrap();
    assert_eq!(r.transport_ext("udp").unwrap().n_k, [5, 4, 1]);
    let all = r.transports_ext().unwrap();
    assert_eq!(
        all.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["udp", "rdma"]
    );
    assert_eq!(w.transport_ext("udp"), Some(&t2));
    // At most 8 transports.
    for i in 0..6 {
        w.set_transport_ext(&format!("t{i}"), &TransportExt::default())
            .unwrap();
    }
    assert_eq!(
        w.set_transport_ext("t6", &TransportExt::default()),
        Err(SegmentError::TableFull {
            table: "transport record",
            capacity: 8
        })
    );
    // Validation.
    type Edit = fn(&mut TransportExt);
    let cases: &[(&str, Edit)] = &[
        ("unknown present bits", |t| t.present |= 1 << 7),
        ("more than 8", |t| t.n_k[0] = 9),
        ("present bits disagree", |t| {
            t.present &= !netgauge::ext::TX_PENALTIES
        }),
        ("reserved status", |t| {
            t.set_status(
                TransportField::Beta,
                Status::NotIdentified(Reason::Unknown(11)),
            )
        }),
        ("unknown status field", |t| t.status |= 1 << 40),
        ("identified penalty", |t| {
            t.penalty[0][2] = Estimate::new(-1.0, -2.0, 0.0)
        }),
        ("penalties identified but none set", |t| {
            t.set_status(TransportField::PenaltyMixed, Status::Identified)
        }),
        ("sharing parameter", |t| t.beta = Estimate::NONE),
        ("β is not positive", |t| {
            t.beta = Estimate::new(0.0, -0.1, 0.1)
        }),
        ("bisection bandwidths", |t| {
            t.bisection.max_bytes_per_s = 1.0
        }),
        ("≥ 2 nodes", |t| t.bisection.nodes = 1),
        ("bisection identified but not set", |t| {
            t.present &= !netgauge::ext::TX_BISECTION
        }),
    ];
    for (want, edit) in cases {
        let mut t = t;
        edit(&mut t);
        match w.set_transport_ext("udp", &t) {
            Err(SegmentError::BadTransport(why)) => assert!(why.contains(want), "{want}: {why}"),
            other => panic!("{want}: {other:?}"),
        }
    }
    assert!(matches!(
        w.set_transport_ext("a-very-long-transport", &t),
        Err(SegmentError::BadTransport(_))
    ));
    assert_eq!(r.transport_ext("udp").unwrap(), t2);
}

#[test]
fn reopen_keeps_the_extension() {
    let p = TmpPath::new("ext-reopen");
    let opts = SegmentOptions {
        capacity_entries: 16,
        class_capacity: 4,
        map_capacity: 32,
    };
    let mut w = SegmentWriter::create_or_open_with(&p.0, &opts, "node001", "tsc").unwrap();
    w.upsert(&sample_entry_ext("n1", "raw")).unwrap();
    w.upsert(&derived_entry("@sw", "raw", 3)).unwrap();
    w.set_transport_ext("raw", &sample_transport_ext(0.0))
        .unwrap();
    w.set_peer_classes([("n1", "@sw"), ("n2", "@sw")]).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let before = (
        r.snapshot().unwrap(),
        r.class_map().unwrap(),
        r.transports_ext().unwrap(),
    );
    drop(w);
    let mut w = SegmentWriter::create_or_open_with(&p.0, &opts, "node001", "tsc").unwrap();
    assert_eq!(w.peer_class("n2"), Some("@sw"));
    assert_eq!(w.transport_ext("raw"), Some(&sample_transport_ext(0.0)));
    let after = (
        r.snapshot().unwrap(),
        r.class_map().unwrap(),
        r.transports_ext().unwrap(),
    );
    assert_eq!(before, after);
    // Updates after the restart keep working, on the same mapping.
    w.set_peer_classes([("n3", "@sw")]).unwrap();
    assert_eq!(
        derived_k(&r.lookup_or_class("n3", "raw", 1).unwrap(), 0),
        Some(3)
    );
    drop(w);
    // Other options: replaced by a new segment.
    let opts2 = SegmentOptions {
        map_capacity: 64,
        ..opts
    };
    let w = SegmentWriter::create_or_open_with(&p.0, &opts2, "node001", "tsc").unwrap();
    assert_eq!(w.entries().len(), 0);
    assert!(SegmentWriter::create_or_open_with(
        &p.0,
        &SegmentOptions {
            class_capacity: 0,
            ..opts
        },
        "n",
        "c"
    )
    .is_err());
}

#[test]
fn c_abi_of_the_extension() {
    let p = TmpPath::new("ext-capi");
    let mut w = class_segment(&p);
    w.upsert(&sample_entry_ext("n9", "raw")).unwrap();
    w.set_transport_ext("udp", &sample_transport_ext(0.0))
        .unwrap();
    let path = CString::new(p.0.to_str().unwrap()).unwrap();
    let rr = Reader::open(&p.0).unwrap();
    // SAFETY: valid C strings and out-pointers; the reader is closed once.
    unsafe {
        let r = ng_open(path.as_ptr());
        assert!(!r.is_null());
        let mut out = Params::default();
        assert_eq!(
            ng_lookup_or_class(r, c"n2".as_ptr(), c"udp".as_ptr(), 1500, &mut out),
            0
        );
        assert_eq!(derived_k(&out, 1), Some(100));
        assert_ne!(out.flags & flags::CLASS, 0);
        assert_eq!(
            ng_lookup_or_class(r, c"n5".as_ptr(), c"udp".as_ptr(), 1, &mut out),
            -libc::ENOENT
        );
        assert_eq!(
            ng_lookup_or_class(r, c"n2".as_ptr(), core::ptr::null(), 1, &mut out),
            -libc::EINVAL
        );
        assert_eq!(
            ng_lookup_or_class(r, c"n2".as_ptr(), c"udp".as_ptr(), 1, core::ptr::null_mut()),
            -libc::EINVAL
        );
        assert_eq!(ng_index_or_class(r, c"n2".as_ptr(), c"rdma".as_ptr()), 2);
        assert_eq!(
            ng_index_or_class(r, c"zz".as_ptr(), c"rdma".as_ptr()),
            -libc::ENOENT
        );
        assert_eq!(
            ng_index_or_class(core::ptr::null(), c"n2".as_ptr(), c"rdma".as_ptr()),
            -libc::EINVAL
        );

        let mut x = EntryExt::default();
        assert_eq!(
            ng_get_entry_ext(r, c"n9".as_ptr(), c"raw".as_ptr(), &mut x),
            0
        );
        assert_eq!(x, rr.entry_ext("n9", "raw").unwrap());
        let i = rr.index("n9", "raw").unwrap() as i32;
        let mut y = EntryExt::default();
        assert_eq!(ng_get_entry_ext_index(r, i, &mut y), 0);
        assert_eq!(x, y);
        assert_eq!(ng_get_entry_ext_index(r, -1, &mut y), -libc::ENOENT);
        assert_eq!(ng_get_entry_ext_index(r, 99, &mut y), -libc::ENOENT);
        assert_eq!(
            ng_get_entry_ext_index(r, 0, core::ptr::null_mut()),
            -libc::EINVAL
        );
        assert_eq!(
            ng_get_entry_ext(r, c"n9".as_ptr(), c"udp".as_ptr(), &mut y),
            -libc::ENOENT
        );
        assert_eq!(ng_ident_status(&x.ident, 2), 5); // S: not applicable
        assert_eq!(ng_ident_status(&x.ident, 0), 1); // EEL: identified
        assert_eq!(ng_ident_range_status(&x.ident, 1, 0), 2); // g of range 1: negative
        assert_eq!(ng_ident_range_status(&x.ident, 8, 0), 0);
        assert_eq!(ng_ident_range_status(&x.ident, -1, 0), 0);
        assert_eq!(ng_ident_status(core::ptr::null(), 0), 0);
        assert_eq!(ng_ident_status(&x.ident, 99), 0);
        assert_eq!(CStr::from_ptr(ng_status_name(3)), c"crosses_zero");
        assert_eq!(CStr::from_ptr(ng_status_name(12)), c"reserved");
        assert_eq!(CStr::from_ptr(ng_status_name(1000)), c"reserved");

        let mut t = TransportExt::default();
        assert_eq!(ng_get_transport_ext(r, c"udp".as_ptr(), &mut t), 0);
        assert_eq!(t, sample_transport_ext(0.0));
        assert_eq!(
            ng_get_transport_ext(r, c"raw".as_ptr(), &mut t),
            -libc::ENOENT
        );
        assert_eq!(
            ng_get_transport_ext(r, core::ptr::null(), &mut t),
            -libc::EINVAL
        );
        assert_eq!(
            ng_get_transport_ext(r, c"udp".as_ptr(), core::ptr::null_mut()),
            -libc::EINVAL
        );

        let mut cls = [0 as core::ffi::c_char; 64];
        assert_eq!(ng_peer_class(r, c"n3".as_ptr(), cls.as_mut_ptr(), 64), 0);
        assert_eq!(CStr::from_ptr(cls.as_ptr()), c"@leaf1");
        assert_eq!(
            ng_peer_class(r, c"n3".as_ptr(), cls.as_mut_ptr(), 6),
            -libc::ERANGE
        );
        assert_eq!(
            ng_peer_class(r, c"n5".as_ptr(), cls.as_mut_ptr(), 64),
            -libc::ENOENT
        );
        assert_eq!(
            ng_peer_class(r, core::ptr::null(), cls.as_mut_ptr(), 64),
            -libc::EINVAL
        );
        assert_eq!(ng_abi_version(), 1 << 16 | 2);

        // Heartbeat rule: a writer gone makes every 1.1 lookup stale too.
        w.shutdown();
        assert_eq!(
            ng_lookup_or_class(r, c"n2".as_ptr(), c"udp".as_ptr(), 1, &mut out),
            -libc::ESTALE
        );
        assert_eq!(ng_get_entry_ext_index(r, 0, &mut y), -libc::ESTALE);
        assert_eq!(
            ng_get_transport_ext(r, c"udp".as_ptr(), &mut t),
            -libc::ESTALE
        );
        ng_close(r);
    }
}

#[test]
fn bandwidth_constructors() {
    let b = Bandwidth::sustained(Estimate::new(1.0, 0.9, 1.1), None);
    assert_eq!(b.range_index, NO_RANGE);
    assert_eq!(b.range(), None);
    assert_eq!(b.regime(), Some(Regime::Single));
    assert_eq!(b.burst_G_ns_per_byte, Estimate::default());
    let b = b.with_burst(Regime::Credit, Estimate::new(0.1, 0.1, 0.1), 4096);
    assert_eq!((b.regime(), b.burst_bytes), (Some(Regime::Credit), 4096));
    assert_eq!(Overlap::default().send.value, 0.0);
}

#[cfg(feature = "serde")]
#[test]
fn extension_serializes_with_absent_values_as_null() {
    let e = sample_entry_ext("n", "raw");
    let mut x = e.ext.clone();
    x.ident
        .not_identified(Field::SustainedG, Reason::WideInterval);
    x.bandwidth.as_mut().unwrap().sustained_G_ns_per_byte = Estimate::NONE;
    let json = serde_json::to_string(&x).unwrap();
    assert!(json.contains("null"));
    let back: netgauge::EntryExtData = serde_json::from_str(&json).unwrap();
    let bs = back.bandwidth.unwrap().sustained_G_ns_per_byte;
    assert!(bs.value.is_nan() && bs.lo.is_nan());
    let mut want = x.clone();
    want.bandwidth = None;
    let mut got = back.clone();
    got.bandwidth = None;
    assert_eq!(got, want);
    // Missing fields read as their defaults (a state file written before).
    let empty: netgauge::EntryExtData = serde_json::from_str("{}").unwrap();
    assert_eq!(empty, Default::default());
    let t = sample_transport_ext(0.0);
    let back: TransportExt = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(
        back.penalties(Scheme::Outgoing),
        t.penalties(Scheme::Outgoing)
    );
}

#[cfg(not(feature = "serde"))]
#[test]
#[ignore = "needs the serde feature: cargo test -p netgauge-ffi --features serde"]
fn extension_serializes_with_absent_values_as_null() {}

#[test]
fn derived_extension_checker_sees_every_field() {
    let p = TmpPath::new("ext-derived");
    let mut w = writer(&p, 4);
    w.upsert(&derived_entry("a", "udp", 42)).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let x = r.entry_ext("a", "udp").unwrap();
    assert_eq!(derived_ext_k(&x), Some(42));
    assert_eq!(x.to_data(), derived_ext(42));
    // One changed field anywhere is seen.
    let mut y = x;
    y.latency[7].max_ns += 1.0;
    assert_eq!(derived_ext_k(&y), None);
    let mut y = x;
    y.overlap[3].recv.hi += 1.0;
    assert_eq!(derived_ext_k(&y), None);
    let mut y = x;
    y.ident.range[3] = 0x1;
    assert_eq!(derived_ext_k(&y), None);
}

#[test]
fn lookups_with_statuses() {
    let p = TmpPath::new("ext-status");
    let mut w = class_segment(&p);
    w.upsert(&sample_entry_ext("n9", "raw")).unwrap();
    let r = Reader::open(&p.0).unwrap();
    let (v, st) = r.lookup_status("n9", "raw", 100).unwrap();
    assert_eq!(v, r.lookup("n9", "raw", 100).unwrap());
    assert_eq!(st.range_index, 0);
    assert_eq!(st.get(Field::Eel), Status::Identified);
    assert_eq!(st.get_range(RangeField::Gap), Status::Identified);
    assert_eq!(st.get_range(RangeField::OSend), Status::NotAssessed);
    assert!(!st.all_identified());
    let (v, st) = r.lookup_status("n9", "raw", 10_000).unwrap();
    assert_eq!(v.range_from_bytes, 8192);
    assert_eq!(st.range_index, 1);
    assert_eq!(
        st.get_range(RangeField::Gap),
        Status::NotIdentified(Reason::Negative)
    );
    let i = r.index("n9", "raw").unwrap();
    assert_eq!(r.lookup_index_status(i, 10_000).unwrap(), (v, st));
    // Beyond the last range: the last range's statuses.
    assert_eq!(
        r.lookup_status("n9", "raw", 1 << 40).unwrap().1.range_index,
        1
    );
    // Class fallback applies; a fully identified entry says so.
    let (v, st) = r.lookup_status("n2", "udp", 2500).unwrap();
    assert_ne!(v.flags & flags::CLASS, 0);
    assert_eq!(st.range_index, 2);
    assert_eq!(st.get(Field::BurstG), Status::Identified);
    let mut e = sample_entry("full", "udp");
    // Not the bandwidth fields: the writer refuses them without the block.
    for f in &Field::ALL[..7] {
        e.ext.ident.set(*f, Status::Identified);
    }
    for f in RangeField::ALL[..6].iter() {
        e.ext.ident.set_all_ranges(2, *f, Status::Identified);
    }
    w.upsert(&e).unwrap();
    assert!(r
        .lookup_status("full", "udp", 1)
        .unwrap()
        .1
        .all_identified());
    assert_eq!(
        r.lookup_status("none", "udp", 1),
        Err(LookupError::NotFound)
    );
    assert_eq!(r.lookup_index_status(99, 1), Err(LookupError::NotFound));
    // C.
    let path = CString::new(p.0.to_str().unwrap()).unwrap();
    // SAFETY: valid pointers; the reader is closed once.
    unsafe {
        let cr = ng_open(path.as_ptr());
        let mut out = Params::default();
        let mut cst = netgauge::ParamsStatus::default();
        assert_eq!(
            ng_lookup_status(
                cr,
                c"n9".as_ptr(),
                c"raw".as_ptr(),
                10_000,
                &mut out,
                &mut cst
            ),
            0
        );
        assert_eq!((cst.range_index, cst.range & 0xF), (1, 2));
        assert_eq!(
            ng_lookup_index_status(cr, i as i32, 10_000, &mut out, &mut cst),
            0
        );
        assert_eq!(cst.range & 0xF, 2);
        assert_eq!(
            ng_lookup_status(
                cr,
                c"n9".as_ptr(),
                c"raw".as_ptr(),
                1,
                &mut out,
                core::ptr::null_mut()
            ),
            -libc::EINVAL
        );
        assert_eq!(
            ng_lookup_index_status(cr, -1, 1, &mut out, &mut cst),
            -libc::ENOENT
        );
        ng_close(cr);
    }
}
