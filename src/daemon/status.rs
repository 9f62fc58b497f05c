//! The status file `ngctl status` reads (`<shm>.status`, beside the
//! segment in the daemon's runtime directory, replaced atomically when it
//! changes and at least every 30 s): what the daemon is doing, per peer and
//! transport, without a control-plane request.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use netgauge::files::{self, Dir, Owners};

use serde::{Deserialize, Serialize};

use super::quiet::QuietStatus;
use super::sched::PeerPhase;
use crate::cluster::schedule::ScheduleStatus;
use crate::control::RejectSnapshot;

/// One (peer, transport) the daemon keeps current.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerStatus {
    pub name: String,
    pub phase: PeerPhase,
    pub transport: String,
    pub failures: u32,
    pub last_probe_unix_ns: Option<u64>,
    pub last_error: Option<String>,
}

/// The whole status file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusFile {
    pub node: String,
    pub pid: u32,
    pub generation: u64,
    pub uptime_s: f64,
    pub updated_unix_ns: u64,
    pub peers: Vec<PeerStatus>,
    pub budget_bytes_per_s: u64,
    pub spent_bytes: u64,
    pub spent_bytes_per_s: f64,
    pub control_rejects: RejectSnapshot,
    /// Sessions this node serves now (a node serves one at a time).
    pub responder_sessions: u64,
    /// This node drives a job now (a sweep, re-check, fan-out or conflict
    /// probe of its own).
    #[serde(default)]
    pub driving: bool,
    /// The cluster schedule: round, classes fresh, mesh coverage, and its
    /// counters (sessions driven and served, declines met and given —
    /// busy, quiet, budget, not expected —, sweeps deferred by the budget).
    #[serde(default)]
    pub schedule: Option<ScheduleStatus>,
    /// Whether the node is held quiet, by whom, until when.
    #[serde(default)]
    pub quiet: Option<QuietStatus>,
    /// The history file (`ngctl history` reads it).
    #[serde(default)]
    pub history_file: Option<PathBuf>,
}

/// Where the status file of the segment `shm` lives.
pub fn status_path(shm: &Path) -> PathBuf {
    let mut s = shm.as_os_str().to_owned();
    s.push(".status");
    PathBuf::from(s)
}

/// Largest status file a reader accepts.
pub const MAX_STATUS_BYTES: u64 = 16 << 20;

/// The status file's name beside the segment `segment_name`.
pub fn status_name(segment_name: &OsStr) -> OsString {
    let mut s = segment_name.to_os_string();
    s.push(".status");
    s
}

/// Replace the status file `name` in the runtime directory `dir` with
/// `st`: written under an unpredictable temporary name, then renamed over
/// whatever is at the name (never written through a link).
pub fn write(dir: &Dir, name: &OsStr, st: &StatusFile) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(st).map_err(std::io::Error::other)?;
    dir.replace(name, &bytes, 0o644, false)
}

/// The status file of `shm`, if there is one a reader may trust (a
/// regular file of a trusted owner, writable by it alone; opened without
/// following links or blocking: `netgauge::files::open_trusted`).
pub fn read(shm: &Path) -> Option<StatusFile> {
    let bytes =
        files::read_trusted(&status_path(shm), &Owners::from_env(), MAX_STATUS_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("ngstatus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shm = dir.join("seg");
        let st = StatusFile {
            node: "a".into(),
            pid: 7,
            generation: 9,
            uptime_s: 1.5,
            updated_unix_ns: 3,
            peers: vec![PeerStatus {
                name: "b".into(),
                phase: PeerPhase::Failing,
                transport: "udp".into(),
                failures: 2,
                last_probe_unix_ns: None,
                last_error: Some("timed out".into()),
            }],
            budget_bytes_per_s: 100,
            spent_bytes: 10,
            spent_bytes_per_s: 6.5,
            control_rejects: RejectSnapshot::default(),
            responder_sessions: 1,
            driving: true,
            schedule: Some(ScheduleStatus {
                round: 17,
                round_kind: "mesh".into(),
                ..ScheduleStatus::default()
            }),
            quiet: Some(QuietStatus {
                quiet: true,
                holders: vec!["slurm-job-9".into()],
                ..QuietStatus::default()
            }),
            history_file: Some("/var/lib/netgauged/a.history.json".into()),
        };
        assert!(read(&shm).is_none());
        let d = Dir::open(&dir, netgauge::files::DirPolicy::Private, false).unwrap();
        write(&d, &status_name(OsStr::new("seg")), &st).unwrap();
        assert_eq!(read(&shm), Some(st));
        let text = std::fs::read_to_string(status_path(&shm)).unwrap();
        assert!(text.contains("\"phase\": \"failing\""), "{text}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
