//! The collective algorithms, on MPI point-to-point calls of the library
//! the program runs on ([`Mpi`]), over ngcoll's shadow communicator (a
//! duplicate of the caller's, so no message of ours can match one of the
//! program's or of the library's own collectives).
//!
//! Buffers are raw pointers: they come from the C caller. Broadcast,
//! allgather and alltoall move bytes (a non-contiguous datatype is packed
//! first, by the entry points); the reductions move elements of a
//! predefined datatype with their extent as stride and combine them with
//! MPI_Reduce_local, so every (type, operation) pair the library supports
//! is combined exactly as the library would.
//!
//! Ranks are relative to the root where there is one (`vr = (rank − root)
//! mod P`), so a tree is the same tree for every root.

pub mod allgather;
pub mod allreduce;
pub mod alltoall;
pub mod barrier;
pub mod bcast;
pub mod reduce;

use crate::mpi::{Envelope, Mpi, MpiError, Raw, Slot};

/// Tags of ngcoll's messages on its shadow communicators (one per
/// collective; messages of one call are matched in order per pair).
pub const TAG_BCAST: i32 = 7101;
pub const TAG_REDUCE: i32 = 7102;
pub const TAG_ALLREDUCE: i32 = 7103;
pub const TAG_ALLGATHER: i32 = 7104;
pub const TAG_ALLTOALL: i32 = 7105;
pub const TAG_BARRIER: i32 = 7106;
// 7107: the shim's copy of a buffer at MPI_BOTTOM (ngcoll_shim.c).

/// One rank's view of a call: the library, the shadow communicator, this
/// rank and the size, and how to wait.
pub struct Cx<'a, M: Mpi + ?Sized> {
    pub m: &'a M,
    pub comm: Raw,
    pub rank: usize,
    pub size: usize,
    /// Wait politely (yield between polls): the node runs more ranks than
    /// it has cores.
    pub polite: bool,
}

/// Outstanding requests of one call: inline up to 16, then on the heap
/// (long pipelines and alltoall's 2(P−1)).
pub struct Reqs {
    inline: [Slot; 16],
    n: usize,
    spill: Vec<Slot>,
}

impl Reqs {
    pub fn new() -> Reqs {
        Reqs {
            inline: [0; 16],
            n: 0,
            spill: Vec::new(),
        }
    }

    fn next(&mut self) -> &mut Slot {
        if self.spill.is_empty() && self.n < self.inline.len() {
            self.n += 1;
            return &mut self.inline[self.n - 1];
        }
        if self.spill.is_empty() {
            self.spill.extend_from_slice(&self.inline[..self.n]);
        }
        self.spill.push(0);
        self.spill.last_mut().expect("just pushed")
    }

    fn slots(&mut self) -> &mut [Slot] {
        if self.spill.is_empty() {
            &mut self.inline[..self.n]
        } else {
            &mut self.spill[..]
        }
    }

    fn clear(&mut self) {
        self.n = 0;
        self.spill.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0 && self.spill.is_empty()
    }
}

impl Default for Reqs {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Mpi + ?Sized> Cx<'_, M> {
    #[inline]
    fn envelope(&self, count: usize, datatype: Raw, peer: usize, tag: i32) -> Envelope {
        Envelope {
            count,
            datatype,
            peer,
            tag,
            comm: self.comm,
        }
    }

    /// # Safety
    /// `buf` valid for `count` elements of `dt` until [`Cx::wait`].
    pub unsafe fn isend(
        &self,
        buf: *const u8,
        count: usize,
        dt: Raw,
        dest: usize,
        tag: i32,
        reqs: &mut Reqs,
    ) -> Result<(), MpiError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.m
                .isend(buf, self.envelope(count, dt, dest, tag), reqs.next())
        }
    }

    /// # Safety
    /// `buf` valid and writable for `count` elements of `dt` until
    /// [`Cx::wait`].
    pub unsafe fn irecv(
        &self,
        buf: *mut u8,
        count: usize,
        dt: Raw,
        src: usize,
        tag: i32,
        reqs: &mut Reqs,
    ) -> Result<(), MpiError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.m
                .irecv(buf, self.envelope(count, dt, src, tag), reqs.next())
        }
    }

    /// One round with every other rank: the receive from each rank i into
    /// `recv(i)`, then the send to each rank j from `send(j)`, `count`
    /// elements of `dt` each, all posted at once (staggered so that rank r
    /// sends first to r + 1 and receives first from r − 1), then one wait
    /// for all. The linear alltoall, allgather and allreduce.
    ///
    /// # Safety
    /// Every `recv(i)` writable and every `send(j)` readable for `count`
    /// elements of `dt` until the wait; no receive overlaps another
    /// receive or a send.
    pub unsafe fn exchange_all(
        &self,
        recv: impl Fn(usize) -> *mut u8,
        send: impl Fn(usize) -> *const u8,
        count: usize,
        dt: Raw,
        tag: i32,
    ) -> Result<(), MpiError> {
        let (r, p) = (self.rank, self.size);
        let mut reqs = Reqs::new();
        for k in 1..p {
            let from = (r + p - k) % p;
            // SAFETY: forwarded from the caller.
            unsafe { self.irecv(recv(from), count, dt, from, tag, &mut reqs)? };
        }
        for k in 1..p {
            let to = (r + k) % p;
            // SAFETY: forwarded from the caller.
            unsafe { self.isend(send(to), count, dt, to, tag, &mut reqs)? };
        }
        self.wait(&mut reqs)
    }

    /// Completes every request in `reqs` and empties it.
    pub fn wait(&self, reqs: &mut Reqs) -> Result<(), MpiError> {
        if reqs.is_empty() {
            return Ok(());
        }
        let r = self.m.waitall(reqs.slots(), self.polite);
        reqs.clear();
        r
    }

    /// Send one buffer and receive another at once.
    ///
    /// # Safety
    /// Both buffers valid (the receive one writable) for their counts of
    /// `dt`, and not overlapping.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn sendrecv(
        &self,
        sbuf: *const u8,
        scount: usize,
        dest: usize,
        rbuf: *mut u8,
        rcount: usize,
        src: usize,
        dt: Raw,
        tag: i32,
    ) -> Result<(), MpiError> {
        let mut reqs = Reqs::new();
        // SAFETY: forwarded from the caller.
        unsafe {
            self.irecv(rbuf, rcount, dt, src, tag, &mut reqs)?;
            self.isend(sbuf, scount, dt, dest, tag, &mut reqs)?;
        }
        self.wait(&mut reqs)
    }

    /// Sends elements `send` (a range `[lo, hi)`) of `from_buf` to `to`
    /// and receives elements `recv` of `into` from `from`, at once.
    ///
    /// # Safety
    /// Both ranges inside their buffers (`into` writable), not
    /// overlapping; both buffers of one datatype.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn swap(
        &self,
        from_buf: Elems,
        send: (usize, usize),
        to: usize,
        into: Elems,
        recv: (usize, usize),
        from: usize,
        tag: i32,
    ) -> Result<(), MpiError> {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.sendrecv(
                from_buf.at(send.0),
                send.1 - send.0,
                to,
                into.at(recv.0),
                recv.1 - recv.0,
                from,
                from_buf.dt,
                tag,
            )
        }
    }

    /// A byte buffer as elements of MPI_BYTE.
    pub fn bytes(&self, buf: *mut u8) -> Elems {
        Elems {
            base: buf,
            extent: 1,
            dt: self.m.type_byte(),
        }
    }

    /// The real rank of relative rank `v` (root `root`).
    #[inline]
    pub fn real(&self, v: usize, root: usize) -> usize {
        (v + root) % self.size
    }

    /// This rank relative to `root`.
    #[inline]
    pub fn rel(&self, root: usize) -> usize {
        (self.rank + self.size - root) % self.size
    }
}

#[inline]
pub fn lowbit(v: usize) -> usize {
    v & v.wrapping_neg()
}

/// Children of relative rank `v` in the binomial tree over `p` ranks,
/// largest subtree first: v + mask for mask < lowbit(v) (every power of two
/// below p for the root), with their subtree sizes.
pub fn children(
    v: usize,
    p: usize,
    mut f: impl FnMut(usize, usize) -> Result<(), MpiError>,
) -> Result<(), MpiError> {
    let limit = if v == 0 {
        p.next_power_of_two()
    } else {
        lowbit(v)
    };
    let mut mask = limit >> 1;
    while mask > 0 {
        if v + mask < p {
            f(v + mask, mask.min(p - v - mask))?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// The largest power of two ≤ p (p ≥ 1).
#[inline]
pub fn pof2_floor(p: usize) -> usize {
    1 << (usize::BITS - 1 - p.max(1).leading_zeros())
}

/// Element range `[lo, hi)` of block `i` when `count` elements are cut
/// into `n` blocks, the first `count % n` one element longer.
#[inline]
pub fn block(count: usize, n: usize, i: usize) -> (usize, usize) {
    let q = count / n;
    let r = count % n;
    let lo = i * q + i.min(r);
    (lo, lo + q + usize::from(i < r))
}

/// Element range of blocks `first .. first + k` (consecutive).
#[inline]
pub fn blocks(count: usize, n: usize, first: usize, k: usize) -> (usize, usize) {
    if k == 0 {
        let lo = block(count, n, first.min(n - 1)).0;
        return (lo, lo);
    }
    (block(count, n, first).0, block(count, n, first + k - 1).1)
}

/// A vector of elements: base address, stride (extent) and datatype.
#[derive(Clone, Copy, Debug)]
pub struct Elems {
    pub base: *mut u8,
    pub extent: usize,
    pub dt: Raw,
}

impl Elems {
    /// Address of element `i`.
    #[inline]
    pub fn at(&self, i: usize) -> *mut u8 {
        self.base.wrapping_add(i * self.extent)
    }
}

/// The operands of a reduction: `acc` (this rank's contribution, then the
/// result), `tmp` (scratch), both of `count` elements, combined by `op`.
#[derive(Clone, Copy, Debug)]
pub struct Operands {
    pub acc: Elems,
    pub tmp: Elems,
    pub count: usize,
    pub op: Raw,
    /// The bytes the count elements span when they are one dense range
    /// (no hole in or between elements: a plain copy moves exactly the
    /// data); None otherwise (copies go through the datatype).
    pub dense_bytes: Option<usize>,
    /// a ⊕ b and b ⊕ a are the same bits for these elements (integers):
    /// partners need not agree on the order of their operands.
    pub either_order: bool,
}

impl Operands {
    /// (acc, tmp, count, op).
    #[inline]
    pub fn parts(self) -> (Elems, Elems, usize, Raw) {
        (self.acc, self.tmp, self.count, self.op)
    }
}

/// Bytes that `count` elements span whose data ends `data_end` bytes
/// after each one's address, at a stride of `extent`.
#[inline]
pub fn span(count: usize, data_end: usize, extent: usize) -> usize {
    if count == 0 {
        0
    } else {
        (count - 1) * extent + data_end
    }
}

#[cfg(test)]
mod tests;
