//! Tests of the collective selector.

use super::bcast::{bcast, chain_time};
use super::cost::{msg, one_message_on};
use super::tree::{binomial_children, binomial_tree};
use super::Schedule;
use super::*;
use crate::layout::TRANSPORT_MAX_BYTES;
use crate::types::Params;

/// A LogGP network without S or LogfP.
pub(super) fn net(l: f64, o: f64, g: f64, big_g: f64) -> Params {
    Params {
        eel_ns: l + 2.0 * o,
        L_ns: l,
        o_s_ns: o,
        o_r_ns: o,
        g_ns: g,
        G_ns_per_byte: big_g,
        S_bytes: u64::MAX,
        range_from_bytes: 0,
        range_to_bytes: u64::MAX,
        ..Params::default()
    }
}

#[test]
fn each_range_prices_its_own_bytes() {
    let mut a = net(1000.0, 500.0, 800.0, 0.1);
    a.range_from_bytes = 1;
    a.range_to_bytes = 1 << 20;
    let mut b = a;
    b.range_from_bytes = (1 << 20) + 1;
    b.range_to_bytes = 4 << 20;
    b.g_ns = 500_000.0;
    b.G_ns_per_byte = 0.0;
    let end_of_a = one_message_ns(&a, 1 << 20);
    // A last range of a few large sizes fitted G = 0: its bytes cost
    // nothing more, the message still costs what 1 MiB did (its own
    // EEL + (s−1)·G would be EEL).
    let t = one_message_on(&[a, b][..], 4 << 20).unwrap();
    assert!((t - end_of_a).abs() < 1e-6, "{t} vs {end_of_a}");
    assert!(one_message_ns(&b, 4 << 20) < 0.1 * end_of_a);
    // A slower second range: its bytes at its G, continuous at the
    // boundary.
    b.G_ns_per_byte = 0.3;
    let t = one_message_on(&[a, b][..], 4 << 20).unwrap();
    let want = end_of_a + (3 << 20) as f64 * 0.3;
    assert!((t - want).abs() < 1e-6, "{t} vs {want}");
    // A narrow first range with a wild slope costs only its own bytes.
    let mut narrow = a;
    narrow.range_from_bytes = 61;
    narrow.range_to_bytes = 64;
    narrow.G_ns_per_byte = 50.0;
    let mut small = a;
    small.range_to_bytes = 60;
    let mut rest = a;
    rest.range_from_bytes = 65;
    let t = one_message_on(&[small, narrow, rest][..], 1024).unwrap();
    let want = one_message_ns(&a, 60) + 4.0 * 50.0 + (1024 - 64) as f64 * 0.1;
    assert!((t - want).abs() < 1e-6, "{t} vs {want}");
    // The handshake above S, once.
    let mut s = a;
    s.S_bytes = 4096;
    let ranges = [s];
    assert!((one_message_on(&ranges[..], 8192).unwrap() - one_message_ns(&s, 8192)).abs() < 1e-6);
    // One Params (no ranges to look back on): its own value.
    assert!((one_message_on(&a, 4 << 20).unwrap() - one_message_ns(&a, 4 << 20)).abs() < 1e-9);
}

#[test]
fn one_message_counts_the_bytes_once() {
    // LogGP (no per-byte overheads): T(s) is the paper's L + 2o + (s−1)G.
    let p = net(1000.0, 300.0, 400.0, 0.25);
    for s in [1u64, 64, 4096, 1 << 20] {
        assert!(
            (one_message_ns(&p, s) - p.predict_ns(s)).abs() < 1e-6,
            "{s}"
        );
    }
    // Shared memory: the copy shows up as G (the gap), O_s (the sender's
    // busy time) and O_r (the receiver's): it is paid once, not three
    // times.
    let mut shm = net(200.0, 150.0, 400.0, 0.10);
    shm.O_s_ns_per_byte = 0.10;
    shm.O_r_ns_per_byte = 0.09;
    let m = 1u64 << 20;
    let t = one_message_ns(&shm, m);
    assert!((t - (shm.eel_ns + (m - 1) as f64 * 0.10)).abs() < 1e-6);
    assert!(shm.predict_ns(m) > 2.5 * t);
    // The handshake above S, and no EEL: its LogGP value.
    shm.S_bytes = 4096;
    assert!((one_message_ns(&shm, m) - t - 2.0 * shm.eel_ns).abs() < 1e-6);
    shm.eel_ns = f64::NAN;
    assert!((one_message_ns(&shm, 1) - 500.0).abs() < 1e-9);
}

#[test]
fn shared_cores_stretch_steps_with_more_busy_ranks_than_cores() {
    let p = net(1000.0, 200.0, 300.0, 0.25);
    let m = 1u64 << 20;
    let alone = SelectOptions::default();
    let two = SelectOptions { cores: 2, ..alone };
    let rd = |c: &Candidates| c.as_slice()[0].predicted_ns;
    // Recursive doubling on 4 ranks, 2 cores: every step has 4 busy
    // ranks, so all of it takes twice as long, small or large.
    for bytes in [8u64, m] {
        let a = candidates(&p, Collective::Allreduce, 4, bytes, &alone).unwrap();
        let b = candidates(&p, Collective::Allreduce, 4, bytes, &two).unwrap();
        assert!(
            (rd(&b) - 2.0 * rd(&a)).abs() < 1e-6,
            "{} {}",
            rd(&a),
            rd(&b)
        );
    }
    // Binomial broadcast on 4 ranks never has more than 2 transfers at once.
    let a = candidates(&p, Collective::Bcast, 4, m, &alone).unwrap();
    let b = candidates(&p, Collective::Bcast, 4, m, &two).unwrap();
    assert_eq!(a.as_slice()[0].predicted_ns, b.as_slice()[0].predicted_ns);
    // ... but on 8 ranks its last round has 4.
    let a = candidates(&p, Collective::Bcast, 8, m, &alone).unwrap();
    let b = candidates(&p, Collective::Bcast, 8, m, &two).unwrap();
    assert!(b.as_slice()[0].predicted_ns > a.as_slice()[0].predicted_ns);
    // Enough cores: identical.
    let many = SelectOptions { cores: 8, ..alone };
    let c = candidates(&p, Collective::Allreduce, 8, m, &many).unwrap();
    let d = candidates(&p, Collective::Allreduce, 8, m, &alone).unwrap();
    assert_eq!(c.as_slice(), d.as_slice());
}

#[test]
fn exchange_transport_names() {
    let mut buf = [0u8; TRANSPORT_MAX_BYTES];
    assert_eq!(exchange_transport("mpi", 4, &mut buf), Some("mpi-x4"));
    assert_eq!(exchange_transport("mpi", 1024, &mut buf), Some("mpi-x1024"));
    assert_eq!(exchange_transport("msg", 0, &mut buf), Some("msg-x0"));
    // 15 bytes fit, 16 do not.
    assert_eq!(
        exchange_transport("abcdefghij", 123, &mut buf),
        Some("abcdefghij-x123")
    );
    assert_eq!(exchange_transport("abcdefghij", 1234, &mut buf), None);
}

/// A pair and an exchange entry's ranges (g + (s−1)·G per range,
/// measured with 4 ranks).
fn pair_and_exchange() -> ([Params; 1], Vec<Params>) {
    ([net(1000.0, 200.0, 300.0, 0.08)], exchange_ranges())
}

/// `pair` with the exchange ranges `exchange` measured with 4 ranks.
fn measured_with_4<'a>(pair: &'a [Params], exchange: &'a [Params]) -> Measured<'a> {
    Measured {
        pair,
        exchange,
        exchange_ranks: 4,
        contention: None,
    }
}

/// An exchange entry's ranges: g + (s−1)·G per range.
fn exchange_ranges() -> Vec<Params> {
    let eager = Params {
        range_from_bytes: 1,
        range_to_bytes: 4095,
        g_ns: 3000.0,
        G_ns_per_byte: 1.0,
        ..Params::default()
    };
    let rdv = Params {
        range_from_bytes: 4096,
        range_to_bytes: 4 << 20,
        g_ns: 8_000.0,
        G_ns_per_byte: 0.25,
        ..Params::default()
    };
    vec![eager, rdv]
}

#[test]
fn measured_exchange_prices_the_all_ranks_steps() {
    let (pair, x) = pair_and_exchange();
    let measured = measured_with_4(&pair, &x);
    let line = |s: u64| {
        let p = x.as_slice().at(s).unwrap();
        p.gap_ns(s)
    };
    assert_eq!(measured.exchange_ns(4, 4096), Some(line(4096)));
    // A rendezvous at the threshold may cost the eager step below twice
    // plus a handshake: the larger of 2·EEL (2800 ns) and twice the
    // exchange's smallest step (2·3000 ns). A line starting 1.55 times the
    // step below stands.
    let below = 3000.0 + 4095.0;
    let mut doubled = x.clone();
    doubled[1].g_ns = 10_000.0;
    let doubled = measured_with_4(&pair, &doubled);
    assert_eq!(doubled.exchange_ns(4, 4096), Some(10_000.0 + 1023.75));
    // One starting higher is lowered by the excess, slope kept.
    let mut high = x.clone();
    high[1].g_ns = 30_000.0;
    let cap = 2.0 * below + 6000.0;
    let excess = (30_000.0 + 1023.75) - cap;
    let lowered = measured_with_4(&pair, &high);
    assert_eq!(lowered.exchange_ns(4, 4096), Some(cap));
    let mb = 1u64 << 20;
    assert_eq!(
        lowered.exchange_ns(4, mb),
        Some(high[1].gap_ns(mb) - excess)
    );
    assert_eq!(
        measured.exchange_ns(8, 4096),
        None,
        "measured for 4 ranks only"
    );
    let opts = SelectOptions {
        gamma_ns_per_byte: 0.0,
        cores: 0,
    };
    let m = 1u64 << 20;
    let c = candidates(&measured, Collective::Allreduce, 4, m, &opts).unwrap();
    let [rd, rab, ring] = [0, 1, 2].map(|i| c.as_slice()[i].predicted_ns);
    // γ = 0: recursive doubling is 2·X(m), Rabenseifner 2·X(m/2) +
    // 2·X(m/4), the ring 6·X(m/4), each X from the exchange ranges.
    assert!((rd - 2.0 * line(m)).abs() < 1e-6, "{rd}");
    assert!((rab - 2.0 * line(m / 2) - 2.0 * line(m / 4)).abs() < 1e-6);
    assert!((ring - 6.0 * line(m / 4)).abs() < 1e-6);
    // The barrier's dissemination: 2 rounds of X(0) (the first range).
    let b = candidates(&measured, Collective::Barrier, 4, 0, &opts).unwrap();
    assert!((b.as_slice()[0].predicted_ns - 2.0 * 3000.0).abs() < 1e-6);
    // Other rank counts keep the pair model.
    let p8 = candidates(&measured, Collective::Allreduce, 8, m, &opts).unwrap();
    let p8_pair = candidates(&pair[..], Collective::Allreduce, 8, m, &opts).unwrap();
    assert_eq!(p8.as_slice(), p8_pair.as_slice());
}

#[test]
fn a_disturbed_top_exchange_range_is_bounded_by_the_range_below() {
    let pair = [net(1000.0, 200.0, 300.0, 0.08)];
    let mut x = exchange_ranges();
    x[1].range_to_bytes = (2 << 20) - 1;
    // One slow size lifted the top range's intercept to ~1 ms.
    x.push(Params {
        range_from_bytes: 2 << 20,
        range_to_bytes: 4 << 20,
        g_ns: 1e6,
        G_ns_per_byte: 0.36,
        ..Params::default()
    });
    let measured = measured_with_4(&pair, &x);
    let m = 2u64 << 20;
    let mid = x[1].gap_ns(m);
    // At most the step below twice plus the handshake (2·X(1) = 6000 ns).
    let cap = 2.0 * mid + 6000.0;
    assert_eq!(measured.exchange_ns(4, m), Some(cap));
    // Above the threshold the top range keeps its own slope.
    let top = x[2].gap_ns(4 << 20) - (x[2].gap_ns(m) - cap);
    let got = measured.exchange_ns(4, 4 << 20).unwrap();
    assert!((got - top).abs() < 1e-6, "{got} vs {top}");
    // A top range below the extension of the one below stands.
    x[2].g_ns = 0.0;
    x[2].G_ns_per_byte = 0.2;
    let measured = measured_with_4(&pair, &x);
    assert_eq!(measured.exchange_ns(4, m), Some(x[2].gap_ns(m)));
}

#[test]
fn tree_hops_keep_the_pair_model_beside_an_exchange() {
    let (pair, x) = pair_and_exchange();
    let measured = measured_with_4(&pair, &x);
    let pair_only = Measured {
        pair: &pair,
        exchange: &[],
        exchange_ranks: 4,
        contention: None,
    };
    let opts = SelectOptions {
        gamma_ns_per_byte: 0.0,
        cores: 2,
    };
    let m = 1u64 << 20;
    let a = candidates(&measured, Collective::Bcast, 4, m, &opts).unwrap();
    let b = candidates(&pair_only, Collective::Bcast, 4, m, &opts).unwrap();
    // Binomial and chain: the same; the allgathers: priced by X.
    assert_eq!(a.as_slice()[0], b.as_slice()[0]);
    assert_eq!(a.as_slice()[3], b.as_slice()[3]);
    assert_ne!(a.as_slice()[1], b.as_slice()[1]);
}

#[test]
fn chain_fill_shares_cores_only_with_the_segments_in_flight() {
    // 4 ranks on 2 cores, a message of exactly 2 segments: while the
    // first segment crosses hops 1, 2, 3 at most 2 links are busy, so
    // no hop is stretched: 3·T(k) + 1 period (2 busy ranks).
    let p = net(1000.0, 200.0, 300.0, 0.25);
    let m = 2 * 65536;
    let k = m / 2;
    let x = msg(&p, k).unwrap();
    let want = 3.0 * x.t_ns + x.gap_ns.max(x.forward_ns);
    let got = chain_time(&p, 4, m, k, Sharing::new(2)).unwrap();
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
    assert_eq!(got, chain_time(&p, 4, m, k, Sharing::new(0)).unwrap());
    // Many segments: the third hop and the steady state have 3 busy
    // ranks (stretch 1.5), so sharing costs something.
    let big = 64 * k;
    let shared = chain_time(&p, 4, big, k, Sharing::new(2)).unwrap();
    let own = chain_time(&p, 4, big, k, Sharing::new(0)).unwrap();
    // 2 unstretched hops, then 1 hop and 63 periods at 1.5.
    let want = 2.0 * x.t_ns + 1.5 * (x.t_ns + 63.0 * x.gap_ns.max(x.forward_ns));
    assert!((shared - want).abs() < 1e-6 * want, "{shared} vs {want}");
    assert!(shared > 1.2 * own);
}

#[test]
fn forwarding_rank_pays_each_hop_copy_once() {
    // Shared memory, single copy: both ends' per-byte overheads are the
    // one copy (O_s = 0.08, O_r = 0.075 ns/B), G = 0.077 ns/B.
    let p = Params {
        O_s_ns_per_byte: 0.08,
        O_r_ns_per_byte: 0.075,
        ..net(1000.0, 500.0, 600.0, 0.077)
    };
    let k = 512 * 1024;
    let x = msg(&p, k).unwrap();
    let once = 500.0 + 500.0 + (k - 1) as f64 * 0.08;
    assert!((x.forward_ns - once).abs() < 1e-6, "{}", x.forward_ns);
    // The period is the larger of the gap and that: 42.5 µs, not the
    // 81.7 µs of o_s(k) + o_r(k).
    let t = chain_time(&p, 3, 4 * k, k, Sharing::new(0)).unwrap();
    let want = 2.0 * x.t_ns + 3.0 * x.gap_ns.max(once);
    assert!((t - want).abs() < 1e-6 * want, "{t} vs {want}");
    assert!(once < 0.6 * (1000.0 + (k - 1) as f64 * 0.155));
}

#[test]
fn binomial_tree_shape() {
    let mut kids = [(0, 0); 64];
    let n = binomial_children(0, 8, &mut kids);
    assert_eq!(&kids[..n], &[(4, 4), (2, 2), (1, 1)]);
    let n = binomial_children(4, 8, &mut kids);
    assert_eq!(&kids[..n], &[(6, 2), (5, 1)]);
    let n = binomial_children(5, 8, &mut kids);
    assert_eq!(n, 0);
    let n = binomial_children(0, 5, &mut kids);
    assert_eq!(&kids[..n], &[(4, 1), (2, 2), (1, 1)]);
}

#[test]
fn binomial_matches_closed_form_when_gap_dominates() {
    // gap = T: the root's sends do not overlap its children's, and the
    // evaluation gives the textbook log2 P · T for P = 8 (root: 3 sends;
    // its last child, rank 1, receives at 2·gap + T = 3T).
    let p = net(1000.0, 500.0, 2000.0, 0.0);
    let t = p.predict_ns(8);
    assert!((t - 2000.0).abs() < 1e-9);
    let got = binomial_tree(&p, 8, 8, 0, Sharing::new(0)).unwrap();
    assert!((got - 3.0 * t).abs() < 1e-6, "{got}");
}

#[test]
fn binomial_overlaps_with_small_gap() {
    // gap = o = 100 < T = 1200: the root's sends are 100 ns apart; rank 4
    // gets the data at T, forwards to 6 at T + T, and 6 to 7 at 3T; rank
    // 7 is last at 3T; rank 1 at 2·gap + T. So 3T total.
    let p = net(1000.0, 100.0, 100.0, 0.0);
    let t = p.predict_ns(1);
    let got = binomial_tree(&p, 8, 1, 0, Sharing::new(0)).unwrap();
    assert!((got - 3.0 * t).abs() < 1e-6);
    // P = 3: root sends to 2 then 1: 1 receives at gap + T.
    let got = binomial_tree(&p, 3, 1, 0, Sharing::new(0)).unwrap();
    assert!((got - (100.0 + t)).abs() < 1e-6, "{got}");
}

#[test]
fn bandwidth_bound_bcast_prefers_pipelines() {
    let p = net(1000.0, 300.0, 400.0, 0.1); // 10 GB/s
    let opts = SelectOptions::default();
    let c = candidates(&p, Collective::Bcast, 16, 4 << 20, &opts).unwrap();
    let best = c.best();
    assert_ne!(best.algorithm, Algorithm::BcastBinomial as u32);
    let binom = c.as_slice()[0].predicted_ns;
    // Binomial on 16 ranks moves m four times along the critical path.
    assert!(binom > 4.0 * 0.1 * (4u64 << 20) as f64 * 0.99);
    assert!(best.predicted_ns < binom / 1.5);
    // Small message: latency bound, binomial wins.
    let c = candidates(&p, Collective::Bcast, 16, 8, &opts).unwrap();
    assert_eq!(c.best().algorithm, Algorithm::BcastBinomial as u32);
}

#[test]
fn chain_segment_is_optimal_among_powers() {
    let p = net(2000.0, 200.0, 300.0, 0.2);
    let m = 1u64 << 20;
    let c = bcast(&p, 4, m, Sharing::new(0)).unwrap();
    let chain = c.as_slice()[3];
    assert!(chain.segment_bytes > 64 && chain.segment_bytes < m);
    // Closed form with the chosen k, and neighbours are not better.
    let eval = |k: u64| {
        let x = msg(&p, k).unwrap();
        3.0 * x.t_ns + (m.div_ceil(k) as f64 - 1.0) * x.gap_ns.max(x.forward_ns)
    };
    let k = chain.segment_bytes;
    assert!((eval(k) - chain.predicted_ns).abs() < 1e-6);
    assert!(eval(k * 2) >= chain.predicted_ns && eval(k / 2) >= chain.predicted_ns);
}

#[test]
fn rendezvous_threshold_changes_the_cost() {
    let mut p = net(1000.0, 200.0, 300.0, 0.2);
    let without = candidates(&p, Collective::Bcast, 4, 8192, &SelectOptions::default())
        .unwrap()
        .as_slice()[0]
        .predicted_ns;
    p.S_bytes = 4096;
    let with = candidates(&p, Collective::Bcast, 4, 8192, &SelectOptions::default())
        .unwrap()
        .as_slice()[0]
        .predicted_ns;
    // Binomial on 4 ranks: 2 rounds on the critical path, each +2·EEL.
    assert!((with - without - 2.0 * 2.0 * p.eel_ns).abs() < 1e-6);
}

#[test]
fn allreduce_formulas() {
    let p = net(1000.0, 200.0, 300.0, 0.25);
    let gamma = 0.5;
    let opts = SelectOptions {
        gamma_ns_per_byte: gamma,
        cores: 0,
    };
    let m = 1u64 << 16;
    let c = candidates(&p, Collective::Allreduce, 8, m, &opts).unwrap();
    let t = |s: u64| p.predict_ns(s);
    let rd = 3.0 * (t(m) + gamma * m as f64);
    assert!((c.as_slice()[0].predicted_ns - rd).abs() < 1e-6);
    let rab: f64 = (1..=3)
        .map(|k| 2.0 * t(m >> k) + gamma * (m >> k) as f64)
        .sum();
    assert!((c.as_slice()[1].predicted_ns - rab).abs() < 1e-6);
    let ring = 14.0 * t(m / 8) + 7.0 * gamma * (m / 8) as f64;
    assert!((c.as_slice()[2].predicted_ns - ring).abs() < 1e-6);
    // Linear: one message out, the other six a gap behind it, then seven
    // combinings.
    let gap = p.gap_ns(m);
    let linear = t(m) + 6.0 * gap + 7.0 * gamma * m as f64;
    assert!((c.as_slice()[3].predicted_ns - linear).abs() < 1e-6);
    // Small: linear's one step beats doubling's three; at 64 KiB its
    // seven sends from every rank lose to doubling's three; large:
    // Rabenseifner beats doubling.
    let best = |m: u64| {
        candidates(&p, Collective::Allreduce, 8, m, &opts)
            .unwrap()
            .best()
            .algorithm
    };
    assert_eq!(best(8), Algorithm::AllreduceLinear as u32);
    assert!(c.as_slice()[0].predicted_ns < linear);
    assert_ne!(best(4 << 20), Algorithm::AllreduceRecursiveDoubling as u32);
}

#[test]
fn logfp_makes_tree_fan_out_cheaper() {
    let mut p = net(1000.0, 300.0, 2000.0, 0.0);
    let plain = binomial_tree(&p, 16, 1, 0, Sharing::new(0)).unwrap();
    p.f = 8;
    p.o_min_ns = 100.0;
    p.o_max_ns = 200.0;
    p.g_f_ns = 2000.0;
    let logfp = binomial_tree(&p, 16, 1, 0, Sharing::new(0)).unwrap();
    assert!(logfp < plain, "{logfp} vs {plain}");
    // Big messages ignore LogfP.
    let big_plain = binomial_tree(
        &net(1000.0, 300.0, 2000.0, 0.0),
        16,
        4096,
        0,
        Sharing::new(0),
    )
    .unwrap();
    assert!((binomial_tree(&p, 16, 4096, 0, Sharing::new(0)).unwrap() - big_plain).abs() < 1e-9);
}

#[test]
fn ranges_pick_the_containing_one() {
    let mut a = net(1000.0, 200.0, 300.0, 0.1);
    a.range_from_bytes = 1;
    a.range_to_bytes = 4096;
    let mut b = a;
    b.range_from_bytes = 4097;
    b.range_to_bytes = 1 << 20;
    b.G_ns_per_byte = 0.05;
    let set = [a, b];
    assert_eq!(set[..].at(100).unwrap().G_ns_per_byte, 0.1);
    assert_eq!(set[..].at(10_000).unwrap().G_ns_per_byte, 0.05);
    assert_eq!(set[..].at(1 << 30).unwrap().G_ns_per_byte, 0.05);
    assert_eq!(set[..].at(0).unwrap().G_ns_per_byte, 0.1);
}

/// A choice no selection writes (algorithm 99), to see what is written.
fn unset_choice() -> Choice {
    Choice {
        algorithm: 99,
        reserved: 0,
        predicted_ns: 0.0,
        segment_bytes: 0,
    }
}

#[test]
fn c_abi_select() {
    let p = net(1000.0, 200.0, 300.0, 0.1);
    let mut best = unset_choice();
    let mut all = [best; 4];
    let mut n = 0usize;
    // SAFETY: valid pointers to locals.
    let rc = unsafe { ng_select(&p, 1, 2, 8, 0, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
    assert_eq!(rc, 0);
    assert_eq!(n, 2);
    assert!(best.predicted_ns > 0.0);
    assert_eq!(
        best.predicted_ns,
        all[0].predicted_ns.min(all[1].predicted_ns)
    );
    // SAFETY: as above.
    let bad = unsafe { ng_select(&p, 1, 7, 8, 0, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
    assert_eq!(bad, -libc::EINVAL);
    // SAFETY: as above.
    let zero = unsafe { ng_select(&p, 1, 0, 0, 8, 0.2, &mut best, all.as_mut_ptr(), 4, &mut n) };
    assert_eq!(zero, -libc::EINVAL);
    // More ranges than an entry has: refused before any is read.
    let many = [p; crate::layout::MAX_RANGES + 1];
    // SAFETY: `many` holds MAX_RANGES + 1 parameter sets.
    let too_many = unsafe {
        ng_select(
            many.as_ptr(),
            many.len(),
            2,
            8,
            0,
            0.2,
            &mut best,
            all.as_mut_ptr(),
            4,
            &mut n,
        )
    };
    assert_eq!(too_many, -libc::EINVAL);
    let name = ng_algorithm_name(Algorithm::BcastChain as u32);
    // SAFETY: a static NUL-terminated string.
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(name) }.to_str().unwrap(),
        "pipelined_chain"
    );
    assert!(ng_algorithm_name(5).is_null());
}

#[test]
fn c_select_takes_gamma_only_when_it_is_a_finite_non_negative_number() {
    let p = net(1000.0, 200.0, 300.0, 0.25);
    let allreduce = |gamma: f64| {
        let mut best = Choice {
            algorithm: 0,
            reserved: 0,
            predicted_ns: 0.0,
            segment_bytes: 0,
        };
        // SAFETY: valid pointers to locals; no candidate list asked for.
        let rc = unsafe {
            ng_select(
                &p,
                1,
                Collective::Allreduce as u32,
                8,
                1 << 20,
                gamma,
                &mut best,
                std::ptr::null_mut(),
                0,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(rc, 0);
        best
    };
    let default = allreduce(DEFAULT_GAMMA_NS_PER_BYTE);
    let rust = select(
        &p,
        Collective::Allreduce,
        8,
        1 << 20,
        &SelectOptions::default(),
    )
    .unwrap();
    assert_eq!(default, rust, "the C call is the Rust call with cores = 0");
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        assert_eq!(allreduce(bad), default, "gamma {bad}");
    }
    assert!(allreduce(0.0).predicted_ns < default.predicted_ns);
}

/// Every schedule the model knows, for the simulation tests.
fn all_schedules(m: u64) -> Vec<Schedule> {
    // Ours, the chains also with several segments, and whatever either
    // library runs for any communicator size and message size.
    let mut out: Vec<Schedule> = Algorithm::ALL
        .iter()
        .map(|&a| Schedule::of(a, m.max(1)))
        .chain([
            Schedule::BcastChain {
                seg: (m / 4).max(1),
            },
            Schedule::ReduceChain {
                seg: (m / 3).max(1),
            },
            // What a rules file may name that no decision runs here.
            Schedule::ReduceRabenseifnerAlloc,
        ])
        .collect();
    for lib in [Library::OpenMpi41, Library::Mpich40] {
        for coll in Collective::ALL {
            for p in [
                2, 3, 4, 5, 6, 8, 16, 40, 100, 200, 300, 600, 1500, 3000, 5000,
            ] {
                for bytes in (0..24).map(|k| 1u64 << k) {
                    for one_node in [true, false] {
                        let s = match lib.schedule(coll, p, bytes, one_node) {
                            Schedule::BcastChain { .. } => Schedule::BcastChain { seg: m.max(1) },
                            Schedule::ReduceChain { .. } => Schedule::ReduceChain { seg: m.max(1) },
                            s => s,
                        };
                        if !out.contains(&s) {
                            out.push(s);
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn the_libraries_reach_every_schedule() {
    // Every variant of Schedule (35) once, the chains with two segment
    // sizes.
    assert_eq!(all_schedules(1 << 20).len(), 37);
}

#[test]
fn every_schedule_runs_without_deadlock_on_1_to_9_ranks() {
    let mut p_net = net(1000.0, 300.0, 400.0, 0.1);
    p_net.S_bytes = 4096;
    for p in 1..=9usize {
        for m in [0u64, 1, 100, 5000, 1 << 20] {
            for s in all_schedules(m) {
                for issue in [
                    sim::Issue::BackToBack {
                        calls: 1,
                        rotate: false,
                    },
                    sim::Issue::BackToBack {
                        calls: 5,
                        rotate: true,
                    },
                ] {
                    let work = sim::Work {
                        gamma_ns_per_byte: 0.2,
                        fresh_ns_per_byte: 0.4,
                    };
                    let r = sim::run(&p_net, s, p, m, work, issue);
                    assert!(r.is_ok(), "{s:?} p={p} m={m} {issue:?}: {r:?}");
                }
            }
        }
    }
}

#[test]
fn header_names_every_collective_and_algorithm_with_its_value() {
    let h = include_str!("../../include/netgauge_select.h");
    let value = |name: &str| -> u32 {
        let line = h
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} missing from netgauge_select.h"));
        let v = line.split_whitespace().nth(2).unwrap();
        v.trim_end_matches('u').parse().unwrap()
    };
    for c in Collective::ALL {
        assert_eq!(
            value(&format!("NG_COLL_{}", c.name().to_uppercase())),
            c as u32
        );
    }
    for a in Algorithm::ALL {
        let name = format!(
            "NG_ALG_{}_{}",
            a.collective().name().to_uppercase(),
            match a {
                Algorithm::BcastScatterRdAllgather => "SCATTER_RD_ALLGATHER".into(),
                Algorithm::BcastScatterRingAllgather => "SCATTER_RING_ALLGATHER".into(),
                Algorithm::BcastChain => "CHAIN".into(),
                _ => a.name().to_uppercase(),
            }
        );
        assert_eq!(value(&name), a as u32, "{name}");
        let c = ng_algorithm_name(a as u32);
        assert!(!c.is_null());
    }
    // Every collective's candidates fit the count C callers size for.
    assert_eq!(value("NG_MAX_CANDIDATES") as usize, MAX_CANDIDATES);
    for c in Collective::ALL {
        assert!(c.algorithms().len() <= MAX_CANDIDATES, "{c:?}");
    }
}

#[test]
fn c_abi_counts_every_candidate_and_writes_only_all_cap() {
    // Allgather has three candidates; a caller's array of 2 gets the first
    // 2, the count says 3, the best is among all 3.
    let p = net(1000.0, 200.0, 300.0, 0.1);
    let mut best = unset_choice();
    let mut all = [unset_choice(); MAX_CANDIDATES];
    let mut n = 0usize;
    // SAFETY: valid pointers to locals; 2 ≤ all.len().
    let rc = unsafe { ng_select(&p, 1, 4, 8, 64, 0.2, &mut best, all.as_mut_ptr(), 2, &mut n) };
    assert_eq!(rc, 0);
    assert_eq!(n, 3);
    assert!(all[..2].iter().all(|c| c.algorithm != 99));
    assert!(all[2..].iter().all(|c| c.algorithm == 99));
    let opts = SelectOptions {
        gamma_ns_per_byte: 0.2,
        ..SelectOptions::default()
    };
    let every = candidates(&p, Collective::Allgather, 8, 64, &opts).unwrap();
    assert_eq!(every.as_slice().len(), 3);
    assert_eq!(
        every.as_slice()[2].algorithm,
        Algorithm::AllgatherLinear as u32
    );
    let fastest = every
        .as_slice()
        .iter()
        .map(|c| c.predicted_ns)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(best.predicted_ns, fastest);
}

#[test]
fn c_abi_selects_the_new_collectives() {
    let p = net(1000.0, 200.0, 300.0, 0.1);
    for (coll, first, count) in [
        (Collective::Reduce, Algorithm::ReduceBinomial, 2),
        (
            Collective::Allgather,
            Algorithm::AllgatherRecursiveDoubling,
            3,
        ),
        (Collective::Alltoall, Algorithm::AlltoallPairwise, 2),
    ] {
        let mut best = unset_choice();
        let mut all = [best; 4];
        let mut n = 0usize;
        // SAFETY: valid pointers to locals.
        let rc = unsafe {
            ng_select(
                &p,
                1,
                coll as u32,
                8,
                4096,
                0.2,
                &mut best,
                all.as_mut_ptr(),
                4,
                &mut n,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(n, count);
        assert_eq!(all[0].algorithm, first as u32);
        assert!(all[..n].iter().all(|c| c.predicted_ns > 0.0));
        assert_eq!(
            Algorithm::from_u32(best.algorithm).unwrap().collective(),
            coll
        );
    }
}

/// [`view`] with the default options, a library that does not spin and a
/// root that does not run ahead.
fn default_view<N: Network + ?Sized>(net: &N, sched: Schedule, p: usize, m: u64) -> View {
    view(net, sched, p, m, &ViewOptions::default(), false, false).unwrap()
}

#[test]
fn simulated_synchronized_binomial_is_the_closed_form_tree() {
    // One synchronized call of the same schedule, no sharing: the
    // simulation and the tree evaluation of `candidates` are one model.
    let p_net = net(1000.0, 300.0, 450.0, 0.1);
    for p in [2usize, 3, 4, 7, 8, 13] {
        for m in [1u64, 100, 10_000] {
            let v = default_view(&p_net, Schedule::BcastBinomial, p, m);
            let closed = binomial_tree(&p_net, p, m, 0, Sharing::new(0)).unwrap();
            assert!(
                (v.sync_ns - closed).abs() < 1e-6,
                "p={p} m={m}: {} vs {closed}",
                v.sync_ns
            );
        }
    }
}

#[test]
fn a_broadcast_root_returns_early_and_back_to_back_calls_overlap() {
    let p_net = net(1000.0, 300.0, 450.0, 0.1);
    let v = default_view(&p_net, Schedule::BcastBinomial, 8, 64);
    // The root and inner ranks return before the leaves: the mean over
    // ranks is below the last rank's return.
    assert!(v.rank_avg_ns < 0.9 * v.sync_ns, "{v:?}");
    // Back to back, the next call's sends leave while the leaves still
    // receive the previous one: a call costs the busiest rank's sends.
    assert!(v.back_to_back_ns < 0.6 * v.sync_ns, "{v:?}");
    // An unsegmented chain of a large message waits hop after hop: its
    // back-to-back time is no better than the synchronized call's by much.
    let big = 1u64 << 20;
    let c = default_view(&p_net, Schedule::BcastChain { seg: big }, 8, big);
    let s = default_view(&p_net, Schedule::BcastChain { seg: big / 16 }, 8, big);
    assert!(
        s.sync_ns < 0.5 * c.sync_ns,
        "segmenting pipelines the hops: {s:?} vs {c:?}"
    );
}

#[test]
fn shared_cores_bound_back_to_back_calls_by_the_busy_time() {
    let p_net = net(1000.0, 300.0, 450.0, 0.1);
    let ring = |opts: &ViewOptions, spins: bool| {
        view(
            &p_net,
            Schedule::AllreduceRing,
            8,
            1 << 20,
            opts,
            spins,
            false,
        )
        .unwrap()
    };
    let free = ring(&ViewOptions::default(), false);
    let shared = ViewOptions {
        cores: 2,
        ..ViewOptions::default()
    };
    let two = ring(&shared, false);
    for (a, b) in two.prices().iter().zip(free.prices()) {
        assert!(*a >= b - 1e-6, "{two:?} vs {free:?}");
    }
    assert!(
        two.back_to_back_ns > 1.5 * free.back_to_back_ns,
        "{two:?} vs {free:?}"
    );
    // A library whose waits spin pays a share of the scheduler's slice per
    // blocking wait; one that yields does not.
    let slice = ViewOptions {
        cores: 2,
        spin_slice_ns: 1e6,
        ..ViewOptions::default()
    };
    let spin = ring(&slice, true);
    let polite = ring(&slice, false);
    assert!(
        spin.sync_ns > polite.sync_ns + 1e6,
        "{spin:?} vs {polite:?}"
    );
    // MPICH's shared-memory broadcast root runs ahead of its readers while
    // a message fits a cell: calls back to back from one root pay no slice,
    // a rotating root still does.
    let mpich = Library::Mpich40;
    assert!(mpich.root_runs_ahead(Schedule::BcastShm, 8192));
    assert!(!mpich.root_runs_ahead(Schedule::BcastShm, 8193));
    assert!(!Library::OpenMpi41.root_runs_ahead(Schedule::BcastShm, 64));
    let ahead = view(&p_net, Schedule::BcastShm, 4, 64, &slice, true, true).unwrap();
    let held = view(&p_net, Schedule::BcastShm, 4, 64, &slice, true, false).unwrap();
    assert!(
        ahead.back_to_back_ns + 1e5 < held.back_to_back_ns,
        "{ahead:?} vs {held:?}"
    );
    assert_eq!(ahead.rotating_ns, held.rotating_ns);
    assert_eq!(ahead.sync_ns, held.sync_ns);
}

#[test]
fn library_decisions_follow_the_published_rules() {
    use Collective::*;
    use Schedule::*;
    let (o, m) = (Library::OpenMpi41, Library::Mpich40);
    // (library, collective, ranks, bytes, one node, what it runs)
    let cases = [
        (o, Bcast, 4, 32, true, BcastBinary),
        (o, Bcast, 4, 100, true, BcastBinomial),
        (o, Bcast, 4, 16384, true, BcastLinear),
        (o, Bcast, 4, 2 << 20, true, BcastChain { seg: 2 << 20 }),
        (o, Bcast, 8, 1000, true, BcastKnomial { radix: 4 }),
        (o, Allreduce, 4, 65536, true, AllreduceRabenseifner),
        (o, Allreduce, 4, 1024, true, AllreduceRecursiveDoubling),
        // Ring for < 16 B, but fewer elements than ranks: recursive
        // doubling.
        (o, Allreduce, 4, 8, true, AllreduceRecursiveDoubling),
        (o, Reduce, 4, 100, true, ReduceBinary),
        // Rabenseifner's (the rule for 3 ranks below 8 B) falls back to the
        // linear reduce for fewer elements than the largest power of two ≤ P.
        (o, Reduce, 3, 4, true, ReduceLinear),
        (o, Reduce, 4, 8192, true, ReduceChain { seg: 8192 }),
        (o, Reduce, 4, 1 << 20, true, ReduceLinear),
        (o, Allgather, 4, 100, true, AllgatherRecursiveDoubling),
        (o, Allgather, 6, 100, true, AllgatherBruck),
        (o, Alltoall, 4, 100, true, AlltoallLinear),
        (o, Alltoall, 4, 600_000, true, AlltoallPairwise),
        (o, Barrier, 4, 0, true, BarrierLinear),
        (o, Barrier, 8, 0, true, BarrierRecursiveDoubling),
        (m, Bcast, 4, 100, true, BcastShm),
        (m, Allreduce, 4, 100, true, AllreduceShm),
        (m, Bcast, 16, 1 << 20, false, BcastScatterRing),
        (m, Bcast, 16, 100_000, false, BcastScatterRd),
        (m, Allgather, 6, 100, true, AllgatherBruck),
        (m, Alltoall, 4, 100, true, AlltoallLinear),
        (m, Alltoall, 16, 100, true, AlltoallBruck),
    ];
    for (lib, coll, p, bytes, one_node, want) in cases {
        assert_eq!(
            lib.schedule(coll, p, bytes, one_node),
            want,
            "{lib:?} {coll:?} {p} ranks {bytes} B"
        );
    }
    assert!(m.spins() && !o.spins());
}

#[test]
fn choose_keeps_the_librarys_choice_within_the_margin() {
    let mut p_net = net(1000.0, 300.0, 450.0, 0.1);
    p_net.S_bytes = 4096;
    let opts = ViewOptions::default();
    let all: Vec<Algorithm> = Algorithm::ALL.to_vec();
    let open_mpi = |coll, m, ours: &[Algorithm], margin| {
        choose(
            &p_net,
            Library::OpenMpi41,
            coll,
            4,
            m,
            true,
            ours,
            &opts,
            margin,
        )
        .unwrap()
    };
    // Open MPI's allreduce of 1 KiB on 4 ranks is recursive doubling: ours
    // is the same schedule, never more than the margin faster.
    let rd = [Algorithm::AllreduceRecursiveDoubling];
    let d = open_mpi(Collective::Allreduce, 1024, &rd, 0.1);
    assert_eq!(d.library.schedule, Schedule::AllreduceRecursiveDoubling);
    assert!(d.ours.is_none(), "{d:?}");
    // Linear's one step of three messages is more than the margin faster
    // than doubling's two steps, in every view.
    let d = open_mpi(Collective::Allreduce, 1024, &all, 0.1);
    assert_eq!(
        d.ours.map(|o| o.algorithm),
        Some(Algorithm::AllreduceLinear)
    );
    // Its unsegmented chain for 2 MiB on 4 ranks loses to a segmented one
    // in every view.
    let d = open_mpi(Collective::Bcast, 2 << 20, &all, 0.1);
    let ours = d
        .ours
        .expect("a segmented chain or a tree beats the unsegmented chain");
    let ratios: Vec<f64> = ours
        .view
        .prices()
        .iter()
        .zip(d.library.view.prices())
        .map(|(o, l)| o / l)
        .collect();
    let gmean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / 4.0).exp();
    assert!(gmean <= 0.9, "{d:?}");
    assert!(ratios.iter().all(|&r| r <= 1.05), "{d:?}");
    // A margin nothing clears: the library's own, always.
    let d = open_mpi(Collective::Bcast, 2 << 20, &all, 0.99);
    assert!(d.ours.is_none());
    assert!(d.best_ours.is_some());
    // Only the algorithms offered are candidates.
    let d = open_mpi(Collective::Bcast, 2 << 20, &[], 0.1);
    assert!(d.ours.is_none() && d.best_ours.is_none());
}

/// A pair network with a rendezvous threshold at 4 KiB, and an exchange of
/// 4 ranks whose bytes take `k` times a pair's per byte (k = 4: the node
/// moves one transfer at a time; k = 1: four at once).
fn rendezvous_node(k: f64) -> (Params, Vec<Params>) {
    let mut pair = net(1000.0, 200.0, 300.0, 0.08);
    pair.S_bytes = 4096;
    let x = vec![Params {
        range_from_bytes: 1,
        range_to_bytes: 4 << 20,
        g_ns: 3000.0,
        G_ns_per_byte: 0.08 * k,
        ..Params::default()
    }];
    (pair, x)
}

#[test]
fn copy_lanes_follow_the_measured_exchange() {
    let m = 1u64 << 20;
    for (k, lanes) in [(4.0, 1), (3.3, 1), (2.0, 2), (1.0, 4), (0.5, 4)] {
        let (pair, x) = rendezvous_node(k);
        let pair = [pair];
        let net = measured_with_4(&pair, &x);
        assert_eq!(
            super::cost::copy_lanes(&net, 4, m).unwrap(),
            Some(lanes),
            "k = {k}"
        );
        assert_eq!(super::cost::copy_lanes(&net, 8, m).unwrap(), None);
    }
    let (pair, _) = rendezvous_node(4.0);
    assert_eq!(super::cost::copy_lanes(&pair, 4, m).unwrap(), None);
}

#[test]
fn single_copy_transfers_that_serialize_take_the_trees_lead_away() {
    // Reduce of 1 MiB over 4 ranks, γ = 0: the linear reduce's root takes
    // its three messages in turn; the binomial tree's first round sends
    // two at once, which a node with one copy lane moves one after the
    // other, so the tree gains only one message's fixed part.
    let m = 1u64 << 20;
    let one_call = sim::Issue::BackToBack {
        calls: 1,
        rotate: false,
    };
    let sync = |net: &dyn Network, s: Schedule| {
        let r = sim::run(net, s, 4, m, sim::Work::default(), one_call).unwrap();
        r.finish[0].iter().cloned().fold(0.0, f64::max)
    };
    let (pair, one_lane) = rendezvous_node(4.0);
    let pair = [pair];
    let serial = measured_with_4(&pair, &one_lane);
    let (_, four) = rendezvous_node(1.0);
    let parallel = measured_with_4(&pair, &four);
    let t = one_message_on(&pair[..], m).unwrap();
    let bytes = super::cost::bytes_part_ns(&pair[..], m).unwrap();
    let linear = sync(&serial, Schedule::ReduceLinear);
    assert!((linear - 3.0 * t).abs() < 1e-6 * t, "{linear} vs 3·{t}");
    assert_eq!(sync(&parallel, Schedule::ReduceLinear), linear);
    // Four lanes: two rounds of T. One lane: round one's second transfer
    // waits for the first's bytes.
    let tree_parallel = sync(&parallel, Schedule::ReduceBinomial);
    assert!((tree_parallel - 2.0 * t).abs() < 1e-6 * t);
    let tree_serial = sync(&serial, Schedule::ReduceBinomial);
    assert!(
        (tree_serial - (2.0 * t + bytes)).abs() < 1e-6 * t,
        "{tree_serial} vs 2·{t} + {bytes}"
    );
    assert!((linear - tree_serial - (t - bytes)).abs() < 1e-6 * t);
    // Without an exchange measurement there is no lane limit.
    assert_eq!(sync(&pair[0], Schedule::ReduceBinomial), tree_parallel);
}

#[test]
fn a_send_overhead_fitted_beyond_the_message_time_is_bounded_by_it() {
    // A burst disturbed by another job fitted O_s = 5 µs per byte: 256 B
    // would keep the sender 1.3 ms, while the whole message takes T(256).
    let mut p_net = net(1000.0, 200.0, 300.0, 0.1);
    p_net.O_s_ns_per_byte = 5000.0;
    let t = one_message_on(&p_net, 256).unwrap();
    let m = msg(&p_net, 256).unwrap();
    assert!(m.gap_ns <= t + 1e-9, "{} vs {t}", m.gap_ns);
    // A binomial broadcast over 4 ranks: the root's two sends one gap
    // apart, then the last hop: at most 3·T.
    let v = default_view(&p_net, Schedule::BcastBinomial, 4, 256);
    assert!(v.sync_ns <= 3.0 * t + 1e-6, "{v:?} vs T = {t}");
}

#[test]
fn an_exchange_range_lifted_above_the_ranges_after_it_is_capped_by_them() {
    // Measured under load: 1–3 B at 265 µs, 4–10 B at 6 µs, 11–723 B at
    // 81 µs + 361 ns/B, then 10 µs + 0.46 ns/B. An exchange of more bytes
    // takes no less time than one of fewer.
    let pair = [net(1000.0, 200.0, 300.0, 0.08)];
    let line = |from: u64, to: u64, g: f64, big_g: f64| Params {
        range_from_bytes: from,
        range_to_bytes: to,
        g_ns: g,
        G_ns_per_byte: big_g,
        ..Params::default()
    };
    let x = [
        line(1, 3, 264_688.0, 0.0),
        line(4, 10, 6_159.0, 0.0),
        line(11, 723, 80_970.0, 360.6),
        line(724, 4 << 20, 10_148.0, 0.4553),
    ];
    let measured = Measured {
        pair: &pair,
        exchange: &x,
        exchange_ranks: 8,
        contention: None,
    };
    let top_start = x[3].gap_ns(724);
    assert_eq!(measured.exchange_ns(8, 1), Some(6_159.0));
    assert_eq!(measured.exchange_ns(8, 7), Some(6_159.0));
    assert_eq!(measured.exchange_ns(8, 100), Some(top_start));
    assert_eq!(measured.exchange_ns(8, 1 << 20), Some(x[3].gap_ns(1 << 20)));
}

#[test]
fn open_mpis_tree_reduce_pays_for_buffers_allocated_per_call() {
    // 4 ranks, 1 MiB: Open MPI's binomial reduce receives into buffers it
    // allocates on every call (fresh pages from 128 KiB), ours into kept
    // scratch. Fresh pages at 0.4 ns/B: every rank with children touches
    // one vector more (the root's second child, rank 2's first).
    let mut p_net = net(1000.0, 200.0, 300.0, 0.08);
    p_net.S_bytes = 4096;
    let m = 1u64 << 20;
    let fresh = ViewOptions {
        fresh_ns_per_byte: 0.4,
        ..ViewOptions::default()
    };
    let price = |s, o: &ViewOptions| view(&p_net, s, 4, m, o, false, false).unwrap();
    let ours = price(Schedule::ReduceBinomial, &fresh);
    let theirs = price(Schedule::ReduceBinomialAlloc, &fresh);
    let extra = theirs.sync_ns - ours.sync_ns;
    // Two touches on the critical path (rank 2's, then the root's).
    assert!(
        (extra - 2.0 * 0.4 * m as f64).abs() < 1e-6 * theirs.sync_ns,
        "{extra}"
    );
    // Unpriced, or below the allocator's threshold: the same tree.
    assert_eq!(
        price(Schedule::ReduceBinomialAlloc, &ViewOptions::default()),
        price(Schedule::ReduceBinomial, &ViewOptions::default())
    );
    let small = |s| view(&p_net, s, 4, 65536, &fresh, false, false).unwrap();
    assert_eq!(
        small(Schedule::ReduceBinomialAlloc),
        small(Schedule::ReduceBinomial)
    );
    // Open MPI runs it for 512 KiB on 4 ranks, and a rules file naming
    // our binomial tree makes it run its own.
    assert_eq!(
        Library::OpenMpi41.schedule(Collective::Reduce, 4, 600_000, true),
        Schedule::ReduceBinomialAlloc
    );
    assert_eq!(
        Library::OpenMpi41.implementation(Schedule::ReduceBinomial),
        Schedule::ReduceBinomialAlloc
    );
    assert_eq!(
        Library::Mpich40.implementation(Schedule::ReduceBinomial),
        Schedule::ReduceBinomial
    );
    // Its Rabenseifner: every non-root copies its vector into a fresh
    // buffer, and the first halving step receives into another.
    let rab = price(Schedule::ReduceRabenseifnerAlloc, &fresh);
    let ours = price(Schedule::ReduceRabenseifner, &fresh);
    assert!(
        rab.sync_ns > ours.sync_ns + 0.4 * m as f64,
        "{rab:?} vs {ours:?}"
    );
}

/// A contention record with the given penalties per scheme (k = 1 first),
/// identified (an empty row: not measured).
fn record(out: &[f64], inc: &[f64], mixed: &[f64]) -> crate::TransportExt {
    use crate::ext::{Estimate, Scheme, Status};
    let mut t = crate::TransportExt::default();
    for (s, row) in [
        (Scheme::Outgoing, out),
        (Scheme::Incoming, inc),
        (Scheme::Mixed, mixed),
    ] {
        let est: Vec<Estimate> = row
            .iter()
            .map(|&v| Estimate::new(v, 0.9 * v, 1.1 * v))
            .collect();
        let status = if row.is_empty() {
            Status::NotIdentified(crate::Reason::NotMeasured)
        } else {
            Status::Identified
        };
        t.set_penalties(s, &est, status).unwrap();
    }
    t
}

fn with_record<'a>(
    pair: &'a [Params],
    exchange: &'a [Params],
    rec: Option<&'a crate::TransportExt>,
) -> Measured<'a> {
    Measured {
        contention: rec,
        ..measured_with_4(pair, exchange)
    }
}

#[test]
fn mixed_penalties_price_the_linear_alltoalls_concurrent_exchanges() {
    let (pair, x) = pair_and_exchange();
    let opts = SelectOptions {
        gamma_ns_per_byte: 0.0,
        cores: 0,
    };
    let c = 512 * 1024;
    let xs = x.as_slice().at(c).unwrap().gap_ns(c);
    // The penalties stretch the bytes' part X(c) − X(1).
    let x1 = measured_with_4(&pair, &x).exchange_ns(4, 1).unwrap();
    let stretched = |f: f64| x1 + (xs - x1) * f;
    let gap = pair[0].gap_ns(c);
    let price = |rec: Option<&crate::TransportExt>| {
        let n = with_record(&pair, &x, rec);
        let cs = candidates(&n, Collective::Alltoall, 4, c, &opts).unwrap();
        let v: Vec<f64> = cs.as_slice().iter().map(|c| c.predicted_ns).collect();
        (v[0], v[1], cs.best().algorithm().unwrap())
    };
    // Without a record: pairwise 3·X, linear X + 2 gaps: linear wins.
    let (pw, lin, best) = price(None);
    assert!((pw - 3.0 * xs).abs() < 1e-6 && (lin - (xs + 2.0 * gap)).abs() < 1e-6);
    assert_eq!(best, Algorithm::AlltoallLinear);
    // A record without penalties, or with mixed penalties that are not
    // identified, changes nothing.
    let empty = crate::TransportExt::default();
    assert_eq!(price(Some(&empty)), (pw, lin, best));
    let mut unstable = record(&[], &[], &[1.0, 2.1, 3.3]);
    unstable.set_status(
        crate::TransportField::PenaltyMixed,
        crate::Status::NotIdentified(crate::Reason::Unstable),
    );
    assert_eq!(price(Some(&unstable)), (pw, lin, best));
    // Three exchanges in flight per rank that each take 3.3× one alone:
    // linear is 3.3·X (relative to pen(1), which X already holds), slower
    // than pairwise's three steps one after the other.
    let rec = record(&[], &[], &[1.0, 2.1, 3.3]);
    let (pw2, lin2, best2) = price(Some(&rec));
    assert_eq!(pw2, pw, "one exchange per rank: X holds it");
    assert!((lin2 - stretched(3.3)).abs() < 1e-6, "{lin2}");
    assert!(lin2 > pw2);
    assert_eq!(best2, Algorithm::AlltoallPairwise);
    // Penalties measured for k ≤ 2 only: k = 3 is extrapolated by fair
    // sharing, pen(2)·3/2.
    let short = record(&[], &[], &[1.0, 2.2]);
    let (_, lin3, _) = price(Some(&short));
    assert!((lin3 - stretched(3.3)).abs() < 1e-6, "{lin3}");
    // Penalties of 2 at k = 3: linear's bytes in 2·(X − X(1)), still
    // faster than three steps.
    let mild = record(&[], &[], &[1.0, 1.5, 2.0]);
    assert_eq!(price(Some(&mild)).2, Algorithm::AlltoallLinear);
}

#[test]
fn without_a_measured_exchange_the_mixed_penalty_prices_every_exchange_step() {
    let pair = [net(1000.0, 200.0, 300.0, 0.08)];
    let m = 1u64 << 20;
    let opts = |cores| SelectOptions {
        gamma_ns_per_byte: 0.0,
        cores,
    };
    let rec = record(&[], &[], &[1.5]);
    let bare = with_record(&pair, &[], None);
    let pen = with_record(&pair, &[], Some(&rec));
    // Recursive doubling's two steps of m, the ring's six of m/4: each
    // step's bytes take 1.5 times as long.
    let step = |s: u64| {
        let t = one_message_on(&pair[..], s).unwrap();
        (
            t,
            t + 0.5 * super::cost::bytes_part_ns(&pair[..], s).unwrap(),
        )
    };
    let a = candidates(&bare, Collective::Allreduce, 4, m, &opts(0)).unwrap();
    let b = candidates(&pen, Collective::Allreduce, 4, m, &opts(0)).unwrap();
    let (t, tp) = step(m);
    assert!((a.as_slice()[0].predicted_ns - 2.0 * t).abs() < 1e-6);
    assert!((b.as_slice()[0].predicted_ns - 2.0 * tp).abs() < 1e-6);
    let (t, tp) = step(m / 4);
    assert!((a.as_slice()[2].predicted_ns - 6.0 * t).abs() < 1e-6);
    assert!((b.as_slice()[2].predicted_ns - 6.0 * tp).abs() < 1e-6);
    // The exchange steps' prices (not the linear exchanges': three
    // transfers from every rank at once, priced as alltoall's with the
    // penalty of three).
    let steps = |net: &dyn Network, coll: Collective, cores: usize| -> Vec<Choice> {
        let c = candidates(net, coll, 4, m, &opts(cores)).unwrap();
        let linear = |c: &&Choice| {
            matches!(
                c.algorithm(),
                Some(Algorithm::AllreduceLinear | Algorithm::AllgatherLinear)
            )
        };
        let out: Vec<Choice> = c
            .as_slice()
            .iter()
            .filter(|c| !linear(c))
            .copied()
            .collect();
        assert_eq!(out.len(), coll.algorithms().len() - 1);
        out
    };
    for coll in [Collective::Allreduce, Collective::Allgather] {
        // Two cores for four ranks stretch the steps by 2 already: the
        // larger of the two governs, they are not multiplied.
        assert_eq!(steps(&bare, coll, 2), steps(&pen, coll, 2));
    }
    // With the exchange measured, pen(1) is in X already.
    let (pair, x) = pair_and_exchange();
    let a = steps(&with_record(&pair, &x, None), Collective::Allreduce, 0);
    let b = steps(
        &with_record(&pair, &x, Some(&rec)),
        Collective::Allreduce,
        0,
    );
    assert_eq!(a, b);
}

#[test]
fn the_simulation_prices_concurrent_transfers_by_the_penalties() {
    let one_call = sim::Issue::BackToBack {
        calls: 1,
        rotate: false,
    };
    let finish = |net: &dyn Network, s: Schedule, m: u64| {
        let r = sim::run(net, s, 4, m, sim::Work::default(), one_call).unwrap();
        r.finish[0].iter().cloned().fold(0.0, f64::max)
    };
    // Linear alltoall: three exchanges in flight per rank, the last posted
    // two gaps after the first, each taking X·pen(3)/pen(1).
    let (pair, x) = pair_and_exchange();
    let c = 512 * 1024;
    let xs = x.as_slice().at(c).unwrap().gap_ns(c);
    let gap = pair[0].gap_ns(c);
    let copy = c as f64 * pair[0].G_ns_per_byte;
    let rec = record(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], &[1.0, 2.1, 3.3]);
    let bare = with_record(&pair, &x, None);
    let pen = with_record(&pair, &x, Some(&rec));
    let lin = finish(&bare, Schedule::AlltoallLinear, c);
    assert!((lin - (copy + 2.0 * gap + xs)).abs() < 1e-6, "{lin}");
    let x1 = bare.exchange_ns(4, 1).unwrap();
    let lin_pen = finish(&pen, Schedule::AlltoallLinear, c);
    let want = copy + 2.0 * gap + x1 + 3.3 * (xs - x1);
    assert!((lin_pen - want).abs() < 1e-6, "{lin_pen} vs {want}");
    // Pairwise: one exchange in flight per rank, unchanged.
    assert_eq!(
        finish(&pen, Schedule::AlltoallPairwise, c),
        finish(&bare, Schedule::AlltoallPairwise, c)
    );
    // Where the exchange was measured the copy lanes govern the other
    // messages: the outgoing penalty leaves the linear broadcast alone.
    assert_eq!(
        finish(&pen, Schedule::BcastLinear, c),
        finish(&bare, Schedule::BcastLinear, c)
    );
    // Without it (no lanes), the root's three sends in flight to distinct
    // peers take pen_out(3) = 3 times their bytes' time each.
    let pair_only = with_record(&pair, &[], None);
    let pair_pen = with_record(&pair, &[], Some(&rec));
    let t = one_message_on(&pair[..], c).unwrap();
    let bytes = super::cost::bytes_part_ns(&pair[..], c).unwrap();
    let root = finish(&pair_only, Schedule::BcastLinear, c);
    assert!((root - (2.0 * gap + t)).abs() < 1e-6, "{root}");
    let root_pen = finish(&pair_pen, Schedule::BcastLinear, c);
    assert!(
        (root_pen - (2.0 * gap + t + 2.0 * bytes)).abs() < 1e-6,
        "{root_pen}"
    );
    // A chain's segments go to one peer: one flow, no penalty.
    assert_eq!(
        finish(&pair_pen, Schedule::BcastChain { seg: 64 * 1024 }, c),
        finish(&pair_only, Schedule::BcastChain { seg: 64 * 1024 }, c)
    );
}

#[test]
fn a_readers_network_finds_the_penalties_only_where_the_record_is() {
    use crate::ext::Scheme;
    let path = std::env::temp_dir().join(format!("ng-select-pen-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut w = crate::SegmentWriter::create_or_open(&path, 4, "node", "test").unwrap();
    let reader = crate::Reader::open(&path).unwrap();
    let net = ReaderNetwork {
        reader: &reader,
        peer: "peer",
        transport: "mpi",
    };
    // A segment without a record (as every segment before ABI 1.1).
    assert_eq!(net.penalty(Scheme::Mixed, 1), None);
    w.set_transport_ext("udp", &record(&[1.0, 2.0], &[], &[1.0, 2.1, 3.3]))
        .unwrap();
    assert_eq!(net.penalty(Scheme::Mixed, 3), None, "another transport's");
    w.set_transport_ext("mpi", &record(&[1.0, 2.0], &[], &[1.0, 2.1, 3.3]))
        .unwrap();
    assert_eq!(net.penalty(Scheme::Mixed, 3), Some(3.3));
    assert_eq!(net.penalty(Scheme::Outgoing, 4), Some(4.0), "pen(2)·4/2");
    assert_eq!(net.penalty(Scheme::Incoming, 1), None, "not measured");
    assert_eq!(net.penalty(Scheme::Mixed, 0), None);
    drop(w);
    let _ = std::fs::remove_file(&path);
}

/// Exchange ranges g + (s−1)·G with g = 5 µs: G = `below` ns/B from 1 to
/// `at` bytes, `above` ns/B from there to 8 MiB.
fn exchange_cliff(at: u64, below: f64, above: f64) -> [Params; 2] {
    let line = |from: u64, to: u64, big_g: f64| Params {
        range_from_bytes: from,
        range_to_bytes: to,
        g_ns: 5_000.0,
        G_ns_per_byte: big_g,
        ..Params::default()
    };
    [line(1, at, below), line(at + 1, 8 << 20, above)]
}

#[test]
fn a_ring_of_blocks_of_a_large_vector_moves_at_the_vectors_rate() {
    // 4 ranks whose exchange moves its bytes at 0.2 ns/B while the four
    // ranks' buffers stay in the caches (below 1 MiB) and at 0.6 ns/B
    // above. The ring allreduce of 4 MiB exchanges 1 MiB blocks of 4 MiB
    // vectors: its steps move at the rate measured at 4 MiB, not at the
    // rate of an exchange that reuses 1 MiB buffers.
    let pair = [net(1000.0, 200.0, 300.0, 0.08)];
    let x = exchange_cliff(1 << 20, 0.2, 0.6);
    let measured = measured_with_4(&pair, &x);
    let m = 4u64 << 20;
    let b = m / 4;
    let x1 = measured.exchange_ns(4, 1).unwrap();
    let x_block = measured.exchange_ns(4, b).unwrap();
    let x_vec = measured.exchange_ns(4, m).unwrap();
    let step = x1 + (x_vec - x1) * (b - 1) as f64 / (m - 1) as f64;
    assert!(step > 1.3 * x_block, "{step} vs {x_block}");
    let one_call = sim::Issue::BackToBack {
        calls: 1,
        rotate: false,
    };
    let sync = |s: Schedule, m: u64| {
        let r = sim::run(&measured, s, 4, m, sim::Work::default(), one_call).unwrap();
        r.finish[0].iter().cloned().fold(0.0, f64::max)
    };
    let ring = sync(Schedule::AllreduceRing, m);
    assert!(
        (ring - 6.0 * step).abs() < 1e-6 * ring,
        "{ring} vs 6·{step}"
    );
    // A vector whose blocks fill it (recursive doubling exchanges the
    // whole vector) keeps the rate measured at its size.
    let rd = sync(Schedule::AllreduceRecursiveDoubling, m);
    assert!((rd - 2.0 * x_vec).abs() < 1e-6 * rd, "{rd} vs 2·{x_vec}");
    // A small vector below the cliff is priced as before.
    let small = 64 << 10;
    let ring_small = sync(Schedule::AllreduceRing, small);
    let x_small = measured.exchange_ns(4, small / 4).unwrap();
    assert!((ring_small - 6.0 * x_small).abs() < 1e-6 * ring_small);
    // Open MPI's Rabenseifner moves as many bytes per rank as the ring in
    // two steps fewer: the ring no longer beats it, and the library's own
    // choice stands.
    let opts = ViewOptions {
        gamma_ns_per_byte: 0.0,
        ..ViewOptions::default()
    };
    let all: Vec<Algorithm> = Algorithm::ALL.to_vec();
    let d = choose(
        &measured,
        Library::OpenMpi41,
        Collective::Allreduce,
        4,
        m,
        true,
        &all,
        &opts,
        0.05,
    )
    .unwrap();
    assert_eq!(d.library.schedule, Schedule::AllreduceRabenseifner);
    assert!(d.ours.is_none(), "{d:?}");
}

#[test]
fn the_node_has_one_copy_lane_count_for_every_large_size() {
    // 8 ranks: the exchange moves its bytes 4× a pair's time per byte up
    // to 1.5 MiB (8·0.08/0.32: two lanes at those sizes) and 8× above (one
    // lane). The node moves as many single-copy transfers at once at
    // every size: one lane, the least.
    let pair = [net(1000.0, 200.0, 300.0, 0.08)];
    let x = exchange_cliff(3 << 19, 0.32, 0.64);
    let measured = Measured {
        pair: &pair,
        exchange: &x,
        exchange_ranks: 8,
        contention: None,
    };
    assert_eq!(
        super::cost::copy_lanes(&measured, 8, 512 << 10).unwrap(),
        Some(2)
    );
    assert_eq!(
        super::cost::copy_lanes(&measured, 8, 4 << 20).unwrap(),
        Some(1)
    );
    assert_eq!(super::cost::node_copy_lanes(&measured, 8).unwrap(), Some(1));
    assert_eq!(super::cost::node_copy_lanes(&pair[..], 8).unwrap(), None);
    // A chain of 512 KiB segments broadcasting 4 MiB over 8 ranks: 8
    // segments over 7 hops, every one of them on the one lane.
    let m = 4u64 << 20;
    let seg = 512u64 << 10;
    let r = sim::run(
        &measured,
        Schedule::BcastChain { seg },
        8,
        m,
        sim::Work::default(),
        sim::Issue::BackToBack {
            calls: 1,
            rotate: false,
        },
    )
    .unwrap();
    let bytes = super::cost::bytes_part_ns(&pair[..], seg).unwrap();
    assert!(
        (r.lane_ns - 56.0 * bytes).abs() < 1e-6 * r.lane_ns,
        "{} vs 56·{bytes}",
        r.lane_ns
    );
    let sync = r.finish[0].iter().cloned().fold(0.0, f64::max);
    assert!(sync >= 56.0 * bytes, "{sync} vs 56·{bytes}");
}

#[test]
fn the_penalties_leave_small_messages_to_the_measured_step() {
    // Linear alltoall over 4 ranks: three exchanges in flight per rank.
    // The record's penalties (large flows) stretch blocks of 512 KiB; a
    // block of 2 KiB is priced by the measured exchange step alone, with
    // the record as without it.
    let one_call = sim::Issue::BackToBack {
        calls: 1,
        rotate: false,
    };
    let finish = |net: &dyn Network, m: u64| {
        let r = sim::run(
            net,
            Schedule::AlltoallLinear,
            4,
            m,
            sim::Work::default(),
            one_call,
        )
        .unwrap();
        r.finish[0].iter().cloned().fold(0.0, f64::max)
    };
    let (pair, x) = pair_and_exchange();
    let rec = record(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0], &[1.0, 2.1, 3.3]);
    let bare = with_record(&pair, &x, None);
    let pen = with_record(&pair, &x, Some(&rec));
    let small = 2048;
    assert_eq!(finish(&pen, small), finish(&bare, small));
    let large = 512 << 10;
    assert!(finish(&pen, large) > 1.5 * finish(&bare, large));
    assert!(small < sim::PENALTY_FROM_BYTES && large >= sim::PENALTY_FROM_BYTES);
}

#[test]
fn a_wide_ranges_gap_intercept_does_not_space_small_messages() {
    // The 8-rank probe's pair: 44–256 B at 585 ns + 1.544 ns/B, then one
    // range to 1.26 MB fitted at 9.236 µs + 0.0903 ns/B: its intercept is
    // the large sizes' line, 8 µs above where the range below ends.
    let range = |from: u64, to: u64, g: f64, big_g: f64| Params {
        range_from_bytes: from,
        range_to_bytes: to,
        g_ns: g,
        G_ns_per_byte: big_g,
        eel_ns: 2500.0,
        L_ns: 2000.0,
        o_s_ns: 300.0,
        o_r_ns: 120.0,
        S_bytes: u64::MAX,
        ..Params::default()
    };
    let pair = [
        range(1, 256, 585.0, 1.544),
        range(309, 1_264_469, 9236.0, 0.0903),
    ];
    let net = &pair[..];
    let end_below = pair[0].gap_ns(308);
    let gap = |s: u64| super::cost::gap_on(net, s).unwrap();
    assert!(
        (gap(1024) - (end_below + 716.0 * 0.0903)).abs() < 1e-9,
        "{}",
        gap(1024)
    );
    assert!(gap(1024) < 0.2 * pair[1].gap_ns(1024));
    // Large sizes keep their range's line where it is the lower.
    assert_eq!(gap(100), pair[0].gap_ns(100));
    let big = 1_000_000;
    assert!(gap(big) <= pair[1].gap_ns(big));
    // A root sending three 1 KiB messages no longer waits 9 µs between
    // them: Open MPI's k-nomial broadcast over 8 ranks is not priced above
    // twice a 7-hop chain's back to back, and the chain is not chosen.
    let all: Vec<Algorithm> = Algorithm::ALL.to_vec();
    let d = choose(
        net,
        Library::OpenMpi41,
        Collective::Bcast,
        8,
        1024,
        true,
        &all,
        &ViewOptions::default(),
        0.1,
    )
    .unwrap();
    assert_eq!(d.library.schedule, Schedule::BcastKnomial { radix: 4 });
    assert!(d.ours.is_none(), "{d:?}");
}

#[test]
fn the_chains_sharing_sum_is_the_sum_over_its_hops() {
    for cores in [0usize, 1, 2, 3, 8] {
        let sh = Sharing::new(cores);
        for hops in [0usize, 1, 2, 3, 7, 8, 9, 64, 1000] {
            for cap in [1usize, 2, 5, 8, 100, usize::MAX] {
                let looped: f64 = (1..=hops).map(|h| sh.factor(h.min(cap))).sum();
                let closed = sh.factor_sum(hops, cap);
                assert!(
                    (closed - looped).abs() <= 1e-12 * looped.max(1.0),
                    "cores {cores} hops {hops} cap {cap}: {closed} vs {looped}"
                );
            }
        }
    }
    // Half a million ranks: in closed form, exact to the last bit here.
    assert_eq!(Sharing::new(64).factor_sum(524_287, usize::MAX), {
        let n = 524_287u128;
        64.0 + ((n * (n + 1) - 64 * 65) / 2) as f64 / 64.0
    });
}

/// A call of `coll` over `p` ranks and `m` bytes under `lib`.
fn call(lib: Library, coll: Collective, p: usize, m: u64, one_node: bool) -> super::Call {
    super::Call {
        lib,
        coll,
        ranks: p,
        bytes: m,
        one_node,
    }
}

/// Rule algorithms as `choose_named` candidates named by their numbers.
fn by_number(list: Vec<super::RuleAlgorithm>) -> Vec<(u32, Schedule)> {
    list.into_iter().map(|r| (r.number, r.schedule)).collect()
}

#[test]
fn a_rules_file_may_name_any_of_the_librarys_algorithms_that_clearly_wins() {
    let mut p_net = net(1000.0, 300.0, 450.0, 0.1);
    p_net.S_bytes = 4096;
    let opts = ViewOptions::default();
    let lib = Library::OpenMpi41;
    let named = |coll, p, m, margin| {
        let c = by_number(super::ompi_rule_algorithms(coll, p, m));
        let call = call(lib, coll, p, m, true);
        let library = super::LibraryChoice::of(&p_net, &call, &opts).unwrap();
        super::choose_named(&p_net, &call, &library, &c, &opts, margin).unwrap()
    };
    // Whatever it names clears the margin against the fixed decision in
    // the geometric mean of the four views and loses none by more than
    // half of it; it is never the fixed decision's own schedule.
    let mut some = 0;
    for coll in Collective::ALL {
        for p in [3usize, 4, 8] {
            for m in [8u64, 1024, 64 << 10, 1 << 20] {
                let own = lib.schedule(coll, p, m, true);
                let lib_view = view(&p_net, own, p, m, &opts, false, false).unwrap();
                let Some((number, v)) = named(coll, p, m, 0.1) else {
                    continue;
                };
                some += 1;
                let r: Vec<f64> = v
                    .prices()
                    .iter()
                    .zip(lib_view.prices())
                    .map(|(o, l)| o / l)
                    .collect();
                let gmean = (r.iter().map(|x| x.ln()).sum::<f64>() / 4.0).exp();
                assert!(
                    gmean <= 0.9 && r.iter().all(|&x| x <= 1.05),
                    "{coll:?} {p} {m}: {number} {r:?}"
                );
                let rule = super::ompi_rule_algorithms(coll, p, m)
                    .into_iter()
                    .find(|a| a.number == number)
                    .unwrap();
                assert_ne!(rule.schedule, own, "{coll:?} {p} {m}");
                // A margin nothing clears: the fixed decision.
                assert!(named(coll, p, m, 0.99).is_none());
            }
        }
    }
    assert!(some > 0, "nothing named anywhere");
    // No candidates: the fixed decision.
    let none: &[(u32, Schedule)] = &[];
    let call = call(lib, Collective::Reduce, 4, 1024, true);
    let library = super::LibraryChoice::of(&p_net, &call, &opts).unwrap();
    assert!(
        super::choose_named(&p_net, &call, &library, none, &opts, 0.0)
            .unwrap()
            .is_none()
    );
}

#[test]
fn choose_prices_the_librarys_own_as_library_choice_of_does() {
    // What `choose` hands on for `choose_named` is the library's own choice
    // priced as for the call alone: same schedule, prices and run-ahead.
    let p_net = net(1000.0, 300.0, 450.0, 0.1);
    let opts = ViewOptions {
        cores: 2,
        ..ViewOptions::default()
    };
    let mut ahead = 0;
    for lib in [Library::OpenMpi41, Library::Mpich40] {
        for coll in Collective::ALL {
            for (p, m) in [(4usize, 8u64), (4, 8192), (8, 4096), (16, 1 << 20)] {
                let d = super::choose(&p_net, lib, coll, p, m, true, &[], &opts, 0.1).unwrap();
                let alone =
                    super::LibraryChoice::of(&p_net, &call(lib, coll, p, m, true), &opts).unwrap();
                assert_eq!(d.library, alone, "{lib:?} {coll:?} {p} {m}");
                ahead += usize::from(alone.runs_ahead);
            }
        }
    }
    assert!(
        ahead > 0,
        "no call whose root runs ahead: run-ahead untested"
    );
}

#[test]
fn a_rules_file_never_names_an_algorithm_that_returns_wrong_data() {
    // Where the model prices Open MPI's Bruck alltoall clearly fastest
    // (small blocks, overhead and gap above the latency: its log P rounds
    // beat P − 1 sends; at 8 and 12 ranks, and 16 at 1 B, where the fixed
    // decision runs the linear one), choosing among all of
    // coll/tuned's algorithms names it, and the rule algorithms leave it
    // out.
    let p_net = net(500.0, 2000.0, 3000.0, 0.1);
    let opts = ViewOptions::default();
    let lib = Library::OpenMpi41;
    let pick = |list: Vec<super::RuleAlgorithm>, p, m| {
        let call = call(lib, Collective::Alltoall, p, m, false);
        let library = super::LibraryChoice::of(&p_net, &call, &opts).unwrap();
        super::choose_named(&p_net, &call, &library, &by_number(list), &opts, 0.1)
            .unwrap()
            .map(|(n, _)| n)
    };
    let mut bruck_wins = 0;
    for p in [8usize, 12, 16, 32] {
        for m in [1u64, 8, 64] {
            let all = super::ompi_tuned_algorithms(Collective::Alltoall, p, m);
            assert!(all.iter().any(|r| r.number == 3), "{p} {m}");
            if pick(all, p, m) == Some(3) {
                bruck_wins += 1;
            }
            let rules = super::ompi_rule_algorithms(Collective::Alltoall, p, m);
            assert!(rules.iter().all(|r| r.number != 3), "{p} {m}");
        }
    }
    assert!(
        bruck_wins > 0,
        "the model never prefers the Bruck alltoall here"
    );
}

#[test]
fn the_rule_algorithms_carry_coll_tuneds_numbers_and_its_fallbacks() {
    use Schedule as S;
    // Open MPI 4.1's numbers (`ompi_info --param coll tuned --level 9`).
    let number = |s: S| match s {
        S::BcastLinear | S::ReduceLinear | S::AlltoallLinear | S::BarrierLinear => 1,
        S::ReduceChain { .. } | S::AlltoallPairwise | S::AllgatherBruck => 2,
        S::BcastChain { .. }
        | S::AllreduceRecursiveDoubling
        | S::AllgatherRecursiveDoubling
        | S::AlltoallBruck
        | S::BarrierRecursiveDoubling => 3,
        S::ReduceBinary | S::AllreduceRing | S::AllgatherRing | S::BarrierDissemination => 4,
        S::BcastBinary | S::ReduceBinomialAlloc | S::AllgatherNeighbor => 5,
        S::BcastBinomial | S::AllreduceRabenseifner | S::BarrierTree => 6,
        S::BcastKnomial { radix: 4 } | S::ReduceRabenseifnerAlloc => 7,
        S::BcastScatterRd => 8,
        S::BcastScatterRing => 9,
        other => panic!("no rule names {other:?}"),
    };
    for coll in Collective::ALL {
        for p in [3usize, 4, 8] {
            for m in [0u64, 8, 63, 64, 4096, 1 << 20] {
                let rules = super::ompi_rule_algorithms(coll, p, m);
                assert!(!rules.is_empty(), "{coll:?} {p} {m}");
                for r in &rules {
                    assert_eq!(r.number, number(r.schedule), "{coll:?} {r:?}");
                }
                let has = |n: u32| rules.iter().any(|r| r.number == n);
                // Fallbacks below an element count (8-byte elements): the
                // scatter-allgathers below P, Rabenseifner's below the
                // largest power of two ≤ P, the ring below P.
                let pow2_floor = 1u64 << p.ilog2();
                match coll {
                    Collective::Bcast => assert_eq!(has(9), m >= 8 * p as u64, "{p} {m}"),
                    Collective::Reduce => assert_eq!(has(7), m >= 8 * pow2_floor, "{p} {m}"),
                    Collective::Allreduce => {
                        assert_eq!(has(4), m >= 8 * p as u64, "{p} {m}");
                        assert_eq!(has(6), m >= 8 * pow2_floor, "{p} {m}");
                    }
                    _ => {}
                }
            }
        }
    }
}
