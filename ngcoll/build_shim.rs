// The build script of an ABI crate (ngcoll/openmpi, ngcoll/mpich),
// included by their build.rs with ABI_MPICC and ABI_CFG set: compiles
// shim/ngcoll_shim.c with that MPI's mpicc into a static archive and links
// the crate's cdylib against that MPI library. Without the mpicc (the MPI
// is not installed) the crate builds empty, with one warning.

use std::path::PathBuf;
use std::process::Command;

fn run(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    let env_var = format!("NGCOLL_MPICC_{}", ABI_CFG.to_uppercase());
    println!("cargo:rustc-check-cfg=cfg(ngcoll_mpi)");
    println!("cargo:rerun-if-env-changed={env_var}");
    println!("cargo:rerun-if-changed=../shim/ngcoll_shim.c");
    println!("cargo:rerun-if-changed=../build_shim.rs");
    let mpicc = std::env::var(&env_var).unwrap_or_else(|_| ABI_MPICC.to_string());
    // The compiler's file, found as the shell finds it: installing the MPI
    // after an empty build (or updating it) builds the library again. While
    // it is missing, cargo reruns this script on every build, which is quick.
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    let found = if mpicc.contains('/') {
        Some(PathBuf::from(&mpicc))
    } else {
        std::env::split_paths(&dirs).map(|d| d.join(&mpicc)).find(|p| p.exists())
    };
    let watched = found.unwrap_or_else(|| PathBuf::from("/usr/bin").join(&mpicc));
    println!("cargo:rerun-if-changed={}", watched.display());
    let link = run(Command::new(&mpicc).arg("-showme:link")).or_else(|| run(Command::new(&mpicc).arg("-link_info")));
    let Some(link) = link else {
        println!("cargo:warning={mpicc} not found: lib{} is built empty (install the MPI, see scripts/install-deps.sh)", ABI_LIB);
        return;
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("ngcoll_shim.o");
    let ok = Command::new(&mpicc)
        .args(["-O2", "-fPIC", "-Wall", "-Wextra", "-Werror", "-Wno-stringop-overflow", "-c", "../shim/ngcoll_shim.c", "-o"])
        .arg(&obj)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "{mpicc} could not compile shim/ngcoll_shim.c");
    let ok = Command::new("ar")
        .arg("crs")
        .arg(out.join("libngcoll_shim.a"))
        .arg(&obj)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=ngcoll_shim");
    for tok in link.split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = tok.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        }
    }
    // Every symbol resolved at build time (a missing PMPI_ is a build
    // error, not a failure at the user's MPI_Init).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    // A program linked against libngcoll (rather than preloading it)
    // records this name and loads this library.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,lib{ABI_LIB}.so");
    println!("cargo:rustc-cfg=ngcoll_mpi");
}
