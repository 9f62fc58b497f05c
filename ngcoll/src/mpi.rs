//! What libngcoll needs from an MPI library, independent of its ABI.
//!
//! The per-ABI crates (`ngcoll/openmpi`, `ngcoll/mpich`) implement [`Mpi`]
//! over the C shim (`shim/ngcoll_shim.c`), which they compile with that
//! MPI's `mpicc`; the unit tests implement it over threads
//! (`fake.rs`). Handles travel as [`Raw`]: the bits of an Open MPI pointer
//! or of an MPICH integer.

use std::ffi::c_void;

/// The bits of an MPI handle (communicator, datatype, operation).
pub type Raw = usize;

/// One MPI_Request, opaque (both ABIs' requests fit in 8 bytes).
pub type Slot = u64;

/// An MPI error code returned by a PMPI_ call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MPI error code {0}")]
pub struct MpiError(pub i32);

/// MPI_SUCCESS in both ABIs.
pub const MPI_SUCCESS: i32 = 0;
/// MPI_ERR_COUNT's class in both ABIs' numbering is different; the shim's
/// callers only need "some error": this one is returned for a count that
/// does not fit the C `int` of the MPI call.
pub const ERR_COUNT: MpiError = MpiError(2);

/// Turns a PMPI_ return code into a Result.
#[inline]
pub fn check(rc: i32) -> Result<(), MpiError> {
    if rc == MPI_SUCCESS {
        Ok(())
    } else {
        Err(MpiError(rc))
    }
}

/// A count for an MPI call (C `int`).
#[inline]
pub fn count_i32(n: usize) -> Result<i32, MpiError> {
    i32::try_from(n).map_err(|_| ERR_COUNT)
}

/// A point-to-point message's extent and envelope: `count` elements of
/// `datatype`, to or from rank `peer` of `comm`, with `tag`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub count: usize,
    pub datatype: Raw,
    pub peer: usize,
    pub tag: i32,
    pub comm: Raw,
}

impl Envelope {
    /// The count and the peer as the C `int`s of an MPI call.
    #[inline]
    pub fn ints(&self) -> Result<(i32, i32), MpiError> {
        Ok((count_i32(self.count)?, count_i32(self.peer)?))
    }
}

/// What a datatype looks like in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Bytes of data in one element (MPI_Type_size).
    pub size: usize,
    /// Stride of consecutive elements (MPI_Type_get_extent).
    pub extent: usize,
    /// Where an element's data ends, from its address (true lower bound +
    /// true extent): beyond `size` where the data has a hole, as
    /// MPI_SHORT_INT's (6 bytes of data, the int at offset 4, ending at 8).
    pub data_end: usize,
    /// One element is `size` bytes at its address, in its type map's order,
    /// and elements follow each other without gaps: `count` elements are
    /// one byte range, sent as it lies.
    pub contiguous: bool,
    /// A named (predefined) datatype.
    pub predefined: bool,
    /// Its group for the predefined reduction operations (predefined
    /// types only; `Other` for any other).
    pub class: TypeClass,
}

/// The groups of predefined datatypes the MPI standard names for the
/// predefined reduction operations (MPI 3.1, 5.9.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeClass {
    /// Not one of the groups below (MPI_CHAR, MPI_PACKED, a derived type…).
    Other,
    CInteger,
    FortranInteger,
    Float,
    Complex,
    Logical,
    Byte,
    /// MPI_2INT, MPI_SHORT_INT, MPI_LONG_INT, MPI_2INTEGER.
    IntPair,
    /// MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT, MPI_2REAL,
    /// MPI_2DOUBLE_PRECISION.
    FloatPair,
}

impl TypeClass {
    /// Every group, at the index of its code in the shim (`type_class` in
    /// ngcoll_shim.c).
    pub const ALL: [TypeClass; 9] = [
        TypeClass::Other,
        TypeClass::CInteger,
        TypeClass::FortranInteger,
        TypeClass::Float,
        TypeClass::Complex,
        TypeClass::Logical,
        TypeClass::Byte,
        TypeClass::IntPair,
        TypeClass::FloatPair,
    ];

    /// The group of the shim's code (`Other` for one it does not know).
    pub fn from_code(c: i32) -> TypeClass {
        usize::try_from(c)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
            .unwrap_or(TypeClass::Other)
    }

    /// Whether the predefined operation of kind `op` (`Mpi::op_kind`: 1
    /// SUM, 2 PROD, 3 MAX, 4 MIN, 5 LAND, 6 LOR, 7 LXOR, 8 BAND, 9 BOR,
    /// 10 BXOR, 11 MAXLOC, 12 MINLOC) is defined on this group. Where it
    /// is not, the call is erroneous and goes to the library, which
    /// reports it on every rank (combined by ours, only the ranks that
    /// combine would fail, and their parents would wait).
    pub fn takes(self, op: u32) -> bool {
        use TypeClass::*;
        match op {
            1 | 2 => matches!(self, CInteger | FortranInteger | Float | Complex),
            3 | 4 => matches!(self, CInteger | FortranInteger | Float),
            5..=7 => matches!(self, CInteger | Logical),
            8..=10 => matches!(self, CInteger | FortranInteger | Byte),
            11 | 12 => matches!(self, IntPair | FloatPair),
            _ => false,
        }
    }

    /// a ⊕ b and b ⊕ a are the same bits under every operation defined on
    /// the group: not floating point, where MAX or MIN of a NaN, or of −0
    /// and +0, depends on the order.
    pub fn either_order(self) -> bool {
        use TypeClass::*;
        matches!(self, CInteger | FortranInteger | Logical | Byte | IntPair)
    }
}

/// The operations of the MPI library libngcoll uses. Every method maps to
/// one PMPI_ call (or a loop of them) of the library the process runs on.
///
/// # Safety
/// Implementations pass pointers straight to MPI; the `unsafe` methods'
/// callers guarantee that buffers are valid for the count and datatype
/// given until the request completes.
pub trait Mpi {
    fn comm_world(&self) -> Raw;
    fn type_byte(&self) -> Raw;
    /// The bits of MPI_IN_PLACE as a buffer address.
    fn in_place(&self) -> usize;

    fn comm_size(&self, comm: Raw) -> Result<usize, MpiError>;
    fn comm_rank(&self, comm: Raw) -> Result<usize, MpiError>;
    fn comm_is_inter(&self, comm: Raw) -> Result<bool, MpiError>;
    fn comm_dup(&self, comm: Raw) -> Result<Raw, MpiError>;
    fn comm_free(&self, comm: Raw) -> Result<(), MpiError>;
    /// MPI_Comm_disconnect (a shadow of a communicator the program
    /// disconnects: its processes must come apart as the program's do).
    fn comm_disconnect(&self, comm: Raw) -> Result<(), MpiError> {
        self.comm_free(comm)
    }
    /// A duplicate of `comm` made while the library's integer control
    /// variables `cvars` (MPI_T) hold the values given, each given its old
    /// value back afterwards: under Open MPI with coll/tuned's dynamic
    /// rules, a communicator whose collectives run the forced algorithm.
    /// Collective: the duplicate is made on every rank whatever the
    /// variables did (None if the library refused it); the second part
    /// says whether they were written (a library without them: an error).
    fn comm_dup_forced(
        &self,
        comm: Raw,
        cvars: &[(String, i32)],
    ) -> (Option<Raw>, Result<(), MpiError>) {
        let _ = cvars;
        (self.comm_dup(comm).ok(), Err(MpiError(-1)))
    }
    /// Whether this library runs an algorithm forced on a communicator by
    /// [`Mpi::comm_dup_forced`] as the model has it (Open MPI 4.1 with
    /// coll/tuned's dynamic rules on, no rules file, which would take
    /// precedence, and no algorithm forced for the whole process).
    fn library_algorithms(&self) -> bool {
        false
    }
    /// Lets go of what [`Mpi::library_algorithms`] held open for the
    /// forced duplicates (MPI_T), at MPI_Finalize.
    fn release_tools(&self) {}
    /// Hands the error `code` of a call made on one of libngcoll's
    /// duplicates (whose errors return) to the program's communicator
    /// `comm`, as the library would have: its error handler runs. Returns
    /// `code`.
    fn call_errhandler(&self, comm: Raw, code: i32) -> i32 {
        let _ = comm;
        code
    }
    /// World ranks of the ranks 0..out.len() of `comm`.
    fn world_ranks(&self, comm: Raw, out: &mut [i32]) -> Result<(), MpiError>;

    /// A keyval whose attributes are released by `free` when their
    /// communicator is freed (and not copied to duplicates).
    fn keyval_create(&self, free: extern "C" fn(*mut c_void)) -> Result<i32, MpiError>;
    fn attr_get(&self, comm: Raw, keyval: i32) -> Result<Option<*mut c_void>, MpiError>;
    fn attr_set(&self, comm: Raw, keyval: i32, val: *mut c_void) -> Result<(), MpiError>;

    fn type_info(&self, datatype: Raw) -> Result<TypeInfo, MpiError>;
    /// 0 for an operation the algorithms do not run (user-defined,
    /// MPI_REPLACE, MPI_NO_OP), else a predefined reduction (all commute).
    fn op_kind(&self, op: Raw) -> u32;

    /// inout[i] = in[i] op inout[i] for `count` elements.
    ///
    /// # Safety
    /// Both buffers valid for `count` elements of `datatype`.
    unsafe fn reduce_local(
        &self,
        inbuf: *const u8,
        inout: *mut u8,
        count: usize,
        datatype: Raw,
        op: Raw,
    ) -> Result<(), MpiError>;

    /// Packs `count` elements into `out`; returns the bytes written.
    ///
    /// # Safety
    /// `inbuf` valid for `count` elements of `datatype`, `out` for
    /// `out_len` bytes.
    unsafe fn pack(
        &self,
        inbuf: *const u8,
        count: usize,
        datatype: Raw,
        out: *mut u8,
        out_len: usize,
        comm: Raw,
    ) -> Result<usize, MpiError>;

    /// Unpacks `count` elements from `inbuf` (`in_len` bytes).
    ///
    /// # Safety
    /// As for [`Mpi::pack`], the other way round.
    unsafe fn unpack(
        &self,
        inbuf: *const u8,
        in_len: usize,
        out: *mut u8,
        count: usize,
        datatype: Raw,
        comm: Raw,
    ) -> Result<(), MpiError>;

    /// Posts a send of `buf` as `env` describes.
    ///
    /// # Safety
    /// `buf` valid for `env.count` elements until the request completes.
    unsafe fn isend(&self, buf: *const u8, env: Envelope, slot: &mut Slot) -> Result<(), MpiError>;

    /// Posts a receive into `buf` as `env` describes.
    ///
    /// # Safety
    /// As for [`Mpi::isend`], writable.
    unsafe fn irecv(&self, buf: *mut u8, env: Envelope, slot: &mut Slot) -> Result<(), MpiError>;

    /// Completes the requests. `polite`: give the core away between polls
    /// (ranks that share cores).
    fn waitall(&self, slots: &mut [Slot], polite: bool) -> Result<(), MpiError>;

    /// The setup collectives (called at MPI_Init and at a communicator's
    /// first collective, never per call).
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8], comm: Raw) -> Result<(), MpiError>;
    fn allreduce_min(&self, v: i32, comm: Raw) -> Result<i32, MpiError>;
    /// The element-wise sum of `v` over the ranks of `comm` (a trial's verdict).
    fn allreduce_sum_f64x2(&self, v: [f64; 2], comm: Raw) -> Result<[f64; 2], MpiError>;
    fn bcast_bytes(&self, buf: &mut [u8], root: usize, comm: Raw) -> Result<(), MpiError>;

    /// MPI_Get_library_version.
    fn library_version(&self) -> String;
    /// Whether several threads may call MPI at a time (the thread level
    /// provided is MPI_THREAD_MULTIPLE, or MPI could not say).
    fn thread_multiple(&self) -> bool;
    /// The MPI ABI this build was compiled for: "openmpi" or "mpich".
    fn abi_name(&self) -> &'static str;
}

#[cfg(test)]
mod tests {
    use super::TypeClass::{self, *};

    #[test]
    fn operations_are_taken_on_the_groups_the_standard_names() {
        // (op kind, groups that take it), MPI 3.1 5.9.2.
        let table: [(u32, &[TypeClass]); 12] = [
            (1, &[CInteger, FortranInteger, Float, Complex]),
            (2, &[CInteger, FortranInteger, Float, Complex]),
            (3, &[CInteger, FortranInteger, Float]),
            (4, &[CInteger, FortranInteger, Float]),
            (5, &[CInteger, Logical]),
            (6, &[CInteger, Logical]),
            (7, &[CInteger, Logical]),
            (8, &[CInteger, FortranInteger, Byte]),
            (9, &[CInteger, FortranInteger, Byte]),
            (10, &[CInteger, FortranInteger, Byte]),
            (11, &[IntPair, FloatPair]),
            (12, &[IntPair, FloatPair]),
        ];
        let all = TypeClass::ALL;
        for (op, takes) in table {
            for c in all {
                assert_eq!(c.takes(op), takes.contains(&c), "op {op} on {c:?}");
            }
        }
        assert!(all.iter().all(|c| !c.takes(0) && !c.takes(13)));
        // The shim's codes round-trip, unknown ones are Other.
        for (code, c) in all.iter().enumerate() {
            assert_eq!(TypeClass::from_code(code as i32), *c);
        }
        assert_eq!(TypeClass::from_code(99), Other);
        assert_eq!(TypeClass::from_code(-1), Other);
        assert!(!Float.either_order() && !FloatPair.either_order() && !Complex.either_order());
        assert!(CInteger.either_order() && IntPair.either_order() && Byte.either_order());
    }
}
