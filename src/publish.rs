//! From a probe's result to a segment entry, and from a segment entry back to
//! the JSON of `ngctl probe --json` (for `ngctl dump --json`).

use std::time::{SystemTime, UNIX_EPOCH};

use netgauge::{flags, EntryData, RangeData};
use serde_json::{json, Value};

use crate::model::exchange::ExchangeFit;
use crate::probe::{LogfpJson, ProbeJson, ProbeResult, RangeJson, SegmentationJson};

/// The segment holds at most this many named intervals per entry.
const MAX_CI: usize = 16;

/// Wall-clock now, ns since the Unix epoch (what the segment records).
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The segment entry for (`peer`, `transport`) from one probe.
pub fn entry_from_probe(peer: &str, transport: &str, r: &ProbeResult) -> EntryData {
    let ranges = r
        .fit
        .ranges
        .iter()
        .take(netgauge::layout::MAX_RANGES)
        .map(|x| RangeData {
            from_bytes: x.from_bytes,
            to_bytes: x.to_bytes,
            g_ns: x.g_ns,
            G_ns_per_byte: x.G_ns_per_byte,
            o_s_ns: x.o_s_ns,
            o_r_ns: x.o_r_ns,
            O_s_ns_per_byte: x.O_s_ns_per_byte,
            O_r_ns_per_byte: x.O_r_ns_per_byte,
        })
        .collect();
    // The first range's and LogfP's intervals first: what consumers use most.
    let mut ci95: Vec<(String, f64, f64)> = Vec::with_capacity(MAX_CI);
    let first = [
        "eel_ns",
        "L_ns",
        "o_s_ns",
        "o_r_ns",
        "g_ns",
        "G_ns_per_byte",
        "logfp.f",
        "logfp.o_min_ns",
        "logfp.o_max_ns",
        "logfp.g_ns",
    ];
    for k in first {
        if let Some(&(lo, hi)) = r.ci95.get(k) {
            ci95.push((k.to_string(), lo, hi));
        }
    }
    for (k, &(lo, hi)) in &r.ci95 {
        if ci95.len() >= MAX_CI {
            break;
        }
        if k.len() <= netgauge::layout::CI_NAME_MAX_BYTES && !first.contains(&k.as_str()) {
            ci95.push((k.clone(), lo, hi));
        }
    }
    let mut f = flags::VALID;
    if r.fit.L_negative {
        f |= flags::L_NEGATIVE;
    }
    if r.lost_rounds > 0 {
        f |= flags::DEGRADED;
    }
    let (lf, o_min, o_max, g_f, curve) = match &r.logfp {
        Some(l) => (
            l.f,
            l.o_min_ns,
            l.o_max_ns,
            l.g_ns,
            l.points
                .iter()
                .take(netgauge::layout::MAX_CURVE)
                .map(|p| (p.peers, p.o_ns, p.rtt_ns))
                .collect(),
        ),
        None => (None, f64::NAN, f64::NAN, f64::NAN, Vec::new()),
    };
    EntryData {
        peer: peer.to_string(),
        transport: transport.to_string(),
        ranges,
        eel_ns: r.fit.eel_ns,
        L_ns: r.fit.L_ns,
        S_bytes: r.fit.S_bytes,
        f: lf,
        o_min_ns: o_min,
        o_max_ns: o_max,
        g_f_ns: g_f,
        curve,
        ci95,
        samples: r.samples.iter().map(|s| s.prtt1_ns.len() as u64).sum(),
        probe_bytes: r.probe_bytes,
        measured_unix_ns: unix_now_ns(),
        flags: f,
        ..Default::default()
    }
}

/// The segment entry of an exchange sweep ([`crate::model::exchange`]),
/// published beside the pair entry (`peer`, `transport`) under the transport
/// name [`netgauge::select::exchange_transport`] gives (e.g. "mpi-x4"). Each
/// range's line is g + (s − 1)·G: the time of one all-ranks exchange step
/// of s bytes (the gap of that pattern). EEL is the step of the smallest
/// size; no S (a rendezvous step is a range boundary of its own); no LogfP.
/// None if the name would not fit or there are no ranges.
pub fn entry_from_exchange(peer: &str, transport: &str, x: &ExchangeFit) -> Option<EntryData> {
    let mut buf = [0u8; netgauge::layout::TRANSPORT_MAX_BYTES];
    let name = netgauge::select::exchange_transport(transport, x.ranks, &mut buf)?;
    if x.ranges.is_empty() {
        return None;
    }
    let ranges = x
        .ranges
        .iter()
        .take(netgauge::layout::MAX_RANGES)
        .map(|r| RangeData {
            from_bytes: r.from_bytes,
            to_bytes: r.to_bytes,
            g_ns: r.step_ns,
            G_ns_per_byte: r.G_ns_per_byte,
            o_s_ns: 0.0,
            o_r_ns: 0.0,
            O_s_ns_per_byte: 0.0,
            O_r_ns_per_byte: 0.0,
        })
        .collect();
    let eel = x.points.first().map_or(f64::NAN, |p| p.step_ns);
    Some(EntryData {
        peer: peer.to_string(),
        transport: name.to_string(),
        ranges,
        eel_ns: eel,
        L_ns: f64::NAN,
        S_bytes: None,
        f: None,
        o_min_ns: f64::NAN,
        o_max_ns: f64::NAN,
        g_f_ns: f64::NAN,
        curve: Vec::new(),
        ci95: Vec::new(),
        samples: x.points.len() as u64,
        probe_bytes: 0,
        measured_unix_ns: unix_now_ns(),
        flags: flags::VALID,
        ..Default::default()
    })
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
    ]
    .into_iter()
    .filter(|(b, _)| bits & b != 0)
    .map(|(_, n)| n)
    .collect()
}

/// A segment entry as a [`ProbeJson`] (fields a segment does not keep are
/// empty), for the human table.
pub fn entry_probe_json(e: &EntryData) -> ProbeJson {
    let first = e.ranges.first().cloned().unwrap_or_default();
    ProbeJson {
        eel_ns: e.eel_ns,
        L_ns: e.L_ns,
        L_negative: e.flags & flags::L_NEGATIVE != 0,
        o_s_ns: first.o_s_ns,
        o_r_ns: first.o_r_ns,
        g_ns: first.g_ns,
        G_ns_per_byte: first.G_ns_per_byte,
        S_bytes: e.S_bytes,
        ranges: e
            .ranges
            .iter()
            .map(|r| RangeJson {
                from_bytes: r.from_bytes,
                to_bytes: r.to_bytes,
                g_ns: r.g_ns,
                G_ns_per_byte: r.G_ns_per_byte,
                o_s_ns: r.o_s_ns,
                o_r_ns: r.o_r_ns,
                O_s_ns_per_byte: r.O_s_ns_per_byte,
                O_r_ns_per_byte: r.O_r_ns_per_byte,
            })
            .collect(),
        logfp: (e.flags & flags::HAS_LOGFP != 0 || !e.curve.is_empty()).then(|| LogfpJson {
            f: e.f,
            f_paper: None,
            o_min_ns: e.o_min_ns,
            o_max_ns: e.o_max_ns,
            g_ns: e.g_f_ns,
            curve: e
                .curve
                .iter()
                .map(|&(peers, o_ns, rtt_ns)| crate::model::FanoutPoint {
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
        m.insert(
            "age_s".into(),
            json!(now_unix_ns.saturating_sub(e.measured_unix_ns) as f64 / 1e9),
        );
        m.insert("flags".into(), json!(flag_names(e.flags)));
    }
    v
}
