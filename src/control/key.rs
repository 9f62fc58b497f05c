//! The pre-shared cluster key.
//!
//! File format: either **hex** — the whole file, after trimming ASCII
//! whitespace, is an even number (≥ 64) of hex digits, decoded to ≥ 32 bytes
//! (e.g. `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > key`) — or
//! **raw** — any other content, used verbatim (no trimming), at least 32
//! bytes (e.g. `head -c 32 /dev/urandom > key`). At most 4096 bytes.
//!
//! The file must be a regular file owned by the effective user (root may
//! read a file owned by anyone, e.g. `ngctl` run through sudo) and must not
//! be accessible to group or others (`mode & 0o077 == 0`, i.e. 0600 or 0400).
//! Ownership and mode are checked on the opened descriptor, so a swapped
//! path cannot slip between the check and the read.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Shortest accepted key, bytes.
pub const MIN_KEY_BYTES: usize = 32;
/// Largest accepted key file, bytes.
pub const MAX_KEY_FILE_BYTES: u64 = 4096;

/// Why a key file was refused.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "key file {path} has mode {mode:04o}: group/others may access it; run `chmod 600 {path}`"
    )]
    Permissions { path: PathBuf, mode: u32 },
    #[error("key file {path} is owned by uid {owner}, not by the current user (uid {euid})")]
    Owner {
        path: PathBuf,
        owner: u32,
        euid: u32,
    },
    #[error("key file {path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("key file {path}: {what}")]
    Content { path: PathBuf, what: String },
    #[error("cluster key too short: {len_bytes} bytes, need at least {MIN_KEY_BYTES}")]
    TooShort { len_bytes: usize },
}

/// The pre-shared cluster key. Cheap to clone; never printed.
#[derive(Clone)]
pub struct ClusterKey(Arc<[u8]>);

impl ClusterKey {
    /// A key from bytes (at least [`MIN_KEY_BYTES`]).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        if bytes.len() < MIN_KEY_BYTES {
            return Err(KeyError::TooShort {
                len_bytes: bytes.len(),
            });
        }
        Ok(ClusterKey(Arc::from(bytes)))
    }

    /// The key material.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterKey({} bytes, redacted)", self.0.len())
    }
}

fn decode_hex(text: &[u8]) -> Option<Vec<u8>> {
    if text.is_empty() || !text.len().is_multiple_of(2) || !text.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    };
    Some(
        text.chunks_exact(2)
            .map(|p| (nibble(p[0]) << 4) | nibble(p[1]))
            .collect(),
    )
}

fn trim_ascii_ws(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Load the cluster key from `path` (format and permission rules in the
/// module documentation).
pub fn load_key(path: impl AsRef<Path>) -> Result<ClusterKey, KeyError> {
    let path = path.as_ref();
    let io = |source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(KeyError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() != euid && euid != 0 {
        return Err(KeyError::Owner {
            path: path.to_path_buf(),
            owner: meta.uid(),
            euid,
        });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Permissions {
            path: path.to_path_buf(),
            mode,
        });
    }
    if meta.len() > MAX_KEY_FILE_BYTES {
        return Err(KeyError::Content {
            path: path.to_path_buf(),
            what: format!("larger than {MAX_KEY_FILE_BYTES} bytes"),
        });
    }
    let mut raw = Vec::with_capacity(meta.len() as usize);
    file.by_ref()
        .take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut raw)
        .map_err(io)?;
    if raw.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(KeyError::Content {
            path: path.to_path_buf(),
            what: format!("larger than {MAX_KEY_FILE_BYTES} bytes"),
        });
    }
    let key = decode_hex(trim_ascii_ws(&raw)).unwrap_or(raw);
    if key.len() < MIN_KEY_BYTES {
        return Err(KeyError::Content {
            path: path.to_path_buf(),
            what: format!(
                "key is {} bytes, need at least {MIN_KEY_BYTES} (raw) or {} hex digits",
                key.len(),
                2 * MIN_KEY_BYTES
            ),
        });
    }
    ClusterKey::from_bytes(&key)
}
