//! The pass-through gate: what a call reads to learn that it goes to the
//! library's own collective, on two cache lines of static memory.
//!
//! Most of a program's calls pass through (the plan keeps the library's
//! choice wherever ours is not predicted clearly faster). On a node whose
//! ranks share cores every call follows another process's time slice and
//! runs cold: the full path to that decision (the trial's timing wrapper,
//! the thread's caches, the communicator's state, the plan's slot) is
//! several functions, lines and pages, each fetched again on every call
//! (what that costs: bench/ngcoll.md, "the pass-through gate"). The gate holds the
//! communicator the full path served last and, per collective, one bit per
//! size class that its plan gives to the library's own, beside the sizes
//! of the datatypes seen last: a call that finds its communicator,
//! datatype and class there goes straight to PMPI_ with a few loads, in
//! code inlined into the entry point. Every other call takes the full
//! path, which opens the gate for its communicator.
//!
//! The gate is used only while at most one thread calls MPI at a time
//! (the provided thread level below MPI_THREAD_MULTIPLE): the program then
//! orders its MPI calls, and with them every write and read of the gate,
//! so relaxed atomics suffice. Under MPI_THREAD_MULTIPLE, and under
//! `NETGAUGE_COLL_FORCE=cycle` (a decision per call), it stays shut and
//! the thread-local caches of [`crate::hot`] serve.
//!
//! A bit is set only where the full path would call the library's own
//! without a trial (the plan's choice is the library's); classes beyond
//! an MPI `int` of bytes are left to the full path. With
//! `NETGAUGE_COLL=log` the gate counts the call in its class, as the full
//! path does (a reduction with an operation of the program's own is
//! counted by both; arguments MPI forbids, such as an allgather whose send
//! and receive blocks differ, may be counted by the gate alone).
//!
//! A program that calls MPI from several threads at once at a thread level
//! below MPI_THREAD_MULTIPLE breaks the standard, and here could see one
//! communicator with another's bits.

use std::ffi::c_int;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use netgauge::select::Collective;

use crate::mpi::Raw;
use crate::plan::{class_of, CLASSES, COLLECTIVES};
use crate::runtime::CommState;

/// libngcoll is on.
const ON: u32 = 1;
/// The gate may be used (see the module documentation).
const USABLE: u32 = 2;

/// Datatypes the gate holds.
const TYPES: usize = 4;

/// The first line: every interposed call reads it.
#[repr(C, align(64))]
struct Line {
    flags: AtomicU32,
    /// The communicator the gate is open for (0: none; no MPI handle of a
    /// communicator is 0).
    comm: AtomicUsize,
    /// Per collective: bit c set where class c goes to the library's own.
    library: [AtomicU64; COLLECTIVES],
}

/// The second line: datatypes, and the log's counters.
#[repr(C, align(64))]
struct Types {
    /// Predefined datatypes (0: empty) and their sizes in bytes.
    handles: [AtomicUsize; TYPES],
    sizes: [AtomicU32; TYPES],
    next: AtomicU32,
    /// The open communicator's per-class call counters (log mode; null
    /// otherwise): `COLLECTIVES * CLASSES` counters of its state, kept
    /// alive by [`OWNER`].
    counts: AtomicPtr<AtomicU64>,
}

const _: () = assert!(std::mem::size_of::<Line>() == 64);
const _: () = assert!(std::mem::size_of::<Types>() == 64);

static LINE: Line = Line {
    flags: AtomicU32::new(0),
    comm: AtomicUsize::new(0),
    library: [const { AtomicU64::new(0) }; COLLECTIVES],
};

static TYPES_LINE: Types = Types {
    handles: [const { AtomicUsize::new(0) }; TYPES],
    sizes: [const { AtomicU32::new(0) }; TYPES],
    next: AtomicU32::new(0),
    counts: AtomicPtr::new(ptr::null_mut()),
};

/// The state the gate is open for: held so that its counters outlive
/// their use. Touched only by the full path.
static OWNER: Mutex<Option<Arc<CommState>>> = Mutex::new(None);

/// Sets whether libngcoll is on and whether the gate may be used (at
/// MPI_Init).
pub(crate) fn set(on: bool, usable: bool) {
    let f = if on {
        ON | if usable { USABLE } else { 0 }
    } else {
        0
    };
    LINE.flags.store(f, Relaxed);
}

/// Whether libngcoll is on (one load).
#[inline]
pub fn on() -> bool {
    LINE.flags.load(Relaxed) & ON != 0
}

/// The size of `datatype` if the gate holds it.
#[inline(always)]
fn type_size(datatype: Raw) -> Option<u64> {
    let t = &TYPES_LINE;
    (0..TYPES)
        .find(|&i| t.handles[i].load(Relaxed) == datatype)
        .map(|i| u64::from(t.sizes[i].load(Relaxed)))
}

/// Whether a call of `coll` on `comm` with `bytes` goes to the library's
/// own by the gate (counted in log mode). False: libngcoll is off (the
/// caller checked), or the full path decides.
#[inline(always)]
fn decided(coll: Collective, comm: Raw, bytes: u64) -> bool {
    let class = class_of(bytes);
    if LINE.comm.load(Relaxed) != comm
        || LINE.library[coll as usize].load(Relaxed) >> class & 1 == 0
    {
        return false;
    }
    let counts = TYPES_LINE.counts.load(Relaxed);
    if !counts.is_null() {
        // SAFETY: `counts` points at the open communicator's
        // COLLECTIVES * CLASSES counters (see `open`), alive while OWNER
        // holds its state; coll < COLLECTIVES, class < CLASSES.
        unsafe { &*counts.add(coll as usize * CLASSES + class) }.fetch_add(1, Relaxed);
    }
    true
}

/// Whether a call of `coll` with `count` × `datatype` on `comm` goes
/// straight to the library's own: libngcoll is off, or the gate decides
/// so. False: the full path decides (always for a count below 1 or the
/// handle 0, which the full path checks and counts by its own rules).
#[inline(always)]
pub fn passes(coll: Collective, comm: Raw, datatype: Raw, count: c_int) -> bool {
    match LINE.flags.load(Relaxed) {
        0 => true,
        f if f == ON | USABLE && count > 0 && datatype != 0 => match type_size(datatype) {
            Some(size) => decided(coll, comm, count as u64 * size),
            None => false,
        },
        _ => false,
    }
}

/// [`passes`] for MPI_Barrier.
#[inline(always)]
pub fn passes_barrier(comm: Raw) -> bool {
    match LINE.flags.load(Relaxed) {
        0 => true,
        f if f == ON | USABLE => decided(Collective::Barrier, comm, 0),
        _ => false,
    }
}

/// Whether the gate would send `coll` on `comm` with `bytes` to the
/// library's own, without counting (`ngcoll_decide`).
pub fn holds(coll: Collective, comm: Raw, bytes: u64) -> bool {
    LINE.flags.load(Relaxed) == ON | USABLE
        && LINE.comm.load(Relaxed) == comm
        && LINE.library[coll as usize].load(Relaxed) >> class_of(bytes) & 1 != 0
}

/// Whether the gate is usable and not open for `comm` (the full path then
/// opens it).
#[inline]
pub(crate) fn wants(comm: Raw) -> bool {
    LINE.flags.load(Relaxed) == ON | USABLE && LINE.comm.load(Relaxed) != comm
}

/// Opens the gate for `comm`, whose state is `st` (the full path, after
/// finding the state).
pub(crate) fn open(comm: Raw, st: &Arc<CommState>) {
    if !wants(comm) {
        return;
    }
    let mut owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
    LINE.comm.store(0, Relaxed);
    for (bits, m) in LINE.library.iter().zip(st.library_masks()) {
        bits.store(m, Relaxed);
    }
    TYPES_LINE.counts.store(st.counts_ptr(), Relaxed);
    *owner = Some(Arc::clone(st));
    LINE.comm.store(comm, Relaxed);
}

/// Shuts the gate if it is open for the state at `st` (its communicator
/// is being freed: the handle may name another one next).
pub(crate) fn forget(st: *const CommState) {
    let mut owner = OWNER.lock().unwrap_or_else(|e| e.into_inner());
    if owner.as_ref().is_some_and(|o| ptr::eq(Arc::as_ptr(o), st)) {
        shut(&mut owner);
    }
}

/// Shuts the gate for good (MPI_Finalize).
pub(crate) fn close() {
    LINE.flags.fetch_and(!USABLE, Relaxed);
    shut(&mut OWNER.lock().unwrap_or_else(|e| e.into_inner()));
}

fn shut(owner: &mut Option<Arc<CommState>>) {
    LINE.comm.store(0, Relaxed);
    TYPES_LINE.counts.store(ptr::null_mut(), Relaxed);
    *owner = None;
}

/// Remembers the size of a predefined datatype (the full path, which has
/// asked MPI or its thread's cache).
pub(crate) fn remember_type(datatype: Raw, size: usize) {
    let Ok(size) = u32::try_from(size) else {
        return;
    };
    if LINE.flags.load(Relaxed) != ON | USABLE || datatype == 0 || type_size(datatype).is_some() {
        return;
    }
    let t = &TYPES_LINE;
    let i = t.next.load(Relaxed) as usize % TYPES;
    t.sizes[i].store(size, Relaxed);
    t.handles[i].store(datatype, Relaxed);
    t.next.store((i + 1) as u32, Relaxed);
}

#[cfg(test)]
mod tests;
