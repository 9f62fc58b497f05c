//! Allgather of one block of `c` bytes per rank into `buf` (P blocks, block
//! i at i·c; this rank's block already in place): ring, recursive doubling
//! for power-of-two sizes, and linear (every block sent directly).

use super::{Cx, Elems, TAG_ALLGATHER};
use crate::mpi::{Mpi, MpiError};

/// Allgather of P blocks of `c` bytes, block i at i·c: recursive doubling
/// (`rd`; power-of-two sizes only, the ring otherwise) or the ring.
///
/// # Safety
/// `buf` valid and writable for P·c bytes.
pub unsafe fn allgather<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    c: usize,
    rd: bool,
) -> Result<(), MpiError> {
    let blocks = Blocks {
        n: cx.size,
        me: cx.rank,
        real: |i| i,
        span: |first, k| (first * c, (first + k) * c),
        tag: TAG_ALLGATHER,
    };
    // SAFETY: every block lies inside the caller's P·c bytes.
    unsafe { blocks.gather(cx, cx.bytes(buf), rd) }
}

/// Linear: every receive, then every send of this rank's block, posted at
/// once, staggered so that rank r starts with r + 1; one wait for all.
///
/// # Safety
/// `buf` valid and writable for P·c bytes.
pub unsafe fn linear<M: Mpi + ?Sized>(cx: &Cx<M>, buf: *mut u8, c: usize) -> Result<(), MpiError> {
    let own = buf.wrapping_add(cx.rank * c) as *const u8;
    // SAFETY: block i of buf receives from rank i; this rank's block, which
    // no receive writes, goes to every rank.
    unsafe {
        cx.exchange_all(
            |i| buf.wrapping_add(i * c),
            |_| own,
            c,
            cx.m.type_byte(),
            TAG_ALLGATHER,
        )
    }
}

/// Where the `n` blocks of an allgather among `n` ranks lie in its buffer:
/// this rank's index `me` among them (its rank, or its rank relative to a
/// root), the real rank of index i, and the element range of blocks
/// `first .. first + k`.
pub(super) struct Blocks<R: Fn(usize) -> usize, S: Fn(usize, usize) -> (usize, usize)> {
    pub n: usize,
    pub me: usize,
    pub real: R,
    pub span: S,
    pub tag: i32,
}

impl<R: Fn(usize) -> usize, S: Fn(usize, usize) -> (usize, usize)> Blocks<R, S> {
    /// Recursive doubling (`rd`, n a power of two) or the ring.
    ///
    /// # Safety
    /// Every span lies inside `buf` (writable).
    pub(super) unsafe fn gather<M: Mpi + ?Sized>(
        &self,
        cx: &Cx<M>,
        buf: Elems,
        rd: bool,
    ) -> Result<(), MpiError> {
        let (v, p) = (self.me, self.n);
        if rd && p.is_power_of_two() {
            // In round `mask` index v swaps the `mask` blocks of its aligned
            // group with its partner's.
            let mut mask = 1;
            while mask < p {
                let partner = v ^ mask;
                let send = (self.span)(v & !(mask - 1), mask);
                let recv = (self.span)(partner & !(mask - 1), mask);
                let peer = (self.real)(partner);
                // SAFETY: two disjoint groups of blocks inside buf.
                unsafe { cx.swap(buf, send, peer, buf, recv, peer, self.tag)? };
                mask <<= 1;
            }
            return Ok(());
        }
        // The ring: in step i index v passes block v − i to v + 1 and
        // receives block v − i − 1 from v − 1.
        let right = (self.real)((v + 1) % p);
        let left = (self.real)((v + p - 1) % p);
        for i in 0..p.saturating_sub(1) {
            let send = (self.span)((v + p - i) % p, 1);
            let recv = (self.span)((v + 2 * p - i - 1) % p, 1);
            // SAFETY: two different blocks inside buf.
            unsafe { cx.swap(buf, send, right, buf, recv, left, self.tag)? };
        }
        Ok(())
    }
}
