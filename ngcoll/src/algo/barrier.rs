//! Barrier: dissemination (⌈log2 P⌉ rounds of one notification each) and
//! a binomial tree in (to rank 0) and out.

use super::{children, lowbit, Cx, Reqs, TAG_BARRIER};
use crate::mpi::{Mpi, MpiError};

/// Dissemination: in round k rank r notifies r + 2^k and waits for
/// r − 2^k.
pub fn dissemination<M: Mpi + ?Sized>(cx: &Cx<M>) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    let byte = cx.m.type_byte();
    let mut k = 1;
    let mut z = [0u8; 1];
    while k < p {
        // SAFETY: zero-byte messages; the buffers are valid addresses.
        unsafe {
            cx.sendrecv(
                z.as_ptr(),
                0,
                (r + k) % p,
                z.as_mut_ptr(),
                0,
                (r + p - k) % p,
                byte,
                TAG_BARRIER,
            )?
        };
        k <<= 1;
    }
    Ok(())
}

/// Tree: every rank waits for its binomial children, notifies its parent,
/// waits for the parent's release and releases its children.
pub fn tree<M: Mpi + ?Sized>(cx: &Cx<M>) -> Result<(), MpiError> {
    let (r, p) = (cx.rank, cx.size);
    let byte = cx.m.type_byte();
    let mut z = [0u8; 1];
    let mut reqs = Reqs::new();
    children(r, p, |c, _| {
        // SAFETY: zero bytes into a valid address.
        unsafe { cx.irecv(z.as_mut_ptr(), 0, byte, c, TAG_BARRIER, &mut reqs) }
    })?;
    cx.wait(&mut reqs)?;
    if r != 0 {
        let parent = r - lowbit(r);
        // SAFETY: as above.
        unsafe {
            cx.sendrecv(
                z.as_ptr(),
                0,
                parent,
                z.as_mut_ptr(),
                0,
                parent,
                byte,
                TAG_BARRIER,
            )?
        };
    }
    children(r, p, |c, _| {
        // SAFETY: zero bytes from a valid address.
        unsafe { cx.isend(z.as_ptr(), 0, byte, c, TAG_BARRIER, &mut reqs) }
    })?;
    cx.wait(&mut reqs)
}
