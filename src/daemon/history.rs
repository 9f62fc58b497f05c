//! The history file: what the daemon published and found for every
//! (peer, transport) over time — a record per published full sweep, per
//! re-check (agreed or disagreed, with its largest deviation), per entry
//! gone stale, per entry restored at start. `ngctl history` reads it.
//!
//! Bounded three ways (configuration): records per pair
//! (`history_max_records`), their age (`history_max_age_s`) and the file's
//! size, all pairs together (`history_max_bytes`, the oldest records of
//! the node leave first). The publisher adds a record per event and
//! rewrites the file once per event, as the state file is written (in the
//! daemon's state directory, under an unpredictable temporary name, then
//! renamed over the old one); nothing of it runs in a probe loop. A file
//! that cannot be read back is reported and replaced by a new history.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};

use netgauge::files::Dir;
use netgauge::EntryData;
use serde::{Deserialize, Serialize};

use super::json_file::{self, JsonFile};

use crate::cluster::recheck::{Check, Quantity, Verdict};

const HISTORY_VERSION: u32 = 1;
/// Largest history file read back (the configured bound is at most 1 GiB).
pub const MAX_HISTORY_FILE_BYTES: u64 = (1 << 30) + (1 << 20);

/// What a record is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Event {
    /// A full sweep published (the first, a scheduled or a class sweep).
    Sweep,
    /// A re-check agreed with the published entry.
    RecheckAgree,
    /// A re-check disagreed with the published entry beyond its tolerance.
    RecheckDisagree,
    /// The sweep after a confirmed disagreement: the entry re-measured,
    /// flagged CHANGED.
    Repair,
    /// The peer stopped answering: the entry is stale.
    Stale,
    /// Restored from the state file at the daemon's start.
    Restored,
}

impl Event {
    pub fn name(self) -> &'static str {
        match self {
            Event::Sweep => "sweep",
            Event::RecheckAgree => "recheck-agree",
            Event::RecheckDisagree => "recheck-disagree",
            Event::Repair => "repair",
            Event::Stale => "stale",
            Event::Restored => "restored",
        }
    }
}

/// A re-check's largest deviation from the entry: the comparison that
/// came closest to (or went furthest past) its tolerance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deviation {
    /// "eel" (half round trip at 1 B against EEL) or "gap" (g + (s−1)·G).
    pub quantity: String,
    pub size_bytes: u64,
    pub measured_ns: f64,
    pub reference_ns: f64,
    /// The largest difference that agrees.
    pub tolerance_ns: f64,
    /// (measured − reference) / reference.
    pub relative: f64,
    /// How many comparisons the re-check made and how many disagreed.
    pub checks: u32,
    pub disagreeing: u32,
}

impl Deviation {
    /// The largest deviation of `v` (None: it compared nothing).
    pub fn of(v: &Verdict) -> Option<Deviation> {
        let ratio = |c: &Check| (c.measured_ns - c.reference_ns).abs() / c.tolerance_ns.max(1e-9);
        let worst = v
            .checks
            .iter()
            .filter(|c| c.measured_ns.is_finite() && c.reference_ns.is_finite())
            .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))?;
        Some(Deviation {
            quantity: match worst.quantity {
                Quantity::Eel => "eel",
                Quantity::Gap => "gap",
            }
            .into(),
            size_bytes: worst.size_bytes,
            measured_ns: worst.measured_ns,
            reference_ns: worst.reference_ns,
            tolerance_ns: worst.tolerance_ns,
            relative: (worst.measured_ns - worst.reference_ns) / worst.reference_ns,
            checks: v.checks.len() as u32,
            disagreeing: v.checks.iter().filter(|c| !c.agrees).count() as u32,
        })
    }
}

/// One record: the entry's values when the event happened (for a re-check,
/// the values it was compared with), a missing or not finite value as
/// null.
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub peer: String,
    pub transport: String,
    /// When the event happened, CLOCK_REALTIME ns.
    pub at_unix_ns: u64,
    pub event: Event,
    /// When the values were measured.
    pub measured_unix_ns: u64,
    pub eel_ns: Option<f64>,
    pub L_ns: Option<f64>,
    /// First range.
    pub o_s_ns: Option<f64>,
    pub o_r_ns: Option<f64>,
    pub g_ns: Option<f64>,
    pub G_ns_per_byte: Option<f64>,
    /// The sustained large-message G (1/bandwidth).
    pub sustained_G_ns_per_byte: Option<f64>,
    pub S_bytes: Option<u64>,
    /// The entry's flags then (netgauge::flags).
    pub flags: u32,
    /// A re-check's largest deviation.
    pub deviation: Option<Deviation>,
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

impl Record {
    /// `event` of entry `e` at `at_unix_ns`.
    pub fn of(e: &EntryData, event: Event, at_unix_ns: u64, deviation: Option<Deviation>) -> Self {
        let r0 = e.ranges.first();
        Record {
            peer: e.peer.clone(),
            transport: e.transport.clone(),
            at_unix_ns,
            event,
            measured_unix_ns: e.measured_unix_ns,
            eel_ns: finite(e.eel_ns),
            L_ns: finite(e.L_ns),
            o_s_ns: r0.and_then(|r| finite(r.o_s_ns)),
            o_r_ns: r0.and_then(|r| finite(r.o_r_ns)),
            g_ns: r0.and_then(|r| finite(r.g_ns)),
            G_ns_per_byte: r0.and_then(|r| finite(r.G_ns_per_byte)),
            sustained_G_ns_per_byte: e
                .ext
                .bandwidth
                .as_ref()
                .and_then(|b| finite(b.sustained_G_ns_per_byte.value)),
            S_bytes: e.S_bytes,
            flags: e.flags,
            deviation,
        }
    }

    /// Bytes the record takes in the file (its compact JSON and a
    /// separator).
    fn bytes(&self) -> u64 {
        serde_json::to_vec(self).map_or(512, |v| v.len() as u64 + 1)
    }
}

/// The bounds of a history.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub max_records: usize,
    pub max_age_s: f64,
    pub max_bytes: u64,
}

impl Limits {
    pub fn of(cfg: &super::config::Config) -> Limits {
        Limits {
            max_records: cfg.history_max_records,
            max_age_s: cfg.history_max_age_s,
            max_bytes: cfg.history_max_bytes,
        }
    }
}

/// The file as written.
#[derive(Serialize, Deserialize)]
struct HistoryFile {
    version: u32,
    node: String,
    /// Every record, oldest first.
    records: Vec<Record>,
}

/// What `ngctl history` reads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HistoryData {
    pub node: String,
    pub records: Vec<Record>,
}

/// Why the history file could not be read or written.
pub type HistoryError = super::json_file::FileError;

fn history_file<'a>(dir: &'a Dir, name: &'a OsStr) -> JsonFile<'a> {
    JsonFile::new("history file", dir, name)
}

/// The history the publisher keeps: per (peer, transport) its records,
/// oldest first, and their size in the file.
pub struct History {
    limits: Limits,
    pairs: BTreeMap<(String, String), VecDeque<(Record, u64)>>,
    bytes: u64,
    /// Records pushed since the history was made (the publisher writes
    /// the file when it moved).
    pushed: u64,
}

impl History {
    pub fn new(limits: Limits) -> History {
        History {
            limits,
            pairs: BTreeMap::new(),
            bytes: 0,
            pushed: 0,
        }
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.pairs.values().map(VecDeque::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records pushed so far.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Bytes the records take in the file.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Add `r`, then drop what the limits no longer allow (as of
    /// `now_unix_ns`).
    pub fn push(&mut self, r: Record, now_unix_ns: u64) {
        let b = r.bytes();
        let q = self
            .pairs
            .entry((r.peer.clone(), r.transport.clone()))
            .or_default();
        q.push_back((r, b));
        self.bytes += b;
        self.pushed += 1;
        while q.len() > self.limits.max_records {
            if let Some((_, b)) = q.pop_front() {
                self.bytes -= b;
            }
        }
        self.trim(now_unix_ns);
    }

    /// Drop records older than the age limit, then the node's oldest
    /// while the file would be larger than its limit.
    pub fn trim(&mut self, now_unix_ns: u64) {
        let max_age_ns = (self.limits.max_age_s * 1e9) as u64;
        let oldest_kept = now_unix_ns.saturating_sub(max_age_ns);
        for q in self.pairs.values_mut() {
            while q.front().is_some_and(|(r, _)| r.at_unix_ns < oldest_kept) {
                if let Some((_, b)) = q.pop_front() {
                    self.bytes -= b;
                }
            }
        }
        while self.bytes > self.limits.max_bytes {
            let Some(q) = self
                .pairs
                .values_mut()
                .filter(|q| !q.is_empty())
                .min_by_key(|q| q.front().map_or(u64::MAX, |(r, _)| r.at_unix_ns))
            else {
                break;
            };
            if let Some((_, b)) = q.pop_front() {
                self.bytes -= b;
            }
        }
        self.pairs.retain(|_, q| !q.is_empty());
    }

    /// Every record, oldest first.
    pub fn records(&self) -> Vec<Record> {
        let mut all: Vec<Record> = self
            .pairs
            .values()
            .flat_map(|q| q.iter().map(|(r, _)| r.clone()))
            .collect();
        all.sort_by_key(|r| r.at_unix_ns);
        all
    }

    /// Write every record, atomically, as file `name` of `dir` (readable
    /// by every user, as the status file: `ngctl history` reads it).
    pub fn save(&self, dir: &Dir, name: &OsStr, node: &str) -> Result<(), HistoryError> {
        let file = HistoryFile {
            version: HISTORY_VERSION,
            node: node.to_string(),
            records: self.records(),
        };
        history_file(dir, name).save(&file, false, 0o644)
    }

    /// The history in file `name` of `dir`, under `limits` as of
    /// `now_unix_ns` (a missing file: an empty history). A file that is
    /// not a history of this version, or not the daemon's own, is an
    /// error; the daemon reports it and starts a new one.
    pub fn load(
        dir: &Dir,
        name: &OsStr,
        limits: Limits,
        now_unix_ns: u64,
    ) -> Result<History, HistoryError> {
        let f = history_file(dir, name);
        let mut h = History::new(limits);
        let Some(text) = f.read(MAX_HISTORY_FILE_BYTES)? else {
            return Ok(h);
        };
        let file = parse(&text).map_err(|reason| f.invalid(reason))?;
        for r in file.records {
            h.push(r, now_unix_ns);
        }
        Ok(h)
    }
}

fn parse(text: &[u8]) -> Result<HistoryFile, String> {
    json_file::parse(text, HISTORY_VERSION, |v| {
        format!("version {v} (this daemon writes {HISTORY_VERSION})")
    })
}

/// The history file beside the state file `state_name`: `<stem>.history.json`.
pub fn history_name(state_name: &OsStr) -> OsString {
    let s = state_name.to_string_lossy();
    let stem = s.strip_suffix(".json").unwrap_or(&s);
    OsString::from(format!("{stem}.history.json"))
}

/// Parse a history file's bytes (what `ngctl history` reads).
pub fn read_bytes(text: &[u8]) -> Result<HistoryData, String> {
    let f = parse(text)?;
    Ok(HistoryData {
        node: f.node,
        records: f.records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_800_000_000_000_000_000;
    const S: u64 = 1_000_000_000;

    fn entry(peer: &str, eel: f64) -> EntryData {
        let mut e = crate::daemon::fixtures::entry();
        e.peer = peer.into();
        e.eel_ns = eel;
        e.L_ns = f64::NAN;
        e.curve = vec![];
        e.ci95 = vec![];
        e.measured_unix_ns = T0;
        e.ext.bandwidth = Some(netgauge::Bandwidth::sustained(
            netgauge::Estimate {
                value: 20.0,
                lo: 19.0,
                hi: 21.0,
            },
            Some(0),
        ));
        e
    }

    fn limits(max_records: usize, max_age_s: f64, max_bytes: u64) -> Limits {
        Limits {
            max_records,
            max_age_s,
            max_bytes,
        }
    }

    fn scratch(tag: &str) -> (std::path::PathBuf, Dir) {
        crate::daemon::fixtures::scratch("nghist", tag)
    }

    #[test]
    fn records_per_pair_are_bounded_oldest_first() {
        let mut h = History::new(limits(5, 1e9, 1 << 30));
        for i in 0..12 {
            h.push(
                Record::of(&entry("a", i as f64), Event::Sweep, T0 + i * S, None),
                T0 + i * S,
            );
            h.push(
                Record::of(&entry("b", 1.0), Event::Sweep, T0 + i * S, None),
                T0 + i * S,
            );
        }
        assert_eq!(h.len(), 10);
        let a: Vec<f64> = h
            .records()
            .iter()
            .filter(|r| r.peer == "a")
            .map(|r| r.eel_ns.unwrap())
            .collect();
        assert_eq!(a, vec![7.0, 8.0, 9.0, 10.0, 11.0]);
    }

    #[test]
    fn records_older_than_the_age_limit_leave() {
        let mut h = History::new(limits(100, 60.0, 1 << 30));
        for i in 0..10 {
            h.push(
                Record::of(&entry("a", i as f64), Event::Sweep, T0 + i * 20 * S, None),
                T0 + i * 20 * S,
            );
        }
        // Now T0 + 180 s: records at 120, 140, 160, 180 s are within 60 s.
        let kept: Vec<u64> = h
            .records()
            .iter()
            .map(|r| (r.at_unix_ns - T0) / S)
            .collect();
        assert_eq!(kept, vec![120, 140, 160, 180]);
        // Loading later drops what aged meanwhile.
        h.trim(T0 + 250 * S);
        assert!(h.is_empty());
    }

    #[test]
    fn the_file_size_bound_drops_the_nodes_oldest_records() {
        let one = Record::of(&entry("p0000", 1.0), Event::Sweep, T0, None).bytes();
        // Room for 40 records, 4096 peers × 2 transports pushing 3 each.
        let max = 40 * one + one / 2;
        let mut h = History::new(limits(1000, 1e9, max));
        let mut t = T0;
        for round in 0..3 {
            for p in 0..4096 {
                for tr in ["udp", "raw"] {
                    let mut e = entry(&format!("p{p:04}"), round as f64);
                    e.transport = tr.into();
                    t += 1;
                    h.push(Record::of(&e, Event::Sweep, t, None), t);
                }
            }
        }
        assert!(h.bytes() <= max, "{} > {max}", h.bytes());
        assert_eq!(h.len(), 40);
        // The newest 40 are what is left.
        let rs = h.records();
        assert_eq!(rs.first().unwrap().at_unix_ns, t - 39);
        assert_eq!(rs.last().unwrap().at_unix_ns, t);
        // What the file takes agrees with the count kept.
        let (dir, d) = scratch("bytes");
        h.save(&d, OsStr::new("h.json"), "n").unwrap();
        let len = std::fs::metadata(dir.join("h.json")).unwrap().len();
        assert!(len <= max + 100, "{len} > {max}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let (dir, d) = scratch("rt");
        let name = OsStr::new("n.history.json");
        let l = limits(10, 1e6, 1 << 20);
        let mut h = History::new(l);
        let dev = Deviation {
            quantity: "gap".into(),
            size_bytes: 65536,
            measured_ns: 2600e3,
            reference_ns: 1300e3,
            tolerance_ns: 330e3,
            relative: 1.0,
            checks: 4,
            disagreeing: 2,
        };
        h.push(Record::of(&entry("a", 3900.0), Event::Sweep, T0, None), T0);
        h.push(
            Record::of(
                &entry("a", 3900.0),
                Event::RecheckDisagree,
                T0 + S,
                Some(dev.clone()),
            ),
            T0 + S,
        );
        h.save(&d, name, "node01").unwrap();
        let back = History::load(&d, name, l, T0 + 2 * S).unwrap();
        assert_eq!(back.records(), h.records());
        let r = &back.records()[1];
        assert_eq!(r.event, Event::RecheckDisagree);
        assert_eq!(r.deviation.as_ref(), Some(&dev));
        assert_eq!(r.L_ns, None);
        assert_eq!(r.sustained_G_ns_per_byte, Some(20.0));
        let text = std::fs::read(dir.join(name)).unwrap();
        let data = read_bytes(&text).unwrap();
        assert_eq!(data.node, "node01");
        assert!(String::from_utf8_lossy(&text).contains("\"event\":\"recheck-disagree\""));
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            std::fs::metadata(dir.join(name)).unwrap().mode() & 0o777,
            0o644
        );
        // Missing: empty.
        assert!(History::load(&d, OsStr::new("none"), l, T0)
            .unwrap()
            .is_empty());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_a_clear_error() {
        let (dir, d) = scratch("bad");
        let l = limits(10, 1e6, 1 << 20);
        for (name, text, says) in [
            (
                "torn.json",
                &b"{\"version\": 1, \"node\": \"a\", \"rec"[..],
                "torn.json is not valid",
            ),
            (
                "v9.json",
                b"{\"version\": 9, \"node\": \"a\", \"records\": []}",
                "version 9",
            ),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
            let e = History::load(&d, OsStr::new(name), l, T0)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(says), "{name}: {e}");
        }
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("link.json")).unwrap();
        assert!(History::load(&d, OsStr::new("link.json"), l, T0).is_err());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn the_deviation_is_the_comparison_furthest_from_its_tolerance() {
        let c = |q, s, m: f64, r: f64, t: f64| Check {
            size_bytes: s,
            quantity: q,
            measured_ns: m,
            reference_ns: r,
            tolerance_ns: t,
            agrees: (m - r).abs() <= t,
        };
        let v = Verdict {
            agrees: false,
            checks: vec![
                c(Quantity::Eel, 1, 4000.0, 3900.0, 975.0),
                c(Quantity::Gap, 65536, 2_600_000.0, 1_300_000.0, 325_000.0),
                c(Quantity::Gap, 1024, 30_000.0, 25_000.0, 6250.0),
            ],
        };
        let d = Deviation::of(&v).unwrap();
        assert_eq!((d.quantity.as_str(), d.size_bytes), ("gap", 65536));
        assert!((d.relative - 1.0).abs() < 1e-12);
        assert_eq!((d.checks, d.disagreeing), (3, 1));
        assert!(Deviation::of(&Verdict::default()).is_none());
    }

    #[test]
    fn the_history_file_sits_beside_the_state_file() {
        assert_eq!(
            history_name(OsStr::new("node01.json")),
            OsString::from("node01.history.json")
        );
        assert_eq!(
            history_name(OsStr::new("state")),
            OsString::from("state.history.json")
        );
    }
}
