//! The building blocks [`Emit`](super::Emit) composes schedules of:
//! segmented chains, binomial and k-nomial trees and the scatter down
//! them, the fold-in and fold-out of a non-power-of-two size, Rabenseifner's
//! recursive halving and doubling, and the shared-memory reduce.

use super::{bbytes, chain_segment, lowbit, old_rank, pof2_floor, Emit, Op, FRESH_ALLOC_BYTES};

impl Emit<'_> {
    /// A chain cut into segments of `seg` bytes ([`chain_segment`]): each
    /// segment is received
    /// from `from` (if any), combined when `reduce` is Some (into freshly
    /// allocated memory when Some(true)), and sent on to `to` (if any)
    /// without waiting for the send.
    pub(super) fn chain(
        &mut self,
        m: u64,
        seg: u64,
        from: Option<usize>,
        to: Option<usize>,
        reduce: Option<bool>,
    ) {
        let seg = chain_segment(seg, m);
        let n = m.div_ceil(seg).max(1);
        for i in 0..n {
            let b = seg.min(m - (i * seg).min(m));
            if let Some(f) = from {
                self.recv(f, b);
                self.op(Op::WaitRecvs);
                if let Some(fresh) = reduce {
                    if fresh {
                        self.op(Op::Touch { bytes: b });
                    }
                    self.op(Op::Reduce { bytes: b });
                }
            }
            if let Some(t) = to {
                self.send(t, b);
            }
        }
        self.op(Op::Wait);
    }

    /// Open MPI's generic reduce (`alloc`) receives its `child`-th child's
    /// vector of `m` bytes into freshly allocated memory (`alloc_bytes`
    /// each) unless it is the root's first (that one lands in the receive
    /// buffer); it has two receive buffers, so only the first two after
    /// that are new. Allocations below [`FRESH_ALLOC_BYTES`] reuse memory.
    pub(super) fn fresh_receive(
        &mut self,
        alloc: bool,
        v: usize,
        child: usize,
        m: u64,
        alloc_bytes: u64,
    ) {
        let fresh = if v == 0 {
            (1..=2).contains(&child)
        } else {
            child <= 2
        };
        if alloc && fresh && alloc_bytes >= FRESH_ALLOC_BYTES {
            self.op(Op::Touch { bytes: m });
        }
    }

    pub(super) fn binomial_bcast(&mut self, m: u64) {
        self.down_tree(|_, _| m);
    }

    pub(super) fn knomial_bcast(&mut self, m: u64, k: usize) {
        let (v, p) = (self.v(), self.p);
        // The lowest non-zero base-k digit of v names the parent; the
        // children differ in one lower digit.
        let mut span = 1;
        while span < p {
            span *= k;
        }
        let mut level = 1;
        if v != 0 {
            while (v / level) % k == 0 {
                level *= k;
            }
            let digit = (v / level) % k;
            self.recv(v - digit * level, m);
            self.op(Op::Wait);
        } else {
            level = span;
        }
        let mut l = level / k;
        while l >= 1 {
            for d in 1..k {
                if v + d * l < p {
                    self.send(v + d * l, m);
                }
            }
            if l == 1 {
                break;
            }
            l /= k;
        }
        self.op(Op::Wait);
    }

    pub(super) fn scatter(&mut self, m: u64) {
        let p = self.p;
        self.down_tree(|c, sub| bbytes(m, p, c, sub));
    }

    /// Down the binomial tree: a rank receives `bytes(v, subtree)` from its
    /// parent, then sends each child c its `bytes(c, subtree)`.
    pub(super) fn down_tree(&mut self, bytes: impl Fn(usize, usize) -> u64) {
        let (v, p) = (self.v(), self.p);
        if v != 0 {
            self.recv(v - lowbit(v), bytes(v, lowbit(v).min(p - v)));
            self.op(Op::Wait);
        }
        for c in self.children() {
            self.send(c, bytes(c, (c - v).min(p - c)));
        }
        self.op(Op::Wait);
    }

    /// This rank's children in the binomial tree (relative ranks), the
    /// largest subtree first: v + 2^k for 2^k below v's lowest set bit (any
    /// k for the root).
    pub(super) fn children(&self) -> impl Iterator<Item = usize> {
        let (v, p) = (self.v(), self.p);
        let limit = if v == 0 {
            p.next_power_of_two()
        } else {
            lowbit(v)
        };
        std::iter::successors(Some(limit >> 1), |m| Some(m >> 1))
            .take_while(|&m| m > 0)
            .map(move |m| v + m)
            .filter(move |&c| c < p)
    }

    /// Fold-in of a non-power-of-two size; None for a rank that sits out.
    pub(super) fn fold_in(&mut self, m: u64) -> Option<usize> {
        let v = self.v();
        let rem = self.p - pof2_floor(self.p);
        if v < 2 * rem {
            if v % 2 == 1 {
                self.send(v - 1, m);
                self.op(Op::Wait);
                return None;
            }
            self.recv(v + 1, m);
            self.op(Op::Wait);
            self.op(Op::Reduce { bytes: m });
        }
        Some(if v < 2 * rem { v / 2 } else { v - rem })
    }

    pub(super) fn fold_out(&mut self, m: u64) {
        let v = self.v();
        let rem = self.p - pof2_floor(self.p);
        if v < 2 * rem {
            if v % 2 == 1 {
                self.recv(v - 1, m);
            } else {
                self.send(v + 1, m);
            }
            self.op(Op::Wait);
        }
    }

    /// Rabenseifner's reduce (`to_root`) or allreduce; `alloc`: with Open
    /// MPI's per-call buffers (every rank but the root copies its vector
    /// into a fresh one; the first halving step receives into another,
    /// whose later steps reuse the part it touched).
    pub(super) fn rabenseifner(&mut self, m: u64, to_root: bool, alloc: bool) {
        let p = self.p;
        let fresh = alloc && m >= FRESH_ALLOC_BYTES;
        if fresh && self.v() != 0 {
            self.op(Op::Touch { bytes: m });
            self.op(Op::Copy { bytes: m });
        }
        let mut first = fresh;
        let pof2 = pof2_floor(p);
        let rem = p - pof2;
        let Some(nr) = self.fold_in(m) else {
            if !to_root {
                self.fold_out(m);
            }
            return;
        };
        let blk = |first: usize, k: usize| bbytes(m, pof2, first, k);
        let (mut lo, mut len) = (0usize, pof2);
        let mut mask = pof2 >> 1;
        while mask > 0 {
            let half = len / 2;
            let (keep, give) = if nr & mask == 0 {
                (lo, lo + half)
            } else {
                (lo + half, lo)
            };
            self.exchange(old_rank(nr ^ mask, rem), blk(give, half), blk(keep, half));
            if first {
                self.op(Op::Touch {
                    bytes: blk(keep, half),
                });
                first = false;
            }
            self.op(Op::Reduce {
                bytes: blk(keep, half),
            });
            lo = keep;
            len = half;
            mask >>= 1;
        }
        let mut mask = 1;
        while mask < pof2 {
            if to_root {
                if nr & mask != 0 {
                    self.send(old_rank(nr - mask, rem), blk(nr, mask));
                    self.op(Op::Wait);
                    return;
                }
                self.recv(old_rank(nr + mask, rem), blk(nr + mask, mask));
                self.op(Op::Wait);
            } else {
                let partner = nr ^ mask;
                self.exchange(
                    old_rank(partner, rem),
                    blk(nr & !(mask - 1), mask),
                    blk(partner & !(mask - 1), mask),
                );
            }
            mask <<= 1;
        }
        if !to_root {
            self.fold_out(m);
        }
    }

    pub(super) fn shm_reduce(&mut self, m: u64) {
        let (v, p) = (self.v(), self.p);
        if v == 0 {
            for c in 1..p {
                self.recv(c, 0);
            }
            self.op(Op::Wait);
            self.op(Op::Reduce {
                bytes: (p as u64 - 1) * m,
            });
        } else {
            self.op(Op::Copy { bytes: m });
            self.send(0, 0);
            self.op(Op::Wait);
        }
    }
}
