//! Tests of the identification verdicts.

use super::*;
use crate::model::bandwidth::{Burst, BurstKind};

fn range(from: u64, to: u64, g: f64, big_g: f64) -> Range {
    Range {
        from_bytes: from,
        to_bytes: to,
        g_ns: g,
        G_ns_per_byte: big_g,
        o_s_ns: 500.0,
        o_r_ns: 400.0,
        O_s_ns_per_byte: 0.0,
        O_r_ns_per_byte: 0.01,
    }
}

fn fit() -> LogGpFit {
    LogGpFit {
        eel_ns: 4000.0,
        L_ns: -200.0,
        ranges: vec![range(1, 1024, 3000.0, 0.1), range(1448, 131072, -5e4, 8.0)],
        S_bytes: None,
        points: [1u64, 1024, 1448, 131072]
            .iter()
            .map(|&s| SizePoint {
                size_bytes: s,
                gap_ns: 3000.0 + 8.0 * s as f64,
                o_r_ns: 400.0,
                n: 4,
                ..SizePoint::default()
            })
            .collect(),
        ..LogGpFit::default()
    }
}

fn ci() -> BTreeMap<String, Interval> {
    let mut c = BTreeMap::new();
    c.insert("eel_ns".into(), (3900.0, 4100.0));
    c.insert("L_ns".into(), (-300.0, -100.0));
    for (i, g) in [(0, (2900.0, 3100.0)), (1, (-9e4, 1e4))] {
        c.insert(format!("ranges[{i}].g_ns"), g);
        c.insert(format!("ranges[{i}].G_ns_per_byte"), (0.0, 9.0));
        c.insert(format!("ranges[{i}].o_s_ns"), (400.0, 600.0));
        c.insert(format!("ranges[{i}].o_r_ns"), (300.0, 500.0));
        c.insert(format!("ranges[{i}].O_s_ns_per_byte"), (0.0, 0.0));
        c.insert(format!("ranges[{i}].O_r_ns_per_byte"), (0.005, 0.02));
    }
    c
}

fn udp() -> LinkTraits {
    LinkTraits {
        rendezvous: false,
        ..LinkTraits::default()
    }
}

/// The verdicts on [`fit`] with [`ci`] over udp.
fn judged(instability: Instability) -> netgauge::ext::Identification {
    identify(
        &fit(),
        &ci(),
        &BandwidthFit::default(),
        &udp(),
        instability,
        true,
    )
}

/// The verdicts on `f` with [`ci`] over a link with `traits`: no
/// bandwidth fit, no instability.
fn judged_over(f: &LogGpFit, traits: &LinkTraits) -> Identification {
    identify(
        f,
        &ci(),
        &BandwidthFit::default(),
        traits,
        Instability::None,
        true,
    )
}

/// Asserts the verdict on each (range, field) of `want`.
#[track_caller]
fn assert_ranges(id: &Identification, want: &[(usize, RangeField, Status)]) {
    for &(i, field, status) in want {
        assert_eq!(id.get_range(i, field), status, "range {i}, {field:?}");
    }
}

#[test]
fn negative_crossing_and_bound_values_are_not_identified() {
    let id = judged(Instability::None);
    let not = Status::NotIdentified;
    assert_eq!(id.get(Field::Eel), Status::Identified);
    assert_eq!(id.get(Field::L), not(Reason::Negative));
    assert_eq!(id.get(Field::S), not(Reason::NotApplicable));
    assert_ranges(
        &id,
        &[
            (0, RangeField::Gap, Status::Identified),
            (1, RangeField::Gap, not(Reason::Negative)),
            (0, RangeField::GapPerByte, not(Reason::CrossesZero)),
            (0, RangeField::OSendPerByte, not(Reason::AtBound)),
            (0, RangeField::ORecvPerByte, Status::Identified),
        ],
    );
    assert_eq!(
        id.get(Field::SustainedG),
        not(Reason::NotMeasured),
        "no bandwidth measured"
    );
    // Nothing published as identified is negative or spans zero.
    let f = fit();
    for (i, r) in f.ranges.iter().enumerate() {
        for (fld, v) in [
            (RangeField::Gap, r.g_ns),
            (RangeField::GapPerByte, r.G_ns_per_byte),
        ] {
            if id.get_range(i, fld) == Status::Identified {
                assert!(v > 0.0);
            }
        }
    }
}

#[test]
fn receive_overheads_the_transport_lacks_are_said_so() {
    let one_sided = LinkTraits {
        one_sided: true,
        recv_overhead: false,
        rendezvous: false,
        credit: false,
    };
    let id = judged_over(&fit(), &one_sided);
    let not = Status::NotIdentified;
    assert_ranges(
        &id,
        &[
            (0, RangeField::ORecv, not(Reason::NotApplicable)),
            (1, RangeField::ORecvPerByte, not(Reason::NotApplicable)),
        ],
    );
    // Two-sided, but no o_r reported anywhere: not measured.
    let mut f = fit();
    for p in &mut f.points {
        p.o_r_ns = 0.0;
    }
    let id = judged_over(&f, &udp());
    assert_eq!(id.get_range(0, RangeField::ORecv), not(Reason::NotMeasured));
    // A rendezvous transport with S found, and one without.
    let mpi = LinkTraits::default();
    f.S_bytes = Some(4096);
    let id = judged_over(&f, &mpi);
    assert_eq!(id.get(Field::S), Status::Identified);
    f.S_bytes = None;
    let id = judged_over(&f, &mpi);
    assert_eq!(id.get(Field::S), not(Reason::NotMeasured));
}

#[test]
fn a_shared_core_makes_eel_unstable_and_a_mixed_range_is_a_shaper() {
    let id = judged(Instability::SharedCore);
    assert_eq!(id.get(Field::Eel), Status::NotIdentified(Reason::Unstable));
    // A token bucket: range 1 holds a size whose bursts ran at 0.5 ns/B
    // and one paced at the sustained 8 ns/B.
    let mut f = fit();
    f.points[2].gap_ns = 0.5 * 1448.0;
    let bw = BandwidthFit {
        sustained_G_ns_per_byte: 8.0,
        ci95: (7.9, 8.1),
        status: Status::Identified,
        burst: Some(Burst {
            kind: BurstKind::TokenBucket,
            G_ns_per_byte: 0.5,
            ci95: (0.4, 0.6),
            status: Status::Identified,
            bytes: 4 * 1448,
            at_size_bytes: 1448,
        }),
        ..BandwidthFit::default()
    };
    let id = identify(&f, &ci(), &bw, &udp(), Instability::None, true);
    assert_ranges(
        &id,
        &[
            (
                1,
                RangeField::GapPerByte,
                Status::NotIdentified(Reason::Shaper),
            ),
            (1, RangeField::Gap, Status::NotIdentified(Reason::Shaper)),
        ],
    );
    assert_eq!(id.get(Field::SustainedG), Status::Identified);
    assert_eq!(id.get(Field::BurstG), Status::Identified);
}

#[test]
fn without_intervals_only_what_needs_none_is_judged() {
    let id = identify(
        &fit(),
        &BTreeMap::new(),
        &BandwidthFit::default(),
        &udp(),
        Instability::None,
        false,
    );
    assert_eq!(id.get(Field::Eel), Status::NotAssessed);
    assert_eq!(id.get(Field::L), Status::NotIdentified(Reason::Negative));
    assert_eq!(
        id.get_range(1, RangeField::Gap),
        Status::NotIdentified(Reason::Negative)
    );
    assert_eq!(id.get_range(0, RangeField::Gap), Status::NotAssessed);
}

#[test]
fn logfp_verdicts() {
    let mut id = Identification::default();
    let l = LogfpFit {
        f: Some(3),
        o_min_ns: 200.0,
        o_max_ns: -50.0,
        g_ns: 900.0,
        ..LogfpFit::default()
    };
    let mut c = BTreeMap::new();
    c.insert("logfp.o_min_ns".to_string(), (150.0, 250.0));
    c.insert("logfp.o_max_ns".to_string(), (-90.0, 10.0));
    c.insert("logfp.g_ns".to_string(), (850.0, 950.0));
    c.insert("logfp.f".to_string(), (2.0, 4.0));
    identify_logfp(&mut id, &l, &c);
    assert_eq!(id.get(Field::OMin), Status::Identified);
    assert_eq!(id.get(Field::OMax), Status::NotIdentified(Reason::Negative));
    assert_eq!(id.get(Field::F), Status::Identified);
    c.insert("logfp.f".to_string(), (2.0, f64::INFINITY));
    identify_logfp(&mut id, &l, &c);
    assert_eq!(
        id.get(Field::F),
        Status::NotIdentified(Reason::WideInterval)
    );
}
