//! Planted files at the paths a reader or the writer opens: symbolic
//! links, FIFOs, files others may write, truncated segments, a foreign
//! lock. Readers refuse or fail within 100 ms (never hang, never a
//! signal); the writer never writes through what was planted.
//!
//! What needs root (another user's file, a device node) is in the
//! top-level `tests/adversary.rs`.

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use netgauge::capi::{ng_close, ng_open};
use netgauge::files::Owners;
use netgauge::{Reader, ReaderError, SegmentWriter};

/// A scratch directory (mode 0755) removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("nghostile-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(p)
    }
    fn at(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mkfifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Reader::open and ng_open of `p`: both fail, within 100 ms, with `errno`.
#[track_caller]
fn refused_quickly(p: &Path, errno: i32) -> ReaderError {
    let t = Instant::now();
    let e = Reader::open(p).expect_err("opened");
    assert_eq!(e.errno(), errno, "{e}");
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string; a non-NULL result is closed at once.
    let r = unsafe { ng_open(c.as_ptr()) };
    let err = std::io::Error::last_os_error().raw_os_error();
    // SAFETY: NULL or a reader from ng_open.
    unsafe { ng_close(r) };
    assert!(r.is_null(), "ng_open opened {}", p.display());
    assert_eq!(err, Some(errno));
    assert!(
        t.elapsed() < Duration::from_millis(100),
        "took {:?}",
        t.elapsed()
    );
    e
}

fn good_segment(path: &Path) -> SegmentWriter {
    let mut w = SegmentWriter::create_or_open(path, 4, "node001", "tsc").unwrap();
    w.upsert(&derived_entry("a", "rdma", 5)).unwrap();
    w
}

#[test]
fn readers_refuse_links_fifos_and_files_others_may_write() {
    let d = Scratch::new("reader");
    let seg = d.at("seg");
    let _w = good_segment(&seg);
    assert!(Reader::open(&seg).is_ok());

    // A symbolic link, even to a good segment, is not followed.
    std::os::unix::fs::symlink(&seg, d.at("link")).unwrap();
    let e = refused_quickly(&d.at("link"), libc::ELOOP);
    assert!(e.to_string().contains("symbolic link"), "{e}");
    // A link to a device (it would block or feed zeros).
    std::os::unix::fs::symlink("/dev/zero", d.at("zero")).unwrap();
    refused_quickly(&d.at("zero"), libc::ELOOP);

    // A FIFO: open(2) without O_NONBLOCK would wait for a writer forever.
    mkfifo(&d.at("fifo"));
    let e = refused_quickly(&d.at("fifo"), libc::EINVAL);
    assert!(e.to_string().contains("FIFO"), "{e}");
    // A directory.
    std::fs::create_dir(d.at("dir")).unwrap();
    refused_quickly(&d.at("dir"), libc::EINVAL);

    // A segment others may write (they could truncate it under a mapping).
    let open = d.at("open");
    std::fs::copy(&seg, &open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = refused_quickly(&open, libc::EPERM);
    assert!(e.to_string().contains("writable by group or others"), "{e}");
    // Relaxing the owner rule does not relax that.
    assert!(Reader::open_with(&open, &Owners::any()).is_err());
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = Reader::open(&open).unwrap();
    assert!(r.lookup("a", "rdma", 1).is_ok());
}

#[test]
fn a_truncated_segment_is_an_error_not_a_signal() {
    let d = Scratch::new("trunc");
    let seg = d.at("seg");
    drop(good_segment(&seg));
    let full = std::fs::read(&seg).unwrap();
    // Every prefix length class: empty, inside the header, past it but
    // short of the declared size.
    for len in [0, 100, 255, 256, 320, 4096, full.len() / 2, full.len() - 1] {
        let p = d.at(&format!("cut{len}"));
        std::fs::write(&p, &full[..len]).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let t = Instant::now();
        match Reader::open(&p) {
            Err(ReaderError::Invalid(_)) => {}
            other => panic!("{len} bytes: {other:?}"),
        }
        assert!(t.elapsed() < Duration::from_millis(100));
    }
}

#[test]
fn the_writer_replaces_what_was_planted_and_never_writes_through_it() {
    let d = Scratch::new("writer");
    let victim = d.at("victim");
    std::fs::write(&victim, b"precious").unwrap();

    // A link at the segment path: replaced, the victim untouched.
    let seg = d.at("seg");
    std::os::unix::fs::symlink(&victim, &seg).unwrap();
    let w = good_segment(&seg);
    assert!(w.replaced_unusable().is_some_and(|r| r.contains("link")));
    assert!(!std::fs::symlink_metadata(&seg)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    drop(w);

    // A FIFO: replaced at once, no open(2) that waits for a reader.
    let fifo = d.at("fifo");
    mkfifo(&fifo);
    let t = Instant::now();
    let w = good_segment(&fifo);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(std::fs::metadata(&fifo).unwrap().is_file());
    drop(w);

    // A file of ours that others may write: not adopted (its inode goes).
    let loose = d.at("loose");
    drop(good_segment(&loose));
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o666)).unwrap();
    let ino = std::fs::metadata(&loose).unwrap().ino();
    let w = good_segment(&loose);
    assert!(w.replaced_unusable().is_some());
    let m = std::fs::metadata(&loose).unwrap();
    assert_ne!(m.ino(), ino);
    assert_eq!(m.mode() & 0o777, 0o644);
    drop(w);

    // A link at the lock path: replaced by a private lock file.
    let seg2 = d.at("seg2");
    std::os::unix::fs::symlink(&victim, d.at("seg2.lock")).unwrap();
    let w = good_segment(&seg2);
    let lock = std::fs::symlink_metadata(d.at("seg2.lock")).unwrap();
    assert!(lock.is_file());
    assert_eq!(lock.mode() & 0o777, 0o600);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    drop(w);
}

#[test]
fn anyone_locking_the_segment_cannot_keep_the_writer_out() {
    let d = Scratch::new("lock");
    let seg = d.at("seg");
    drop(good_segment(&seg));
    // Any reader can open the segment and flock it: the writer's lock is
    // a private file beside it, so that changes nothing.
    let f = std::fs::File::open(&seg).unwrap();
    // SAFETY: flock on a valid descriptor.
    assert_eq!(
        unsafe {
            libc::flock(
                std::os::fd::AsRawFd::as_raw_fd(&f),
                libc::LOCK_EX | libc::LOCK_NB,
            )
        },
        0
    );
    let w = good_segment(&seg);
    // A second writer is still refused.
    let e = SegmentWriter::create_or_open(&seg, 4, "node001", "tsc").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    drop(w);
}

#[test]
fn a_directory_others_may_write_is_refused_a_sticky_one_is_not() {
    let d = Scratch::new("dirs");
    let open = d.at("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = SegmentWriter::create_or_open(open.join("seg"), 4, "n", "c").unwrap_err();
    assert!(e.to_string().contains("may be written by others"), "{e}");
    assert!(!open.join("seg").exists());
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(SegmentWriter::create_or_open(open.join("seg"), 4, "n", "c").is_ok());
}

/// The reproducer of a crafted slot word: a tag that matches with an index
/// part of 0 (which once underflowed). Every lookup, Rust and C, answers
/// "invalid segment", and nothing panics across `extern "C"`.
#[test]
fn a_crafted_slot_word_is_an_error() {
    use netgauge::capi::ng_lookup;
    use netgauge::layout::Layout;
    use netgauge::{LookupError, Params};
    let d = Scratch::new("slot");
    let seg = d.at("seg");
    let mut w = SegmentWriter::create_or_open(&seg, 8, "node001", "tsc").unwrap();
    for (i, p) in ["a", "b", "c"].iter().enumerate() {
        w.upsert(&derived_entry(p, "rdma", i as u64)).unwrap();
    }
    drop(w);
    let mut b = std::fs::read(&seg).unwrap();
    let layout = Layout::new(8).unwrap();
    let seq = u64::from_le_bytes(b[192..200].try_into().unwrap());
    let slots = layout.copy_offset[(seq & 1) as usize] + layout.slots_offset;
    for s in 0..layout.hash_slots {
        let off = slots + 8 * s;
        let w = u64::from_le_bytes(b[off..off + 8].try_into().unwrap());
        if w != 0 {
            b[off..off + 8].copy_from_slice(&(w & !0xFFFF_FFFF).to_le_bytes());
        }
    }
    std::fs::write(&seg, &b).unwrap();
    let mut r = Reader::open(&seg).unwrap();
    r.set_stale_after_ns(0);
    for p in ["a", "b", "c"] {
        assert_eq!(r.lookup(p, "rdma", 1), Err(LookupError::Invalid), "{p}");
        assert_eq!(r.index(p, "rdma"), None);
    }
    let c = CString::new(seg.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid C strings and out-param; the reader is closed once.
    unsafe {
        let r = ng_open(c.as_ptr());
        assert!(!r.is_null());
        netgauge::capi::ng_set_stale_after_ns(r, 0);
        let mut out = Params::default();
        assert_eq!(
            ng_lookup(r, c"a".as_ptr(), c"rdma".as_ptr(), 1, &mut out),
            -libc::EINVAL
        );
        ng_close(r);
    }
}
