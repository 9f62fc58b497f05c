//! Opening the segment's files without being redirected.
//!
//! A root daemon and its readers share a file system with untrusted users.
//! Every path they open could hold something planted there: a symbolic
//! link to a file the daemon would then overwrite, a FIFO whose `open`
//! blocks forever, a file owned by another user who can truncate it under
//! a mapping (SIGBUS) or hold its lock. So:
//!
//! - Readers ([`open_trusted`]) open with `O_NOFOLLOW | O_NONBLOCK |
//!   O_CLOEXEC` (a symbolic link fails with `ELOOP`, a FIFO opens at once)
//!   and accept only a regular file that nobody but its owner may write,
//!   owned by a user they trust ([`Owners`]): root, the daemon's user
//!   ([`DAEMON_USER`]) or the reader itself, plus what
//!   `$NETGAUGE_SEGMENT_OWNER` ([`OWNER_ENV`]) adds.
//! - Writers work inside a directory ([`Dir`]) opened once and checked
//!   (owned by the process's user or root, writable by nobody else) and
//!   name files relative to its descriptor: files are checked with fstat
//!   after an `O_NOFOLLOW | O_NONBLOCK` open; new files are written under
//!   an unpredictable temporary name created with `O_EXCL` and renamed into
//!   place, which replaces whatever was at the name (a link is replaced,
//!   never followed); the single-writer lock is a private file (mode 0600)
//!   beside the segment, not the segment itself, which everybody can open.
//!
//! Only the open paths use this module; lookups make no system call.

use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::sys;

/// The system user netgauged runs as (systemd `User=`, sysusers.d).
pub const DAEMON_USER: &str = "netgauged";
/// Environment variable that widens the owners a reader trusts: a user
/// name or numeric uid adds that user; `any` accepts every owner (for
/// tests and unprivileged set-ups; the file must still be a regular file
/// that only its owner may write).
pub const OWNER_ENV: &str = "NETGAUGE_SEGMENT_OWNER";

/// Largest file [`Dir::read`] and [`read_trusted`] return.
pub const MAX_READ_BYTES: u64 = 64 << 20;

/// Why a file or directory was refused.
fn refused(kind: io::ErrorKind, what: String) -> io::Error {
    io::Error::new(kind, what)
}

fn cstring(p: &OsStr) -> io::Result<CString> {
    CString::new(p.as_bytes()).map_err(|_| {
        refused(
            io::ErrorKind::InvalidInput,
            "path contains a NUL byte".into(),
        )
    })
}

/// fstat of an open descriptor.
pub(crate) fn fstat(fd: &impl AsRawFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `st` is a valid, writable stat; the descriptor is open.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The uid of user `name`, if it exists (getpwnam_r; only on open paths).
fn uid_of(name: &str) -> Option<u32> {
    let cname = CString::new(name).ok()?;
    // SAFETY: an all-zero passwd is a valid value of this plain C struct.
    let mut pw: libc::passwd = unsafe { core::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut out: *mut libc::passwd = core::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: the name is
    // NUL-terminated, `pw`, `buf` (with its true length) and `out` are
    // writable and outlive it; the result points into `pw` or is NULL.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    (rc == 0 && !out.is_null()).then_some(pw.pw_uid)
}

fn kind_of(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFLNK => "a symbolic link",
        _ => "not a regular file",
    }
}

/// The owners a reader trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owners {
    any: bool,
    extra: Option<u32>,
}

impl Owners {
    /// Root, the daemon's user, the caller's effective user, and what
    /// `$NETGAUGE_SEGMENT_OWNER` adds (a user name, a uid, or `any`).
    pub fn from_env() -> Owners {
        Owners::parse(&std::env::var(OWNER_ENV).unwrap_or_default())
    }

    /// The owners a value of `$NETGAUGE_SEGMENT_OWNER` names: empty (the
    /// standard ones), `any`, a uid, or a user name (unknown: standard).
    pub fn parse(value: &str) -> Owners {
        let v = value.trim();
        if v == "any" {
            return Owners::any();
        }
        Owners {
            any: false,
            extra: v
                .parse()
                .ok()
                .or_else(|| (!v.is_empty()).then(|| uid_of(v)).flatten()),
        }
    }

    /// Root, the daemon's user and the caller's effective user only.
    pub fn standard() -> Owners {
        Owners {
            any: false,
            extra: None,
        }
    }

    /// Any owner (the file must still be regular and writable by its owner
    /// only).
    pub fn any() -> Owners {
        Owners {
            any: true,
            extra: None,
        }
    }

    /// The standard owners and `uid`.
    pub fn with_uid(uid: u32) -> Owners {
        Owners {
            any: false,
            extra: Some(uid),
        }
    }

    /// Whether a file owned by `uid` is trusted. The daemon user's uid is
    /// looked up only when nothing cheaper decided.
    pub fn accepts(&self, uid: u32) -> bool {
        self.any
            || uid == 0
            || uid == euid()
            || self.extra == Some(uid)
            || uid_of(DAEMON_USER) == Some(uid)
    }
}

/// Why [`open_trusted`] did not hand out a file.
#[derive(Debug)]
pub enum TrustError {
    /// The open or fstat failed (absent, no permission, …).
    Io(io::Error),
    /// What is there is not trusted; `errno` for C (ELOOP: a symbolic
    /// link; EINVAL: not a regular file or too large; EPERM: an untrusted
    /// owner or writable by others).
    Refused { errno: i32, why: String },
}

impl std::fmt::Display for TrustError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustError::Io(e) => e.fmt(f),
            TrustError::Refused { why, .. } => f.write_str(why),
        }
    }
}

impl std::error::Error for TrustError {}

impl From<io::Error> for TrustError {
    fn from(e: io::Error) -> Self {
        TrustError::Io(e)
    }
}

impl From<TrustError> for io::Error {
    fn from(e: TrustError) -> Self {
        match e {
            TrustError::Io(e) => e,
            TrustError::Refused { errno, why } => {
                let kind = if errno == libc::EINVAL {
                    io::ErrorKind::InvalidData
                } else {
                    io::ErrorKind::PermissionDenied
                };
                io::Error::new(kind, why)
            }
        }
    }
}

/// Checks what a reader is about to trust: a regular file, owned by one of
/// `owners`, not writable by group or others.
fn check_trusted(st: &libc::stat, owners: &Owners, path: &Path) -> Result<(), TrustError> {
    let p = path.display();
    let no = |errno, why| Err(TrustError::Refused { errno, why });
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return no(
            libc::EINVAL,
            format!("{p} is {}, not a regular file", kind_of(st.st_mode)),
        );
    }
    if !owners.accepts(st.st_uid) {
        return no(
            libc::EPERM,
            format!(
                "{p} is owned by uid {}, not by root, the {DAEMON_USER} user or this user \
                 (${OWNER_ENV} names other owners)",
                st.st_uid
            ),
        );
    }
    if st.st_mode & 0o022 != 0 {
        return no(
            libc::EPERM,
            format!(
                "{p} has mode {:04o}: writable by group or others",
                st.st_mode & 0o7777
            ),
        );
    }
    Ok(())
}

/// Opens `path` read-only for a reader: never follows a symbolic link at
/// the last component, never blocks (a FIFO or device opens at once and is
/// then refused), and accepts only a regular file of a trusted owner that
/// only its owner may write. Returns the file and its fstat.
pub fn open_trusted(path: &Path, owners: &Owners) -> Result<(File, libc::stat), TrustError> {
    let c = cstring(path.as_os_str())?;
    let flags =
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
    // SAFETY: `c` is a NUL-terminated path; open does not retain it.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ELOOP) {
            return Err(TrustError::Refused {
                errno: libc::ELOOP,
                why: format!("{} is a symbolic link (not followed)", path.display()),
            });
        }
        return Err(TrustError::Io(e));
    }
    // SAFETY: `fd` was just opened and is owned by nobody else.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    let st = fstat(&file)?;
    check_trusted(&st, owners, path)?;
    Ok((file, st))
}

/// [`open_trusted`], then the whole content (at most `max_bytes`).
pub fn read_trusted(path: &Path, owners: &Owners, max_bytes: u64) -> Result<Vec<u8>, TrustError> {
    let (file, st) = open_trusted(path, owners)?;
    Ok(read_bounded(
        file,
        st.st_size.max(0) as u64,
        max_bytes,
        path,
    )?)
}

fn read_bounded(file: File, size: u64, max_bytes: u64, path: &Path) -> io::Result<Vec<u8>> {
    if size > max_bytes {
        return Err(refused(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {max_bytes} bytes", path.display()),
        ));
    }
    let mut out = Vec::with_capacity(size as usize);
    file.take(max_bytes + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max_bytes {
        return Err(refused(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {max_bytes} bytes", path.display()),
        ));
    }
    Ok(out)
}

/// How strict [`Dir::open`] is about the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirPolicy {
    /// Owned by this process's effective user or root, and writable by
    /// nobody else: what the daemon requires of its runtime and state
    /// directories.
    Private,
    /// Private, or a sticky directory such as /tmp or /dev/shm (others may
    /// create names there but not replace or remove ours; a name they
    /// planted first is refused, not used): for `ngctl --publish` and
    /// tests.
    PrivateOrSticky,
}

/// A directory opened once; files are named relative to its descriptor,
/// so a directory renamed or replaced later does not redirect them.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What [`Dir::open_file`] found at a name.
#[derive(Debug)]
pub enum Found {
    /// Nothing.
    Absent,
    /// A regular file of this user, writable by nobody else.
    File(File),
    /// Something else (a link, a FIFO, another user's file, …): the reason.
    Unusable(String),
}

impl Dir {
    /// Opens directory `path` (created with mode 0755 if missing and
    /// `create`), checking it against `policy`.
    pub fn open(path: &Path, policy: DirPolicy, create: bool) -> io::Result<Dir> {
        let path = if path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            path
        };
        if create {
            use std::os::unix::fs::DirBuilderExt;
            match std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(path)
            {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        let c = cstring(path.as_os_str())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `c` is a NUL-terminated path; open does not retain it.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => refused(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is not a directory (or is a symbolic link)",
                        path.display()
                    ),
                ),
                _ => refused(e.kind(), format!("directory {}: {e}", path.display())),
            });
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(&fd)?;
        let me = euid();
        let mode = st.st_mode & 0o7777;
        let sticky = st.st_mode & libc::S_ISVTX != 0;
        let private = (st.st_uid == me || st.st_uid == 0) && mode & 0o022 == 0;
        if !(private || (policy == DirPolicy::PrivateOrSticky && sticky)) {
            return Err(refused(
                io::ErrorKind::PermissionDenied,
                format!(
                    "directory {} (owner uid {}, mode {mode:04o}) may be written by others: \
                     the files must live in a directory owned by uid {me} or root that only \
                     its owner may write (systemd RuntimeDirectory=/StateDirectory=)",
                    path.display(),
                    st.st_uid
                ),
            ));
        }
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Where the directory was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn at(&self, name: &OsStr, flags: i32, mode: u32) -> io::Result<File> {
        let c = cstring(name)?;
        if name.is_empty() || name.as_bytes().contains(&b'/') {
            return Err(refused(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not a plain file name"),
            ));
        }
        // SAFETY: the directory descriptor is open; `c` is a NUL-terminated
        // name without '/'; openat does not retain it.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Opens `name` (read-only, or read-write) if it is a regular file of
    /// this user that nobody else may write; never follows a link, never
    /// blocks.
    pub fn open_file(&self, name: &OsStr, write: bool) -> io::Result<Found> {
        let flags = if write { libc::O_RDWR } else { libc::O_RDONLY };
        let file = match self.at(name, flags, 0) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Found::Absent),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Ok(Found::Unusable("a symbolic link".into()))
            }
            // A FIFO without a reader opened for writing, a socket.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENXIO) | Some(libc::EOPNOTSUPP)) => {
                return Ok(Found::Unusable("not a regular file".into()))
            }
            Err(e) => return Err(e),
        };
        let st = fstat(&file)?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(Found::Unusable(kind_of(st.st_mode).into()));
        }
        if st.st_uid != euid() {
            return Ok(Found::Unusable(format!("owned by uid {}", st.st_uid)));
        }
        if st.st_mode & 0o022 != 0 {
            return Ok(Found::Unusable(format!(
                "mode {:04o}, writable by group or others",
                st.st_mode & 0o7777
            )));
        }
        Ok(Found::File(file))
    }

    /// The content of `name` (at most `max_bytes`), if it is a usable file
    /// ([`Dir::open_file`]); `Ok(None)` when absent; an error naming what
    /// is there otherwise.
    pub fn read(&self, name: &OsStr, max_bytes: u64) -> io::Result<Option<Vec<u8>>> {
        match self.open_file(name, false)? {
            Found::Absent => Ok(None),
            Found::Unusable(why) => Err(refused(
                io::ErrorKind::PermissionDenied,
                format!("{} is not used: {why}", self.path.join(name).display()),
            )),
            Found::File(f) => {
                let size = fstat(&f)?.st_size.max(0) as u64;
                read_bounded(f, size, max_bytes, &self.path.join(name)).map(Some)
            }
        }
    }

    /// A new file under an unpredictable name (`.<stem>.<random>.tmp`),
    /// created with `O_EXCL` and mode `mode`; its name for [`Dir::rename`].
    pub fn create_temp(&self, stem: &OsStr, mode: u32) -> io::Result<(File, CString)> {
        let mut name = Vec::with_capacity(stem.len() + 24);
        name.push(b'.');
        name.extend_from_slice(stem.as_bytes());
        name.extend_from_slice(format!(".{:016x}.tmp", sys::random_u64()).as_bytes());
        let name = OsStr::from_bytes(&name);
        let f = self.at(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, mode)?;
        sys::fchmod(&f, mode)?;
        Ok((f, cstring(name)?))
    }

    /// Renames `from` to `to` inside this directory; whatever was at `to`
    /// (a link included) is replaced, never followed.
    pub fn rename(&self, from: &CStr, to: &OsStr) -> io::Result<()> {
        let to = cstring(to)?;
        let d = self.fd.as_raw_fd();
        // SAFETY: both names are NUL-terminated and relative to the open
        // directory descriptor; renameat does not retain them.
        let rc = unsafe { libc::renameat(d, from.as_ptr(), d, to.as_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes `name` (a link itself, not its target). Absent is fine.
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        let c = cstring(name)?;
        // SAFETY: a NUL-terminated name relative to the open directory.
        let rc = unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Replaces `name` with `bytes` (mode `mode`): written to a temporary
    /// file, optionally fsynced, then renamed over the name. A crash leaves
    /// the old or the new content, never a torn one.
    pub fn replace(&self, name: &OsStr, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
        let (mut f, tmp) = self.create_temp(name, mode)?;
        let r = f
            .write_all(bytes)
            .and_then(|()| if sync { f.sync_all() } else { Ok(()) });
        drop(f);
        let r = r.and_then(|()| self.rename(&tmp, name));
        if r.is_err() {
            // SAFETY: a NUL-terminated name relative to the open directory.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        r
    }

    /// Takes the exclusive lock `name`, a private file (mode 0600) of this
    /// user; whatever else is at the name is replaced first. `WouldBlock`
    /// when another process holds it. The lock lasts as long as the file.
    pub fn lock(&self, name: &OsStr) -> io::Result<File> {
        let file = match self.open_file(name, true)? {
            Found::File(f) if fstat(&f)?.st_mode & 0o077 == 0 => f,
            Found::Absent => self.create_lock(name)?,
            Found::File(_) | Found::Unusable(_) => {
                self.remove(name)?;
                self.create_lock(name)?
            }
        };
        sys::lock_exclusive(&file)?;
        Ok(file)
    }

    fn create_lock(&self, name: &OsStr) -> io::Result<File> {
        let f = self.at(name, libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, 0o600)?;
        sys::fchmod(&f, 0o600)?;
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("ngfiles-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        p
    }

    #[test]
    fn a_private_directory_is_created_and_an_open_one_refused() {
        let p = scratch("dir");
        let d = Dir::open(&p, DirPolicy::Private, true).unwrap();
        assert_eq!(d.path(), p.as_path());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Dir::open(&p, DirPolicy::Private, false).unwrap_err();
        assert!(e.to_string().contains("may be written by others"), "{e}");
        assert!(Dir::open(&p, DirPolicy::PrivateOrSticky, false).is_err());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(Dir::open(&p, DirPolicy::Private, false).is_err());
        assert!(Dir::open(&p, DirPolicy::PrivateOrSticky, false).is_ok());
        let _ = std::fs::remove_dir_all(&p);
    }

    #[test]
    fn links_and_fifos_are_never_followed_or_waited_on() {
        let p = scratch("links");
        let d = Dir::open(&p, DirPolicy::Private, true).unwrap();
        let victim = p.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, p.join("link")).unwrap();
        let fifo = CString::new(p.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        for name in ["link", "fifo"] {
            match d.open_file(OsStr::new(name), true).unwrap() {
                Found::Unusable(_) => {}
                other => panic!("{name}: {other:?}"),
            }
            assert!(d.read(OsStr::new(name), 100).is_err());
            // Replacing writes a new file at the name, not through it.
            d.replace(OsStr::new(name), b"new", 0o644, false).unwrap();
            assert_eq!(std::fs::read(p.join(name)).unwrap(), b"new");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        for name in ["link2", "fifo2"] {
            if name == "link2" {
                std::os::unix::fs::symlink(&victim, p.join(name)).unwrap();
            } else {
                let c = CString::new(p.join(name).as_os_str().as_bytes()).unwrap();
                // SAFETY: a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            }
            let e = open_trusted(&p.join(name), &Owners::standard()).unwrap_err();
            assert!(
                e.to_string().contains("symbolic link") || e.to_string().contains("FIFO"),
                "{e}"
            );
        }
        // A lock over a link replaces the link.
        std::os::unix::fs::symlink(&victim, p.join("lock")).unwrap();
        let l = d.lock(OsStr::new("lock")).unwrap();
        assert_eq!(fstat(&l).unwrap().st_mode & 0o777, 0o600);
        assert!(d.lock(OsStr::new("lock")).is_err(), "a second lock");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let _ = std::fs::remove_dir_all(&p);
    }

    #[test]
    fn readers_refuse_files_others_may_write() {
        let p = scratch("modes");
        std::fs::create_dir_all(&p).unwrap();
        let f = p.join("seg");
        std::fs::write(&f, b"x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(open_trusted(&f, &Owners::standard()).is_ok());
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = open_trusted(&f, &Owners::any()).unwrap_err();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        let d = Dir::open(&p, DirPolicy::Private, false).unwrap();
        assert!(matches!(
            d.open_file(OsStr::new("seg"), false).unwrap(),
            Found::Unusable(_)
        ));
        let _ = std::fs::remove_dir_all(&p);
    }

    #[test]
    fn owners_parse() {
        assert_eq!(Owners::parse(""), Owners::standard());
        assert_eq!(Owners::parse(" any "), Owners::any());
        assert_eq!(Owners::parse("4242"), Owners::with_uid(4242));
        assert_eq!(Owners::parse("root"), Owners::with_uid(0));
        assert_eq!(Owners::parse("no-such-user-here"), Owners::standard());
        let me = euid();
        assert!(Owners::standard().accepts(0) && Owners::standard().accepts(me));
        assert!(Owners::with_uid(4242).accepts(4242));
        assert!(!Owners::standard().accepts(4242) || uid_of(DAEMON_USER) == Some(4242));
        assert!(Owners::any().accepts(4242));
    }

    #[test]
    fn temporaries_have_unpredictable_names() {
        let p = scratch("tmp");
        let d = Dir::open(&p, DirPolicy::Private, true).unwrap();
        let (_, a) = d.create_temp(OsStr::new("x"), 0o600).unwrap();
        let (_, b) = d.create_temp(OsStr::new("x"), 0o600).unwrap();
        assert_ne!(a, b);
        assert!(a.to_bytes().starts_with(b".x.") && a.to_bytes().ends_with(b".tmp"));
        let _ = std::fs::remove_dir_all(&p);
    }
}
