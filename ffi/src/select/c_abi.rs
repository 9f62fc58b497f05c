//! The selector's C ABI (`include/netgauge_select.h`).

use super::{
    candidates, Algorithm, Candidates, Choice, Collective, ReaderNetwork, SelectError,
    SelectOptions, DEFAULT_GAMMA_NS_PER_BYTE,
};
use crate::types::Params;
use crate::Reader;

fn write_choices(
    c: &Candidates,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) {
    if !best.is_null() {
        // SAFETY: the caller passes a valid, writable ng_choice or NULL.
        unsafe { *best = c.best() };
    }
    let items = c.as_slice();
    if !all.is_null() {
        for (i, item) in items.iter().take(all_cap).enumerate() {
            // SAFETY: the caller guarantees `all` has `all_cap` elements.
            unsafe { *all.add(i) = *item };
        }
    }
    if !n_all.is_null() {
        // SAFETY: valid, writable size_t or NULL.
        unsafe { *n_all = items.len() };
    }
}

fn select_errno(e: SelectError) -> i32 {
    match e {
        SelectError::NoRanks => -libc::EINVAL,
        SelectError::Lookup(l) => l.errno(),
    }
}

/// The options of a C call: γ as given when it is a finite, non-negative
/// number, else the default; no core sharing (cores = 0).
fn c_options(gamma_ns_per_byte: f64) -> SelectOptions {
    SelectOptions {
        gamma_ns_per_byte: if gamma_ns_per_byte.is_finite() && gamma_ns_per_byte >= 0.0 {
            gamma_ns_per_byte
        } else {
            DEFAULT_GAMMA_NS_PER_BYTE
        },
        cores: 0,
    }
}

/// A selection's outcome for the C caller: the choices written through the
/// output pointers (see [`write_choices`]) and 0, or a negative errno.
fn answer(
    result: Result<Candidates, SelectError>,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) -> i32 {
    match result {
        Ok(c) => {
            write_choices(&c, best, all, all_cap, n_all);
            0
        }
        Err(e) => select_errno(e),
    }
}

/// C: `ng_select`. `ranges` points to `n_ranges` parameter sets (one per
/// protocol range, at most `MAX_RANGES`, or a single lookup result). Writes the fastest choice to
/// `best` and up to `all_cap` candidates to `all` (either may be NULL), the
/// number of candidates to `n_all`. Returns 0 or a negative errno.
///
/// # Safety
/// `ranges` must point to `n_ranges` valid `ng_params`; `best`, `n_all`
/// must be NULL or valid; `all` NULL or valid for `all_cap` elements.
#[no_mangle]
pub unsafe extern "C" fn ng_select(
    ranges: *const Params,
    n_ranges: usize,
    collective: u32,
    ranks: u32,
    msg_bytes: u64,
    gamma_ns_per_byte: f64,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) -> i32 {
    let Some(coll) = Collective::from_u32(collective) else {
        return -libc::EINVAL;
    };
    // A segment entry has at most MAX_RANGES ranges; the cost functions
    // walk them per message size.
    if ranges.is_null() || n_ranges == 0 || n_ranges > crate::layout::MAX_RANGES {
        return -libc::EINVAL;
    }
    // SAFETY: the caller guarantees `n_ranges` valid elements.
    let net = unsafe { std::slice::from_raw_parts(ranges, n_ranges) };
    let opts = c_options(gamma_ns_per_byte);
    let result = candidates(net, coll, ranks as usize, msg_bytes, &opts);
    answer(result, best, all, all_cap, n_all)
}

/// C: `ng_select_lookup`: like [`ng_select`] with the parameters of
/// (peer, transport) looked up in a mapped segment size by size.
///
/// # Safety
/// `r` from `ng_open`; `peer`, `transport` NUL-terminated strings; output
/// pointers as for [`ng_select`].
#[no_mangle]
pub unsafe extern "C" fn ng_select_lookup(
    r: *const Reader,
    peer: *const libc::c_char,
    transport: *const libc::c_char,
    collective: u32,
    ranks: u32,
    msg_bytes: u64,
    gamma_ns_per_byte: f64,
    best: *mut Choice,
    all: *mut Choice,
    all_cap: usize,
    n_all: *mut usize,
) -> i32 {
    if r.is_null() || peer.is_null() || transport.is_null() {
        return -libc::EINVAL;
    }
    let Some(coll) = Collective::from_u32(collective) else {
        return -libc::EINVAL;
    };
    // SAFETY: checked non-null; the caller passes NUL-terminated strings.
    let (peer, transport) = unsafe {
        (
            std::ffi::CStr::from_ptr(peer).to_str(),
            std::ffi::CStr::from_ptr(transport).to_str(),
        )
    };
    let (Ok(peer), Ok(transport)) = (peer, transport) else {
        return -libc::EINVAL;
    };
    // SAFETY: `r` came from ng_open and is not freed while in use.
    let reader = unsafe { &*r };
    let net = ReaderNetwork {
        reader,
        peer,
        transport,
    };
    let opts = c_options(gamma_ns_per_byte);
    let result = candidates(&net, coll, ranks as usize, msg_bytes, &opts);
    answer(result, best, all, all_cap, n_all)
}

/// C: `ng_algorithm_name`: a static NUL-terminated name, or NULL.
#[no_mangle]
pub extern "C" fn ng_algorithm_name(algorithm: u32) -> *const libc::c_char {
    let s: &'static [u8] = match Algorithm::from_u32(algorithm) {
        Some(Algorithm::BcastBinomial) | Some(Algorithm::ReduceBinomial) => b"binomial\0",
        Some(Algorithm::BcastScatterRdAllgather) => b"scatter_rd_allgather\0",
        Some(Algorithm::BcastScatterRingAllgather) => b"scatter_ring_allgather\0",
        Some(Algorithm::BcastChain) => b"pipelined_chain\0",
        Some(Algorithm::AllreduceRecursiveDoubling)
        | Some(Algorithm::AllgatherRecursiveDoubling) => b"recursive_doubling\0",
        Some(Algorithm::AllreduceRabenseifner) | Some(Algorithm::ReduceRabenseifner) => {
            b"rabenseifner\0"
        }
        Some(Algorithm::AllreduceRing) | Some(Algorithm::AllgatherRing) => b"ring\0",
        Some(Algorithm::BarrierDissemination) => b"dissemination\0",
        Some(Algorithm::BarrierTree) => b"tree\0",
        Some(Algorithm::AlltoallPairwise) => b"pairwise\0",
        Some(Algorithm::AlltoallLinear)
        | Some(Algorithm::AllgatherLinear)
        | Some(Algorithm::AllreduceLinear) => b"linear\0",
        None => return std::ptr::null(),
    };
    s.as_ptr() as *const libc::c_char
}
