//! Quiet while jobs run: a file next to the segment (`<shm>.quiet`) lists
//! who holds the node quiet (a Slurm job, an operator) and until when.
//! `ngctl quiet` adds a holder and `ngctl resume` removes one (both root
//! only); the daemon reads the file at its publisher's pace (every 250 ms:
//! one `stat`, and a read when it changed) and is quiet while any holder's
//! time has not run out. A quiet node sends no probes, declines sessions
//! (its peers skip it without counting a failure), and its responders,
//! with no session to serve, sleep in poll(2).
//!
//! Several jobs may share a node: each holds it under its own name, and the
//! node resumes when the last one lets go (or its `--for` runs out, so an
//! epilog that never ran cannot keep a node quiet forever).
//!
//! Trust: the segment's directory may be writable by others (/dev/shm),
//! so the daemon takes the file only if it is a regular file (not a link)
//! owned by root or by the daemon's own user and writable by its owner
//! alone; anything else is ignored with one warning. Writers replace it
//! atomically (a temporary file renamed over it), serialized by an
//! advisory lock on the file `<shm>.quiet.lock`.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Longest holder name, bytes.
pub const MAX_HOLDER_BYTES: usize = 128;
/// Most holders at once.
pub const MAX_HOLDERS: usize = 256;
/// Largest quiet file read, bytes.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// Where the quiet file of the segment `shm` lives.
pub fn quiet_path(shm: &Path) -> PathBuf {
    let mut s = shm.as_os_str().to_owned();
    s.push(".quiet");
    PathBuf::from(s)
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// One holder of the quiet state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub name: String,
    pub since_unix_ns: u64,
    /// None: until resumed.
    pub until_unix_ns: Option<u64>,
}

/// The quiet file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuietFile {
    pub holders: Vec<Holder>,
}

impl QuietFile {
    /// The holders whose time has not run out at `now_unix_ns`.
    pub fn active(&self, now_unix_ns: u64) -> impl Iterator<Item = &Holder> {
        self.holders
            .iter()
            .filter(move |h| h.until_unix_ns.is_none_or(|u| u > now_unix_ns))
    }

    /// Quiet at `now_unix_ns`: until when (None inside: until resumed).
    pub fn quiet_until(&self, now_unix_ns: u64) -> Option<Option<u64>> {
        let mut any = false;
        let mut until = Some(0);
        for h in self.active(now_unix_ns) {
            any = true;
            until = match (until, h.until_unix_ns) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
        }
        any.then_some(until)
    }
}

/// What the daemon (and `ngctl status`) shows of the quiet state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QuietStatus {
    pub quiet: bool,
    /// The holders in effect.
    pub holders: Vec<String>,
    /// None: until resumed (when quiet).
    pub until_unix_ns: Option<u64>,
    /// Why the file was ignored, if it was.
    pub ignored: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum QuietError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not trusted: {why}")]
    Untrusted { path: String, why: String },
    #[error("{path} does not parse: {why}")]
    Parse { path: String, why: String },
    #[error("holder name: 1 to {MAX_HOLDER_BYTES} bytes, no control characters")]
    BadName,
    #[error("more than {MAX_HOLDERS} holders")]
    TooMany,
    #[error("quiet and resume change the daemon's state: run them as root")]
    NotRoot,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> QuietError + '_ {
    move |source| QuietError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The file at `path` if it exists and is trusted: a regular file (not a
/// link) owned by root or by `owner_uid`, writable by its owner only.
pub fn read(path: &Path, owner_uid: u32) -> Result<Option<QuietFile>, QuietError> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let meta = file.metadata().map_err(io(path))?;
    let untrusted = |why: &str| QuietError::Untrusted {
        path: path.display().to_string(),
        why: why.to_string(),
    };
    if !meta.is_file() {
        return Err(untrusted("not a regular file"));
    }
    if meta.uid() != 0 && meta.uid() != owner_uid {
        return Err(untrusted(&format!("owned by uid {}", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted("writable by group or others"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(untrusted("too large"));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(&file, MAX_FILE_BYTES), &mut text)
        .map_err(io(path))?;
    let q: QuietFile = serde_json::from_str(&text).map_err(|e| QuietError::Parse {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    if q.holders.len() > MAX_HOLDERS || q.holders.iter().any(|h| !name_ok(&h.name)) {
        return Err(QuietError::Parse {
            path: path.display().to_string(),
            why: "bad holder list".into(),
        });
    }
    Ok(Some(q))
}

fn name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= MAX_HOLDER_BYTES && !n.chars().any(char::is_control)
}

/// Change the quiet file of `shm` under its lock: `f` edits the holders
/// (expired ones are dropped first); an empty list removes the file.
/// Returns the file as written.
pub fn update(
    shm: &Path,
    now_unix_ns: u64,
    f: impl FnOnce(&mut QuietFile) -> Result<(), QuietError>,
) -> Result<QuietFile, QuietError> {
    let path = quiet_path(shm);
    let lock_path = with_suffix(&path, ".lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    lock_within(&lock, &lock_path, std::time::Duration::from_secs(5))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    // A file that is not trusted is replaced, not merged.
    let mut q = read(&path, me).ok().flatten().unwrap_or_default();
    q.holders
        .retain(|h| h.until_unix_ns.is_none_or(|u| u > now_unix_ns));
    f(&mut q)?;
    if q.holders.len() > MAX_HOLDERS {
        return Err(QuietError::TooMany);
    }
    if q.holders.is_empty() {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&path)(e)),
        }
        return Ok(q);
    }
    let tmp = with_suffix(&path, &format!(".{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut out = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io(&tmp))?;
    let text = serde_json::to_vec_pretty(&q).map_err(|e| QuietError::Parse {
        path: path.display().to_string(),
        why: e.to_string(),
    })?;
    out.write_all(&text).map_err(io(&tmp))?;
    out.sync_all().map_err(io(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    // The lock ends when `lock` is closed.
    drop(lock);
    Ok(q)
}

/// Take the exclusive advisory lock on `file`, trying until `limit`.
fn lock_within(
    file: &std::fs::File,
    path: &Path,
    limit: std::time::Duration,
) -> Result<(), QuietError> {
    use std::os::fd::AsRawFd;
    let end = std::time::Instant::now() + limit;
    loop {
        // SAFETY: the descriptor belongs to `file`, open for the whole
        // call; flock touches no memory of ours.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) || std::time::Instant::now() >= end {
            return Err(io(path)(e));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Hold the node quiet as `name` (replacing that holder's earlier time)
/// until `until_unix_ns` (None: until resumed).
pub fn hold(
    shm: &Path,
    name: &str,
    now_unix_ns: u64,
    until_unix_ns: Option<u64>,
) -> Result<QuietFile, QuietError> {
    if !name_ok(name) {
        return Err(QuietError::BadName);
    }
    update(shm, now_unix_ns, |q| {
        q.holders.retain(|h| h.name != name);
        q.holders.push(Holder {
            name: name.to_string(),
            since_unix_ns: now_unix_ns,
            until_unix_ns,
        });
        Ok(())
    })
}

/// Let go of the quiet state as `name`, or for everyone (None).
pub fn release(shm: &Path, name: Option<&str>, now_unix_ns: u64) -> Result<QuietFile, QuietError> {
    update(shm, now_unix_ns, |q| {
        match name {
            Some(n) => q.holders.retain(|h| h.name != n),
            None => q.holders.clear(),
        }
        Ok(())
    })
}

/// The daemon's watch over the quiet file: looked at every call (one
/// `stat`), read again when it changed, judged against the time.
#[derive(Default)]
pub struct Watch {
    /// What the file looked like when last read (a change of contents,
    /// owner or mode shows in one of these).
    seen: Option<[i64; 6]>,
    file: Option<QuietFile>,
    ignored: Option<String>,
}

impl Watch {
    /// The quiet state of `shm` at `now_unix_ns` (a new reason to ignore
    /// the file is logged once).
    pub fn poll(&mut self, shm: &Path, owner_uid: u32, now_unix_ns: u64) -> QuietStatus {
        let path = quiet_path(shm);
        let stamp = std::fs::symlink_metadata(&path).ok().map(|m| {
            [
                m.mtime(),
                m.mtime_nsec(),
                m.ctime(),
                m.ctime_nsec(),
                m.ino() as i64,
                m.len() as i64,
            ]
        });
        if stamp != self.seen {
            self.seen = stamp;
            match read(&path, owner_uid) {
                Ok(f) => {
                    self.file = f;
                    self.ignored = None;
                }
                Err(e) => {
                    let why = e.to_string();
                    if self.ignored.as_deref() != Some(why.as_str()) {
                        tracing::warn!("quiet file ignored: {why}");
                    }
                    self.file = None;
                    self.ignored = Some(why);
                }
            }
        }
        let until = self.file.as_ref().and_then(|f| f.quiet_until(now_unix_ns));
        QuietStatus {
            quiet: until.is_some(),
            holders: self
                .file
                .iter()
                .flat_map(|f| f.active(now_unix_ns).map(|h| h.name.clone()))
                .collect(),
            until_unix_ns: until.flatten(),
            ignored: self.ignored.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ngquiet-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn holders_come_and_go_and_time_runs_out() {
        let d = dir("hold");
        let shm = d.join("seg");
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let mut w = Watch::default();
        assert!(!w.poll(&shm, me, 0).quiet);
        hold(&shm, "slurm-job-7", 100, None).unwrap();
        hold(&shm, "ngctl", 100, Some(1_000)).unwrap();
        let st = w.poll(&shm, me, 500);
        assert!(st.quiet);
        assert_eq!(st.holders, ["slurm-job-7", "ngctl"]);
        assert_eq!(st.until_unix_ns, None, "one holder has no end");
        release(&shm, Some("slurm-job-7"), 600).unwrap();
        let st = w.poll(&shm, me, 700);
        assert!(st.quiet && st.until_unix_ns == Some(1_000));
        // The other holder's time runs out: not quiet, without a write.
        assert!(!w.poll(&shm, me, 1_000).quiet);
        hold(&shm, "a", 2_000, Some(3_000)).unwrap();
        // The expired holder was dropped when the file was next written.
        let q = read(&quiet_path(&shm), me).unwrap().unwrap();
        assert_eq!(q.holders.len(), 1);
        release(&shm, None, 2_100).unwrap();
        assert!(!quiet_path(&shm).exists());
        assert!(!w.poll(&shm, me, 2_200).quiet);
        assert!(matches!(hold(&shm, "", 1, None), Err(QuietError::BadName)));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn an_untrusted_file_is_ignored() {
        let d = dir("trust");
        let shm = d.join("seg");
        let path = quiet_path(&shm);
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        let text = r#"{"holders":[{"name":"x","since_unix_ns":1,"until_unix_ns":null}]}"#;
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        let mut w = Watch::default();
        let st = w.poll(&shm, me, 5);
        assert!(!st.quiet && st.ignored.is_some(), "{st:?}");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        assert!(w.poll(&shm, me, 5).quiet);
        // Another owner (not root, not us): only checkable as root.
        if me == 0 {
            std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
            assert!(matches!(read(&path, me), Err(QuietError::Untrusted { .. })));
        }
        // A link is not followed.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(d.join("elsewhere"), &path).unwrap();
        assert!(read(&path, me).is_err());
        let _ = std::fs::remove_dir_all(d);
    }
}
