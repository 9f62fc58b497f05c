//! The state file: the last good parameters of every (peer, transport), so a
//! restarted daemon fills the segment at once. Written to a temporary file in
//! the same directory, fsynced, then renamed over the old one: a crash leaves
//! either the old or the new file, never a torn one.

use std::io::Write;
use std::path::Path;

use netgauge::EntryData;
use serde::{Deserialize, Serialize};

const STATE_VERSION: u32 = 1;

/// The file: the entries in the segment's own schema (`EntryData`, whose
/// non-finite values JSON keeps as null).
#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    node: String,
    entries: Vec<EntryData>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("state file {path} is not valid: {reason}")]
    Invalid { path: String, reason: String },
}

/// Write every entry, atomically.
pub fn save(path: &Path, node: &str, entries: &[EntryData]) -> Result<(), StateError> {
    let io = |source| StateError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = StateFile {
        version: STATE_VERSION,
        node: node.to_string(),
        entries: entries.to_vec(),
    };
    let text = serde_json::to_vec_pretty(&file).map_err(|e| StateError::Invalid {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("state"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(&text).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(())
}

/// Read the entries back. A missing file is an empty state; a corrupt one
/// is an error (the daemon logs it and starts empty, keeping the file).
pub fn load(path: &Path) -> Result<Vec<EntryData>, StateError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StateError::Io {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let file: StateFile = serde_json::from_slice(&text).map_err(|e| StateError::Invalid {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    if file.version != STATE_VERSION {
        return Err(StateError::Invalid {
            path: path.display().to_string(),
            reason: format!(
                "version {} (this daemon writes {STATE_VERSION})",
                file.version
            ),
        });
    }
    Ok(file.entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netgauge::RangeData;

    fn entry() -> EntryData {
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

    #[test]
    fn round_trip_keeps_every_value_and_nan() {
        let dir = std::env::temp_dir().join(format!("ngstate-{}", std::process::id()));
        let path = dir.join("state.json");
        save(&path, "node01", &[entry()]).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.len(), 1);
        let (a, b) = (&back[0], entry());
        assert_eq!(a.ranges, b.ranges);
        assert_eq!(
            (a.eel_ns, a.S_bytes, a.curve.clone(), a.flags),
            (b.eel_ns, b.S_bytes, b.curve.clone(), b.flags)
        );
        assert!(a.o_min_ns.is_nan());
        // The file keeps the field names, NaN as null.
        let text = std::fs::read_to_string(&path).unwrap();
        for k in [
            "\"G_ns_per_byte\": 0.1",
            "\"o_min_ns\": null",
            "\"S_bytes\": 12288",
        ] {
            assert!(text.contains(k), "{k} in {text}");
        }
        // A non-finite value inside a range comes back too.
        let mut odd = entry();
        odd.ranges[0].O_r_ns_per_byte = f64::NAN;
        save(&path, "node01", &[odd]).unwrap();
        assert!(load(&path).unwrap()[0].ranges[0].O_r_ns_per_byte.is_nan());
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_is_empty_and_corrupt_is_an_error() {
        let dir = std::env::temp_dir().join(format!("ngstate2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(load(&dir.join("none.json")).unwrap().is_empty());
        let bad = dir.join("bad.json");
        std::fs::write(&bad, b"{\"version\": 1, \"node\": ").unwrap();
        let e = load(&bad).unwrap_err().to_string();
        assert!(e.contains("not valid"), "{e}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
