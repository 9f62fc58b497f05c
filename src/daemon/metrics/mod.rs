//! The Prometheus view of the daemon: the text exposition format 0.0.4 of
//! what the segment publishes and of the daemon's health, served at
//! `GET /metrics` on `metrics_listen` ([`server`]) and written to
//! `metrics_textfile` for node_exporter's textfile collector
//! ([`Textfile`]).
//!
//! Both render [`render`] from the same inputs: the segment's entries (the
//! HTTP server reads them through a `netgauge::Reader`, as every reader
//! does; the publisher takes them from its writer) and the [`StatusFile`]
//! the status file shows. Base units throughout: seconds, bytes, seconds
//! per byte, bytes per second, timestamps in seconds since the Unix
//! epoch.
//!
//! A parameter is exported as a number only when it is identified (or,
//! for an entry whose producer made no statement, a finite value that is
//! not negative); `netgauged_parameter_identified` states the verdict of
//! every parameter, with the reason in its `status` label, so a query can
//! tell "not identified" from "not measured".

pub mod server;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;

use netgauge::ext::{Field, RangeField, Regime, Status};
use netgauge::files::{Dir, DirPolicy};
use netgauge::{flags, EntryData};
use prometheus::core::{MetricVec, MetricVecBuilder};
use prometheus::{CounterVec, GaugeVec, Opts, Registry};

use super::status::StatusFile;

/// What one exposition is made of.
pub struct Snapshot<'a> {
    /// The segment's entries, when it could be read.
    pub entries: Option<&'a [EntryData]>,
    /// The segment's heartbeat, CLOCK_REALTIME ns (0: the writer shut down).
    pub heartbeat_unix_ns: Option<u64>,
    /// The segment's clock description.
    pub clock: &'a str,
    pub status: &'a StatusFile,
    /// Now, CLOCK_REALTIME ns.
    pub now_unix_ns: u64,
    /// Export ages (seconds since a timestamp, as of `now_unix_ns`): for a
    /// scrape; a textfile, read later, states timestamps only.
    pub with_ages: bool,
    /// The HTTP server's own rejections, by kind.
    pub http_rejects: &'a [(&'static str, u64)],
}

/// The label sets of one family are all alike; families are created on
/// first use, so one that gets no sample is not exposed.
struct Families {
    reg: Registry,
    gauges: HashMap<&'static str, GaugeVec>,
    counters: HashMap<&'static str, CounterVec>,
}

/// Member `labels` of family `name` (with `help`) in `families`: the
/// family is made by `make` and registered the first time it is asked for
/// (None: it cannot be, said in the debug log).
fn member<B: MetricVecBuilder + 'static>(
    reg: &Registry,
    families: &mut HashMap<&'static str, MetricVec<B>>,
    (name, help): (&'static str, &'static str),
    labels: &[(&str, &str)],
    make: fn(Opts, &[&str]) -> prometheus::Result<MetricVec<B>>,
) -> Option<B::M> {
    let family = match families.entry(name) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(slot) => {
            let names: Vec<&str> = labels.iter().map(|l| l.0).collect();
            let Ok(f) = make(Opts::new(name, help), &names) else {
                tracing::debug!("metric {name}: not a valid family");
                return None;
            };
            if reg.register(Box::new(f.clone())).is_err() {
                tracing::debug!("metric {name}: registered twice");
                return None;
            }
            slot.insert(f)
        }
    };
    let values: Vec<&str> = labels.iter().map(|l| l.1).collect();
    family.get_metric_with_label_values(&values).ok()
}

impl Families {
    fn new() -> Families {
        Families {
            reg: Registry::new(),
            gauges: HashMap::new(),
            counters: HashMap::new(),
        }
    }

    /// Sets gauge `name{labels}` to `v`; a value that is not finite is not
    /// exported.
    fn gauge(&mut self, name: &'static str, help: &'static str, labels: &[(&str, &str)], v: f64) {
        if !v.is_finite() {
            return;
        }
        if let Some(g) = member(
            &self.reg,
            &mut self.gauges,
            (name, help),
            labels,
            GaugeVec::new,
        ) {
            g.set(v);
        }
    }

    /// Sets counter `name{labels}` (its name ends in `_total`) to `v`.
    fn counter(&mut self, name: &'static str, help: &'static str, labels: &[(&str, &str)], v: u64) {
        if let Some(c) = member(
            &self.reg,
            &mut self.counters,
            (name, help),
            labels,
            CounterVec::new,
        ) {
            c.inc_by(v as f64);
        }
    }

    /// One counter of the family `name` for each `(value, v)`, labelled
    /// `label="value"`.
    fn counters_by<'a>(
        &mut self,
        name: &'static str,
        help: &'static str,
        label: &str,
        values: impl IntoIterator<Item = (&'a str, u64)>,
    ) {
        for (value, v) in values {
            self.counter(name, help, &[(label, value)], v);
        }
    }

    fn encode(&self) -> String {
        prometheus::TextEncoder::new()
            .encode_to_string(&self.reg.gather())
            .unwrap_or_else(|e| {
                tracing::warn!("metrics exposition not encoded: {e}");
                String::new()
            })
    }
}

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn secs(ns: f64) -> f64 {
    ns * 1e-9
}

fn unix_s(ns: u64) -> f64 {
    ns as f64 * 1e-9
}

/// Whether a value with status `st` is exported as a number: identified,
/// or not assessed (the producer made no statement) and a finite value
/// that is not negative (every quantity exported this way is a time, gap,
/// size or rate).
fn exported(st: Status, v: f64) -> bool {
    match st {
        Status::Identified => v.is_finite(),
        Status::NotAssessed => v.is_finite() && v >= 0.0,
        Status::NotIdentified(_) => false,
    }
}

/// The exposition of `snap`.
pub fn render(snap: &Snapshot<'_>) -> String {
    let mut f = Families::new();
    health(&mut f, snap);
    for e in snap.entries.unwrap_or(&[]) {
        entry(&mut f, e, snap);
    }
    f.encode()
}

const H_IDENT: &str = "Verdict on a published parameter: 1 identified (its value is exported), \
                       0 not (status: not_assessed or why not: negative, crosses_zero, …)";

/// `netgauged_parameter_identified` for one parameter.
fn verdict(f: &mut Families, base: &[(&str, &str)], range: &str, parameter: &str, st: Status) {
    let labels = [
        base[0],
        base[1],
        ("range", range),
        ("parameter", parameter),
        ("status", st.name()),
    ];
    let v = if st == Status::Identified { 1.0 } else { 0.0 };
    f.gauge("netgauged_parameter_identified", H_IDENT, &labels, v);
}

/// The gauges of one (peer, transport) entry.
#[allow(non_snake_case)]
fn entry(f: &mut Families, e: &EntryData, snap: &Snapshot<'_>) {
    let base = [
        ("peer", e.peer.as_str()),
        ("transport", e.transport.as_str()),
    ];
    let id = &e.ext.ident;
    let value = |f: &mut Families, name, help, st: Status, v: f64| {
        if exported(st, v) {
            f.gauge(name, help, &base, v);
        }
    };

    // The LogGP set that does not depend on the size.
    let (st_eel, st_l) = (id.get(Field::Eel), id.get(Field::L));
    verdict(f, &base, "", Field::Eel.name(), st_eel);
    verdict(f, &base, "", Field::L.name(), st_l);
    value(
        f,
        "netgauged_eel_seconds",
        "End-to-end latency EEL = PRTT(1,0,1)/2",
        st_eel,
        secs(e.eel_ns),
    );
    // L may be negative when the overheads exceed the EEL: exported only
    // when identified.
    if st_l == Status::Identified && e.L_ns.is_finite() {
        f.gauge(
            "netgauged_latency_seconds",
            "LogGP L = EEL - o_s - o_r",
            &base,
            secs(e.L_ns),
        );
    }
    let st_s = id.get(Field::S);
    if e.S_bytes.is_some() || st_s != Status::NotAssessed {
        verdict(f, &base, "", Field::S.name(), st_s);
    }
    if let Some(s) = e.S_bytes {
        value(
            f,
            "netgauged_rendezvous_threshold_bytes",
            "LogGPS S: messages above it pay a rendezvous",
            st_s,
            s as f64,
        );
    }
    if e.flags & flags::HAS_LOGFP != 0 {
        for field in [Field::F, Field::OMin, Field::OMax, Field::Gf] {
            verdict(f, &base, "", field.name(), id.get(field));
        }
        if let Some(n) = e.f {
            value(
                f,
                "netgauged_logfp_f",
                "LogfP f: messages injected without paying g",
                id.get(Field::F),
                f64::from(n),
            );
        }
        value(
            f,
            "netgauged_logfp_overhead_min_seconds",
            "LogfP o_min of o(P) = o_min + o_max / P",
            id.get(Field::OMin),
            secs(e.o_min_ns),
        );
        value(
            f,
            "netgauged_logfp_overhead_max_seconds",
            "LogfP o_max of o(P) = o_min + o_max / P",
            id.get(Field::OMax),
            secs(e.o_max_ns),
        );
        value(
            f,
            "netgauged_logfp_gap_seconds",
            "LogfP gap per message beyond f",
            id.get(Field::Gf),
            secs(e.g_f_ns),
        );
    }

    // The large-message bandwidth.
    if let Some(bw) = &e.ext.bandwidth {
        let st = id.get(Field::SustainedG);
        verdict(f, &base, "", Field::SustainedG.name(), st);
        let g = bw.sustained_G_ns_per_byte.value;
        if exported(st, g) && g > 0.0 {
            f.gauge(
                "netgauged_sustained_gap_seconds_per_byte",
                "Sustained large-message G (the bandwidth is its inverse)",
                &base,
                secs(g),
            );
            f.gauge(
                "netgauged_sustained_bandwidth_bytes_per_second",
                "Sustained large-message bandwidth 1/G",
                &base,
                1e9 / g,
            );
        }
        if bw.regime().is_some_and(|r| r != Regime::Single) {
            let st = id.get(Field::BurstG);
            verdict(f, &base, "", Field::BurstG.name(), st);
            let g = bw.burst_G_ns_per_byte.value;
            if exported(st, g) && g > 0.0 {
                f.gauge(
                    "netgauged_burst_bandwidth_bytes_per_second",
                    "Burst bandwidth of a token-bucket or credit regime",
                    &base,
                    1e9 / g,
                );
                f.gauge(
                    "netgauged_burst_bytes",
                    "Bytes that pass at the burst rate before the sustained rate",
                    &base,
                    bw.burst_bytes as f64,
                );
            }
        }
    }

    // Per protocol range.
    let loggps = e.flags & flags::HAS_LOGGPS != 0;
    for (i, r) in e.ranges.iter().enumerate() {
        let idx = i.to_string();
        let rl = [base[0], base[1], ("range", idx.as_str())];
        f.gauge(
            "netgauged_range_from_bytes",
            "First message size of a protocol range",
            &rl,
            r.from_bytes as f64,
        );
        f.gauge(
            "netgauged_range_to_bytes",
            "Last measured message size of a protocol range (the last range's line holds beyond it)",
            &rl,
            r.to_bytes as f64,
        );
        let param = |f: &mut Families, field: RangeField, name, help, v: f64| {
            let st = id.get_range(i, field);
            verdict(f, &base, &idx, field.name(), st);
            if exported(st, v) {
                f.gauge(name, help, &rl, v);
            }
        };
        param(
            f,
            RangeField::Gap,
            "netgauged_gap_seconds",
            "LogGP g: the range's gap line g + (s-1)G at s = 1",
            secs(r.g_ns),
        );
        param(
            f,
            RangeField::GapPerByte,
            "netgauged_gap_seconds_per_byte",
            "LogGP G: gap per byte of the range",
            secs(r.G_ns_per_byte),
        );
        param(
            f,
            RangeField::OSend,
            "netgauged_send_overhead_seconds",
            "LogGP o_s: the range's send overhead line at s = 1",
            secs(r.o_s_ns),
        );
        param(
            f,
            RangeField::ORecv,
            "netgauged_recv_overhead_seconds",
            "LogGP o_r: the range's receive overhead line at s = 1",
            secs(r.o_r_ns),
        );
        let st_G = id.get_range(i, RangeField::GapPerByte);
        if exported(st_G, r.G_ns_per_byte) && r.G_ns_per_byte > 0.0 {
            f.gauge(
                "netgauged_bandwidth_bytes_per_second",
                "Bandwidth 1/G of the range",
                &rl,
                1e9 / r.G_ns_per_byte,
            );
        }
        // O_s and O_r are 0 when not measured: exported when measured
        // (HAS_LOGGPS) or stated.
        for (field, name, help, v) in [
            (
                RangeField::OSendPerByte,
                "netgauged_send_overhead_seconds_per_byte",
                "LogGPS O_s: send overhead per byte of the range",
                r.O_s_ns_per_byte,
            ),
            (
                RangeField::ORecvPerByte,
                "netgauged_recv_overhead_seconds_per_byte",
                "LogGPS O_r: receive overhead per byte of the range",
                r.O_r_ns_per_byte,
            ),
        ] {
            let st = id.get_range(i, field);
            if loggps || st != Status::NotAssessed {
                verdict(f, &base, &idx, field.name(), st);
                if exported(st, v) {
                    f.gauge(name, help, &rl, secs(v));
                }
            }
        }
        if let Some(o) = e.ext.overlap.get(i) {
            for (field, side, est) in [
                (RangeField::OverlapSend, "send", o.send),
                (RangeField::OverlapRecv, "recv", o.recv),
            ] {
                let st = id.get_range(i, field);
                verdict(f, &base, &idx, field.name(), st);
                if exported(st, est.value) {
                    f.gauge(
                        "netgauged_overlap_ratio",
                        "Fraction of a message's transfer time the CPU can compute",
                        &[base[0], base[1], ("range", idx.as_str()), ("side", side)],
                        est.value,
                    );
                }
            }
        }
    }

    // Half-round-trip percentiles (percentile 0 is the minimum, 100 the
    // maximum; not `quantile`, a label Prometheus keeps for summaries).
    for p in &e.ext.latency {
        let size = p.size_bytes.to_string();
        for (q, v) in [
            ("0", p.min_ns),
            ("50", p.p50_ns),
            ("90", p.p90_ns),
            ("99", p.p99_ns),
            ("99.9", p.p999_ns),
            ("100", p.max_ns),
        ] {
            if v.is_finite() && v >= 0.0 {
                f.gauge(
                    "netgauged_half_round_trip_seconds",
                    "Percentiles of the half round trip PRTT(1,0,s)/2 at message size s",
                    &[base[0], base[1], ("size_bytes", &size), ("percentile", q)],
                    secs(v),
                );
            }
        }
        f.gauge(
            "netgauged_half_round_trip_samples",
            "Samples the half-round-trip percentiles of a size are taken over",
            &[base[0], base[1], ("size_bytes", &size)],
            p.samples as f64,
        );
    }

    // Provenance and staleness: Unix or elapsed nanoseconds, exported in
    // seconds (None: not exported).
    for (name, help, ns) in [
        (
            "netgauged_entry_measured_timestamp_seconds",
            "When the entry was measured (a restored entry keeps its original time)",
            Some(e.measured_unix_ns),
        ),
        (
            "netgauged_entry_age_seconds",
            "Seconds since the entry was measured",
            snap.with_ages
                .then_some(snap.now_unix_ns.saturating_sub(e.measured_unix_ns)),
        ),
        (
            "netgauged_entry_checked_timestamp_seconds",
            "Last re-check that agreed with the entry",
            Some(e.ext.checked_unix_ns).filter(|&t| t != 0),
        ),
        (
            "netgauged_entry_changed_timestamp_seconds",
            "Last re-check that disagreed, after which the entry was measured again",
            Some(e.ext.changed_unix_ns).filter(|&t| t != 0),
        ),
    ] {
        if let Some(ns) = ns {
            f.gauge(name, help, &base, unix_s(ns));
        }
    }
    for (bit, _, name) in crate::report::FLAGS {
        let Some(name) = name else { continue };
        f.gauge(
            "netgauged_entry_flag",
            "Entry flags: stale, changed, restored, unstable, unidentified, … (1 set, 0 not)",
            &[base[0], base[1], ("flag", name)],
            if e.flags & bit != 0 { 1.0 } else { 0.0 },
        );
    }
    let cause = e.ext.instability;
    if cause != netgauge::Instability::None {
        f.gauge(
            "netgauged_entry_instability",
            "Likely cause of an unstable entry (1 for the stated cause)",
            &[base[0], base[1], ("cause", cause.name())],
            1.0,
        );
    }
    f.gauge(
        "netgauged_entry_samples",
        "Samples the entry's fit used",
        &base,
        e.samples as f64,
    );
    f.gauge(
        "netgauged_entry_probe_bytes",
        "Bytes the entry's measurement put on the wire",
        &base,
        e.probe_bytes as f64,
    );
}

/// The daemon's health: heartbeat, budget and use, rejections, failures,
/// sessions and jobs.
fn health(f: &mut Families, snap: &Snapshot<'_>) {
    let st = snap.status;
    f.gauge(
        "netgauged_info",
        "The daemon: node name, version and probe clock (always 1)",
        &[
            ("node", st.node.as_str()),
            ("version", env!("CARGO_PKG_VERSION")),
            ("clock", snap.clock),
        ],
        1.0,
    );
    let started = unix_s(st.updated_unix_ns) - st.uptime_s;
    f.gauge(
        "netgauged_start_time_seconds",
        "When the daemon started",
        &[],
        started,
    );
    if let Some(hb) = snap.heartbeat_unix_ns {
        f.gauge(
            "netgauged_heartbeat_timestamp_seconds",
            "The segment's heartbeat (readers judge the daemon alive by it; 0 after a clean stop)",
            &[],
            unix_s(hb),
        );
        if snap.with_ages && hb != 0 {
            f.gauge(
                "netgauged_heartbeat_age_seconds",
                "Seconds since the segment's last heartbeat",
                &[],
                unix_s(snap.now_unix_ns.saturating_sub(hb)),
            );
        }
    }
    f.gauge(
        "netgauged_segment_readable",
        "Whether the exposition could read the segment (1) or not (0)",
        &[],
        if snap.entries.is_some() { 1.0 } else { 0.0 },
    );
    if let Some(e) = snap.entries {
        f.gauge(
            "netgauged_segment_entries",
            "Entries the segment publishes",
            &[],
            e.len() as f64,
        );
    }
    f.gauge(
        "netgauged_budget_bytes_per_second",
        "Probe traffic budget of this node, payload bytes per second",
        &[],
        st.budget_bytes_per_s as f64,
    );
    f.counter(
        "netgauged_probe_bytes_total",
        "Probe payload bytes spent since the start, driving and serving",
        &[],
        st.spent_bytes,
    );
    let r = &st.control_rejects;
    f.counters_by(
        "netgauged_control_rejects_total",
        "Control-plane messages and connections rejected, by kind",
        "kind",
        [
            ("malformed", r.malformed),
            ("oversize", r.oversize),
            ("bad_tag", r.bad_tag),
            ("replay", r.replay),
            ("wrong_version", r.wrong_version),
            ("timeout", r.timeout),
            ("unknown_peer", r.unknown_peer),
            ("refused", r.refused),
            ("evicted", r.evicted),
        ],
    );
    f.counters_by(
        "netgauged_metrics_rejects_total",
        "Requests to the metrics endpoint answered with an error or cut, by kind",
        "kind",
        snap.http_rejects.iter().copied(),
    );
    for p in &st.peers {
        let pl = [
            ("peer", p.name.as_str()),
            ("transport", p.transport.as_str()),
        ];
        f.gauge(
            "netgauged_peer_failures",
            "Failed meetings in a row with a peer over a transport",
            &pl,
            f64::from(p.failures),
        );
        f.gauge(
            "netgauged_peer_phase",
            "A peer's phase: new, known, suspect or failing (1 for the current one)",
            &[pl[0], pl[1], ("phase", p.phase.name())],
            1.0,
        );
        if let Some(t) = p.last_probe_unix_ns {
            f.gauge(
                "netgauged_peer_last_probe_timestamp_seconds",
                "Last probe of a peer over a transport",
                &pl,
                unix_s(t),
            );
        }
    }
    if let Some(q) = &st.quiet {
        f.gauge(
            "netgauged_quiet",
            "Whether the node is held quiet (no probes, sessions declined)",
            &[],
            if q.quiet { 1.0 } else { 0.0 },
        );
    }
    let Some(s) = &st.schedule else {
        return;
    };
    f.gauge(
        "netgauged_budget_level_bytes",
        "Bytes the budget's token bucket holds",
        &[],
        s.budget_level_bytes,
    );
    for (name, help, v) in [
        (
            "netgauged_members",
            "Members of the cluster (this node included)",
            s.members,
        ),
        (
            "netgauged_pairs_measured",
            "Peers this node has measured",
            s.pairs_measured,
        ),
        (
            "netgauged_pairs_swept",
            "Peers with a full sweep of the pair's own",
            s.pairs_swept,
        ),
        (
            "netgauged_suspect_pairs",
            "Confirmed disagreements awaiting their repair sweep",
            s.suspect_pairs,
        ),
        (
            "netgauged_classes",
            "Coverage classes this node belongs to",
            s.classes,
        ),
        (
            "netgauged_classes_fresh",
            "Coverage classes with a full sweep younger than the maximum age",
            s.classes_fresh,
        ),
    ] {
        f.gauge(name, help, &[], v as f64);
    }
    let n = &s.stats;
    f.counter(
        "netgauged_rounds_total",
        "Rounds of the cluster schedule since the start",
        &[],
        n.rounds,
    );
    f.counters_by(
        "netgauged_sessions_total",
        "Probe sessions since the start, driven and served",
        "role",
        [("driven", n.drives), ("served", n.serves)],
    );
    f.counters_by(
        "netgauged_jobs_total",
        "Jobs driven since the start, by kind",
        "kind",
        [
            ("full_sweep", n.full_sweeps),
            ("recheck", n.rechecks),
            ("fanout", n.fanouts),
        ],
    );
    f.counters_by(
        "netgauged_job_failures_total",
        "Jobs that did not publish, by reason",
        "reason",
        [
            ("unreachable", n.unreachable),
            ("failed", n.failed),
            ("disturbed", n.disturbed),
            ("partner_down", n.partner_down),
        ],
    );
    for (side, reason, v) in [
        ("met", "quiet", n.partner_quiet),
        ("met", "budget", n.partner_budget),
        ("met", "busy", n.partner_busy),
        ("met", "not_expected", n.partner_not_expected),
        ("given", "quiet", n.refused_quiet),
        ("given", "budget", n.refused_budget),
        ("given", "busy", n.refused_busy),
        ("given", "other", n.refused_other),
    ] {
        f.counter(
            "netgauged_declines_total",
            "Session requests declined: met as driver, given as responder, by reason",
            &[("side", side), ("reason", reason)],
            v,
        );
    }
    f.counter(
        "netgauged_disagreements_total",
        "Re-checks that disagreed with the published entry",
        &[],
        n.disagreements,
    );
}

/// `metrics_textfile`: the exposition replaced atomically (a temporary
/// file under an unpredictable name, then renamed over the file) in a
/// directory opened once and checked as the daemon's own directories are
/// (owned by the daemon's user or root and writable by nobody else, or
/// sticky).
pub struct Textfile {
    dir: Dir,
    name: OsString,
}

impl Textfile {
    /// Opens the directory of `path` (which must exist).
    pub fn open(path: &Path) -> std::io::Result<Textfile> {
        let invalid =
            |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_string());
        let name = path
            .file_name()
            .ok_or_else(|| invalid("no file name"))?
            .to_os_string();
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        Ok(Textfile {
            dir: Dir::open(dir, DirPolicy::PrivateOrSticky, false)?,
            name,
        })
    }

    /// Replaces the file with `text` (mode 0644: node_exporter reads it as
    /// another user).
    pub fn write(&self, text: &str) -> std::io::Result<()> {
        self.dir.replace(&self.name, text.as_bytes(), 0o644, false)
    }

    pub fn name(&self) -> &OsStr {
        &self.name
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests;
