use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::admission::{accept_session, Activity, DriveClaim};
use super::config::Config;
use super::control::{handle_control, reject_text, ControlHandler};
use super::job::{fanout_job, fanout_sets, make_targets, run_job, JobCtx, JobError, Target};
use super::sched::{Job, PeerPhase};
use super::Shared;
use crate::clock::HostClock;
use crate::control::{
    self, ClusterKey, ConnConfig, ConnId, Msg, ProbeAccept, ProbeDone, ProbeRequest, RejectReason,
    SizePlan,
};
use crate::transport::dgram::SessionGate;
use crate::transport::Kind;

fn cfg(peers: &str) -> Config {
    let c: Config = toml::from_str(&format!("key_file = \"/k\"\n{peers}")).unwrap();
    c.validate().unwrap();
    c
}

fn peer(name: &str, extra: &str) -> String {
    format!("[[peer]]\nname = \"{name}\"\naddress = \"10.0.0.9:7470\"\n{extra}\n")
}

fn kinds(t: &[Target], peer: usize) -> Vec<Kind> {
    t.iter()
        .filter(|t| t.peer == peer)
        .map(|t| t.kind)
        .collect()
}

#[test]
fn targets_follow_the_lists_and_what_works() {
    let c = cfg(&[
        peer("a", "transports = [\"rdma\", \"msg\"]"),
        peer("b", "transports = [\"udp\", \"rdma\"]"),
        peer("c", ""),
        peer("d", "interface = \"eth1\"\ntransports = [\"raw\"]"),
    ]
    .concat());
    let mut raw = HashMap::new();
    // With a verbs device, and raw toward d.
    raw.insert("d".to_string(), ("eth1".to_string(), [2, 0, 0, 0, 0, 1]));
    let t = make_targets(&c, &raw, true);
    assert_eq!(kinds(&t, 0), [Kind::Rdma, Kind::Msg]);
    assert_eq!(kinds(&t, 1), [Kind::Rdma, Kind::Udp]);
    assert_eq!(kinds(&t, 2), [Kind::Udp]);
    assert_eq!(kinds(&t, 3), [Kind::Raw]);
    // Without a device (or raw): the verbs targets go, udp stays or
    // stands in, as it does for raw.
    let t = make_targets(&c, &HashMap::new(), false);
    assert_eq!(kinds(&t, 0), [Kind::Udp]);
    assert_eq!(kinds(&t, 1), [Kind::Udp]);
    assert_eq!(kinds(&t, 2), [Kind::Udp]);
    assert_eq!(kinds(&t, 3), [Kind::Udp]);
}

#[test]
fn fanouts_need_two_peers_per_transport() {
    let c = cfg(&[
        peer("a", "transports = [\"rdma\", \"msg\"]"),
        peer("b", "transports = [\"udp\", \"rdma\"]"),
        peer("c", "transports = [\"msg\"]"),
    ]
    .concat());
    let t = make_targets(&c, &HashMap::new(), true);
    let all_known = vec![PeerPhase::Known; t.len()];
    let f = fanout_sets(&c, &t, &all_known);
    assert_eq!(
        f,
        vec![(Kind::Udp, vec![0, 1, 2]), (Kind::Rdma, vec![0, 1])]
    );
    // A failing rdma target leaves its peer out of both (a has no udp
    // target: it is in the udp fan-out only while all of its are known).
    let mut phases = all_known.clone();
    phases[0] = PeerPhase::Failing; // a over rdma
    assert_eq!(fanout_sets(&c, &t, &phases), vec![(Kind::Udp, vec![1, 2])]);
    let c = cfg(&[peer("a", "transports = [\"rdma\"]"), peer("b", "")].concat());
    let t = make_targets(&c, &HashMap::new(), true);
    let all_known = vec![PeerPhase::Known; t.len()];
    assert_eq!(
        fanout_sets(&c, &t, &all_known),
        vec![(Kind::Udp, vec![0, 1])]
    );
    assert!(fanout_sets(&cfg(&peer("a", "")), &[], &[]).is_empty());
}

fn shared(node: &str) -> Shared {
    Shared {
        node: node.into(),
        generation: 1,
        started: Instant::now(),
        udp_port: 0,
        local_ip: std::net::Ipv4Addr::LOCALHOST.into(),
        gate: Arc::new(SessionGate::new()),
        activity: Mutex::new(Activity::default()),
        status: Mutex::new(Vec::new()),
        status_version: AtomicU64::new(0),
        raw_toward: HashMap::new(),
        spent_bytes: AtomicU64::new(0),
        budget_bytes_per_s: 0,
        shutdown: super::Shutdown::new(),
        verbs: OnceLock::new(),
        quiet: AtomicBool::new(false),
        flow_budget: Mutex::new(super::contention::FlowBudget::new(1000, Instant::now())),
        flow_bytes: AtomicU64::new(0),
        operator: OnceLock::new(),
        rejects: OnceLock::new(),
        probe_alive: super::lifecycle::Liveness::new(),
    }
}

/// The address the tests' control connections come from.
const FROM: std::net::SocketAddr = std::net::SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::new(10, 0, 0, 9),
    40000,
));

/// A flow session of someone's conflict probe or bisection round: refused
/// while quiet and beyond the flow budget (1000 B/s here: 600 000 B held),
/// its bytes counted for this node's scheduler when consented.
#[test]
fn flow_sessions_need_consent_within_the_budget_and_never_while_quiet() {
    let s = shared("b");
    let flow = |nonce, bytes| ProbeRequest {
        sizes: SizePlan::Flow { bytes },
        ..request("a", nonce)
    };
    let reason = |m: Msg| match m {
        Msg::ProbeReject(r) => Some(r.reason),
        _ => None,
    };
    s.quiet.store(true, Ordering::Relaxed);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(1, 1000));
    assert_eq!(reason(m), Some(RejectReason::Quiet));
    assert_eq!(s.take_flow_bytes(), 0);
    s.quiet.store(false, Ordering::Relaxed);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(2, 700_000));
    assert_eq!(reason(m), Some(RejectReason::Budget));
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(3, 500_000));
    assert!(matches!(m, Msg::ProbeAccept(_)), "{m:?}");
    assert_eq!(s.take_flow_bytes(), 500_000);
    assert_eq!(s.take_flow_bytes(), 0);
    s.end_serving_if(|_| true);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(4, 200_000));
    assert_eq!(reason(m), Some(RejectReason::Budget));
}

fn request(from: &str, nonce: u64) -> ProbeRequest {
    ProbeRequest {
        session_nonce: nonce,
        transport: Kind::Udp,
        sizes: SizePlan::Full,
        driver: from.into(),
        driver_mac: None,
    }
}

fn accept(s: &Shared, conn: u64, from: &str, nonce: u64) -> Msg {
    accept_session(s, ConnId(conn), FROM, from, &request(from, nonce))
}

#[test]
fn a_node_drives_or_serves_never_both() {
    let s = shared("b");
    // Driving (from the claim on, before its own request is even
    // sent): every request is refused, the crossing one included.
    let claim = DriveClaim::take(&s).unwrap();
    for from in ["a", "c"] {
        match accept(&s, 1, from, 7) {
            Msg::ProbeReject(r) => assert_eq!(r.reason, RejectReason::Busy),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(s.gate.nonce(), 0);
    drop(claim);
    // Free again: a request is accepted and opens the gate ...
    assert!(matches!(
        accept(&s, 2, "a", 9),
        Msg::ProbeAccept(ProbeAccept { session_nonce: 9 })
    ));
    assert_eq!(s.gate.nonce(), 9);
    // ... and while it is served this node neither drives nor serves
    // another.
    assert!(matches!(DriveClaim::take(&s), Err(JobError::Occupied(d)) if d == "a"));
    assert!(matches!(accept(&s, 3, "c", 11), Msg::ProbeReject(_)));
    // The driver's ProbeDone frees it.
    let done = Msg::ProbeDone(ProbeDone { session_nonce: 9 });
    assert!(handle_control(&s, ConnId(2), FROM, "a", done).is_none());
    assert_eq!(s.gate.nonce(), 0);
    assert!(DriveClaim::take(&s).is_ok());
}

#[test]
fn a_session_ends_with_the_connection_that_asked_for_it() {
    use control::Handler;
    let h = ControlHandler(Arc::new(shared("b")));
    assert!(matches!(accept(&h.0, 4, "a", 9), Msg::ProbeAccept(_)));
    // Another connection of the same driver ending changes nothing ...
    h.closed(ConnId(3), "a");
    assert_eq!(h.0.gate.nonce(), 9);
    assert!(DriveClaim::take(&h.0).is_err());
    // ... its own ending (a killed driver's kernel closes it) frees the
    // node at once instead of after the session's TTL.
    h.closed(ConnId(4), "a");
    assert_eq!(h.0.gate.nonce(), 0);
    assert!(DriveClaim::take(&h.0).is_ok());
    assert!(matches!(accept(&h.0, 5, "c", 10), Msg::ProbeAccept(_)));
}

#[test]
fn only_the_sessions_own_connection_extends_it() {
    let s = shared("b");
    assert!(matches!(accept(&s, 4, "a", 9), Msg::ProbeAccept(_)));
    let until = |s: &Shared| s.activity().serving.until.unwrap();
    let granted = until(&s);
    let alive = |conn, from, nonce| {
        let m = Msg::ProbeAlive(ProbeDone {
            session_nonce: nonce,
        });
        assert!(handle_control(&s, ConnId(conn), FROM, from, m).is_none());
    };
    // Another connection, another driver or another nonce: no effect.
    alive(3, "a", 9);
    alive(4, "c", 9);
    alive(4, "a", 8);
    assert_eq!(until(&s), granted);
    // The session's own: SESSION_TTL from now.
    std::thread::sleep(Duration::from_millis(5));
    alive(4, "a", 9);
    assert!(until(&s) > granted);
    // Nothing to extend once it is over.
    let done = Msg::ProbeDone(ProbeDone { session_nonce: 9 });
    assert!(handle_control(&s, ConnId(4), FROM, "a", done).is_none());
    assert!(!s.extend_serving(ConnId(4), "a", 9));
    assert!(s.activity().serving.until.is_none());
}

/// Node "b" with one peer "a" at `peer`'s address.
fn node_b_with_peer_a(peer: &std::net::TcpListener) -> (Config, Shared, ConnConfig) {
    let c = cfg(&format!(
        "[[peer]]\nname = \"a\"\naddress = \"{}\"\n",
        peer.local_addr().unwrap()
    ));
    let cc = ConnConfig::new(
        "b",
        ClusterKey::from_bytes(crate::control::key::TEST_KEY).unwrap(),
    );
    (c, shared("b"), cc)
}

fn job_ctx<'a>(cfg: &'a Config, cc: &'a ConnConfig, shared: &'a Shared) -> JobCtx<'a> {
    JobCtx {
        cfg,
        cc,
        clock: HostClock::default(),
        shared,
        verbs: None,
    }
}

#[test]
fn connecting_to_a_silent_peer_holds_no_claim_to_drive() {
    // A peer that accepts the TCP connection and never says Hello: the
    // job waits in its handshake. Until it has the peer's endpoints it
    // holds no claim, so this node still serves others meanwhile.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (c, s, cc) = node_b_with_peer_a(&silent);
    let ctx = job_ctx(&c, &cc, &s);
    std::thread::scope(|scope| {
        let job = scope.spawn(|| run_job(&ctx, &c.peers[0], Kind::Udp, Job::FullSweep, None, None));
        let (held, _) = silent.accept().unwrap();
        // The job is connected and waiting for a Hello that never comes.
        assert!(matches!(accept(&s, 1, "c", 5), Msg::ProbeAccept(_)));
        drop(held);
        let r = job.join().unwrap();
        assert!(matches!(r, Err(JobError::Control(_))), "{:?}", r.err());
    });
    // The served session is untouched by the failed job.
    assert_eq!(s.gate.nonce(), 5);
}

#[test]
fn a_serving_node_does_not_connect_to_drive() {
    // While this node serves a session, a job of its own fails at once
    // as Occupied: it does not connect to the peer, whose measurement
    // would otherwise pay for a control handshake every retry.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let (c, s, cc) = node_b_with_peer_a(&listener);
    let ctx = job_ctx(&c, &cc, &s);
    assert!(matches!(accept(&s, 1, "a", 5), Msg::ProbeAccept(_)));
    let r = run_job(&ctx, &c.peers[0], Kind::Udp, Job::FullSweep, None, None);
    assert!(
        matches!(&r, Err(JobError::Occupied(d)) if d == "a"),
        "{:?}",
        r.err()
    );
    let r = fanout_job(&ctx, Kind::Udp, &[0]);
    assert!(
        matches!(&r, Err(JobError::Occupied(d)) if d == "a"),
        "{:?}",
        r.err()
    );
    assert_eq!(
        listener.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "the serving node connected to a peer"
    );
}

#[test]
fn reject_text_is_bounded_on_a_char_boundary() {
    let long = "é".repeat(400);
    match reject_text(&long) {
        RejectReason::Other(s) => {
            assert!(s.len() <= control::msg::MAX_TEXT_BYTES);
            assert!(s.starts_with("verbs: é"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_quiet_node_drives_no_conflict_probe_and_connects_to_no_peer() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let (c, s, cc) = node_b_with_peer_a(&listener);
    let ctx = job_ctx(&c, &cc, &s);
    s.quiet.store(true, Ordering::Relaxed);
    let r = super::contention::contention_job(&ctx, Kind::Udp, &[0]);
    assert!(matches!(r, Err(JobError::Quiet)), "{:?}", r.err());
    assert_eq!(
        listener.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "the quiet node connected to a peer"
    );
    // Nor does it stream for an operator's bisection round.
    let order = control::StreamOrder {
        nonce: 9,
        partner: c.peers[0].name.clone(),
        transport: Kind::Udp,
        size_bytes: 65536,
        burst: 16,
        start_unix_ns: crate::publish::unix_now_ns() + 1_000_000_000,
        duration_ns: 1_000_000_000,
        max_bytes: 1 << 20,
        bidirectional: true,
    };
    let r = super::contention::stream_order(&ctx, &control::operator_name("b"), &order);
    assert_eq!(r.nonce, 9);
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("Quiet")),
        "{r:?}"
    );
    assert!(
        listener.accept().is_err(),
        "the quiet node connected to a peer"
    );
    // Stream orders come from operators only.
    s.quiet.store(false, Ordering::Relaxed);
    let r = super::contention::stream_order(&ctx, "a", &order);
    assert!(
        r.error.as_deref().is_some_and(|e| e.contains("operator")),
        "{r:?}"
    );
}

/// A re-check 20 % off the published gap, noisy enough that its own 95 %
/// interval covers the difference: it does not send a current entry to a
/// full sweep, but it does not make a restored entry current either.
#[test]
fn a_noisy_recheck_confirms_no_restored_entry() {
    use super::job::agrees_with;
    use crate::model::SizeSamples;
    let mut published = netgauge::EntryData {
        eel_ns: 20_000.0,
        ..Default::default()
    };
    published.ranges = vec![netgauge::RangeData {
        from_bytes: 1,
        to_bytes: 1 << 20,
        g_ns: 10_000.0,
        ..Default::default()
    }];
    // PRTT(1,0,s) 40 µs flat (EEL agrees); PRTT(5,0,s) around 40 + 4 × 12
    // µs, spread over ± 24 µs.
    let samples: Vec<SizeSamples> = [1u64, 1024, 16384]
        .iter()
        .map(|&size_bytes| SizeSamples {
            size_bytes,
            n: 5,
            d_ns: 0.0,
            prtt1_ns: vec![40_000.0; 12],
            prttn_ns: (-6..6).map(|k| 90_000.0 + 4_000.0 * f64::from(k)).collect(),
            prttd_ns: vec![90_000.0; 12],
            o_r_ns: Vec::new(),
        })
        .collect();
    let points = crate::model::fit::size_points(&samples);
    assert!(
        points
            .iter()
            .all(|p| (p.gap_ns - 12_000.0).abs() < 1.0 && p.gap_hw_ns > 700.0),
        "{points:?}"
    );
    assert!(agrees_with(&samples, &published), "within its noise");
    published.flags |= netgauge::flags::RESTORED;
    assert!(
        !agrees_with(&samples, &published),
        "restored: plain tolerance"
    );
}
