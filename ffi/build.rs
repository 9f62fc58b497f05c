//! Gives the shared library the soname libnetgauge.so.<ABI major>, so a
//! future incompatible ABI can be installed next to this one.
//!
//! `rustc-link-arg`, not `rustc-cdylib-link-arg`: Cargo passes a
//! dependency's cdylib link arguments on to every cdylib that depends on
//! it (rust-lang/cargo#9562), which would name libngcoll libnetgauge too,
//! and a program linked against libngcoll would load libnetgauge. Plain
//! link arguments stay in this package; its tests and benches, which get
//! it too, are executables, where a soname changes nothing.
fn main() {
    println!("cargo:rustc-link-arg=-Wl,-soname,libnetgauge.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
