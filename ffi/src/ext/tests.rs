use super::*;

#[test]
fn status_codes_round_trip() {
    for c in 0..16u8 {
        let s = Status::from_code(c);
        assert_eq!(s.code(), c);
        assert_eq!(s.is_known(), !(11..=14).contains(&c), "{c}");
    }
    assert_eq!(Status::from_code(0x31), Status::Identified);
    assert_eq!(Status::NotIdentified(Reason::Other).code(), 15);
    assert_eq!(
        Status::NotIdentified(Reason::CrossesZero).name(),
        "crosses_zero"
    );
}

#[test]
fn identification_nibbles() {
    let mut id = Identification::default();
    assert!(!id.any_not_identified(8));
    id.set(Field::Eel, Status::Identified);
    id.not_identified(Field::S, Reason::NotApplicable);
    id.not_identified_range(2, RangeField::Gap, Reason::Negative);
    id.set_range(2, RangeField::OverlapRecv, Status::Identified);
    id.set_range(8, RangeField::Gap, Status::Identified); // ignored
    assert_eq!(id.entry, 0x0000_0000_0000_0501);
    assert_eq!(id.range[2], 0x1000_0002);
    assert_eq!(
        id.get(Field::S),
        Status::NotIdentified(Reason::NotApplicable)
    );
    assert_eq!(
        id.get_range(2, RangeField::Gap),
        Status::NotIdentified(Reason::Negative)
    );
    assert_eq!(id.get_range(9, RangeField::Gap), Status::NotAssessed);
    assert!(id.any_not_identified(1));
    id.set(Field::S, Status::Identified);
    assert!(!id.any_not_identified(2));
    assert!(id.any_not_identified(3));
    assert_eq!(id.problems(3), vec![(Some(2), "g", Reason::Negative)]);
    id.set_all_ranges(3, RangeField::Gap, Status::Identified);
    assert_eq!(id.range[2], 0x1000_0001);
}

#[test]
fn verdict_of_a_nonnegative_value() {
    use Reason::*;
    let not = Status::NotIdentified;
    assert_eq!(Status::of_nonnegative(5.0, 4.0, 6.0), Status::Identified);
    assert_eq!(Status::of_nonnegative(-1.0, -2.0, 0.0), not(Negative));
    assert_eq!(Status::of_nonnegative(5.0, -1.0, 9.0), not(CrossesZero));
    assert_eq!(Status::of_nonnegative(5.0, 0.0, 9.0), not(CrossesZero));
    assert_eq!(Status::of_nonnegative(0.0, 0.0, 1.0), not(AtBound));
    assert_eq!(Status::of_nonnegative(f64::NAN, 0.0, 1.0), not(NotMeasured));
    assert_eq!(
        Status::of_nonnegative(5.0, f64::NAN, 6.0),
        not(WideInterval)
    );
    assert_eq!(Status::of_nonnegative(5.0, 6.0, 7.0), not(WideInterval));
}

#[test]
fn transport_setters_keep_counts() {
    let mut t = TransportExt::default();
    let p = [Estimate::new(1.0, 0.9, 1.1), Estimate::new(1.9, 1.8, 2.0)];
    t.set_penalties(Scheme::Incoming, &p, Status::Identified)
        .unwrap();
    assert_eq!(t.n_k, [0, 2, 0]);
    assert_eq!(t.present, TX_PENALTIES);
    assert_eq!(t.penalty(Scheme::Incoming, 2), Some(p[1]));
    assert_eq!(t.penalty(Scheme::Incoming, 0), None);
    assert_eq!(t.penalty(Scheme::Incoming, 3), None);
    assert_eq!(
        t.status(TransportField::PenaltyIncoming),
        Status::Identified
    );
    assert!(t
        .set_penalties(Scheme::Mixed, &[p[0]; 9], Status::Identified)
        .is_err());
    t.set_penalties(Scheme::Incoming, &[], Status::NotAssessed)
        .unwrap();
    assert_eq!(t.present, 0);
    assert!(t.sharing().is_none() && t.bisection().is_none());
}
