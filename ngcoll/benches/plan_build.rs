//! What a communicator's plan costs at its first collective, for
//! communicators of 4 to 64 ranks on one node, under Open MPI (with and
//! without its other algorithms as candidates) and MPICH, on
//! `plan::reference_shared_memory`, over the sizes the runtime plans
//! (`PLAN_MAX_BYTES`): the whole plan in one process (`plan::build`), and
//! the slowest rank's share when the communicator's ranks decide it
//! (`plan::share::decide_share`, what the first collective waits for
//! where every rank has a core). One core, wall time; the figures and the
//! default of `NETGAUGE_COLL_MAX_RANKS` they set are in bench/ngcoll.md.
//!
//! `cargo bench -p ngcoll --bench plan_build [-- RANKS...]`

use std::time::Instant;

use netgauge::select::{Library, ViewOptions};
use ngcoll::config::PATH_WARM_NS;
use ngcoll::plan::share::decide_share;
use ngcoll::plan::{build, reference_shared_memory, Setup};
use ngcoll::runtime::PLAN_MAX_BYTES;

fn main() {
    let ranks: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let ranks = if ranks.is_empty() {
        vec![4, 8, 16, 32, 64]
    } else {
        ranks
    };
    let net = reference_shared_memory();
    println!(
        "| ranks | Open MPI 4.1: one process / slowest share | \
         Open MPI 4.1, its other algorithms too | MPICH 4.0 |"
    );
    println!("|---:|---:|---:|---:|");
    for p in ranks {
        let mut row = format!("| {p} |");
        for (lib, library_algorithms) in [
            (Library::OpenMpi41, false),
            (Library::OpenMpi41, true),
            (Library::Mpich40, false),
        ] {
            let setup = Setup {
                lib,
                ranks: p,
                one_node: true,
                view: ViewOptions {
                    gamma_ns_per_byte: 0.1,
                    cores: 0,
                    spin_slice_ns: 3e6,
                    fresh_ns_per_byte: 0.4,
                    ours_run_by: None,
                    path_ns: PATH_WARM_NS,
                },
                margin: 0.1,
                max_bytes: PLAN_MAX_BYTES,
                library_algorithms,
            };
            let t = Instant::now();
            let plan = build(&net, &setup);
            let whole = t.elapsed().as_secs_f64();
            if let Err(e) = plan {
                row.push_str(&format!(" failed: {e} |"));
                continue;
            }
            let slowest = (0..p)
                .map(|r| {
                    let t = Instant::now();
                    decide_share(&net, &setup, r, p);
                    t.elapsed().as_secs_f64()
                })
                .fold(0.0, f64::max);
            row.push_str(&format!(" {whole:.2} s / {:.0} ms |", slowest * 1e3));
        }
        println!("{row}");
    }
}
