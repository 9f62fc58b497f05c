//! `ngctl history`: the records the daemon keeps of one peer (its history
//! file, which the status file beside the segment names), filtered by
//! transport and age.

use std::path::{Path, PathBuf};
use std::time::Duration;

use netgauge::files::{self, Owners};
use serde::Serialize;

use super::OpsError;
use crate::daemon::history::{read_bytes, Record, MAX_HISTORY_FILE_BYTES};

/// What `ngctl history` asks.
#[derive(Clone, Debug)]
pub struct HistoryArgs {
    /// The segment whose status file names the history file.
    pub shm: String,
    /// The history file itself (instead of the status file's).
    pub file: Option<PathBuf>,
    pub peer: String,
    pub transport: Option<String>,
    /// Only records of this last while.
    pub since: Option<Duration>,
}

/// The records of one peer, oldest first.
#[derive(Clone, Debug, Serialize)]
pub struct HistoryView {
    pub file: String,
    pub node: String,
    pub peer: String,
    pub transport: Option<String>,
    pub records: Vec<Record>,
    #[serde(skip)]
    pub now_unix_ns: u64,
}

/// The history file named by the status file of `shm`.
fn history_file(shm: &str) -> Result<PathBuf, OpsError> {
    let st = crate::daemon::status::read(Path::new(shm)).ok_or_else(|| OpsError::NoSegment {
        path: crate::daemon::status_path(Path::new(shm))
            .display()
            .to_string(),
    })?;
    st.history_file.ok_or_else(|| {
        OpsError::Usage(format!(
            "the status file of {shm} names no history file (a netgauged without one); \
             --file names it"
        ))
    })
}

/// `ngctl history`.
pub fn history(a: &HistoryArgs) -> Result<HistoryView, OpsError> {
    let path = match &a.file {
        Some(f) => f.clone(),
        None => history_file(&a.shm)?,
    };
    let shown = path.display().to_string();
    let bytes = files::read_trusted(&path, &Owners::from_env(), MAX_HISTORY_FILE_BYTES).map_err(
        |source| OpsError::Read {
            what: format!("the history file {shown}"),
            source: source.into(),
        },
    )?;
    let data = read_bytes(&bytes).map_err(|reason| OpsError::History {
        path: shown.clone(),
        reason,
    })?;
    let now = crate::report::now_unix_ns();
    let oldest = a.since.map_or(0, |d| {
        now.saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64)
    });
    let of_peer: Vec<&Record> = data.records.iter().filter(|r| r.peer == a.peer).collect();
    let records: Vec<Record> = of_peer
        .iter()
        .filter(|r| a.transport.as_ref().is_none_or(|t| &r.transport == t))
        .filter(|r| r.at_unix_ns >= oldest)
        .map(|r| (*r).clone())
        .collect();
    if records.is_empty() {
        let mut kept: Vec<String> = data
            .records
            .iter()
            .map(|r| format!("{} over {}", r.peer, r.transport))
            .collect();
        kept.sort();
        kept.dedup();
        let what = match (&a.transport, a.since.is_some() && !of_peer.is_empty()) {
            (_, true) => " in that time".to_string(),
            (Some(t), _) => format!(" over {t}"),
            (None, _) => String::new(),
        };
        return Err(OpsError::NoHistory {
            peer: a.peer.clone(),
            what,
            path: shown,
            kept: if kept.is_empty() {
                "(none yet)".into()
            } else {
                kept.join(", ")
            },
        });
    }
    Ok(HistoryView {
        file: shown,
        node: data.node,
        peer: a.peer.clone(),
        transport: a.transport.clone(),
        records,
        now_unix_ns: now,
    })
}
