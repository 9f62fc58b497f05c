//! Test fixtures shared by the daemon's modules.

use std::path::PathBuf;

use netgauge::files::{Dir, DirPolicy};
use netgauge::{EntryData, RangeData};

/// A published UDP entry toward node02, as a sweep leaves it.
pub(crate) fn entry() -> EntryData {
    EntryData {
        peer: "node02".into(),
        transport: "udp".into(),
        ranges: vec![RangeData {
            from_bytes: 1,
            to_bytes: 65536,
            g_ns: 2700.0,
            G_ns_per_byte: 0.1,
            o_s_ns: 2800.0,
            o_r_ns: 800.0,
            O_s_ns_per_byte: 0.09,
            O_r_ns_per_byte: 0.04,
        }],
        eel_ns: 3900.0,
        L_ns: 300.0,
        S_bytes: Some(12288),
        f: None,
        o_min_ns: f64::NAN,
        o_max_ns: f64::NAN,
        g_f_ns: f64::NAN,
        curve: vec![(2, 150.0, 5000.0)],
        ci95: vec![("eel_ns".into(), 3850.0, 3950.0)],
        samples: 300,
        probe_bytes: 1 << 20,
        measured_unix_ns: 1_700_000_000_000_000_000,
        flags: netgauge::flags::VALID,
        ext: Default::default(),
    }
}

/// A fresh private directory `<prefix>-<tag>-<pid>` under the temporary
/// directory, and its path.
pub(crate) fn scratch(prefix: &str, tag: &str) -> (PathBuf, Dir) {
    let p = std::env::temp_dir().join(format!("{prefix}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let d = Dir::open(&p, DirPolicy::Private, true).unwrap();
    (p, d)
}
