//! `ngctl clock` agrees with the kernel's own TSC rate.

use std::process::Command;

mod common;
use common::{json_of, NGCTL};

#[test]
fn tsc_rate_agrees_with_the_kernel() {
    let v = json_of(Command::new(NGCTL).args(["clock", "--json"]));
    let read_cost = v["read_cost_ns"].as_f64().expect("read cost");
    assert!(
        read_cost > 0.0 && read_cost < 10_000.0,
        "read cost {read_cost} ns"
    );
    match (v["source"].as_str(), v["kernel_diff_ppm"].as_f64()) {
        (Some("tsc"), Some(diff)) => {
            assert!(diff.abs() <= 50.0, "TSC rate {diff} ppm off the kernel's");
        }
        // No kernel figure to compare with (no boot line readable, or the
        // kernel does not run on the TSC): the report must say why.
        (Some(source), None) => {
            let notes = v["notes"].as_array().map_or(0, Vec::len);
            assert!(
                notes > 0,
                "source {source} without a kernel comparison and no note"
            );
        }
        (s, d) => panic!("unexpected clock report: source {s:?}, diff {d:?}"),
    }
}
