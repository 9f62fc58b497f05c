//! The reader: maps the segment once, then answers lookups with plain
//! (atomic) loads: no system call, no allocation, no lock.
//!
//! # The latch seqlock, reader side
//!
//! The writer keeps two copies of the table. Publication `n` (sequence value
//! `n`) lives in `copy[n & 1]`. To publish `n + 1` the writer
//!
//! 1. issues a release fence,
//! 2. writes `copy[(n + 1) & 1]` (the copy readers are *not* directed to)
//!    with relaxed atomic stores,
//! 3. stores `seq = n + 1` with release ordering.
//!
//! A reader loads `s1 = seq` (acquire), reads `copy[s1 & 1]` with relaxed
//! loads, issues an acquire fence, loads `s2 = seq` and accepts the values
//! iff `s2 == s1`.
//!
//! Why that is exactly right: the only writes that can ever touch
//! `copy[s1 & 1]` after publication `s1` are those of publication `s1 + 2`,
//! and they come after the writer's store `seq = s1 + 1` and its release
//! fence (step 1 of publishing `s1 + 2`). If any relaxed load of ours
//! observed such a write, that fence synchronises with our acquire fence, so
//! the store `seq = s1 + 1` happens-before our second load and `s2 ≥ s1 + 1`.
//! Hence `s2 == s1` proves every value we read belongs to publication `s1`
//! (whose stores all happen-before our first, acquire, load of `s1`).
//! `s2 == s1 + 1` is *not* enough: the writer may already be filling our copy
//! for `s1 + 2`. In return the reader is only disturbed when a publish *store*
//! lands inside its read window (tens of ns), not for the whole time the
//! writer spends filling a copy, and it never waits for the writer.
//!
//! A writer killed while filling a copy never stored the new `seq`, so readers
//! keep reading the previously published copy, which nobody touches.
//!
//! The ABI 1.2 hot table has two copies as well; hot copy `c` is part of
//! copy `c` (the writer fills an entry's record with the entry), so the
//! index lookups that read it follow exactly this protocol.
//!
//! # Staleness
//!
//! The header's heartbeat word holds the writer's CLOCK_REALTIME in ns at its
//! last beat (the daemon beats every second); 0 means the writer shut down.
//! A lookup returns [`LookupError::Stale`] when the heartbeat is 0 or older
//! than `stale_after_ns` (default [`DEFAULT_STALE_AFTER_NS`], 0 disables the
//! rule), when the entry carries the STALE flag, or, if a maximum data age is
//! set, when the entry's `measured_unix_ns` is older than that. "Now" is
//! CLOCK_REALTIME_COARSE, which glibc reads from the vDSO data page: no
//! system call and no TSC read.

use std::path::Path;
use std::sync::atomic::{fence, Ordering};

use crate::ext::{EntryExt, ParamsStatus, TransportExt};
use crate::files::{self, Owners};
use crate::layout::*;
use crate::sys::{self, Mapping};
use crate::types::*;
use crate::view::{self, Seg};

/// The default segment path: in the daemon's runtime directory (systemd
/// `RuntimeDirectory=netgauged`), which only the daemon may write.
pub const DEFAULT_PATH: &str = "/run/netgauged/segment";
/// Environment variable that overrides the default path (only consulted
/// when no path is given).
pub const PATH_ENV: &str = "NETGAUGE_SEGMENT";
/// Default heartbeat threshold: 5 s (five missed beats).
pub const DEFAULT_STALE_AFTER_NS: u64 = 5_000_000_000;
/// Attempts to get a consistent snapshot before giving up with Busy.
pub const MAX_RETRIES: usize = 64;

/// A (peer, transport) key, packed and hashed once per lookup.
struct Key {
    peer: [u64; 8],
    transport: [u64; 2],
    peer_len: usize,
    transport_len: usize,
    hash: u64,
}

impl Key {
    /// The key of packed names (lengths already bounds-checked).
    #[inline]
    fn from_words(
        peer: [u64; 8],
        peer_len: usize,
        transport: [u64; 2],
        transport_len: usize,
    ) -> Key {
        Key {
            hash: key_hash(&peer, peer_len, &transport, transport_len),
            peer,
            transport,
            peer_len,
            transport_len,
        }
    }

    #[inline]
    fn new(peer: &[u8], transport: &[u8]) -> Result<Key, LookupError> {
        // A name that cannot be stored cannot be in the table.
        let pw: [u64; 8] = pack_name(peer).ok_or(LookupError::NotFound)?;
        let tw: [u64; 2] = pack_name(transport).ok_or(LookupError::NotFound)?;
        Ok(Key {
            hash: key_hash(&pw, peer.len(), &tw, transport.len()),
            peer: pw,
            transport: tw,
            peer_len: peer.len(),
            transport_len: transport.len(),
        })
    }
}

/// A read-only mapping of a segment.
pub struct Reader {
    seg: Seg,
    stale_after_ns: u64,
    max_age_ns: u64,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("layout", self.seg.layout())
            .field("stale_after_ns", &self.stale_after_ns)
            .field("max_age_ns", &self.max_age_ns)
            .finish()
    }
}

impl Reader {
    /// Opens and validates the segment at `path`, trusting the owners of
    /// [`Owners::from_env`] (root, the daemon's user, this user, and
    /// `$NETGAUGE_SEGMENT_OWNER`). See [`Reader::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<Reader, ReaderError> {
        Self::open_with(path, &Owners::from_env())
    }

    /// Opens and validates the segment at `path`: `open(O_RDONLY |
    /// O_NOFOLLOW | O_NONBLOCK)` (never follows a symbolic link, never
    /// blocks on a FIFO or device), fstat (a regular file owned by one of
    /// `owners`, writable by its owner only, as long as the header says),
    /// the header read with pread and checked against the file's size, and
    /// only then `mmap(PROT_READ)` of exactly the declared size (on an ABI
    /// 1.2 segment up to the end of its hot table) and the
    /// full validation; the file is closed again, the mapping stays. Every
    /// failure is an error, never a signal: the mapped length never exceeds
    /// the file, and the writer never shrinks a segment.
    pub fn open_with(path: impl AsRef<Path>, owners: &Owners) -> Result<Reader, ReaderError> {
        let path = path.as_ref();
        let (file, st) = files::open_trusted(path, owners).map_err(|e| match e {
            files::TrustError::Io(e) => ReaderError::Io(e),
            files::TrustError::Refused { errno, why } => ReaderError::Refused { errno, why },
        })?;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        let header = core::mem::size_of::<HeaderRaw>() as u64;
        if size < header {
            return Err(ReaderError::Invalid("file shorter than the header"));
        }
        if sys::read_u64_at(&file, 0)? != MAGIC {
            return Err(ReaderError::Invalid("bad magic"));
        }
        let total = sys::read_u64_at(&file, core::mem::offset_of!(HeaderRaw, total_bytes) as u64)?;
        if total < header {
            return Err(ReaderError::Invalid(
                "declared size shorter than the header",
            ));
        }
        if total > size {
            return Err(ReaderError::Invalid("file shorter than its declared size"));
        }
        // A 1.2 segment's hot table lies after total_bytes.
        let total = view::bytes_to_map(total, size, |off| sys::read_u64_at(&file, off))?;
        if total > size {
            return Err(ReaderError::Invalid("file shorter than its declared size"));
        }
        let len = usize::try_from(total).map_err(|_| ReaderError::Invalid("file too large"))?;
        let map = Mapping::map(&file, len, false)?;
        let seg = Seg::new(map).map_err(ReaderError::Invalid)?;
        Ok(Reader {
            seg,
            stale_after_ns: DEFAULT_STALE_AFTER_NS,
            max_age_ns: 0,
        })
    }

    /// Opens `$NETGAUGE_SEGMENT` if set, else [`DEFAULT_PATH`].
    pub fn open_default() -> Result<Reader, ReaderError> {
        match std::env::var_os(PATH_ENV) {
            Some(p) if !p.is_empty() => Reader::open(p),
            _ => Reader::open(DEFAULT_PATH),
        }
    }

    /// Heartbeat threshold in ns; 0 disables the heartbeat rule.
    pub fn set_stale_after_ns(&mut self, ns: u64) {
        self.stale_after_ns = ns;
    }

    /// Maximum age of an entry's measurement in ns; 0 (default) disables it.
    pub fn set_max_age_ns(&mut self, ns: u64) {
        self.max_age_ns = ns;
    }

    /// Runs `f` on the published copy until it reads a consistent snapshot
    /// (see the module comment). `f` must only load.
    #[inline]
    fn read<T>(&self, f: impl Fn(&Seg, usize) -> Result<T, LookupError>) -> Result<T, LookupError> {
        let seq = &self.seg.header().seq;
        for _ in 0..MAX_RETRIES {
            let s1 = seq.load(Ordering::Acquire);
            let r = f(&self.seg, (s1 & 1) as usize);
            fence(Ordering::Acquire);
            let s2 = seq.load(Ordering::Relaxed);
            if s1 == s2 {
                return r;
            }
            core::hint::spin_loop();
        }
        Err(LookupError::Busy)
    }

    #[inline]
    fn check_heartbeat(&self) -> Result<(), LookupError> {
        if self.stale_after_ns == 0 {
            return Ok(());
        }
        let hb = self.seg.header().heartbeat_unix_ns.load(Ordering::Relaxed);
        if hb == 0 {
            return Err(LookupError::Stale);
        }
        let now = sys::realtime_coarse_ns();
        if now > hb && now - hb > self.stale_after_ns {
            return Err(LookupError::Stale);
        }
        Ok(())
    }

    #[inline]
    fn check_entry(&self, p: Params) -> Result<Params, LookupError> {
        if p.flags & flags::STALE != 0 {
            return Err(LookupError::Stale);
        }
        if self.max_age_ns != 0 {
            let now = sys::realtime_coarse_ns();
            if now > p.measured_unix_ns && now - p.measured_unix_ns > self.max_age_ns {
                return Err(LookupError::Stale);
            }
        }
        Ok(p)
    }

    #[inline]
    fn count(seg: &Seg, copy: usize) -> Result<usize, LookupError> {
        let n = seg.meta(copy).entry_count.load(Ordering::Relaxed);
        if n > seg.layout().capacity as u64 {
            return Err(LookupError::Invalid);
        }
        Ok(n as usize)
    }

    /// Name → index inside one copy.
    #[inline]
    fn find(seg: &Seg, copy: usize, k: &Key) -> Result<usize, LookupError> {
        let hash = k.hash;
        let n = Self::count(seg, copy)?;
        let slots = seg.layout().hash_slots;
        let mut i = hash as usize;
        for _ in 0..slots {
            let v = seg.slot(copy, i).load(Ordering::Relaxed);
            if v == 0 {
                return Err(LookupError::NotFound);
            }
            if let Some(idx) = view::slot_index(v, hash, n)? {
                let e = seg.entry(copy, idx).ok_or(LookupError::Invalid)?;
                if view::entry_matches(e, hash, &k.peer, k.peer_len, &k.transport, k.transport_len)
                {
                    return Ok(idx);
                }
            }
            i = i.wrapping_add(1);
        }
        Err(LookupError::NotFound)
    }

    /// Index of (peer, transport) for [`Reader::lookup_index`]. Indices are
    /// stable for the life of the segment (entries are never moved).
    pub fn try_index(&self, peer: &str, transport: &str) -> Result<usize, LookupError> {
        self.index_bytes(peer.as_bytes(), transport.as_bytes())
    }

    /// Index of (peer, transport), None when unknown (or on error).
    pub fn index(&self, peer: &str, transport: &str) -> Option<usize> {
        self.try_index(peer, transport).ok()
    }

    pub(crate) fn index_bytes(&self, peer: &[u8], transport: &[u8]) -> Result<usize, LookupError> {
        let k = Key::new(peer, transport)?;
        self.read(|seg, c| Self::find(seg, c, &k))
    }

    /// Parameters of the protocol range of (peer, transport) containing
    /// `msg_bytes`. No allocation, no system call.
    #[inline]
    pub fn lookup(
        &self,
        peer: &str,
        transport: &str,
        msg_bytes: u64,
    ) -> Result<Params, LookupError> {
        self.lookup_bytes(peer.as_bytes(), transport.as_bytes(), msg_bytes)
    }

    #[inline]
    pub(crate) fn lookup_bytes(
        &self,
        peer: &[u8],
        transport: &[u8],
        msg_bytes: u64,
    ) -> Result<Params, LookupError> {
        self.lookup_named(peer, transport, msg_bytes, false)
    }

    /// [`Reader::lookup`] (`or_class` false) or [`Reader::lookup_or_class`].
    #[inline(always)]
    fn lookup_named(
        &self,
        peer: &[u8],
        transport: &[u8],
        msg_bytes: u64,
        or_class: bool,
    ) -> Result<Params, LookupError> {
        let k = Key::new(peer, transport)?;
        self.check_heartbeat()?;
        let p = self.read(|seg, c| {
            Self::named_params(seg, c, &k, or_class, msg_bytes).map(|(_, p, _)| p)
        })?;
        self.check_entry(p)
    }

    /// (entry index, parameters, range index) of `k` for `msg_bytes` in
    /// copy `c`: its own entry, else, with `or_class`, its class's (whose
    /// parameters then carry [`flags::CLASS`]).
    #[inline(always)]
    fn named_params(
        seg: &Seg,
        c: usize,
        k: &Key,
        or_class: bool,
        msg_bytes: u64,
    ) -> Result<(usize, Params, usize), LookupError> {
        let (idx, class) = if or_class {
            Self::find_or_class(seg, c, k)?
        } else {
            (Self::find(seg, c, k)?, false)
        };
        let e = seg.entry(c, idx).ok_or(LookupError::Invalid)?;
        let (mut p, ri) = view::read_params_at(e, msg_bytes)?;
        if class {
            p.flags |= flags::CLASS;
        }
        Ok((idx, p, ri))
    }

    /// Parameters of entry `idx` of copy `c` and the index of the range
    /// used: from the hot table when the segment has one (ABI 1.2), else
    /// from the entry. Always inlined: out of line, the C index functions
    /// receive the 150-byte answer through memory and copy it on, which
    /// costs more than the lookup itself (bench/segment/README.md).
    #[inline(always)]
    fn params_at(
        seg: &Seg,
        c: usize,
        idx: usize,
        msg_bytes: u64,
    ) -> Result<(Params, usize), LookupError> {
        if idx >= Self::count(seg, c)? {
            return Err(LookupError::NotFound);
        }
        match seg.hot(c, idx) {
            Some(h) => view::read_hot_params_at(h, msg_bytes),
            None => view::read_params_at(seg.entry(c, idx).ok_or(LookupError::Invalid)?, msg_bytes),
        }
    }

    /// The fast path: like [`Reader::lookup`] for an index from
    /// [`Reader::index`]. On an ABI 1.2 segment it reads the entry's
    /// hot-table record (3 cache lines, contiguous for all entries).
    #[inline]
    pub fn lookup_index(&self, idx: usize, msg_bytes: u64) -> Result<Params, LookupError> {
        self.check_heartbeat()?;
        let (p, _) = self.read(|seg, c| Self::params_at(seg, c, idx, msg_bytes))?;
        self.check_entry(p)
    }

    /// Predicted time of one message (see [`Params::predict_ns`]).
    pub fn predict_ns(
        &self,
        peer: &str,
        transport: &str,
        msg_bytes: u64,
    ) -> Result<f64, LookupError> {
        self.lookup(peer, transport, msg_bytes)
            .map(|p| p.predict_ns(msg_bytes))
    }

    /// [`Reader::predict_ns`] by index.
    pub fn predict_index_ns(&self, idx: usize, msg_bytes: u64) -> Result<f64, LookupError> {
        self.lookup_index(idx, msg_bytes)
            .map(|p| p.predict_ns(msg_bytes))
    }

    /// Entries in the current snapshot.
    pub fn entry_count(&self) -> Result<usize, LookupError> {
        self.read(Self::count)
    }

    /// The full entry at `idx` (allocates; ignores staleness: for dumps).
    pub fn snapshot_entry(&self, idx: usize) -> Result<EntryData, LookupError> {
        self.read(|seg, c| {
            if idx >= Self::count(seg, c)? {
                return Err(LookupError::NotFound);
            }
            view::decode_entry(
                seg.entry(c, idx).ok_or(LookupError::Invalid)?,
                seg.entry_ext(c, idx),
            )
        })
    }

    /// All entries of one consistent snapshot (allocates).
    pub fn snapshot(&self) -> Result<Vec<EntryData>, LookupError> {
        self.read(|seg, c| {
            let n = Self::count(seg, c)?;
            (0..n)
                .map(|i| {
                    view::decode_entry(
                        seg.entry(c, i).ok_or(LookupError::Invalid)?,
                        seg.entry_ext(c, i),
                    )
                })
                .collect()
        })
    }

    /// Header and identity (allocates).
    pub fn info(&self) -> Result<SegmentInfo, LookupError> {
        let h = self.seg.header();
        let l = *self.seg.layout();
        self.read(|seg, c| {
            let m = seg.meta(c);
            Ok(SegmentInfo {
                abi_major: h.abi_major.load(Ordering::Relaxed),
                abi_minor: h.abi_minor.load(Ordering::Relaxed),
                capabilities: h.capabilities.load(Ordering::Relaxed),
                capacity_entries: l.capacity,
                total_bytes: l.total_bytes,
                generation: m.generation.load(Ordering::Relaxed),
                writer_pid: m
                    .writer_pid
                    .load(Ordering::Relaxed)
                    .min(u64::from(u32::MAX)) as u32,
                node_name: view::read_name(
                    &m.node_name,
                    m.node_len.load(Ordering::Relaxed),
                    NODE_MAX_BYTES,
                )?,
                clock_desc: view::read_name(
                    &m.clock_desc,
                    m.clock_len.load(Ordering::Relaxed),
                    CLOCK_DESC_MAX_BYTES,
                )?,
                entry_count: Self::count(seg, c)?,
                heartbeat_unix_ns: h.heartbeat_unix_ns.load(Ordering::Relaxed),
                seq: h.seq.load(Ordering::Relaxed),
            })
        })
    }

    /// The daemon generation as published in the current snapshot.
    pub fn generation(&self) -> Result<u64, LookupError> {
        self.read(|seg, c| Ok(seg.meta(c).generation.load(Ordering::Relaxed)))
    }

    /// Time since the last heartbeat in ns (coarse clock); None if the writer
    /// shut down (heartbeat 0). Negative skew reads as 0.
    pub fn heartbeat_age_ns(&self) -> Option<u64> {
        let hb = self.seg.header().heartbeat_unix_ns.load(Ordering::Relaxed);
        if hb == 0 {
            return None;
        }
        Some(sys::realtime_coarse_ns().saturating_sub(hb))
    }

    /// Index of the entry of `k`'s peer's coverage class for `k`'s transport
    /// (NotFound when the peer is not mapped or the class has no entry for
    /// that transport).
    #[inline]
    fn class_index(seg: &Seg, c: usize, k: &Key) -> Result<usize, LookupError> {
        let class =
            view::find_class_of(seg, c, &k.peer, k.peer_len)?.ok_or(LookupError::NotFound)?;
        let (cw, cl) = view::class_name(seg, c, class)?;
        let ck = Key::from_words(cw, cl, k.transport, k.transport_len);
        Self::find(seg, c, &ck)
    }

    /// (index, from the class) of `k`: its own entry, else its class's.
    #[inline]
    fn find_or_class(seg: &Seg, c: usize, k: &Key) -> Result<(usize, bool), LookupError> {
        match Self::find(seg, c, k) {
            Ok(i) => Ok((i, false)),
            Err(LookupError::NotFound) => Self::class_index(seg, c, k).map(|i| (i, true)),
            Err(e) => Err(e),
        }
    }

    /// Like [`Reader::lookup`], but a peer without an entry of its own for
    /// `transport` gets the parameters of its coverage class's entry for
    /// that transport, with [`flags::CLASS`] set. A pair that has its own
    /// entry is answered from it exactly as `lookup` answers (stale
    /// included). No allocation, no system call.
    #[inline]
    pub fn lookup_or_class(
        &self,
        peer: &str,
        transport: &str,
        msg_bytes: u64,
    ) -> Result<Params, LookupError> {
        self.lookup_or_class_bytes(peer.as_bytes(), transport.as_bytes(), msg_bytes)
    }

    #[inline]
    pub(crate) fn lookup_or_class_bytes(
        &self,
        peer: &[u8],
        transport: &[u8],
        msg_bytes: u64,
    ) -> Result<Params, LookupError> {
        self.lookup_named(peer, transport, msg_bytes, true)
    }

    /// [`Reader::lookup_or_class`] plus the statuses of what it returned:
    /// whether EEL, L and the range's g, G, o_s, o_r, O_s, O_r are
    /// identified, and the range's index. No allocation, no system call.
    #[inline]
    pub fn lookup_status(
        &self,
        peer: &str,
        transport: &str,
        msg_bytes: u64,
    ) -> Result<(Params, ParamsStatus), LookupError> {
        self.lookup_status_bytes(peer.as_bytes(), transport.as_bytes(), msg_bytes)
    }

    #[inline]
    pub(crate) fn lookup_status_bytes(
        &self,
        peer: &[u8],
        transport: &[u8],
        msg_bytes: u64,
    ) -> Result<(Params, ParamsStatus), LookupError> {
        let k = Key::new(peer, transport)?;
        self.check_heartbeat()?;
        let (p, st) = self.read(|seg, c| {
            let (idx, p, ri) = Self::named_params(seg, c, &k, true, msg_bytes)?;
            Ok((p, view::read_status(seg.entry_ext(c, idx), ri)))
        })?;
        self.check_entry(p).map(|p| (p, st))
    }

    /// [`Reader::lookup_index`] plus the statuses of what it returned.
    #[inline]
    pub fn lookup_index_status(
        &self,
        idx: usize,
        msg_bytes: u64,
    ) -> Result<(Params, ParamsStatus), LookupError> {
        self.check_heartbeat()?;
        let (p, st) = self.read(|seg, c| {
            let (p, ri) = Self::params_at(seg, c, idx, msg_bytes)?;
            let st = match seg.hot(c, idx) {
                Some(h) => view::read_hot_status(h, ri),
                None => view::read_status(seg.entry_ext(c, idx), ri),
            };
            Ok((p, st))
        })?;
        self.check_entry(p).map(|p| (p, st))
    }

    /// Index of (peer, transport)'s own entry, else of its coverage class's
    /// entry for that transport (whose flags carry CLASS): resolve once, then
    /// [`Reader::lookup_index`]. Class assignments may change; indices stay
    /// valid (entries never move).
    pub fn index_or_class(&self, peer: &str, transport: &str) -> Result<usize, LookupError> {
        self.index_or_class_bytes(peer.as_bytes(), transport.as_bytes())
    }

    pub(crate) fn index_or_class_bytes(
        &self,
        peer: &[u8],
        transport: &[u8],
    ) -> Result<usize, LookupError> {
        let k = Key::new(peer, transport)?;
        self.read(|seg, c| Self::find_or_class(seg, c, &k).map(|(i, _)| i))
    }

    #[inline]
    fn ext_at(seg: &Seg, c: usize, idx: usize) -> Result<(EntryExt, Params), LookupError> {
        let e = seg.entry(c, idx).ok_or(LookupError::Invalid)?;
        let p = view::read_params(e, 0)?;
        let ext = match seg.entry_ext(c, idx) {
            Some(x) => {
                let (_, _, nr, _, _) = view::split_counts(e.counts.load(Ordering::Relaxed))?;
                view::read_ext(x, nr)?
            }
            None => EntryExt::default(),
        };
        Ok((ext, p))
    }

    /// The ABI 1.1 part of (peer, transport)'s entry: identification,
    /// provenance times, bandwidth, latency percentiles, overlap. On a 1.0
    /// segment every part reads as absent (`present == 0`). Staleness rules
    /// as for [`Reader::lookup`]. No allocation, no system call.
    pub fn entry_ext(&self, peer: &str, transport: &str) -> Result<EntryExt, LookupError> {
        self.entry_ext_bytes(peer.as_bytes(), transport.as_bytes())
    }

    pub(crate) fn entry_ext_bytes(
        &self,
        peer: &[u8],
        transport: &[u8],
    ) -> Result<EntryExt, LookupError> {
        let k = Key::new(peer, transport)?;
        self.check_heartbeat()?;
        let (x, p) = self.read(|seg, c| Self::ext_at(seg, c, Self::find(seg, c, &k)?))?;
        self.check_entry(p).map(|_| x)
    }

    /// [`Reader::entry_ext`] by index.
    pub fn entry_ext_index(&self, idx: usize) -> Result<EntryExt, LookupError> {
        self.check_heartbeat()?;
        let (x, p) = self.read(|seg, c| {
            if idx >= Self::count(seg, c)? {
                return Err(LookupError::NotFound);
            }
            Self::ext_at(seg, c, idx)
        })?;
        self.check_entry(p).map(|_| x)
    }

    /// What this node measured for `transport` as a whole: contention
    /// penalties, the sharing fit, the last bisection result. NotFound when
    /// there is no such record (always on a 1.0 segment). Heartbeat rule as
    /// for lookups. No allocation, no system call.
    pub fn transport_ext(&self, transport: &str) -> Result<TransportExt, LookupError> {
        self.transport_ext_bytes(transport.as_bytes())
    }

    pub(crate) fn transport_ext_bytes(
        &self,
        transport: &[u8],
    ) -> Result<TransportExt, LookupError> {
        let tw: [u64; 2] = pack_name(transport).ok_or(LookupError::NotFound)?;
        self.check_heartbeat()?;
        self.read(|seg, c| {
            let r =
                view::find_transport(seg, c, &tw, transport.len())?.ok_or(LookupError::NotFound)?;
            view::decode_transport(r)
        })
    }

    /// Copies the coverage class `peer` is mapped to into `out` (no
    /// allocation); its length, or None when the peer is not mapped.
    pub(crate) fn peer_class_into(
        &self,
        peer: &[u8],
        out: &mut [u8; 64],
    ) -> Result<Option<usize>, LookupError> {
        let pw: [u64; 8] = match pack_name(peer) {
            Some(w) if !peer.is_empty() => w,
            _ => return Ok(None),
        };
        let found = self.read(
            |seg, c| match view::find_class_of(seg, c, &pw, peer.len())? {
                Some(id) => view::class_name(seg, c, id).map(Some),
                None => Ok(None),
            },
        )?;
        Ok(found.map(|(w, len)| {
            for (i, x) in w.iter().enumerate() {
                out[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            out[len..].fill(0);
            len
        }))
    }

    /// The coverage class `peer` is mapped to (allocates).
    pub fn peer_class(&self, peer: &str) -> Result<Option<String>, LookupError> {
        let mut buf = [0u8; 64];
        match self.peer_class_into(peer.as_bytes(), &mut buf)? {
            Some(n) => String::from_utf8(buf[..n].to_vec())
                .map(Some)
                .map_err(|_| LookupError::Invalid),
            None => Ok(None),
        }
    }

    /// The whole peer → class map of one snapshot, (peer, class) in the
    /// order peers were mapped (allocates; for dumps).
    pub fn class_map(&self) -> Result<Vec<(String, String)>, LookupError> {
        self.read(|seg, c| {
            let (_, n) = view::ext_counts(seg, c)?;
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let (w, l, class) = view::map_entry(seg, c, i)?;
                let (cw, cl) = view::class_name(seg, c, class)?;
                out.push((
                    view::words_to_string(&w, l)?,
                    view::words_to_string(&cw, cl)?,
                ));
            }
            Ok(out)
        })
    }

    /// Every per-transport record of one snapshot (allocates; for dumps).
    pub fn transports_ext(&self) -> Result<Vec<(String, TransportExt)>, LookupError> {
        self.read(|seg, c| {
            let Some(me) = seg.meta_ext(c) else {
                return Ok(Vec::new());
            };
            let n = me.transport_count.load(Ordering::Relaxed);
            if n > TRANSPORT_RECORDS as u64 {
                return Err(LookupError::Invalid);
            }
            me.transports[..n as usize]
                .iter()
                .map(|r| {
                    let (w, l) = view::transport_name(r)?;
                    Ok((view::words_to_string(&w, l)?, view::decode_transport(r)?))
                })
                .collect()
        })
    }

    /// Copies the names of entry `idx` into caller buffers (no allocation).
    /// Returns (peer_len, transport_len).
    pub(crate) fn entry_names(
        &self,
        idx: usize,
        peer: &mut [u8; 64],
        transport: &mut [u8; 16],
    ) -> Result<(usize, usize), LookupError> {
        let (pw, tw, pl, tl) = self.read(|seg, c| {
            if idx >= Self::count(seg, c)? {
                return Err(LookupError::NotFound);
            }
            let e = seg.entry(c, idx).ok_or(LookupError::Invalid)?;
            let (pl, tl, ..) = view::split_counts(e.counts.load(Ordering::Relaxed))?;
            let mut pw = [0u64; 8];
            for (o, w) in pw.iter_mut().zip(&e.peer) {
                *o = w.load(Ordering::Relaxed);
            }
            let mut tw = [0u64; 2];
            for (o, w) in tw.iter_mut().zip(&e.transport) {
                *o = w.load(Ordering::Relaxed);
            }
            Ok((pw, tw, pl, tl))
        })?;
        for (i, w) in pw.iter().enumerate() {
            peer[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        for (i, w) in tw.iter().enumerate() {
            transport[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        peer[pl..].fill(0);
        transport[tl..].fill(0);
        Ok((pl, tl))
    }
}
