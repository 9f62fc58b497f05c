//! The LogGP fit on sweeps measured through a token-bucket shaper
//! (tests/data/shaper/*.json: per-size medians of `ngctl probe --transport
//! udp --json`, raw samples left out; each file says how it was measured).
//!
//! Behind `tbf rate 400mbit burst 16kb` the sizes around a message's share
//! of the bucket find it full in some rounds and empty in others, so their
//! medians land in either of two modes. These six sweeps are the ones whose
//! large-message G a least-squares gap line put 5.6–16 % above the rate;
//! the fit must give the rate to the wire's precision.

use netgauged::model::{fit::fit_points, SizePoint};

#[derive(serde::Deserialize)]
struct Fixture {
    description: String,
    points: Vec<SizePoint>,
}

/// 1/R on the wire: 20 ns/B for the payload plus 82 B of UDP/IP/Ethernet
/// and probe headers per 8918 B datagram at MTU 9000.
const WIRE_NS_PER_BYTE: f64 = 20.0 * 9000.0 / 8918.0;

#[test]
fn large_message_g_is_the_shaper_rate() {
    for name in [
        "udp_tbf_a",
        "udp_tbf_b",
        "udp_tbf_c",
        "udp_tbf_d",
        "udp_tbf_e",
        "udp_tbf_f",
    ] {
        let path = format!(
            "{}/tests/data/shaper/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let f: Fixture = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let fit = fit_points(f.points);
        let last = fit.ranges.last().expect("ranges");
        // The model's 1 MiB gap, per byte, and the range's slope: both
        // within 1 % of the wire rate.
        let s = 1048576.0;
        let per_byte = (last.g_ns + (s - 1.0) * last.G_ns_per_byte) / s;
        for (what, v) in [("G", last.G_ns_per_byte), ("gap(1 MiB)/s", per_byte)] {
            let err = v / WIRE_NS_PER_BYTE - 1.0;
            assert!(
                err.abs() < 0.01,
                "{name}: {what} {v:.3} ns/B, wire {WIRE_NS_PER_BYTE:.3} ({:+.1} %); {}",
                err * 100.0,
                f.description
            );
        }
    }
}
