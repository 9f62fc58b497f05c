//! Broadcast of `n` bytes from `root`: binomial tree, binomial scatter +
//! allgather (recursive doubling for a power-of-two size, or ring), and the
//! segmented chain.

use super::allgather::Blocks;
use super::{children, lowbit, Cx, Reqs, TAG_BCAST};
use crate::mpi::{Mpi, MpiError};
use netgauge::select::chain_segment;

/// Byte range of relative block `i` when `n` bytes are cut into `p` blocks
/// of ⌈n/p⌉ (the last ones shorter or empty).
#[inline]
fn bblock(n: usize, p: usize, i: usize) -> (usize, usize) {
    let c = n.div_ceil(p);
    ((i * c).min(n), ((i + 1) * c).min(n))
}

/// Bytes of relative blocks `first .. first + k`.
#[inline]
fn bblocks(n: usize, p: usize, first: usize, k: usize) -> (usize, usize) {
    (
        bblock(n, p, first).0,
        bblock(n, p, first + k).0.max(bblock(n, p, first).0),
    )
}

/// Binomial tree: receive from the parent, then send to every child.
///
/// # Safety
/// `buf` valid for `n` bytes (writable on non-roots).
pub unsafe fn binomial<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    n: usize,
    root: usize,
) -> Result<(), MpiError> {
    // SAFETY: every span is the caller's whole buffer.
    unsafe { down_tree(cx, buf, root, |_, _| (0, n)) }
}

/// Binomial scatter: relative rank v ends up holding (at least) its block
/// v; the root sends each child its whole subtree's blocks.
unsafe fn scatter<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    n: usize,
    root: usize,
) -> Result<(), MpiError> {
    let p = cx.size;
    // SAFETY: a subtree's blocks lie inside the caller's n bytes.
    unsafe { down_tree(cx, buf, root, |c, sub| bblocks(n, p, c, sub)) }
}

/// Down the binomial tree: a rank receives bytes `span(v, subtree)` of
/// `buf` from its parent, then sends each child c its `span(c, subtree)`.
///
/// # Safety
/// Every span lies inside `buf` (writable on non-roots).
unsafe fn down_tree<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    root: usize,
    span: impl Fn(usize, usize) -> (usize, usize),
) -> Result<(), MpiError> {
    let (v, p) = (cx.rel(root), cx.size);
    let byte = cx.m.type_byte();
    let mut reqs = Reqs::new();
    if v != 0 {
        let (lo, hi) = span(v, lowbit(v).min(p - v));
        // SAFETY: [lo, hi) lies inside buf (caller).
        unsafe {
            cx.irecv(
                buf.add(lo),
                hi - lo,
                byte,
                cx.real(v - lowbit(v), root),
                TAG_BCAST,
                &mut reqs,
            )?
        };
        cx.wait(&mut reqs)?;
    }
    children(v, p, |c, sub| {
        let (lo, hi) = span(c, sub);
        // SAFETY: as above; the buffer is only read until the wait below.
        unsafe {
            cx.isend(
                buf.add(lo),
                hi - lo,
                byte,
                cx.real(c, root),
                TAG_BCAST,
                &mut reqs,
            )
        }
    })?;
    cx.wait(&mut reqs)
}

/// Scatter, then an allgather: recursive doubling (`rd`, power-of-two
/// sizes only; the ring otherwise) or the ring.
///
/// # Safety
/// As for [`binomial`].
pub unsafe fn scatter_allgather<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    n: usize,
    root: usize,
    rd: bool,
) -> Result<(), MpiError> {
    let p = cx.size;
    let blocks = Blocks {
        n: p,
        me: cx.rel(root),
        real: |v| cx.real(v, root),
        span: |first, k| bblocks(n, p, first, k),
        tag: TAG_BCAST,
    };
    // SAFETY: the scatter's and the allgather's blocks lie inside the
    // caller's n bytes.
    unsafe {
        scatter(cx, buf, n, root)?;
        blocks.gather(cx, cx.bytes(buf), rd)
    }
}

/// Receives kept in flight ahead of the one being forwarded.
const CHAIN_WINDOW: usize = 4;

/// The chain root → 1 → 2 → … in segments of `seg` bytes (0: the whole
/// message in one; [`chain_segment`]): a rank forwards a segment as soon as it has it, with
/// the next few receives already posted.
///
/// # Safety
/// As for [`binomial`].
pub unsafe fn chain<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    n: usize,
    root: usize,
    seg: usize,
) -> Result<(), MpiError> {
    let (v, p) = (cx.rel(root), cx.size);
    let byte = cx.m.type_byte();
    let seg = chain_segment(seg as u64, n as u64) as usize;
    let nseg = n.div_ceil(seg).max(1);
    let range = |s: usize| ((s * seg).min(n), ((s + 1) * seg).min(n));
    let prev = cx.real((v + p - 1) % p, root);
    let next = cx.real(v + 1, root);
    let mut sends = Reqs::new();
    // One receive request per slot of the window.
    let mut window: [Reqs; CHAIN_WINDOW] = Default::default();
    if v != 0 {
        for (s, w) in window.iter_mut().enumerate().take(nseg) {
            let (lo, hi) = range(s);
            // SAFETY: segment s lies inside the caller's buffer.
            unsafe { cx.irecv(buf.add(lo), hi - lo, byte, prev, TAG_BCAST, w)? };
        }
    }
    for s in 0..nseg {
        let (lo, hi) = range(s);
        if v != 0 {
            cx.wait(&mut window[s % CHAIN_WINDOW])?;
            let ahead = s + CHAIN_WINDOW;
            if ahead < nseg {
                let (alo, ahi) = range(ahead);
                // SAFETY: as above.
                unsafe {
                    cx.irecv(
                        buf.add(alo),
                        ahi - alo,
                        byte,
                        prev,
                        TAG_BCAST,
                        &mut window[s % CHAIN_WINDOW],
                    )?
                };
            }
        }
        if v + 1 < p {
            // SAFETY: segment s has arrived (or this is the root) and is
            // only read until the final wait.
            unsafe { cx.isend(buf.add(lo), hi - lo, byte, next, TAG_BCAST, &mut sends)? };
        }
    }
    cx.wait(&mut sends)
}
