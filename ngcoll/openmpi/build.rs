//! Compiles the shim with mpicc.openmpi (see ../build_shim.rs).
const ABI_MPICC: &str = "mpicc.openmpi";
const ABI_CFG: &str = "openmpi";
const ABI_LIB: &str = "ngcoll_ompi";
include!("../build_shim.rs");
