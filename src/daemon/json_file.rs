//! The daemon's own JSON files (the state file, the history file): each
//! holds its format `version` first, is read whole under a size bound and
//! replaced whole and atomically in the directory the daemon owns.

use std::ffi::OsStr;

use netgauge::files::Dir;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// A file that could not be read, written or parsed; `what` names the
/// file ("state file", "history file").
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{what} {path} is not valid: {reason}")]
    Invalid {
        what: &'static str,
        path: String,
        reason: String,
    },
}

/// One of the daemon's JSON files: file `name` of `dir`.
pub(super) struct JsonFile<'a> {
    what: &'static str,
    dir: &'a Dir,
    name: &'a OsStr,
}

impl<'a> JsonFile<'a> {
    /// File `name` of `dir`, called `what` in errors.
    pub fn new(what: &'static str, dir: &'a Dir, name: &'a OsStr) -> JsonFile<'a> {
        JsonFile { what, dir, name }
    }

    fn path(&self) -> String {
        self.dir.path().join(self.name).display().to_string()
    }

    /// Replace the file with `value` (indented when `pretty`), created
    /// with permissions `mode`.
    pub fn save<T: Serialize>(&self, value: &T, pretty: bool, mode: u32) -> Result<(), FileError> {
        let text = if pretty {
            serde_json::to_vec_pretty(value)
        } else {
            serde_json::to_vec(value)
        }
        .map_err(|e| self.invalid(e.to_string()))?;
        self.dir
            .replace(self.name, &text, mode, true)
            .map_err(|source| FileError::Io {
                what: self.what,
                path: self.path(),
                source,
            })
    }

    /// The file's bytes, at most `max_bytes` (None: there is no file).
    pub fn read(&self, max_bytes: u64) -> Result<Option<Vec<u8>>, FileError> {
        self.dir
            .read(self.name, max_bytes)
            .map_err(|source| FileError::Io {
                what: self.what,
                path: self.path(),
                source,
            })
    }

    /// The error saying the file is not valid, for `reason`.
    pub fn invalid(&self, reason: String) -> FileError {
        FileError::Invalid {
            what: self.what,
            path: self.path(),
            reason,
        }
    }
}

/// Parse `text` as a file of format `version`: the version is read first,
/// so a file of another one is refused with `mismatch(its version)`
/// whatever the rest of it holds.
pub(super) fn parse<T: DeserializeOwned>(
    text: &[u8],
    version: u32,
    mismatch: fn(u32) -> String,
) -> Result<T, String> {
    #[derive(Deserialize)]
    struct Version {
        version: u32,
    }
    let v: Version = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if v.version != version {
        return Err(mismatch(v.version));
    }
    serde_json::from_slice(text).map_err(|e| e.to_string())
}
