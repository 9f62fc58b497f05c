//! The human parameter tables of a probe or a segment entry.

use std::fmt::Write as _;

use netgauge::ext::{Reason, Status};

use super::{fmt_bytes, fmt_ns, LatencyJson, ProbeJson};
use crate::model::bandwidth;
use crate::model::latency::Bin;

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
    probe_table_in(p, &super::Output::default())
}

/// The 95 % intervals of range `i`'s g and G, one row each (none without).
fn range_intervals(
    p: &ProbeJson,
    i: usize,
    ns: &dyn Fn(f64) -> String,
    pb: &dyn Fn(f64) -> String,
) -> String {
    let ci = |k: &str, f: &dyn Fn(f64) -> String| {
        ci_strings(p, &format!("ranges[{i}].{k}"), f)
            .map_or(String::new(), |(lo, hi)| format!("[{lo} … {hi}]"))
    };
    let (cg, cb) = (ci("g_ns", ns), ci("G_ns_per_byte", pb));
    if cg.is_empty() && cb.is_empty() {
        return String::new();
    }
    format!("  {:>21}  g {cg}\n  {:>21}  G {cb}\n", "95 %:", "")
}

/// A JSON key of a parameter as the tables name it: `ranges[1].O_s_ns_per_byte`
/// is "range 2 O_s", `logfp.o_max_ns` "LogfP o_max", `eel_ns` "EEL".
pub fn param_name(key: &str) -> String {
    let short = |k: &str| -> String {
        match k {
            "eel_ns" => "EEL".into(),
            "L_ns" => "L".into(),
            "S_bytes" => "S".into(),
            _ => k
                .trim_end_matches("_ns_per_byte")
                .trim_end_matches("_per_byte")
                .trim_end_matches("_ns")
                .trim_end_matches("_bytes")
                .to_string(),
        }
    };
    if let Some(rest) = key.strip_prefix("ranges[") {
        if let Some((i, k)) = rest.split_once("].") {
            let n = i
                .parse::<usize>()
                .map_or(i.to_string(), |i| (i + 1).to_string());
            return format!("range {n} {}", short(k));
        }
    }
    if let Some(k) = key.strip_prefix("logfp.") {
        return format!("LogfP {}", short(k));
    }
    match key.split_once('.') {
        Some((a, b)) => format!("{} {}", a.replace('_', " "), short(b)),
        None => short(key),
    }
}

/// The tables of a probe or an entry; `how.wide`: the ranges in one table
/// with every column (wider than 80 columns).
pub fn probe_table_in(p: &ProbeJson, how: &super::Output) -> String {
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
    if how.wide {
        let _ = writeln!(
            s,
            "  {:<21} {:>12} {:>13} {:>11} {:>11} {:>13} {:>13}  bandwidth 1/G",
            "range (bytes)", "g", "G", "o_s", "o_r", "O_s", "O_r"
        );
        for (i, r) in p.ranges.iter().enumerate() {
            let r = &r.range;
            let _ = writeln!(
                s,
                "  {:>9} … {:<9} {:>12} {:>13} {:>11} {:>11} {:>13} {:>13}  {}",
                r.from_bytes,
                r.to_bytes,
                cell(p, i, "g_ns", fmt_ns(r.g_ns)),
                cell(p, i, "G_ns_per_byte", pb(r.G_ns_per_byte)),
                cell(p, i, "o_s_ns", fmt_ns(r.o_s_ns)),
                cell(p, i, "o_r_ns", fmt_ns(r.o_r_ns)),
                cell(p, i, "O_s_ns_per_byte", pb(r.O_s_ns_per_byte)),
                cell(p, i, "O_r_ns_per_byte", pb(r.O_r_ns_per_byte)),
                fmt_rate(r.G_ns_per_byte)
            );
            s.push_str(&range_intervals(p, i, &ns, &pb));
        }
    }
    let narrow = if how.wide { 0 } else { p.ranges.len() };
    if !how.wide {
        let _ = writeln!(
            s,
            "  {:<21} {:>12} {:>13}  bandwidth 1/G",
            "range (bytes)", "g", "G"
        );
    }
    for (i, r) in p.ranges.iter().enumerate().take(narrow) {
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
        s.push_str(&range_intervals(p, i, &ns, &pb));
    }
    // Overhead table (per-byte slopes in ns/B).
    if !how.wide {
        let _ = writeln!(
            s,
            "  {:<21} {:>11} {:>11} {:>11} {:>11}",
            "range (bytes)", "o_s", "o_r", "O_s ns/B", "O_r ns/B"
        );
    }
    for (i, r) in p.ranges.iter().enumerate().take(narrow) {
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
            "  LogfP f = {f} (RTT(P)/P minimum: {fp})\n    o_min {}, o_max {}, g {}",
            fmt_ns(l.o_min_ns),
            fmt_ns(l.o_max_ns),
            fmt_ns(l.g_ns)
        );
    }
    s.push_str(&latency_table(&p.latency));
    if !p.not_identified.is_empty() {
        let _ = writeln!(s, "  not identified (values in parentheses above):");
        for x in &p.not_identified {
            let _ = writeln!(
                s,
                "    {}: {}",
                param_name(&x.parameter),
                x.reason.replace('_', " ")
            );
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
    if p.probe_bytes == 0 && p.probe_messages == 0 {
        // A re-fit of saved samples, or an entry that does not say.
        let _ = writeln!(s, "  probe cost: not recorded");
        return s;
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
        "  probe cost: {} payload in {} messages over {} sizes\n    {}, {} lost rounds",
        fmt_bytes(p.probe_bytes as f64),
        p.probe_messages,
        p.sizes,
        fmt_ns(p.elapsed_ns),
        p.lost_rounds
    );
    s
}

/// The half round trip's percentiles, one row per size, and each size's
/// histogram when the records carry one. Within 75 columns.
pub fn latency_table(l: &[LatencyJson]) -> String {
    let mut s = String::new();
    if l.is_empty() {
        return s;
    }
    let counts: Vec<u64> = l.iter().map(|x| x.percentiles.samples).collect();
    let (lo, hi) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    let n = if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}–{hi}")
    };
    let _ = writeln!(
        s,
        "  half round trip PRTT(1,0,s)/2, nearest rank of {n} samples per size"
    );
    if lo < 1000 {
        let _ = writeln!(s, "    (below 1000 samples p99.9 is the maximum)");
    }
    let _ = writeln!(
        s,
        "  {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "size", "min", "p50", "p90", "p99", "p99.9", "max"
    );
    for x in l {
        let p = &x.percentiles;
        let _ = writeln!(
            s,
            "  {:>7} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            fmt_bytes(p.size_bytes as f64),
            fmt_ns(p.min_ns),
            fmt_ns(p.p50_ns),
            fmt_ns(p.p90_ns),
            fmt_ns(p.p99_ns),
            fmt_ns(p.p999_ns),
            fmt_ns(p.max_ns)
        );
    }
    for x in l {
        if let Some(h) = &x.histogram {
            s.push_str(&histogram_text(x.percentiles.size_bytes, h));
        }
    }
    s
}

/// Widest bar of a histogram, in characters.
const BAR_WIDTH: u64 = 40;

/// One size's histogram: a row per bin, its bounds, count and a bar
/// scaled to the fullest bin.
fn histogram_text(size_bytes: u64, bins: &[Bin]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  histogram of the half round trip at {}:",
        fmt_bytes(size_bytes as f64)
    );
    let top = bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    for b in bins {
        // At least one mark for a bin that holds a sample.
        let w = (b.count * BAR_WIDTH).div_ceil(top);
        let _ = writeln!(
            s,
            "  {:>10} … {:<10} {:>7} {}",
            fmt_ns(b.lo_ns),
            fmt_ns(b.hi_ns),
            b.count,
            "#".repeat(w as usize)
        );
    }
    s
}

/// The large-message bandwidth on one line (the daemon's log): the
/// sustained rate with its interval, or why it is not identified, and a
/// recognised burst regime.
pub fn bandwidth_line(b: &bandwidth::BandwidthFit) -> String {
    let g = b.sustained_G_ns_per_byte;
    let mut s = match b.status {
        Status::NotIdentified(r) => format!(
            "not identified ({}): {}",
            Status::NotIdentified(r).name().replace('_', " "),
            fmt_rate(g)
        ),
        _ if b.ci95.0.is_finite() && b.ci95.1.is_finite() => format!(
            "{} (G {} [{} … {}])",
            fmt_rate(g),
            fmt_per_byte(g),
            fmt_per_byte(b.ci95.0),
            fmt_per_byte(b.ci95.1)
        ),
        _ => format!("{} (G {})", fmt_rate(g), fmt_per_byte(g)),
    };
    if let Some(x) = &b.burst {
        let what = match x.kind {
            bandwidth::BurstKind::Credit => "credit window",
            bandwidth::BurstKind::TokenBucket => "token bucket",
        };
        let _ = write!(
            s,
            ", {what}: bursts up to {} at {}",
            fmt_bytes(x.bytes as f64),
            fmt_rate(x.G_ns_per_byte)
        );
    }
    s
}
