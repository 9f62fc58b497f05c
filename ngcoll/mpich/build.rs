//! Compiles the shim with mpicc.mpich (see ../build_shim.rs).
const ABI_MPICC: &str = "mpicc.mpich";
const ABI_CFG: &str = "mpich";
const ABI_LIB: &str = "ngcoll_mpich";
include!("../build_shim.rs");
