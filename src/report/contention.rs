//! What `ngctl` shows of contention: the conflict probe's penalties and β
//! (`ngctl contention`), and a transport's record in the segment (penalties,
//! sharing fit, bisection) for `ngctl dump`.

use std::fmt::Write as _;

use netgauge::{Scheme, Status, TransportExt, TransportField};
use serde_json::{json, Value};

use super::{fmt_ns, json_doc, Meta};
use crate::model::contention::{ContentionFit, Est, Penalty};
use crate::probe::contention::ContentionResult;

fn est(e: &Est) -> String {
    if e.lo.is_finite() && e.hi.is_finite() {
        format!("{:.3} [{:.3}, {:.3}]", e.value, e.lo, e.hi)
    } else {
        format!("{:.3}", e.value)
    }
}

fn penalty_rows(s: &mut String, name: &str, rows: &[Penalty]) {
    for p in rows {
        // Mixed flows: the outgoing and incoming penalties on a row of
        // their own (the table stays within 80 columns).
        let split = match (&p.out, &p.inc) {
            (Some(o), Some(i)) => format!("\n  {:>12}  out {:.3}, in {:.3}", "", o.value, i.value),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "  {name:<9} {:>2}  {:<24} {:>8.3}  {:>11}  {:>4}{split}",
            p.k,
            est(&p.penalty),
            p.slowest.value,
            fmt_ns(p.gap_ns),
            p.rounds
        );
    }
}

/// The table of a conflict fit.
pub fn contention_table(f: &ContentionFit) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<9} {:>2}  {:<24} {:>8}  {:>11}  {:>4}",
        "scheme", "k", "penalty [95 %]", "slowest", "gap/message", "rounds"
    );
    penalty_rows(&mut s, "outgoing", &f.outgoing);
    penalty_rows(&mut s, "incoming", &f.incoming);
    penalty_rows(&mut s, "mixed", &f.mixed);
    let _ = writeln!(
        s,
        "  β = {} from the outgoing penalties (incoming slope {:.3})\n  model error E_abs {:.1} %",
        est(&f.beta),
        f.beta_in.value,
        f.e_abs_pct
    );
    let _ = writeln!(
        s,
        "  γ_o, γ_i: not measured (they need flows between other nodes)"
    );
    s
}

/// `ngctl contention`.
pub fn contention(
    r: &ContentionResult,
    json: bool,
    raw: bool,
) -> Result<String, serde_json::Error> {
    if json {
        let mut v = json!({
            "fit": r.fit,
            "probe_bytes": r.probe_bytes,
            "elapsed_ns": r.elapsed_ns,
            "lost_rounds": r.raw.lost_rounds,
            "peers": r.raw.peers,
        });
        if raw {
            v["raw"] = serde_json::to_value(&r.raw)?;
        }
        let meta = Meta {
            command: "contention",
            ..Meta::default()
        };
        return json_doc(&meta, &v);
    }
    let mut s = format!(
        "conflict probe over {} peers: {} B messages, {} lost rounds\n  {} of probes in {}\n",
        r.raw.peers,
        r.fit.size_bytes,
        r.raw.lost_rounds,
        super::fmt_bytes(r.probe_bytes as f64),
        fmt_ns(r.elapsed_ns)
    );
    s.push_str(&contention_table(&r.fit));
    Ok(s)
}

/// `ngctl overlap`: per size the round, the post, what the receive still
/// needs of the CPU, and the two fractions with their intervals.
pub fn overlap(
    r: &crate::probe::overlap::OverlapResult,
    json: bool,
) -> Result<String, serde_json::Error> {
    if json {
        let meta = Meta {
            command: "overlap",
            ..Meta::default()
        };
        return json_doc(&meta, r);
    }
    let mut s = format!(
        "CPU overlap (Bell et al.): {} lost rounds, {} of probes\n  {:>8}  {:>11}  {:<22}  {}\n",
        r.lost_rounds,
        super::fmt_bytes(r.probe_bytes as f64),
        "size",
        "round",
        "send side [95 %]",
        "receive side [95 %]"
    );
    for p in &r.points {
        let _ = writeln!(
            s,
            "  {:>8}  {:>11}  {:<22}  {}",
            p.size_bytes,
            fmt_ns(p.round_ns),
            est(&p.send),
            est(&p.recv)
        );
    }
    let _ = writeln!(s, "  {:>8}  {:>11}  {:>11}", "size", "post", "recv CPU");
    for p in &r.points {
        let _ = writeln!(
            s,
            "  {:>8}  {:>11}  {:>11}",
            p.size_bytes,
            fmt_ns(p.post_ns),
            fmt_ns(p.recv_cpu_ns.value)
        );
    }
    Ok(s)
}

/// `ngctl ebb`: every round's pairs and distribution, then the overall one.
pub fn ebb(r: &crate::ops::EbbResult, json: bool) -> Result<String, serde_json::Error> {
    if json {
        let meta = Meta {
            command: "ebb",
            transport: Some(r.transport.name()),
            ..Meta::default()
        };
        return json_doc(&meta, r);
    }
    let bw = |x: Option<f64>| x.map_or("-".into(), |v| format!("{}/s", super::fmt_bytes(v)));
    let dist = |d: &Option<crate::ops::Distribution>| match d {
        Some(d) => format!(
            "min {}  median {}  mean {}  max {}  ({} flows)",
            bw(Some(d.min_bytes_per_s)),
            bw(Some(d.median_bytes_per_s)),
            bw(Some(d.mean_bytes_per_s)),
            bw(Some(d.max_bytes_per_s)),
            d.samples
        ),
        None => "no flow measured".into(),
    };
    let mut s = format!(
        "effective bisection bandwidth over {} nodes ({}), {} random matchings, {} B messages, {:.1} s windows, every pair both ways at once\n",
        r.nodes.len(),
        r.transport,
        r.rounds.len(),
        r.msg_bytes,
        r.window_s
    );
    for (i, round) in r.rounds.iter().enumerate() {
        let _ = writeln!(s, "round {}: {}", i + 1, dist(&round.distribution));
        for p in &round.pairs {
            let err = p
                .error
                .as_ref()
                .map_or(String::new(), |e| format!("  error: {e}"));
            let _ = writeln!(
                s,
                "  {} -> {} {:>14}   {} -> {} {:>14}{err}",
                p.a,
                p.b,
                bw(p.a_to_b_bytes_per_s),
                p.b,
                p.a,
                bw(p.b_to_a_bytes_per_s)
            );
        }
        if let Some(idle) = &round.idle {
            let _ = writeln!(s, "  {idle} sits out");
        }
    }
    let _ = writeln!(s, "overall: {}", dist(&r.overall));
    if r.published {
        let _ = writeln!(s, "published by this node's daemon");
    }
    Ok(s)
}

/// An entry's overlap records (one per range) as `ngctl dump --json` shows them.
pub fn overlap_json(e: &netgauge::EntryData) -> Value {
    let x = |v: &netgauge::Estimate| json!({"value": finite(v.value), "lo": finite(v.lo), "hi": finite(v.hi)});
    json!({
        "peer": e.peer,
        "transport": e.transport,
        "ranges": e.ranges.iter().zip(&e.ext.overlap).map(|(r, o)| json!({
            "from_bytes": r.from_bytes,
            "to_bytes": r.to_bytes,
            "send": x(&o.send),
            "recv": x(&o.recv),
        })).collect::<Vec<_>>(),
    })
}

/// An entry's overlap records as `ngctl dump` shows them (empty when none).
pub fn overlap_text(e: &netgauge::EntryData) -> String {
    let mut s = String::new();
    if e.ext.overlap.is_empty() {
        return s;
    }
    let x = |v: &netgauge::Estimate| format!("{:.3} [{:.3}, {:.3}]", v.value, v.lo, v.hi);
    let _ = writeln!(
        s,
        "  CPU overlap (fraction of the transfer the CPU may compute):"
    );
    for (r, o) in e.ranges.iter().zip(&e.ext.overlap) {
        let _ = writeln!(
            s,
            "    {:>8}..{:<8} send {}  receive {}",
            r.from_bytes,
            r.to_bytes,
            x(&o.send),
            x(&o.recv)
        );
    }
    s
}

fn status_name(t: &TransportExt, f: TransportField) -> &'static str {
    t.status(f).name()
}

/// A transport's record as JSON (for `ngctl dump --json`).
pub fn transport_ext_json(name: &str, t: &TransportExt) -> Value {
    let e = |x: &netgauge::Estimate| json!({"value": finite(x.value), "lo": finite(x.lo), "hi": finite(x.hi)});
    let mut penalties = serde_json::Map::new();
    for s in Scheme::ALL {
        penalties.insert(
            s.name().into(),
            json!({
                "status": status_name(t, TransportField::penalty(s)),
                "k": t.penalties(s).iter().map(e).collect::<Vec<_>>(),
            }),
        );
    }
    let sharing = t.sharing().map(|[b, go, gi]| {
        json!({
            "beta": e(&b), "beta_status": status_name(t, TransportField::Beta),
            "gamma_o": e(&go), "gamma_o_status": status_name(t, TransportField::GammaO),
            "gamma_i": e(&gi), "gamma_i_status": status_name(t, TransportField::GammaI),
        })
    });
    let bisection = t.bisection().map(|b| {
        json!({
            "status": status_name(t, TransportField::Bisection),
            "min_bytes_per_s": b.min_bytes_per_s,
            "median_bytes_per_s": b.median_bytes_per_s,
            "mean_bytes_per_s": b.mean_bytes_per_s,
            "max_bytes_per_s": b.max_bytes_per_s,
            "nodes": b.nodes,
            "rounds": b.rounds,
            "msg_bytes": b.msg_bytes,
            "measured_unix_ns": b.measured_unix_ns,
        })
    });
    json!({
        "transport": name,
        "contention_unix_ns": t.contention_unix_ns,
        "penalties": penalties,
        "sharing": sharing,
        "bisection": bisection,
    })
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// A transport's record as `ngctl dump` shows it.
pub fn transport_ext_text(name: &str, t: &TransportExt, now_unix_ns: u64) -> String {
    let mut s = String::new();
    if t.present & netgauge::ext::TX_PENALTIES != 0 {
        let age = now_unix_ns.saturating_sub(t.contention_unix_ns) as f64 / 1e9;
        let _ = writeln!(s, "\n{name}: bandwidth sharing, measured {age:.1} s ago");
        for sc in Scheme::ALL {
            let ps = t.penalties(sc);
            if ps.is_empty() {
                continue;
            }
            let row: Vec<String> = ps
                .iter()
                .enumerate()
                .map(|(i, p)| format!("k={} {:.2}", i + 1, p.value))
                .collect();
            let st = t.status(TransportField::penalty(sc));
            let _ = writeln!(
                s,
                "  {:<9} {}{}",
                sc.name(),
                row.join("  "),
                if st == Status::Identified {
                    String::new()
                } else {
                    format!("  ({})", st.name())
                }
            );
        }
    }
    if let Some([b, _, _]) = t.sharing() {
        let _ = writeln!(
            s,
            "  β {:.3} [{:.3}, {:.3}] ({}); γ_o {}, γ_i {}",
            b.value,
            b.lo,
            b.hi,
            status_name(t, TransportField::Beta),
            status_name(t, TransportField::GammaO),
            status_name(t, TransportField::GammaI)
        );
    }
    if let Some(b) = t.bisection() {
        let _ = writeln!(
            s,
            "\n{name}: effective bisection bandwidth over {} nodes, {} matchings, {} B messages ({})\n  per pair: min {}/s  median {}/s  mean {}/s  max {}/s",
            b.nodes,
            b.rounds,
            b.msg_bytes,
            status_name(t, TransportField::Bisection),
            super::fmt_bytes(b.min_bytes_per_s),
            super::fmt_bytes(b.median_bytes_per_s),
            super::fmt_bytes(b.mean_bytes_per_s),
            super::fmt_bytes(b.max_bytes_per_s),
        );
    }
    s
}
