//! The values of an entry's ABI 1.1 block, each beside its status.

use crate::layout::{MAX_LATENCY, MAX_RANGES};

use super::*;

/// zero; a producer may state a value it could not measure as
/// [`Estimate::NONE`] (NaN).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Estimate {
    #[cfg_attr(feature = "serde", serde(with = "nan_as_null"))]
    pub value: f64,
    #[cfg_attr(feature = "serde", serde(with = "nan_as_null"))]
    pub lo: f64,
    #[cfg_attr(feature = "serde", serde(with = "nan_as_null"))]
    pub hi: f64,
}

impl Estimate {
    /// No value: all NaN.
    pub const NONE: Estimate = Estimate {
        value: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
    };

    pub fn new(value: f64, lo: f64, hi: f64) -> Estimate {
        Estimate { value, lo, hi }
    }

    /// A finite value inside a finite interval.
    pub fn is_bracketed(&self) -> bool {
        self.value.is_finite()
            && self.lo.is_finite()
            && self.hi.is_finite()
            && self.lo <= self.value
            && self.value <= self.hi
    }
}

/// Regime codes of [`Bandwidth::regime`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Regime {
    /// Code 0: one rate; no burst regime was recognised.
    Single = 0,
    /// Code 1: a token bucket: bursts of `burst_bytes` at the burst rate,
    /// then the sustained rate.
    TokenBucket = 1,
    /// Code 2: credit-based flow control: a window of `burst_bytes` at the
    /// burst rate, then the rate credits come back at.
    Credit = 2,
}

/// [`Bandwidth::range_index`] when the sustained G does not come from a
/// protocol range (a dedicated long-burst measurement).
pub const NO_RANGE: u32 = u32::MAX;

/// The large-message bandwidth of a pair: the sustained per-byte gap (the
/// bandwidth is 1/G) and, when a token-bucket or credit regime was
/// recognised, the burst rate and the burst length. Statuses: Field::
/// SustainedG and Field::BurstG. C: `ng_bandwidth`.
#[allow(non_snake_case)]
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bandwidth {
    /// Sustained G, ns per byte, with its 95 % interval.
    pub sustained_G_ns_per_byte: Estimate,
    /// Burst G, ns per byte (0 when the regime is Single).
    pub burst_G_ns_per_byte: Estimate,
    /// Bytes that pass at the burst rate before the sustained rate sets in
    /// (0 when the regime is Single).
    pub burst_bytes: u64,
    /// [`Regime`] code.
    pub regime: u32,
    /// The protocol range the sustained G is that of, or [`NO_RANGE`].
    pub range_index: u32,
}

impl Default for Bandwidth {
    fn default() -> Self {
        Bandwidth {
            sustained_G_ns_per_byte: Estimate::default(),
            burst_G_ns_per_byte: Estimate::default(),
            burst_bytes: 0,
            regime: Regime::Single as u32,
            range_index: NO_RANGE,
        }
    }
}

impl Bandwidth {
    /// A single-rate bandwidth: sustained G (ns/B) from range `range` (None:
    /// not from a protocol range).
    #[allow(non_snake_case)]
    pub fn sustained(G_ns_per_byte: Estimate, range: Option<usize>) -> Bandwidth {
        Bandwidth {
            sustained_G_ns_per_byte: G_ns_per_byte,
            range_index: range.map_or(NO_RANGE, |r| r.min(u32::MAX as usize - 1) as u32),
            ..Bandwidth::default()
        }
    }

    /// The same with a recognised burst regime: burst G and burst length.
    #[allow(non_snake_case)]
    pub fn with_burst(
        self,
        regime: Regime,
        G_ns_per_byte: Estimate,
        burst_bytes: u64,
    ) -> Bandwidth {
        Bandwidth {
            burst_G_ns_per_byte: G_ns_per_byte,
            burst_bytes,
            regime: regime as u32,
            ..self
        }
    }

    /// The regime, None for a code this reader does not know.
    pub fn regime(&self) -> Option<Regime> {
        match self.regime {
            0 => Some(Regime::Single),
            1 => Some(Regime::TokenBucket),
            2 => Some(Regime::Credit),
            _ => None,
        }
    }

    /// The protocol range of the sustained G, if it is one.
    pub fn range(&self) -> Option<usize> {
        (self.range_index != NO_RANGE).then_some(self.range_index as usize)
    }

    /// The sustained bandwidth 1/G in bytes per second (NaN or ∞ when G is
    /// not a positive number).
    pub fn sustained_bytes_per_s(&self) -> f64 {
        1e9 / self.sustained_G_ns_per_byte.value
    }
}

/// Percentiles of the half round trip PRTT(1,0,s)/2 at one message size,
/// ns (nearest-rank over `samples` samples: below 1000 samples p99.9 is the
/// maximum). C: `ng_latency`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LatencyPercentiles {
    pub size_bytes: u64,
    pub samples: u64,
    pub min_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
}

/// CPU overlap of one protocol range (Bell et al.'s CPU-overlap test): the
/// fraction, 0..=1, of a message's transfer time that the sending and the
/// receiving CPU can spend computing, with 95 % intervals. Statuses:
/// RangeField::OverlapSend / OverlapRecv. C: `ng_overlap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Overlap {
    pub send: Estimate,
    pub recv: Estimate,
}

/// The likely cause of an UNSTABLE entry (stored as an 8-bit code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Instability {
    /// Code 0: none stated.
    #[default]
    None,
    /// Code 1: the driver and the responder shared a CPU core.
    SharedCore,
    /// Code 2: the samples of a size fall into several modes.
    MultiModal,
    /// Code 3: repeated runs gave values outside each other's intervals.
    RunsDisagree,
    /// Code 4: the host or the link was disturbed during the sweep.
    Interference,
    /// A code this reader does not know (read, never written).
    Unknown(u8),
}

impl Instability {
    pub fn code(self) -> u8 {
        match self {
            Instability::None => 0,
            Instability::SharedCore => 1,
            Instability::MultiModal => 2,
            Instability::RunsDisagree => 3,
            Instability::Interference => 4,
            Instability::Unknown(c) => c,
        }
    }

    pub fn from_code(c: u8) -> Instability {
        match c {
            0 => Instability::None,
            1 => Instability::SharedCore,
            2 => Instability::MultiModal,
            3 => Instability::RunsDisagree,
            4 => Instability::Interference,
            c => Instability::Unknown(c),
        }
    }

    /// "none", "shared_core", "multi_modal", "runs_disagree",
    /// "interference", "unknown".
    pub fn name(self) -> &'static str {
        match self {
            Instability::None => "none",
            Instability::SharedCore => "shared_core",
            Instability::MultiModal => "multi_modal",
            Instability::RunsDisagree => "runs_disagree",
            Instability::Interference => "interference",
            Instability::Unknown(_) => "unknown",
        }
    }
}

/// The statuses that go with one lookup's [`crate::Params`]: the entry-level
/// status word (see [`Field`]), the status word of the range the lookup used
/// (see [`RangeField`]) and that range's index. All zero (not assessed) on a
/// 1.0 segment. C: `ng_params_status`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParamsStatus {
    pub entry: u64,
    pub range: u64,
    pub range_index: u32,
    pub reserved: u32,
}

impl ParamsStatus {
    /// Status of an entry-level parameter.
    pub fn get(&self, f: Field) -> Status {
        nibble(self.entry, f as u8)
    }

    /// Status of a parameter of the range the lookup used.
    pub fn get_range(&self, f: RangeField) -> Status {
        nibble(self.range, f as u8)
    }

    /// Whether every parameter the lookup returned (EEL, L, g, G, o_s, o_r,
    /// O_s, O_r) is identified.
    pub fn all_identified(&self) -> bool {
        [Field::Eel, Field::L]
            .iter()
            .all(|f| self.get(*f) == Status::Identified)
            && RangeField::ALL[..6]
                .iter()
                .all(|f| self.get_range(*f) == Status::Identified)
    }
}

/// The ABI 1.1 part of an entry, owned: what producers fill (every part
/// optional; the default states nothing) and what a dump reads back. On a
/// 1.0 segment it reads as the default.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
pub struct EntryExtData {
    /// Status of every parameter.
    pub ident: Identification,
    /// Last re-check that agreed with the entry, CLOCK_REALTIME ns (0 =
    /// never). A RESTORED entry loses that flag when one agrees.
    pub checked_unix_ns: u64,
    /// Last re-check that disagreed, after which the entry was measured
    /// again (0 = never; see the CHANGED flag).
    pub changed_unix_ns: u64,
    /// Cause of an UNSTABLE entry; a cause other than None sets UNSTABLE.
    pub instability: Instability,
    /// The large-message bandwidth, when measured.
    pub bandwidth: Option<Bandwidth>,
    /// Half-round-trip percentiles for up to 8 sizes, sizes increasing.
    pub latency: Vec<LatencyPercentiles>,
    /// CPU overlap per protocol range: empty, or one per range.
    pub overlap: Vec<Overlap>,
}

/// [`EntryExt::present`] bit: the entry carries the ABI 1.1 block (0 for
/// every entry of a 1.0 segment).
pub const EXT_V11: u32 = 1 << 0;
/// [`EntryExt::present`] bit: `bandwidth` is set.
pub const EXT_BANDWIDTH: u32 = 1 << 1;
/// [`EntryExt::present`] bit: `n_latency` > 0.
pub const EXT_LATENCY: u32 = 1 << 2;
/// [`EntryExt::present`] bit: `n_overlap` > 0 (one per range).
pub const EXT_OVERLAP: u32 = 1 << 3;

/// The ABI 1.1 part of an entry as a fixed-size value, copied out by
/// [`crate::Reader::entry_ext`] without allocating. C: `ng_entry_ext`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EntryExt {
    /// EXT_* bits.
    pub present: u32,
    pub n_latency: u32,
    pub n_overlap: u32,
    /// [`Instability`] code.
    pub instability: u32,
    pub checked_unix_ns: u64,
    pub changed_unix_ns: u64,
    pub ident: Identification,
    /// Valid when `present & EXT_BANDWIDTH`.
    pub bandwidth: Bandwidth,
    /// The first `n_latency` are valid.
    pub latency: [LatencyPercentiles; MAX_LATENCY],
    /// The first `n_overlap` are valid (range i at index i).
    pub overlap: [Overlap; MAX_RANGES],
}

impl Default for EntryExt {
    fn default() -> Self {
        EntryExt {
            present: 0,
            n_latency: 0,
            n_overlap: 0,
            instability: 0,
            checked_unix_ns: 0,
            changed_unix_ns: 0,
            ident: Identification::default(),
            bandwidth: Bandwidth::default(),
            latency: [LatencyPercentiles::default(); MAX_LATENCY],
            overlap: [Overlap::default(); MAX_RANGES],
        }
    }
}

impl EntryExt {
    /// The bandwidth block, if set.
    pub fn bandwidth(&self) -> Option<&Bandwidth> {
        (self.present & EXT_BANDWIDTH != 0).then_some(&self.bandwidth)
    }

    /// The latency records.
    pub fn latency(&self) -> &[LatencyPercentiles] {
        &self.latency[..(self.n_latency as usize).min(MAX_LATENCY)]
    }

    /// The overlap records, one per range (empty when not measured).
    pub fn overlap(&self) -> &[Overlap] {
        &self.overlap[..(self.n_overlap as usize).min(MAX_RANGES)]
    }

    pub fn instability(&self) -> Instability {
        Instability::from_code(self.instability.min(255) as u8)
    }

    /// The owned form (allocates).
    pub fn to_data(&self) -> EntryExtData {
        EntryExtData {
            ident: self.ident,
            checked_unix_ns: self.checked_unix_ns,
            changed_unix_ns: self.changed_unix_ns,
            instability: self.instability(),
            bandwidth: self.bandwidth().copied(),
            latency: self.latency().to_vec(),
            overlap: self.overlap().to_vec(),
        }
    }
}
