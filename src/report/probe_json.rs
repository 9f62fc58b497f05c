//! The JSON of a probe and of a segment entry (`ngctl probe --json`, reused
//! by `ngctl dump --json`): the LogGP set, the ranges with their bandwidth,
//! the large-message bandwidth, the half round trip's percentiles, every
//! parameter's verdict and the stability verdict.

use std::collections::BTreeMap;

use netgauge::ext::{
    Field, Identification, Instability, LatencyPercentiles, RangeField, Reason, Regime, Status,
};
use netgauge::{flags, EntryData, RangeData};
use serde::Serialize;

use crate::model::bandwidth::{self, BandwidthFit, BurstKind};
use crate::model::fit::{range_values, RANGE_KEYS};
use crate::model::latency::{self, Bin, LatencySamples};
use crate::model::{self, Interval};
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

/// The half round trip's distribution at one size (nearest-rank
/// percentiles over `samples` round trips: below 1000 samples p99.9 is the
/// maximum), and with `ngctl probe --histogram` its log-spaced histogram.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyJson {
    #[serde(flatten)]
    pub percentiles: LatencyPercentiles,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub histogram: Option<Vec<Bin>>,
}

fn latency_json(p: &[LatencyPercentiles]) -> Vec<LatencyJson> {
    p.iter()
        .map(|&percentiles| LatencyJson {
            percentiles,
            histogram: None,
        })
        .collect()
}

/// Adds the histogram of each size's samples to `out`'s latency records.
pub fn add_histograms(out: &mut ProbeJson, samples: &[LatencySamples]) {
    for l in &mut out.latency {
        if let Some(s) = samples
            .iter()
            .find(|s| s.size_bytes == l.percentiles.size_bytes)
        {
            l.histogram = Some(latency::histogram(s));
        }
    }
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
    /// The half round trip's percentiles at a few small sizes, sizes
    /// increasing (empty without a latency run).
    pub latency: Vec<LatencyJson>,
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
        latency: latency_json(&r.latency),
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
        // As the `logfp` object below: a fan-out with f not identified has
        // no HAS_LOGFP bit (it says f) but its o(P) fit and verdicts stand.
        logfp: (e.flags & flags::HAS_LOGFP != 0 || !e.curve.is_empty())
            .then_some([e.o_min_ns, e.o_max_ns, e.g_f_ns]),
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
        latency: latency_json(&e.ext.latency),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{FanoutPoint, LogfpFit};

    /// A fan-out whose f was not found and whose o_max came out negative:
    /// the dump lists o_max (and f) as not identified, with the reason.
    #[test]
    fn a_fan_out_without_f_states_its_verdicts() {
        let mut e = EntryData::default();
        let fit = LogfpFit {
            f: None,
            f_paper: None,
            o_min_ns: 5500.0,
            o_max_ns: -311.0,
            g_ns: f64::NAN,
            points: (1..=3)
                .map(|p| FanoutPoint {
                    peers: p,
                    o_ns: 5500.0,
                    rtt_ns: 20_000.0 * f64::from(p),
                    recv_ns: 0.0,
                })
                .collect(),
        };
        crate::publish::attach_logfp(&mut e, &fit, &BTreeMap::new());
        assert_eq!(e.flags & flags::HAS_LOGFP, 0);
        let j = entry_probe_json(&e);
        let reason = |k: &str| {
            j.not_identified
                .iter()
                .find(|p| p.parameter == k)
                .map(|p| p.reason)
        };
        assert_eq!(
            reason("logfp.o_max_ns"),
            Some("negative"),
            "{:?}",
            j.not_identified
        );
        assert!(reason("logfp.f").is_some(), "{:?}", j.not_identified);
        assert_eq!(reason("logfp.o_min_ns"), None);
    }
}
