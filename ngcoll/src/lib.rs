//! libngcoll: MPI collectives chosen at run time from the parameters
//! netgauged publishes, for unmodified MPI programs (`LD_PRELOAD`, or
//! linking), through the PMPI profiling interface.
//!
//! At MPI_Init the library opens the segment once and learns which ranks
//! share a node; at a communicator's first collective its rank 0 prices,
//! for every collective and message-size class, our algorithms, the MPI
//! library's other algorithms (Open MPI's coll/tuned, which takes a forced
//! algorithm per communicator) and the library's own choice with the model
//! of `netgauge::select` (what a caller
//! sees: one synchronized call, each rank's own completion, calls back to
//! back from one root and with the root rotating) and takes another only where
//! it is predicted faster by more than a margin (and slower in no view by
//! more than half of it); the plan is
//! broadcast so every rank runs the same algorithm. A call then costs one
//! table lookup and runs the chosen algorithm on PMPI point-to-point calls
//! over a duplicate of the communicator, or the library's own collective
//! (on a duplicate made with the chosen one of its algorithms forced).
//!
//! - [`mpi`]: what the algorithms need from MPI ([`mpi::Mpi`]), written
//!   once for every ABI;
//! - [`algo`]: the algorithms; [`plan`]: the per-communicator decisions;
//! - [`runtime`]: the state set at MPI_Init and per communicator;
//! - [`gate`]: the two cache lines a call that passes through reads;
//! - [`trial`]: where the plan chose ours, each class's first calls time
//!   ours against the library's own, and the faster is kept;
//! - [`entry`]: the interposed collectives; [`export_mpi!`]: what an ABI
//!   crate (`ngcoll/openmpi` → `libngcoll_ompi.so`, `ngcoll/mpich` →
//!   `libngcoll_mpich.so`) expands to, over the C shim
//!   `shim/ngcoll_shim.c` compiled with that MPI's `mpicc`;
//! - [`fortran`]: the Fortran entry points where an MPI's Fortran
//!   bindings would bypass the C ones ([`fortran_entry!`]);
//! - [`config`]: the environment variables (`NETGAUGE_COLL=off|on|log`, …).

pub mod algo;
pub mod config;
pub mod entry;
pub mod export;
pub mod fortran;
pub mod gate;
mod host;
pub mod hot;
mod log;
pub mod mpi;
pub mod plan;
pub mod runtime;
pub mod trial;

#[cfg(test)]
mod fake;

pub use netgauge;
