//! The interposed collectives, written once over [`Mpi`]: each checks that
//! the call is inside the model, looks its decision up in the
//! communicator's plan, and runs our algorithm, or calls the library's
//! own collective (`lib`, the PMPI_ call with the caller's arguments, on
//! the caller's communicator, or where the plan names another of the
//! library's algorithms on the duplicate that has it forced,
//! [`CommState::alt_comm`]).
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
//! The choice costs no system call and no allocation. A call that the
//! [`gate`] sends to the library's own reads its two lines and goes; any
//! other takes the full path: the communicator's state (its attribute,
//! cached per thread), the datatype's size and layout, and one table
//! lookup (`tests/ngcoll/decide.c` times it and proves it makes no system
//! call), which opens the gate for the communicator.
//! Where the plan chose one of ours or another of the library's algorithms,
//! a class's first calls are its trial
//! against the library's own ([`crate::trial`]): every call of the full
//! path runs inside [`trial::timed`], which times the calls the trial asks
//! for (the gate never passes a class that has a trial).

use std::ffi::{c_int, c_void};

use netgauge::select::{Algorithm, Collective};

use crate::algo::{self, Cx, Elems, Operands};
use crate::gate;
use crate::mpi::{Mpi, MpiError, Raw, TypeInfo, MPI_SUCCESS};
use crate::plan::Slot;
use crate::runtime::{existing_state, state, CommState};
use crate::trial;

/// A datatype's layout (the thread's cache), remembered by the gate when
/// predefined.
fn type_info<M: Mpi + ?Sized>(m: &M, datatype: Raw) -> Result<TypeInfo, MpiError> {
    let ti = crate::hot::type_info(m, datatype)?;
    if ti.predefined {
        gate::remember_type(datatype, ti.size);
    }
    Ok(ti)
}

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
    if bytes > MAX_BYTES || st.is_closed() {
        return None;
    }
    let slot = st.pick(coll, bytes);
    slot.replaces_library().then_some((st, slot))
}

/// [`plan_of`] for a call that runs: counts it in its class's trial, which
/// may give it to the library's own (None) and time it.
#[inline]
fn plan_call<M: Mpi + ?Sized>(
    m: &M,
    comm: Raw,
    coll: Collective,
    bytes: u64,
) -> Option<(&'static CommState, Slot)> {
    let (st, slot) = plan_of(m, comm, coll, bytes)?;
    let Some(t) = st.trial(coll, bytes) else {
        return Some((st, slot));
    };
    let side = t.next();
    if side.is_timed() {
        trial::start(st.shadow, t, side);
    }
    side.ours().then_some((st, slot))
}

/// One interposed call on `comm`: straight to the library's own (`lib`,
/// the PMPI_ call with the caller's arguments on the communicator it is
/// given) where the gate `passes` it (libngcoll off, or the gate's
/// decision), touching nothing else of libngcoll; otherwise `body`, given
/// `lib`, inside [`trial::timed`] (out of line: the entry point keeps the
/// gate's few instructions and the call).
#[inline(always)]
fn interposed<M: Mpi + ?Sized, L: FnOnce(Raw) -> c_int>(
    m: &M,
    passes: bool,
    comm: Raw,
    lib: L,
    body: impl FnOnce(L) -> c_int,
) -> c_int {
    if passes {
        return lib(comm);
    }
    full_path(m, lib, body)
}

#[inline(never)]
fn full_path<M: Mpi + ?Sized, L: FnOnce(Raw) -> c_int>(
    m: &M,
    lib: L,
    body: impl FnOnce(L) -> c_int,
) -> c_int {
    trial::timed(m, || body(lib))
}

/// A call the plan gives to one of ours or to another of the library's
/// algorithms: `ours`, or where the slot names another of the library's
/// algorithms its own call (`lib`) on `alt`, the duplicate that runs it (or
/// the program's `comm`, where that could not be made), an error handed to
/// `comm`'s error handler as the library would (the duplicate's errors
/// return).
#[inline(always)]
fn ours_or_alt<M: Mpi + ?Sized>(
    m: &M,
    st: &CommState,
    slot: &Slot,
    comm: Raw,
    lib: impl FnOnce(Raw) -> c_int,
    ours: impl FnOnce() -> c_int,
) -> c_int {
    let Some(alt) = st.alt_comm(m, slot, comm) else {
        return ours();
    };
    let rc = lib(alt);
    if rc == MPI_SUCCESS || alt == comm {
        rc
    } else {
        m.call_errhandler(comm, rc)
    }
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
/// the algorithm (an `NG_ALG_*` value, or from `plan::LIBRARY_ALG` on
/// another of the library's algorithms) or -1 for the library's own. The
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
    if gate::holds(coll, comm, bytes) {
        return -1;
    }
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
            Some(a @ Algorithm::BcastScatterRdAllgather)
            | Some(a @ Algorithm::BcastScatterRingAllgather) => {
                let rd = a == Algorithm::BcastScatterRdAllgather;
                algo::bcast::scatter_allgather(cx, buf, n, root, rd)
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
#[inline(always)]
pub unsafe fn bcast<M: Mpi + ?Sized>(
    m: &M,
    buf: *mut c_void,
    count: c_int,
    datatype: Raw,
    root: c_int,
    comm: Raw,
    lib: impl FnOnce(Raw) -> c_int,
) -> c_int {
    // A negative root (erroneous on an intra-communicator) goes the full path.
    let passes = gate::passes(
        Collective::Bcast,
        comm,
        datatype,
        if root < 0 { -1 } else { count },
    );
    interposed(m, passes, comm, lib, |lib| {
        let Ok(ti) = type_info(m, datatype) else {
            return lib(comm);
        };
        if count < 0 || root < 0 {
            return lib(comm);
        }
        let bytes = count as u64 * ti.size as u64;
        let Some((st, slot)) = plan_call(m, comm, Collective::Bcast, bytes) else {
            return lib(comm);
        };
        let root = root as usize;
        if root >= st.size {
            return lib(comm);
        }
        ours_or_alt(m, st, &slot, comm, lib, || {
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
        })
    })
}

/// A reduction libngcoll runs: a predefined datatype with a non-zero
/// extent, a predefined operation, and the plan's choice one of ours (its
/// datatype, the communicator's state and the plan's slot; None: the
/// library's own).
fn reduction<M: Mpi + ?Sized>(
    m: &M,
    datatype: Raw,
    op: Raw,
    count: c_int,
    comm: Raw,
    coll: Collective,
) -> Option<(TypeInfo, &'static CommState, Slot)> {
    if count <= 0 {
        return None;
    }
    let ti = type_info(m, datatype).ok()?;
    if !ti.predefined || ti.extent == 0 {
        return None;
    }
    let bytes = count as u64 * ti.size as u64;
    let kind = m.op_kind(op);
    if kind == 0 || !ti.class.takes(kind) {
        // Outside the model, yet counted in its class where the
        // communicator is set up, as the gate counts it.
        if let Some(st) = existing_state(m, comm).filter(|_| bytes <= MAX_BYTES) {
            st.count(coll, bytes);
        }
        return None;
    }
    let (st, slot) = plan_call(m, comm, coll, bytes)?;
    Some((ti, st, slot))
}

/// A reduction's operands over `count` elements of `datatype` at `acc`
/// and `tmp`.
fn operands(
    acc: *mut u8,
    tmp: *mut u8,
    ti: &TypeInfo,
    datatype: Raw,
    count: usize,
    op: Raw,
) -> Operands {
    let at = |base| Elems {
        base,
        extent: ti.extent,
        dt: datatype,
    };
    Operands {
        acc: at(acc),
        tmp: at(tmp),
        count,
        op,
        dense_bytes: ti.contiguous.then(|| count * ti.extent),
        either_order: ti.class.either_order(),
    }
}

/// The arguments of an MPI_Reduce (`root` Some) or MPI_Allreduce (None)
/// call (handles as bits).
#[derive(Clone, Copy, Debug)]
pub struct ReduceCall {
    pub sbuf: *const c_void,
    pub rbuf: *mut c_void,
    pub count: c_int,
    pub datatype: Raw,
    pub op: Raw,
    pub root: Option<c_int>,
    pub comm: Raw,
}

/// MPI_Reduce (a root) or MPI_Allreduce (none).
///
/// # Safety
/// The arguments of a valid MPI_Reduce or MPI_Allreduce call.
#[inline(always)]
pub unsafe fn reduction_call<M: Mpi + ?Sized>(
    m: &M,
    a: ReduceCall,
    lib: impl FnOnce(Raw) -> c_int,
) -> c_int {
    let coll = match a.root {
        Some(_) => Collective::Reduce,
        None => Collective::Allreduce,
    };
    let passes = gate::passes(coll, a.comm, a.datatype, a.count);
    interposed(m, passes, a.comm, lib, |lib| {
        let Some((ti, st, slot)) = reduction(m, a.datatype, a.op, a.count, a.comm, coll) else {
            return lib(a.comm);
        };
        let Some(root) = a.root else {
            return ours_or_alt(m, st, &slot, a.comm, lib, || {
                // SAFETY: the caller's arguments, checked by `reduction`.
                code(unsafe { allreduce(m, &a, &ti, st, &slot) })
            });
        };
        let in_place = a.sbuf as usize == m.in_place();
        if root < 0 || root as usize >= st.size || (in_place && st.rank != root as usize) {
            return lib(a.comm);
        }
        ours_or_alt(m, st, &slot, a.comm, lib, || {
            // SAFETY: as above; the root is a rank of the communicator.
            code(unsafe { reduce(m, &a, root as usize, &ti, st, &slot) })
        })
    })
}

/// The reduce of a checked call.
///
/// # Safety
/// As for [`reduction_call`].
unsafe fn reduce<M: Mpi + ?Sized>(
    m: &M,
    a: &ReduceCall,
    root: usize,
    ti: &TypeInfo,
    st: &CommState,
    slot: &Slot,
) -> Result<(), MpiError> {
    let count_u = a.count as usize;
    let is_root = st.rank == root;
    // A root whose send buffer is its receive buffer (the libraries refuse
    // it; combining a vector with itself would be wrong) is served as in
    // place: its data is where MPI_IN_PLACE would have it.
    let in_place = a.sbuf as usize == m.in_place() || (is_root && std::ptr::eq(a.sbuf, a.rbuf));
    let span = algo::span(count_u, ti.data_end, ti.extent);
    let stride = count_u * ti.extent;
    let mut sc = st.scratch(2 * stride);
    let base = sc.ptr();
    let acc = if is_root { a.rbuf as *mut u8 } else { base };
    let tmp = base.wrapping_add(stride);
    let cx = cx(m, st);
    let own = if in_place {
        a.rbuf as *const u8
    } else {
        a.sbuf as *const u8
    };
    let v = operands(acc, tmp, ti, a.datatype, count_u, a.op);
    // SAFETY: own holds count elements (the caller's send buffer, or at an
    // in-place root its receive buffer); acc and tmp hold count elements.
    unsafe {
        match slot.algorithm() {
            // Rabenseifner cuts the vector into P' blocks: with fewer
            // elements than ranks the binomial tree (same on every rank).
            // It works in place on the whole vector: copy ours in first
            // (MPI forbids the send buffer to alias the receive buffer).
            Some(Algorithm::ReduceRabenseifner) if count_u >= st.size => {
                if !in_place && span > 0 {
                    std::ptr::copy(own, v.acc.base, span);
                }
                algo::reduce::rabenseifner(&cx, v, root)
            }
            _ => algo::reduce::binomial(&cx, own, in_place, v, root),
        }
    }
}

/// The allreduce of a checked call.
///
/// # Safety
/// As for [`reduction_call`].
unsafe fn allreduce<M: Mpi + ?Sized>(
    m: &M,
    a: &ReduceCall,
    ti: &TypeInfo,
    st: &CommState,
    slot: &Slot,
) -> Result<(), MpiError> {
    let count_u = a.count as usize;
    let span = algo::span(count_u, ti.data_end, ti.extent);
    let stride = count_u * ti.extent;
    // A send buffer that is the receive buffer (Open MPI accepts it for
    // one element) holds the data already: as in place.
    if a.sbuf as usize != m.in_place() && !std::ptr::eq(a.sbuf, a.rbuf) && span > 0 {
        // SAFETY: sbuf and rbuf hold count elements (span bytes); MPI
        // forbids them to overlap, and `copy` is sound even if they do.
        unsafe { std::ptr::copy(a.sbuf as *const u8, a.rbuf as *mut u8, span) };
    }
    // Linear receives every other rank's vector into a slot of its own.
    let linear = slot.algorithm() == Some(Algorithm::AllreduceLinear);
    let mut sc = st.scratch(if linear { st.size * stride } else { stride });
    let cx = cx(m, st);
    let v = operands(a.rbuf as *mut u8, sc.ptr(), ti, a.datatype, count_u, a.op);
    // SAFETY: rbuf holds count elements, the scratch count (P·count for
    // linear).
    unsafe {
        match slot.algorithm() {
            Some(Algorithm::AllreduceRabenseifner) if count_u >= st.size => {
                algo::allreduce::rabenseifner(&cx, v)
            }
            Some(Algorithm::AllreduceRing) if count_u >= st.size => algo::allreduce::ring(&cx, v),
            Some(Algorithm::AllreduceLinear) => algo::allreduce::linear(&cx, v, span),
            _ => algo::allreduce::recursive_doubling(&cx, v),
        }
    }
}

/// The arguments of an MPI_Allgather or MPI_Alltoall call (handles as
/// bits).
#[derive(Clone, Copy, Debug)]
pub struct BlockCall {
    pub sbuf: *const c_void,
    pub scount: c_int,
    pub stype: Raw,
    pub rbuf: *mut c_void,
    pub rcount: c_int,
    pub rtype: Raw,
    pub comm: Raw,
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

impl Blocks {
    /// Unpacks the P blocks of `work` into the caller's receive buffer.
    ///
    /// # Safety
    /// `work` holds `total` bytes; the call's receive buffer what its
    /// count and datatype say.
    unsafe fn unpack<M: Mpi + ?Sized>(
        &self,
        m: &M,
        a: &BlockCall,
        work: *const u8,
        comm: Raw,
    ) -> Result<(), MpiError> {
        let count = self.st.size * a.rcount as usize;
        // SAFETY: forwarded from the caller.
        unsafe { m.unpack(work, self.total, a.rbuf as *mut u8, count, a.rtype, comm) }
    }
}

/// [`Blocks`] of a call, or None where the library's own runs: a datatype
/// not predefined, send and receive blocks of different sizes, an empty
/// or oversized call, or the plan's choice is the library's.
fn blocks<M: Mpi + ?Sized>(m: &M, a: &BlockCall, coll: Collective) -> Option<Blocks> {
    let rti = type_info(m, a.rtype).ok()?;
    if a.rcount <= 0 {
        return None;
    }
    let c = a.rcount as usize * rti.size;
    let sti = if a.sbuf as usize == m.in_place() {
        None
    } else {
        match type_info(m, a.stype) {
            Ok(t) if a.scount >= 0 && a.scount as usize * t.size == c => Some(t),
            _ => return None,
        }
    };
    let (st, slot) = plan_call(m, a.comm, coll, c as u64)?;
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

/// MPI_Allgather (`coll` Allgather) or MPI_Alltoall (Alltoall).
///
/// # Safety
/// The arguments of a valid MPI_Allgather or MPI_Alltoall call.
#[inline(always)]
pub unsafe fn block_collective<M: Mpi + ?Sized>(
    m: &M,
    coll: Collective,
    a: BlockCall,
    lib: impl FnOnce(Raw) -> c_int,
) -> c_int {
    let passes = gate::passes(coll, a.comm, a.rtype, a.rcount);
    interposed(m, passes, a.comm, lib, |lib| {
        let Some(b) = blocks(m, &a, coll) else {
            return lib(a.comm);
        };
        ours_or_alt(m, b.st, &b.slot, a.comm, lib, || {
            // SAFETY: the caller's arguments, checked by `blocks`.
            code(unsafe {
                if coll == Collective::Alltoall {
                    alltoall(m, &a, &b)
                } else {
                    allgather(m, &a, &b)
                }
            })
        })
    })
}

/// The allgather of a checked call.
///
/// # Safety
/// As for [`block_collective`].
unsafe fn allgather<M: Mpi + ?Sized>(m: &M, a: &BlockCall, b: &Blocks) -> Result<(), MpiError> {
    let (c, total) = (b.c, b.total);
    let cx = cx(m, b.st);
    let r = b.st.rank;
    let direct = b.rti.contiguous;
    let mut sc = b.st.scratch(if direct { 0 } else { total });
    let work = if direct { a.rbuf as *mut u8 } else { sc.ptr() };
    // This rank's own block into block r of the work buffer.
    // SAFETY: every buffer holds what its count and datatype say; block r
    // of work holds c bytes.
    unsafe {
        let own = work.add(r * c);
        match b.sti {
            Some(t) if t.contiguous => std::ptr::copy(a.sbuf as *const u8, own, c),
            Some(_) => {
                m.pack(
                    a.sbuf as *const u8,
                    a.scount as usize,
                    a.stype,
                    own,
                    c,
                    cx.comm,
                )?;
            }
            None if !direct => {
                // Wrapping: the receive buffer may be MPI_BOTTOM (null).
                let src = (a.rbuf as *const u8).wrapping_add(r * a.rcount as usize * b.rti.extent);
                m.pack(src, a.rcount as usize, a.rtype, own, c, cx.comm)?;
            }
            None => {}
        }
        match b.slot.algorithm() {
            Some(Algorithm::AllgatherLinear) => algo::allgather::linear(&cx, work, c)?,
            a => {
                let rd = a == Some(Algorithm::AllgatherRecursiveDoubling);
                algo::allgather::allgather(&cx, work, c, rd)?
            }
        }
        if !direct {
            b.unpack(m, a, work, cx.comm)?;
        }
    }
    Ok(())
}

/// The alltoall of a checked call.
///
/// # Safety
/// As for [`block_collective`].
unsafe fn alltoall<M: Mpi + ?Sized>(m: &M, a: &BlockCall, b: &Blocks) -> Result<(), MpiError> {
    let (p, c, total) = (b.st.size, b.c, b.total);
    let cx = cx(m, b.st);
    // Send side: the caller's buffer when contiguous, else packed (an
    // MPI_IN_PLACE buffer is packed from rbuf: the receives overwrite it).
    let send_direct = matches!(b.sti, Some(t) if t.contiguous);
    let recv_direct = b.rti.contiguous;
    let need = if send_direct { 0 } else { total } + if recv_direct { 0 } else { total };
    let mut sc = b.st.scratch(need);
    let base = sc.ptr();
    let send = if send_direct {
        a.sbuf as *const u8
    } else {
        base as *const u8
    };
    let recv = if recv_direct {
        a.rbuf as *mut u8
    } else {
        base.wrapping_add(if send_direct { 0 } else { total })
    };
    // SAFETY: every buffer holds what its count and datatype say; the
    // scratch areas hold `total` bytes each.
    unsafe {
        if !send_direct {
            let (buf, count, t) = match b.sti {
                Some(_) => (a.sbuf as *const u8, a.scount, a.stype),
                None => (a.rbuf as *const u8, a.rcount, a.rtype),
            };
            m.pack(buf, p * count as usize, t, base, total, cx.comm)?;
        }
        let linear = b.slot.algorithm() == Some(Algorithm::AlltoallLinear);
        algo::alltoall::alltoall(&cx, send, recv, c, linear)?;
        if !recv_direct {
            b.unpack(m, a, recv, cx.comm)?;
        }
    }
    Ok(())
}

/// MPI_Barrier.
#[inline(always)]
pub fn barrier<M: Mpi + ?Sized>(m: &M, comm: Raw, lib: impl FnOnce(Raw) -> c_int) -> c_int {
    interposed(m, gate::passes_barrier(comm), comm, lib, |lib| {
        let Some((st, slot)) = plan_call(m, comm, Collective::Barrier, 0) else {
            return lib(comm);
        };
        ours_or_alt(m, st, &slot, comm, lib, || {
            let cx = cx(m, st);
            code(match slot.algorithm() {
                Some(Algorithm::BarrierTree) => algo::barrier::tree(&cx),
                _ => algo::barrier::dissemination(&cx),
            })
        })
    })
}
