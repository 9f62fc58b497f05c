//! Allreduce (commutative, predefined operations): recursive doubling,
//! Rabenseifner (reduce-scatter by recursive halving, allgather by
//! recursive doubling) and the ring. Sizes that are not a power of two
//! fold the extra ranks in before and out after (see `reduce::new_rank`).
//!
//! Every rank ends with bitwise the same result, floating point included:
//! partners combine the same two operands (a + b = b + a exactly), and in
//! the ring every block is reduced once and then copied.

use super::reduce::{fold_in, halving, old_rank};
use super::{block, blocks, pof2_floor, Cx, Elems, Reqs, TAG_ALLREDUCE};
use crate::mpi::{Mpi, MpiError, Raw};

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
/// `acc` (this rank's contribution in, the result out) and `tmp` valid for
/// `count` elements.
pub unsafe fn recursive_doubling<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    acc: Elems,
    tmp: Elems,
    count: usize,
    op: Raw,
) -> Result<(), MpiError> {
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    // SAFETY: forwarded.
    if let Some(nr) = unsafe { fold_in(cx, acc, tmp, count, op, 0, TAG_ALLREDUCE)? } {
        let mut mask = 1;
        while mask < pof2 {
            let partner = old_rank(nr ^ mask, rem);
            // SAFETY: acc and tmp are distinct arrays of count elements.
            unsafe {
                cx.sendrecv(
                    acc.base,
                    count,
                    partner,
                    tmp.base,
                    count,
                    partner,
                    acc.dt,
                    TAG_ALLREDUCE,
                )?;
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
pub unsafe fn rabenseifner<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    acc: Elems,
    tmp: Elems,
    count: usize,
    op: Raw,
) -> Result<(), MpiError> {
    let pof2 = pof2_floor(cx.size);
    let rem = cx.size - pof2;
    // SAFETY: forwarded.
    if let Some(nr) = unsafe { fold_in(cx, acc, tmp, count, op, 0, TAG_ALLREDUCE)? } {
        // SAFETY: forwarded.
        unsafe { halving(cx, acc, tmp, count, op, 0, nr, TAG_ALLREDUCE)? };
        // nr holds block nr; before round `mask` it holds the `mask` blocks
        // of its aligned group, and swaps them for its partner's group.
        let mut mask = 1;
        while mask < pof2 {
            let partner_nr = nr ^ mask;
            let partner = old_rank(partner_nr, rem);
            let (slo, shi) = blocks(count, pof2, nr & !(mask - 1), mask);
            let (rlo, rhi) = blocks(count, pof2, partner_nr & !(mask - 1), mask);
            // SAFETY: disjoint element ranges of acc.
            unsafe {
                cx.sendrecv(
                    acc.at(slo),
                    shi - slo,
                    partner,
                    acc.at(rlo),
                    rhi - rlo,
                    partner,
                    acc.dt,
                    TAG_ALLREDUCE,
                )?
            };
            mask <<= 1;
        }
    }
    // SAFETY: forwarded.
    unsafe { fold_out(cx, acc, count) }
}

/// Ring: a reduce-scatter of P − 1 steps (pass a block to the right,
/// combine the one from the left), then an allgather of P − 1 steps.
///
/// # Safety
/// As for [`recursive_doubling`].
pub unsafe fn ring<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    acc: Elems,
    tmp: Elems,
    count: usize,
    op: Raw,
) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    let right = (r + 1) % p;
    let left = (r + p - 1) % p;
    for i in 0..p - 1 {
        let (slo, shi) = block(count, p, (r + p - i) % p);
        let (rlo, rhi) = block(count, p, (r + 2 * p - i - 1) % p);
        // SAFETY: the send range is in acc, the receive goes to tmp, then
        // is combined into the same range of acc.
        unsafe {
            cx.sendrecv(
                acc.at(slo),
                shi - slo,
                right,
                tmp.at(rlo),
                rhi - rlo,
                left,
                acc.dt,
                TAG_ALLREDUCE,
            )?;
            cx.m.reduce_local(tmp.at(rlo), acc.at(rlo), rhi - rlo, acc.dt, op)?;
        }
    }
    for i in 0..p - 1 {
        let (slo, shi) = block(count, p, (r + 1 + p - i) % p);
        let (rlo, rhi) = block(count, p, (r + p - i) % p);
        // SAFETY: two different blocks of acc.
        unsafe {
            cx.sendrecv(
                acc.at(slo),
                shi - slo,
                right,
                acc.at(rlo),
                rhi - rlo,
                left,
                acc.dt,
                TAG_ALLREDUCE,
            )?
        };
    }
    Ok(())
}
