//! The cluster's part of what `ngctl` shows: the schedule and quiet lines
//! of `ngctl status`, the matrices of `ngctl matrix`, and the answers of
//! `ngctl quiet` / `ngctl resume`.

use std::fmt::Write as _;

use crate::cluster::matrix::{Cell, Matrix};
use crate::cluster::schedule::ScheduleStatus;
use crate::daemon::quiet::{QuietFile, QuietStatus};
use crate::ops::MatrixData;

/// The lines `ngctl status` adds for the cluster schedule.
pub fn schedule_lines(s: &mut String, sc: &ScheduleStatus) {
    let st = &sc.stats;
    let _ = writeln!(
        s,
        "  schedule: round {} ({}, {:.0} s), cycle {} of {:.0} s over {} members in {} groups; classes fresh {}/{}, pairs measured {} (swept {}), suspect {}",
        sc.round, sc.round_kind, sc.round_s, sc.cycle, sc.cycle_s, sc.members, sc.groups,
        sc.classes_fresh, sc.classes, sc.pairs_measured, sc.pairs_swept, sc.suspect_pairs
    );
    let _ = writeln!(
        s,
        "  sessions: driven {}, served {}; full sweeps {}, re-checks {} ({} disagreed, {} confirmed, {} B each on average), fan-outs {}, disturbed {}, failed {}, partner unreachable {}",
        st.drives, st.serves, st.full_sweeps, st.rechecks, st.disagreements,
        st.confirmed_disagreements, st.recheck_bytes / st.rechecks.max(1), st.fanouts, st.disturbed, st.failed, st.unreachable
    );
    let _ = writeln!(
        s,
        "  refused here: busy {}, quiet {}, budget {}, other {}; met as driver: busy {}, quiet {}, budget {}, not expected {}",
        st.refused_busy, st.refused_quiet, st.refused_budget, st.refused_other,
        st.partner_busy, st.partner_quiet, st.partner_budget, st.partner_not_expected
    );
    let _ = writeln!(
        s,
        "  deferred by the budget: class sweeps {}, pair sweeps {}, repairs {}, rounds skipped {}; bucket {:.0} B",
        st.class_sweeps_deferred, st.pair_sweeps_deferred, st.repairs_deferred,
        st.budget_skips, sc.budget_level_bytes
    );
}

/// The line `ngctl status` adds for the quiet state.
pub fn quiet_line(s: &mut String, q: &QuietStatus, now_unix_ns: u64) {
    if let Some(why) = &q.ignored {
        let _ = writeln!(s, "  quiet file ignored: {why}");
    }
    if q.quiet {
        let _ = writeln!(
            s,
            "  QUIET (held by {}){}",
            q.holders.join(", "),
            until(q.until_unix_ns, now_unix_ns)
        );
    }
}

fn until(t: Option<u64>, now_unix_ns: u64) -> String {
    t.map_or(" until resumed".into(), |u| {
        format!(
            " for {:.0} s more",
            u.saturating_sub(now_unix_ns) as f64 / 1e9
        )
    })
}

/// `ngctl quiet` / `ngctl resume`: who holds the node quiet now.
pub fn quiet_file(q: &QuietFile) -> String {
    let now_unix_ns = crate::publish::unix_now_ns();
    if q.holders.is_empty() {
        return "not quiet: the daemon resumes within a second\n".into();
    }
    let mut s = String::from("quiet, held by:\n");
    for h in &q.holders {
        let _ = writeln!(s, "  {}{}", h.name, until(h.until_unix_ns, now_unix_ns));
    }
    s
}

/// One value of a cell, as a table shows it.
fn value(c: &Cell, metric: usize) -> String {
    let v = match metric {
        0 => c.eel_ns / 1e3,
        1 => c.g_ns / 1e3,
        2 => c.G_ns_per_byte,
        _ => c.bandwidth_bytes_per_s.map_or(f64::NAN, |b| b / 1e6),
    };
    let mark = if c.from_class > 0 { "*" } else { "" };
    if v.is_finite() {
        format!("{v:.3}{mark}")
    } else {
        format!("-{mark}")
    }
}

const METRICS: [&str; 4] = ["EEL µs", "g µs", "G ns/B", "bandwidth MB/s"];

fn table(s: &mut String, m: &Matrix) {
    let w = m
        .rows
        .iter()
        .chain(&m.cols)
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(9);
    for (k, metric) in METRICS.iter().enumerate() {
        let _ = writeln!(
            s,
            "\n{} {} matrix, {metric} (row: from, column: to; * a class entry answers):",
            m.transport, m.over
        );
        let _ = write!(s, "{:>w$}", "");
        for c in &m.cols {
            let _ = write!(s, " {c:>w$}");
        }
        s.push('\n');
        for (i, r) in m.rows.iter().enumerate() {
            let _ = write!(s, "{r:>w$}");
            for j in 0..m.cols.len() {
                let v = m.cell(i, j).map_or(String::from("."), |c| value(c, k));
                let _ = write!(s, " {v:>w$}");
            }
            s.push('\n');
        }
    }
}

fn csv_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        String::new()
    }
}

/// `ngctl matrix`: tables, CSV (one line per filled cell) or JSON.
pub fn matrix(d: &MatrixData, format: &str) -> Result<String, serde_json::Error> {
    let mut s = String::new();
    match format {
        "json" => {
            let meta = super::Meta {
                command: "matrix",
                ..super::Meta::default()
            };
            return super::json_doc(&meta, d);
        }
        "csv" => {
            s.push_str("transport,over,from,to,eel_ns,g_ns,G_ns_per_byte,bandwidth_bytes_per_s,flags,class,pairs,from_class\n");
            for m in &d.matrices {
                for (i, r) in m.rows.iter().enumerate() {
                    for (j, c) in m.cols.iter().enumerate() {
                        let Some(x) = m.cell(i, j) else { continue };
                        let _ = writeln!(
                            s,
                            "{},{},{r},{c},{},{},{},{},{},{},{},{}",
                            m.transport,
                            m.over,
                            csv_num(x.eel_ns),
                            csv_num(x.g_ns),
                            csv_num(x.G_ns_per_byte),
                            x.bandwidth_bytes_per_s.map_or(String::new(), csv_num),
                            x.flags,
                            x.class.as_deref().unwrap_or(""),
                            x.pairs,
                            x.from_class
                        );
                    }
                }
            }
        }
        _ => {
            for m in &d.matrices {
                let cells = m.rows.len() * m.cols.len() - m.rows.len().min(m.cols.len());
                let _ = writeln!(
                    s,
                    "{} {} matrix: {} × {}, {} of {} cells filled",
                    m.transport,
                    m.over,
                    m.rows.len(),
                    m.cols.len(),
                    m.filled(),
                    cells
                );
                table(&mut s, m);
                s.push('\n');
            }
        }
    }
    for (n, why) in &d.missing {
        if format == "csv" {
            continue;
        }
        let _ = writeln!(s, "no view from {n}: {why}");
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::matrix::{group_matrix, node_matrix, EntrySummary, NodeView};

    fn summary(peer: &str, eel_ns: f64, class: Option<&str>) -> EntrySummary {
        EntrySummary {
            peer: peer.into(),
            transport: "udp".into(),
            eel_ns,
            g_ns: 2000.0,
            G_ns_per_byte: 0.5,
            flags: 1,
            measured_unix_ns: 1,
            class: class.map(str::to_string),
        }
    }

    #[test]
    fn matrices_as_table_csv_and_json() {
        let views = vec![
            NodeView {
                node: "a".into(),
                entries: vec![
                    summary("b", 10_000.0, None),
                    summary("c", 30_000.0, Some("@s1")),
                ],
            },
            NodeView {
                node: "b".into(),
                entries: vec![summary("a", 12_000.0, None)],
            },
        ];
        let m = node_matrix(&views, "udp");
        let g = group_matrix(&m, |n| if n == "c" { "s2".into() } else { "s1".into() });
        let d = MatrixData {
            matrices: vec![m, g],
            missing: vec![("c".into(), "refused".into())],
        };
        let csv = matrix(&d, "csv").unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        // Header, 3 node cells, 2 group cells (s1→s1 over two pairs, s1→s2).
        assert_eq!(lines.len(), 1 + 3 + 2, "{csv}");
        assert!(
            lines.contains(&"udp,node,a,b,10000,2000,0.5,2000000000,1,,1,0"),
            "{csv}"
        );
        assert!(
            lines.contains(&"udp,node,a,c,30000,2000,0.5,2000000000,1,@s1,1,1"),
            "{csv}"
        );
        assert!(
            lines.contains(&"udp,group,s1,s1,11000,2000,0.5,2000000000,1,,2,0"),
            "{csv}"
        );
        let table = matrix(&d, "table").unwrap();
        assert!(
            table.contains("udp node matrix: 3 × 3, 3 of 6 cells filled"),
            "{table}"
        );
        assert!(
            table.contains("30.000*"),
            "a class answer is marked: {table}"
        );
        assert!(table.contains("no view from c: refused"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&matrix(&d, "json").unwrap()).unwrap();
        assert_eq!(
            json["matrices"][0]["rows"],
            serde_json::json!(["a", "b", "c"])
        );
        assert_eq!(json["matrices"][1]["over"], "group");
    }
}
