//! Gives the shared library the soname libnetgauge.so.<ABI major>, so a
//! future incompatible ABI can be installed next to this one.
fn main() {
    println!("cargo:rustc-link-arg=-Wl,-soname,libnetgauge.so.1");
    println!("cargo:rerun-if-changed=build.rs");
}
