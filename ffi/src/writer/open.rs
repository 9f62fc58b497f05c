//! Creating, re-opening and locking the segment file: the open paths of
//! [`SegmentWriter`] (what a file must be to be used; see `crate::files`).

use super::*;
use std::os::fd::AsRawFd;

fn invalid_input(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

/// The lock file of segment `name`: `<name>.lock`.
pub fn lock_name(name: &OsStr) -> OsString {
    let mut l = name.to_os_string();
    l.push(".lock");
    l
}

impl SegmentWriter {
    /// Creates the segment at `path` (mode 0644, via a temporary file and
    /// rename), or re-opens an existing compatible one (same ABI, same
    /// capacity) in place, keeping its inode and its entries, so that
    /// running readers keep a valid mapping; its heartbeat stays as the
    /// last writer left it until the caller calls
    /// [`heartbeat`](SegmentWriter::heartbeat) (a new segment's beats at
    /// once). Either way a new random
    /// generation is set and the writer holds an exclusive `flock` on the
    /// private lock file `<path>.lock` (a second writer gets `WouldBlock`;
    /// the segment itself, which everybody may open, is never locked). An
    /// existing file that is incompatible, corrupt, or not this user's
    /// regular file writable by it alone (a link, a FIFO, another user's
    /// file) is replaced by a new one (readers of the old inode see the
    /// heartbeat stop and go stale; a link is replaced, never followed).
    /// The directory must be this user's (or root's) and writable by nobody
    /// else, or sticky (/tmp, /dev/shm). Class and map capacities are those
    /// of [`SegmentOptions::new`].
    pub fn create_or_open(
        path: impl AsRef<Path>,
        capacity_entries: usize,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        Self::create_or_open_with(
            path,
            &SegmentOptions::new(capacity_entries),
            node_name,
            clock_desc,
        )
    }

    /// [`SegmentWriter::create_or_open`] with explicit sizes. A segment
    /// re-opened in place must have exactly these sizes.
    pub fn create_or_open_with(
        path: impl AsRef<Path>,
        options: &SegmentOptions,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        let path = path.as_ref();
        let name = path
            .file_name()
            .ok_or_else(|| invalid_input("segment path has no file name"))?;
        let parent = path.parent().unwrap_or(Path::new("."));
        let dir = Dir::open(parent, DirPolicy::PrivateOrSticky, false)?;
        Self::create_or_open_in(&dir, name, options, node_name, clock_desc)
    }

    /// [`SegmentWriter::create_or_open_with`] for the file `name` of a
    /// directory the caller opened (the daemon: its runtime directory,
    /// opened [`DirPolicy::Private`]).
    pub fn create_or_open_in(
        dir: &Dir,
        name: &OsStr,
        options: &SegmentOptions,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        let layout = options.layout().ok_or_else(|| {
            invalid_input(
                "capacity must be 1..=65536 entries, classes 1..=1024, mapped peers 1..=8192",
            )
        })?;
        if pack_name::<8>(node_name.as_bytes()).is_none() {
            return Err(invalid_input("node name longer than 63 bytes or has NUL"));
        }
        if pack_name::<16>(clock_desc.as_bytes()).is_none() {
            return Err(invalid_input(
                "clock description longer than 127 bytes or has NUL",
            ));
        }
        let lock = dir.lock(&lock_name(name))?;
        let replaced = match dir.open_file(name, true)? {
            Found::File(file) => {
                match Self::reopen(file, lock, dir, name, layout, node_name, clock_desc)? {
                    Ok(w) => return Ok(w),
                    Err(lock) => {
                        return Self::create(dir, name, lock, None, layout, node_name, clock_desc)
                    }
                }
            }
            Found::Absent => None,
            Found::Unusable(why) => Some(why),
        };
        Self::create(dir, name, lock, replaced, layout, node_name, clock_desc)
    }

    /// Why an existing file at the segment's name was replaced instead of
    /// re-opened because it was not this user's private regular file (a
    /// link, a FIFO, another user's file, one others may write), if so.
    pub fn replaced_unusable(&self) -> Option<&str> {
        self.replaced.as_deref()
    }

    /// A writer of the segment `name` in `dir` with nothing inserted yet.
    fn blank(
        seg: Seg,
        file: File,
        lock: File,
        dir: &Dir,
        name: &OsStr,
        node_name: &str,
        clock_desc: &str,
    ) -> SegmentWriter {
        let l = *seg.layout();
        SegmentWriter {
            seg,
            _file: file,
            _lock: lock,
            replaced: None,
            path: dir.path().join(name),
            entries: Vec::new(),
            by_key: HashMap::new(),
            table: vec![0; l.hash_slots],
            dirty: [Dirty::everything(), Dirty::everything()],
            transports: Vec::new(),
            classes: Vec::new(),
            class_ids: HashMap::new(),
            map: Vec::new(),
            map_ids: HashMap::new(),
            map_table: vec![0; l.ext.map_or(0, |x| x.map_slots)],
            node_name: node_name.to_string(),
            clock_desc: clock_desc.to_string(),
            generation: sys::random_u64(),
            pid: u64::from(std::process::id()),
            seq: 0,
        }
    }

    /// Re-opens an existing file of exactly `layout`'s size in place;
    /// `Ok(Err(lock))` when it must be replaced (never truncated or shrunk:
    /// readers may have it mapped).
    #[allow(clippy::too_many_arguments)]
    fn reopen(
        file: File,
        lock: File,
        dir: &Dir,
        name: &OsStr,
        layout: Layout,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<Result<SegmentWriter, File>> {
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(0);
        if len != layout.file_bytes {
            return Ok(Err(lock));
        }
        // A file from before its blocks were allocated up front may have
        // holes: allocate them (the size does not change).
        allocate(&file, len)?;
        let map = Mapping::map(&file, len, true)?;
        let seg = match Seg::new(map) {
            Ok(s) if *s.layout() == layout => s,
            _ => return Ok(Err(lock)),
        };
        let h = seg.header();
        if h.abi_minor.load(Ordering::Relaxed) != ABI_MINOR {
            return Ok(Err(lock));
        }
        // Read the published copy. We hold the lock: no other writer runs,
        // so a plain read of copy[seq & 1] is consistent.
        let seq = h.seq.load(Ordering::Acquire);
        let c = (seq & 1) as usize;
        let n = seg.meta(c).entry_count.load(Ordering::Relaxed);
        if n > layout.capacity as u64 {
            return Ok(Err(lock));
        }
        let mut data = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            let Some(e) = seg.entry(c, i) else {
                return Ok(Err(lock));
            };
            match view::decode_entry(e, seg.entry_ext(c, i)) {
                Ok(d) => data.push(d),
                Err(_) => return Ok(Err(lock)),
            }
        }
        let Ok((transports, classes, map)) = read_back_ext(&seg, c) else {
            return Ok(Err(lock));
        };
        let mut w = Self::blank(seg, file, lock, dir, name, node_name, clock_desc);
        w.seq = seq;
        let filled = data.into_iter().all(|d| w.insert_slot(d).is_ok())
            && transports
                .iter()
                .all(|(t, x)| w.insert_transport(t, x).is_ok())
            && classes.iter().all(|c| w.intern_class(c).is_ok())
            && map.iter().all(|(p, c)| w.map_peer(p, *c).is_ok());
        if !filled {
            return Ok(Err(w._lock));
        }
        // Both copies get fully rewritten: the unpublished one may hold a
        // half-written update from a writer that died.
        w.dirty = [Dirty::everything(), Dirty::everything()];
        let h = w.seg.header();
        h.generation.store(w.generation, Ordering::Relaxed);
        h.writer_pid.store(w.pid, Ordering::Relaxed);
        // The heartbeat stays as the last writer left it (zero after a
        // clean stop: readers answer -ESTALE): the previous run's entries
        // are not made current before the caller has reconciled them and
        // beats itself.
        w.publish();
        Ok(Ok(w))
    }

    /// A new segment under a temporary name, renamed over `name` once
    /// initialised (whatever was at `name` is replaced, never written).
    fn create(
        dir: &Dir,
        name: &OsStr,
        lock: File,
        replaced: Option<String>,
        layout: Layout,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        let (file, tmp) = dir.create_temp(name, 0o644)?;
        let result = (|| {
            allocate(&file, layout.file_bytes)?;
            let map = Mapping::map(&file, layout.file_bytes, true)?;
            // Plain initialisation through atomics: the file is not visible
            // to readers until the rename below.
            let h = header_ptr(&map);
            h.abi_major.store(ABI_MAJOR, Ordering::Relaxed);
            h.abi_minor.store(ABI_MINOR, Ordering::Relaxed);
            h.header_bytes
                .store(layout.header_bytes as u32, Ordering::Relaxed);
            h.meta_bytes
                .store(layout.meta_bytes as u32, Ordering::Relaxed);
            h.entry_bytes
                .store(layout.entry_bytes as u32, Ordering::Relaxed);
            h.capacity_entries
                .store(layout.capacity as u32, Ordering::Relaxed);
            h.hash_slots
                .store(layout.hash_slots as u32, Ordering::Relaxed);
            h.max_ranges.store(MAX_RANGES as u32, Ordering::Relaxed);
            h.max_curve.store(MAX_CURVE as u32, Ordering::Relaxed);
            h.max_ci.store(MAX_CI as u32, Ordering::Relaxed);
            h.total_bytes
                .store(layout.total_bytes as u64, Ordering::Relaxed);
            h.copy_bytes
                .store(layout.copy_bytes as u64, Ordering::Relaxed);
            h.copy_offset[0].store(layout.copy_offset[0] as u64, Ordering::Relaxed);
            h.copy_offset[1].store(layout.copy_offset[1] as u64, Ordering::Relaxed);
            h.capabilities.store(CAPABILITIES, Ordering::Relaxed);
            if let Some(x) = layout.ext {
                let hx = header_ext_ptr(&map);
                hx.class_capacity
                    .store(x.class_capacity as u32, Ordering::Relaxed);
                hx.map_capacity
                    .store(x.map_capacity as u32, Ordering::Relaxed);
                hx.map_slots.store(x.map_slots as u32, Ordering::Relaxed);
                hx.transport_records
                    .store(TRANSPORT_RECORDS as u32, Ordering::Relaxed);
                hx.max_latency.store(MAX_LATENCY as u32, Ordering::Relaxed);
                hx.max_k.store(MAX_K as u32, Ordering::Relaxed);
                hx.schemes.store(SCHEMES as u32, Ordering::Relaxed);
            }
            if let Some(x) = layout.hot {
                let hx = header_ext_ptr(&map);
                hx.hot_record_bytes
                    .store(x.record_bytes as u32, Ordering::Relaxed);
                hx.hot_offset.store(x.offset as u64, Ordering::Relaxed);
                hx.file_bytes.store(x.file_bytes as u64, Ordering::Relaxed);
            }
            h.created_unix_ns
                .store(sys::realtime_ns(), Ordering::Relaxed);
            h.seq.store(0, Ordering::Relaxed);
            h.magic.store(MAGIC, Ordering::Release);
            let seg = Seg::new(map)
                .map_err(|e| io::Error::other(format!("fresh segment invalid: {e}")))?;
            Ok::<Seg, io::Error>(seg)
        })();
        let tmp_name = OsStr::from_bytes(tmp.to_bytes());
        let seg = match result {
            Ok(s) => s,
            Err(e) => {
                let _ = dir.remove(tmp_name);
                return Err(e);
            }
        };
        let mut w = Self::blank(seg, file, lock, dir, name, node_name, clock_desc);
        w.replaced = replaced;
        let h = w.seg.header();
        h.generation.store(w.generation, Ordering::Relaxed);
        h.writer_pid.store(w.pid, Ordering::Relaxed);
        // Copy 0 (published as seq 0) and copy 1 both start empty with this
        // identity.
        w.write_copy(0);
        w.write_copy(1);
        w.heartbeat();
        if let Err(e) = dir.rename(&tmp, name) {
            let _ = dir.remove(tmp_name);
            return Err(e);
        }
        Ok(w)
    }
}

/// Gives `file` its `bytes` of storage now (posix_fallocate): a segment
/// with holes would meet a full file system (a full /run) in a store to a
/// page not written before, and a store there is a SIGBUS in the writer
/// (and, on tmpfs, in a reader that touches the page), not an error.
fn allocate(file: &File, bytes: usize) -> io::Result<()> {
    let len = libc::off_t::try_from(bytes).map_err(|_| invalid_input("segment too large"))?;
    // SAFETY: posix_fallocate on a descriptor we own; no memory is passed.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}
