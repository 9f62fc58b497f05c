//! The C ABI (`include/netgauge.h`). Thin wrappers over [`Reader`]: every
//! function checks its pointers, never unwinds, and returns the codes the
//! header documents.

use core::ffi::{c_char, c_int, CStr};
use core::ptr;

use crate::ext::{EntryExt, Identification, ParamsStatus, TransportExt};
use crate::layout::{ABI_MAJOR, ABI_MINOR, MAX_RANGES};
use crate::reader::Reader;
use crate::types::{LookupError, Params};

/// Opaque handle type for C (`ng_reader`).
pub type NgReader = Reader;

/// C's `ng_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NgInfo {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub capabilities: u64,
    pub generation: u64,
    pub heartbeat_unix_ns: u64,
    pub seq: u64,
    pub writer_pid: u32,
    pub capacity_entries: u32,
    pub entry_count: u32,
    pub reserved: u32,
    pub node_name: [c_char; 64],
    pub clock_desc: [c_char; 128],
}

const _: () = {
    assert_layout!(NgInfo: 248; node_name @ 56);
};

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// # Safety
/// `p` is NULL or a NUL-terminated string valid for reads.
unsafe fn bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: caller contract: non-null and NUL-terminated.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// Opens a segment; `path` NULL means `$NETGAUGE_SEGMENT` or the default.
///
/// # Safety
/// `path` is NULL or a valid NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn ng_open(path: *const c_char) -> *mut NgReader {
    // SAFETY: forwarded caller contract.
    let r = match unsafe { bytes(path) } {
        None => Reader::open_default(),
        Some(b) => {
            use std::os::unix::ffi::OsStrExt;
            Reader::open(std::ffi::OsStr::from_bytes(b))
        }
    };
    match r {
        Ok(r) => Box::into_raw(Box::new(r)),
        Err(e) => {
            set_errno(e.errno());
            ptr::null_mut()
        }
    }
}

/// Unmaps and frees a reader (NULL is ignored).
///
/// # Safety
/// `r` is NULL or a pointer from `ng_open` not yet closed.
#[no_mangle]
pub unsafe extern "C" fn ng_close(r: *mut NgReader) {
    if !r.is_null() {
        // SAFETY: caller contract: r came from Box::into_raw in ng_open.
        drop(unsafe { Box::from_raw(r) });
    }
}

fn code(e: LookupError) -> c_int {
    e.errno()
}

/// # Safety
/// `r` is NULL or a live reader from `ng_open`.
unsafe fn reader<'a>(r: *const NgReader) -> Option<&'a Reader> {
    // SAFETY: caller contract.
    unsafe { r.as_ref() }
}

/// The reader and the (peer, transport) names of a lookup; None if any
/// pointer is NULL.
///
/// # Safety
/// As for [`reader`] and [`bytes`].
unsafe fn reader_peer_transport<'a>(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
) -> Option<(&'a Reader, &'a [u8], &'a [u8])> {
    // SAFETY: forwarded caller contract.
    unsafe { Some((reader(r)?, bytes(peer)?, bytes(transport)?)) }
}

/// Where a C function writes its result: one out-pointer, or two (the
/// parameters and their statuses).
trait Out {
    type Value;
    fn is_null(&self) -> bool;
    /// # Safety
    /// Every pointer is non-null and writable.
    unsafe fn write(self, v: Self::Value);
}

impl<T> Out for *mut T {
    type Value = T;
    fn is_null(&self) -> bool {
        <*mut T>::is_null(*self)
    }
    unsafe fn write(self, v: T) {
        // SAFETY: caller contract.
        unsafe { <*mut T>::write(self, v) }
    }
}

impl<A, B> Out for (*mut A, *mut B) {
    type Value = (A, B);
    fn is_null(&self) -> bool {
        self.0.is_null() || self.1.is_null()
    }
    unsafe fn write(self, v: (A, B)) {
        // SAFETY: caller contract.
        unsafe {
            self.0.write(v.0);
            self.1.write(v.1);
        }
    }
}

/// A lookup by (peer, transport) name written to `out`: -EINVAL if any
/// pointer is NULL, else 0 or the lookup's error code.
///
/// # Safety
/// As for `ng_lookup`; every pointer of `out` NULL or writable.
unsafe fn named_into<O: Out>(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    out: O,
    lookup: impl FnOnce(&Reader, &[u8], &[u8]) -> Result<O::Value, LookupError>,
) -> c_int {
    // SAFETY: caller contract for the reader and both strings.
    let Some((r, p, t)) = (unsafe { reader_peer_transport(r, peer, transport) }) else {
        return -libc::EINVAL;
    };
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: out is non-null and, by contract, writable.
    unsafe { put(out, lookup(r, p, t)) }
}

/// A lookup by entry index written to `out`: -EINVAL if any pointer is
/// NULL, -ENOENT for a negative index, else 0 or the lookup's error code.
///
/// # Safety
/// `r` NULL or live; every pointer of `out` NULL or writable.
unsafe fn index_into<O: Out>(
    r: *const NgReader,
    index: c_int,
    out: O,
    lookup: impl FnOnce(&Reader, usize) -> Result<O::Value, LookupError>,
) -> c_int {
    // SAFETY: caller contract.
    let Some(r) = (unsafe { reader(r) }) else {
        return -libc::EINVAL;
    };
    if out.is_null() {
        return -libc::EINVAL;
    }
    let Ok(index) = usize::try_from(index) else {
        return -libc::ENOENT;
    };
    // SAFETY: out is non-null and, by contract, writable.
    unsafe { put(out, lookup(r, index)) }
}

/// The entry index `find` gives for (peer, transport): ≥ 0, -EINVAL if any
/// pointer is NULL, or the lookup's error code.
///
/// # Safety
/// As for `ng_lookup`.
unsafe fn named_index(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    find: impl FnOnce(&Reader, &[u8], &[u8]) -> Result<usize, LookupError>,
) -> c_int {
    // SAFETY: caller contract for the reader and both strings.
    let Some((r, p, t)) = (unsafe { reader_peer_transport(r, peer, transport) }) else {
        return -libc::EINVAL;
    };
    match find(r, p, t) {
        Ok(i) => i as c_int,
        Err(e) => code(e),
    }
}

/// Copies a result into a caller's out-pointer(s).
///
/// # Safety
/// Every pointer of `out` is non-null and writable.
unsafe fn put<O: Out>(out: O, v: Result<O::Value, LookupError>) -> c_int {
    match v {
        Ok(v) => {
            // SAFETY: caller contract.
            unsafe { out.write(v) };
            0
        }
        Err(e) => code(e),
    }
}

/// Looks up the parameters of (peer, transport) for `msg_bytes`.
/// Returns 0, -ENOENT, -ESTALE, -EAGAIN or -EINVAL.
///
/// # Safety
/// Pointers are NULL or valid (strings NUL-terminated, `out` writable).
#[no_mangle]
pub unsafe extern "C" fn ng_lookup(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    msg_bytes: u64,
    out: *mut Params,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        named_into(r, peer, transport, out, |r, p, t| {
            r.lookup_bytes(p, t, msg_bytes)
        })
    }
}

/// Predicted time of one message, ns; NaN on any error.
///
/// # Safety
/// As for `ng_lookup`.
#[no_mangle]
pub unsafe extern "C" fn ng_predict_ns(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    msg_bytes: u64,
) -> f64 {
    // SAFETY: caller contract for the reader and both strings.
    let Some((r, p, t)) = (unsafe { reader_peer_transport(r, peer, transport) }) else {
        return f64::NAN;
    };
    r.lookup_bytes(p, t, msg_bytes)
        .map(|v| v.predict_ns(msg_bytes))
        .unwrap_or(f64::NAN)
}

/// Index of (peer, transport): ≥ 0, or -ENOENT / -EAGAIN / -EINVAL.
///
/// # Safety
/// As for `ng_lookup`.
#[no_mangle]
pub unsafe extern "C" fn ng_index(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { named_index(r, peer, transport, Reader::index_bytes) }
}

/// Lookup by index (the hot-loop path). Same return codes as `ng_lookup`.
///
/// # Safety
/// `r` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_lookup_index(
    r: *const NgReader,
    index: c_int,
    msg_bytes: u64,
    out: *mut Params,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { index_into(r, index, out, |r, i| r.lookup_index(i, msg_bytes)) }
}

/// `ng_predict_ns` by index; NaN on error.
///
/// # Safety
/// `r` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn ng_predict_index_ns(
    r: *const NgReader,
    index: c_int,
    msg_bytes: u64,
) -> f64 {
    // SAFETY: caller contract.
    let Some(r) = (unsafe { reader(r) }) else {
        return f64::NAN;
    };
    if index < 0 {
        return f64::NAN;
    }
    r.predict_index_ns(index as usize, msg_bytes)
        .unwrap_or(f64::NAN)
}

/// Model prediction from already looked-up parameters; NaN if `p` is NULL.
///
/// # Safety
/// `p` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ng_params_predict_ns(p: *const Params, msg_bytes: u64) -> f64 {
    // SAFETY: caller contract.
    match unsafe { p.as_ref() } {
        Some(p) => p.predict_ns(msg_bytes),
        None => f64::NAN,
    }
}

/// Number of entries (≥ 0) or -EAGAIN / -EINVAL.
///
/// # Safety
/// `r` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn ng_entry_count(r: *const NgReader) -> c_int {
    // SAFETY: caller contract.
    let Some(r) = (unsafe { reader(r) }) else {
        return -libc::EINVAL;
    };
    match r.entry_count() {
        Ok(n) => n as c_int,
        Err(e) => code(e),
    }
}

fn copy_cstr(dst: *mut c_char, cap: usize, src: &[u8]) -> c_int {
    if dst.is_null() || cap == 0 {
        return -libc::EINVAL;
    }
    if src.len() >= cap {
        return -libc::ERANGE;
    }
    // SAFETY: dst is writable for cap > src.len() bytes by the caller's
    // contract; the regions cannot overlap (src is our own buffer).
    unsafe {
        ptr::copy_nonoverlapping(src.as_ptr(), dst.cast::<u8>(), src.len());
        *dst.add(src.len()) = 0;
    }
    0
}

/// Copies the names of entry `index` into caller buffers (NUL-terminated).
/// 0, -ENOENT, -ERANGE (buffer too small), -EAGAIN or -EINVAL.
///
/// # Safety
/// `peer` writable for `peer_cap` bytes, `transport` for `transport_cap`.
#[no_mangle]
pub unsafe extern "C" fn ng_entry_name(
    r: *const NgReader,
    index: c_int,
    peer: *mut c_char,
    peer_cap: usize,
    transport: *mut c_char,
    transport_cap: usize,
) -> c_int {
    // SAFETY: caller contract.
    let Some(r) = (unsafe { reader(r) }) else {
        return -libc::EINVAL;
    };
    if index < 0 {
        return -libc::ENOENT;
    }
    let mut pb = [0u8; 64];
    let mut tb = [0u8; 16];
    match r.entry_names(index as usize, &mut pb, &mut tb) {
        Ok((pl, tl)) => {
            let rc = copy_cstr(peer, peer_cap, &pb[..pl]);
            if rc != 0 {
                return rc;
            }
            copy_cstr(transport, transport_cap, &tb[..tl])
        }
        Err(e) => code(e),
    }
}

/// Fills `out` with header and identity information. 0, -EAGAIN or -EINVAL.
///
/// # Safety
/// `r` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_get_info(r: *const NgReader, out: *mut NgInfo) -> c_int {
    // SAFETY: caller contract.
    let Some(r) = (unsafe { reader(r) }) else {
        return -libc::EINVAL;
    };
    if out.is_null() {
        return -libc::EINVAL;
    }
    match r.info() {
        Ok(i) => {
            let mut v = NgInfo {
                abi_major: i.abi_major,
                abi_minor: i.abi_minor,
                capabilities: i.capabilities,
                generation: i.generation,
                heartbeat_unix_ns: i.heartbeat_unix_ns,
                seq: i.seq,
                writer_pid: i.writer_pid,
                capacity_entries: i.capacity_entries as u32,
                entry_count: i.entry_count as u32,
                reserved: 0,
                node_name: [0; 64],
                clock_desc: [0; 128],
            };
            for (d, s) in v.node_name.iter_mut().zip(i.node_name.bytes().take(63)) {
                *d = s as c_char;
            }
            for (d, s) in v.clock_desc.iter_mut().zip(i.clock_desc.bytes().take(127)) {
                *d = s as c_char;
            }
            // SAFETY: non-null, writable by contract.
            unsafe { out.write(v) };
            0
        }
        Err(e) => code(e),
    }
}

/// Nanoseconds since the last heartbeat; -1 if the writer shut down or `r`
/// is NULL.
///
/// # Safety
/// `r` NULL or live.
#[no_mangle]
pub unsafe extern "C" fn ng_heartbeat_age_ns(r: *const NgReader) -> i64 {
    // SAFETY: caller contract.
    match unsafe { reader(r) }.and_then(|r| r.heartbeat_age_ns()) {
        Some(a) => a.min(i64::MAX as u64) as i64,
        None => -1,
    }
}

/// Sets the heartbeat threshold (ns; 0 disables the heartbeat rule).
///
/// # Safety
/// `r` NULL or live, not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn ng_set_stale_after_ns(r: *mut NgReader, ns: u64) {
    // SAFETY: caller contract.
    if let Some(r) = unsafe { r.as_mut() } {
        r.set_stale_after_ns(ns);
    }
}

/// Sets the maximum measurement age (ns; 0 = no limit, the default).
///
/// # Safety
/// `r` NULL or live, not used concurrently by another thread.
#[no_mangle]
pub unsafe extern "C" fn ng_set_max_age_ns(r: *mut NgReader, ns: u64) {
    // SAFETY: caller contract.
    if let Some(r) = unsafe { r.as_mut() } {
        r.set_max_age_ns(ns);
    }
}

/// Like `ng_lookup`, but a peer without an entry of its own gets its
/// coverage class's entry for that transport, flagged NG_FLAG_CLASS.
/// Same return codes as `ng_lookup`.
///
/// # Safety
/// As for `ng_lookup`.
#[no_mangle]
pub unsafe extern "C" fn ng_lookup_or_class(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    msg_bytes: u64,
    out: *mut Params,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        named_into(r, peer, transport, out, |r, p, t| {
            r.lookup_or_class_bytes(p, t, msg_bytes)
        })
    }
}

/// Index of (peer, transport)'s own entry, else of its class's entry:
/// ≥ 0, or -ENOENT / -EAGAIN / -EINVAL.
///
/// # Safety
/// As for `ng_lookup`.
#[no_mangle]
pub unsafe extern "C" fn ng_index_or_class(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { named_index(r, peer, transport, Reader::index_or_class_bytes) }
}

/// `ng_lookup_or_class` plus the statuses of the returned parameters (the
/// entry-level word, the used range's word and its index). Same return
/// codes; `st` all zero on a 1.0 segment.
///
/// # Safety
/// As for `ng_lookup`; `st` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_lookup_status(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    msg_bytes: u64,
    out: *mut Params,
    st: *mut ParamsStatus,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        named_into(r, peer, transport, (out, st), |r, p, t| {
            r.lookup_status_bytes(p, t, msg_bytes)
        })
    }
}

/// `ng_lookup_index` plus the statuses of the returned parameters.
///
/// # Safety
/// `r` NULL or live; `out`, `st` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_lookup_index_status(
    r: *const NgReader,
    index: c_int,
    msg_bytes: u64,
    out: *mut Params,
    st: *mut ParamsStatus,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        index_into(r, index, (out, st), |r, i| {
            r.lookup_index_status(i, msg_bytes)
        })
    }
}

/// The ABI 1.1 part of (peer, transport)'s entry. 0, -ENOENT, -ESTALE,
/// -EAGAIN or -EINVAL; on a 1.0 segment 0 with `present == 0`.
///
/// # Safety
/// As for `ng_lookup`.
#[no_mangle]
pub unsafe extern "C" fn ng_get_entry_ext(
    r: *const NgReader,
    peer: *const c_char,
    transport: *const c_char,
    out: *mut EntryExt,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { named_into(r, peer, transport, out, |r, p, t| r.entry_ext_bytes(p, t)) }
}

/// `ng_get_entry_ext` by index.
///
/// # Safety
/// `r` NULL or live; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_get_entry_ext_index(
    r: *const NgReader,
    index: c_int,
    out: *mut EntryExt,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe { index_into(r, index, out, |r, i| r.entry_ext_index(i)) }
}

/// The per-transport record (contention, sharing fit, bisection) of
/// `transport`. 0, -ENOENT (none; always on a 1.0 segment), -ESTALE,
/// -EAGAIN or -EINVAL.
///
/// # Safety
/// `r` NULL or live; `transport` NULL or a C string; `out` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ng_get_transport_ext(
    r: *const NgReader,
    transport: *const c_char,
    out: *mut TransportExt,
) -> c_int {
    // SAFETY: caller contract.
    let (Some(r), Some(t)) = (unsafe { reader(r) }, unsafe { bytes(transport) }) else {
        return -libc::EINVAL;
    };
    if out.is_null() {
        return -libc::EINVAL;
    }
    // SAFETY: out is non-null and, by contract, writable.
    unsafe { put(out, r.transport_ext_bytes(t)) }
}

/// Copies the coverage class `peer` is mapped to (NUL-terminated; class
/// names start with '@'). 0, -ENOENT (not mapped), -ERANGE (buffer too
/// small; NG_PEER_MAX + 1 always suffices), -EAGAIN or -EINVAL.
///
/// # Safety
/// `r` NULL or live; `peer` NULL or a C string; `cls` writable for `cap`.
#[no_mangle]
pub unsafe extern "C" fn ng_peer_class(
    r: *const NgReader,
    peer: *const c_char,
    cls: *mut c_char,
    cap: usize,
) -> c_int {
    // SAFETY: caller contract.
    let (Some(r), Some(p)) = (unsafe { reader(r) }, unsafe { bytes(peer) }) else {
        return -libc::EINVAL;
    };
    let mut buf = [0u8; 64];
    match r.peer_class_into(p, &mut buf) {
        Ok(Some(n)) => copy_cstr(cls, cap, &buf[..n]),
        Ok(None) => -libc::ENOENT,
        Err(e) => code(e),
    }
}

/// The status code (NG_STATUS_*) of entry-level field `field` (NG_FIELD_*);
/// 0 (not assessed) for a NULL pointer or an unknown field.
///
/// # Safety
/// `id` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ng_ident_status(id: *const Identification, field: c_int) -> u32 {
    // SAFETY: caller contract.
    match (unsafe { id.as_ref() }, u32::try_from(field)) {
        (Some(id), Ok(f)) if f < 16 => ((id.entry >> (4 * f)) & 0xF) as u32,
        _ => 0,
    }
}

/// The status code of field `field` (NG_RFIELD_*) of range `range`; 0 for
/// a NULL pointer or an index out of range.
///
/// # Safety
/// `id` NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ng_ident_range_status(
    id: *const Identification,
    range: c_int,
    field: c_int,
) -> u32 {
    // SAFETY: caller contract: NULL or readable.
    let id = unsafe { id.as_ref() };
    match (id, usize::try_from(range), u32::try_from(field)) {
        (Some(id), Ok(r), Ok(f)) if r < MAX_RANGES && f < 16 => {
            ((id.range[r] >> (4 * f)) & 0xF) as u32
        }
        _ => 0,
    }
}

/// Names of the 16 status codes, as [`Status::name`] gives them.
const STATUS_NAMES: [&CStr; 16] = [
    c"not_assessed",
    c"identified",
    c"negative",
    c"crosses_zero",
    c"too_few_points",
    c"not_applicable",
    c"unstable",
    c"shaper",
    c"wide_interval",
    c"not_measured",
    c"at_bound",
    c"reserved",
    c"reserved",
    c"reserved",
    c"reserved",
    c"other",
];

/// A static name of a status code ("identified", "crosses_zero", ...;
/// "reserved" for codes 11..=14 and anything above 15); never NULL.
#[no_mangle]
pub extern "C" fn ng_status_name(status: u32) -> *const c_char {
    match STATUS_NAMES.get(status as usize) {
        Some(s) => s.as_ptr(),
        None => c"reserved".as_ptr(),
    }
}

/// `major << 16 | minor` of the ABI this library reads.
#[no_mangle]
pub extern "C" fn ng_abi_version() -> u32 {
    (ABI_MAJOR << 16) | ABI_MINOR
}

/// A static description of a return code (never NULL).
#[no_mangle]
pub extern "C" fn ng_strerror(err: c_int) -> *const c_char {
    let e = |v: c_int| v.unsigned_abs();
    let s: &'static CStr = match err.unsigned_abs() {
        0 => c"ok",
        x if x == e(libc::ENOENT) => c"unknown peer or transport",
        x if x == e(libc::ESTALE) => c"stale: daemon gone or data too old",
        x if x == e(libc::EAGAIN) => c"no consistent snapshot after bounded retries",
        x if x == e(libc::EINVAL) => c"invalid segment or argument",
        x if x == e(libc::ERANGE) => c"buffer too small",
        _ => c"unknown error",
    };
    s.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ext::Status;

    #[test]
    fn status_names_agree_with_rust() {
        for c in 0..16u8 {
            let name = STATUS_NAMES[c as usize].to_str().unwrap();
            assert_eq!(name, Status::from_code(c).name());
        }
    }
}
