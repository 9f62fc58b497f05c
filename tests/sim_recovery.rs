//! The estimators recover known parameters from the discrete-event `sim`
//! network (ground truth), with and without jitter.
//!
//! Truth in the sim's semantics: a PRTT(1,0,1) costs o (post) + L + o
//! (receive) each way, so EEL = L + 2o; the first range's g, G and o are the
//! model's own parameters.

use netgauged::clock::VirtualClock;
use netgauged::model::fit::FIRST_RANGE_KEYS;
use netgauged::probe::{self, ProbeOptions, ProbeResult};
use netgauged::transport::sim::{SimParams, SimTransport};

fn probe_sim(model: &str, max_size: u64, fanout_peers: Option<usize>) -> ProbeResult {
    let params: SimParams = model.parse().expect("valid model");
    let mut opts = ProbeOptions {
        fanout_peers,
        resamples: 100,
        seed: params.seed,
        ..ProbeOptions::default()
    };
    opts.sweep.max_size_bytes = max_size;
    // The model has no cold path to warm and no residue of a burst to
    // settle (extra round trips would only shift the jitter's sequence).
    opts.sweep.session_warmup = std::time::Duration::ZERO;
    opts.sweep.settle_rounds = 0;
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(params, clock.clone(), fanout_peers.unwrap_or(1));
    probe::run(&mut t, &clock, 0, &opts, &mut ()).expect("sim probe never loses a message")
}

#[track_caller]
fn within(what: &str, got: f64, want: f64, rel: f64) {
    let err = (got - want).abs() / want.abs();
    assert!(
        err <= rel,
        "{what}: got {got}, want {want} (error {:.2} % > {:.2} %)",
        err * 100.0,
        rel * 100.0
    );
}

/// Check the first (eager) range and S of a LogGP(S) set.
fn check_loggp(r: &ProbeResult, l: f64, o: f64, g: f64, big_g: f64, s: u64, tol: f64) {
    let first = &r.fit.ranges[0];
    within("g", first.g_ns, g, tol);
    within("G", first.G_ns_per_byte, big_g, tol);
    within("o_s", first.o_s_ns, o, tol);
    within("o_r", first.o_r_ns, o, tol);
    within("EEL", r.fit.eel_ns, l + 2.0 * o, tol);
    assert_eq!(r.fit.S_bytes, Some(s), "rendezvous threshold S");
    assert!(
        r.fit.ranges.len() >= 2,
        "the rendezvous range is its own range"
    );
    let rdv = r
        .fit
        .ranges
        .iter()
        .find(|x| x.from_bytes == s + 1)
        .expect("a range starting at S+1");
    // The blocking rendezvous handshake adds one small-message round trip to
    // every message's cycle: a request (o, L, o at the server), the answer
    // (o, L, o back) and the data post (o): the gap at S+1 becomes
    // g + S·G + 2L + 4o. (The range's own intercept is an extrapolation from
    // sizes far above S, so it is the gap at S+1 that is checked.)
    let at_s1 = rdv.g_ns + (s as f64) * rdv.G_ns_per_byte;
    within(
        "gap at S+1",
        at_s1,
        g + (s as f64) * big_g + 2.0 * l + 4.0 * o,
        tol,
    );
    within("G above S", rdv.G_ns_per_byte, big_g, 2.0 * tol);
    // Every parameter carries a 95 % interval.
    for key in FIRST_RANGE_KEYS {
        let (lo, hi) = r.ci95[key];
        assert!(lo <= hi, "{key} interval [{lo}, {hi}]");
    }
}

// Hoefler/Lichei/Rehm Table 2, Open MPI/openib: change at 12289 B.
const OPENIB: &str = "L=5960,o=4720,g=5140,G=0.73,S=12288";
// Table 2, Open MPI/gm: change at 32769 B.
const GM: &str = "L=10530,o=1270,g=9440,G=9.2,S=32768";

#[test]
fn openib_exact() {
    let r = probe_sim(OPENIB, 128 * 1024, None);
    check_loggp(&r, 5960.0, 4720.0, 5140.0, 0.73, 12288, 0.02);
    assert!(!r.fit.L_negative);
    within("L", r.fit.L_ns, 5960.0, 0.02);
}

#[test]
fn openib_jitter() {
    let r = probe_sim(&format!("{OPENIB},jitter=0.02,seed=7"), 128 * 1024, None);
    check_loggp(&r, 5960.0, 4720.0, 5140.0, 0.73, 12288, 0.03);
}

#[test]
fn gm_exact() {
    let r = probe_sim(GM, 128 * 1024, None);
    check_loggp(&r, 10530.0, 1270.0, 9440.0, 9.2, 32768, 0.02);
}

#[test]
fn gm_jitter() {
    let r = probe_sim(&format!("{GM},jitter=0.02,seed=11"), 128 * 1024, None);
    check_loggp(&r, 10530.0, 1270.0, 9440.0, 9.2, 32768, 0.03);
}

/// LogfP: up to f = 6 messages to distinct peers are free of g; posting P
/// messages costs P·o_min + o_max. The client's receive overhead (o = 50) is
/// below both the posting overhead and g, so f is identifiable.
const LOGFP: &str = "L=1100,o=50,g=450,G=0.08,f=6,omin=150,omax=900";

fn check_logfp(r: &ProbeResult, tol: f64) {
    let l = r.logfp.as_ref().expect("fan-out ran");
    assert_eq!(l.f, Some(6), "f from the two-regime fit");
    within("o_min", l.o_min_ns, 150.0, 0.10);
    within("o_max", l.o_max_ns, 900.0, 0.10);
    within("LogfP g", l.g_ns, 450.0, tol);
    assert!(r.ci95.contains_key("logfp.o_min_ns"));
}

#[test]
fn logfp_exact() {
    let r = probe_sim(LOGFP, 4096, Some(16));
    check_logfp(&r, 0.02);
}

#[test]
fn logfp_jitter() {
    let r = probe_sim(&format!("{LOGFP},jitter=0.02,seed=3"), 4096, Some(16));
    check_logfp(&r, 0.05);
}

/// LogGPS size-linear overhead o' + s·O is recovered per range.
#[test]
fn loggps_linear_overhead() {
    let r = probe_sim("L=2000,o=500,g=800,G=0.1,O=0.02", 64 * 1024, None);
    let first = &r.fit.ranges[0];
    within("O_s", first.O_s_ns_per_byte, 0.02, 0.05);
    within("O_r", first.O_r_ns_per_byte, 0.02, 0.05);
    assert_eq!(r.fit.S_bytes, None, "no rendezvous in this set");
}

/// The adaptive schedule spends a small fraction of Netgauge's bytes.
#[test]
fn economy_against_netgauge_schedule() {
    let r = probe_sim(OPENIB, 128 * 1024, None);
    // Netgauge 2.4.6: sizes 1 + 1024k up to 130049 B, 100 repetitions, n = 10,
    // four PRTT series per repetition: PRTT(1,0,s) (2 messages) and three
    // series of n + 1 messages.
    let netgauge_bytes: u64 = (0..128u64).map(|k| 1 + 1024 * k).sum::<u64>() * 100 * (2 + 3 * 11);
    assert!(
        (r.probe_bytes as f64) < 0.01 * netgauge_bytes as f64,
        "{} B is not below 1 % of Netgauge's {} B",
        r.probe_bytes,
        netgauge_bytes
    );
}

/// A slow link (1 µs per byte: 8 Mbit/s) up to 512 KiB: a single message
/// takes 0.52 s, twice the configured 250 ms wait, and a burst of 8 over
/// 4 s. The wait follows the pace the session warm-up's doubling ramp
/// measured, so no round is taken for lost, and the parameters are those of
/// a fast link.
#[test]
fn a_slow_link_is_measured_not_lost() {
    let params: SimParams = "L=5000,o=1000,g=2000,G=1000".parse().unwrap();
    let mut opts = ProbeOptions {
        resamples: 0,
        ..ProbeOptions::default()
    };
    opts.sweep.max_size_bytes = 512 * 1024;
    opts.sweep.settle_rounds = 0;
    assert_eq!(opts.sweep.timeout, std::time::Duration::from_millis(250));
    let clock = VirtualClock::new();
    let mut t = SimTransport::new(params, clock.clone(), 1);
    let r = probe::run(&mut t, &clock, 0, &opts, &mut ()).expect("a slow link is not a lost peer");
    assert_eq!(r.lost_rounds, 0);
    let first = &r.fit.ranges[0];
    within("G", first.G_ns_per_byte, 1000.0, 0.01);
    within("EEL", r.fit.eel_ns, 5000.0 + 2.0 * 1000.0, 0.01);
    assert_eq!(r.fit.ranges.len(), 1, "{:?}", r.fit.ranges);
}
