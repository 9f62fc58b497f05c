//! Lookups never allocate: a counting global allocator, armed on the test's
//! own thread only, sees no allocation during 1000 rounds of every lookup
//! of the Rust API and the C ABI, the ABI 1.1 ones included. (The seccomp
//! tests prove no system call; an allocation served from memory the process
//! already has would make none, hence this test.)

mod common;

use common::*;
use netgauge::capi::*;
use netgauge::{EntryExt, Params, ParamsStatus, Reader, SegmentWriter, TransportExt};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards every call to the system allocator unchanged; only
// counts, on threads that armed the counter.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ARMED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ARMED.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.load(Ordering::Relaxed);
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn lookups_do_not_allocate() {
    let p = TmpPath::new("noalloc");
    let mut w = SegmentWriter::create_or_open(&p.0, 16, "node001", "tsc").unwrap();
    w.upsert(&derived_entry("n1", "rdma", 1)).unwrap();
    w.upsert(&sample_entry_ext("n2", "rdma")).unwrap();
    w.upsert(&derived_entry("@sw", "rdma", 9)).unwrap();
    w.set_peer_classes([("m1", "@sw")]).unwrap();
    w.set_transport_ext("rdma", &sample_transport_ext(0.0))
        .unwrap();
    let mut r = Reader::open(&p.0).unwrap();
    r.set_stale_after_ns(3_600_000_000_000);
    r.set_max_age_ns(u64::MAX);
    // Closed below.
    let cr = c_reader(&p.0, 3_600_000_000_000);

    let mut ok = 0u64;
    let mut out = Params::default();
    let mut st = ParamsStatus::default();
    let mut x = EntryExt::default();
    let mut t = TransportExt::default();
    let mut cls = [0 as core::ffi::c_char; 64];
    let n = allocations(|| {
        for i in 0..1000u64 {
            let s = i * 7 % 4000;
            ok += u64::from(r.lookup("n1", "rdma", s).is_ok());
            ok += u64::from(r.lookup_index(0, s).is_ok());
            ok += u64::from(r.index("n1", "rdma").is_some());
            ok += u64::from(r.lookup_or_class("m1", "rdma", s).is_ok());
            ok += u64::from(r.index_or_class("m1", "rdma").is_ok());
            ok += u64::from(r.lookup_status("m1", "rdma", s).is_ok());
            ok += u64::from(r.lookup_index_status(1, s).is_ok());
            ok += u64::from(r.entry_ext("n2", "rdma").is_ok());
            ok += u64::from(r.entry_ext_index(0).is_ok());
            ok += u64::from(r.transport_ext("rdma").is_ok());
            ok += u64::from(r.predict_ns("n1", "rdma", s).is_ok());
            // Misses allocate nothing either.
            ok += u64::from(r.lookup_or_class("zz", "rdma", s).is_err());
            ok += u64::from(r.transport_ext("zz").is_err());
            // SAFETY: live reader, valid strings and out-pointers.
            unsafe {
                ok += u64::from(ng_lookup(cr, c"n1".as_ptr(), c"rdma".as_ptr(), s, &mut out) == 0);
                ok += u64::from(
                    ng_lookup_or_class(cr, c"m1".as_ptr(), c"rdma".as_ptr(), s, &mut out) == 0,
                );
                ok += u64::from(
                    ng_lookup_status(cr, c"m1".as_ptr(), c"rdma".as_ptr(), s, &mut out, &mut st)
                        == 0,
                );
                ok += u64::from(ng_lookup_index_status(cr, 1, s, &mut out, &mut st) == 0);
                ok += u64::from(ng_index_or_class(cr, c"m1".as_ptr(), c"rdma".as_ptr()) == 2);
                ok +=
                    u64::from(ng_get_entry_ext(cr, c"n2".as_ptr(), c"rdma".as_ptr(), &mut x) == 0);
                ok += u64::from(ng_get_entry_ext_index(cr, 1, &mut x) == 0);
                ok += u64::from(ng_get_transport_ext(cr, c"rdma".as_ptr(), &mut t) == 0);
                ok += u64::from(ng_peer_class(cr, c"m1".as_ptr(), cls.as_mut_ptr(), 64) == 0);
            }
        }
    });
    assert_eq!(n, 0, "lookups allocated {n} times");
    assert_eq!(ok, 22 * 1000, "some lookups failed");
    // The counter works: a dump allocates.
    assert!(allocations(|| drop(r.snapshot().unwrap())) > 0);
    // SAFETY: closing the reader opened above.
    unsafe { ng_close(cr) };
    drop(w);
}
