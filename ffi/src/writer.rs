//! The writer (daemon and `ngctl probe --publish`): one per segment, enforced
//! with an advisory `flock`. See reader.rs for the latch protocol.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::layout::*;
use crate::sys::{self, Mapping};
use crate::types::*;
use crate::view::{self, Seg};

/// An in-memory entry plus what the writer needs to store it.
struct Slot {
    data: EntryData,
    flags: u32,
    peer: [u64; 8],
    transport: [u64; 2],
    hash: u64,
}

/// Owner of a segment file: creates or re-opens it, publishes entries.
pub struct SegmentWriter {
    seg: Seg,
    _file: File,
    path: PathBuf,
    entries: Vec<Slot>,
    by_key: HashMap<(String, String), usize>,
    /// Slot words of the name table, rebuilt on insert.
    table: Vec<u64>,
    /// Per copy: entries whose contents in that copy are out of date.
    dirty: [Vec<bool>; 2],
    /// Per copy: the name table in that copy is out of date.
    table_dirty: [bool; 2],
    node_name: String,
    clock_desc: String,
    generation: u64,
    pid: u64,
    seq: u64,
}

impl std::fmt::Debug for SegmentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentWriter")
            .field("path", &self.path)
            .field("capacity", &self.seg.layout().capacity)
            .field("entries", &self.entries.len())
            .field("generation", &self.generation)
            .field("seq", &self.seq)
            .finish()
    }
}

fn invalid_input(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

impl SegmentWriter {
    /// Creates the segment at `path` (mode 0644, via a temporary file and
    /// rename), or re-opens an existing compatible one (same ABI, same
    /// capacity) in place, keeping its inode and its entries, so that
    /// running readers keep a valid mapping. Either way a new random
    /// generation is set and the writer holds an exclusive `flock` on the
    /// file (a second writer gets `WouldBlock`). An existing file that is
    /// incompatible or corrupt is replaced (readers of the old inode see the
    /// heartbeat stop and go stale).
    pub fn create_or_open(
        path: impl AsRef<Path>,
        capacity_entries: usize,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        let path = path.as_ref();
        let layout = Layout::new(capacity_entries)
            .ok_or_else(|| invalid_input("capacity must be 1..=65536 entries"))?;
        if pack_name::<8>(node_name.as_bytes()).is_none() {
            return Err(invalid_input("node name longer than 63 bytes or has NUL"));
        }
        if pack_name::<16>(clock_desc.as_bytes()).is_none() {
            return Err(invalid_input(
                "clock description longer than 127 bytes or has NUL",
            ));
        }
        match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => {
                sys::lock_exclusive(&file)?;
                if let Some(w) = Self::reopen(file, path, layout, node_name, clock_desc)? {
                    return Ok(w);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Self::create(path, layout, node_name, clock_desc)
    }

    fn blank(
        seg: Seg,
        file: File,
        path: &Path,
        node_name: &str,
        clock_desc: &str,
    ) -> SegmentWriter {
        let l = *seg.layout();
        SegmentWriter {
            seg,
            _file: file,
            path: path.to_path_buf(),
            entries: Vec::new(),
            by_key: HashMap::new(),
            table: vec![0; l.hash_slots],
            dirty: [vec![false; l.capacity], vec![false; l.capacity]],
            table_dirty: [true, true],
            node_name: node_name.to_string(),
            clock_desc: clock_desc.to_string(),
            generation: sys::random_u64(),
            pid: u64::from(std::process::id()),
            seq: 0,
        }
    }

    /// Re-opens an existing file; Ok(None) when it must be replaced.
    fn reopen(
        file: File,
        path: &Path,
        layout: Layout,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<Option<SegmentWriter>> {
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(0);
        if len != layout.total_bytes {
            return Ok(None);
        }
        let map = Mapping::map(&file, len, true)?;
        let seg = match Seg::new(map) {
            Ok(s) if *s.layout() == layout => s,
            _ => return Ok(None),
        };
        let h = seg.header();
        if h.abi_minor.load(Ordering::Relaxed) != ABI_MINOR {
            return Ok(None);
        }
        // Read the published copy. We hold the lock: no other writer runs,
        // so a plain read of copy[seq & 1] is consistent.
        let seq = h.seq.load(Ordering::Acquire);
        let c = (seq & 1) as usize;
        let n = seg.meta(c).entry_count.load(Ordering::Relaxed);
        if n > layout.capacity as u64 {
            return Ok(None);
        }
        let mut data = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            let Some(e) = seg.entry(c, i) else {
                return Ok(None);
            };
            match view::decode_entry(e) {
                Ok(d) => data.push(d),
                Err(_) => return Ok(None),
            }
        }
        let mut w = Self::blank(seg, file, path, node_name, clock_desc);
        w.seq = seq;
        for d in data {
            if w.insert_slot(d).is_err() {
                return Ok(None);
            }
        }
        // Both copies get fully rewritten: the unpublished one may hold a
        // half-written update from a writer that died.
        for c in 0..2 {
            w.dirty[c][..w.entries.len()].fill(true);
            w.table_dirty[c] = true;
        }
        let h = w.seg.header();
        h.generation.store(w.generation, Ordering::Relaxed);
        h.writer_pid.store(w.pid, Ordering::Relaxed);
        w.heartbeat();
        w.publish();
        Ok(Some(w))
    }

    fn create(
        path: &Path,
        layout: Layout,
        node_name: &str,
        clock_desc: &str,
    ) -> io::Result<SegmentWriter> {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .ok_or_else(|| invalid_input("segment path has no file name"))?;
        let tmp = dir.join(format!(
            ".{}.{}.{:x}.tmp",
            name.to_string_lossy(),
            std::process::id(),
            sys::random_u64()
        ));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        let result = (|| {
            sys::fchmod(&file, 0o644)?;
            sys::lock_exclusive(&file)?;
            file.set_len(layout.total_bytes as u64)?;
            let map = Mapping::map(&file, layout.total_bytes, true)?;
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
            h.created_unix_ns
                .store(sys::realtime_ns(), Ordering::Relaxed);
            h.seq.store(0, Ordering::Relaxed);
            h.magic.store(MAGIC, Ordering::Release);
            let seg = Seg::new(map)
                .map_err(|e| io::Error::other(format!("fresh segment invalid: {e}")))?;
            Ok::<Seg, io::Error>(seg)
        })();
        let seg = match result {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let mut w = Self::blank(seg, file, path, node_name, clock_desc);
        let h = w.seg.header();
        h.generation.store(w.generation, Ordering::Relaxed);
        h.writer_pid.store(w.pid, Ordering::Relaxed);
        // Copy 0 (published as seq 0) and copy 1 both start empty with this
        // identity.
        w.write_copy(0);
        w.write_copy(1);
        w.heartbeat();
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(w)
    }

    fn insert_slot(&mut self, d: EntryData) -> Result<usize, SegmentError> {
        let (fl, peer, transport) = view::check_entry(&d).map_err(SegmentError::BadEntry)?;
        let hash = key_hash(&peer, d.peer.len(), &transport, d.transport.len());
        let key = (d.peer.clone(), d.transport.clone());
        if let Some(&i) = self.by_key.get(&key) {
            self.entries[i] = Slot {
                data: d,
                flags: fl,
                peer,
                transport,
                hash,
            };
            return Ok(i);
        }
        let capacity = self.seg.layout().capacity;
        if self.entries.len() >= capacity {
            return Err(SegmentError::Full { capacity });
        }
        let i = self.entries.len();
        // Linear probing; the table has ≥ 2·capacity slots, so a free one exists.
        let mask = self.table.len() - 1;
        let mut s = hash as usize & mask;
        while self.table[s] != 0 {
            s = (s + 1) & mask;
        }
        self.table[s] = slot_word(hash, i);
        self.table_dirty = [true, true];
        self.entries.push(Slot {
            data: d,
            flags: fl,
            peer,
            transport,
            hash,
        });
        self.by_key.insert(key, i);
        Ok(i)
    }

    /// Writes copy `c` from the in-memory state (everything dirty for it).
    fn write_copy(&mut self, c: usize) {
        let m = self.seg.meta(c);
        m.entry_count
            .store(self.entries.len() as u64, Ordering::Relaxed);
        m.generation.store(self.generation, Ordering::Relaxed);
        m.writer_pid.store(self.pid, Ordering::Relaxed);
        m.published_unix_ns
            .store(sys::realtime_ns(), Ordering::Relaxed);
        m.node_len
            .store(self.node_name.len() as u64, Ordering::Relaxed);
        m.clock_len
            .store(self.clock_desc.len() as u64, Ordering::Relaxed);
        view::write_name(&m.node_name, self.node_name.as_bytes());
        view::write_name(&m.clock_desc, self.clock_desc.as_bytes());
        if self.table_dirty[c] {
            for (i, w) in self.table.iter().enumerate() {
                self.seg.slot(c, i).store(*w, Ordering::Relaxed);
            }
            self.table_dirty[c] = false;
        }
        for (i, s) in self.entries.iter().enumerate() {
            if !self.dirty[c][i] {
                continue;
            }
            if let Some(e) = self.seg.entry(c, i) {
                view::encode_entry(e, &s.data, s.flags, &s.peer, &s.transport, s.hash);
            }
            self.dirty[c][i] = false;
        }
    }

    /// Fills the copy readers are not directed to, then flips them to it.
    fn publish(&mut self) {
        let next = self.seq.wrapping_add(1);
        let c = (next & 1) as usize;
        // Orders our earlier store `seq = self.seq` before every store into
        // copy c below (readers of copy c under the old sequence detect us,
        // see reader.rs).
        fence(Ordering::Release);
        self.write_copy(c);
        self.seg.header().seq.store(next, Ordering::Release);
        self.seq = next;
    }

    /// Test hook: simulates a writer that dies mid-update. Writes the first
    /// part of the update of `d` into the unpublished copy and returns
    /// without publishing. Not for production use.
    #[doc(hidden)]
    pub fn begin_update_without_publish(&mut self, d: &EntryData) -> Result<(), SegmentError> {
        let (fl, peer, transport) = view::check_entry(d).map_err(SegmentError::BadEntry)?;
        let hash = key_hash(&peer, d.peer.len(), &transport, d.transport.len());
        let i = *self
            .by_key
            .get(&(d.peer.clone(), d.transport.clone()))
            .ok_or(SegmentError::NotFound)?;
        let c = ((self.seq + 1) & 1) as usize;
        fence(Ordering::Release);
        if let Some(e) = self.seg.entry(c, i) {
            view::encode_entry(e, d, fl, &peer, &transport, hash);
            // Leave the entry half-old: scribble over the ranges as well.
            for r in &e.ranges {
                r.g_ns.store(f64::NAN.to_bits(), Ordering::Relaxed);
            }
        }
        self.dirty[c][i] = true;
        Ok(())
    }

    /// Inserts or replaces the entry for (peer, transport) and publishes it
    /// atomically. Returns its index (stable for the life of the segment).
    pub fn upsert(&mut self, d: &EntryData) -> Result<usize, SegmentError> {
        let i = self.insert_slot(d.clone())?;
        self.dirty[0][i] = true;
        self.dirty[1][i] = true;
        self.publish();
        Ok(i)
    }

    /// Sets the STALE flag on (peer, transport) and publishes.
    pub fn mark_stale(&mut self, peer: &str, transport: &str) -> Result<(), SegmentError> {
        let i = *self
            .by_key
            .get(&(peer.to_string(), transport.to_string()))
            .ok_or(SegmentError::NotFound)?;
        self.entries[i].flags |= flags::STALE;
        self.entries[i].data.flags |= flags::STALE;
        self.dirty[0][i] = true;
        self.dirty[1][i] = true;
        self.publish();
        Ok(())
    }

    /// Stores the current CLOCK_REALTIME (ns) in the heartbeat word. The
    /// daemon calls it every second.
    pub fn heartbeat(&self) {
        let now = sys::realtime_ns().max(1);
        self.seg
            .header()
            .heartbeat_unix_ns
            .store(now, Ordering::Release);
    }

    /// Clean shutdown: zeroes the heartbeat, so readers answer -ESTALE
    /// ("daemon gone") at once. Dropping the writer without calling this
    /// leaves the heartbeat to age out.
    pub fn shutdown(self) {
        self.seg
            .header()
            .heartbeat_unix_ns
            .store(0, Ordering::Release);
    }

    /// The published entries, read back from the segment.
    pub fn entries(&self) -> Vec<EntryData> {
        let c = (self.seq & 1) as usize;
        (0..self.entries.len())
            .filter_map(|i| {
                self.seg
                    .entry(c, i)
                    .and_then(|e| view::decode_entry(e).ok())
            })
            .collect()
    }

    /// This writer's random generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The segment path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Entry capacity of the segment.
    pub fn capacity(&self) -> usize {
        self.seg.layout().capacity
    }

    /// Number of publishes since creation (the latch sequence).
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

fn header_ptr(map: &Mapping) -> &HeaderRaw {
    // SAFETY: the mapping is at least `total_bytes` ≥ 256 bytes long (set_len
    // then mmap of that length), page-aligned, and HeaderRaw is all atomics.
    unsafe { &*(map.base() as *const HeaderRaw) }
}
