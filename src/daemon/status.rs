//! The status file `ngctl status` reads (`<shm>.status`, replaced
//! atomically every second): what the daemon is doing, per peer and
//! transport, without a control-plane request.

use std::path::{Path, PathBuf};

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
    pub responder_sessions: u64,
    /// The cluster schedule: round, classes fresh, mesh coverage, and its
    /// counters (sessions driven and served, declines met and given —
    /// busy, quiet, budget, not expected —, sweeps deferred by the budget).
    #[serde(default)]
    pub schedule: Option<ScheduleStatus>,
    /// Whether the node is held quiet, by whom, until when.
    #[serde(default)]
    pub quiet: Option<QuietStatus>,
}

/// Where the status file of the segment `shm` lives.
pub fn status_path(shm: &Path) -> PathBuf {
    let mut s = shm.as_os_str().to_owned();
    s.push(".status");
    PathBuf::from(s)
}

/// Replace the status file of `shm` with `st` (write, then rename).
pub fn write(shm: &Path, st: &StatusFile) -> std::io::Result<()> {
    let path = status_path(shm);
    let tmp = {
        let mut s = path.as_os_str().to_owned();
        s.push(".tmp");
        PathBuf::from(s)
    };
    let bytes = serde_json::to_vec_pretty(st).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, &path)
}

/// The status file of `shm`, if there is a readable one.
pub fn read(shm: &Path) -> Option<StatusFile> {
    let bytes = std::fs::read(status_path(shm)).ok()?;
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
            responder_sessions: 0,
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
        };
        assert!(read(&shm).is_none());
        write(&shm, &st).unwrap();
        assert_eq!(read(&shm), Some(st));
        let text = std::fs::read_to_string(status_path(&shm)).unwrap();
        assert!(text.contains("\"phase\": \"failing\""), "{text}");
        let _ = std::fs::remove_dir_all(dir);
    }
}
