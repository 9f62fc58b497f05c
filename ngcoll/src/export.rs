//! [`export_mpi!`](crate::export_mpi): everything an ABI crate
//! (`ngcoll/openmpi`, `ngcoll/mpich`) consists of.
//!
//! It expands, in the ABI crate, to
//! - the declarations of the C shim's functions (`shim/ngcoll_shim.c`,
//!   which the ABI crate's build script compiles with that MPI's `mpicc`),
//! - `Shim`, the [`Mpi`](crate::mpi::Mpi) implementation over them,
//! - the interposed entry points `MPI_Init`, `MPI_Init_thread`,
//!   `MPI_Finalize`, `MPI_Comm_free`, `MPI_Comm_disconnect`, `MPI_Bcast`,
//!   `MPI_Reduce`, `MPI_Allreduce`, `MPI_Allgather`, `MPI_Alltoall` and
//!   `MPI_Barrier`,
//!   with the ABI's handle type, each calling its `PMPI_` twin for the
//!   library's own collective,
//! - `ngcoll_decide`, the per-call selection alone (the overhead bench and
//!   the zero-system-call proof call it).
//!
//! The entry points must be Rust functions: a `cdylib` exports only the
//! `#[no_mangle]` items of its Rust code, not C symbols linked into it.

/// An MPI handle type of one ABI, as bits.
pub trait Handle: Copy {
    fn bits(self) -> usize;
    /// The handle of these bits (a value [`bits`](Handle::bits) or the
    /// shim returned).
    fn from_bits(bits: usize) -> Self;
}

impl Handle for *mut std::ffi::c_void {
    #[inline]
    fn bits(self) -> usize {
        self as usize
    }
    #[inline]
    fn from_bits(bits: usize) -> Self {
        bits as Self
    }
}

impl Handle for std::ffi::c_int {
    #[inline]
    fn bits(self) -> usize {
        self as u32 as usize
    }
    #[inline]
    fn from_bits(bits: usize) -> Self {
        bits as u32 as Self
    }
}

/// Within [`export_mpi!`](crate::export_mpi): the interposed `$name`
/// (MPI_Allgather or MPI_Alltoall, whose arguments are alike) with the
/// ABI's handle type `$h`, calling libngcoll's entry for collective `$coll`
/// and, for the library's own, `$pmpi`.
#[doc(hidden)]
#[macro_export]
macro_rules! block_entry {
    ($h:ty, $name:ident, $pmpi:ident, $coll:ident) => {
        extern "C" {
            fn $pmpi(
                sbuf: *const c_void,
                scount: c_int,
                stype: $h,
                rbuf: *mut c_void,
                rcount: c_int,
                rtype: $h,
                comm: $h,
            ) -> c_int;
        }

        /// # Safety
        /// As the MPI function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sbuf: *const c_void,
            scount: c_int,
            stype: $h,
            rbuf: *mut c_void,
            rcount: c_int,
            rtype: $h,
            comm: $h,
        ) -> c_int {
            let call = $crate::entry::BlockCall {
                sbuf,
                scount,
                stype: stype.bits(),
                rbuf,
                rcount,
                rtype: rtype.bits(),
                comm: comm.bits(),
            };
            // SAFETY: the caller's arguments; the closure is the library's
            // own call with them.
            unsafe {
                $crate::entry::block_collective(
                    &Shim,
                    $crate::netgauge::select::Collective::$coll,
                    call,
                    |c: usize| $pmpi(sbuf, scount, stype, rbuf, rcount, rtype, <$h>::from_bits(c)),
                )
            }
        }
    };
}

/// Within [`export_mpi!`](crate::export_mpi): the interposed `$name`
/// (MPI_Reduce with `(root)`, MPI_Allreduce with `()`) with the ABI's
/// handle type `$h`, calling libngcoll's entry and, for the library's own,
/// `$pmpi`.
#[doc(hidden)]
#[macro_export]
macro_rules! reduce_entry {
    ($h:ty, $name:ident, $pmpi:ident, ($($root:ident)?)) => {
        extern "C" {
            fn $pmpi(
                sbuf: *const c_void,
                rbuf: *mut c_void,
                count: c_int,
                datatype: $h,
                op: $h,
                $($root: c_int,)?
                comm: $h,
            ) -> c_int;
        }

        /// # Safety
        /// As the MPI function of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sbuf: *const c_void,
            rbuf: *mut c_void,
            count: c_int,
            datatype: $h,
            op: $h,
            $($root: c_int,)?
            comm: $h,
        ) -> c_int {
            let call = $crate::entry::ReduceCall {
                sbuf,
                rbuf,
                count,
                datatype: datatype.bits(),
                op: op.bits(),
                root: None::<c_int> $(.or(Some($root)))?,
                comm: comm.bits(),
            };
            // SAFETY: the caller's arguments; the closure is the library's
            // own call with them.
            unsafe {
                $crate::entry::reduction_call(&Shim, call, |c: usize| {
                    $pmpi(sbuf, rbuf, count, datatype, op, $($root,)? <$h>::from_bits(c))
                })
            }
        }
    };
}

/// Generates an ABI crate's contents (see the module documentation).
/// `abi`: "openmpi" or "mpich"; `handle`: the C type of that ABI's
/// MPI_Comm, MPI_Datatype and MPI_Op (a pointer, or `c_int`).
#[macro_export]
macro_rules! export_mpi {
    (abi = $abi:literal, handle = $h:ty) => {
        use std::ffi::{c_char, c_int, c_void};
        use $crate::export::Handle as _;
        use $crate::mpi::{check, count_i32, Envelope, MpiError, Raw, Slot, TypeInfo};

        #[allow(dead_code)]
        extern "C" {
            fn ngc_abi() -> c_int;
            fn ngc_comm_world() -> usize;
            fn ngc_comm_null() -> usize;
            fn ngc_type_byte() -> usize;
            fn ngc_in_place() -> usize;
            fn ngc_bottom() -> usize;
            fn ngc_err_intern() -> c_int;
            fn ngc_f_comm(f: c_int) -> usize;
            fn ngc_f_type(f: c_int) -> usize;
            fn ngc_f_op(f: c_int) -> usize;
            fn ngc_library_version(out: *mut c_char, cap: c_int) -> c_int;
            fn ngc_thread_multiple() -> c_int;
            fn ngc_comm_size(comm: usize, size: *mut c_int) -> c_int;
            fn ngc_comm_rank(comm: usize, rank: *mut c_int) -> c_int;
            fn ngc_comm_test_inter(comm: usize, flag: *mut c_int) -> c_int;
            fn ngc_comm_dup(comm: usize, out: *mut usize) -> c_int;
            fn ngc_comm_dup_forced(
                comm: usize,
                n: c_int,
                names: *const *const c_char,
                values: *const c_int,
                out: *mut usize,
            ) -> c_int;
            fn ngc_cvar_read_int(name: *const c_char, value: *mut c_int) -> c_int;
            fn ngc_cvar_string_empty(name: *const c_char) -> c_int;
            fn ngc_tools_hold();
            fn ngc_tools_release();
            fn ngc_comm_call_errhandler(comm: usize, code: c_int) -> c_int;
            fn ngc_comm_free(comm: usize) -> c_int;
            fn ngc_comm_disconnect(comm: usize) -> c_int;
            fn ngc_world_ranks(comm: usize, n: c_int, out: *mut c_int) -> c_int;
            fn ngc_keyval_create(free: extern "C" fn(*mut c_void), keyval: *mut c_int) -> c_int;
            fn ngc_attr_get(
                comm: usize,
                keyval: c_int,
                val: *mut *mut c_void,
                flag: *mut c_int,
            ) -> c_int;
            fn ngc_attr_set(comm: usize, keyval: c_int, val: *mut c_void) -> c_int;
            fn ngc_type_info(
                t: usize,
                size: *mut i64,
                extent: *mut i64,
                data_end: *mut i64,
                contiguous: *mut c_int,
                predefined: *mut c_int,
                class: *mut c_int,
            ) -> c_int;
            fn ngc_op_kind(op: usize) -> c_int;
            fn ngc_reduce_local(
                inbuf: *const c_void,
                inout: *mut c_void,
                count: c_int,
                t: usize,
                op: usize,
            ) -> c_int;
            fn ngc_pack(
                inbuf: *const c_void,
                count: c_int,
                t: usize,
                out: *mut c_void,
                out_bytes: i64,
                pos: *mut i64,
                comm: usize,
            ) -> c_int;
            fn ngc_unpack(
                inbuf: *const c_void,
                in_bytes: i64,
                out: *mut c_void,
                count: c_int,
                t: usize,
                comm: usize,
            ) -> c_int;
            fn ngc_isend(
                buf: *const c_void,
                count: c_int,
                t: usize,
                dest: c_int,
                tag: c_int,
                comm: usize,
                slot: *mut u64,
            ) -> c_int;
            fn ngc_irecv(
                buf: *mut c_void,
                count: c_int,
                t: usize,
                src: c_int,
                tag: c_int,
                comm: usize,
                slot: *mut u64,
            ) -> c_int;
            fn ngc_waitall(slots: *mut u64, n: c_int, polite: c_int) -> c_int;
            fn ngc_allgather_bytes(
                send: *const c_void,
                n: c_int,
                recv: *mut c_void,
                comm: usize,
            ) -> c_int;
            fn ngc_allreduce_min_int(v: c_int, out: *mut c_int, comm: usize) -> c_int;
            fn ngc_allreduce_sum_double2(v: *const f64, out: *mut f64, comm: usize) -> c_int;
            fn ngc_bcast_bytes(buf: *mut c_void, n: c_int, root: c_int, comm: usize) -> c_int;

            fn PMPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int;
            fn PMPI_Init_thread(
                argc: *mut c_int,
                argv: *mut *mut *mut c_char,
                required: c_int,
                provided: *mut c_int,
            ) -> c_int;
            fn PMPI_Finalize() -> c_int;
            fn PMPI_Comm_free(comm: *mut $h) -> c_int;
            fn PMPI_Comm_disconnect(comm: *mut $h) -> c_int;
            fn PMPI_Bcast(
                buf: *mut c_void,
                count: c_int,
                datatype: $h,
                root: c_int,
                comm: $h,
            ) -> c_int;
            fn PMPI_Barrier(comm: $h) -> c_int;
        }

        /// The MPI library this crate was built against, through the shim.
        pub struct Shim;

        // SAFETY (for every `unsafe` call below): each shim function is one
        // PMPI_ call with the same contract; the pointers passed are valid
        // for the lengths passed (slices, or the callers' guarantees of the
        // `unsafe` trait methods).
        impl $crate::mpi::Mpi for Shim {
            fn comm_world(&self) -> Raw {
                // SAFETY: no arguments.
                unsafe { ngc_comm_world() }
            }
            fn type_byte(&self) -> Raw {
                // SAFETY: no arguments.
                unsafe { ngc_type_byte() }
            }
            fn in_place(&self) -> usize {
                // SAFETY: no arguments.
                unsafe { ngc_in_place() }
            }
            fn comm_size(&self, comm: Raw) -> Result<usize, MpiError> {
                let mut n = 0;
                // SAFETY: n is a valid out-pointer.
                check(unsafe { ngc_comm_size(comm, &mut n) })?;
                Ok(n.max(0) as usize)
            }
            fn comm_rank(&self, comm: Raw) -> Result<usize, MpiError> {
                let mut n = 0;
                // SAFETY: n is a valid out-pointer.
                check(unsafe { ngc_comm_rank(comm, &mut n) })?;
                Ok(n.max(0) as usize)
            }
            fn comm_is_inter(&self, comm: Raw) -> Result<bool, MpiError> {
                let mut f = 0;
                // SAFETY: f is a valid out-pointer.
                check(unsafe { ngc_comm_test_inter(comm, &mut f) })?;
                Ok(f != 0)
            }
            fn comm_dup(&self, comm: Raw) -> Result<Raw, MpiError> {
                let mut out = 0usize;
                // SAFETY: out is a valid out-pointer.
                check(unsafe { ngc_comm_dup(comm, &mut out) })?;
                Ok(out)
            }
            fn comm_free(&self, comm: Raw) -> Result<(), MpiError> {
                // SAFETY: a communicator handle of ours.
                check(unsafe { ngc_comm_free(comm) })
            }
            fn comm_disconnect(&self, comm: Raw) -> Result<(), MpiError> {
                // SAFETY: a communicator handle of ours.
                check(unsafe { ngc_comm_disconnect(comm) })
            }
            fn world_ranks(&self, comm: Raw, out: &mut [i32]) -> Result<(), MpiError> {
                let n = count_i32(out.len())?;
                // SAFETY: out holds n ints.
                check(unsafe { ngc_world_ranks(comm, n, out.as_mut_ptr()) })
            }
            fn keyval_create(&self, free: extern "C" fn(*mut c_void)) -> Result<i32, MpiError> {
                let mut k = 0;
                // SAFETY: k is a valid out-pointer; free lives forever.
                check(unsafe { ngc_keyval_create(free, &mut k) })?;
                Ok(k)
            }
            fn attr_get(&self, comm: Raw, keyval: i32) -> Result<Option<*mut c_void>, MpiError> {
                let mut v: *mut c_void = std::ptr::null_mut();
                let mut f = 0;
                // SAFETY: valid out-pointers.
                check(unsafe { ngc_attr_get(comm, keyval, &mut v, &mut f) })?;
                Ok((f != 0).then_some(v))
            }
            // The pointer is stored by MPI as the attribute's value, never
            // dereferenced.
            #[allow(clippy::not_unsafe_ptr_arg_deref)]
            fn attr_set(&self, comm: Raw, keyval: i32, val: *mut c_void) -> Result<(), MpiError> {
                // SAFETY: MPI stores the pointer; it owns no memory.
                check(unsafe { ngc_attr_set(comm, keyval, val) })
            }
            fn type_info(&self, t: Raw) -> Result<TypeInfo, MpiError> {
                let (mut size, mut extent, mut data_end) = (0i64, 0i64, 0i64);
                let (mut contiguous, mut predefined, mut class) = (0, 0, 0);
                // SAFETY: valid out-pointers.
                check(unsafe {
                    ngc_type_info(
                        t,
                        &mut size,
                        &mut extent,
                        &mut data_end,
                        &mut contiguous,
                        &mut predefined,
                        &mut class,
                    )
                })?;
                Ok(TypeInfo {
                    size: size.max(0) as usize,
                    extent: extent.max(0) as usize,
                    data_end: data_end.max(0) as usize,
                    contiguous: contiguous != 0,
                    predefined: predefined != 0,
                    class: $crate::mpi::TypeClass::from_code(class),
                })
            }
            fn op_kind(&self, op: Raw) -> u32 {
                // SAFETY: compares handles only.
                unsafe { ngc_op_kind(op) }.max(0) as u32
            }
            unsafe fn reduce_local(
                &self,
                inbuf: *const u8,
                inout: *mut u8,
                count: usize,
                t: Raw,
                op: Raw,
            ) -> Result<(), MpiError> {
                let n = count_i32(count)?;
                // SAFETY: the caller's guarantee.
                check(unsafe { ngc_reduce_local(inbuf.cast(), inout.cast(), n, t, op) })
            }
            unsafe fn pack(
                &self,
                inbuf: *const u8,
                count: usize,
                t: Raw,
                out: *mut u8,
                out_len: usize,
                comm: Raw,
            ) -> Result<usize, MpiError> {
                let n = count_i32(count)?;
                let mut pos = 0i64;
                // SAFETY: the caller's guarantee.
                check(unsafe {
                    ngc_pack(
                        inbuf.cast(),
                        n,
                        t,
                        out.cast(),
                        out_len as i64,
                        &mut pos,
                        comm,
                    )
                })?;
                Ok(pos.max(0) as usize)
            }
            unsafe fn unpack(
                &self,
                inbuf: *const u8,
                in_len: usize,
                out: *mut u8,
                count: usize,
                t: Raw,
                comm: Raw,
            ) -> Result<(), MpiError> {
                let n = count_i32(count)?;
                // SAFETY: the caller's guarantee.
                check(unsafe { ngc_unpack(inbuf.cast(), in_len as i64, out.cast(), n, t, comm) })
            }
            unsafe fn isend(
                &self,
                buf: *const u8,
                e: Envelope,
                slot: &mut Slot,
            ) -> Result<(), MpiError> {
                let (n, to) = e.ints()?;
                // SAFETY: the caller's guarantee; slot is a valid u64.
                check(unsafe { ngc_isend(buf.cast(), n, e.datatype, to, e.tag, e.comm, slot) })
            }
            unsafe fn irecv(&self, buf: *mut u8, e: Envelope, slot: &mut Slot) -> Result<(), MpiError> {
                let (n, from) = e.ints()?;
                // SAFETY: the caller's guarantee; slot is a valid u64.
                check(unsafe { ngc_irecv(buf.cast(), n, e.datatype, from, e.tag, e.comm, slot) })
            }
            fn waitall(&self, slots: &mut [Slot], polite: bool) -> Result<(), MpiError> {
                let n = count_i32(slots.len())?;
                // SAFETY: slots holds n requests posted by isend/irecv.
                check(unsafe { ngc_waitall(slots.as_mut_ptr(), n, c_int::from(polite)) })
            }
            fn allgather_bytes(
                &self,
                send: &[u8],
                recv: &mut [u8],
                comm: Raw,
            ) -> Result<(), MpiError> {
                let n = count_i32(send.len())?;
                // SAFETY: recv holds size × n bytes (the caller sizes it).
                check(unsafe {
                    ngc_allgather_bytes(send.as_ptr().cast(), n, recv.as_mut_ptr().cast(), comm)
                })
            }
            fn allreduce_min(&self, v: i32, comm: Raw) -> Result<i32, MpiError> {
                let mut out = 0;
                // SAFETY: out is a valid out-pointer.
                check(unsafe { ngc_allreduce_min_int(v, &mut out, comm) })?;
                Ok(out)
            }
            fn allreduce_sum_f64x2(&self, v: [f64; 2], comm: Raw) -> Result<[f64; 2], MpiError> {
                let mut out = [0.0; 2];
                // SAFETY: both point at two doubles.
                check(unsafe { ngc_allreduce_sum_double2(v.as_ptr(), out.as_mut_ptr(), comm) })?;
                Ok(out)
            }
            fn bcast_bytes(&self, buf: &mut [u8], root: usize, comm: Raw) -> Result<(), MpiError> {
                let n = count_i32(buf.len())?;
                let r = count_i32(root)?;
                // SAFETY: buf holds n bytes.
                check(unsafe { ngc_bcast_bytes(buf.as_mut_ptr().cast(), n, r, comm) })
            }
            fn library_version(&self) -> String {
                let mut buf = [0 as c_char; 8192];
                // SAFETY: buf holds 8192 bytes; the shim NUL-terminates.
                if unsafe { ngc_library_version(buf.as_mut_ptr(), buf.len() as c_int) } != 0 {
                    return String::new();
                }
                // SAFETY: NUL-terminated by the shim.
                unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            }
            fn abi_name(&self) -> &'static str {
                $abi
            }
            fn thread_multiple(&self) -> bool {
                // SAFETY: no arguments.
                unsafe { ngc_thread_multiple() != 0 }
            }
            fn comm_dup_forced(
                &self,
                comm: Raw,
                cvars: &[(String, i32)],
            ) -> (Option<Raw>, Result<(), MpiError>) {
                let names: Vec<std::ffi::CString> = cvars
                    .iter()
                    .filter_map(|(n, _)| std::ffi::CString::new(n.as_str()).ok())
                    .collect();
                let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
                let values: Vec<c_int> = cvars.iter().map(|&(_, v)| v).collect();
                let n = if names.len() == cvars.len() {
                    ptrs.len()
                } else {
                    0
                };
                let mut out = 0usize;
                // SAFETY: n names (NUL-terminated) and n values; out is a
                // valid out-pointer.
                let rc = unsafe {
                    ngc_comm_dup_forced(comm, n as c_int, ptrs.as_ptr(), values.as_ptr(), &mut out)
                };
                // SAFETY: no arguments.
                let null = unsafe { ngc_comm_null() };
                let dup = (out != null && out != 0).then_some(out);
                let forced = if names.len() != cvars.len() {
                    Err(MpiError(-1))
                } else {
                    check(rc)
                };
                (dup, forced)
            }
            fn library_algorithms(&self) -> bool {
                // The algorithm numbers are Open MPI 4.1's coll/tuned's.
                if $abi != "openmpi" || !self.library_version().contains("Open MPI v4.1") {
                    return false;
                }
                // MPI_T held open first: each read would open and close it.
                // SAFETY: no arguments.
                unsafe { ngc_tools_hold() };
                let read = |name: &std::ffi::CStr| {
                    let mut v: c_int = -1;
                    // SAFETY: a NUL-terminated name; v a valid out-pointer.
                    (unsafe { ngc_cvar_read_int(name.as_ptr(), &mut v) } == 0).then_some(v)
                };
                // Dynamic rules on, no rules file, and no algorithm forced
                // for the whole process (the library's own choice is then
                // its fixed decision, as the model has it).
                let ok = read(c"coll_tuned_use_dynamic_rules") == Some(1)
                    // SAFETY: a NUL-terminated name.
                    && unsafe { ngc_cvar_string_empty(c"coll_tuned_dynamic_rules_filename".as_ptr()) } == 1
                    && [
                        c"coll_tuned_bcast_algorithm",
                        c"coll_tuned_reduce_algorithm",
                        c"coll_tuned_allreduce_algorithm",
                        c"coll_tuned_allgather_algorithm",
                        c"coll_tuned_alltoall_algorithm",
                        c"coll_tuned_barrier_algorithm",
                    ]
                    .iter()
                    .all(|n| read(n) == Some(0));
                if !ok {
                    // SAFETY: no arguments.
                    unsafe { ngc_tools_release() };
                }
                ok
            }
            fn release_tools(&self) {
                // SAFETY: no arguments.
                unsafe { ngc_tools_release() }
            }
            fn call_errhandler(&self, comm: Raw, code: i32) -> i32 {
                // SAFETY: a communicator of the program's, and its error.
                unsafe { ngc_comm_call_errhandler(comm, code) }
            }
        }

        /// MPI_Init: the library's, then libngcoll's setup.
        ///
        /// # Safety
        /// As MPI_Init.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
            $crate::runtime::before_init(&Shim);
            // SAFETY: the caller's arguments, unchanged.
            let rc = unsafe { PMPI_Init(argc, argv) };
            $crate::fortran::after_init(&Shim, rc);
            rc
        }

        /// MPI_Init_thread: the library's, then libngcoll's setup.
        ///
        /// # Safety
        /// As MPI_Init_thread.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init_thread(
            argc: *mut c_int,
            argv: *mut *mut *mut c_char,
            required: c_int,
            provided: *mut c_int,
        ) -> c_int {
            $crate::runtime::before_init(&Shim);
            // SAFETY: the caller's arguments, unchanged.
            let rc = unsafe { PMPI_Init_thread(argc, argv, required, provided) };
            $crate::fortran::after_init(&Shim, rc);
            rc
        }

        /// MPI_Finalize: libngcoll's log and cleanup, then the library's.
        ///
        /// # Safety
        /// As MPI_Finalize.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Finalize() -> c_int {
            $crate::runtime::finalize(&Shim);
            // SAFETY: no arguments.
            unsafe { PMPI_Finalize() }
        }

        /// MPI_Comm_free: the communicator's shadow first.
        ///
        /// # Safety
        /// As MPI_Comm_free.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Comm_free(comm: *mut $h) -> c_int {
            if !comm.is_null() {
                // SAFETY: a valid pointer to the caller's handle.
                $crate::runtime::comm_free(&Shim, unsafe { *comm }.bits());
            }
            // SAFETY: the caller's argument, unchanged.
            unsafe { PMPI_Comm_free(comm) }
        }

        /// MPI_Comm_disconnect frees the communicator as MPI_Comm_free does
        /// (its attributes' delete callbacks run inside): the shadow first,
        /// disconnected too.
        ///
        /// # Safety
        /// As MPI_Comm_disconnect.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Comm_disconnect(comm: *mut $h) -> c_int {
            if !comm.is_null() {
                // SAFETY: a valid pointer to the caller's handle.
                $crate::runtime::comm_disconnect(&Shim, unsafe { *comm }.bits());
            }
            // SAFETY: the caller's argument, unchanged.
            unsafe { PMPI_Comm_disconnect(comm) }
        }

        /// # Safety
        /// As MPI_Bcast.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Bcast(
            buf: *mut c_void,
            count: c_int,
            datatype: $h,
            root: c_int,
            comm: $h,
        ) -> c_int {
            // SAFETY: the caller's arguments; the closure is the library's
            // own call with them.
            unsafe {
                $crate::entry::bcast(
                    &Shim,
                    buf,
                    count,
                    datatype.bits(),
                    root,
                    comm.bits(),
                    |c: usize| PMPI_Bcast(buf, count, datatype, root, <$h>::from_bits(c)),
                )
            }
        }

        $crate::reduce_entry!($h, MPI_Reduce, PMPI_Reduce, (root));
        $crate::reduce_entry!($h, MPI_Allreduce, PMPI_Allreduce, ());
        $crate::block_entry!($h, MPI_Allgather, PMPI_Allgather, Allgather);
        $crate::block_entry!($h, MPI_Alltoall, PMPI_Alltoall, Alltoall);

        /// # Safety
        /// As MPI_Barrier.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Barrier(comm: $h) -> c_int {
            // SAFETY: the library's own call with the caller's argument.
            $crate::entry::barrier(&Shim, comm.bits(), |c: usize| unsafe {
                PMPI_Barrier(<$h>::from_bits(c))
            })
        }

        /// The decision an MPI collective `coll` (`NG_COLL_*`) of `count` ×
        /// `datatype` on `comm` would take, without running it: an
        /// `NG_ALG_*` value, from `plan::LIBRARY_ALG` on another of the
        /// library's algorithms, or -1 for the library's own. The first call on
        /// a communicator sets it up (collective, as its first collective).
        ///
        /// # Safety
        /// Valid handles.
        #[no_mangle]
        pub unsafe extern "C" fn ngcoll_decide(
            coll: u32,
            count: c_int,
            datatype: $h,
            comm: $h,
        ) -> i64 {
            match $crate::netgauge::select::Collective::from_u32(coll) {
                Some(c) => $crate::entry::decide(&Shim, c, count, datatype.bits(), comm.bits()),
                None => -1,
            }
        }

        /// Which MPI this library was built for: 1 Open MPI, 2 MPICH.
        #[no_mangle]
        pub extern "C" fn ngcoll_abi() -> c_int {
            // SAFETY: no arguments.
            unsafe { ngc_abi() }
        }
    };
}
