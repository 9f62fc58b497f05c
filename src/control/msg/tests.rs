use super::*;

fn verbs_ep() -> VerbsEndpoint {
    VerbsEndpoint {
        session_nonce: 7,
        qpn: 0x11,
        psn: 0xabcdef,
        gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1],
        lid: 0,
        mtu: 3,
        rkey: 0x1234,
        addr: 0x7f00_0000_0000,
        len_bytes: 1 << 16,
        max_inline_bytes: 0,
        tokens: 16,
        token_bytes: 1088,
        eager_max_bytes: 1024,
        max_msg_bytes: 1 << 16,
    }
}

fn endpoints(v: Option<VerbsEndpoint>) -> Msg {
    Msg::Endpoints(Endpoints {
        node: "a".into(),
        mac: [0; 6],
        ifindex: 0,
        udp_port: 7471,
        raw_ok: false,
        verbs: v,
    })
}

#[test]
fn verbs_endpoint_round_trips_and_is_checked() {
    let m = endpoints(Some(verbs_ep()));
    let b = encode(&m).unwrap();
    let back: Msg = decode(&b).unwrap();
    assert_eq!(back, m);
    back.validate().unwrap();
    endpoints(None).validate().unwrap();
    let bad = [
        VerbsEndpoint {
            qpn: 1 << 24,
            ..verbs_ep()
        },
        VerbsEndpoint {
            psn: 1 << 24,
            ..verbs_ep()
        },
        VerbsEndpoint {
            mtu: 0,
            ..verbs_ep()
        },
        VerbsEndpoint {
            mtu: 6,
            ..verbs_ep()
        },
        VerbsEndpoint {
            addr: u64::MAX,
            ..verbs_ep()
        },
        VerbsEndpoint {
            session_nonce: 0,
            ..verbs_ep()
        },
    ];
    for v in bad {
        let m = endpoints(Some(v.clone()));
        assert!(
            matches!(m.validate(), Err(ControlError::Malformed(_))),
            "{v:?} accepted"
        );
        // The same rejection after a trip through the codec.
        let back: Msg = decode(&encode(&m).unwrap()).unwrap();
        assert!(back.validate().is_err());
    }
}

fn order() -> StreamOrder {
    StreamOrder {
        nonce: 3,
        partner: "b".into(),
        transport: Kind::Udp,
        size_bytes: 65536,
        burst: 16,
        start_unix_ns: 1,
        duration_ns: 2_000_000_000,
        max_bytes: 64 << 20,
        bidirectional: true,
    }
}

#[test]
fn contention_messages_round_trip_and_are_checked() {
    let ok = [
        Msg::StreamOrder(order()),
        Msg::StreamResult(StreamResult {
            nonce: 3,
            out_bytes_per_s: 1e7,
            in_bytes_per_s: f64::NAN,
            rounds: 4,
            bytes: 1 << 20,
            error: None,
        }),
        Msg::Bisection(BisectionReport {
            transport: Kind::Udp,
            result: netgauge::Bisection {
                min_bytes_per_s: 1.0,
                median_bytes_per_s: 2.0,
                mean_bytes_per_s: 2.0,
                max_bytes_per_s: 3.0,
                nodes: 4,
                rounds: 2,
                msg_bytes: 65536,
                measured_unix_ns: 5,
            },
        }),
        Msg::ProbeRequest(ProbeRequest {
            session_nonce: 1,
            transport: Kind::Udp,
            sizes: SizePlan::Flow { bytes: 1 << 30 },
            driver: "a".into(),
            driver_mac: None,
        }),
        Msg::ProbeReject(ProbeReject {
            session_nonce: 1,
            reason: RejectReason::Budget,
        }),
    ];
    for m in ok {
        m.validate().unwrap();
        let back: Msg = decode(&encode(&m).unwrap()).unwrap();
        match (&back, &m) {
            (Msg::StreamResult(a), Msg::StreamResult(b)) => {
                assert!(a.in_bytes_per_s.is_nan() && a.out_bytes_per_s == b.out_bytes_per_s)
            }
            _ => assert_eq!(back, m),
        }
    }
    let bad = [
        StreamOrder {
            partner: String::new(),
            ..order()
        },
        StreamOrder {
            duration_ns: 0,
            ..order()
        },
        StreamOrder {
            duration_ns: MAX_STREAM_NS + 1,
            ..order()
        },
        StreamOrder {
            size_bytes: 0,
            ..order()
        },
        StreamOrder {
            burst: 1,
            ..order()
        },
        StreamOrder {
            max_bytes: 10,
            ..order()
        },
    ];
    for o in bad {
        assert!(Msg::StreamOrder(o.clone()).validate().is_err(), "{o:?}");
    }
    let b = |min: f64, max: f64, nodes| {
        Msg::Bisection(BisectionReport {
            transport: Kind::Udp,
            result: netgauge::Bisection {
                min_bytes_per_s: min,
                median_bytes_per_s: 2.0,
                mean_bytes_per_s: 2.0,
                max_bytes_per_s: max,
                nodes,
                rounds: 1,
                msg_bytes: 1,
                measured_unix_ns: 0,
            },
        })
    };
    assert!(b(f64::NAN, 3.0, 2).validate().is_err());
    assert!(b(2.5, 3.0, 2).validate().is_err());
    assert!(b(1.0, 3.0, 1).validate().is_err());
    assert!(b(1.0, 3.0, 2).validate().is_ok());
}

/// The variants older daemons know keep their bincode tags: the new
/// ones were appended.
#[test]
fn old_variants_keep_their_tags() {
    let tag = |m: &Msg| u32::from_le_bytes(encode(m).unwrap()[..4].try_into().unwrap());
    assert_eq!(tag(&Msg::Bye), 8);
    assert_eq!(tag(&Msg::ProbeAlive(ProbeDone { session_nonce: 1 })), 9);
    assert_eq!(tag(&Msg::StreamOrder(order())), 10);
    let round = Msg::RoundDone(RoundDone { round: 1, bytes: 0 });
    assert_eq!(tag(&round), 15);
    let plan = |p: &SizePlan| u32::from_le_bytes(encode(p).unwrap()[..4].try_into().unwrap());
    assert_eq!(plan(&SizePlan::Flow { bytes: 1 }), 2);
    let reason = |r: &RejectReason| u32::from_le_bytes(encode(r).unwrap()[..4].try_into().unwrap());
    assert_eq!(reason(&RejectReason::Quiet), 4);
    assert_eq!(reason(&RejectReason::NotExpected), 6);
}

#[test]
fn schedule_and_matrix_messages_round_trip_and_are_checked() {
    use crate::cluster::schedule::{Purpose, Reference};
    let summary = EntrySummary {
        peer: "node0042".into(),
        transport: "udp".into(),
        eel_ns: 9300.0,
        g_ns: 1200.5,
        G_ns_per_byte: 0.8,
        flags: 1,
        measured_unix_ns: 1_700_000_000_000_000_000,
        class: Some("@leaf01".into()),
    };
    let good = [
        Msg::RoundRequest(RoundRequest {
            driver: "node0001".into(),
            round: 170_000_123,
            job: Job::FullSweep(Purpose::Pair),
        }),
        Msg::RoundRequest(RoundRequest {
            driver: "node0001".into(),
            round: 1,
            job: Job::Confirm(Reference::Class),
        }),
        Msg::RoundReply(RoundReply {
            round: 3,
            declined: Some(RejectReason::Quiet),
        }),
        Msg::RoundReply(RoundReply {
            round: 3,
            declined: None,
        }),
        Msg::RoundDone(RoundDone {
            round: 3,
            bytes: 812_345,
        }),
        Msg::Entries(EntriesRequest {
            offset: 256,
            max: 256,
        }),
        Msg::EntriesReply(EntriesReply {
            node: "node0001".into(),
            total: 300,
            offset: 256,
            entries: vec![summary.clone(); 44],
        }),
    ];
    for m in &good {
        let b = encode(m).unwrap();
        let back: Msg = decode(&b).unwrap();
        assert_eq!(&back, m);
        back.validate().unwrap();
        for n in 0..b.len() {
            assert!(decode::<Msg>(&b[..n]).is_err(), "{} cut at {n}", m.kind());
        }
    }
    // A full page with the longest names fits a frame.
    let long = EntrySummary {
        peer: "n".repeat(63),
        transport: "t".repeat(15),
        class: Some(format!("@{}", "c".repeat(62))),
        ..summary.clone()
    };
    let page = Msg::EntriesReply(EntriesReply {
        node: "n".repeat(63),
        total: 256,
        offset: 0,
        entries: vec![long; MAX_ENTRIES_PER_REPLY],
    });
    assert!(encode(&page).unwrap().len() < MAX_FRAME_BYTES - 1024);
    let bad = [
        Msg::RoundRequest(RoundRequest {
            driver: String::new(),
            round: 1,
            job: Job::Fanout,
        }),
        Msg::Entries(EntriesRequest {
            offset: 0,
            max: MAX_ENTRIES_PER_REPLY as u32 + 1,
        }),
        Msg::EntriesReply(EntriesReply {
            node: "a".into(),
            total: 10,
            offset: 0,
            entries: vec![summary.clone(); 11],
        }),
        Msg::EntriesReply(EntriesReply {
            node: "a".into(),
            total: 1,
            offset: 0,
            entries: vec![EntrySummary {
                peer: "x\u{7}".into(),
                ..summary
            }],
        }),
    ];
    for m in &bad {
        assert!(m.validate().is_err(), "{m:?} accepted");
    }
}

#[test]
fn truncated_verbs_endpoints_never_decode() {
    let b = encode(&endpoints(Some(verbs_ep()))).unwrap();
    for n in 0..b.len() {
        assert!(decode::<Msg>(&b[..n]).is_err(), "{n} bytes decoded");
    }
}
