//! Everything `ngctl` shows, formatted in one place: the JSON of a probe
//! (the contract of `ngctl probe --json`, reused by `ngctl dump --json`),
//! the human tables, the segment dump, the daemon status, predictions, the
//! clock, and the notes operations report as they run. Functions return
//! strings; the binary prints them.

mod cluster;
mod contention;
mod history;
mod progress;

pub use cluster::{matrix, quiet_file};
pub use contention::{
    contention, contention_table, ebb, overlap, transport_ext_json, transport_ext_text,
};
pub use history::history;
pub use progress::{eprint_note, init_terminal, progress_bar, Bar};

use std::fmt::Write as _;

use netgauge::{flags, EntryData};
use serde_json::{json, Value};

use crate::clock::ClockInfo;
use crate::link::SessionEvent;
use crate::model::exchange::ExchangeFit;
use crate::ops::{DumpData, Note, ProbeOutput, StatusData};
use crate::predict::PredictJson;
use crate::probe::ProbeResult;

mod output;
pub mod plot;
mod probe_json;
mod table;
pub use output::*;
pub use probe_json::*;
pub use table::*;

/// Every entry flag: its bit, its name for humans and JSON, and its name
/// in the metrics (None: the metrics do not export it).
pub const FLAGS: [(u32, &str, Option<&str>); 13] = [
    (flags::VALID, "valid", Some("valid")),
    (flags::L_NEGATIVE, "L_negative", Some("l_negative")),
    (flags::DEGRADED, "degraded", Some("degraded")),
    (flags::STALE, "stale", Some("stale")),
    (flags::HAS_LOGFP, "logfp", Some("has_logfp")),
    (flags::HAS_S, "S", Some("has_s")),
    (flags::HAS_LOGGPS, "loggps", None),
    (flags::RESTORED, "restored", Some("restored")),
    (flags::CLASS, "class", Some("class")),
    (flags::CHANGED, "changed", Some("changed")),
    (flags::UNSTABLE, "unstable", Some("unstable")),
    (flags::UNIDENTIFIED, "unidentified", Some("unidentified")),
    (flags::SHAPED, "shaped", Some("shaped")),
];

/// Flag names, for humans and JSON.
pub fn flag_names(bits: u32) -> Vec<&'static str> {
    FLAGS
        .into_iter()
        .filter(|(b, _, _)| bits & b != 0)
        .map(|(_, n, _)| n)
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
    how: &Output,
    meta: &Meta<'_>,
    raw: Option<Value>,
    title: &str,
    histogram: bool,
) -> Result<String, serde_json::Error> {
    let mut out = probe_json(r, r.transport.as_deref());
    if histogram {
        add_histograms(&mut out, &r.latency_samples);
    }
    if how.csv() {
        let peer = meta.peer.unwrap_or("");
        let transport = meta.transport.unwrap_or("");
        return Ok(ranges_csv(&[(peer, transport, &out)]));
    }
    if how.json() {
        let mut v = serde_json::to_value(&out)?;
        if let Some(x) = exchange {
            v["exchange"] = serde_json::to_value(x)?;
        }
        if let Some(r) = raw {
            v["raw"] = r;
        }
        return json_doc(meta, &v);
    }
    let mut s = format!("{title}\n");
    s.push_str(&probe_table_in(&out, how));
    if let Some(x) = exchange {
        s.push_str(&exchange_table(x));
    }
    Ok(s)
}

/// `ngctl probe`'s output (`raw`: with the raw samples in the JSON).
pub fn probe(o: &ProbeOutput, how: &Output, raw: bool) -> Result<String, serde_json::Error> {
    let raw = raw.then(|| {
        let mut v = serde_json::to_value(o.result.raw()).unwrap_or(Value::Null);
        v["exchange"] = json!(o.exchange_raw);
        v
    });
    let title = format!(
        "probe over {} ({} sizes, {} … {} B):",
        o.kind.name(),
        o.result.samples.len(),
        o.min_size_bytes,
        o.max_size_bytes
    );
    let meta = Meta {
        command: "probe",
        transport: Some(o.kind.name()),
        peer: Some(&o.peer),
        clock: Some(&o.clock_desc),
    };
    result(
        &o.result,
        o.exchange.as_ref(),
        how,
        &meta,
        raw,
        &title,
        o.histogram,
    )
}

/// `ngctl fit`'s output for the saved probe `file` of `sizes` sizes.
pub fn refit(
    r: &ProbeResult,
    exchange: Option<&ExchangeFit>,
    file: &str,
    sizes: usize,
    how: &Output,
) -> Result<String, serde_json::Error> {
    let title = format!("re-fit of {file} ({sizes} sizes):");
    let meta = Meta {
        command: "fit",
        transport: r.transport.as_deref(),
        peer: None,
        clock: None,
    };
    result(r, exchange, how, &meta, None, &title, false)
}

/// The ranges of fits as CSV: one row per (peer, transport, range), times
/// in ns, sizes in bytes, bandwidth in GB/s.
pub fn ranges_csv(fits: &[(&str, &str, &ProbeJson)]) -> String {
    let header = [
        "peer",
        "transport",
        "from_bytes",
        "to_bytes",
        "g_ns",
        "G_ns_per_byte",
        "GB_per_s",
        "o_s_ns",
        "o_r_ns",
        "O_s_ns_per_byte",
        "O_r_ns_per_byte",
        "eel_ns",
        "L_ns",
        "S_bytes",
    ];
    let mut rows = Vec::new();
    for (peer, transport, p) in fits {
        for r in &p.ranges {
            let d = &r.range;
            rows.push(vec![
                peer.to_string(),
                transport.to_string(),
                d.from_bytes.to_string(),
                d.to_bytes.to_string(),
                csv_num(d.g_ns),
                csv_num(d.G_ns_per_byte),
                csv_num(r.GB_per_s),
                csv_num(d.o_s_ns),
                csv_num(d.o_r_ns),
                csv_num(d.O_s_ns_per_byte),
                csv_num(d.O_r_ns_per_byte),
                csv_num(p.eel_ns),
                csv_num(p.L_ns),
                p.S_bytes.map_or(String::new(), |s| s.to_string()),
            ]);
        }
    }
    csv(&header, &rows)
}

/// `ngctl dump`.
pub fn dump(d: &DumpData, how: &Output) -> Result<String, serde_json::Error> {
    let info = &d.info;
    if how.csv() {
        let fits: Vec<(EntryData, ProbeJson)> = d
            .entries
            .iter()
            .map(|e| (e.clone(), entry_probe_json(e)))
            .collect();
        let rows: Vec<(&str, &str, &ProbeJson)> = fits
            .iter()
            .map(|(e, p)| (e.peer.as_str(), e.transport.as_str(), p))
            .collect();
        return Ok(ranges_csv(&rows));
    }
    if how.json() {
        let v = json!({
            "node": info.node_name,
            "generation": format!("{:016x}", info.generation),
            "writer_pid": info.writer_pid,
            "writer_alive": d.alive,
            "clock": info.clock_desc,
            "entries": d.entries.iter().map(|e| entry_json(e, d.now_unix_ns)).collect::<Vec<_>>(),
            "overlap": d.entries.iter().filter(|e| !e.ext.overlap.is_empty()).map(contention::overlap_json).collect::<Vec<_>>(),
            "transports": d.transports.iter().map(|(n, t)| transport_ext_json(n, t)).collect::<Vec<_>>(),
        });
        let meta = Meta {
            command: "dump",
            clock: Some(&info.clock_desc),
            ..Meta::default()
        };
        return json_doc(&meta, &v);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "segment {}\n  node {}, generation {:016x}, clock {}\n  writer pid {} ({})",
        d.path,
        info.node_name,
        info.generation,
        info.clock_desc,
        info.writer_pid,
        if d.alive {
            "alive"
        } else {
            "not running: values are as last published"
        },
    );
    if d.entries.is_empty() {
        let _ = writeln!(s, "  (no entries)");
    }
    for e in &d.entries {
        let _ = writeln!(
            s,
            "\n{} over {} — measured {:.1} s ago, {} samples\n  flags {}",
            e.peer,
            e.transport,
            age_s(e, d.now_unix_ns),
            e.samples,
            flag_names(e.flags).join(",")
        );
        s.push_str(&probe_table_in(&entry_probe_json(e), how));
        s.push_str(&contention::overlap_text(e));
    }
    for (name, t) in &d.transports {
        s.push_str(&transport_ext_text(name, t, d.now_unix_ns));
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
            "stopped_cleanly": st.heartbeat_age_s.is_none(),
            "generation": format!("{:016x}", info.generation),
            "node": info.node_name,
            "writer_pid": info.writer_pid,
            "daemon": st.daemon,
        });
        let meta = Meta {
            command: "status",
            clock: Some(&info.clock_desc),
            ..Meta::default()
        };
        return json_doc(&meta, &v);
    }
    let mut s = String::new();
    let beat = match st.heartbeat_age_s {
        Some(age) => format!("heartbeat {age:.1} s ago"),
        None => "stopped cleanly".to_string(),
    };
    let _ = writeln!(
        s,
        "netgauged on {}: {} ({beat})\n  pid {}, generation {:016x}",
        info.node_name,
        if st.alive { "alive" } else { "NOT RUNNING" },
        info.writer_pid,
        info.generation,
    );
    if let Some(d) = &st.daemon {
        let _ = writeln!(
            s,
            "  budget {} B/s, used {:.0} B/s on average ({} B in {:.0} s); control rejects {}\n  now: {}",
            d.budget_bytes_per_s,
            d.spent_bytes_per_s,
            d.spent_bytes,
            d.uptime_s,
            serde_json::to_value(d.control_rejects)?,
            match (d.driving, d.responder_sessions > 0) {
                (true, true) => "driving a job and serving a session",
                (true, false) => "driving a job",
                (false, true) => "serving a session",
                (false, false) => "idle",
            }
        );
        if let Some(sc) = &d.schedule {
            cluster::schedule_lines(&mut s, sc);
        }
        if let Some(q) = &d.quiet {
            cluster::quiet_line(&mut s, q, st.now_unix_ns);
        }
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
pub fn predict(p: &PredictJson, how: &Output) -> Result<String, serde_json::Error> {
    if how.csv() {
        let rows: Vec<Vec<String>> = p
            .candidates
            .iter()
            .map(|c| {
                vec![
                    p.collective.to_string(),
                    p.ranks.to_string(),
                    p.bytes.to_string(),
                    c.algorithm.to_string(),
                    csv_num(c.predicted_ns),
                    c.segment_bytes.to_string(),
                    (c.algorithm == p.choice.algorithm).to_string(),
                ]
            })
            .collect();
        let header = [
            "collective",
            "ranks",
            "bytes",
            "algorithm",
            "predicted_ns",
            "segment_bytes",
            "choice",
        ];
        return Ok(csv(&header, &rows));
    }
    if how.json() {
        let meta = Meta {
            command: "predict",
            transport: Some(&p.transport),
            peer: Some(&p.peer),
            clock: None,
        };
        return json_doc(&meta, p);
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
    match &p.contention {
        None => {
            s.push_str("  contention: no record for this transport (priced without penalties)\n")
        }
        Some(c) => {
            for ((scheme, vals), (_, status)) in c.penalties.iter().zip(&c.status) {
                let v: Vec<String> = vals.iter().map(|x| format!("{x:.3}")).collect();
                let _ = writeln!(
                    s,
                    "  penalties {scheme:<9} k=1..{}: [{}] ({status})",
                    vals.len(),
                    v.join(", ")
                );
            }
            if p.penalties_used.is_empty() {
                s.push_str("  penalties used: none\n");
            } else {
                let u: Vec<String> = p
                    .penalties_used
                    .iter()
                    .map(|u| format!("{} k={}: {:.3}", u.scheme, u.k, u.penalty))
                    .collect();
                let _ = writeln!(s, "  penalties used: {}", u.join(", "));
            }
        }
    }
    let _ = writeln!(
        s,
        "  {:<24} {:>14} {:>20}",
        "algorithm", "predicted", "without penalties"
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
            "  {:<24} {:>14} {:>20}{seg}{mark}",
            c.algorithm,
            fmt_ns(c.predicted_ns),
            fmt_ns(c.without_contention_ns)
        );
    }
    if p.choice_without_contention != p.choice.algorithm {
        let _ = writeln!(
            s,
            "  without the penalties the choice would be {}",
            p.choice_without_contention
        );
    }
    Ok(s)
}

/// `ngctl clock`.
pub fn clock(info: &ClockInfo, json: bool) -> Result<String, serde_json::Error> {
    if json {
        let meta = Meta {
            command: "clock",
            clock: Some(info.source),
            ..Meta::default()
        };
        json_doc(&meta, info)
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
