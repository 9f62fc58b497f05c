//! A small, fast subset of the shaper matrix (bench/shaper_matrix.sh): two
//! runs of two cells (tbf at 400 Mbit/s with a 16 KiB bucket over udp, tbf
//! at 1 Gbit/s with a 256 KiB bucket over raw Ethernet), default probe
//! settings. Asserted: what does not depend on the machine's load — the
//! sweep publishes a large-message bandwidth of the right order, a value
//! that is not identified says why, no rendezvous S on a datagram
//! transport, no credit regime where there are no credits. Reported, not
//! asserted: whether the sustained G is within 10 % of the rate and its
//! interval holds it, and the sweep's time.

#[macro_use]
mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use common::netns::{ip, veth, Netns};
use common::probe::{one_at_a_time, Killed};
use common::NGCTL;

/// Payload ns per byte at `mbit` Mbit/s of whole frames: a 9000 B MTU
/// frame carries 8932 B of udp payload (14 + 20 + 8 + 40 B of headers) or
/// 8960 B of raw payload (14 + 40).
fn truth_ns_per_byte(mbit: f64, payload_per_frame: f64) -> f64 {
    8e3 / mbit * 9014.0 / payload_per_frame
}

fn exec(ns: &Netns, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns.name()]).args(args);
    c
}

struct Cell {
    transport: &'static str,
    tbf: &'static str,
    mbit: f64,
    payload: f64,
}

fn run_cell(cell: &Cell) {
    let a = Netns::new("h7sa");
    let b = Netns::new("h7sb");
    veth(&a, "h7x", &b, "h7y", 9000);
    ip(&["-n", a.name(), "addr", "add", "10.209.0.1/24", "dev", "h7x"]);
    ip(&["-n", b.name(), "addr", "add", "10.209.0.2/24", "dev", "h7y"]);
    for (ns, dev) in [(&a, "h7x"), (&b, "h7y")] {
        let mut args = vec!["tc", "qdisc", "add", "dev", dev, "root"];
        args.extend(cell.tbf.split(' '));
        let st = exec(ns, &args).status().expect("tc");
        assert!(st.success(), "tc {args:?}");
    }
    let serve: Vec<&str> = match cell.transport {
        "udp" => vec!["--transport", "udp", "--listen", "10.209.0.2:7473"],
        _ => vec!["--transport", "raw", "--interface", "h7y"],
    };
    let mut sargs = vec![NGCTL, "serve"];
    sargs.extend(&serve);
    let _server = Killed(
        exec(&b, &sargs)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve"),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mac = b.mac("h7y");
    let mac = mac
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    let probe: Vec<&str> = match cell.transport {
        "udp" => vec!["--transport", "udp", "--peer", "10.209.0.2:7473"],
        _ => vec![
            "--transport",
            "raw",
            "--interface",
            "h7x",
            "--peer-mac",
            &mac,
        ],
    };
    let truth = truth_ns_per_byte(cell.mbit, cell.payload);
    for run in 1..=2 {
        let mut pargs = vec![NGCTL, "probe", "--json"];
        pargs.extend(&probe);
        let t0 = Instant::now();
        let out = exec(&a, &pargs).output().expect("probe");
        let wall_s = t0.elapsed().as_secs_f64();
        assert!(
            out.status.success(),
            "{} probe failed: {}",
            cell.transport,
            String::from_utf8_lossy(&out.stderr)
        );
        let v = common::cli_json(&out.stdout);
        let bw = &v["bandwidth"];
        let s = &bw["sustained"];
        let g = s["G_ns_per_byte"].as_f64().unwrap_or(f64::NAN);
        let status = s["status"].as_str().unwrap_or("");
        let (lo, hi) = (
            s["ci95"][0].as_f64().unwrap_or(f64::NAN),
            s["ci95"][1].as_f64().unwrap_or(f64::NAN),
        );
        // Robust: the order of the rate, whatever the load did to the
        // rounds (a busy host only slows the path it measures).
        assert!(
            g > 0.5 * truth && g < 3.0 * truth,
            "{}: sustained G {g} ns/B against {truth:.3} ({status})",
            cell.transport
        );
        assert_ne!(bw["regime"], "credit", "no credits on {}", cell.transport);
        assert_eq!(v["identification"]["S_bytes"], "not_applicable");
        for n in v["not_identified"].as_array().expect("list") {
            assert!(n["reason"].as_str().is_some_and(|r| !r.is_empty()));
        }
        println!(
            "{} {} run {run}: G {g:.3} ns/B [{lo:.3} … {hi:.3}] {status}, truth {truth:.3} \
             ({:+.1} %, within 10 %: {}, interval holds it: {}), regime {}, sweep {wall_s:.1} s",
            cell.tbf,
            cell.transport,
            (g / truth - 1.0) * 100.0,
            (g / truth - 1.0).abs() <= 0.1,
            lo <= truth && truth <= hi,
            bw["regime"]
        );
    }
}

root_test! {
    fn shaped_veth_reports_the_shaper_rate() {
        let _one = one_at_a_time();
        for cell in [
            Cell {
                transport: "udp",
                tbf: "tbf rate 400mbit burst 16kb latency 400ms",
                mbit: 400.0,
                payload: 8932.0,
            },
            Cell {
                transport: "raw",
                tbf: "tbf rate 1000mbit burst 256kb latency 400ms",
                mbit: 1000.0,
                payload: 8960.0,
            },
        ] {
            run_cell(&cell);
        }
    }
}
