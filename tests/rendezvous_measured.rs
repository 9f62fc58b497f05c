//! The rendezvous detector on points measured by this project's probes
//! (tests/data/rendezvous/*.json: the per-size medians of `ngctl probe
//! --json`, the raw samples left out). Each file names its transport and
//! what its configuration makes S; the detector sees only the points.

use netgauged::model::{fit::rendezvous_threshold, SizePoint};

#[derive(serde::Deserialize)]
struct Fixture {
    description: String,
    points: Vec<SizePoint>,
}

fn load(name: &str) -> Fixture {
    let path = format!(
        "{}/tests/data/rendezvous/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn s_of(name: &str) -> (Option<u64>, String) {
    let f = load(name);
    (rendezvous_threshold(&f.points), f.description)
}

#[test]
fn msg_eager_threshold_found_on_soft_roce() {
    // verbs_msg with eager_max_bytes = 512: the last eager size is 512 B.
    for name in ["msg_vm12", "msg_vm8", "msg_vd3", "msg_ci4"] {
        let (s, what) = s_of(name);
        assert_eq!(s, Some(512), "{name} ({what})");
    }
}

#[test]
fn no_rendezvous_where_there_is_none() {
    for name in ["rdma_ci4", "rdma_vm7", "rdma_vm10", "rdma_vm15", "udp_vm9"] {
        let (s, what) = s_of(name);
        assert_eq!(s, None, "{name} ({what})");
    }
}

#[test]
fn open_mpi_eager_limit_found() {
    // vader's eager limit is 4 KiB including its match header, so the last
    // eager payload lies a few tens of bytes below 4096; the sweep's grid
    // and bisection put S between 3496 and 4096 B.
    for name in ["mpi_final2", "mpi_k1", "mpi_run3"] {
        let (s, what) = s_of(name);
        assert!(
            s.is_some_and(|s| (3496..=4096).contains(&s)),
            "{name} ({what}): S {s:?}"
        );
    }
}

#[test]
fn a_gap_step_alone_is_not_a_rendezvous() {
    // The gap rises tenfold at 257 B but a single message does not slow down:
    // a different send path, not a handshake.
    let (s, what) = s_of("mpi_h1");
    assert!(s.is_none_or(|s| s >= 3496), "mpi_h1 ({what}): S {s:?}");
}

#[test]
fn the_rule_needs_every_test() {
    // Removing the rendezvous' step from the single-message times (the gap
    // alone steps) or from the gaps (the latency alone steps) loses S.
    let f = load("msg_vm12");
    let i = f.points.iter().position(|p| p.size_bytes == 724).unwrap();
    let step_g = f.points[i].gap_ns - f.points[i - 1].gap_ns;
    let step_h = f.points[i].half_rtt_ns - f.points[i - 1].half_rtt_ns;
    let mut gap_only = f.points.clone();
    gap_only[i..]
        .iter_mut()
        .for_each(|p| p.half_rtt_ns -= step_h);
    assert_eq!(rendezvous_threshold(&gap_only), None);
    let mut latency_only = f.points.clone();
    latency_only[i..]
        .iter_mut()
        .for_each(|p| p.gap_ns -= step_g);
    assert_eq!(rendezvous_threshold(&latency_only), None);
    assert_eq!(rendezvous_threshold(&f.points), Some(512));
}
