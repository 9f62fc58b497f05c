//! Fortran callers: the entry points a Fortran MPI program calls, where its
//! MPI library's Fortran bindings would bypass the interposed C ones.
//!
//! Which Fortran calls reach libngcoll's C entry points depends on how the
//! library's bindings are written (read from the Debian builds' symbols):
//! - Open MPI 4.1: every binding (`mpif.h`, `use mpi`, `use mpi_f08`)
//!   converts its arguments and calls the `PMPI_` function, so a Fortran
//!   program reaches none of them. The ABI crate interposes the Fortran
//!   names of MPI_Init, MPI_Init_thread, MPI_Finalize, MPI_Comm_free,
//!   MPI_Comm_disconnect and the six collectives, in both flavours
//!   (`mpi_bcast_`, `mpi_bcast_f08_`).
//! - MPICH 4.0: `mpif.h` and `use mpi` call the `MPI_` names (interposed
//!   already), and so do the `use mpi_f08` collectives that take buffers;
//!   the `use mpi_f08` MPI_Init, MPI_Init_thread, MPI_Finalize,
//!   MPI_Comm_free, MPI_Comm_disconnect and MPI_Barrier call `PMPI_`: those
//!   six are interposed.
//!
//! The names are gfortran's (lower case, one trailing underscore), which the
//! other Linux Fortran compilers use by default too; a program built with
//! another mangling passes through, as before.
//!
//! The collectives convert the Fortran arguments as the library's own
//! bindings do (handles through `MPI_*_f2c`, Open MPI's `MPI_IN_PLACE` and
//! `MPI_BOTTOM` sentinels to the C values) and call the crate's C entry
//! point, so a Fortran call takes the same path, gate included, as a C
//! one. Init, finalize and the communicator releases call the library's own
//! Fortran function of the same name (found with `dlsym(RTLD_NEXT)`), which
//! does the Fortran-side work this layer must not redo, with libngcoll's
//! part before or after it as the C entry points do.
//!
//! Arguments come by reference, as Fortran passes them; `use mpi_f08`'s
//! handle types hold one `INTEGER` (its address is the handle's), and its
//! optional `ierror` is a null pointer when the caller left it out.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The library's own definition of one Fortran entry point: the next
/// object's symbol of that name after libngcoll, looked up once.
pub struct Next {
    name: &'static CStr,
    addr: AtomicUsize,
}

/// MPI_Init's and MPI_Finalize's Fortran signature: `(ierror)`.
type FnErr = unsafe extern "C" fn(*mut c_int);
/// MPI_Comm_free's and MPI_Comm_disconnect's: `(comm, ierror)`.
type FnCommErr = unsafe extern "C" fn(*mut c_int, *mut c_int);
/// MPI_Init_thread's: `(required, provided, ierror)`.
type FnInitThread = unsafe extern "C" fn(*const c_int, *mut c_int, *mut c_int);

impl Next {
    /// `name`: the symbol, NUL-terminated.
    pub const fn new(name: &'static CStr) -> Next {
        Next {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The address of the library's definition, or None (with one line
    /// on stderr) if no object after libngcoll defines the name — which a
    /// program that linked against the library's Fortran bindings cannot
    /// meet.
    fn addr(&self) -> Option<usize> {
        let cached = self.addr.load(Ordering::Acquire);
        if cached != 0 {
            return Some(cached);
        }
        // SAFETY: a NUL-terminated name; RTLD_NEXT searches the objects
        // loaded after the one this code is in (libngcoll).
        let a = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) } as usize;
        if a == 0 {
            eprintln!(
                "ngcoll: {} is not defined by the MPI library; the call fails",
                self.name.to_string_lossy()
            );
            return None;
        }
        self.addr.store(a, Ordering::Release);
        Some(a)
    }

    /// The library's definition as a function of type `F`.
    ///
    /// # Safety
    /// `self` names a function whose Fortran signature `F` is.
    unsafe fn get<F: Copy>(&self) -> Option<F> {
        let a = self.addr()?;
        // SAFETY: an address returned by dlsym, of a function of type F
        // (the caller's guarantee); F is a function pointer, as wide as it.
        Some(unsafe { std::mem::transmute_copy::<usize, F>(&a) })
    }

    /// Calls the library's `(ierror)` function; its error code, or `err`
    /// if it is missing.
    ///
    /// # Safety
    /// `self` names a function with MPI_Init's or MPI_Finalize's Fortran
    /// signature.
    pub unsafe fn call_err(&self, err: c_int) -> c_int {
        // SAFETY: the caller's guarantee on the symbol's signature.
        let Some(f) = (unsafe { self.get::<FnErr>() }) else {
            return err;
        };
        let mut rc = 0;
        // SAFETY: the caller's pointers; rc is a valid out-pointer.
        unsafe { f(&mut rc) };
        rc
    }

    /// Calls the library's `(comm, ierror)` function with the caller's
    /// handle (which it may overwrite, as MPI_Comm_free does).
    ///
    /// # Safety
    /// `self` names a function with MPI_Comm_free's Fortran signature;
    /// `comm` points to a Fortran communicator handle.
    pub unsafe fn call_comm(&self, comm: *mut c_int, err: c_int) -> c_int {
        // SAFETY: the caller's guarantee on the symbol's signature.
        let Some(f) = (unsafe { self.get::<FnCommErr>() }) else {
            return err;
        };
        let mut rc = 0;
        // SAFETY: the caller's pointers; rc is a valid out-pointer.
        unsafe { f(comm, &mut rc) };
        rc
    }

    /// Calls the library's MPI_Init_thread.
    ///
    /// # Safety
    /// `self` names a function with MPI_Init_thread's Fortran signature;
    /// the pointers are the caller's.
    pub unsafe fn call_init_thread(
        &self,
        required: *const c_int,
        provided: *mut c_int,
        err: c_int,
    ) -> c_int {
        // SAFETY: the caller's guarantee on the symbol's signature.
        let Some(f) = (unsafe { self.get::<FnInitThread>() }) else {
            return err;
        };
        let mut rc = 0;
        // SAFETY: the caller's pointers; rc is a valid out-pointer.
        unsafe { f(required, provided, &mut rc) };
        rc
    }
}

/// Stores an error code where the caller asked for it (`use mpi_f08`'s
/// `ierror` is optional: null when left out).
///
/// # Safety
/// `ierr` is null or points to an `INTEGER`.
#[inline]
pub unsafe fn set_ierr(ierr: *mut c_int, rc: c_int) {
    if !ierr.is_null() {
        // SAFETY: the caller's guarantee.
        unsafe { *ierr = rc };
    }
}

/// The Fortran `MPI_IN_PLACE` and `MPI_BOTTOM` of Open MPI: addresses of
/// common blocks, under each compiler's mangling of their names (the
/// program's copy, where the program has one, is the one every reference
/// binds to).
const IN_PLACE_NAMES: [&CStr; 4] = [
    c"mpi_fortran_in_place_",
    c"mpi_fortran_in_place",
    c"mpi_fortran_in_place__",
    c"MPI_FORTRAN_IN_PLACE",
];
const BOTTOM_NAMES: [&CStr; 4] = [
    c"mpi_fortran_bottom_",
    c"mpi_fortran_bottom",
    c"mpi_fortran_bottom__",
    c"MPI_FORTRAN_BOTTOM",
];

static IN_PLACE: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];
static BOTTOM: [AtomicUsize; 4] = [const { AtomicUsize::new(0) }; 4];

fn lookup(name: &CStr) -> usize {
    // SAFETY: a NUL-terminated name; RTLD_DEFAULT searches the global
    // scope, where the program and its MPI libraries are.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr() as *const c_char) as usize }
}

/// Finds the Fortran sentinels ([`after_init`]: at MPI_Init and
/// MPI_Init_thread, C or Fortran; a program whose MPI has no Fortran
/// bindings loaded finds none, and no buffer is then converted).
fn at_init() {
    for (slot, name) in IN_PLACE.iter().zip(IN_PLACE_NAMES) {
        slot.store(lookup(name), Ordering::Relaxed);
    }
    for (slot, name) in BOTTOM.iter().zip(BOTTOM_NAMES) {
        slot.store(lookup(name), Ordering::Relaxed);
    }
}

/// MPI_Init's and MPI_Init_thread's part (C or Fortran) after the
/// library's returned `rc`: on success, the Fortran sentinels and
/// libngcoll's start.
pub fn after_init<M: crate::mpi::Mpi + ?Sized>(m: &M, rc: c_int) {
    if rc == 0 {
        at_init();
        crate::runtime::init(m);
    }
}

#[inline]
fn is_one_of(p: usize, set: &[AtomicUsize; 4]) -> bool {
    p != 0 && set.iter().any(|a| a.load(Ordering::Relaxed) == p)
}

/// A receive buffer from Fortran: `MPI_BOTTOM` becomes C's (`bottom`).
#[inline]
pub fn recv_buf(p: *mut c_void, bottom: usize) -> *mut c_void {
    if is_one_of(p as usize, &BOTTOM) {
        bottom as *mut c_void
    } else {
        p
    }
}

/// A send buffer from Fortran: `MPI_IN_PLACE` and `MPI_BOTTOM` become
/// C's (`in_place`, `bottom`).
#[inline]
pub fn send_buf(p: *const c_void, in_place: usize, bottom: usize) -> *const c_void {
    if is_one_of(p as usize, &IN_PLACE) {
        in_place as *const c_void
    } else {
        recv_buf(p as *mut c_void, bottom) as *const c_void
    }
}

/// Within an ABI crate, after [`export_mpi!`](crate::export_mpi): one
/// Fortran entry point. `init NAME`, `init_thread NAME`, `finalize NAME`,
/// `comm_free NAME`, `comm_disconnect NAME` wrap the library's own Fortran
/// function `NAME`; `bcast`, `reduce`, `allreduce`, `allgather`,
/// `alltoall`, `barrier NAME` convert the arguments and call the C entry
/// point. See the module documentation for which an ABI needs.
#[macro_export]
macro_rules! fortran_entry {
    (init $name:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ierr: *mut c_int) {
            static NEXT: $crate::fortran::Next = $crate::fortran::Next::new($crate::fortran_cname!($name));
            $crate::runtime::before_init(&Shim);
            // SAFETY: the library's MPI_Init binding of this name.
            let rc = unsafe { NEXT.call_err(ngc_err_intern()) };
            $crate::fortran::after_init(&Shim, rc);
            // SAFETY: the caller's ierror.
            unsafe { $crate::fortran::set_ierr(ierr, rc) };
        }
    };
    (init_thread $name:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(required: *const c_int, provided: *mut c_int, ierr: *mut c_int) {
            static NEXT: $crate::fortran::Next = $crate::fortran::Next::new($crate::fortran_cname!($name));
            $crate::runtime::before_init(&Shim);
            // SAFETY: the library's MPI_Init_thread binding of this name,
            // with the caller's arguments.
            let rc = unsafe { NEXT.call_init_thread(required, provided, ngc_err_intern()) };
            $crate::fortran::after_init(&Shim, rc);
            // SAFETY: the caller's ierror.
            unsafe { $crate::fortran::set_ierr(ierr, rc) };
        }
    };
    (finalize $name:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(ierr: *mut c_int) {
            static NEXT: $crate::fortran::Next = $crate::fortran::Next::new($crate::fortran_cname!($name));
            $crate::runtime::finalize(&Shim);
            // SAFETY: the library's MPI_Finalize binding of this name.
            let rc = unsafe { NEXT.call_err(ngc_err_intern()) };
            // SAFETY: the caller's ierror.
            unsafe { $crate::fortran::set_ierr(ierr, rc) };
        }
    };
    (comm_free $name:ident) => {
        $crate::fortran_entry!(@release $name, comm_free);
    };
    (comm_disconnect $name:ident) => {
        $crate::fortran_entry!(@release $name, comm_disconnect);
    };
    (@release $name:ident, $release:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(comm: *mut c_int, ierr: *mut c_int) {
            static NEXT: $crate::fortran::Next = $crate::fortran::Next::new($crate::fortran_cname!($name));
            if !comm.is_null() {
                // SAFETY: a valid pointer to the caller's handle.
                $crate::runtime::$release(&Shim, unsafe { ngc_f_comm(*comm) });
            }
            // SAFETY: the library's binding of this name, with the
            // caller's handle.
            let rc = unsafe { NEXT.call_comm(comm, ngc_err_intern()) };
            // SAFETY: the caller's ierror.
            unsafe { $crate::fortran::set_ierr(ierr, rc) };
        }
    };
    (bcast $name:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            buf: *mut c_void,
            count: *const c_int,
            datatype: *const c_int,
            root: *const c_int,
            comm: *const c_int,
            ierr: *mut c_int,
        ) {
            // SAFETY: the caller's arguments, converted as the library's
            // own binding converts them.
            unsafe {
                let rc = MPI_Bcast(
                    $crate::fortran::recv_buf(buf, ngc_bottom()),
                    *count,
                    $crate::export::Handle::from_bits(ngc_f_type(*datatype)),
                    *root,
                    $crate::export::Handle::from_bits(ngc_f_comm(*comm)),
                );
                $crate::fortran::set_ierr(ierr, rc);
            }
        }
    };
    (reduce $name:ident) => {
        $crate::fortran_entry!(@reduction $name, MPI_Reduce, (root));
    };
    (allreduce $name:ident) => {
        $crate::fortran_entry!(@reduction $name, MPI_Allreduce, ());
    };
    (@reduction $name:ident, $c:ident, ($($root:ident)?)) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sbuf: *const c_void,
            rbuf: *mut c_void,
            count: *const c_int,
            datatype: *const c_int,
            op: *const c_int,
            $($root: *const c_int,)?
            comm: *const c_int,
            ierr: *mut c_int,
        ) {
            // SAFETY: the caller's arguments, converted as the library's
            // own binding converts them.
            unsafe {
                let rc = $c(
                    $crate::fortran::send_buf(sbuf, ngc_in_place(), ngc_bottom()),
                    $crate::fortran::recv_buf(rbuf, ngc_bottom()),
                    *count,
                    $crate::export::Handle::from_bits(ngc_f_type(*datatype)),
                    $crate::export::Handle::from_bits(ngc_f_op(*op)),
                    $(*$root,)?
                    $crate::export::Handle::from_bits(ngc_f_comm(*comm)),
                );
                $crate::fortran::set_ierr(ierr, rc);
            }
        }
    };
    (allgather $name:ident) => {
        $crate::fortran_entry!(@block $name, MPI_Allgather);
    };
    (alltoall $name:ident) => {
        $crate::fortran_entry!(@block $name, MPI_Alltoall);
    };
    (@block $name:ident, $c:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            sbuf: *const c_void,
            scount: *const c_int,
            stype: *const c_int,
            rbuf: *mut c_void,
            rcount: *const c_int,
            rtype: *const c_int,
            comm: *const c_int,
            ierr: *mut c_int,
        ) {
            // SAFETY: the caller's arguments, converted as the library's
            // own binding converts them.
            unsafe {
                let rc = $c(
                    $crate::fortran::send_buf(sbuf, ngc_in_place(), ngc_bottom()),
                    *scount,
                    $crate::export::Handle::from_bits(ngc_f_type(*stype)),
                    $crate::fortran::recv_buf(rbuf, ngc_bottom()),
                    *rcount,
                    $crate::export::Handle::from_bits(ngc_f_type(*rtype)),
                    $crate::export::Handle::from_bits(ngc_f_comm(*comm)),
                );
                $crate::fortran::set_ierr(ierr, rc);
            }
        }
    };
    (barrier $name:ident) => {
        /// # Safety
        /// As the MPI Fortran binding of this name.
        #[no_mangle]
        pub unsafe extern "C" fn $name(comm: *const c_int, ierr: *mut c_int) {
            // SAFETY: the caller's handle, converted as the library's own
            // binding converts it.
            unsafe {
                let rc = MPI_Barrier($crate::export::Handle::from_bits(ngc_f_comm(*comm)));
                $crate::fortran::set_ierr(ierr, rc);
            }
        }
    };
}

/// The NUL-terminated name of a Fortran entry point.
#[doc(hidden)]
#[macro_export]
macro_rules! fortran_cname {
    ($name:ident) => {
        match ::std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("a Rust identifier has no NUL"),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_become_the_c_values_and_other_buffers_stay() {
        let in_place = 0x1000usize;
        let bottom = 0x2000usize;
        IN_PLACE[2].store(in_place, Ordering::Relaxed);
        BOTTOM[0].store(bottom, Ordering::Relaxed);
        // Stand-ins for C's MPI_IN_PLACE and MPI_BOTTOM, unlike any buffer here.
        let (c_in_place, c_bottom) = (1usize, 9usize);
        let send = |p: usize| send_buf(p as *const c_void, c_in_place, c_bottom) as usize;
        let recv = |p: usize| recv_buf(p as *mut c_void, c_bottom) as usize;
        assert_eq!(send(in_place), c_in_place);
        assert_eq!(send(bottom), c_bottom);
        assert_eq!(send(0x3000), 0x3000);
        // A receive buffer is never MPI_IN_PLACE: left as it is.
        assert_eq!(recv(in_place), in_place);
        assert_eq!(recv(bottom), c_bottom);
        // Null is no sentinel, even where a name was not found (0).
        assert_eq!(send(0), 0);
        assert_eq!(recv(0), 0);
    }
}
