//! Prints the plan libngcoll would build for a communicator, from a
//! segment, without MPI: per collective and size class, our choice or the
//! library's own, with both predictions.
//!
//! ```text
//! cargo run --release -p ngcoll --example plan -- --shm SEG [--peer HOST] [--transport mpi]
//!     [--ranks 4] [--cores 2] [--lib openmpi|mpich] [--margin 0.1] [--gamma 0.1] [--max 4194304]
//!     [--no-contention] [--no-library-algs] [--path-ns NS]
//! ```
//!
//! `--no-contention`: plan as if the segment had no contention record
//! for the transport (the penalties left out). `--no-library-algs`: only
//! ours against the library's own choice (as `NETGAUGE_COLL_LIBRARY_ALGS=0`).
//! Where the plan runs another of Open MPI's algorithms, the choice reads
//! `openmpi <schedule> (#N…)`.

use std::time::Instant;

use netgauge::select::{Collective, Library, Measured, ViewOptions};
use netgauge::Reader;
use ngcoll::plan::{self, class_bounds, class_of, Setup};

fn arg(args: &[String], k: &str) -> Option<String> {
    args.iter()
        .position(|a| a == k)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(shm) = arg(&args, "--shm") else {
        eprintln!("usage: plan --shm SEGMENT [--peer HOST] [--transport T] [--ranks P] [--cores C] [--lib openmpi|mpich] [--margin M] [--gamma G] [--max BYTES] [--no-contention] [--no-library-algs] [--path-ns NS]");
        std::process::exit(2);
    };
    let num = |k: &str, d: f64| arg(&args, k).and_then(|v| v.parse().ok()).unwrap_or(d);
    let ranks = num("--ranks", 4.0) as usize;
    let cores = num("--cores", 0.0) as usize;
    let max = num("--max", 4194304.0) as u64;
    let transport = arg(&args, "--transport").unwrap_or_else(|| "mpi".into());
    let lib = match arg(&args, "--lib").as_deref() {
        Some("mpich") => Library::Mpich40,
        _ => Library::OpenMpi41,
    };
    let mut reader = match Reader::open(&shm) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("plan: {e}");
            std::process::exit(1);
        }
    };
    // Offline use, as `ngctl predict`: a probe's segment has no daemon
    // keeping its heartbeat.
    reader.set_stale_after_ns(0);
    let entries = reader.snapshot().unwrap_or_default();
    let peer = arg(&args, "--peer");
    let Some(entry) = entries
        .iter()
        .find(|e| e.transport == transport && peer.as_ref().map_or(true, |p| *p == e.peer))
    else {
        eprintln!("plan: no {transport} entry in {shm}");
        std::process::exit(1);
    };
    let pair = entry.params();
    let exchange = plan::exchange_ranges(&entries, entry, ranks);
    let record = reader
        .transport_ext(&entry.transport)
        .ok()
        .filter(|_| !args.iter().any(|a| a == "--no-contention"));
    let net = Measured {
        pair: &pair,
        exchange: &exchange,
        exchange_ranks: ranks,
        contention: record.as_ref(),
    };
    let setup = Setup {
        lib,
        ranks,
        one_node: true,
        view: ViewOptions {
            gamma_ns_per_byte: num("--gamma", 0.1),
            cores,
            spin_slice_ns: num("--slice", 3e6),
            fresh_ns_per_byte: num("--fresh", 0.4),
            ours_run_by: None,
            // As libngcoll prices its own path: cold where ranks share cores.
            path_ns: num(
                "--path-ns",
                if cores > 0 {
                    ngcoll::config::PATH_COLD_NS
                } else {
                    ngcoll::config::PATH_WARM_NS
                },
            ),
        },
        margin: num("--margin", 0.1),
        max_bytes: max,
        library_algorithms: !args.iter().any(|a| a == "--no-library-algs"),
    };
    // --point coll:bytes: every candidate's four prices at one point.
    if let Some(pt) = arg(&args, "--point") {
        let (c, b) = pt.split_once(':').unwrap_or((pt.as_str(), "0"));
        let coll: Collective = c.parse().unwrap_or(Collective::Bcast);
        let m: u64 = b.parse().unwrap_or(0);
        let lib_sched = lib.schedule(coll, ranks, m, true);
        let show = |name: String, v: &netgauge::select::View| {
            println!(
                "{name:<40} sync {:>10.1}  rank-avg {:>10.1}  back-to-back {:>10.1}  rotating {:>10.1}  (µs)",
                v.sync_ns / 1e3,
                v.rank_avg_ns / 1e3,
                v.back_to_back_ns / 1e3,
                v.rotating_ns / 1e3
            );
        };
        let ahead = lib.root_runs_ahead(lib_sched, m);
        let lv = netgauge::select::view(&net, lib_sched, ranks, m, &setup.view, lib.spins(), ahead)
            .unwrap();
        show(format!("library: {}", lib_sched.name()), &lv);
        for a in plan::runnable(ranks)
            .into_iter()
            .filter(|a| a.collective() == coll)
        {
            let segs: Vec<u64> = if a == netgauge::select::Algorithm::BcastChain {
                (10..=22)
                    .map(|k| 1u64 << k)
                    .filter(|&s| s < m)
                    .chain([m.max(1)])
                    .collect()
            } else {
                vec![0]
            };
            for seg in segs {
                let v = netgauge::select::view(
                    &net,
                    netgauge::select::Schedule::of(a, seg),
                    ranks,
                    m,
                    &setup.view,
                    false,
                    false,
                )
                .unwrap();
                show(
                    format!(
                        "ours: {} {}",
                        a.name(),
                        if seg > 0 {
                            seg.to_string()
                        } else {
                            String::new()
                        }
                    ),
                    &v,
                );
            }
        }
        let d = netgauge::select::choose(
            &net,
            lib,
            coll,
            ranks,
            m,
            true,
            &plan::runnable(ranks),
            &setup.view,
            setup.margin,
        )
        .unwrap();
        println!(
            "choice: {:?}",
            d.ours.map(|o| (o.algorithm.name(), o.segment_bytes))
        );
        return;
    }
    let t0 = Instant::now();
    let plan = match plan::build(&net, &setup) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("plan: {e}");
            std::process::exit(1);
        }
    };
    println!(
        "plan for {ranks} ranks ({} cores) over {}/{} {} exchange, against {}: built in {:.1} ms",
        cores,
        entry.peer,
        entry.transport,
        if exchange.is_empty() {
            "without"
        } else {
            "with"
        },
        lib.name(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    println!("| collective | sizes | choice | ours: best | sync | back to back | library | sync | back to back |");
    println!("|---|---|---|---|---:|---:|---|---:|---:|");
    for coll in Collective::ALL {
        let top = if coll == Collective::Barrier {
            0
        } else {
            class_of(max)
        };
        for c in 0..=top {
            let s = plan.slot(coll, c);
            let (lo, hi) = class_bounds(c);
            let choice = match (s.algorithm(), s.alt().and_then(|k| plan.alts().get(k))) {
                (Some(a), _) if s.seg_bytes > 0 && a == netgauge::select::Algorithm::BcastChain => {
                    format!("{} ({} B)", a.name(), s.seg_bytes)
                }
                (Some(a), _) => a.name().to_string(),
                (None, Some(alt)) => format!("openmpi {}", alt.name()),
                (None, None) => "library".to_string(),
            };
            let best = netgauge::select::Algorithm::from_u32(s.best_ours).map_or("-", |a| a.name());
            println!(
                "| {} | {}–{} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {:.1} |",
                coll.name(),
                lo,
                hi,
                choice,
                best,
                s.ours_sync_ns / 1e3,
                s.ours_b2b_ns / 1e3,
                plan::lib_sched_name(s.lib_sched),
                s.lib_sync_ns / 1e3,
                s.lib_b2b_ns / 1e3
            );
        }
    }
}
