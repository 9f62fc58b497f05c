//! Reduce to `root` (commutative, predefined operations): binomial tree,
//! and Rabenseifner's reduce-scatter by recursive halving followed by a
//! binomial gather of the reduced blocks.
//!
//! `acc` holds this rank's contribution on entry (the entry point copies
//! the send buffer there) and, at the root, the result on return; `tmp`
//! is scratch for `count` elements.

use super::{blocks, pof2_floor, Cx, Operands, Reqs, TAG_REDUCE};
use crate::mpi::{Mpi, MpiError};

/// Binomial tree: in round k a rank whose bit k is set sends its partial
/// result to the rank 2^k below and stops; the others receive from the
/// rank 2^k above and combine.
///
/// `own` is this rank's contribution, only read: a leaf sends it as it
/// is, and a rank's first receive lands in `acc` and is combined with it
/// there, so no rank copies its vector first. `acc` already holds `own`
/// when `own_in_acc` (the root's MPI_IN_PLACE); at the root `acc` is the
/// receive buffer and holds the result on return.
///
/// # Safety
/// `own`, `acc` and `tmp` valid for `count` elements (`acc`, `tmp`
/// writable).
pub unsafe fn binomial<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    own: *const u8,
    own_in_acc: bool,
    v: Operands,
    root: usize,
) -> Result<(), MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let (v, p) = (cx.rel(root), cx.size);
    let mut reqs = Reqs::new();
    let mut have = own_in_acc;
    let mut mask = 1;
    while mask < p {
        if v & mask != 0 {
            let cur = if have { acc.base as *const u8 } else { own };
            // SAFETY: cur holds count elements (caller).
            unsafe {
                cx.isend(
                    cur,
                    count,
                    acc.dt,
                    cx.real(v - mask, root),
                    TAG_REDUCE,
                    &mut reqs,
                )?
            };
            return cx.wait(&mut reqs);
        }
        if v + mask < p {
            let into = if have { tmp } else { acc };
            // SAFETY: acc and tmp are valid for count elements (caller).
            unsafe {
                cx.irecv(
                    into.base,
                    count,
                    into.dt,
                    cx.real(v + mask, root),
                    TAG_REDUCE,
                    &mut reqs,
                )?
            };
            cx.wait(&mut reqs)?;
            // SAFETY: as above; own holds count elements.
            unsafe {
                if have {
                    cx.m.reduce_local(tmp.base, acc.base, count, acc.dt, op)?;
                } else {
                    cx.m.reduce_local(own, acc.base, count, acc.dt, op)?;
                    have = true;
                }
            }
        }
        mask <<= 1;
    }
    Ok(())
}

/// Folding for sizes that are not a power of two: of the first 2·rem
/// relative ranks (rem = P − P'), each odd one hands its vector to the even
/// one below and sits out; the remaining P' ranks get new ranks 0..P'.
pub(super) fn new_rank(v: usize, rem: usize) -> Option<usize> {
    if v < 2 * rem {
        (v % 2 == 0).then_some(v / 2)
    } else {
        Some(v - rem)
    }
}

/// The relative rank of new rank `nr`.
pub(super) fn old_rank(nr: usize, rem: usize) -> usize {
    if nr < rem {
        2 * nr
    } else {
        nr + rem
    }
}

/// The fold-in step (see [`new_rank`]); returns this rank's new rank.
///
/// # Safety
/// As for [`binomial`].
pub(super) unsafe fn fold_in<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    v: Operands,
    root: usize,
    tag: i32,
) -> Result<Option<usize>, MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let v = cx.rel(root);
    let rem = cx.size - pof2_floor(cx.size);
    let mut reqs = Reqs::new();
    if v < 2 * rem {
        if v % 2 == 1 {
            // SAFETY: acc valid for count elements.
            unsafe {
                cx.isend(
                    acc.base,
                    count,
                    acc.dt,
                    cx.real(v - 1, root),
                    tag,
                    &mut reqs,
                )?
            };
            cx.wait(&mut reqs)?;
        } else {
            // SAFETY: tmp valid for count elements.
            unsafe {
                cx.irecv(
                    tmp.base,
                    count,
                    tmp.dt,
                    cx.real(v + 1, root),
                    tag,
                    &mut reqs,
                )?
            };
            cx.wait(&mut reqs)?;
            // SAFETY: both hold count elements.
            unsafe { cx.m.reduce_local(tmp.base, acc.base, count, acc.dt, op)? };
        }
    }
    Ok(new_rank(v, rem))
}

/// Reduce-scatter by recursive halving among the P' = 2^k new ranks: the
/// window of blocks halves every step, new rank `nr` ends holding block
/// `nr` of `count` elements cut into P' blocks, reduced over everyone.
///
/// # Safety
/// As for [`binomial`].
pub(super) unsafe fn halving<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    v: Operands,
    root: usize,
    nr: usize,
    tag: i32,
) -> Result<(), MpiError> {
    let (acc, tmp, count, op) = v.parts();
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    let (mut lo, mut len) = (0usize, pof2);
    let mut mask = pof2 >> 1;
    while mask > 0 {
        let partner = cx.real(old_rank(nr ^ mask, rem), root);
        let half = len / 2;
        let (keep, give) = if nr & mask == 0 {
            (lo, lo + half)
        } else {
            (lo + half, lo)
        };
        let (klo, khi) = blocks(count, pof2, keep, half);
        let give = blocks(count, pof2, give, half);
        // SAFETY: element ranges inside acc and tmp (count elements each);
        // the send and receive buffers are different arrays.
        unsafe {
            cx.swap(acc, give, partner, tmp, (klo, khi), partner, tag)?;
            cx.m.reduce_local(tmp.at(klo), acc.at(klo), khi - klo, acc.dt, op)?;
        }
        lo = keep;
        len = half;
        mask >>= 1;
    }
    Ok(())
}

/// Rabenseifner's reduce: fold in, reduce-scatter by recursive halving,
/// then a binomial gather of the reduced blocks to new rank 0, which is the
/// root (relative rank 0 is even, so it never sits out).
///
/// # Safety
/// As for [`binomial`].
pub unsafe fn rabenseifner<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    v: Operands,
    root: usize,
) -> Result<(), MpiError> {
    let Operands { acc, count, .. } = v;
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    // SAFETY: forwarded.
    let Some(nr) = (unsafe { fold_in(cx, v, root, TAG_REDUCE)? }) else {
        return Ok(());
    };
    // SAFETY: forwarded.
    unsafe { halving(cx, v, root, nr, TAG_REDUCE)? };
    // Gather: new rank nr holds blocks [nr, nr + mask) before round mask.
    let mut reqs = Reqs::new();
    let mut mask = 1;
    while mask < pof2 {
        if nr & mask != 0 {
            let (lo, hi) = blocks(count, pof2, nr, mask);
            let to = cx.real(old_rank(nr - mask, rem), root);
            // SAFETY: element range inside acc.
            unsafe { cx.isend(acc.at(lo), hi - lo, acc.dt, to, TAG_REDUCE, &mut reqs)? };
            return cx.wait(&mut reqs);
        }
        let (lo, hi) = blocks(count, pof2, nr + mask, mask);
        let from = cx.real(old_rank(nr + mask, rem), root);
        // SAFETY: element range inside acc.
        unsafe { cx.irecv(acc.at(lo), hi - lo, acc.dt, from, TAG_REDUCE, &mut reqs)? };
        cx.wait(&mut reqs)?;
        mask <<= 1;
    }
    Ok(())
}
