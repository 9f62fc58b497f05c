//! ABI 1.1 data: whether each parameter is identified (or why not), the
//! sustained and burst bandwidth, half-round-trip percentiles, CPU overlap,
//! provenance times, and the per-transport contention record.
//!
//! The leaf types are `Copy` and `repr(C)`: the writer takes them, the
//! allocation-free reader returns them, and `netgauge.h` declares the same
//! structs. [`EntryExtData`] is the owned form producers fill (inside
//! [`crate::EntryData::ext`]); [`EntryExt`] is its fixed-size view that a
//! lookup copies out without allocating. Every value stands beside a
//! [`Status`]; the writer refuses an entry whose identified values are not
//! finite numbers with an interval around them.

use crate::layout::{MAX_K, MAX_LATENCY, MAX_RANGES, SCHEMES};
use crate::types::SegmentError;

/// Whether a published value can be used, and when not, why not.
/// Stored as a 4-bit code (see [`Status::code`]); the default, code 0,
/// means the producer made no statement (every value of a 1.0 segment).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Status {
    /// No statement (code 0): the value is published as measured.
    #[default]
    NotAssessed,
    /// Identified (code 1): a finite value with a 95 % interval around it.
    Identified,
    /// Not identified (codes 2..=15), for this reason.
    NotIdentified(Reason),
}

/// Why a value is not identified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Reason {
    /// Code 2: the estimate is below its physical bound (a negative time,
    /// gap, overhead or fraction).
    Negative,
    /// Code 3: the 95 % interval reaches zero or below: the sign is not known.
    CrossesZero,
    /// Code 4: too few sizes or samples to fit it.
    TooFewPoints,
    /// Code 5: the transport has no such parameter (o_r of a one-sided RDMA
    /// write, S on a datagram transport).
    NotApplicable,
    /// Code 6: multi-modal samples, or repeated runs disagree.
    Unstable,
    /// Code 7: a token-bucket or credit regime mixes burst and sustained
    /// behaviour in the sizes this value was fitted over.
    Shaper,
    /// Code 8: the interval is wider than the producer accepts.
    WideInterval,
    /// Code 9: the measurement that yields it did not run (no fan-out, the
    /// sweep did not reach the sizes).
    NotMeasured,
    /// Code 10: a constrained fit stopped at its physical bound (g = 0,
    /// O = 0): only an upper limit is known.
    AtBound,
    /// Code 15: another reason.
    Other,
    /// Codes 11..=14: reserved for later ABI minors. Read, never written: a
    /// reader treats the value as not identified.
    Unknown(u8),
}

impl Status {
    /// The 4-bit code stored in the segment.
    pub fn code(self) -> u8 {
        match self {
            Status::NotAssessed => 0,
            Status::Identified => 1,
            Status::NotIdentified(r) => match r {
                Reason::Negative => 2,
                Reason::CrossesZero => 3,
                Reason::TooFewPoints => 4,
                Reason::NotApplicable => 5,
                Reason::Unstable => 6,
                Reason::Shaper => 7,
                Reason::WideInterval => 8,
                Reason::NotMeasured => 9,
                Reason::AtBound => 10,
                Reason::Other => 15,
                Reason::Unknown(c) => c & 0xF,
            },
        }
    }

    /// The status of a 4-bit code (bits above the low 4 are ignored).
    pub fn from_code(code: u8) -> Status {
        let r = match code & 0xF {
            0 => return Status::NotAssessed,
            1 => return Status::Identified,
            2 => Reason::Negative,
            3 => Reason::CrossesZero,
            4 => Reason::TooFewPoints,
            5 => Reason::NotApplicable,
            6 => Reason::Unstable,
            7 => Reason::Shaper,
            8 => Reason::WideInterval,
            9 => Reason::NotMeasured,
            10 => Reason::AtBound,
            15 => Reason::Other,
            c => Reason::Unknown(c),
        };
        Status::NotIdentified(r)
    }

    /// Whether a writer may store this status (reserved codes may not).
    pub fn is_known(self) -> bool {
        !matches!(self, Status::NotIdentified(Reason::Unknown(_)))
    }

    /// True for every code but NotAssessed and Identified.
    pub fn is_not_identified(self) -> bool {
        matches!(self, Status::NotIdentified(_))
    }

    /// A short name, for text and JSON: "not_assessed", "identified",
    /// "negative", "crosses_zero", "too_few_points", "not_applicable",
    /// "unstable", "shaper", "wide_interval", "not_measured", "at_bound",
    /// "other", "reserved".
    pub fn name(self) -> &'static str {
        match self {
            Status::NotAssessed => "not_assessed",
            Status::Identified => "identified",
            Status::NotIdentified(r) => match r {
                Reason::Negative => "negative",
                Reason::CrossesZero => "crosses_zero",
                Reason::TooFewPoints => "too_few_points",
                Reason::NotApplicable => "not_applicable",
                Reason::Unstable => "unstable",
                Reason::Shaper => "shaper",
                Reason::WideInterval => "wide_interval",
                Reason::NotMeasured => "not_measured",
                Reason::AtBound => "at_bound",
                Reason::Other => "other",
                Reason::Unknown(_) => "reserved",
            },
        }
    }

    /// The verdict on a quantity that cannot be negative (a time, gap,
    /// overhead, rate or fraction) from its value and 95 % interval:
    /// non-finite value → NotMeasured; value < 0 → Negative; no finite,
    /// ordered interval around the value → WideInterval; value 0 → AtBound;
    /// interval reaching 0 or below → CrossesZero; else Identified.
    pub fn of_nonnegative(value: f64, lo: f64, hi: f64) -> Status {
        let not = Status::NotIdentified;
        if !value.is_finite() {
            not(Reason::NotMeasured)
        } else if value < 0.0 {
            not(Reason::Negative)
        } else if !(lo.is_finite() && hi.is_finite() && lo <= value && value <= hi) {
            not(Reason::WideInterval)
        } else if value == 0.0 {
            not(Reason::AtBound)
        } else if lo <= 0.0 {
            not(Reason::CrossesZero)
        } else {
            Status::Identified
        }
    }
}

/// The entry-level parameters that carry a status (the nibble index in
/// [`Identification::entry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Field {
    /// End-to-end latency PRTT(1,0,1)/2.
    Eel = 0,
    /// LogGP L.
    L = 1,
    /// LogGPS rendezvous threshold S.
    S = 2,
    /// LogfP f.
    F = 3,
    /// LogfP o_min.
    OMin = 4,
    /// LogfP o_max.
    OMax = 5,
    /// LogfP g_f.
    Gf = 6,
    /// The sustained large-message G of the bandwidth block.
    SustainedG = 7,
    /// The burst G of the bandwidth block.
    BurstG = 8,
}

impl Field {
    /// Every entry-level field, in nibble order.
    pub const ALL: [Field; 9] = [
        Field::Eel,
        Field::L,
        Field::S,
        Field::F,
        Field::OMin,
        Field::OMax,
        Field::Gf,
        Field::SustainedG,
        Field::BurstG,
    ];

    /// The parameter's name as ngctl prints it.
    pub fn name(self) -> &'static str {
        [
            "EEL",
            "L",
            "S",
            "f",
            "o_min",
            "o_max",
            "g_f",
            "G_sustained",
            "G_burst",
        ][self as usize]
    }
}

/// The per-range parameters that carry a status (the nibble index in each
/// of [`Identification::range`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RangeField {
    /// g (the range's gap line at s = 1).
    Gap = 0,
    /// G, the gap per byte.
    GapPerByte = 1,
    /// o_s (o' of the send overhead line).
    OSend = 2,
    /// o_r (o' of the receive overhead line).
    ORecv = 3,
    /// LogGPS O_s.
    OSendPerByte = 4,
    /// LogGPS O_r.
    ORecvPerByte = 5,
    /// The sending CPU's overlap fraction.
    OverlapSend = 6,
    /// The receiving CPU's overlap fraction.
    OverlapRecv = 7,
}

impl RangeField {
    /// Every range-level field, in nibble order.
    pub const ALL: [RangeField; 8] = [
        RangeField::Gap,
        RangeField::GapPerByte,
        RangeField::OSend,
        RangeField::ORecv,
        RangeField::OSendPerByte,
        RangeField::ORecvPerByte,
        RangeField::OverlapSend,
        RangeField::OverlapRecv,
    ];

    /// The parameter's name as ngctl prints it.
    pub fn name(self) -> &'static str {
        [
            "g",
            "G",
            "o_s",
            "o_r",
            "O_s",
            "O_r",
            "overlap_send",
            "overlap_recv",
        ][self as usize]
    }
}

/// The status of every parameter of an entry, 4 bits each: field `i` of
/// [`Field`] at bits 4i..4i+3 of `entry`, field `j` of [`RangeField`] of
/// range `r` at bits 4j..4j+3 of `range[r]`. All zero (NotAssessed) by
/// default. C: `ng_ident`, read with `NG_IDENT_STATUS(word, field)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Identification {
    pub entry: u64,
    pub range: [u64; MAX_RANGES],
}

#[inline]
fn nibble(word: u64, i: u8) -> Status {
    Status::from_code(((word >> (4 * u32::from(i))) & 0xF) as u8)
}

#[inline]
fn set_nibble(word: &mut u64, i: u8, s: Status) {
    let shift = 4 * u32::from(i);
    *word = (*word & !(0xF << shift)) | (u64::from(s.code()) << shift);
}

impl Identification {
    /// Status of an entry-level parameter.
    pub fn get(&self, f: Field) -> Status {
        nibble(self.entry, f as u8)
    }

    /// Sets the status of an entry-level parameter.
    pub fn set(&mut self, f: Field, s: Status) {
        set_nibble(&mut self.entry, f as u8, s);
    }

    /// Status of a parameter of range `range` (NotAssessed for a range
    /// index ≥ MAX_RANGES).
    pub fn get_range(&self, range: usize, f: RangeField) -> Status {
        self.range
            .get(range)
            .map_or(Status::NotAssessed, |w| nibble(*w, f as u8))
    }

    /// Sets the status of a parameter of range `range`. An index ≥
    /// MAX_RANGES names no range an entry can have and is ignored.
    pub fn set_range(&mut self, range: usize, f: RangeField, s: Status) {
        if let Some(w) = self.range.get_mut(range) {
            set_nibble(w, f as u8, s);
        }
    }

    /// Sets `f` of the first `n_ranges` ranges.
    pub fn set_all_ranges(&mut self, n_ranges: usize, f: RangeField, s: Status) {
        for r in 0..n_ranges.min(MAX_RANGES) {
            self.set_range(r, f, s);
        }
    }

    /// Marks an entry-level parameter not identified for `reason`.
    pub fn not_identified(&mut self, f: Field, reason: Reason) {
        self.set(f, Status::NotIdentified(reason));
    }

    /// Marks a parameter of one range not identified for `reason`.
    pub fn not_identified_range(&mut self, range: usize, f: RangeField, reason: Reason) {
        self.set_range(range, f, Status::NotIdentified(reason));
    }

    /// Whether any parameter (of the entry or its first `n_ranges` ranges)
    /// is not identified.
    pub fn any_not_identified(&self, n_ranges: usize) -> bool {
        Field::ALL.iter().any(|f| self.get(*f).is_not_identified())
            || (0..n_ranges.min(MAX_RANGES)).any(|r| {
                RangeField::ALL
                    .iter()
                    .any(|f| self.get_range(r, *f).is_not_identified())
            })
    }

    /// Every parameter that is not identified: (range or None for the entry
    /// level, parameter name, reason), for text and JSON (allocates).
    pub fn problems(&self, n_ranges: usize) -> Vec<(Option<usize>, &'static str, Reason)> {
        let mut out = Vec::new();
        for f in Field::ALL {
            if let Status::NotIdentified(r) = self.get(f) {
                out.push((None, f.name(), r));
            }
        }
        for range in 0..n_ranges.min(MAX_RANGES) {
            for f in RangeField::ALL {
                if let Status::NotIdentified(r) = self.get_range(range, f) {
                    out.push((Some(range), f.name(), r));
                }
            }
        }
        out
    }
}

/// A value with its 95 % interval. Unused slots of the structs below are
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

/// Conflict schemes of the bandwidth-sharing probes (Vienne et al.).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Scheme {
    /// k flows out of this node at once (1:k).
    Outgoing = 0,
    /// k flows into this node at once (k:1).
    Incoming = 1,
    /// k flows out and k flows in at once.
    Mixed = 2,
}

impl Scheme {
    pub const ALL: [Scheme; SCHEMES] = [Scheme::Outgoing, Scheme::Incoming, Scheme::Mixed];

    pub fn name(self) -> &'static str {
        ["outgoing", "incoming", "mixed"][self as usize]
    }
}

/// The parts of a [`TransportExt`] that carry a status (nibble index in
/// [`TransportExt::status`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TransportField {
    PenaltyOutgoing = 0,
    PenaltyIncoming = 1,
    PenaltyMixed = 2,
    /// β of the sharing model.
    Beta = 3,
    /// γ_o of the sharing model.
    GammaO = 4,
    /// γ_i of the sharing model.
    GammaI = 5,
    /// The effective-bisection result.
    Bisection = 6,
}

impl TransportField {
    pub const ALL: [TransportField; 7] = [
        TransportField::PenaltyOutgoing,
        TransportField::PenaltyIncoming,
        TransportField::PenaltyMixed,
        TransportField::Beta,
        TransportField::GammaO,
        TransportField::GammaI,
        TransportField::Bisection,
    ];

    /// The penalty field of a scheme.
    pub fn penalty(s: Scheme) -> TransportField {
        Self::ALL[s as usize]
    }

    pub fn name(self) -> &'static str {
        [
            "penalty_outgoing",
            "penalty_incoming",
            "penalty_mixed",
            "beta",
            "gamma_o",
            "gamma_i",
            "bisection",
        ][self as usize]
    }
}

/// The last effective-bisection-bandwidth result over a node set: the
/// distribution of per-pair bandwidth under random perfect matchings (all
/// pairs streaming at once). C: `ng_bisection`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bisection {
    pub min_bytes_per_s: f64,
    pub median_bytes_per_s: f64,
    pub mean_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
    /// Nodes in the set (≥ 2).
    pub nodes: u32,
    /// Matchings measured (≥ 1).
    pub rounds: u32,
    /// Message size each pair streamed, bytes.
    pub msg_bytes: u64,
    pub measured_unix_ns: u64,
}

/// [`TransportExt::present`] bit: some scheme has penalties.
pub const TX_PENALTIES: u32 = 1 << 0;
/// [`TransportExt::present`] bit: β, γ_o, γ_i are set.
pub const TX_SHARING: u32 = 1 << 1;
/// [`TransportExt::present`] bit: the bisection result is set.
pub const TX_BISECTION: u32 = 1 << 2;

/// What this node measured for one transport as a whole, not per peer:
/// bandwidth-sharing penalties T_shared / T_ref of k = 1..=8 concurrent
/// flows per scheme, the β, γ_o, γ_i fit of Vienne et al.'s model, and the
/// last effective bisection bandwidth. Fill it with the setters (they keep
/// `present` and `n_k` right); unused slots are zero. C: `ng_transport_ext`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct TransportExt {
    /// TX_* bits.
    pub present: u32,
    /// Penalties of scheme s are set for k = 1..=n_k[s].
    pub n_k: [u32; SCHEMES],
    /// 4-bit [`Status`] per [`TransportField`].
    pub status: u64,
    /// When the penalties and the sharing fit were measured, CLOCK_REALTIME ns.
    pub contention_unix_ns: u64,
    /// penalty[scheme][k − 1].
    pub penalty: [[Estimate; MAX_K]; SCHEMES],
    pub beta: Estimate,
    pub gamma_o: Estimate,
    pub gamma_i: Estimate,
    pub bisection: Bisection,
}

impl Default for TransportExt {
    fn default() -> Self {
        TransportExt {
            present: 0,
            n_k: [0; SCHEMES],
            status: 0,
            contention_unix_ns: 0,
            penalty: [[Estimate::default(); MAX_K]; SCHEMES],
            beta: Estimate::default(),
            gamma_o: Estimate::default(),
            gamma_i: Estimate::default(),
            bisection: Bisection::default(),
        }
    }
}

impl TransportExt {
    /// Sets the penalties of `scheme` for k = 1..=penalties.len() (at most
    /// MAX_K) and their status.
    pub fn set_penalties(
        &mut self,
        scheme: Scheme,
        penalties: &[Estimate],
        status: Status,
    ) -> Result<(), SegmentError> {
        if penalties.len() > MAX_K {
            return Err(SegmentError::BadTransport("more than 8 flow counts k"));
        }
        let row = &mut self.penalty[scheme as usize];
        *row = [Estimate::default(); MAX_K];
        row[..penalties.len()].copy_from_slice(penalties);
        self.n_k[scheme as usize] = penalties.len() as u32;
        self.set_status(TransportField::penalty(scheme), status);
        self.sync_present();
        Ok(())
    }

    /// Sets the sharing fit β, γ_o, γ_i with their statuses.
    pub fn set_sharing(
        &mut self,
        beta: (Estimate, Status),
        gamma_o: (Estimate, Status),
        gamma_i: (Estimate, Status),
    ) {
        self.beta = beta.0;
        self.gamma_o = gamma_o.0;
        self.gamma_i = gamma_i.0;
        self.set_status(TransportField::Beta, beta.1);
        self.set_status(TransportField::GammaO, gamma_o.1);
        self.set_status(TransportField::GammaI, gamma_i.1);
        self.present |= TX_SHARING;
    }

    /// Sets the bisection result and its status.
    pub fn set_bisection(&mut self, b: Bisection, status: Status) {
        self.bisection = b;
        self.set_status(TransportField::Bisection, status);
        self.present |= TX_BISECTION;
    }

    fn sync_present(&mut self) {
        if self.n_k.iter().any(|&n| n > 0) {
            self.present |= TX_PENALTIES;
        } else {
            self.present &= !TX_PENALTIES;
        }
    }

    pub fn status(&self, f: TransportField) -> Status {
        nibble(self.status, f as u8)
    }

    pub fn set_status(&mut self, f: TransportField, s: Status) {
        set_nibble(&mut self.status, f as u8, s);
    }

    /// The penalties of a scheme, k = 1 first.
    pub fn penalties(&self, scheme: Scheme) -> &[Estimate] {
        let n = (self.n_k[scheme as usize] as usize).min(MAX_K);
        &self.penalty[scheme as usize][..n]
    }

    /// The penalty of k concurrent flows, if measured.
    pub fn penalty(&self, scheme: Scheme, k: usize) -> Option<Estimate> {
        k.checked_sub(1)
            .and_then(|i| self.penalties(scheme).get(i).copied())
    }

    /// β, γ_o, γ_i, if set.
    pub fn sharing(&self) -> Option<[Estimate; 3]> {
        (self.present & TX_SHARING != 0).then_some([self.beta, self.gamma_o, self.gamma_i])
    }

    pub fn bisection(&self) -> Option<&Bisection> {
        (self.present & TX_BISECTION != 0).then_some(&self.bisection)
    }
}

/// JSON has no NaN: an absent value is written as null and read back as NaN.
#[cfg(feature = "serde")]
mod nan_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_some(v)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(size_of::<Estimate>() == 24);
    assert!(size_of::<Identification>() == 72);
    assert!(size_of::<Bandwidth>() == 64);
    assert!(size_of::<LatencyPercentiles>() == 64);
    assert!(size_of::<Overlap>() == 48);
    assert!(size_of::<EntryExt>() == 1064);
    assert!(offset_of!(EntryExt, ident) == 32);
    assert!(offset_of!(EntryExt, bandwidth) == 104);
    assert!(offset_of!(EntryExt, latency) == 168);
    assert!(offset_of!(EntryExt, overlap) == 680);
    assert!(size_of::<Bisection>() == 56);
    assert!(size_of::<ParamsStatus>() == 24);
    assert!(size_of::<TransportExt>() == 736);
    assert!(offset_of!(TransportExt, status) == 16);
    assert!(offset_of!(TransportExt, penalty) == 32);
    assert!(offset_of!(TransportExt, beta) == 608);
    assert!(offset_of!(TransportExt, bisection) == 680);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_round_trip() {
        for c in 0..16u8 {
            let s = Status::from_code(c);
            assert_eq!(s.code(), c);
            assert_eq!(s.is_known(), !(11..=14).contains(&c), "{c}");
        }
        assert_eq!(Status::from_code(0x31), Status::Identified);
        assert_eq!(Status::NotIdentified(Reason::Other).code(), 15);
        assert_eq!(
            Status::NotIdentified(Reason::CrossesZero).name(),
            "crosses_zero"
        );
    }

    #[test]
    fn identification_nibbles() {
        let mut id = Identification::default();
        assert!(!id.any_not_identified(8));
        id.set(Field::Eel, Status::Identified);
        id.not_identified(Field::S, Reason::NotApplicable);
        id.not_identified_range(2, RangeField::Gap, Reason::Negative);
        id.set_range(2, RangeField::OverlapRecv, Status::Identified);
        id.set_range(8, RangeField::Gap, Status::Identified); // ignored
        assert_eq!(id.entry, 0x0000_0000_0000_0501);
        assert_eq!(id.range[2], 0x1000_0002);
        assert_eq!(
            id.get(Field::S),
            Status::NotIdentified(Reason::NotApplicable)
        );
        assert_eq!(
            id.get_range(2, RangeField::Gap),
            Status::NotIdentified(Reason::Negative)
        );
        assert_eq!(id.get_range(9, RangeField::Gap), Status::NotAssessed);
        assert!(id.any_not_identified(1));
        id.set(Field::S, Status::Identified);
        assert!(!id.any_not_identified(2));
        assert!(id.any_not_identified(3));
        assert_eq!(id.problems(3), vec![(Some(2), "g", Reason::Negative)]);
        id.set_all_ranges(3, RangeField::Gap, Status::Identified);
        assert_eq!(id.range[2], 0x1000_0001);
    }

    #[test]
    fn verdict_of_a_nonnegative_value() {
        use Reason::*;
        let not = Status::NotIdentified;
        assert_eq!(Status::of_nonnegative(5.0, 4.0, 6.0), Status::Identified);
        assert_eq!(Status::of_nonnegative(-1.0, -2.0, 0.0), not(Negative));
        assert_eq!(Status::of_nonnegative(5.0, -1.0, 9.0), not(CrossesZero));
        assert_eq!(Status::of_nonnegative(5.0, 0.0, 9.0), not(CrossesZero));
        assert_eq!(Status::of_nonnegative(0.0, 0.0, 1.0), not(AtBound));
        assert_eq!(Status::of_nonnegative(f64::NAN, 0.0, 1.0), not(NotMeasured));
        assert_eq!(
            Status::of_nonnegative(5.0, f64::NAN, 6.0),
            not(WideInterval)
        );
        assert_eq!(Status::of_nonnegative(5.0, 6.0, 7.0), not(WideInterval));
    }

    #[test]
    fn transport_setters_keep_counts() {
        let mut t = TransportExt::default();
        let p = [Estimate::new(1.0, 0.9, 1.1), Estimate::new(1.9, 1.8, 2.0)];
        t.set_penalties(Scheme::Incoming, &p, Status::Identified)
            .unwrap();
        assert_eq!(t.n_k, [0, 2, 0]);
        assert_eq!(t.present, TX_PENALTIES);
        assert_eq!(t.penalty(Scheme::Incoming, 2), Some(p[1]));
        assert_eq!(t.penalty(Scheme::Incoming, 0), None);
        assert_eq!(t.penalty(Scheme::Incoming, 3), None);
        assert_eq!(
            t.status(TransportField::PenaltyIncoming),
            Status::Identified
        );
        assert!(t
            .set_penalties(Scheme::Mixed, &[p[0]; 9], Status::Identified)
            .is_err());
        t.set_penalties(Scheme::Incoming, &[], Status::NotAssessed)
            .unwrap();
        assert_eq!(t.present, 0);
        assert!(t.sharing().is_none() && t.bisection().is_none());
    }
}
