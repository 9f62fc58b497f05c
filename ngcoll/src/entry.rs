//! The interposed collectives, written once over [`Mpi`]: each checks that
//! the call is inside the model, looks its decision up in the
//! communicator's plan, and runs our algorithm, or calls the library's
//! own collective (`lib`, the PMPI_ call with the caller's arguments).
//!
//! Outside the model, always the library's own: libngcoll off, an
//! inter-communicator or a single rank, a user-defined operation (or
//! MPI_REPLACE / MPI_NO_OP), a reduction over a derived datatype, a message
//! beyond what an MPI `int` count of bytes holds, and MPI_IN_PLACE where
//! the standard does not allow it (which the library reports). Every one of
//! these conditions is the same on every rank of the call, so every rank
//! takes the same path. Broadcast, allgather and alltoall handle any
//! datatype: a non-contiguous one is packed into bytes first (the choice
//! depends only on the byte count, which the type signatures make equal on
//! every rank).
//!
//! The choice costs no system call and no allocation: an attribute lookup
//! on the communicator, the datatype's size and layout, and one table
//! lookup (`tests/ngcoll/decide.c` times it and proves it makes no system call).

use std::ffi::{c_int, c_void};

use netgauge::select::{Algorithm, Collective};

use crate::algo::{self, Cx, Elems};
use crate::mpi::{Mpi, MpiError, Raw, TypeInfo, MPI_SUCCESS};
use crate::plan::Slot;
use crate::runtime::{state, type_info, CommState};

/// A call's outcome as an MPI return code.
fn code(r: Result<(), MpiError>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => e.0,
    }
}

/// The largest message libngcoll handles (bytes), so that every count it
/// passes to MPI fits a C `int`.
const MAX_BYTES: u64 = i32::MAX as u64;

/// The state and the decision for one call, or None: the library's own.
/// Shared by every collective and by [`decide`].
#[inline]
fn plan_of<M: Mpi + ?Sized>(
    m: &M,
    comm: Raw,
    coll: Collective,
    bytes: u64,
) -> Option<(&'static CommState, Slot)> {
    let st = state(m, comm)?;
    st.shadow?;
    if bytes > MAX_BYTES {
        return None;
    }
    let slot = st.pick(coll, bytes);
    slot.algorithm()?;
    Some((st, slot))
}

fn cx<'a, M: Mpi + ?Sized>(m: &'a M, st: &CommState) -> Cx<'a, M> {
    Cx {
        m,
        comm: st.shadow.unwrap_or(0),
        rank: st.rank,
        size: st.size,
        polite: st.polite,
    }
}

/// The decision an MPI_Bcast of `count` × `datatype` on `comm` would take:
/// the algorithm (an `NG_ALG_*` value) or -1 for the library's own. The
/// per-call selection path alone, for the overhead bench and the
/// zero-system-call proof (`ngcoll_decide` in the C ABI).
pub fn decide<M: Mpi + ?Sized>(
    m: &M,
    coll: Collective,
    count: c_int,
    datatype: Raw,
    comm: Raw,
) -> i64 {
    let Ok(ti) = type_info(m, datatype) else {
        return -1;
    };
    let bytes = count.max(0) as u64 * ti.size as u64;
    match plan_of(m, comm, coll, bytes) {
        Some((_, s)) => i64::from(s.alg),
        None => -1,
    }
}

unsafe fn bcast_bytes<M: Mpi + ?Sized>(
    cx: &Cx<M>,
    buf: *mut u8,
    n: usize,
    root: usize,
    s: &Slot,
) -> Result<(), MpiError> {
    // SAFETY: forwarded from the caller.
    unsafe {
        match s.algorithm() {
            Some(Algorithm::BcastScatterRdAllgather) => algo::bcast::scatter_rd(cx, buf, n, root),
            Some(Algorithm::BcastScatterRingAllgather) => {
                algo::bcast::scatter_ring(cx, buf, n, root)
            }
            Some(Algorithm::BcastChain) => {
                algo::bcast::chain(cx, buf, n, root, s.seg_bytes as usize)
            }
            _ => algo::bcast::binomial(cx, buf, n, root),
        }
    }
}

/// MPI_Bcast.
///
/// # Safety
/// The arguments of a valid MPI_Bcast call.
pub unsafe fn bcast<M: Mpi + ?Sized>(
    m: &M,
    buf: *mut c_void,
    count: c_int,
    datatype: Raw,
    root: c_int,
    comm: Raw,
    lib: impl FnOnce() -> c_int,
) -> c_int {
    let Ok(ti) = type_info(m, datatype) else {
        return lib();
    };
    if count < 0 || root < 0 {
        return lib();
    }
    let bytes = count as u64 * ti.size as u64;
    let Some((st, slot)) = plan_of(m, comm, Collective::Bcast, bytes) else {
        return lib();
    };
    let root = root as usize;
    if root >= st.size {
        return lib();
    }
    let cx = cx(m, st);
    let n = bytes as usize;
    if ti.contiguous {
        // SAFETY: a contiguous datatype: the buffer is n bytes.
        return code(unsafe { bcast_bytes(&cx, buf as *mut u8, n, root, &slot) });
    }
    let mut sc = st.scratch(n);
    let tmp = sc.ptr();
    code((|| {
        if st.rank == root {
            // SAFETY: the caller's buffer holds count elements; tmp n bytes.
            unsafe { m.pack(buf as *const u8, count as usize, datatype, tmp, n, cx.comm)? };
        }
        // SAFETY: tmp holds n bytes.
        unsafe { bcast_bytes(&cx, tmp, n, root, &slot)? };
        if st.rank != root {
            // SAFETY: as for the pack.
            unsafe { m.unpack(tmp, n, buf as *mut u8, count as usize, datatype, cx.comm)? };
        }
        Ok(())
    })())
}

/// A reduction's operands: predefined datatype, predefined operation.
fn reducible<M: Mpi + ?Sized>(m: &M, datatype: Raw, op: Raw, count: c_int) -> Option<TypeInfo> {
    if count <= 0 || m.op_kind(op) == 0 {
        return None;
    }
    let ti = type_info(m, datatype).ok()?;
    ti.predefined.then_some(ti)
}

/// MPI_Reduce.
///
/// # Safety
/// The arguments of a valid MPI_Reduce call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce<M: Mpi + ?Sized>(
    m: &M,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: c_int,
    datatype: Raw,
    op: Raw,
    root: c_int,
    comm: Raw,
    lib: impl FnOnce() -> c_int,
) -> c_int {
    let Some(ti) = reducible(m, datatype, op, count) else {
        return lib();
    };
    if root < 0 {
        return lib();
    }
    let count_u = count as usize;
    let bytes = count_u as u64 * ti.size as u64;
    let Some((st, slot)) = plan_of(m, comm, Collective::Reduce, bytes) else {
        return lib();
    };
    let root = root as usize;
    let in_place = sbuf as usize == m.in_place();
    if root >= st.size || (in_place && st.rank != root) || ti.extent == 0 {
        return lib();
    }
    let span = algo::span(count_u, ti.size, ti.extent);
    let stride = count_u * ti.extent;
    let is_root = st.rank == root;
    let mut sc = st.scratch(2 * stride);
    let base = sc.ptr();
    let acc = if is_root { rbuf as *mut u8 } else { base };
    let tmp = base.wrapping_add(stride);
    let cx = cx(m, st);
    let own = if in_place {
        rbuf as *const u8
    } else {
        sbuf as *const u8
    };
    let acc = Elems {
        base: acc,
        extent: ti.extent,
        dt: datatype,
    };
    let tmp = Elems {
        base: tmp,
        extent: ti.extent,
        dt: datatype,
    };
    // SAFETY: own holds count elements (the caller's send buffer, or at an
    // in-place root its receive buffer); acc and tmp hold count elements.
    code(unsafe {
        match slot.algorithm() {
            // Rabenseifner cuts the vector into P' blocks: with fewer
            // elements than ranks the binomial tree (same on every rank).
            // It works in place on the whole vector: copy ours in first
            // (MPI forbids the send buffer to alias the receive buffer).
            Some(Algorithm::ReduceRabenseifner) if count_u >= st.size => {
                if !in_place && span > 0 {
                    std::ptr::copy_nonoverlapping(own, acc.base, span);
                }
                algo::reduce::rabenseifner(&cx, acc, tmp, count_u, op, root)
            }
            _ => algo::reduce::binomial(&cx, own, in_place, acc, tmp, count_u, op, root),
        }
    })
}

/// MPI_Allreduce.
///
/// # Safety
/// The arguments of a valid MPI_Allreduce call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allreduce<M: Mpi + ?Sized>(
    m: &M,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: c_int,
    datatype: Raw,
    op: Raw,
    comm: Raw,
    lib: impl FnOnce() -> c_int,
) -> c_int {
    let Some(ti) = reducible(m, datatype, op, count) else {
        return lib();
    };
    let count_u = count as usize;
    let bytes = count_u as u64 * ti.size as u64;
    let Some((st, slot)) = plan_of(m, comm, Collective::Allreduce, bytes) else {
        return lib();
    };
    if ti.extent == 0 {
        return lib();
    }
    let span = algo::span(count_u, ti.size, ti.extent);
    let stride = count_u * ti.extent;
    if sbuf as usize != m.in_place() && span > 0 {
        // SAFETY: sbuf and rbuf hold count elements and do not alias (MPI).
        unsafe { std::ptr::copy_nonoverlapping(sbuf as *const u8, rbuf as *mut u8, span) };
    }
    let mut sc = st.scratch(stride);
    let cx = cx(m, st);
    let acc = Elems {
        base: rbuf as *mut u8,
        extent: ti.extent,
        dt: datatype,
    };
    let tmp = Elems {
        base: sc.ptr(),
        extent: ti.extent,
        dt: datatype,
    };
    // SAFETY: rbuf and the scratch hold count elements each.
    code(unsafe {
        match slot.algorithm() {
            Some(Algorithm::AllreduceRabenseifner) if count_u >= st.size => {
                algo::allreduce::rabenseifner(&cx, acc, tmp, count_u, op)
            }
            Some(Algorithm::AllreduceRing) if count_u >= st.size => {
                algo::allreduce::ring(&cx, acc, tmp, count_u, op)
            }
            _ => algo::allreduce::recursive_doubling(&cx, acc, tmp, count_u, op),
        }
    })
}

/// The checked arguments of an allgather or alltoall: one rank's block of
/// `c` bytes, `total` = `c` × ranks, the send datatype (None: MPI_IN_PLACE)
/// and the receive datatype.
struct Blocks {
    st: &'static CommState,
    slot: Slot,
    c: usize,
    total: usize,
    sti: Option<TypeInfo>,
    rti: TypeInfo,
}

/// [`Blocks`] of a call, or None where the library's own runs: a datatype
/// not predefined, send and receive blocks of different sizes, an empty
/// or oversized call, or the plan's choice is the library's.
#[allow(clippy::too_many_arguments)]
fn blocks<M: Mpi + ?Sized>(
    m: &M,
    sbuf: *const c_void,
    scount: c_int,
    stype: Raw,
    rcount: c_int,
    rtype: Raw,
    comm: Raw,
    coll: Collective,
) -> Option<Blocks> {
    let rti = type_info(m, rtype).ok()?;
    if rcount <= 0 {
        return None;
    }
    let c = rcount as usize * rti.size;
    let sti = if sbuf as usize == m.in_place() {
        None
    } else {
        match type_info(m, stype) {
            Ok(t) if scount >= 0 && scount as usize * t.size == c => Some(t),
            _ => return None,
        }
    };
    let (st, slot) = plan_of(m, comm, coll, c as u64)?;
    let total = c.checked_mul(st.size).filter(|&t| t as u64 <= MAX_BYTES)?;
    Some(Blocks {
        st,
        slot,
        c,
        total,
        sti,
        rti,
    })
}

/// MPI_Allgather.
///
/// # Safety
/// The arguments of a valid MPI_Allgather call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn allgather<M: Mpi + ?Sized>(
    m: &M,
    sbuf: *const c_void,
    scount: c_int,
    stype: Raw,
    rbuf: *mut c_void,
    rcount: c_int,
    rtype: Raw,
    comm: Raw,
    lib: impl FnOnce() -> c_int,
) -> c_int {
    let Some(Blocks {
        st,
        slot,
        c,
        total,
        sti,
        rti,
    }) = blocks(
        m,
        sbuf,
        scount,
        stype,
        rcount,
        rtype,
        comm,
        Collective::Allgather,
    )
    else {
        return lib();
    };
    let p = st.size;
    let cx = cx(m, st);
    let r = st.rank;
    let direct = rti.contiguous;
    let mut sc = st.scratch(if direct { 0 } else { total });
    let work = if direct { rbuf as *mut u8 } else { sc.ptr() };
    code((|| {
        // This rank's own block into block r of the work buffer.
        // SAFETY: every buffer holds what its count and datatype say;
        // block r of work holds c bytes.
        unsafe {
            let own = work.add(r * c);
            match sti {
                Some(t) if t.contiguous => std::ptr::copy_nonoverlapping(sbuf as *const u8, own, c),
                Some(_) => {
                    m.pack(sbuf as *const u8, scount as usize, stype, own, c, cx.comm)?;
                }
                None if !direct => {
                    let src = (rbuf as *const u8).add(r * rcount as usize * rti.extent);
                    m.pack(src, rcount as usize, rtype, own, c, cx.comm)?;
                }
                None => {}
            }
            match slot.algorithm() {
                Some(Algorithm::AllgatherRecursiveDoubling) => {
                    algo::allgather::recursive_doubling(&cx, work, c)?
                }
                _ => algo::allgather::ring(&cx, work, c)?,
            }
            if !direct {
                m.unpack(
                    work,
                    total,
                    rbuf as *mut u8,
                    p * rcount as usize,
                    rtype,
                    cx.comm,
                )?;
            }
        }
        Ok(())
    })())
}

/// MPI_Alltoall.
///
/// # Safety
/// The arguments of a valid MPI_Alltoall call.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoall<M: Mpi + ?Sized>(
    m: &M,
    sbuf: *const c_void,
    scount: c_int,
    stype: Raw,
    rbuf: *mut c_void,
    rcount: c_int,
    rtype: Raw,
    comm: Raw,
    lib: impl FnOnce() -> c_int,
) -> c_int {
    let Some(Blocks {
        st,
        slot,
        c,
        total,
        sti,
        rti,
    }) = blocks(
        m,
        sbuf,
        scount,
        stype,
        rcount,
        rtype,
        comm,
        Collective::Alltoall,
    )
    else {
        return lib();
    };
    let p = st.size;
    let cx = cx(m, st);
    // Send side: the caller's buffer when contiguous, else packed (an
    // MPI_IN_PLACE buffer is packed from rbuf: the receives overwrite it).
    let send_direct = matches!(sti, Some(t) if t.contiguous);
    let recv_direct = rti.contiguous;
    let need = if send_direct { 0 } else { total } + if recv_direct { 0 } else { total };
    let mut sc = st.scratch(need);
    let base = sc.ptr();
    let send = if send_direct {
        sbuf as *const u8
    } else {
        base as *const u8
    };
    let recv = if recv_direct {
        rbuf as *mut u8
    } else {
        base.wrapping_add(if send_direct { 0 } else { total })
    };
    code((|| {
        // SAFETY: every buffer holds what its count and datatype say; the
        // scratch areas hold `total` bytes each.
        unsafe {
            if !send_direct {
                match sti {
                    Some(_) => {
                        m.pack(
                            sbuf as *const u8,
                            p * scount as usize,
                            stype,
                            base,
                            total,
                            cx.comm,
                        )?;
                    }
                    None => {
                        m.pack(
                            rbuf as *const u8,
                            p * rcount as usize,
                            rtype,
                            base,
                            total,
                            cx.comm,
                        )?;
                    }
                }
            }
            match slot.algorithm() {
                Some(Algorithm::AlltoallLinear) => algo::alltoall::linear(&cx, send, recv, c)?,
                _ => algo::alltoall::pairwise(&cx, send, recv, c)?,
            }
            if !recv_direct {
                m.unpack(
                    recv,
                    total,
                    rbuf as *mut u8,
                    p * rcount as usize,
                    rtype,
                    cx.comm,
                )?;
            }
        }
        Ok(())
    })())
}

/// MPI_Barrier.
pub fn barrier<M: Mpi + ?Sized>(m: &M, comm: Raw, lib: impl FnOnce() -> c_int) -> c_int {
    let Some((st, slot)) = plan_of(m, comm, Collective::Barrier, 0) else {
        return lib();
    };
    let cx = cx(m, st);
    code(match slot.algorithm() {
        Some(Algorithm::BarrierTree) => algo::barrier::tree(&cx),
        _ => algo::barrier::dissemination(&cx),
    })
}
