//! The conventions every `ngctl` output follows, in one place: the JSON
//! document's envelope (docs/ngctl.schema.json), CSV, and the width of
//! the human tables.
//!
//! Every JSON document `ngctl` prints is an object that starts with
//! `schema_version`, `tool`, `tool_version`, `command`,
//! `timestamp_unix_ns`, `clock`, `transport` and `peer` (null where the
//! output is of no one transport, peer or clock, e.g. a dump of several
//! entries), then the command's own fields. The exports in a consumer's
//! format (`ngctl export --format mpich-json`) are that consumer's
//! documents and have no envelope: MPICH rejects a key it does not know.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::{Map, Value};

/// The version of docs/ngctl.schema.json the documents follow; raised
/// when a field changes meaning or goes away (new fields do not raise it).
pub const SCHEMA_VERSION: u32 = 1;

/// Columns the human tables fit without `--wide`.
pub const TABLE_COLUMNS: usize = 80;

/// How a result is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputFormat {
    /// Tables for people.
    #[default]
    Text,
    /// One JSON document with the envelope.
    Json,
    /// CSV rows.
    Csv,
}

/// The output conventions a result is printed with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Output {
    pub format: OutputFormat,
    /// Tables with every column (wider than [`TABLE_COLUMNS`]).
    pub wide: bool,
}

impl Output {
    pub fn json(&self) -> bool {
        self.format == OutputFormat::Json
    }
    pub fn csv(&self) -> bool {
        self.format == OutputFormat::Csv
    }
}

/// What a JSON document is about.
#[derive(Clone, Debug, Default)]
pub struct Meta<'a> {
    /// The subcommand (`probe`, `dump`, …).
    pub command: &'a str,
    pub transport: Option<&'a str>,
    pub peer: Option<&'a str>,
    /// The clock the values were timed with, as a segment describes it
    /// (e.g. "tsc 2100.000000 MHz", "virtual (sim)").
    pub clock: Option<&'a str>,
}

/// CLOCK_REALTIME now, ns.
pub fn now_unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `body`'s fields after the envelope of `meta`, as one object (a body
/// that is not an object goes under `result`).
pub fn document(meta: &Meta<'_>, body: Value) -> Value {
    let mut m = Map::new();
    m.insert("schema_version".into(), SCHEMA_VERSION.into());
    m.insert("tool".into(), "ngctl".into());
    m.insert("tool_version".into(), env!("CARGO_PKG_VERSION").into());
    m.insert("command".into(), meta.command.into());
    m.insert("timestamp_unix_ns".into(), now_unix_ns().into());
    let opt = |s: Option<&str>| s.map_or(Value::Null, Value::from);
    m.insert("clock".into(), opt(meta.clock));
    m.insert("transport".into(), opt(meta.transport));
    m.insert("peer".into(), opt(meta.peer));
    match body {
        Value::Object(b) => {
            for (k, v) in b {
                // The envelope's values stand; the body fills what it left null.
                if m.get(&k).is_none_or(|x| x.is_null()) {
                    m.insert(k, v);
                }
            }
        }
        other => {
            m.insert("result".into(), other);
        }
    }
    Value::Object(m)
}

/// `document` as pretty JSON with a line feed.
pub fn json_doc(meta: &Meta<'_>, body: &impl Serialize) -> Result<String, serde_json::Error> {
    let v = document(meta, serde_json::to_value(body)?);
    Ok(serde_json::to_string_pretty(&v)? + "\n")
}

/// One CSV field (RFC 4180: quoted when it holds a comma, quote or line
/// break).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A CSV document: the header, then the rows (numbers as they are, in
/// the units the header names).
pub fn csv(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = String::new();
    let line = |f: Vec<String>| f.iter().map(|x| csv_field(x)).collect::<Vec<_>>().join(",");
    let _ = writeln!(
        s,
        "{}",
        line(header.iter().map(|h| h.to_string()).collect())
    );
    for r in rows {
        let _ = writeln!(s, "{}", line(r.clone()));
    }
    s
}

/// A number for CSV: empty when not finite.
pub fn csv_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}
