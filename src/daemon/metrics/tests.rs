//! The exposition parsed back: values in base units, unidentified values
//! absent with their verdict stated, health, and the textfile.

use super::*;
use crate::control::RejectSnapshot;
use crate::daemon::sched::PeerPhase;
use crate::daemon::status::PeerStatus;
use netgauge::ext::{Bandwidth, Estimate, LatencyPercentiles, Reason};
use netgauge::RangeData;
use prometheus_parse::{Sample, Scrape, Value};

const NOW: u64 = 1_800_000_000_000_000_000;

#[allow(non_snake_case)]
fn an_entry() -> EntryData {
    let mut e = EntryData {
        peer: "node02".into(),
        transport: "udp".into(),
        ranges: vec![
            RangeData {
                from_bytes: 1,
                to_bytes: 2048,
                g_ns: 1500.0,
                G_ns_per_byte: 0.25,
                o_s_ns: 900.0,
                o_r_ns: 1100.0,
                ..RangeData::default()
            },
            RangeData {
                from_bytes: 2049,
                to_bytes: 131072,
                g_ns: -22_542.0,
                G_ns_per_byte: 8.0,
                o_s_ns: 2000.0,
                o_r_ns: 2500.0,
                ..RangeData::default()
            },
        ],
        eel_ns: 12_345.5,
        L_ns: 10_345.5,
        S_bytes: None,
        measured_unix_ns: NOW - 90_000_000_000,
        flags: flags::VALID | flags::STALE | flags::UNIDENTIFIED,
        samples: 400,
        probe_bytes: 5_000_000,
        ..EntryData::default()
    };
    let id = &mut e.ext.ident;
    id.set(Field::Eel, Status::Identified);
    id.set(Field::L, Status::Identified);
    id.set_all_ranges(2, RangeField::Gap, Status::Identified);
    id.set_all_ranges(2, RangeField::GapPerByte, Status::Identified);
    id.set_all_ranges(2, RangeField::OSend, Status::Identified);
    id.set_all_ranges(2, RangeField::ORecv, Status::Identified);
    id.not_identified_range(1, RangeField::Gap, Reason::Negative);
    id.set(Field::SustainedG, Status::Identified);
    e.ext.bandwidth = Some(Bandwidth::sustained(Estimate::new(8.0, 7.9, 8.1), Some(1)));
    e.ext.checked_unix_ns = NOW - 10_000_000_000;
    e.ext.latency = vec![LatencyPercentiles {
        size_bytes: 1,
        samples: 1000,
        min_ns: 10_000.0,
        p50_ns: 12_000.0,
        p90_ns: 13_000.0,
        p99_ns: 20_000.0,
        p999_ns: 40_000.0,
        max_ns: 41_000.0,
    }];
    e
}

fn a_status() -> StatusFile {
    StatusFile {
        node: "node01".into(),
        pid: 7,
        generation: 9,
        uptime_s: 100.0,
        updated_unix_ns: NOW,
        peers: vec![PeerStatus {
            name: "node02".into(),
            phase: PeerPhase::Failing,
            transport: "udp".into(),
            failures: 3,
            last_probe_unix_ns: Some(NOW - 5_000_000_000),
            last_error: Some("timed out".into()),
        }],
        budget_bytes_per_s: 4_000_000,
        spent_bytes: 123_456,
        spent_bytes_per_s: 1234.5,
        control_rejects: RejectSnapshot {
            malformed: 4,
            timeout: 2,
            ..RejectSnapshot::default()
        },
        responder_sessions: 0,
        driving: false,
        schedule: None,
        quiet: None,
        history_file: None,
    }
}

fn exposition(entries: &[EntryData], with_ages: bool) -> String {
    let st = a_status();
    render(&Snapshot {
        entries: Some(entries),
        heartbeat_unix_ns: Some(NOW - 500_000_000),
        clock: "tsc 2400.000000 MHz",
        status: &st,
        now_unix_ns: NOW,
        with_ages,
        http_rejects: &[("timeout", 1), ("oversize", 0)],
    })
}

fn parse(text: &str) -> Scrape {
    Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("the exposition parses")
}

fn value(s: &Sample) -> f64 {
    match s.value {
        Value::Gauge(v) | Value::Counter(v) | Value::Untyped(v) => v,
        _ => panic!("{s:?} is not a scalar"),
    }
}

/// The samples of `metric` whose labels include `labels`.
fn find<'a>(sc: &'a Scrape, metric: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    sc.samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

/// The one value of `metric{labels}`.
fn one(sc: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let v = find(sc, metric, labels);
    assert_eq!(v.len(), 1, "{metric}{labels:?}: {v:?}");
    value(v[0])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
}

/// Asserts that the one value of `metric{labels}` is [`close`] to `want`.
#[track_caller]
fn assert_close(sc: &Scrape, metric: &str, labels: &[(&str, &str)], want: f64) {
    let got = one(sc, metric, labels);
    assert!(close(got, want), "{metric}{labels:?}: {got}, not {want}");
}

const PAIR: [(&str, &str); 2] = [("peer", "node02"), ("transport", "udp")];

#[test]
fn identified_values_in_base_units_parse_back() {
    let text = exposition(&[an_entry()], true);
    let sc = parse(&text);
    assert_close(&sc, "netgauged_eel_seconds", &PAIR, 12.3455e-6);
    assert_close(&sc, "netgauged_latency_seconds", &PAIR, 10.3455e-6);
    let r0 = [PAIR[0], PAIR[1], ("range", "0")];
    let r1 = [PAIR[0], PAIR[1], ("range", "1")];
    assert_close(&sc, "netgauged_gap_seconds", &r0, 1.5e-6);
    assert_close(&sc, "netgauged_gap_seconds_per_byte", &r0, 0.25e-9);
    assert_close(&sc, "netgauged_bandwidth_bytes_per_second", &r0, 4e9);
    assert_close(&sc, "netgauged_send_overhead_seconds", &r1, 2e-6);
    assert_close(&sc, "netgauged_recv_overhead_seconds", &r1, 2.5e-6);
    assert_eq!(one(&sc, "netgauged_range_from_bytes", &r1), 2049.0);
    assert_eq!(one(&sc, "netgauged_range_to_bytes", &r1), 131072.0);
    assert_close(
        &sc,
        "netgauged_sustained_bandwidth_bytes_per_second",
        &PAIR,
        0.125e9,
    );
    assert_close(&sc, "netgauged_sustained_gap_seconds_per_byte", &PAIR, 8e-9);
    // Percentiles: 0 and 100 are the minimum and the maximum.
    let hrt = |q| {
        one(
            &sc,
            "netgauged_half_round_trip_seconds",
            &[PAIR[0], PAIR[1], ("size_bytes", "1"), ("percentile", q)],
        )
    };
    assert!(close(hrt("0"), 10e-6));
    assert!(close(hrt("50"), 12e-6));
    assert!(close(hrt("99.9"), 40e-6));
    assert!(close(hrt("100"), 41e-6));
    assert_eq!(one(&sc, "netgauged_half_round_trip_samples", &PAIR), 1000.0);
    // Staleness: timestamps, ages, flags.
    assert_close(
        &sc,
        "netgauged_entry_measured_timestamp_seconds",
        &PAIR,
        1.8e9 - 90.0,
    );
    assert_close(&sc, "netgauged_entry_age_seconds", &PAIR, 90.0);
    assert_close(
        &sc,
        "netgauged_entry_checked_timestamp_seconds",
        &PAIR,
        1.8e9 - 10.0,
    );
    let flag = |name| {
        one(
            &sc,
            "netgauged_entry_flag",
            &[PAIR[0], PAIR[1], ("flag", name)],
        )
    };
    assert_eq!(flag("stale"), 1.0);
    assert_eq!(flag("changed"), 0.0);
    assert_eq!(flag("unidentified"), 1.0);
    // Every value is a number Prometheus reads: no NaN or infinity written.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let v = l.rsplit(' ').next().unwrap();
        assert!(
            v.parse::<f64>().is_ok_and(f64::is_finite),
            "sample line {l:?}"
        );
    }
}

#[test]
fn unidentified_values_are_absent_and_their_verdict_is_stated() {
    let sc = parse(&exposition(&[an_entry()], true));
    let r1 = [PAIR[0], PAIR[1], ("range", "1")];
    // The negative g of range 1 is not exported as a number …
    assert!(find(&sc, "netgauged_gap_seconds", &r1).is_empty());
    // … its verdict says why; its G, identified, is there.
    let verdict = |range, p| {
        let v = find(
            &sc,
            "netgauged_parameter_identified",
            &[PAIR[0], PAIR[1], ("range", range), ("parameter", p)],
        );
        assert_eq!(v.len(), 1, "{p}: {v:?}");
        (v[0].labels.get("status").unwrap().to_string(), value(v[0]))
    };
    assert_eq!(verdict("1", "g"), ("negative".to_string(), 0.0));
    assert_eq!(verdict("1", "G"), ("identified".to_string(), 1.0));
    assert_close(&sc, "netgauged_gap_seconds_per_byte", &r1, 8e-9);
    // Entry-level parameters carry no range label (empty is absent).
    let eel = find(
        &sc,
        "netgauged_parameter_identified",
        &[PAIR[0], PAIR[1], ("parameter", "EEL")],
    );
    assert_eq!(eel.len(), 1);
    assert_eq!(value(eel[0]), 1.0);
    // O_s / O_r were not measured (no LogGPS): neither value nor verdict.
    assert!(find(&sc, "netgauged_send_overhead_seconds_per_byte", &PAIR).is_empty());
    assert!(find(
        &sc,
        "netgauged_parameter_identified",
        &[("parameter", "O_s")]
    )
    .is_empty());
}

#[test]
fn a_negative_value_without_a_verdict_is_not_exported_either() {
    let mut e = an_entry();
    e.ext = netgauge::EntryExtData::default();
    e.L_ns = -50.0;
    let sc = parse(&exposition(&[e], true));
    assert!(find(&sc, "netgauged_latency_seconds", &PAIR).is_empty());
    assert!(find(
        &sc,
        "netgauged_gap_seconds",
        &[PAIR[0], PAIR[1], ("range", "1")]
    )
    .is_empty());
    assert_close(&sc, "netgauged_eel_seconds", &PAIR, 12.3455e-6);
    let v = find(
        &sc,
        "netgauged_parameter_identified",
        &[PAIR[0], PAIR[1], ("parameter", "EEL")],
    );
    assert_eq!(v[0].labels.get("status"), Some("not_assessed"));
}

#[test]
fn daemon_health_is_exposed() {
    let sc = parse(&exposition(&[an_entry()], true));
    let info = find(&sc, "netgauged_info", &[("node", "node01")]);
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].labels.get("clock"), Some("tsc 2400.000000 MHz"));
    assert_close(&sc, "netgauged_heartbeat_age_seconds", &[], 0.5);
    assert_close(&sc, "netgauged_start_time_seconds", &[], 1.8e9 - 100.0);
    assert_eq!(one(&sc, "netgauged_segment_entries", &[]), 1.0);
    assert_eq!(one(&sc, "netgauged_segment_readable", &[]), 1.0);
    assert_eq!(
        one(&sc, "netgauged_budget_bytes_per_second", &[]),
        4_000_000.0
    );
    assert_eq!(one(&sc, "netgauged_probe_bytes_total", &[]), 123_456.0);
    assert_eq!(
        one(
            &sc,
            "netgauged_control_rejects_total",
            &[("kind", "malformed")]
        ),
        4.0
    );
    assert_eq!(
        one(
            &sc,
            "netgauged_control_rejects_total",
            &[("kind", "evicted")]
        ),
        0.0
    );
    assert_eq!(
        one(
            &sc,
            "netgauged_metrics_rejects_total",
            &[("kind", "timeout")]
        ),
        1.0
    );
    assert_eq!(one(&sc, "netgauged_peer_failures", &PAIR), 3.0);
    assert_eq!(
        one(
            &sc,
            "netgauged_peer_phase",
            &[PAIR[0], PAIR[1], ("phase", "failing")]
        ),
        1.0
    );
    // Counters are typed as counters.
    assert!(text_has(
        &exposition(&[], true),
        "# TYPE netgauged_control_rejects_total counter"
    ));
}

fn text_has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

#[test]
fn the_textfile_states_timestamps_not_ages_and_an_unreadable_segment_says_so() {
    let text = exposition(&[an_entry()], false);
    let sc = parse(&text);
    assert!(find(&sc, "netgauged_entry_age_seconds", &[]).is_empty());
    assert!(find(&sc, "netgauged_heartbeat_age_seconds", &[]).is_empty());
    assert!(!find(&sc, "netgauged_entry_measured_timestamp_seconds", &[]).is_empty());
    // node_exporter rejects samples with timestamps in a textfile.
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let close_brace = l.rfind('}').map_or(0, |i| i + 1);
        assert_eq!(
            l[close_brace..].split_whitespace().count(),
            if close_brace == 0 { 2 } else { 1 },
            "{l}"
        );
    }
    let st = a_status();
    let none = render(&Snapshot {
        entries: None,
        heartbeat_unix_ns: None,
        clock: "",
        status: &st,
        now_unix_ns: NOW,
        with_ages: true,
        http_rejects: &[],
    });
    let sc = parse(&none);
    assert_eq!(one(&sc, "netgauged_segment_readable", &[]), 0.0);
    assert!(find(&sc, "netgauged_eel_seconds", &[]).is_empty());
}

#[test]
fn label_values_are_escaped() {
    let mut e = an_entry();
    e.peer = "we\"ird\\peer\nname".into();
    let text = exposition(&[e], true);
    assert!(
        text.contains(r#"peer="we\"ird\\peer\nname""#),
        "escaped label value:\n{text}"
    );
}

#[test]
fn the_textfile_is_replaced_atomically_in_a_checked_directory() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ngprom-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join("netgauged.prom");
    let t = Textfile::open(&path).unwrap();
    let a = exposition(&[an_entry()], false);
    t.write(&a).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), a);
    t.write("# replaced\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "# replaced\n");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    // Nothing but the file is left (the temporaries were renamed).
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|d| d.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("netgauged.prom")]);
    // A directory others may write (not sticky) is refused.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Textfile::open(&path).err().expect("refused");
    assert!(
        err.to_string().contains("may be written by others"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
