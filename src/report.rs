//! Human-readable tables for `ngctl probe` and `ngctl dump`.

use std::fmt::Write as _;

use crate::probe::ProbeJson;

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

fn with_ci(p: &ProbeJson, key: &str, value: f64, fmt: impl Fn(f64) -> String) -> String {
    match p.ci95.get(key) {
        Some(&(lo, hi)) if lo.is_finite() && hi.is_finite() => {
            format!("{}  [{} … {}]", fmt(value), fmt(lo), fmt(hi))
        }
        _ => fmt(value),
    }
}

/// The per-range parameter table with intervals.
pub fn probe_table(p: &ProbeJson) -> String {
    let mut s = String::new();
    let ns = |v: f64| fmt_ns(v);
    let per_byte = |v: f64| format!("{v:.5} ns/B");
    let _ = writeln!(s, "  EEL   {}", with_ci(p, "eel_ns", p.eel_ns, ns));
    let neg = if p.L_negative {
        "   (negative: o and L overlap on this network)"
    } else {
        ""
    };
    let _ = writeln!(s, "  L     {}{neg}", with_ci(p, "L_ns", p.L_ns, ns));
    let _ = writeln!(s, "  o_s   {}", with_ci(p, "o_s_ns", p.o_s_ns, ns));
    let _ = writeln!(s, "  o_r   {}", with_ci(p, "o_r_ns", p.o_r_ns, ns));
    let _ = writeln!(s, "  g     {}", with_ci(p, "g_ns", p.g_ns, ns));
    let _ = writeln!(
        s,
        "  G     {}",
        with_ci(p, "G_ns_per_byte", p.G_ns_per_byte, per_byte)
    );
    match p.S_bytes {
        Some(b) => {
            let _ = writeln!(s, "  S     {b} B (rendezvous above)");
        }
        None => {
            let _ = writeln!(s, "  S     none found");
        }
    }
    let _ = writeln!(
        s,
        "  {:>21}  {:>12} {:>13} {:>12} {:>12} {:>12} {:>12}",
        "range (bytes)", "g", "G", "o_s", "o_r", "O_s", "O_r"
    );
    for (i, r) in p.ranges.iter().enumerate() {
        let _ = writeln!(
            s,
            "  {:>10}..{:<10} {:>12} {:>9.5}ns/B {:>12} {:>12} {:>8.5}ns/B {:>8.5}ns/B",
            r.from_bytes,
            r.to_bytes,
            fmt_ns(r.g_ns),
            r.G_ns_per_byte,
            fmt_ns(r.o_s_ns),
            fmt_ns(r.o_r_ns),
            r.O_s_ns_per_byte,
            r.O_r_ns_per_byte
        );
        for key in ["g_ns", "G_ns_per_byte"] {
            if let Some(&(lo, hi)) = p.ci95.get(&format!("ranges[{i}].{key}")) {
                let (l, h) = if key == "g_ns" {
                    (fmt_ns(lo), fmt_ns(hi))
                } else {
                    (format!("{lo:.5}"), format!("{hi:.5}"))
                };
                let _ = writeln!(s, "  {:>23}{key} 95 %: [{l} … {h}]", "");
            }
        }
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
pub fn exchange_table(x: &crate::model::exchange::ExchangeFit) -> String {
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
