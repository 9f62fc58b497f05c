//! Allreduce (commutative, predefined operations): recursive doubling,
//! Rabenseifner (reduce-scatter by recursive halving, allgather by
//! recursive doubling), the ring, and linear (every vector sent to every
//! rank directly). Sizes that are not a power of two fold the extra ranks
//! in before and out after (see `reduce::new_rank`) in the first two.
//!
//! Every rank ends with bitwise the same result, floating point included:
//! partners combine the same two operands in the same order (lower rank's
//! ⊕ higher rank's, as the libraries' own recursive doubling does), in the
//! ring every block is reduced once and then copied, and in linear every
//! rank combines the same P vectors in the same order.

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
        // Both partners compute lower ⊕ higher (reduce_local(in, inout):
        // inout = in ⊕ inout), so they end with the same bits even where
        // the operation is not symmetric in its operands (MAX and MIN of
        // a NaN, or of −0 and +0). The lower rank's result lands in the
        // buffer it received into: the two buffers trade roles, and a
        // result left in tmp is copied home at the end. Integers combine
        // alike in either order: each rank folds into acc.
        let (mut cur, mut other) = (acc, tmp);
        let mut mask = 1;
        while mask < pof2 {
            let partner = old_rank(nr ^ mask, rem);
            let all = (0, count);
            // SAFETY: cur and other are acc and tmp, distinct arrays of
            // count elements.
            unsafe {
                cx.swap(cur, all, partner, other, all, partner, TAG_ALLREDUCE)?;
                if cx.rank < partner && !v.either_order {
                    cx.m.reduce_local(cur.base, other.base, count, acc.dt, op)?;
                    std::mem::swap(&mut cur, &mut other);
                } else {
                    cx.m.reduce_local(other.base, cur.base, count, acc.dt, op)?;
                }
            }
            mask <<= 1;
        }
        if cur.base != acc.base {
            match v.dense_bytes {
                // SAFETY: tmp and acc both hold the dense range of `n`
                // bytes, and are different arrays.
                Some(n) => unsafe { std::ptr::copy_nonoverlapping(cur.base, acc.base, n) },
                // SAFETY: tmp to acc, both count elements of one datatype:
                // a message to this rank copies the data and leaves acc's
                // holes.
                None => unsafe {
                    cx.swap(
                        cur,
                        (0, count),
                        cx.rank,
                        acc,
                        (0, count),
                        cx.rank,
                        TAG_ALLREDUCE,
                    )?;
                },
            }
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

/// Linear: every rank sends its vector to every other rank and receives
/// theirs, all posted at once (staggered so that rank r starts with
/// r + 1), then every rank combines the P vectors in one order, v0 ⊕ (v1 ⊕
/// (… ⊕ vP−1)), so all of them hold bitwise the same result.
///
/// # Safety
/// `v.acc` (this rank's contribution in, the result out) valid for
/// `v.count` elements, which span `span` bytes; `v.tmp` valid for
/// P·`v.count` elements (slot i at i·count·extent receives rank i's
/// vector).
pub unsafe fn linear<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    v: Operands,
    span: usize,
) -> Result<(), MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let (r, p) = (cx.rank, cx.size);
    let stride = count * acc.extent;
    let slot = |i: usize| tmp.base.wrapping_add(i * stride);
    // SAFETY: slot i of tmp receives from rank i; acc (count elements)
    // goes to every rank.
    unsafe {
        cx.exchange_all(
            slot,
            |_| acc.base as *const u8,
            count,
            acc.dt,
            TAG_ALLREDUCE,
        )?
    };
    // The last rank's vector is where the combining starts: acc at rank
    // P − 1, its slot elsewhere (acc keeps this rank's own vector until
    // its turn, and takes the result at the end).
    let vec_of = |i: usize| if i == r { acc.base } else { slot(i) };
    let into = vec_of(p - 1);
    for i in (0..p - 1).rev() {
        // SAFETY: both hold count elements of the datatype; different
        // arrays (i ≠ P − 1).
        unsafe { cx.m.reduce_local(vec_of(i), into, count, acc.dt, op)? };
    }
    if into != acc.base && span > 0 {
        // SAFETY: both hold count elements, `span` bytes; different arrays.
        unsafe { std::ptr::copy_nonoverlapping(into, acc.base, span) };
    }
    Ok(())
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
