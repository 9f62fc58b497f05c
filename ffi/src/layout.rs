//! The segment's binary layout (ABI 1.2).
//!
//! ```text
//! offset 0                 HeaderRaw          (256 B, ABI 1.0)
//!                          HeaderExtRaw       (64 B, ABI 1.1)      header_bytes = 320
//! copy_offset[0]           copy 0: MetaRaw    (256 B, ABI 1.0)
//!                                  MetaExtRaw (ABI 1.1: per-transport records,
//!                                              coverage classes, peer → class map)
//!                                                                  meta_bytes
//!                                  slots      (hash_slots × u64, padded to 64 B)
//!                                  entries × capacity, entry_bytes each:
//!                                    EntryRaw    (2304 B, ABI 1.0)
//!                                    EntryExtRaw (1088 B, ABI 1.1) entry_bytes = 3392
//! copy_offset[1]           copy 1: same shape
//! total_bytes, rounded up to 4096: the hot table (ABI 1.2, layout/hot.rs):
//!                          HotRaw × capacity for copy 0, then for copy 1
//! file_bytes
//! ```
//!
//! ABI 1.1 only appends: every 1.0 offset is unchanged, and a 1.0 reader,
//! which derives the offsets from `header_bytes`, `meta_bytes` and
//! `entry_bytes`, skips the new blocks. A 1.1 reader finds them when
//! `abi_minor ≥ 1` (the header extension then gives the sizes of the
//! variable parts of [`MetaExtRaw`]); on a 1.0 segment it reports the new
//! data as absent. ABI 1.2 appends the hot table after `total_bytes`,
//! which every older reader maps no further than.
//!
//! Every word is an atomic (`AtomicU64`/`AtomicU32`, same size and alignment as
//! the plain integers); `f64` values are stored as their IEEE-754 bits. Names
//! are NUL-padded bytes packed little-endian into `u64` words.
//!
//! The header is written when the segment is created; a writer that re-opens
//! the segment rewrites only `generation`, `writer_pid` and the heartbeat. The
//! daemon's identity (generation, pid, node name, clock description) is also
//! carried in each copy's [`MetaRaw`], where the latch seqlock protects the
//! multi-word strings from being read half-rewritten during a daemon restart.
//!
//! Compatibility: a reader accepts any segment with the same `abi_major`.
//! Minor versions only append: `header_bytes`, `meta_bytes` and `entry_bytes`
//! may grow (new fields after the ones defined here), never shrink; offsets
//! are derived from those sizes by the fixed formula in [`Layout::from_params`].
//! Capability bits are never reused; the upper 32 bits are "incompatible"
//! features a reader must understand (it refuses unknown ones), the lower 32
//! bits are informational.

use core::mem::size_of;
use core::sync::atomic::{AtomicU32, AtomicU64};

/// `b"NGSEGMNT"` read as a little-endian u64.
pub const MAGIC: u64 = u64::from_le_bytes(*b"NGSEGMNT");
/// ABI major version: a change here breaks every reader.
pub const ABI_MAJOR: u32 = 1;
/// ABI minor version: append-only additions.
pub const ABI_MINOR: u32 = 2;

/// Protocol ranges stored per entry.
pub const MAX_RANGES: usize = 8;
/// o(P)/RTT(P) curve points stored per entry.
pub const MAX_CURVE: usize = 32;
/// Named 95 % intervals stored per entry.
pub const MAX_CI: usize = 16;
/// Longest peer (host) name, bytes.
pub const PEER_MAX_BYTES: usize = 63;
/// Longest transport name, bytes.
pub const TRANSPORT_MAX_BYTES: usize = 15;
/// Longest interval name, bytes.
pub const CI_NAME_MAX_BYTES: usize = 31;
/// Longest node name, bytes.
pub const NODE_MAX_BYTES: usize = 63;
/// Longest clock description, bytes.
pub const CLOCK_DESC_MAX_BYTES: usize = 127;
/// Largest capacity a segment may declare.
pub const MAX_CAPACITY: usize = 1 << 16;
/// Latency-distribution sizes stored per entry (ABI 1.1).
pub const MAX_LATENCY: usize = 8;
/// Flow counts k = 1 ..= MAX_K per conflict scheme (ABI 1.1).
pub const MAX_K: usize = 8;
/// Conflict schemes: outgoing, incoming, mixed (ABI 1.1).
pub const SCHEMES: usize = 3;
/// Per-transport records per copy (ABI 1.1).
pub const TRANSPORT_RECORDS: usize = 8;
/// Largest number of coverage classes a segment may declare (ABI 1.1).
pub const MAX_CLASSES: usize = 1024;
/// Largest number of peers the peer → class map may declare (ABI 1.1).
/// Bounded so that [`MetaRaw`] plus [`MetaExtRaw`] stays within the 1 MiB
/// per-struct limit every reader (1.0 included) enforces.
pub const MAX_MAP_PEERS: usize = 8192;
/// First byte of every coverage-class name: class entries are ordinary
/// entries whose peer name starts with it (no host name does).
pub const CLASS_PREFIX: u8 = b'@';

/// Capability: entries carry LogGPS size-linear overheads O_s/O_r.
pub const CAP_LOGGPS: u64 = 1 << 0;
/// Capability: entries carry LogfP f, o_min, o_max and g_f.
pub const CAP_LOGFP: u64 = 1 << 1;
/// Capability: entries carry named 95 % intervals.
pub const CAP_CI95: u64 = 1 << 2;
/// Capability: entries carry the measured o(P)/RTT(P) curve.
pub const CAP_CURVE: u64 = 1 << 3;
/// Capability: the heartbeat word holds CLOCK_REALTIME nanoseconds.
pub const CAP_HEARTBEAT_REALTIME_NS: u64 = 1 << 4;
/// Capability (1.1): entries carry a status per parameter (identified, or
/// the reason it is not) and the flag UNIDENTIFIED.
pub const CAP_IDENT: u64 = 1 << 5;
/// Capability (1.1): entries may carry the sustained / burst bandwidth block.
pub const CAP_BANDWIDTH: u64 = 1 << 6;
/// Capability (1.1): entries may carry half-round-trip percentiles.
pub const CAP_LATENCY: u64 = 1 << 7;
/// Capability (1.1): entries may carry the CPU overlap per range.
pub const CAP_OVERLAP: u64 = 1 << 8;
/// Capability (1.1): the provenance flags RESTORED, CHANGED, UNSTABLE and the
/// confirmation / change times.
pub const CAP_PROVENANCE: u64 = 1 << 9;
/// Capability (1.1): coverage-class entries and the peer → class map.
pub const CAP_CLASSES: u64 = 1 << 10;
/// Capability (1.1): per-transport records (contention penalties, the
/// sharing fit, the last effective-bisection result).
pub const CAP_CONTENTION: u64 = 1 << 11;
/// Bits a reader must understand to use the segment.
pub const CAP_INCOMPAT_MASK: u64 = 0xFFFF_FFFF_0000_0000;
/// Incompatible-feature bits this reader understands (none up to ABI 1.2).
pub const CAP_INCOMPAT_KNOWN: u64 = 0;
/// What this writer sets.
pub const CAPABILITIES: u64 = CAP_LOGGPS
    | CAP_LOGFP
    | CAP_CI95
    | CAP_CURVE
    | CAP_HEARTBEAT_REALTIME_NS
    | CAP_IDENT
    | CAP_BANDWIDTH
    | CAP_LATENCY
    | CAP_OVERLAP
    | CAP_PROVENANCE
    | CAP_CLASSES
    | CAP_CONTENTION
    | CAP_HOT;

/// Entry and lookup flags (u32).
pub mod flags {
    /// The entry holds a usable fit.
    pub const VALID: u32 = 1 << 0;
    /// The fitted L came out negative (EEL < o_s + o_r).
    pub const L_NEGATIVE: u32 = 1 << 1;
    /// The fit is degraded (few samples, wide intervals, fallback clock …).
    pub const DEGRADED: u32 = 1 << 2;
    /// The writer marked the entry stale (peer unreachable, re-probe due).
    pub const STALE: u32 = 1 << 3;
    /// f, o_min, o_max and g_f are set (LogfP).
    pub const HAS_LOGFP: u32 = 1 << 4;
    /// S (rendezvous threshold, LogGPS) is set.
    pub const HAS_S: u32 = 1 << 5;
    /// Some range has non-zero O_s/O_r (LogGPS overheads).
    pub const HAS_LOGGPS: u32 = 1 << 6;
    /// (1.1) Restored from the daemon's state file and not yet confirmed by
    /// a re-check; `measured_unix_ns` keeps the original measurement time.
    pub const RESTORED: u32 = 1 << 7;
    /// (1.1) The values stand for the pair's coverage class: set on class
    /// entries (peer name starting with `@`, set by the writer) and on
    /// class-fallback lookup results.
    pub const CLASS: u32 = 1 << 8;
    /// (1.1) Drift: a re-check disagreed with the previous entry beyond its
    /// intervals and the entry was measured again (`changed_unix_ns`).
    pub const CHANGED: u32 = 1 << 9;
    /// (1.1) The samples were multi-modal or repeated runs disagreed (the
    /// entry's `instability` names the likely cause when known).
    pub const UNSTABLE: u32 = 1 << 10;
    /// (1.1) At least one parameter of the entry is not identified (see its
    /// identification); set by the writer.
    pub const UNIDENTIFIED: u32 = 1 << 11;
    /// (1.1) A token-bucket or credit regime was recognised: burst and
    /// sustained rates differ (see the bandwidth block); set by the writer.
    pub const SHAPED: u32 = 1 << 12;
    /// Lookup result only: msg_bytes lies outside every protocol range; the
    /// nearest range was used.
    pub const EXTRAPOLATED: u32 = 1 << 16;
    /// Bits a writer may store in an entry (the rest is reserved).
    pub const ENTRY_MASK: u32 = 0xFFFF;
}

/// The header at offset 0.
#[repr(C)]
pub struct HeaderRaw {
    pub magic: AtomicU64,
    pub abi_major: AtomicU32,
    pub abi_minor: AtomicU32,
    pub header_bytes: AtomicU32,
    pub meta_bytes: AtomicU32,
    pub entry_bytes: AtomicU32,
    pub capacity_entries: AtomicU32,
    pub hash_slots: AtomicU32,
    pub max_ranges: AtomicU32,
    pub max_curve: AtomicU32,
    pub max_ci: AtomicU32,
    pub total_bytes: AtomicU64,
    pub copy_bytes: AtomicU64,
    pub copy_offset: [AtomicU64; 2],
    pub capabilities: AtomicU64,
    /// Random per daemon start (never 0 once written).
    pub generation: AtomicU64,
    pub writer_pid: AtomicU64,
    pub created_unix_ns: AtomicU64,
    pub _reserved0: [AtomicU64; 2],
    /// CLOCK_REALTIME nanoseconds of the writer's last heartbeat; 0 = the
    /// writer shut down. Own cache line.
    pub heartbeat_unix_ns: AtomicU64,
    pub _pad1: [AtomicU64; 7],
    /// Latch sequence: readers read copy `seq & 1`. Own cache line.
    pub seq: AtomicU64,
    pub _pad2: [AtomicU64; 7],
}

/// Per-copy metadata.
#[repr(C)]
pub struct MetaRaw {
    pub entry_count: AtomicU64,
    pub generation: AtomicU64,
    pub writer_pid: AtomicU64,
    pub published_unix_ns: AtomicU64,
    pub node_len: AtomicU64,
    pub clock_len: AtomicU64,
    pub _reserved: [AtomicU64; 2],
    pub node_name: [AtomicU64; 8],
    pub clock_desc: [AtomicU64; 16],
}

/// One protocol range (f64 fields as bits, sizes as u64).
#[repr(C)]
pub struct RangeRaw {
    pub from_bytes: AtomicU64,
    pub to_bytes: AtomicU64,
    pub g_ns: AtomicU64,
    pub big_g_ns_per_byte: AtomicU64,
    pub o_s_ns: AtomicU64,
    pub o_r_ns: AtomicU64,
    pub big_o_s_ns_per_byte: AtomicU64,
    pub big_o_r_ns_per_byte: AtomicU64,
}

/// One point of the o(P) / RTT(P) curve.
#[repr(C)]
pub struct CurveRaw {
    pub peers: AtomicU64,
    pub o_ns: AtomicU64,
    pub rtt_ns: AtomicU64,
}

/// One named 95 % interval.
#[repr(C)]
pub struct CiRaw {
    pub name: [AtomicU64; 4],
    pub lo: AtomicU64,
    pub hi: AtomicU64,
}

/// Bit positions inside [`EntryRaw::counts`].
pub mod counts {
    pub const PEER_LEN_SHIFT: u32 = 0;
    pub const TRANSPORT_LEN_SHIFT: u32 = 8;
    pub const RANGES_SHIFT: u32 = 16;
    pub const CURVE_SHIFT: u32 = 24;
    pub const CI_SHIFT: u32 = 32;
}

/// One (peer, transport) entry.
#[repr(C)]
pub struct EntryRaw {
    /// [`key_hash`] of the names.
    pub key_hash: AtomicU64,
    /// peer_len | transport_len << 8 | n_ranges << 16 | n_curve << 24 | n_ci << 32.
    pub counts: AtomicU64,
    pub flags: AtomicU64,
    pub samples: AtomicU64,
    pub probe_bytes: AtomicU64,
    pub measured_unix_ns: AtomicU64,
    pub eel_ns: AtomicU64,
    pub l_ns: AtomicU64,
    /// u64::MAX = none.
    pub s_bytes: AtomicU64,
    /// 0 = none.
    pub f: AtomicU64,
    pub o_min_ns: AtomicU64,
    pub o_max_ns: AtomicU64,
    pub g_f_ns: AtomicU64,
    pub _reserved: [AtomicU64; 3],
    pub peer: [AtomicU64; 8],
    pub transport: [AtomicU64; 2],
    pub _reserved2: [AtomicU64; 6],
    pub ranges: [RangeRaw; MAX_RANGES],
    pub curve: [CurveRaw; MAX_CURVE],
    pub ci95: [CiRaw; MAX_CI],
}

/// ABI 1.1: appended to [`HeaderRaw`] (offset 256). The capacities of the
/// variable parts of [`MetaExtRaw`]; written once at creation.
#[repr(C)]
pub struct HeaderExtRaw {
    /// Coverage classes the class table holds (1 ..= MAX_CLASSES).
    pub class_capacity: AtomicU32,
    /// Peers the peer → class map holds (1 ..= MAX_MAP_PEERS).
    pub map_capacity: AtomicU32,
    /// Hash slots of the map (a power of two > map_capacity).
    pub map_slots: AtomicU32,
    /// Per-transport records (TRANSPORT_RECORDS).
    pub transport_records: AtomicU32,
    /// MAX_LATENCY, MAX_K and SCHEMES of the writer (checked like max_ranges).
    pub max_latency: AtomicU32,
    pub max_k: AtomicU32,
    pub schemes: AtomicU32,
    /// (1.2) Bytes per hot-table record (0 on a 1.1 segment).
    pub hot_record_bytes: AtomicU32,
    /// (1.2) Offset of the hot table: `total_bytes` rounded up to 4096.
    pub hot_offset: AtomicU64,
    /// (1.2) The file's size: the end of the hot table.
    pub file_bytes: AtomicU64,
    pub _reserved: [AtomicU64; 2],
}

/// Bit positions inside [`EntryExtRaw::head`].
pub mod ext_head {
    /// Bit 0: the bandwidth block is set.
    pub const BANDWIDTH: u64 = 1 << 0;
    /// Number of latency records, 0 ..= MAX_LATENCY.
    pub const LATENCY_SHIFT: u32 = 8;
    /// Number of overlap records: 0 or the entry's number of ranges.
    pub const OVERLAP_SHIFT: u32 = 16;
    /// The instability cause code.
    pub const INSTABILITY_SHIFT: u32 = 24;
}

/// ABI 1.1 bandwidth block: the sustained large-message G and, when a
/// token-bucket or credit regime was recognised, the burst G and length.
#[repr(C)]
pub struct BandwidthRaw {
    /// range_index (u32; u32::MAX = not from a protocol range) | regime << 32.
    pub info: AtomicU64,
    pub sustained_g: AtomicU64,
    pub sustained_lo: AtomicU64,
    pub sustained_hi: AtomicU64,
    pub burst_g: AtomicU64,
    pub burst_lo: AtomicU64,
    pub burst_hi: AtomicU64,
    pub burst_bytes: AtomicU64,
}

/// ABI 1.1: percentiles of the half round trip PRTT(1,0,s)/2 at one size.
#[repr(C)]
pub struct LatencyRaw {
    pub size_bytes: AtomicU64,
    pub samples: AtomicU64,
    pub min_ns: AtomicU64,
    pub p50_ns: AtomicU64,
    pub p90_ns: AtomicU64,
    pub p99_ns: AtomicU64,
    pub p999_ns: AtomicU64,
    pub max_ns: AtomicU64,
}

/// ABI 1.1: a value with its 95 % interval (f64 bits).
#[repr(C)]
pub struct EstimateRaw {
    pub value: AtomicU64,
    pub lo: AtomicU64,
    pub hi: AtomicU64,
}

/// ABI 1.1: CPU overlap of one protocol range (fractions of the transfer
/// time, 0 ..= 1).
#[repr(C)]
pub struct OverlapRaw {
    pub send: EstimateRaw,
    pub recv: EstimateRaw,
}

/// ABI 1.1: appended to every [`EntryRaw`] (entry offset 2304).
#[repr(C)]
pub struct EntryExtRaw {
    /// See [`ext_head`].
    pub head: AtomicU64,
    /// Last time a re-check agreed with the entry, CLOCK_REALTIME ns (0 = never).
    pub checked_unix_ns: AtomicU64,
    /// Last time a re-check disagreed and the entry was re-measured (0 = never).
    pub changed_unix_ns: AtomicU64,
    /// 4-bit status per entry-level field (`Field`), field i at bits 4i..4i+3.
    pub ident_entry: AtomicU64,
    /// 4-bit status per range-level field (`RangeField`), one word per range.
    pub ident_range: [AtomicU64; MAX_RANGES],
    pub _reserved: [AtomicU64; 4],
    pub bandwidth: BandwidthRaw,
    pub latency: [LatencyRaw; MAX_LATENCY],
    pub overlap: [OverlapRaw; MAX_RANGES],
}

/// Bit positions inside [`TransportRaw::info`].
pub mod transport_info {
    /// Transport name length, 1 ..= 15.
    pub const NAME_LEN_SHIFT: u32 = 0;
    /// k counts of the three schemes, 4 bits each, 0 ..= MAX_K.
    pub const K_SHIFT: [u32; 3] = [8, 12, 16];
    /// The β, γ_o, γ_i fit is set.
    pub const SHARING: u64 = 1 << 20;
    /// The effective-bisection result is set.
    pub const BISECTION: u64 = 1 << 21;
}

/// ABI 1.1: what this node measured for one transport as a whole (not per
/// peer): bandwidth-sharing penalties, the sharing fit, the last effective
/// bisection bandwidth.
#[repr(C)]
pub struct TransportRaw {
    pub name: [AtomicU64; 2],
    /// See [`transport_info`].
    pub info: AtomicU64,
    /// 4-bit status per `TransportField`.
    pub status: AtomicU64,
    /// When the penalties and the fit were measured, CLOCK_REALTIME ns.
    pub contention_unix_ns: AtomicU64,
    pub _reserved: [AtomicU64; 3],
    /// penalty[scheme][k − 1] = T_shared / T_ref with its 95 % interval.
    pub penalty: [[EstimateRaw; MAX_K]; SCHEMES],
    pub beta: EstimateRaw,
    pub gamma_o: EstimateRaw,
    pub gamma_i: EstimateRaw,
    /// Bandwidths in bytes per second.
    pub bisection_min: AtomicU64,
    pub bisection_median: AtomicU64,
    pub bisection_mean: AtomicU64,
    pub bisection_max: AtomicU64,
    /// nodes | rounds << 32.
    pub bisection_shape: AtomicU64,
    pub bisection_msg_bytes: AtomicU64,
    pub bisection_unix_ns: AtomicU64,
    pub _reserved2: [AtomicU64; 8],
}

/// ABI 1.1: one coverage class (its name is the peer name of its entries).
#[repr(C)]
pub struct ClassRaw {
    pub len: AtomicU64,
    pub name: [AtomicU64; 8],
}

/// ABI 1.1: one peer of the peer → class map.
#[repr(C)]
pub struct MapRaw {
    pub peer: [AtomicU64; 8],
    /// peer_len | class_id << 8.
    pub info: AtomicU64,
    /// [`key_hash`] of (peer, "").
    pub hash: AtomicU64,
}

/// ABI 1.1: the fixed head of the per-copy extension (meta offset 256).
/// The class table, the map's slots and its records follow at the offsets
/// [`ExtLayout`] derives from the header extension.
#[repr(C)]
pub struct MetaExtRaw {
    pub transport_count: AtomicU64,
    pub class_count: AtomicU64,
    pub map_count: AtomicU64,
    pub _reserved: [AtomicU64; 5],
    pub transports: [TransportRaw; TRANSPORT_RECORDS],
}

// Compile-time layout assertions: these numbers are the ABI.
const _: () = {
    assert_layout!(HeaderRaw: 256; abi_major @ 8, header_bytes @ 16, entry_bytes @ 24,
        hash_slots @ 32, total_bytes @ 48, copy_bytes @ 56, copy_offset @ 64, capabilities @ 80,
        generation @ 88, writer_pid @ 96, created_unix_ns @ 104, heartbeat_unix_ns @ 128,
        seq @ 192);

    assert_layout!(MetaRaw: 256; node_name @ 64, clock_desc @ 128);

    assert_layout!(RangeRaw: 64);
    assert_layout!(CurveRaw: 24);
    assert_layout!(CiRaw: 48);

    assert_layout!(EntryRaw: 2304; counts @ 8, flags @ 16, measured_unix_ns @ 40, eel_ns @ 48,
        s_bytes @ 64, g_f_ns @ 96, peer @ 128, transport @ 192, ranges @ 256, curve @ 768,
        ci95 @ 1536);

    // ABI 1.1 blocks.
    assert_layout!(HeaderExtRaw: 64; hot_record_bytes @ 28, hot_offset @ 32, file_bytes @ 40);
    assert_layout!(BandwidthRaw: 64);
    assert_layout!(LatencyRaw: 64);
    assert_layout!(OverlapRaw: 48);
    assert_layout!(EntryExtRaw: 1088; ident_entry @ 24, ident_range @ 32, bandwidth @ 128,
        latency @ 192, overlap @ 704);
    assert_layout!(TransportRaw: 832; penalty @ 64, beta @ 640, bisection_min @ 712);
    assert_layout!(ClassRaw: 72);
    assert_layout!(MapRaw: 80);
    assert_layout!(MetaExtRaw: 64 + 8 * 832; transports @ 64);
    assert!(MAX_LATENCY < 256 && MAX_K < 16 && MAX_CLASSES < (1 << 24));

    // Names fit their word arrays with a terminating NUL.
    assert!(PEER_MAX_BYTES < 8 * 8);
    assert!(TRANSPORT_MAX_BYTES < 2 * 8);
    assert!(CI_NAME_MAX_BYTES < 4 * 8);
    assert!(NODE_MAX_BYTES < 8 * 8);
    assert!(CLOCK_DESC_MAX_BYTES < 16 * 8);
    // Counts fit their 8-bit fields.
    assert!(MAX_RANGES < 256 && MAX_CURVE < 256 && MAX_CI < 256);
};

/// Byte offsets of the ABI 1.1 parts, derived from the header extension.
/// Offsets are relative to the start of a copy (the meta region starts it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtLayout {
    pub class_capacity: usize,
    pub map_capacity: usize,
    pub map_slots: usize,
    /// Offset of [`MetaExtRaw`].
    pub meta_ext_offset: usize,
    /// Offset of the class table (`ClassRaw × class_capacity`).
    pub classes_offset: usize,
    /// Offset of the map's slots (`u64 × map_slots`).
    pub map_slots_offset: usize,
    /// Offset of the map's records (`MapRaw × map_capacity`).
    pub map_records_offset: usize,
    /// End of the extension: meta_bytes is at least this.
    pub meta_ext_end: usize,
    /// Offset of [`EntryExtRaw`] inside an entry.
    pub entry_ext_offset: usize,
}

impl ExtLayout {
    /// The extension for these capacities, or None when out of range.
    pub fn new(class_capacity: usize, map_capacity: usize, map_slots: usize) -> Option<ExtLayout> {
        if class_capacity == 0 || class_capacity > MAX_CLASSES {
            return None;
        }
        if map_capacity == 0 || map_capacity > MAX_MAP_PEERS {
            return None;
        }
        if !map_slots.is_power_of_two()
            || map_slots <= map_capacity
            || map_slots > 4 * MAX_MAP_PEERS
        {
            return None;
        }
        let meta_ext_offset = size_of::<MetaRaw>();
        let classes_offset = meta_ext_offset + size_of::<MetaExtRaw>();
        let map_slots_offset = classes_offset + class_capacity * size_of::<ClassRaw>();
        let map_records_offset = map_slots_offset + map_slots * 8;
        let meta_ext_end = map_records_offset + map_capacity * size_of::<MapRaw>();
        Some(ExtLayout {
            class_capacity,
            map_capacity,
            map_slots,
            meta_ext_offset,
            classes_offset,
            map_slots_offset,
            map_records_offset,
            meta_ext_end,
            entry_ext_offset: size_of::<EntryRaw>(),
        })
    }

    /// The capacities a writer chooses by default for `capacity` entries:
    /// as many classes and mapped peers as entries, up to the maxima.
    pub fn for_capacity(capacity: usize) -> Option<ExtLayout> {
        let map = capacity.min(MAX_MAP_PEERS);
        ExtLayout::new(
            capacity.min(MAX_CLASSES),
            map,
            (2 * map).next_power_of_two(),
        )
    }

    /// Bytes of header, meta and entry this extension needs.
    pub fn min_sizes(&self) -> (usize, usize, usize) {
        (
            size_of::<HeaderRaw>() + size_of::<HeaderExtRaw>(),
            self.meta_ext_end,
            size_of::<EntryRaw>() + size_of::<EntryExtRaw>(),
        )
    }
}

/// Byte offsets of one segment, derived from its sizes by a fixed formula.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub capacity: usize,
    pub hash_slots: usize,
    pub header_bytes: usize,
    pub meta_bytes: usize,
    pub entry_bytes: usize,
    /// Offset of the slot array inside a copy.
    pub slots_offset: usize,
    /// Offset of entry 0 inside a copy.
    pub entries_offset: usize,
    pub copy_bytes: usize,
    pub copy_offset: [usize; 2],
    pub total_bytes: usize,
    /// The ABI 1.1 parts (None for a 1.0 segment).
    pub ext: Option<ExtLayout>,
    /// The ABI 1.2 hot table (None before 1.2).
    pub hot: Option<HotLayout>,
    /// Bytes of the file: `total_bytes`, or the end of the hot table.
    pub file_bytes: usize,
}

/// Largest header, meta or entry size a reader accepts (every reader since
/// ABI 1.0 enforces it: the writer keeps within it).
pub const LIMIT_STRUCT_BYTES: usize = 1 << 20;

fn round_up_64(x: usize) -> Option<usize> {
    x.checked_add(63).map(|v| v & !63)
}

impl Layout {
    /// The layout this crate writes for `capacity` entries, with the default
    /// class and map capacities ([`ExtLayout::for_capacity`]).
    pub fn new(capacity: usize) -> Option<Layout> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return None;
        }
        Layout::with_ext(capacity, ExtLayout::for_capacity(capacity)?)
    }

    /// The layout this crate writes for `capacity` entries and the given
    /// ABI 1.1 extension.
    pub fn with_ext(capacity: usize, ext: ExtLayout) -> Option<Layout> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return None;
        }
        let hash_slots = (2 * capacity).next_power_of_two();
        let (h, m, e) = ext.min_sizes();
        Layout::from_params_ext(capacity, hash_slots, h, round_up_64(m)?, e, Some(ext))?
            .with_hot(HOT_RECORD_BYTES)
    }

    /// This layout plus the ABI 1.2 hot table of `record_bytes` per record
    /// after `total_bytes`; None without the 1.1 extension (the table's
    /// size lives in the header extension) or when out of range.
    pub fn with_hot(self, record_bytes: usize) -> Option<Layout> {
        self.ext?;
        let hot = HotLayout::new(self.total_bytes, self.capacity, record_bytes)?;
        Some(Layout {
            hot: Some(hot),
            file_bytes: hot.file_bytes,
            ..self
        })
    }

    /// The layout for the given sizes, or None when they are out of range
    /// (too small for this ABI, misaligned, too large, overflowing). The
    /// ABI 1.0 formula: a 1.0 segment, or a newer one read as 1.0.
    pub fn from_params(
        capacity: usize,
        hash_slots: usize,
        header_bytes: usize,
        meta_bytes: usize,
        entry_bytes: usize,
    ) -> Option<Layout> {
        Layout::from_params_ext(
            capacity,
            hash_slots,
            header_bytes,
            meta_bytes,
            entry_bytes,
            None,
        )
    }

    /// [`Layout::from_params`] plus the ABI 1.1 extension, whose parts must
    /// fit the declared sizes.
    pub fn from_params_ext(
        capacity: usize,
        hash_slots: usize,
        header_bytes: usize,
        meta_bytes: usize,
        entry_bytes: usize,
        ext: Option<ExtLayout>,
    ) -> Option<Layout> {
        if capacity == 0 || capacity > MAX_CAPACITY {
            return None;
        }
        if !hash_slots.is_power_of_two() || hash_slots <= capacity || hash_slots > 4 * MAX_CAPACITY
        {
            return None;
        }
        let sized = |v: usize, min: usize| v >= min && v % 64 == 0 && v <= LIMIT_STRUCT_BYTES;
        if !sized(header_bytes, size_of::<HeaderRaw>())
            || !sized(meta_bytes, size_of::<MetaRaw>())
            || !sized(entry_bytes, size_of::<EntryRaw>())
        {
            return None;
        }
        if let Some(x) = ext {
            let (h, m, e) = x.min_sizes();
            if header_bytes < h || meta_bytes < m || entry_bytes < e {
                return None;
            }
        }
        let slots_offset = meta_bytes;
        let entries_offset = round_up_64(slots_offset.checked_add(hash_slots.checked_mul(8)?)?)?;
        let copy_bytes = entries_offset.checked_add(capacity.checked_mul(entry_bytes)?)?;
        let copy0 = header_bytes;
        let copy1 = copy0.checked_add(copy_bytes)?;
        let total_bytes = copy1.checked_add(copy_bytes)?;
        Some(Layout {
            capacity,
            hash_slots,
            header_bytes,
            meta_bytes,
            entry_bytes,
            slots_offset,
            entries_offset,
            copy_bytes,
            copy_offset: [copy0, copy1],
            total_bytes,
            ext,
            hot: None,
            file_bytes: total_bytes,
        })
    }
}

mod hot;
mod names;

pub use hot::*;
pub use names::*;

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
