//! The writer (daemon and `ngctl probe --publish`): one per segment, enforced
//! with an advisory `flock` on a private lock file beside it. See reader.rs
//! for the latch protocol, files.rs for how the files are opened.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use crate::ext::TransportExt;
use crate::files::{Dir, DirPolicy, Found};
use crate::layout::*;
use crate::sys::{self, Mapping};
use crate::types::*;
use crate::view::{self, Seg};

/// Sizes of a segment, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentOptions {
    /// Entries (peer, transport) and (class, transport), 1 ..= 65536.
    pub capacity_entries: usize,
    /// Coverage classes, 1 ..= MAX_CLASSES.
    pub class_capacity: usize,
    /// Peers of the peer → class map, 1 ..= MAX_MAP_PEERS.
    pub map_capacity: usize,
}

impl SegmentOptions {
    /// `capacity_entries` entries and as many classes and mapped peers, up
    /// to MAX_CLASSES and MAX_MAP_PEERS.
    pub fn new(capacity_entries: usize) -> SegmentOptions {
        SegmentOptions {
            capacity_entries,
            class_capacity: capacity_entries.clamp(1, MAX_CLASSES),
            map_capacity: capacity_entries.clamp(1, MAX_MAP_PEERS),
        }
    }

    fn layout(&self) -> Option<Layout> {
        let ext = ExtLayout::new(
            self.class_capacity,
            self.map_capacity,
            (2 * self.map_capacity).next_power_of_two(),
        )?;
        Layout::with_ext(self.capacity_entries, ext)
    }
}

/// Work a copy still needs: indices of entries, slots, records written
/// since that copy was last filled, or everything.
#[derive(Default)]
struct Dirty {
    all: bool,
    entries: Vec<usize>,
    slots: Vec<usize>,
    classes: Vec<usize>,
    map_slots: Vec<usize>,
    map_records: Vec<usize>,
    transports: bool,
}

impl Dirty {
    fn everything() -> Dirty {
        Dirty {
            all: true,
            transports: true,
            ..Dirty::default()
        }
    }
}

/// 0..n when everything is dirty, else the listed indices.
fn dirty_ids(all: bool, n: usize, list: &[usize]) -> impl Iterator<Item = usize> + '_ {
    (0..if all { n } else { 0 }).chain(list.iter().copied().filter(move |_| !all))
}

/// One per-transport record.
struct TransportSlot {
    name: String,
    words: [u64; 2],
    data: TransportExt,
}

/// One peer of the peer → class map.
struct MapSlot {
    words: [u64; 8],
    len: usize,
    hash: u64,
    class: usize,
}

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
    /// The single-writer lock (`<segment>.lock`, mode 0600), held for the
    /// writer's life.
    _lock: File,
    /// Why an existing file at the segment's name was replaced, if one was.
    replaced: Option<String>,
    path: PathBuf,
    entries: Vec<Slot>,
    by_key: HashMap<(String, String), usize>,
    /// Slot words of the name table.
    table: Vec<u64>,
    /// Per copy: what in that copy is out of date.
    dirty: [Dirty; 2],
    transports: Vec<TransportSlot>,
    /// Class names (peer names of the class entries) and their ids.
    classes: Vec<(String, [u64; 8])>,
    class_ids: HashMap<String, usize>,
    /// The peer → class map: records, by peer name, and its slot words.
    map: Vec<MapSlot>,
    map_ids: HashMap<String, usize>,
    map_table: Vec<u64>,
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

pub use open::lock_name;

mod open;

impl SegmentWriter {
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
        for d in &mut self.dirty {
            d.slots.push(s);
        }
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

    /// Writes copy `c` from the in-memory state (what is dirty for it).
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
        let dirty = std::mem::take(&mut self.dirty[c]);
        self.write_ext(c, &dirty);
        for i in dirty_ids(dirty.all, self.table.len(), &dirty.slots) {
            self.seg.slot(c, i).store(self.table[i], Ordering::Relaxed);
        }
        for i in dirty_ids(dirty.all, self.entries.len(), &dirty.entries) {
            let s = &self.entries[i];
            if let Some(e) = self.seg.entry(c, i) {
                let x = self.seg.entry_ext(c, i);
                view::encode_entry(e, x, &s.data, s.flags, &s.peer, &s.transport, s.hash);
            }
            if let Some(h) = self.seg.hot(c, i) {
                view::encode_hot(h, &s.data, s.flags, s.hash);
            }
        }
    }

    /// The ABI 1.1 part of [`SegmentWriter::write_copy`]: counts, transport
    /// records, classes, the map.
    fn write_ext(&self, c: usize, dirty: &Dirty) {
        let Some(me) = self.seg.meta_ext(c) else {
            return;
        };
        me.transport_count
            .store(self.transports.len() as u64, Ordering::Relaxed);
        me.class_count
            .store(self.classes.len() as u64, Ordering::Relaxed);
        me.map_count.store(self.map.len() as u64, Ordering::Relaxed);
        if dirty.transports {
            for (raw, t) in me.transports.iter().zip(&self.transports) {
                view::encode_transport(raw, &t.words, t.name.len(), &t.data);
            }
        }
        for i in dirty_ids(dirty.all, self.classes.len(), &dirty.classes) {
            if let Some(raw) = self.seg.class(c, i) {
                let (name, words) = &self.classes[i];
                raw.len.store(name.len() as u64, Ordering::Relaxed);
                view::store_name_words(&raw.name, words);
            }
        }
        for i in dirty_ids(dirty.all, self.map_table.len(), &dirty.map_slots) {
            if let Some(raw) = self.seg.map_slot(c, i) {
                raw.store(self.map_table[i], Ordering::Relaxed);
            }
        }
        for i in dirty_ids(dirty.all, self.map.len(), &dirty.map_records) {
            if let Some(raw) = self.seg.map_record(c, i) {
                let r = &self.map[i];
                view::store_name_words(&raw.peer, &r.words);
                raw.info
                    .store(r.len as u64 | (r.class as u64) << 8, Ordering::Relaxed);
                raw.hash.store(r.hash, Ordering::Relaxed);
            }
        }
    }

    fn mark_entry(&mut self, i: usize) {
        for d in &mut self.dirty {
            d.entries.push(i);
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
            view::encode_entry(e, self.seg.entry_ext(c, i), d, fl, &peer, &transport, hash);
            // Leave the entry half-old: scribble over the ranges as well.
            for r in &e.ranges {
                r.g_ns.store(f64::NAN.to_bits(), Ordering::Relaxed);
            }
        }
        if let Some(h) = self.seg.hot(c, i) {
            view::encode_hot(h, d, fl, hash);
            for r in &h.ranges {
                r.g_ns.store(f64::NAN.to_bits(), Ordering::Relaxed);
            }
        }
        self.dirty[c].entries.push(i);
        Ok(())
    }

    /// Inserts or replaces the entry for (peer, transport) and publishes it
    /// atomically. Returns its index (stable for the life of the segment).
    pub fn upsert(&mut self, d: &EntryData) -> Result<usize, SegmentError> {
        let i = self.insert_slot(d.clone())?;
        self.mark_entry(i);
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
        self.mark_entry(i);
        self.publish();
        Ok(())
    }

    fn insert_transport(&mut self, transport: &str, t: &TransportExt) -> Result<(), SegmentError> {
        let words: [u64; 2] = pack_name(transport.as_bytes())
            .filter(|_| !transport.is_empty())
            .ok_or(SegmentError::BadTransport(
                "transport name must be 1..=15 bytes without NUL",
            ))?;
        view::check_transport(t).map_err(SegmentError::BadTransport)?;
        let full = self.transports.len() >= TRANSPORT_RECORDS;
        match self.transports.iter_mut().find(|s| s.name == transport) {
            Some(s) => s.data = *t,
            None if full => {
                return Err(SegmentError::TableFull {
                    table: "transport record",
                    capacity: TRANSPORT_RECORDS,
                })
            }
            None => self.transports.push(TransportSlot {
                name: transport.to_string(),
                words,
                data: *t,
            }),
        }
        for d in &mut self.dirty {
            d.transports = true;
        }
        Ok(())
    }

    /// Sets (inserts or replaces) the per-transport record of `transport`
    /// (contention penalties, sharing fit, bisection) and publishes it. At
    /// most [`TRANSPORT_RECORDS`] transports.
    pub fn set_transport_ext(
        &mut self,
        transport: &str,
        t: &TransportExt,
    ) -> Result<(), SegmentError> {
        self.insert_transport(transport, t)?;
        self.publish();
        Ok(())
    }

    /// The per-transport record of `transport` as last set.
    pub fn transport_ext(&self, transport: &str) -> Option<&TransportExt> {
        self.transports
            .iter()
            .find(|s| s.name == transport)
            .map(|s| &s.data)
    }

    fn check_class(class: &str) -> Result<[u64; 8], SegmentError> {
        let words: Option<[u64; 8]> = pack_name(class.as_bytes());
        match words {
            Some(w) if class.len() >= 2 && class.as_bytes()[0] == CLASS_PREFIX => Ok(w),
            _ => Err(SegmentError::BadClass(
                "class name must be '@' and 1..=62 more bytes, without NUL",
            )),
        }
    }

    fn check_peer(peer: &str) -> Result<[u64; 8], SegmentError> {
        let words: Option<[u64; 8]> = pack_name(peer.as_bytes());
        match words {
            Some(w) if !peer.is_empty() && peer.as_bytes()[0] != CLASS_PREFIX => Ok(w),
            _ => Err(SegmentError::BadClass(
                "peer name must be 1..=63 bytes, without NUL, not starting with '@'",
            )),
        }
    }

    /// The id of class `class`, added to the class table if new.
    fn intern_class(&mut self, class: &str) -> Result<usize, SegmentError> {
        if let Some(&id) = self.class_ids.get(class) {
            return Ok(id);
        }
        let words = Self::check_class(class)?;
        let capacity = self.seg.layout().ext.map_or(0, |x| x.class_capacity);
        room("class", self.classes.len(), 1, capacity)?;
        let id = self.classes.len();
        self.classes.push((class.to_string(), words));
        self.class_ids.insert(class.to_string(), id);
        for d in &mut self.dirty {
            d.classes.push(id);
        }
        Ok(id)
    }

    /// Maps `peer` to class id `class` (inserting or re-mapping it).
    fn map_peer(&mut self, peer: &str, class: usize) -> Result<(), SegmentError> {
        let words = Self::check_peer(peer)?;
        if class >= self.classes.len() {
            return Err(SegmentError::BadClass("unknown class id"));
        }
        if let Some(&i) = self.map_ids.get(peer) {
            self.map[i].class = class;
            for d in &mut self.dirty {
                d.map_records.push(i);
            }
            return Ok(());
        }
        let capacity = self.seg.layout().ext.map_or(0, |x| x.map_capacity);
        room("peer → class map", self.map.len(), 1, capacity)?;
        let i = self.map.len();
        let hash = view::map_hash(&words, peer.len());
        // Linear probing; map_slots > map_capacity, so a free slot exists.
        let mask = self.map_table.len() - 1;
        let mut s = hash as usize & mask;
        while self.map_table[s] != 0 {
            s = (s + 1) & mask;
        }
        self.map_table[s] = slot_word(hash, i);
        self.map.push(MapSlot {
            words,
            len: peer.len(),
            hash,
            class,
        });
        self.map_ids.insert(peer.to_string(), i);
        for d in &mut self.dirty {
            d.map_slots.push(s);
            d.map_records.push(i);
        }
        Ok(())
    }

    /// Assigns peers to coverage classes (`(peer, class)`, class names
    /// starting with '@'; a peer already mapped moves to the new class) and
    /// publishes once. All or nothing: on an error (a bad name, a table
    /// full) nothing changes. A reader's class-fallback lookup of a peer
    /// without an entry of its own answers with the entry (class,
    /// transport), flagged CLASS.
    pub fn set_peer_classes<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<(), SegmentError> {
        let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
        let mut new_classes = std::collections::HashSet::new();
        let mut new_peers = std::collections::HashSet::new();
        for (peer, class) in &pairs {
            Self::check_peer(peer)?;
            Self::check_class(class)?;
            if !self.class_ids.contains_key(*class) {
                new_classes.insert(*class);
            }
            if !self.map_ids.contains_key(*peer) {
                new_peers.insert(*peer);
            }
        }
        let x = self.seg.layout().ext;
        let (class_cap, map_cap) = x.map_or((0, 0), |x| (x.class_capacity, x.map_capacity));
        room("class", self.classes.len(), new_classes.len(), class_cap)?;
        room("peer → class map", self.map.len(), new_peers.len(), map_cap)?;
        for (peer, class) in pairs {
            let id = self.intern_class(class)?;
            self.map_peer(peer, id)?;
        }
        self.publish();
        Ok(())
    }

    /// The class `peer` is mapped to.
    pub fn peer_class(&self, peer: &str) -> Option<&str> {
        let i = *self.map_ids.get(peer)?;
        Some(self.classes[self.map[i].class].0.as_str())
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
                    .and_then(|e| view::decode_entry(e, self.seg.entry_ext(c, i)).ok())
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

/// Transports, classes and the map of copy `c` (for a re-open).
#[allow(clippy::type_complexity)]
fn read_back_ext(
    seg: &Seg,
    c: usize,
) -> Result<
    (
        Vec<(String, TransportExt)>,
        Vec<String>,
        Vec<(String, usize)>,
    ),
    LookupError,
> {
    let Some(me) = seg.meta_ext(c) else {
        return Ok(Default::default());
    };
    let n = me.transport_count.load(Ordering::Relaxed);
    if n > TRANSPORT_RECORDS as u64 {
        return Err(LookupError::Invalid);
    }
    let mut transports = Vec::new();
    for r in &me.transports[..n as usize] {
        let (w, l) = view::transport_name(r)?;
        transports.push((view::words_to_string(&w, l)?, view::decode_transport(r)?));
    }
    let (n_classes, n_map) = view::ext_counts(seg, c)?;
    let mut classes = Vec::new();
    for i in 0..n_classes {
        let (w, l) = view::class_name(seg, c, i)?;
        classes.push(view::words_to_string(&w, l)?);
    }
    let mut map = Vec::new();
    for i in 0..n_map {
        let (w, l, class) = view::map_entry(seg, c, i)?;
        map.push((view::words_to_string(&w, l)?, class));
    }
    Ok((transports, classes, map))
}

fn header_ext_ptr(map: &Mapping) -> &HeaderExtRaw {
    // SAFETY: the mapping is at least `total_bytes` ≥ header_bytes ≥ 320
    // bytes long for a layout with the extension (the callers check
    // `layout.ext`, or `layout.hot`, which only a layout with the extension
    // has); offset 256 of a page-aligned base; all atomics.
    unsafe { &*(map.base().add(core::mem::size_of::<HeaderRaw>()) as *const HeaderExtRaw) }
}

fn header_ptr(map: &Mapping) -> &HeaderRaw {
    // SAFETY: the mapping is at least `total_bytes` ≥ 256 bytes long (set_len
    // then mmap of that length), page-aligned, and HeaderRaw is all atomics.
    unsafe { &*(map.base() as *const HeaderRaw) }
}

/// Err([`SegmentError::TableFull`]) unless `table`, holding `len` of its
/// `capacity` records, has room for `more`.
fn room(table: &'static str, len: usize, more: usize, capacity: usize) -> Result<(), SegmentError> {
    if len + more > capacity {
        Err(SegmentError::TableFull { table, capacity })
    } else {
        Ok(())
    }
}
