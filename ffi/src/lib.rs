//! netgauged's segment ABI: the shared-memory file in which the daemon
//! publishes LogGP / LogGPS / LogfP parameters per (peer, transport), and the
//! lock-free, zero-system-call reader that MPI libraries and schedulers link.
//!
//! - [`SegmentWriter`]: creates or re-opens the segment, publishes entries
//!   with a latch seqlock (two copies; see [`reader`] for the protocol).
//! - [`Reader`]: maps it once; [`Reader::lookup`] / [`Reader::lookup_index`]
//!   then make no system call, take no lock and never allocate.
//! - The C ABI in [`capi`] (`include/netgauge.h`), built as `libnetgauge.so`
//!   and `libnetgauge.a`.
//! - ABI 1.1 ([`ext`]): a status per parameter (identified, or why not),
//!   bandwidth, latency percentiles, overlap, per-transport contention
//!   records, coverage classes with [`Reader::lookup_or_class`].
//! - ABI 1.2 (`layout/hot.rs`): a dense hot table, per entry the words the
//!   index lookups return, so that [`Reader::lookup_index`] reads 3 cache
//!   lines of a contiguous table instead of an entry on a page of its own.
//!
//! Dependencies: libc only (serde with the optional `serde` feature, for
//! netgauged's own JSON).

/// Compile-time checks of a `#[repr(C)]` struct's ABI, for a `const`
/// block: `assert_layout!(T: size; field @ offset, ...)` asserts the size
/// of `T` and the byte offset of each named field (a mismatch fails the
/// build).
macro_rules! assert_layout {
    ($t:ty: $size:expr $(; $($field:ident @ $off:expr),+ $(,)?)?) => {
        assert!(core::mem::size_of::<$t>() == $size);
        $($(assert!(core::mem::offset_of!($t, $field) == $off);)+)?
    };
}

/// A fieldless enum of plain values (`enum Name: repr { Variant = value =>
/// "text", … }`: `#[repr(repr)]`, explicit discriminants, Clone, Copy,
/// Debug, PartialEq, Eq and Hash) and, from the same list, `ALL` (every
/// variant, in declaration order) and `name()` (each variant's text), so
/// that the three cannot disagree. Docs pass through to the enum and its
/// variants.
macro_rules! named_enum {
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident: $repr:ident {
            $($(#[$vattr:meta])* $variant:ident = $value:literal => $text:literal,)+
        }
    ) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        $vis enum $name {
            $($(#[$vattr])* $variant = $value,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The variant's name, as printed and parsed.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }
    };
}

pub mod capi;
pub mod ext;
pub mod files;
pub mod layout;
pub mod reader;
pub mod select;
mod sys;
mod types;
mod view;
pub mod writer;

pub use ext::{
    Bandwidth, Bisection, EntryExt, EntryExtData, Estimate, Field, Identification, Instability,
    LatencyPercentiles, Overlap, ParamsStatus, RangeField, Reason, Regime, Scheme, Status,
    TransportExt, TransportField,
};
pub use layout::flags;
pub use reader::{Reader, DEFAULT_PATH, DEFAULT_STALE_AFTER_NS, MAX_RETRIES, PATH_ENV};
pub use types::{
    line_ns, EntryData, LookupError, Params, RangeData, ReaderError, SegmentError, SegmentInfo,
};
pub use writer::{SegmentOptions, SegmentWriter};
