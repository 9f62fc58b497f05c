use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::admission::{accept_session, Activity, DriveClaim, RoundAdmit};
use super::cluster::{Addresses, ClusterPeers};
use super::config::Config;
use super::control::{admit_round, handle_control, reject_text, ControlHandler};
use super::job::{connect, fanout_plan, make_targets, JobCtx, JobError, Target};
use super::{quiet, Shared};
use crate::clock::HostClock;
use crate::cluster::matrix::EntrySummary;
use crate::cluster::rounds::RoundKind;
use crate::cluster::schedule::{CostTable, Job, Purpose, Schedule};
use crate::control::{
    self, ClusterKey, ConnConfig, ConnId, EntriesRequest, Msg, ProbeAccept, ProbeDone,
    ProbeRequest, RejectReason, RoundDone, RoundRequest, SizePlan,
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
    let peers = ClusterPeers::load(&c, "me").unwrap().peers;
    let mut raw = HashMap::new();
    // With a verbs device, and raw toward d.
    raw.insert("d".to_string(), ("eth1".to_string(), [2, 0, 0, 0, 0, 1]));
    let t = make_targets(&peers, &raw, true);
    assert_eq!(kinds(&t, 0), [Kind::Rdma, Kind::Msg]);
    assert_eq!(kinds(&t, 1), [Kind::Rdma, Kind::Udp]);
    assert_eq!(kinds(&t, 2), [Kind::Udp]);
    assert_eq!(kinds(&t, 3), [Kind::Raw]);
    // Without a device (or raw): the verbs targets go, udp stays or
    // stands in, as it does for raw.
    let t = make_targets(&peers, &HashMap::new(), false);
    for p in 0..4 {
        assert_eq!(kinds(&t, p), [Kind::Udp]);
    }
}

#[test]
fn listed_peers_take_the_default_interface_and_transports() {
    let c = cfg("peers = \"n[1-3]\"\ninterface = \"eth0\"\ntransports = [\"raw\", \"udp\"]\n");
    let peers = ClusterPeers::load(&c, "n2").unwrap().peers;
    let mut raw = HashMap::new();
    for p in &peers {
        raw.insert(p.name.clone(), ("eth0".to_string(), [2, 0, 0, 0, 0, 1]));
    }
    let t = make_targets(&peers, &raw, false);
    assert_eq!(kinds(&t, 0), [Kind::Raw, Kind::Udp]);
    assert_eq!(kinds(&t, 1), [Kind::Raw, Kind::Udp]);
}

#[test]
fn a_fanout_runs_over_the_peers_measured_over_each_kind() {
    let c = cfg(&[
        peer("a", "transports = [\"rdma\", \"udp\"]"),
        peer("b", "transports = [\"udp\", \"rdma\"]"),
        peer("c", "transports = [\"udp\"]"),
    ]
    .concat());
    let peers = ClusterPeers::load(&c, "me").unwrap().peers;
    let t = make_targets(&peers, &HashMap::new(), true);
    let all = |p: usize, k: Kind| t.iter().any(|x| x.peer == p && x.kind == k);
    assert_eq!(
        fanout_plan(&[0, 1, 2], all),
        [(Kind::Udp, vec![0, 1, 2]), (Kind::Rdma, vec![0, 1])]
    );
    // b never measured over rdma: no rdma fan-out; c not over udp.
    let some = |p: usize, k: Kind| all(p, k) && !(p == 1 && k == Kind::Rdma) && p != 2;
    assert_eq!(fanout_plan(&[0, 1, 2], some), [(Kind::Udp, vec![0, 1])]);
    assert!(fanout_plan(&[0], all).is_empty());
}

/// Node `node` of the cluster a, b, c (no device, no raw), its peers at
/// `addr`.
fn shared_at(node: &str, addr: &str) -> Shared {
    let c = cfg(&format!(
        "peers = \"a,b,c\"\n[[peer]]\nname = \"{}\"\naddress = \"{addr}\"\n",
        if node == "a" { "b" } else { "a" }
    ));
    let cl = ClusterPeers::load(&c, node).unwrap();
    let schedule = Schedule::new(
        cl.membership.clone(),
        node,
        &c.schedule_config(),
        CostTable::default(),
        0.0,
    )
    .unwrap();
    Shared {
        node: node.into(),
        generation: 1,
        clock_desc: "monotonic-raw 1000.000000 MHz".into(),
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
        addresses: Addresses::new(&cl.peers),
        peers: cl.peers,
        schedule: Mutex::new(schedule),
        quiet: AtomicBool::new(false),
        quiet_status: Mutex::new(quiet::QuietStatus::default()),
        sched_status: Mutex::new(None),
        view: Mutex::new(Arc::new(Vec::new())),
        flow_budget: Mutex::new(super::contention::FlowBudget::new(1000, Instant::now())),
        operator: OnceLock::new(),
        rejects: OnceLock::new(),
        probe_alive: super::lifecycle::Liveness::new(),
    }
}

/// The control settings of node `node` with the tests' cluster key.
fn conn_config(node: &str) -> ConnConfig {
    ConnConfig::new(
        node,
        ClusterKey::from_bytes(crate::control::key::TEST_KEY).unwrap(),
    )
}

fn shared(node: &str) -> Shared {
    shared_at(node, "10.0.0.9:7470")
}

/// The address the tests' control connections come from.
const FROM: std::net::SocketAddr = std::net::SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::new(10, 0, 0, 9),
    40000,
));

/// A flow session of someone's conflict probe or bisection round: refused
/// while quiet and beyond the flow budget (1000 B/s here: 600 000 B held);
/// outside the rounds (a stream order) it needs no round and its bytes are
/// charged to this node's schedule when consented; within an admitted round
/// they are settled with the round instead.
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
    let spent = |s: &Shared| s.schedule().node().stats().bytes;
    s.quiet.store(true, Ordering::Relaxed);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(1, 1000));
    assert_eq!(reason(m), Some(RejectReason::Quiet));
    assert_eq!(spent(&s), 0);
    s.quiet.store(false, Ordering::Relaxed);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(2, 700_000));
    assert_eq!(reason(m), Some(RejectReason::Budget));
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(3, 500_000));
    assert!(matches!(m, Msg::ProbeAccept(_)), "{m:?}");
    assert_eq!(spent(&s), 500_000);
    s.end_serving_if(|_| true);
    let m = accept_session(&s, ConnId(1), FROM, "a", &flow(4, 200_000));
    assert_eq!(reason(m), Some(RejectReason::Budget));
    // Within a round admitted on its connection: consented, not charged
    // now (the round's RoundDone settles it).
    admitted(&s, 2, "a");
    let m = accept_session(&s, ConnId(2), FROM, "a", &flow(5, 50_000));
    assert!(matches!(m, Msg::ProbeAccept(_)), "{m:?}");
    assert_eq!(spent(&s), 500_000);
    // A plain session still needs its round.
    s.end_serving_if(|_| true);
    assert_eq!(rejected(accept(&s, 3, "a", 6)), RejectReason::NotExpected);
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

/// As if the schedule had admitted `from`'s round on `conn`.
fn admitted(s: &Shared, conn: u64, from: &str) {
    s.activity().round = Some(RoundAdmit {
        driver: from.into(),
        round: 1,
        conn: ConnId(conn),
    });
}

fn accept(s: &Shared, conn: u64, from: &str, nonce: u64) -> Msg {
    accept_session(s, ConnId(conn), FROM, from, &request(from, nonce))
}

fn rejected(m: Msg) -> RejectReason {
    match m {
        Msg::ProbeReject(r) => r.reason,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_session_needs_a_round_admitted_on_its_connection() {
    let s = shared("b");
    assert_eq!(rejected(accept(&s, 1, "a", 7)), RejectReason::NotExpected);
    admitted(&s, 1, "a");
    // Another connection of the same driver, or another driver: no.
    assert_eq!(rejected(accept(&s, 2, "a", 7)), RejectReason::NotExpected);
    assert_eq!(rejected(accept(&s, 1, "c", 7)), RejectReason::NotExpected);
    assert!(matches!(
        accept(&s, 1, "a", 7),
        Msg::ProbeAccept(ProbeAccept { session_nonce: 7 })
    ));
}

#[test]
fn a_node_drives_or_serves_never_both() {
    let s = shared("b");
    // Driving (from the claim on, before its own request is even
    // sent): every request is refused, the crossing one included.
    let claim = DriveClaim::take(&s).unwrap();
    for from in ["a", "c"] {
        admitted(&s, 1, from);
        assert_eq!(rejected(accept(&s, 1, from, 7)), RejectReason::Busy);
    }
    assert_eq!(s.gate.nonce(), 0);
    drop(claim);
    // Free again: a request is accepted and opens the gate ...
    admitted(&s, 2, "a");
    assert!(matches!(
        accept(&s, 2, "a", 9),
        Msg::ProbeAccept(ProbeAccept { session_nonce: 9 })
    ));
    assert_eq!(s.gate.nonce(), 9);
    // ... and while it is served this node neither drives nor serves
    // another.
    assert!(matches!(DriveClaim::take(&s), Err(JobError::Occupied(d)) if d == "a"));
    assert!(matches!(
        DriveClaim::could_take(&s),
        Err(JobError::Occupied(_))
    ));
    admitted(&s, 3, "c");
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
    admitted(&h.0, 4, "a");
    assert!(matches!(accept(&h.0, 4, "a", 9), Msg::ProbeAccept(_)));
    // Another connection of the same driver ending changes nothing ...
    h.closed(ConnId(3), "a");
    assert_eq!(h.0.gate.nonce(), 9);
    assert!(DriveClaim::take(&h.0).is_err());
    // ... its own ending (a killed driver's kernel closes it) frees the
    // node at once instead of after the session's TTL, and the round with
    // it.
    h.closed(ConnId(4), "a");
    assert_eq!(h.0.gate.nonce(), 0);
    assert!(h.0.activity().round.is_none());
    assert!(DriveClaim::take(&h.0).is_ok());
    admitted(&h.0, 5, "c");
    assert!(matches!(accept(&h.0, 5, "c", 10), Msg::ProbeAccept(_)));
}

#[test]
fn only_the_sessions_own_connection_extends_it() {
    let s = shared("b");
    admitted(&s, 4, "a");
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

/// The first mesh round from 10⁹ s on in which `driver` drives `partner`.
fn round_where(s: &Shared, driver: &str, partner: &str) -> (u64, f64) {
    let sched = s.schedule();
    let m = sched.membership();
    let (d, p) = (m.index_of(driver).unwrap(), m.index_of(partner).unwrap());
    let r = sched.rounds();
    let first = r.slot_at(1e9).round;
    (first..first + 10 * r.cycle_rounds())
        .map(|k| r.slot(k))
        .find(|slot| {
            matches!(slot.kind, RoundKind::Mesh(_))
                && r.plan_cycle(m, slot.cycle)
                    .pairing(r, slot, d)
                    .is_some_and(|x| x.partner == p && x.drives)
        })
        .map(|slot| (slot.round, slot.start_s + 0.5))
        .expect("they meet")
}

#[test]
fn the_schedule_admits_the_rounds_partner_and_declines_the_rest() {
    use control::Handler;
    let h = ControlHandler(Arc::new(shared("b")));
    let s = &h.0;
    let (round, at) = round_where(s, "a", "b");
    let ask = |from: &str, conn, round, job| {
        let r = RoundRequest {
            driver: from.into(),
            round,
            job,
        };
        match admit_round(s, ConnId(conn), from, &r, at) {
            Msg::RoundReply(r) => r.declined,
            other => panic!("{other:?}"),
        }
    };
    let job = Job::FullSweep(Purpose::Class);
    // c is not b's partner in that round; a in another round neither.
    assert_eq!(ask("c", 1, round, job), Some(RejectReason::NotExpected));
    assert_eq!(
        ask("a", 1, round + 5000, job),
        Some(RejectReason::NotExpected)
    );
    // Quiet: declined as such.
    s.quiet.store(true, Ordering::Relaxed);
    assert_eq!(ask("a", 1, round, job), Some(RejectReason::Quiet));
    s.quiet.store(false, Ordering::Relaxed);
    // The partner, in time: admitted, its sessions accepted on that
    // connection, the round settled by RoundDone.
    assert_eq!(ask("a", 2, round, job), None);
    assert!(matches!(accept(s, 2, "a", 5), Msg::ProbeAccept(_)));
    let done = Msg::ProbeDone(ProbeDone { session_nonce: 5 });
    assert!(handle_control(s, ConnId(2), FROM, "a", done).is_none());
    let rd = Msg::RoundDone(RoundDone { round, bytes: 1234 });
    assert!(handle_control(s, ConnId(2), FROM, "a", rd).is_none());
    assert!(s.activity().round.is_none());
    let st = s.schedule().status(at, false);
    assert_eq!(st.stats.serves, 1);
    assert_eq!(st.stats.refused_quiet, 1);
    assert_eq!(st.stats.bytes, 1234);
    assert_eq!(st.stats.refused_other, 2);
    h.closed(ConnId(2), "a");
}

#[test]
fn the_view_is_served_in_pages_and_the_operator_only_reads() {
    let s = shared("b");
    let e = |p: &str| EntrySummary {
        peer: p.into(),
        transport: "udp".into(),
        eel_ns: 1.0,
        g_ns: 2.0,
        G_ns_per_byte: 0.1,
        flags: 1,
        measured_unix_ns: 3,
        class: None,
    };
    let all: Vec<EntrySummary> = (0..300).map(|i| e(&format!("p{i:03}"))).collect();
    *s.view.lock().unwrap() = Arc::new(all);
    let page = |from: &str, offset, max| match handle_control(
        &s,
        ConnId(1),
        FROM,
        from,
        Msg::Entries(EntriesRequest { offset, max }),
    ) {
        Some(Msg::EntriesReply(r)) => (r.total, r.offset, r.entries.len()),
        other => panic!("{other:?}"),
    };
    assert_eq!(page("ngctl", 0, 256), (300, 0, 256));
    assert_eq!(page("ngctl", 256, 256), (300, 256, 44));
    assert_eq!(page("ngctl", 999, 256), (300, 300, 0));
    assert_eq!(page("a", 10, 5), (300, 10, 5));
    // The operator takes part in nothing else.
    let r = RoundRequest {
        driver: "ngctl".into(),
        round: 1,
        job: Job::Fanout,
    };
    assert!(handle_control(&s, ConnId(1), FROM, "ngctl", Msg::RoundRequest(r)).is_none());
    assert!(handle_control(
        &s,
        ConnId(1),
        FROM,
        "ngctl",
        Msg::ProbeRequest(request("ngctl", 1))
    )
    .is_none());
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
    // meeting waits in its handshake. Until it has the peer's endpoints
    // it holds no claim, so this node still serves others meanwhile.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = shared_at("b", &silent.local_addr().unwrap().to_string());
    let c = cfg("peers = \"a,b,c\"\n");
    let cc = conn_config("b");
    let ctx = job_ctx(&c, &cc, &s);
    std::thread::scope(|scope| {
        let job = scope.spawn(|| connect(&ctx, 0).map(|_| ()));
        let (held, _) = silent.accept().unwrap();
        // The meeting is connected and waiting for a Hello that never comes.
        admitted(&s, 1, "c");
        assert!(matches!(accept(&s, 1, "c", 5), Msg::ProbeAccept(_)));
        drop(held);
        let r = job.join().unwrap();
        assert!(matches!(r, Err(JobError::Control(_))), "{:?}", r.err());
    });
    // The served session is untouched by the failed meeting.
    assert_eq!(s.gate.nonce(), 5);
    // A peer whose name never resolved: no address, no connection.
    assert!(matches!(connect(&ctx, 1), Err(JobError::NoAddress(n)) if n == "c"));
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
    let s = shared_at("b", &listener.local_addr().unwrap().to_string());
    let c = cfg("peers = \"a,b,c\"\n");
    let cc = conn_config("b");
    let ctx = job_ctx(&c, &cc, &s);
    s.quiet.store(true, Ordering::Relaxed);
    let r = super::contention::contention_job(&ctx, Kind::Udp, &mut []);
    assert!(matches!(r, Err(JobError::Quiet)), "{:?}", r.err());
    // Nor does it stream for an operator's bisection round.
    let order = control::StreamOrder {
        nonce: 9,
        partner: s.peers[0].name.clone(),
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

/// A re-check 35 % off the published gap, noisy enough that its own 95 %
/// interval covers the difference: it does not send a current entry to a
/// full sweep, but it does not make a restored entry current either.
#[test]
fn a_noisy_recheck_confirms_no_restored_entry() {
    use super::probe_thread::recheck_policy;
    use crate::cluster::recheck::compare;
    use crate::model::SizeSamples;
    let agrees_with = |samples: &[SizeSamples], published: &netgauge::EntryData| {
        let points = crate::model::fit::size_points(samples);
        compare(
            &points,
            published,
            &recheck_policy(published),
            &Default::default(),
        )
        .agrees
    };
    let mut published = netgauge::EntryData {
        eel_ns: 20_000.0,
        ..Default::default()
    };
    published.ranges = vec![netgauge::RangeData {
        from_bytes: 1,
        to_bytes: 1 << 20,
        g_ns: 8_900.0,
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
            .all(|p| (p.gap_ns - 12_000.0).abs() < 1.0 && p.gap_hw_ns > 1100.0),
        "{points:?}"
    );
    assert!(agrees_with(&samples, &published), "within its noise");
    published.flags |= netgauge::flags::RESTORED;
    assert!(
        !agrees_with(&samples, &published),
        "restored: plain tolerance"
    );
}
