//! `ngctl history`: a peer's records as a table (80 columns; `--wide`
//! adds the LogGP set and the flags), CSV or JSON.

use std::fmt::Write as _;
use std::time::{Duration, UNIX_EPOCH};

use crate::daemon::history::Record;
use crate::model::bandwidth::bytes_per_s;
use crate::ops::HistoryView;

use super::{csv, csv_num, flag_names, fmt_bytes, fmt_ns, fmt_per_byte, json_doc, Meta, Output};

/// UTC time of a CLOCK_REALTIME ns stamp, to the second.
fn utc(unix_ns: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_nanos(unix_ns);
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .trim_end_matches('Z')
        .to_string()
}

/// The large-message bandwidth of a sustained G, in bits per second.
fn fmt_bits(g_ns_per_byte: Option<f64>) -> String {
    let bps = g_ns_per_byte.map_or(f64::NAN, |g| 8.0 * bytes_per_s(g));
    if !bps.is_finite() {
        "—".into()
    } else if bps >= 1e9 {
        format!("{:.2} Gb/s", bps / 1e9)
    } else {
        format!("{:.0} Mb/s", bps / 1e6)
    }
}

fn opt_ns(x: Option<f64>) -> String {
    fmt_ns(x.unwrap_or(f64::NAN))
}

fn deviation(r: &Record) -> String {
    r.deviation.as_ref().map_or(String::new(), |d| {
        format!("{:+.1} % {}", 100.0 * d.relative, d.quantity)
    })
}

/// `ngctl history`.
pub fn history(v: &HistoryView, how: &Output) -> Result<String, serde_json::Error> {
    if how.json() {
        let meta = Meta {
            command: "history",
            peer: Some(&v.peer),
            transport: v.transport.as_deref(),
            ..Meta::default()
        };
        return json_doc(&meta, v);
    }
    if how.csv() {
        let rows: Vec<Vec<String>> = v
            .records
            .iter()
            .map(|r| {
                let o = |x: Option<f64>| csv_num(x.unwrap_or(f64::NAN));
                let d = r.deviation.as_ref();
                vec![
                    r.peer.clone(),
                    r.transport.clone(),
                    r.at_unix_ns.to_string(),
                    r.event.name().to_string(),
                    r.measured_unix_ns.to_string(),
                    o(r.eel_ns),
                    o(r.L_ns),
                    o(r.o_s_ns),
                    o(r.o_r_ns),
                    o(r.g_ns),
                    o(r.G_ns_per_byte),
                    o(r.sustained_G_ns_per_byte),
                    csv_num(r.sustained_G_ns_per_byte.map_or(f64::NAN, bytes_per_s)),
                    r.S_bytes.map_or(String::new(), |s| s.to_string()),
                    flag_names(r.flags).join(" "),
                    d.map_or(String::new(), |d| d.quantity.clone()),
                    d.map_or(String::new(), |d| d.size_bytes.to_string()),
                    csv_num(d.map_or(f64::NAN, |d| d.relative)),
                ]
            })
            .collect();
        // The first range's parameters under the names their intervals have.
        let header: Vec<&str> = [
            "peer",
            "transport",
            "at_unix_ns",
            "event",
            "measured_unix_ns",
        ]
        .into_iter()
        .chain(crate::model::fit::FIRST_RANGE_KEYS)
        .chain([
            "sustained_G_ns_per_byte",
            "bandwidth_bytes_per_s",
            "S_bytes",
            "flags",
            "deviation_quantity",
            "deviation_size_bytes",
            "deviation_relative",
        ])
        .collect();
        return Ok(csv(&header, &rows));
    }
    let mut s = String::new();
    let mut transports: Vec<&str> = v.records.iter().map(|r| r.transport.as_str()).collect();
    transports.sort_unstable();
    transports.dedup();
    for t in transports {
        let _ = writeln!(s, "{} over {t}, measured by {} (times UTC)", v.peer, v.node);
        if how.wide {
            let _ = writeln!(
                s,
                "{:<19}  {:<16}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>12}  {:>10}  {:<13}  flags",
                "time", "event", "EEL", "bandwidth", "L", "o_s", "o_r", "g", "G", "S", "deviation"
            );
        } else {
            let _ = writeln!(
                s,
                "{:<19}  {:<16}  {:>10}  {:>10}  deviation",
                "time", "event", "EEL", "bandwidth"
            );
        }
        for r in v.records.iter().filter(|r| r.transport == t) {
            let head = format!(
                "{:<19}  {:<16}  {:>10}  {:>10}",
                utc(r.at_unix_ns),
                r.event.name(),
                opt_ns(r.eel_ns),
                fmt_bits(r.sustained_G_ns_per_byte)
            );
            if how.wide {
                let _ = writeln!(
                    s,
                    "{head}  {:>10}  {:>10}  {:>10}  {:>10}  {:>12}  {:>10}  {:<13}  {}",
                    opt_ns(r.L_ns),
                    opt_ns(r.o_s_ns),
                    opt_ns(r.o_r_ns),
                    opt_ns(r.g_ns),
                    fmt_per_byte(r.G_ns_per_byte.unwrap_or(f64::NAN)),
                    r.S_bytes.map_or("—".into(), |b| fmt_bytes(b as f64)),
                    deviation(r),
                    flag_names(r.flags).join(",")
                );
            } else {
                let _ = writeln!(s, "{}", format!("{head}  {}", deviation(r)).trim_end());
            }
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::history::{Deviation, Event};

    fn record(event: Event, at: u64, g: f64, dev: Option<f64>) -> Record {
        Record {
            peer: "node02".into(),
            transport: "udp".into(),
            at_unix_ns: at,
            event,
            measured_unix_ns: at,
            eel_ns: Some(41_234.5),
            L_ns: Some(1000.0),
            o_s_ns: Some(2800.0),
            o_r_ns: Some(800.0),
            g_ns: Some(2700.0),
            G_ns_per_byte: Some(0.1),
            sustained_G_ns_per_byte: Some(g),
            S_bytes: Some(65536),
            flags: netgauge::flags::VALID | netgauge::flags::CHANGED,
            deviation: dev.map(|x| Deviation {
                quantity: "gap".into(),
                size_bytes: 65536,
                measured_ns: 2e6,
                reference_ns: 1e6,
                tolerance_ns: 2.5e5,
                relative: x,
                checks: 4,
                disagreeing: 3,
            }),
        }
    }

    fn view() -> HistoryView {
        HistoryView {
            file: "/var/lib/netgauged/a.history.json".into(),
            node: "node01".into(),
            peer: "node02".into(),
            transport: None,
            records: vec![
                record(Event::Sweep, 1_795_000_000_000_000_000, 20.0, None),
                record(
                    Event::RecheckDisagree,
                    1_795_000_060_000_000_000,
                    20.0,
                    Some(0.98),
                ),
                record(Event::Repair, 1_795_000_090_000_000_000, 40.0, None),
            ],
            now_unix_ns: 1_795_000_100_000_000_000,
        }
    }

    #[test]
    fn the_table_fits_80_columns_and_states_the_change() {
        let t = history(&view(), &Output::default()).unwrap();
        for l in t.lines() {
            assert!(
                l.chars().count() <= 80,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        // 20 ns/B is 400 Mb/s, 40 ns/B 200 Mb/s.
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert!(rows[0].starts_with("2026-11-18 11:06:40  sweep"), "{t}");
        assert!(
            rows[0].contains("41.234 µs") && rows[0].contains("400 Mb/s"),
            "{t}"
        );
        assert!(
            rows[1].contains("recheck-disagree") && rows[1].contains("+98.0 % gap"),
            "{t}"
        );
        assert!(
            rows[2].contains("repair") && rows[2].contains("200 Mb/s"),
            "{t}"
        );
        let wide = history(
            &view(),
            &Output {
                wide: true,
                ..Output::default()
            },
        )
        .unwrap();
        assert!(
            wide.contains("changed") && wide.contains("64.00 KiB"),
            "{wide}"
        );
    }

    #[test]
    fn csv_has_a_row_per_record_with_the_bandwidth() {
        let c = history(
            &view(),
            &Output {
                format: super::super::OutputFormat::Csv,
                ..Output::default()
            },
        )
        .unwrap();
        let lines: Vec<&str> = c.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("peer,transport,at_unix_ns,event,"));
        let cols: Vec<&str> = lines[3].split(',').collect();
        assert_eq!(cols[3], "repair");
        assert_eq!(cols[11], "40");
        assert_eq!(cols[12], "25000000");
    }
}
