//! Alltoall of one block of `c` bytes per pair: `send` holds the P blocks
//! this rank sends (block j for rank j), `recv` receives block i from rank
//! i. Pairwise exchange (P − 1 steps of one exchange each), and linear (all
//! exchanges posted at once, in a staggered order).

use super::{Cx, TAG_ALLTOALL};
use crate::mpi::{Mpi, MpiError};

/// This rank's own block: a local copy.
unsafe fn own(r: usize, send: *const u8, recv: *mut u8, c: usize) {
    if c > 0 {
        // SAFETY: both buffers hold P·c bytes and are different arrays
        // (the entry points copy an MPI_IN_PLACE buffer first).
        unsafe { std::ptr::copy(send.add(r * c), recv.add(r * c), c) };
    }
}

/// Alltoall: linear (`linear`: every receive, then every send, posted at
/// once, staggered so that rank r starts with r + 1; one wait for all) or
/// the pairwise exchange (in step k rank r sends to r + k and receives from
/// r − k).
///
/// # Safety
/// `send` valid for P·c bytes, `recv` writable for P·c bytes, disjoint.
pub unsafe fn alltoall<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    send: *const u8,
    recv: *mut u8,
    c: usize,
    linear: bool,
) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    let byte = cx.m.type_byte();
    // SAFETY: forwarded.
    unsafe { own(r, send, recv, c) };
    if !linear {
        for k in 1..p {
            let to = (r + k) % p;
            let from = (r + p - k) % p;
            // SAFETY: block `to` of send, block `from` of recv.
            unsafe {
                cx.sendrecv(
                    send.add(to * c),
                    c,
                    to,
                    recv.add(from * c),
                    c,
                    from,
                    byte,
                    TAG_ALLTOALL,
                )?
            };
        }
        return Ok(());
    }
    // SAFETY: block i of recv receives from rank i, block j of send goes
    // to rank j: P·c bytes each, different arrays.
    unsafe {
        cx.exchange_all(
            |i| recv.wrapping_add(i * c),
            |j| send.wrapping_add(j * c),
            c,
            byte,
            TAG_ALLTOALL,
        )
    }
}
