//! The daemon's files, each in a directory it owns: the runtime directory
//! (segment, its lock, the status file; systemd `RuntimeDirectory=`), the
//! state directory (the state file, its lock and the history file;
//! `StateDirectory=`) and, when configured, the directory of
//! `metrics_textfile`.
//!
//! Each directory is opened once and checked — owned by the daemon's user
//! (or root), writable by nobody else — or the daemon refuses to start
//! with one line saying why; every file is then named relative to the
//! directory's descriptor and opened or replaced as `netgauge::files`
//! describes (no link followed, no open that blocks, temporaries under
//! unpredictable names). The state file is locked for the daemon's life,
//! so two daemons never share one.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};

use netgauge::files::{Dir, DirPolicy};

use super::config::Config;
use super::metrics::Textfile;
use super::status::status_name;
use super::DaemonError;

/// The directories and names of the daemon's files.
pub(super) struct DaemonFiles {
    /// Segment, lock, status file.
    pub runtime: Dir,
    pub segment: OsString,
    pub status: OsString,
    /// The state file and its lock.
    pub state: Dir,
    pub state_name: OsString,
    /// The history file, beside the state file.
    pub history: OsString,
    _state_lock: File,
    /// `metrics_textfile`, when configured.
    pub metrics_textfile: Option<Textfile>,
}

/// `(directory, file name)` of `path`.
fn split(path: &Path) -> Result<(PathBuf, OsString), String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} has no file name", path.display()))?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok((dir.to_path_buf(), name.to_os_string()))
}

impl DaemonFiles {
    /// Open (creating if missing, mode 0755) and check both directories;
    /// take the state file's lock.
    pub fn open(cfg: &Config, node: &str) -> Result<DaemonFiles, DaemonError> {
        let bad = |what: &'static str, path: &Path, source: std::io::Error| DaemonError::Files {
            what,
            path: path.to_path_buf(),
            source,
        };
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let shm = cfg.shm_path();
        let (rdir, segment) = split(&shm).map_err(|m| bad("segment", &shm, invalid(m)))?;
        let runtime = Dir::open(&rdir, DirPolicy::Private, true)
            .map_err(|e| bad("runtime directory", &rdir, e))?;
        let state_path = cfg.state_path(node);
        let (sdir, state_name) =
            split(&state_path).map_err(|m| bad("state file", &state_path, invalid(m)))?;
        let state = Dir::open(&sdir, DirPolicy::Private, true)
            .map_err(|e| bad("state directory", &sdir, e))?;
        let lock_name = netgauge::writer::lock_name(&state_name);
        let state_lock = state.lock(&lock_name).map_err(|e| {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                bad(
                    "state file",
                    &state_path,
                    std::io::Error::new(
                        e.kind(),
                        "in use by another running netgauged (each daemon needs its own \
                         state_file; the default is named after the node)",
                    ),
                )
            } else {
                bad("state file lock", &sdir.join(&lock_name), e)
            }
        })?;
        let metrics_textfile = cfg
            .metrics_textfile
            .as_deref()
            .map(|p| Textfile::open(p).map_err(|e| bad("metrics_textfile", p, e)))
            .transpose()?;
        Ok(DaemonFiles {
            metrics_textfile,
            status: status_name(&segment),
            runtime,
            segment,
            history: super::history::history_name(&state_name),
            state,
            state_name,
            _state_lock: state_lock,
        })
    }

    /// The segment's full path (for messages).
    pub fn segment_path(&self) -> PathBuf {
        self.runtime.path().join(&self.segment)
    }

    /// The history file's full path (absolute, as the status file names it
    /// for `ngctl history`).
    pub fn history_path(&self) -> PathBuf {
        let p = self.state.path().join(&self.history);
        std::path::absolute(&p).unwrap_or(p)
    }

    pub fn state_file(&self) -> &OsStr {
        &self.state_name
    }
}
