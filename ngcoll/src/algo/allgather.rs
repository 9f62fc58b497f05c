//! Allgather of one block of `c` bytes per rank into `buf` (P blocks, block
//! i at i·c; this rank's block already in place): ring, and recursive
//! doubling for power-of-two sizes.

use super::{Cx, TAG_ALLGATHER};
use crate::mpi::{Mpi, MpiError};

/// Ring: P − 1 steps; in step i a rank passes block r − i to the right
/// and receives block r − i − 1 from the left.
///
/// # Safety
/// `buf` valid and writable for P·c bytes.
pub unsafe fn ring<M: Mpi + ?Sized>(cx: &Cx<M>, buf: *mut u8, c: usize) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    let byte = cx.m.type_byte();
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    for i in 0..p - 1 {
        let sb = (r + p - i) % p;
        let rb = (r + 2 * p - i - 1) % p;
        // SAFETY: two different blocks inside the caller's P·c bytes.
        unsafe {
            cx.sendrecv(
                buf.add(sb * c),
                c,
                right,
                buf.add(rb * c),
                c,
                left,
                byte,
                TAG_ALLGATHER,
            )?
        };
    }
    Ok(())
}

/// Recursive doubling: in round `mask` a rank swaps the `mask` blocks of
/// its aligned group with its partner's (P a power of two; the entry
/// points offer it for nothing else).
///
/// # Safety
/// As for [`ring`].
pub unsafe fn recursive_doubling<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    c: usize,
) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    if !p.is_power_of_two() {
        // SAFETY: forwarded.
        return unsafe { ring(cx, buf, c) };
    }
    let byte = cx.m.type_byte();
    let mut mask = 1;
    while mask < p {
        let partner = r ^ mask;
        let mine = r & !(mask - 1);
        let theirs = partner & !(mask - 1);
        // SAFETY: two disjoint groups of `mask` blocks inside P·c bytes.
        unsafe {
            cx.sendrecv(
                buf.add(mine * c),
                mask * c,
                partner,
                buf.add(theirs * c),
                mask * c,
                partner,
                byte,
                TAG_ALLGATHER,
            )?
        };
        mask <<= 1;
    }
    Ok(())
}
