//! Allreduce (commutative, predefined operations): recursive doubling,
//! Rabenseifner (reduce-scatter by recursive halving, allgather by
//! recursive doubling) and the ring. Sizes that are not a power of two
//! fold the extra ranks in before and out after (see `reduce::new_rank`).
//!
//! Every rank ends with bitwise the same result, floating point included:
//! partners combine the same two operands (a + b = b + a exactly), and in
//! the ring every block is reduced once and then copied.

use super::allgather::Blocks;
use super::reduce::{fold_in, halving, old_rank};
use super::{block, blocks, pof2_floor, Cx, Elems, Operands, Reqs, TAG_ALLREDUCE};
use crate::mpi::{Mpi, MpiError};

/// Fold-out: the even rank of each folded pair sends the result to the odd
/// one, which sat out.
unsafe fn fold_out<M: Mpi + ?Sized>(cx: &Cx<M>, acc: Elems, count: usize) -> Result<(), MpiError> {
    let v = cx.rank;
    let rem = cx.size - pof2_floor(cx.size);
    let mut reqs = Reqs::new();
    if v < 2 * rem {
        if v % 2 == 1 {
            // SAFETY: acc valid for count elements (caller).
            unsafe { cx.irecv(acc.base, count, acc.dt, v - 1, TAG_ALLREDUCE, &mut reqs)? };
        } else {
            // SAFETY: as above.
            unsafe { cx.isend(acc.base, count, acc.dt, v + 1, TAG_ALLREDUCE, &mut reqs)? };
        }
    }
    cx.wait(&mut reqs)
}

/// Recursive doubling: log2 P' exchanges of the whole vector.
///
/// # Safety
/// `v.acc` (this rank's contribution in, the result out) and `v.tmp` valid
/// for `v.count` elements.
pub unsafe fn recursive_doubling<M: Mpi + ?Sized>(cx: &Cx<M>, v: Operands) -> Result<(), MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    // SAFETY: forwarded.
    if let Some(nr) = unsafe { fold_in(cx, v, 0, TAG_ALLREDUCE)? } {
        let mut mask = 1;
        while mask < pof2 {
            let partner = old_rank(nr ^ mask, rem);
            let all = (0, count);
            // SAFETY: acc and tmp are distinct arrays of count elements.
            unsafe {
                cx.swap(acc, all, partner, tmp, all, partner, TAG_ALLREDUCE)?;
                cx.m.reduce_local(tmp.base, acc.base, count, acc.dt, op)?;
            }
            mask <<= 1;
        }
    }
    // SAFETY: forwarded.
    unsafe { fold_out(cx, acc, count) }
}

/// Rabenseifner: reduce-scatter by recursive halving, then allgather by
/// recursive doubling over the same windows in reverse.
///
/// # Safety
/// As for [`recursive_doubling`].
pub unsafe fn rabenseifner<M: Mpi + ?Sized>(cx: &Cx<M>, v: Operands) -> Result<(), MpiError> {
    let Operands { acc, count, .. } = v;
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    // SAFETY: forwarded.
    if let Some(nr) = unsafe { fold_in(cx, v, 0, TAG_ALLREDUCE)? } {
        // SAFETY: forwarded.
        unsafe { halving(cx, v, 0, nr, TAG_ALLREDUCE)? };
        // nr holds block nr: an allgather of the P' blocks by recursive
        // doubling among the new ranks.
        let blocks = Blocks {
            n: pof2,
            me: nr,
            real: |i| old_rank(i, rem),
            span: |first, k| blocks(count, pof2, first, k),
            tag: TAG_ALLREDUCE,
        };
        // SAFETY: the blocks lie inside acc.
        unsafe { blocks.gather(cx, acc, true)? };
    }
    // SAFETY: forwarded.
    unsafe { fold_out(cx, acc, count) }
}

/// Ring: a reduce-scatter of P − 1 steps (pass a block to the right,
/// combine the one from the left), then an allgather of P − 1 steps.
///
/// # Safety
/// As for [`recursive_doubling`].
pub unsafe fn ring<M: Mpi + ?Sized>(cx: &Cx<M>, v: Operands) -> Result<(), MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let (r, p) = (cx.rank, cx.size);
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    for i in 0..p - 1 {
        let send = block(count, p, (r + p - i) % p);
        let (rlo, rhi) = block(count, p, (r + 2 * p - i - 1) % p);
        // SAFETY: the send range is in acc, the receive goes to tmp, then
        // is combined into the same range of acc.
        unsafe {
            cx.swap(acc, send, right, tmp, (rlo, rhi), left, TAG_ALLREDUCE)?;
            cx.m.reduce_local(tmp.at(rlo), acc.at(rlo), rhi - rlo, acc.dt, op)?;
        }
    }
    // Index i of the allgather is rank i − 1: rank r starts with block
    // r + 1, the one it finished reducing.
    let blocks = Blocks {
        n: p,
        me: (r + 1) % p,
        real: |i| (i + p - 1) % p,
        span: |first, k| blocks(count, p, first, k),
        tag: TAG_ALLREDUCE,
    };
    // SAFETY: the blocks lie inside acc.
    unsafe { blocks.gather(cx, acc, false) }
}
