//! Plain data types and errors shared by the reader, the writer and the C ABI.
//!
//! [`RangeData`] and [`EntryData`] are the one schema of a range of
//! parameters and of a published entry: the fit produces ranges of this
//! type, the daemon's state file and `ngctl`'s JSON serialize them (with
//! the optional `serde` feature; JSON has no NaN, so a non-finite value is
//! written as null and read back as NaN), and the writer lays them out in
//! the segment's repr(C) layout (`layout.rs`, the ABI).

use std::fmt;
use std::io;

/// A LogGP(S) line at message size s: `at1 + (s − 1)·per_byte` (the gap
/// g + (s−1)·G, an overhead o' + (s−1)·O). s = 0 counts as s = 1.
#[inline]
pub fn line_ns(at1_ns: f64, per_byte_ns: f64, msg_bytes: u64) -> f64 {
    at1_ns + msg_bytes.saturating_sub(1) as f64 * per_byte_ns
}

/// One protocol range of an entry: the fit's range, the state file's and
/// `ngctl probe --json`'s, and the writer's input.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RangeData {
    /// First message size of the range, bytes.
    pub from_bytes: u64,
    /// Inclusive upper end: the last sampled size of the range (also for
    /// the last range, whose line holds beyond it), bytes.
    pub to_bytes: u64,
    /// g of the range's line gap(s) = g + (s−1)·G: its value at s = 1, as in
    /// the paper's Table 2, also for ranges that start far above s = 1.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub g_ns: f64,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub G_ns_per_byte: f64,
    /// o' of o_s(s) = o' + (s−1)·O_s: the range's line at s = 1, like g.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub o_s_ns: f64,
    /// o' of o_r(s) = o' + (s−1)·O_r (0 when the transport has no o_r).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub o_r_ns: f64,
    /// LogGPS send overhead slope, ns per byte (0 when not measured).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub O_s_ns_per_byte: f64,
    /// LogGPS receive overhead slope, ns per byte (0 when not measured).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub O_r_ns_per_byte: f64,
}

impl RangeData {
    /// The range's gap line at `msg_bytes`: g + (s−1)·G.
    #[inline]
    pub fn gap_ns(&self, msg_bytes: u64) -> f64 {
        line_ns(self.g_ns, self.G_ns_per_byte, msg_bytes)
    }
}

/// Everything the segment holds for one (peer, transport) pair.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct EntryData {
    /// Peer host name, 1..=63 bytes, no NUL.
    pub peer: String,
    /// Transport name as `ngctl probe --transport` takes it (sim, udp, raw,
    /// rdma, msg, mpi), 1..=15 bytes.
    pub transport: String,
    /// 1..=8 protocol ranges, sorted, non-overlapping.
    pub ranges: Vec<RangeData>,
    /// End-to-end latency PRTT(1,0,1)/2, what Netgauge reports as L.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub eel_ns: f64,
    /// LogGP L = EEL − o_s − o_r (may be negative: flag L_NEGATIVE).
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub L_ns: f64,
    /// LogGPS rendezvous threshold.
    pub S_bytes: Option<u64>,
    /// LogfP f (messages injected without paying g).
    pub f: Option<u32>,
    /// LogfP o(P) = o_min + o_max / P.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub o_min_ns: f64,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub o_max_ns: f64,
    /// LogfP gap per message beyond f.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::f64_or_nan"))]
    pub g_f_ns: f64,
    /// Measured 1:P−P:1 points: (P, o(P) ns, RTT(P) ns), at most 32.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::curve"))]
    pub curve: Vec<(u32, f64, f64)>,
    /// Named 95 % intervals (name ≤ 31 bytes, lo, hi), at most 16.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "json::intervals"))]
    pub ci95: Vec<(String, f64, f64)>,
    /// Number of samples the fit used.
    pub samples: u64,
    /// Bytes the probe put on the wire.
    pub probe_bytes: u64,
    /// When it was measured, CLOCK_REALTIME ns.
    pub measured_unix_ns: u64,
    /// [`crate::flags`] bits (the writer sets HAS_S / HAS_LOGFP / HAS_LOGGPS,
    /// CLASS, UNIDENTIFIED and SHAPED itself from the data).
    pub flags: u32,
    /// ABI 1.1: identification, provenance times, bandwidth, latency
    /// percentiles, overlap. The default states nothing; a 1.0 segment reads
    /// back as the default.
    #[cfg_attr(feature = "serde", serde(default))]
    pub ext: crate::ext::EntryExtData,
}

impl EntryData {
    /// What a lookup of a size in range `r` of this entry returns.
    pub fn params_of(&self, r: &RangeData) -> Params {
        Params {
            eel_ns: self.eel_ns,
            L_ns: self.L_ns,
            o_s_ns: r.o_s_ns,
            o_r_ns: r.o_r_ns,
            g_ns: r.g_ns,
            G_ns_per_byte: r.G_ns_per_byte,
            O_s_ns_per_byte: r.O_s_ns_per_byte,
            O_r_ns_per_byte: r.O_r_ns_per_byte,
            o_min_ns: self.o_min_ns,
            o_max_ns: self.o_max_ns,
            g_f_ns: self.g_f_ns,
            S_bytes: self.S_bytes.unwrap_or(u64::MAX),
            range_from_bytes: r.from_bytes,
            range_to_bytes: r.to_bytes,
            measured_unix_ns: self.measured_unix_ns,
            samples: self.samples,
            f: self.f.unwrap_or(0),
            flags: self.flags,
        }
    }

    /// One [`Params`] per protocol range, as lookups of sizes in each
    /// range return them.
    pub fn params(&self) -> Vec<Params> {
        self.ranges.iter().map(|r| self.params_of(r)).collect()
    }
}

/// The parameters of the protocol range that contains a message size:
/// what a lookup returns. Identical in layout to C's `ng_params`.
#[allow(non_snake_case)]
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Params {
    pub eel_ns: f64,
    pub L_ns: f64,
    pub o_s_ns: f64,
    pub o_r_ns: f64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    pub O_s_ns_per_byte: f64,
    pub O_r_ns_per_byte: f64,
    pub o_min_ns: f64,
    pub o_max_ns: f64,
    pub g_f_ns: f64,
    /// u64::MAX when the entry has no S.
    pub S_bytes: u64,
    pub range_from_bytes: u64,
    pub range_to_bytes: u64,
    pub measured_unix_ns: u64,
    pub samples: u64,
    /// LogfP f, 0 when unknown.
    pub f: u32,
    /// Entry flags, plus EXTRAPOLATED when msg_bytes lies outside all ranges.
    pub flags: u32,
}

const _: () = {
    assert_layout!(Params: 136; S_bytes @ 88, samples @ 120, f @ 128, flags @ 132);
};

impl Params {
    /// The range's gap line at `msg_bytes`: g + (s−1)·G.
    #[inline]
    pub fn gap_ns(&self, msg_bytes: u64) -> f64 {
        line_ns(self.g_ns, self.G_ns_per_byte, msg_bytes)
    }

    /// Time for one message of `msg_bytes` under the model, ns:
    /// o_s(s) + L + (s−1)·G + o_r(s), with o_x(s) = o_x + (s−1)·O_x, plus the
    /// rendezvous handshake 2·EEL (a request-to-send / clear-to-send round
    /// trip) when the entry has S and s > S.
    #[inline]
    pub fn predict_ns(&self, msg_bytes: u64) -> f64 {
        let k = msg_bytes.saturating_sub(1) as f64;
        let mut t = self.o_s_ns
            + k * self.O_s_ns_per_byte
            + self.L_ns
            + k * self.G_ns_per_byte
            + self.o_r_ns
            + k * self.O_r_ns_per_byte;
        if self.S_bytes != u64::MAX && msg_bytes > self.S_bytes {
            t += 2.0 * self.eel_ns;
        }
        t
    }
}

/// Why a lookup failed. [`LookupError::errno`] gives the C return code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LookupError {
    /// Unknown peer or transport (-ENOENT).
    NotFound,
    /// Daemon gone (no heartbeat within the threshold), entry marked stale, or
    /// data older than the reader's maximum age (-ESTALE).
    Stale,
    /// No consistent snapshot after the bounded number of retries (-EAGAIN).
    Busy,
    /// The segment contents are inconsistent / corrupt (-EINVAL).
    Invalid,
}

impl LookupError {
    /// The negative errno the C ABI returns for this error.
    pub fn errno(self) -> i32 {
        match self {
            LookupError::NotFound => -libc::ENOENT,
            LookupError::Stale => -libc::ESTALE,
            LookupError::Busy => -libc::EAGAIN,
            LookupError::Invalid => -libc::EINVAL,
        }
    }
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LookupError::NotFound => "unknown peer or transport",
            LookupError::Stale => "stale: daemon gone or data too old",
            LookupError::Busy => "no consistent snapshot after bounded retries",
            LookupError::Invalid => "invalid segment",
        })
    }
}

impl std::error::Error for LookupError {}

/// Why a segment could not be opened for reading.
#[derive(Debug)]
pub enum ReaderError {
    /// open/fstat/mmap failed.
    Io(io::Error),
    /// The file is not a usable segment (the reason says which check failed).
    Invalid(&'static str),
    /// The file is not one a reader may trust: a symbolic link, not a
    /// regular file, an untrusted owner, writable by others (`why`; `errno`
    /// for C: ELOOP, EINVAL or EPERM).
    Refused { errno: i32, why: String },
}

impl ReaderError {
    /// The positive errno for C (`errno` after `ng_open` returns NULL).
    pub fn errno(&self) -> i32 {
        match self {
            ReaderError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            ReaderError::Invalid(_) => libc::EINVAL,
            ReaderError::Refused { errno, .. } => *errno,
        }
    }
}

impl fmt::Display for ReaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReaderError::Io(e) => write!(f, "cannot map segment: {e}"),
            ReaderError::Invalid(why) => write!(f, "invalid segment: {why}"),
            ReaderError::Refused { why, .. } => write!(f, "segment refused: {why}"),
        }
    }
}

impl std::error::Error for ReaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReaderError::Io(e) => Some(e),
            ReaderError::Invalid(_) | ReaderError::Refused { .. } => None,
        }
    }
}

impl From<io::Error> for ReaderError {
    fn from(e: io::Error) -> Self {
        ReaderError::Io(e)
    }
}

/// Why the writer refused an update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SegmentError {
    /// All `capacity` entries are in use.
    Full { capacity: usize },
    /// No entry for that (peer, transport).
    NotFound,
    /// The entry's content does not fit the segment (the reason says why).
    BadEntry(&'static str),
    /// A per-transport record was refused (the reason says why).
    BadTransport(&'static str),
    /// A peer → class assignment was refused (the reason says why).
    BadClass(&'static str),
    /// A fixed table of the segment is full (transport records, classes, or
    /// mapped peers).
    TableFull {
        table: &'static str,
        capacity: usize,
    },
}

impl fmt::Display for SegmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SegmentError::Full { capacity } => write!(f, "segment full ({capacity} entries)"),
            SegmentError::NotFound => f.write_str("no such (peer, transport) entry"),
            SegmentError::BadEntry(why) => write!(f, "entry rejected: {why}"),
            SegmentError::BadTransport(why) => write!(f, "transport record rejected: {why}"),
            SegmentError::BadClass(why) => write!(f, "class assignment rejected: {why}"),
            SegmentError::TableFull { table, capacity } => {
                write!(f, "segment {table} table full ({capacity})")
            }
        }
    }
}

impl std::error::Error for SegmentError {}

/// Header and identity information of a mapped segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub capabilities: u64,
    pub capacity_entries: usize,
    pub total_bytes: usize,
    /// Random per daemon start.
    pub generation: u64,
    pub writer_pid: u32,
    pub node_name: String,
    pub clock_desc: String,
    /// Entries in the current snapshot.
    pub entry_count: usize,
    /// CLOCK_REALTIME ns of the last heartbeat, 0 if the writer shut down.
    pub heartbeat_unix_ns: u64,
    /// Latch sequence (number of publishes since creation).
    pub seq: u64,
}

/// JSON has no NaN: serde_json writes a non-finite f64 as null; these read
/// null back as NaN.
#[cfg(feature = "serde")]
mod json {
    use serde::{Deserialize, Deserializer};

    fn nan(v: Option<f64>) -> f64 {
        v.unwrap_or(f64::NAN)
    }

    pub fn f64_or_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(nan(Option::deserialize(d)?))
    }

    pub fn curve<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u32, f64, f64)>, D::Error> {
        let v: Vec<(u32, Option<f64>, Option<f64>)> = Vec::deserialize(d)?;
        Ok(v.into_iter().map(|(p, o, r)| (p, nan(o), nan(r))).collect())
    }

    pub fn intervals<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64, f64)>, D::Error> {
        let v: Vec<(String, Option<f64>, Option<f64>)> = Vec::deserialize(d)?;
        Ok(v.into_iter()
            .map(|(k, lo, hi)| (k, nan(lo), nan(hi)))
            .collect())
    }
}
