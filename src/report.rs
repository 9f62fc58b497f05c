//! Everything `ngctl` shows, formatted in one place: the JSON of a probe
//! (the contract of `ngctl probe --json`, reused by `ngctl dump --json`),
//! the human tables, the segment dump, the daemon status, predictions, the
//! clock, and the notes operations report as they run. Functions return
//! strings; the binary prints them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use netgauge::ext::{Field, Identification, Instability, RangeField, Reason, Regime, Status};
use netgauge::{flags, EntryData, RangeData};
use serde::Serialize;
use serde_json::{json, Value};

use crate::clock::ClockInfo;
use crate::link::SessionEvent;
use crate::model::bandwidth::{self, BandwidthFit, BurstKind};
use crate::model::{self, exchange::ExchangeFit, Interval};
use crate::ops::{DumpData, Note, ProbeOutput, StatusData};
use crate::predict::PredictJson;
use crate::probe::ProbeResult;

/// The LogfP part of `ngctl probe --json`.
#[derive(Clone, Debug, Serialize)]
pub struct LogfpJson {
    pub f: Option<u32>,
    pub f_paper: Option<u32>,
    pub o_min_ns: f64,
    pub o_max_ns: f64,
    pub g_ns: f64,
    pub curve: Vec<model::FanoutPoint>,
}

/// Protocol-change detection as reported: both detectors, and which was used.
#[derive(Clone, Debug, Serialize)]
pub struct SegmentationJson {
    pub used: Option<model::Segmenter>,
    pub lookahead: Vec<u64>,
    pub optimal_bic: Vec<u64>,
}

/// One protocol range: the segment's schema of a range and its bandwidth
/// 1/G (GB = 10⁹ bytes; null when G is not a positive number).
#[allow(non_snake_case)]
#[derive(Clone, Debug, Serialize)]
pub struct RangeJson {
    #[serde(flatten)]
    pub range: RangeData,
    pub GB_per_s: f64,
    pub Gb_per_s: f64,
}

/// A rate as ngctl states it: G with its interval and verdict, and 1/G.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Serialize)]
pub struct RateJson {
    pub G_ns_per_byte: f64,
    pub ci95: Interval,
    pub GB_per_s: f64,
    pub Gb_per_s: f64,
    /// "identified", or why not (see `identification`).
    pub status: &'static str,
}

impl RateJson {
    fn new(g: f64, ci95: Interval, status: Status) -> Self {
        let bps = bandwidth::bytes_per_s(g);
        RateJson {
            G_ns_per_byte: g,
            ci95,
            GB_per_s: bps / 1e9,
            Gb_per_s: 8.0 * bps / 1e9,
            status: status.name(),
        }
    }
}

/// The large-message bandwidth: the sustained rate (the bandwidth) and,
/// when a token bucket or credit window was recognised, the burst rate.
#[derive(Clone, Debug, Serialize)]
pub struct BandwidthJson {
    pub sustained: RateJson,
    /// "long_bursts" (the sweep's last stage) or "range".
    pub source: &'static str,
    /// long_bursts: the message size and the burst lengths (messages) the
    /// rate is taken between (0 when not known, e.g. from a segment).
    pub size_bytes: u64,
    pub messages: [u32; 2],
    /// The protocol range whose G is the sustained G, if one is.
    pub range: Option<usize>,
    /// "single", "token_bucket" or "credit".
    pub regime: &'static str,
    pub burst: Option<BurstJson>,
    /// Why the long bursts stopped early, if they did.
    pub stopped: Option<String>,
}

/// The burst side of a regime.
#[derive(Clone, Debug, Serialize)]
pub struct BurstJson {
    #[serde(flatten)]
    pub rate: RateJson,
    /// The largest burst (n × s) seen at the burst rate: a lower bound of
    /// the allowance.
    pub bytes: u64,
}

/// The verdicts, by the names of the JSON's values.
#[derive(Clone, Debug, Serialize)]
pub struct IdentJson {
    pub eel_ns: &'static str,
    #[serde(rename = "L_ns")]
    pub l_ns: &'static str,
    #[serde(rename = "S_bytes")]
    pub s_bytes: &'static str,
    pub logfp: BTreeMap<&'static str, &'static str>,
    pub sustained_g: &'static str,
    pub burst_g: &'static str,
    pub ranges: Vec<BTreeMap<&'static str, &'static str>>,
}

/// A parameter that is not identified.
#[derive(Clone, Debug, Serialize)]
pub struct ProblemJson {
    /// Its key, as in `ci95` (e.g. "ranges[2].g_ns").
    pub parameter: String,
    pub reason: &'static str,
    /// The value as fitted (may be negative, or null).
    pub value: f64,
}

/// The stability verdict.
#[derive(Clone, Debug, Serialize)]
pub struct StabilityJson {
    /// "stable" or "unstable".
    pub verdict: &'static str,
    /// "none", "shared_core", "multi_modal", "runs_disagree", …
    pub cause: &'static str,
    pub detail: String,
}

/// The object `ngctl probe --json` prints (field names are part of the CLI
/// contract and reused by `ngctl dump --json`).
#[allow(non_snake_case)]
#[derive(Clone, Debug, Serialize)]
pub struct ProbeJson {
    /// The transport the probe ran over (null when not known).
    pub transport: Option<String>,
    pub eel_ns: f64,
    pub L_ns: f64,
    pub L_negative: bool,
    pub o_s_ns: f64,
    pub o_r_ns: f64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    pub S_bytes: Option<u64>,
    /// The large-message bandwidth (null when nothing was measured).
    pub bandwidth: Option<BandwidthJson>,
    pub ranges: Vec<RangeJson>,
    pub logfp: Option<LogfpJson>,
    pub ci95: BTreeMap<String, Interval>,
    /// Every parameter's verdict, and the ones not identified with why.
    pub identification: IdentJson,
    pub not_identified: Vec<ProblemJson>,
    pub stability: StabilityJson,
    pub probe_bytes: u64,
    pub probe_messages: u64,
    pub elapsed_ns: f64,
    pub lost_rounds: u32,
    pub segmentation: SegmentationJson,
    pub sizes: usize,
    pub points: Vec<model::SizePoint>,
}

/// The range-level keys, in [`RangeField`] order (the first six).
const RANGE_KEYS: [&str; 6] = [
    "g_ns",
    "G_ns_per_byte",
    "o_s_ns",
    "o_r_ns",
    "O_s_ns_per_byte",
    "O_r_ns_per_byte",
];

fn range_values(r: &RangeData) -> [f64; 6] {
    [
        r.g_ns,
        r.G_ns_per_byte,
        r.o_s_ns,
        r.o_r_ns,
        r.O_s_ns_per_byte,
        r.O_r_ns_per_byte,
    ]
}

fn ranges_json(ranges: &[RangeData]) -> Vec<RangeJson> {
    ranges
        .iter()
        .map(|r| {
            let bps = bandwidth::bytes_per_s(r.G_ns_per_byte);
            RangeJson {
                range: r.clone(),
                GB_per_s: bps / 1e9,
                Gb_per_s: 8.0 * bps / 1e9,
            }
        })
        .collect()
}

/// The parameters whose verdicts a report shows, with their values.
struct Values<'a> {
    eel_ns: f64,
    l_ns: f64,
    s_bytes: Option<u64>,
    ranges: &'a [RangeData],
    logfp: Option<[f64; 3]>,
    sustained_g: f64,
    burst_g: f64,
}

/// The verdicts and the list of what is not identified.
fn ident_json(id: &Identification, v: &Values<'_>) -> (IdentJson, Vec<ProblemJson>) {
    let mut problems = Vec::new();
    let mut note = |key: String, st: Status, value: f64| {
        if let Status::NotIdentified(_) = st {
            problems.push(ProblemJson {
                parameter: key,
                reason: st.name(),
                value,
            });
        }
        st.name()
    };
    let eel = note("eel_ns".into(), id.get(Field::Eel), v.eel_ns);
    let l = note("L_ns".into(), id.get(Field::L), v.l_ns);
    let s = id.get(Field::S);
    let s_name = match s {
        // S on a transport without a rendezvous is a fact, not a doubt.
        Status::NotIdentified(Reason::NotApplicable) => s.name(),
        _ => note(
            "S_bytes".into(),
            s,
            v.s_bytes.map_or(f64::NAN, |b| b as f64),
        ),
    };
    let mut logfp = BTreeMap::new();
    if let Some([o_min, o_max, g]) = v.logfp {
        for (k, f, val) in [
            ("f", Field::F, f64::NAN),
            ("o_min_ns", Field::OMin, o_min),
            ("o_max_ns", Field::OMax, o_max),
            ("g_ns", Field::Gf, g),
        ] {
            logfp.insert(k, note(format!("logfp.{k}"), id.get(f), val));
        }
    }
    let sustained_g = note(
        "bandwidth.sustained.G_ns_per_byte".into(),
        id.get(Field::SustainedG),
        v.sustained_g,
    );
    let burst_g = note(
        "bandwidth.burst.G_ns_per_byte".into(),
        id.get(Field::BurstG),
        v.burst_g,
    );
    let ranges = v
        .ranges
        .iter()
        .enumerate()
        .map(|(i, r)| {
            RANGE_KEYS
                .iter()
                .zip(RangeField::ALL)
                .zip(range_values(r))
                .map(|((k, f), val)| {
                    let st = id.get_range(i, f);
                    let name = match st {
                        // Not a doubt: the transport has no such overhead.
                        Status::NotIdentified(Reason::NotApplicable) => st.name(),
                        _ => note(format!("ranges[{i}].{k}"), st, val),
                    };
                    (*k, name)
                })
                .collect()
        })
        .collect();
    (
        IdentJson {
            eel_ns: eel,
            l_ns: l,
            s_bytes: s_name,
            logfp,
            sustained_g,
            burst_g,
            ranges,
        },
        problems,
    )
}

fn stability_json(cause: Instability, detail: String) -> StabilityJson {
    StabilityJson {
        verdict: if cause == Instability::None {
            "stable"
        } else {
            "unstable"
        },
        cause: cause.name(),
        detail,
    }
}

/// The bandwidth block of a fit.
fn bandwidth_json(b: &BandwidthFit, sustained: Status) -> Option<BandwidthJson> {
    if !b.sustained_G_ns_per_byte.is_finite() {
        return None;
    }
    let (source, size_bytes, messages) = match b.source {
        bandwidth::Source::LongBursts {
            size_bytes,
            from_messages,
            to_messages,
        } => ("long_bursts", size_bytes, [from_messages, to_messages]),
        _ => ("range", 0, [0, 0]),
    };
    Some(BandwidthJson {
        sustained: RateJson::new(b.sustained_G_ns_per_byte, b.ci95, sustained),
        source,
        size_bytes,
        messages,
        range: b.range_index,
        regime: match b.burst.map(|x| x.kind) {
            None => "single",
            Some(BurstKind::TokenBucket) => "token_bucket",
            Some(BurstKind::Credit) => "credit",
        },
        burst: b.burst.map(|x| BurstJson {
            rate: RateJson::new(x.G_ns_per_byte, x.ci95, x.status),
            bytes: x.bytes,
        }),
        stopped: b.stopped.clone(),
    })
}

/// A probe's result in the shape of `ngctl probe --json`; `transport`: the
/// kind it ran over, if known.
pub fn probe_json(r: &ProbeResult, transport: Option<&str>) -> ProbeJson {
    let first = r.fit.ranges.first().cloned().unwrap_or_default();
    let v = Values {
        eel_ns: r.fit.eel_ns,
        l_ns: r.fit.L_ns,
        s_bytes: r.fit.S_bytes,
        ranges: &r.fit.ranges,
        logfp: r.logfp.as_ref().map(|l| [l.o_min_ns, l.o_max_ns, l.g_ns]),
        sustained_g: r.bandwidth.sustained_G_ns_per_byte,
        burst_g: r.bandwidth.burst.map_or(f64::NAN, |b| b.G_ns_per_byte),
    };
    let (identification, not_identified) = ident_json(&r.ident, &v);
    ProbeJson {
        transport: transport.map(str::to_string),
        eel_ns: r.fit.eel_ns,
        L_ns: r.fit.L_ns,
        L_negative: r.fit.L_negative,
        o_s_ns: first.o_s_ns,
        o_r_ns: first.o_r_ns,
        g_ns: first.g_ns,
        G_ns_per_byte: first.G_ns_per_byte,
        S_bytes: r.fit.S_bytes,
        bandwidth: bandwidth_json(&r.bandwidth, r.ident.get(Field::SustainedG)),
        ranges: ranges_json(&r.fit.ranges),
        logfp: r.logfp.as_ref().map(|l| LogfpJson {
            f: l.f,
            f_paper: l.f_paper,
            o_min_ns: l.o_min_ns,
            o_max_ns: l.o_max_ns,
            g_ns: l.g_ns,
            curve: l.points.clone(),
        }),
        ci95: r.ci95.clone(),
        identification,
        not_identified,
        stability: stability_json(r.stability.cause, r.stability.detail.clone()),
        probe_bytes: r.probe_bytes,
        probe_messages: r.probe_messages,
        elapsed_ns: r.elapsed_ns,
        lost_rounds: r.lost_rounds,
        segmentation: SegmentationJson {
            used: r.fit.segmenter,
            lookahead: r.fit.changes_lookahead.clone(),
            optimal_bic: r.fit.changes_optimal.clone(),
        },
        sizes: r.samples.len(),
        points: r.fit.points.clone(),
    }
}

/// What a segment entry's instability says, for humans.
fn instability_detail(c: Instability) -> String {
    match c {
        Instability::None => String::new(),
        Instability::SharedCore => "the driver lost its CPU in most round trips: driver and \
             responder (or another busy process) share a core; pin them apart (the \
             daemon's probe_cpu; ngctl probe/serve --cpu)"
            .into(),
        Instability::MultiModal => "the small-message round trips fall into two groups".into(),
        Instability::RunsDisagree => {
            "the smallest size measured twice in the sweep disagreed; the lower is used".into()
        }
        Instability::Interference => "the host or the link was disturbed during the sweep".into(),
        Instability::Unknown(_) => "a cause this ngctl does not know".into(),
    }
}

/// A segment entry as a [`ProbeJson`] (fields a segment does not keep are
/// empty), for the human table.
pub fn entry_probe_json(e: &EntryData) -> ProbeJson {
    let first = e.ranges.first().cloned().unwrap_or_default();
    let id = &e.ext.ident;
    let bw = e.ext.bandwidth;
    let v = Values {
        eel_ns: e.eel_ns,
        l_ns: e.L_ns,
        s_bytes: e.S_bytes,
        ranges: &e.ranges,
        logfp: (e.flags & flags::HAS_LOGFP != 0).then_some([e.o_min_ns, e.o_max_ns, e.g_f_ns]),
        sustained_g: bw.map_or(f64::NAN, |b| b.sustained_G_ns_per_byte.value),
        burst_g: bw.map_or(f64::NAN, |b| b.burst_G_ns_per_byte.value),
    };
    let (identification, not_identified) = ident_json(id, &v);
    let interval = |x: &netgauge::ext::Estimate| (x.lo, x.hi);
    let bandwidth = bw.map(|b| BandwidthJson {
        sustained: RateJson::new(
            b.sustained_G_ns_per_byte.value,
            interval(&b.sustained_G_ns_per_byte),
            id.get(Field::SustainedG),
        ),
        source: if b.range().is_some() {
            "range"
        } else {
            "long_bursts"
        },
        size_bytes: 0,
        messages: [0, 0],
        range: b.range(),
        regime: match b.regime() {
            Some(Regime::TokenBucket) => "token_bucket",
            Some(Regime::Credit) => "credit",
            _ => "single",
        },
        burst: (b.regime() != Some(Regime::Single)).then(|| BurstJson {
            rate: RateJson::new(
                b.burst_G_ns_per_byte.value,
                interval(&b.burst_G_ns_per_byte),
                id.get(Field::BurstG),
            ),
            bytes: b.burst_bytes,
        }),
        stopped: None,
    });
    ProbeJson {
        transport: Some(e.transport.clone()),
        eel_ns: e.eel_ns,
        L_ns: e.L_ns,
        L_negative: e.flags & flags::L_NEGATIVE != 0,
        o_s_ns: first.o_s_ns,
        o_r_ns: first.o_r_ns,
        g_ns: first.g_ns,
        G_ns_per_byte: first.G_ns_per_byte,
        S_bytes: e.S_bytes,
        bandwidth,
        ranges: ranges_json(&e.ranges),
        logfp: (e.flags & flags::HAS_LOGFP != 0 || !e.curve.is_empty()).then(|| LogfpJson {
            f: e.f,
            f_paper: None,
            o_min_ns: e.o_min_ns,
            o_max_ns: e.o_max_ns,
            g_ns: e.g_f_ns,
            curve: e
                .curve
                .iter()
                .map(|&(peers, o_ns, rtt_ns)| model::FanoutPoint {
                    peers,
                    o_ns,
                    rtt_ns,
                    recv_ns: 0.0,
                })
                .collect(),
        }),
        ci95: e
            .ci95
            .iter()
            .map(|(k, lo, hi)| (k.clone(), (*lo, *hi)))
            .collect(),
        identification,
        not_identified,
        stability: stability_json(e.ext.instability, instability_detail(e.ext.instability)),
        probe_bytes: e.probe_bytes,
        probe_messages: 0,
        elapsed_ns: f64::NAN,
        lost_rounds: 0,
        segmentation: SegmentationJson {
            used: None,
            lookahead: Vec::new(),
            optimal_bic: Vec::new(),
        },
        sizes: 0,
        points: Vec::new(),
    }
}

/// Flag names, for humans and JSON.
pub fn flag_names(bits: u32) -> Vec<&'static str> {
    [
        (flags::VALID, "valid"),
        (flags::L_NEGATIVE, "L_negative"),
        (flags::DEGRADED, "degraded"),
        (flags::STALE, "stale"),
        (flags::HAS_LOGFP, "logfp"),
        (flags::HAS_S, "S"),
        (flags::HAS_LOGGPS, "loggps"),
        (flags::RESTORED, "restored"),
        (flags::CLASS, "class"),
        (flags::CHANGED, "changed"),
        (flags::UNSTABLE, "unstable"),
        (flags::UNIDENTIFIED, "unidentified"),
        (flags::SHAPED, "shaped"),
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, n)| n)
    .collect()
}

/// A segment entry in the shape of `ngctl probe --json`, plus `peer`,
/// `transport`, `samples`, `measured_unix_ns`, `age_s` and `flags`.
pub fn entry_json(e: &EntryData, now_unix_ns: u64) -> Value {
    let mut v = serde_json::to_value(entry_probe_json(e)).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        // Fields a probe has but a segment entry does not keep.
        for k in [
            "probe_messages",
            "elapsed_ns",
            "lost_rounds",
            "segmentation",
            "sizes",
            "points",
        ] {
            m.remove(k);
        }
        if let Some(Value::Object(l)) = m.get_mut("logfp") {
            l.remove("f_paper");
        }
        m.insert("peer".into(), json!(e.peer));
        m.insert("transport".into(), json!(e.transport));
        m.insert("samples".into(), json!(e.samples));
        m.insert("measured_unix_ns".into(), json!(e.measured_unix_ns));
        m.insert("age_s".into(), json!(age_s(e, now_unix_ns)));
        m.insert("flags".into(), json!(flag_names(e.flags)));
    }
    v
}

fn age_s(e: &EntryData, now_unix_ns: u64) -> f64 {
    now_unix_ns.saturating_sub(e.measured_unix_ns) as f64 / 1e9
}

/// `v` as pretty JSON, one line feed after it.
fn pretty(v: &impl Serialize) -> Result<String, serde_json::Error> {
    Ok(serde_json::to_string_pretty(v)? + "\n")
}

/// Format nanoseconds with a unit a human reads at a glance.
pub fn fmt_ns(ns: f64) -> String {
    if !ns.is_finite() {
        return "—".to_string();
    }
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.1} ns")
    }
}

/// Format a byte count (binary prefixes).
pub fn fmt_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    let mut u = 0;
    while v.abs() >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Format a gap per byte.
pub fn fmt_per_byte(g: f64) -> String {
    if !g.is_finite() {
        return "—".to_string();
    }
    let a = g.abs();
    if a >= 100.0 {
        format!("{g:.1} ns/B")
    } else if a >= 1.0 {
        format!("{g:.3} ns/B")
    } else {
        format!("{g:.4} ns/B")
    }
}

/// 1/G as a bandwidth a human reads: GB/s (10⁹ bytes) and Gb/s.
pub fn fmt_rate(g_ns_per_byte: f64) -> String {
    let bps = bandwidth::bytes_per_s(g_ns_per_byte);
    if !bps.is_finite() {
        return "—".to_string();
    }
    let gb = bps / 1e9;
    if gb >= 1.0 {
        format!("{gb:.2} GB/s ({:.1} Gb/s)", 8.0 * gb)
    } else {
        format!("{:.1} MB/s ({:.0} Mb/s)", gb * 1e3, 8e3 * gb)
    }
}

/// A value with its interval, or why it is not identified.
fn shown(value: String, ci: Option<(String, String)>, st: Status) -> String {
    match st {
        Status::NotIdentified(Reason::NotApplicable) => "not applicable".into(),
        Status::NotIdentified(Reason::NotMeasured) if value == "—" => "not measured".into(),
        Status::NotIdentified(r) => format!(
            "not identified ({}): {value}",
            Status::NotIdentified(r).name().replace('_', " ")
        ),
        _ => match ci {
            Some((lo, hi)) => format!("{value}  [{lo} … {hi}]"),
            None => value,
        },
    }
}

fn ci_strings(p: &ProbeJson, key: &str, f: &dyn Fn(f64) -> String) -> Option<(String, String)> {
    match p.ci95.get(key) {
        Some(&(lo, hi)) if lo.is_finite() && hi.is_finite() => Some((f(lo), f(hi))),
        _ => None,
    }
}

/// The status of a JSON key.
fn status_of(p: &ProbeJson, key: &str) -> Status {
    let name = match key {
        "eel_ns" => p.identification.eel_ns,
        "L_ns" => p.identification.l_ns,
        "S_bytes" => p.identification.s_bytes,
        _ => {
            if let Some(rest) = key.strip_prefix("ranges[") {
                let (i, k) = rest.split_once("].").unwrap_or(("", ""));
                let i: usize = i.parse().unwrap_or(usize::MAX);
                p.identification
                    .ranges
                    .get(i)
                    .and_then(|m| m.get(k).copied())
                    .unwrap_or("not_assessed")
            } else {
                "not_assessed"
            }
        }
    };
    status_by_name(name)
}

fn status_by_name(name: &str) -> Status {
    (0..16u8)
        .map(Status::from_code)
        .find(|s| s.name() == name)
        .unwrap_or(Status::NotAssessed)
}

/// The parameter tables: the large-message bandwidth, the first range's
/// LogGP set, the ranges' gaps and bandwidths, their overheads, what is not
/// identified, and the stability verdict. Lines stay within 80 columns.
pub fn probe_table(p: &ProbeJson) -> String {
    let mut s = String::new();
    let ns = |v: f64| fmt_ns(v);
    let pb = |v: f64| fmt_per_byte(v);
    if let Some(b) = &p.bandwidth {
        let st = status_by_name(b.sustained.status);
        let g = &b.sustained;
        let line = match st {
            Status::NotIdentified(_) => shown(fmt_per_byte(g.G_ns_per_byte), None, st),
            _ => {
                let ci = if g.ci95.0.is_finite() && g.ci95.1.is_finite() {
                    format!("  [{} … {}]", pb(g.ci95.0), pb(g.ci95.1))
                } else {
                    String::new()
                };
                format!(
                    "{}\n    G {}{ci}",
                    fmt_rate(g.G_ns_per_byte),
                    pb(g.G_ns_per_byte)
                )
            }
        };
        let _ = writeln!(s, "  large-message bandwidth  {line}");
        let from = match (b.source, b.size_bytes) {
            ("long_bursts", sz) if sz > 0 => format!(
                "sustained: bursts of {}–{} × {}",
                b.messages[0],
                b.messages[1],
                fmt_bytes(sz as f64)
            ),
            ("long_bursts", _) => "sustained: long bursts".to_string(),
            _ => match b.range {
                Some(r) => format!("from range {r} (no long bursts)"),
                None => "from the largest range".to_string(),
            },
        };
        let _ = writeln!(s, "    {from}");
        if let Some(x) = &b.burst {
            let what = if b.regime == "credit" {
                "credit window"
            } else {
                "token bucket"
            };
            let _ = writeln!(
                s,
                "    {what}: bursts up to {} pass at {}",
                fmt_bytes(x.bytes as f64),
                fmt_rate(x.rate.G_ns_per_byte)
            );
        }
        if let Some(why) = &b.stopped {
            let _ = writeln!(s, "    long bursts stopped: {why}");
        }
    }
    let row = |s: &mut String, name: &str, key: &str, value: f64, f: &dyn Fn(f64) -> String| {
        let st = status_of(p, key);
        let _ = writeln!(
            s,
            "  {name:<5} {}",
            shown(f(value), ci_strings(p, key, f), st)
        );
    };
    row(&mut s, "EEL", "eel_ns", p.eel_ns, &ns);
    row(&mut s, "L", "L_ns", p.L_ns, &ns);
    row(&mut s, "o_s", "ranges[0].o_s_ns", p.o_s_ns, &ns);
    row(&mut s, "o_r", "ranges[0].o_r_ns", p.o_r_ns, &ns);
    row(&mut s, "g", "ranges[0].g_ns", p.g_ns, &ns);
    row(&mut s, "G", "ranges[0].G_ns_per_byte", p.G_ns_per_byte, &pb);
    match (p.S_bytes, status_of(p, "S_bytes")) {
        (_, Status::NotIdentified(Reason::NotApplicable)) => {
            let _ = writeln!(s, "  S     not applicable (no rendezvous protocol)");
        }
        (Some(b), _) => {
            let _ = writeln!(s, "  S     {b} B (rendezvous above)");
        }
        (None, _) => {
            let _ = writeln!(s, "  S     none found");
        }
    }
    // Gap table: range, g, G, bandwidth.
    let cell = |p: &ProbeJson, i: usize, k: &str, v: String| match status_of(
        p,
        &format!("ranges[{i}].{k}"),
    ) {
        Status::NotIdentified(Reason::NotApplicable) => "n/a".to_string(),
        Status::NotIdentified(_) => format!("({v})"),
        _ => v,
    };
    let _ = writeln!(
        s,
        "  {:<21} {:>12} {:>13}  bandwidth 1/G",
        "range (bytes)", "g", "G"
    );
    for (i, r) in p.ranges.iter().enumerate() {
        let r = &r.range;
        let _ = writeln!(
            s,
            "  {:>9} … {:<9} {:>12} {:>13}  {}",
            r.from_bytes,
            r.to_bytes,
            cell(p, i, "g_ns", fmt_ns(r.g_ns)),
            cell(p, i, "G_ns_per_byte", pb(r.G_ns_per_byte)),
            fmt_rate(r.G_ns_per_byte)
        );
        let ci = |k: &str, f: &dyn Fn(f64) -> String| {
            ci_strings(p, &format!("ranges[{i}].{k}"), f)
                .map_or(String::new(), |(lo, hi)| format!("[{lo} … {hi}]"))
        };
        let (cg, cb) = (ci("g_ns", &ns), ci("G_ns_per_byte", &pb));
        if !cg.is_empty() || !cb.is_empty() {
            let _ = writeln!(s, "  {:>21}  g {cg}", "95 %:");
            let _ = writeln!(s, "  {:>21}  G {cb}", "");
        }
    }
    // Overhead table.
    let _ = writeln!(
        s,
        "  {:<21} {:>11} {:>11} {:>11} {:>11}",
        "range (bytes)", "o_s", "o_r", "O_s", "O_r"
    );
    for (i, r) in p.ranges.iter().enumerate() {
        let r = &r.range;
        let _ = writeln!(
            s,
            "  {:>9} … {:<9} {:>11} {:>11} {:>11} {:>11}",
            r.from_bytes,
            r.to_bytes,
            cell(p, i, "o_s_ns", fmt_ns(r.o_s_ns)),
            cell(p, i, "o_r_ns", fmt_ns(r.o_r_ns)),
            cell(p, i, "O_s_ns_per_byte", format!("{:.4}", r.O_s_ns_per_byte)),
            cell(p, i, "O_r_ns_per_byte", format!("{:.4}", r.O_r_ns_per_byte)),
        );
    }
    if let Some(l) = &p.logfp {
        let f = l.f.map_or("none".to_string(), |f| f.to_string());
        let fp = l.f_paper.map_or("none".to_string(), |f| f.to_string());
        let _ = writeln!(
            s,
            "  LogfP f = {f} (RTT(P)/P minimum: {fp}), o_min {}, o_max {}, g {}",
            fmt_ns(l.o_min_ns),
            fmt_ns(l.o_max_ns),
            fmt_ns(l.g_ns)
        );
    }
    if !p.not_identified.is_empty() {
        let _ = writeln!(s, "  not identified (values in parentheses above):");
        for x in &p.not_identified {
            let _ = writeln!(s, "    {}: {}", x.parameter, x.reason.replace('_', " "));
        }
    }
    if p.stability.verdict != "stable" {
        let _ = writeln!(
            s,
            "  UNSTABLE ({}): {}",
            p.stability.cause.replace('_', " "),
            p.stability.detail
        );
    }
    if p.sizes == 0 {
        // A segment entry: no sweep details are kept.
        let _ = writeln!(
            s,
            "  probe cost: {} payload",
            fmt_bytes(p.probe_bytes as f64)
        );
        return s;
    }
    let _ = writeln!(
        s,
        "  protocol changes: lookahead {:?}, optimal/BIC {:?}; used {}",
        p.segmentation.lookahead,
        p.segmentation.optimal_bic,
        p.segmentation
            .used
            .map_or("none".to_string(), |u| format!("{u:?}"))
    );
    let _ = writeln!(
        s,
        "  probe cost: {} payload in {} messages over {} sizes, {} ({} lost rounds)",
        fmt_bytes(p.probe_bytes as f64),
        p.probe_messages,
        p.sizes,
        fmt_ns(p.elapsed_ns),
        p.lost_rounds
    );
    s
}

/// The all-ranks exchange ranges (`ngctl probe --transport mpi`, `ngctl fit`).
pub fn exchange_table(x: &ExchangeFit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "all {} ranks exchanging at once ({} sizes), one step = g + (s−1)·G:",
        x.ranks,
        x.points.len()
    );
    for r in &x.ranges {
        let _ = writeln!(
            s,
            "  {:>9} … {:>9}   g {:>10}   G {:.4} ns/B   ({} at {})",
            fmt_bytes(r.from_bytes as f64),
            fmt_bytes(r.to_bytes as f64),
            fmt_ns(r.step_ns),
            r.G_ns_per_byte,
            fmt_ns(r.at(r.to_bytes)),
            fmt_bytes(r.to_bytes as f64),
        );
    }
    s
}

/// What `ngctl probe` and `ngctl fit` print: the JSON of the fit (with the
/// exchange fit and, for `--raw`, the samples), or the tables under `title`.
fn result(
    r: &ProbeResult,
    exchange: Option<&ExchangeFit>,
    json: bool,
    raw: Option<Value>,
    title: &str,
) -> Result<String, serde_json::Error> {
    let out = probe_json(r, r.transport.as_deref());
    if json {
        let mut v = serde_json::to_value(&out)?;
        if let Some(x) = exchange {
            v["exchange"] = serde_json::to_value(x)?;
        }
        if let Some(r) = raw {
            v["raw"] = r;
        }
        return pretty(&v);
    }
    let mut s = format!("{title}\n");
    s.push_str(&probe_table(&out));
    if let Some(x) = exchange {
        s.push_str(&exchange_table(x));
    }
    Ok(s)
}

/// `ngctl probe`'s output (`raw`: with the raw samples in the JSON).
pub fn probe(o: &ProbeOutput, json: bool, raw: bool) -> Result<String, serde_json::Error> {
    let raw = raw.then(|| {
        let mut v = serde_json::to_value(o.result.raw()).unwrap_or(Value::Null);
        v["exchange"] = json!(o.exchange_raw);
        v
    });
    let title = format!(
        "probe over {:?} ({} sizes, {} … {} B):",
        o.kind,
        o.result.samples.len(),
        o.min_size_bytes,
        o.max_size_bytes
    );
    result(&o.result, o.exchange.as_ref(), json, raw, &title)
}

/// `ngctl fit`'s output for the saved probe `file` of `sizes` sizes.
pub fn refit(
    r: &ProbeResult,
    exchange: Option<&ExchangeFit>,
    file: &str,
    sizes: usize,
    json: bool,
) -> Result<String, serde_json::Error> {
    let title = format!("re-fit of {file} ({sizes} sizes):");
    result(r, exchange, json, None, &title)
}

/// `ngctl dump`.
pub fn dump(d: &DumpData, json: bool) -> Result<String, serde_json::Error> {
    let info = &d.info;
    if json {
        let v = json!({
            "node": info.node_name,
            "generation": info.generation,
            "writer_pid": info.writer_pid,
            "writer_alive": d.alive,
            "clock": info.clock_desc,
            "entries": d.entries.iter().map(|e| entry_json(e, d.now_unix_ns)).collect::<Vec<_>>(),
        });
        return pretty(&v);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "segment {}: node {}, generation {:016x}, writer pid {} ({}), clock {}",
        d.path,
        info.node_name,
        info.generation,
        info.writer_pid,
        if d.alive {
            "alive"
        } else {
            "not running: values are as last published"
        },
        info.clock_desc
    );
    if d.entries.is_empty() {
        let _ = writeln!(s, "  (no entries)");
    }
    for e in &d.entries {
        let _ = writeln!(
            s,
            "\n{} over {} — measured {:.1} s ago, {} samples, flags {}",
            e.peer,
            e.transport,
            age_s(e, d.now_unix_ns),
            e.samples,
            flag_names(e.flags).join(",")
        );
        s.push_str(&probe_table(&entry_probe_json(e)));
    }
    Ok(s)
}

/// `ngctl status`.
pub fn status(st: &StatusData, json: bool) -> Result<String, serde_json::Error> {
    let info = &st.info;
    if json {
        let v = json!({
            "alive": st.alive,
            "heartbeat_age_s": st.heartbeat_age_s,
            "generation": format!("{:016x}", info.generation),
            "node": info.node_name,
            "writer_pid": info.writer_pid,
            "daemon": st.daemon,
        });
        return pretty(&v);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "netgauged on {}: {} (pid {}, generation {:016x}, heartbeat {:.1} s ago)",
        info.node_name,
        if st.alive { "alive" } else { "NOT RUNNING" },
        info.writer_pid,
        info.generation,
        st.heartbeat_age_s
    );
    if let Some(d) = &st.daemon {
        let _ = writeln!(
            s,
            "  budget {} B/s, used {:.0} B/s on average ({} B in {:.0} s); control rejects {}",
            d.budget_bytes_per_s,
            d.spent_bytes_per_s,
            d.spent_bytes,
            d.uptime_s,
            serde_json::to_value(d.control_rejects)?
        );
        for p in &d.peers {
            let last = p.last_probe_unix_ns.map_or("never".to_string(), |t| {
                format!("{:.0} s ago", st.now_unix_ns.saturating_sub(t) as f64 / 1e9)
            });
            let _ = writeln!(
                s,
                "  {:<20} {:<8} {:<4} last probe {last}, failures {}{}",
                p.name,
                p.phase.name(),
                p.transport,
                p.failures,
                p.last_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(" ({e})"))
            );
        }
    }
    Ok(s)
}

/// `ngctl predict`.
pub fn predict(p: &PredictJson, json: bool) -> Result<String, serde_json::Error> {
    if json {
        return pretty(p);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} of {} B on {} ranks ({} over {}{}):",
        p.collective,
        p.bytes,
        p.ranks,
        p.peer,
        p.transport,
        if p.measured_exchange {
            ", all-ranks exchange measured"
        } else {
            ""
        }
    );
    for c in &p.candidates {
        let seg = if c.segment_bytes > 0 {
            format!("  (segment {} B)", c.segment_bytes)
        } else {
            String::new()
        };
        let mark = if c.algorithm == p.choice.algorithm {
            " <- choice"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  {:<24} {:>14.0} ns{seg}{mark}",
            c.algorithm, c.predicted_ns
        );
    }
    Ok(s)
}

/// `ngctl clock`.
pub fn clock(info: &ClockInfo, json: bool) -> Result<String, serde_json::Error> {
    if json {
        pretty(info)
    } else {
        Ok(format!("{info}\n"))
    }
}

/// A note as `ngctl` writes it to stderr (one line, no newline).
pub fn note(n: &Note) -> String {
    match n {
        Note::Listening { kind, at } => format!("ngctl serve: answering {kind} probes on {at}"),
        Note::Idle { messages, answers } => {
            format!("ngctl serve: idle, exiting after {messages} messages and {answers} answers")
        }
        Note::Session(e) => match e {
            SessionEvent::Started { who, active } => {
                format!("ngctl serve: session with {who} ({active} active)")
            }
            SessionEvent::SetupFailed {
                who: Some(who),
                error,
            } => format!("ngctl serve: session set-up with {who} failed: {error}"),
            SessionEvent::SetupFailed { who: None, error } => {
                format!("ngctl serve: session set-up failed: {error}")
            }
            SessionEvent::Ended { who } => format!("ngctl serve: session with {who} ended"),
            SessionEvent::Round { messages, answers } => {
                format!("ngctl serve: {messages} messages and {answers} answers in this round")
            }
            SessionEvent::Failed { error } => format!("ngctl serve: {error}"),
            SessionEvent::Idle => "ngctl serve: idle, exiting".to_string(),
        },
        Note::Ignored { who, frames } => format!("ngctl {who}: ignored frames: {frames}"),
        Note::Published {
            peer,
            transport,
            path,
        } => format!("published {peer}/{transport} into {path}"),
        Note::ExchangeFailed { rank: 0, error } => {
            format!("ngctl probe: the exchange sweep failed ({error}); publishing the pair alone")
        }
        Note::ExchangeFailed { rank, error } => {
            format!("ngctl probe (rank {rank}): the exchange sweep failed: {error}")
        }
    }
}
