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
//!
//! - this file: [`Status`], [`Reason`], the field lists and
//!   [`Identification`], the statuses packed four bits a field;
//! - [`values`]: the entry's values ([`Estimate`], [`Bandwidth`],
//!   [`LatencyPercentiles`], [`Overlap`], [`EntryExtData`], [`EntryExt`]);
//! - [`transport`]: the per-transport contention record ([`TransportExt`]).

use crate::layout::MAX_RANGES;

mod transport;
mod values;

pub use transport::*;
pub use values::*;

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

named_enum! {
    /// The entry-level parameters that carry a status (the nibble index in
    /// [`Identification::entry`]); `name()`: the parameter's name as ngctl
    /// prints it.
    pub enum Field: u8 {
        /// End-to-end latency PRTT(1,0,1)/2.
        Eel = 0 => "EEL",
        /// LogGP L.
        L = 1 => "L",
        /// LogGPS rendezvous threshold S.
        S = 2 => "S",
        /// LogfP f.
        F = 3 => "f",
        /// LogfP o_min.
        OMin = 4 => "o_min",
        /// LogfP o_max.
        OMax = 5 => "o_max",
        /// LogfP g_f.
        Gf = 6 => "g_f",
        /// The sustained large-message G of the bandwidth block.
        SustainedG = 7 => "G_sustained",
        /// The burst G of the bandwidth block.
        BurstG = 8 => "G_burst",
    }
}

named_enum! {
    /// The per-range parameters that carry a status (the nibble index in
    /// each of [`Identification::range`]); `name()`: the parameter's name
    /// as ngctl prints it.
    pub enum RangeField: u8 {
        /// g (the range's gap line at s = 1).
        Gap = 0 => "g",
        /// G, the gap per byte.
        GapPerByte = 1 => "G",
        /// o_s (o' of the send overhead line).
        OSend = 2 => "o_s",
        /// o_r (o' of the receive overhead line).
        ORecv = 3 => "o_r",
        /// LogGPS O_s.
        OSendPerByte = 4 => "O_s",
        /// LogGPS O_r.
        ORecvPerByte = 5 => "O_r",
        /// The sending CPU's overlap fraction.
        OverlapSend = 6 => "overlap_send",
        /// The receiving CPU's overlap fraction.
        OverlapRecv = 7 => "overlap_recv",
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

/// JSON has no NaN: an absent value is written as null and read back as NaN.
/// Serde for an f64 that may be NaN: NaN (or ±inf) as null, null back as
/// NaN. Also used by the daemon crate's JSON of estimates.
#[cfg(feature = "serde")]
pub mod nan_as_null {
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
    assert_layout!(Estimate: 24);
    assert_layout!(Identification: 72);
    assert_layout!(Bandwidth: 64);
    assert_layout!(LatencyPercentiles: 64);
    assert_layout!(Overlap: 48);
    assert_layout!(EntryExt: 1064; ident @ 32, bandwidth @ 104, latency @ 168, overlap @ 680);
    assert_layout!(Bisection: 56);
    assert_layout!(ParamsStatus: 24);
    assert_layout!(TransportExt: 736; status @ 16, penalty @ 32, beta @ 608, bisection @ 680);
};

#[cfg(test)]
mod tests;
