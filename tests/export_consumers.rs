//! The exports against their consumers themselves, where they run here:
//! LogGOPSim simulates the exported model (its binaries named by LOGGOPSIM
//! and TXT2BIN: bench/exports.sh), MPICH 4.0 starts with the exported
//! selection JSON and applies its small-communicator rule, Open MPI 4.1
//! applies the exported rules file (both from scripts/install-deps.sh, as
//! in CI). What needs no consumer — LogGOPSim's own formulas on the
//! exported integers, the MPICH algorithm names — runs everywhere.
//!
//! Which broadcast an MPI library ran is seen without timing
//! (tests/exports/colls.c): rank 3 enters the broadcast only once rank 1
//! has finished its own, or after a deadline; rank 1 finishes first
//! exactly when its data does not pass through rank 3.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use netgauge::{EntryData, RangeData};
use netgauged::export::loggopsim::{self, Unit};
use netgauged::export::{self, model, smpi, ExportArgs, Format};

/// A LogGPS link as the sim transport's probe fits it (L=1100, o=300,
/// g=450, G=0.08, S=16384: above S the send overhead and the gap hold the
/// handshake).
fn sim_entry() -> EntryData {
    let r = |from, to, g, o_s| RangeData {
        from_bytes: from,
        to_bytes: to,
        g_ns: g,
        G_ns_per_byte: 0.08,
        o_s_ns: o_s,
        o_r_ns: 300.0,
        O_s_ns_per_byte: 0.0,
        O_r_ns_per_byte: 0.0,
    };
    EntryData {
        peer: "node1".into(),
        transport: "udp".into(),
        ranges: vec![r(1, 16384, 450.0, 300.0), r(16385, 65536, 3850.0, 3700.0)],
        eel_ns: 1700.0,
        L_ns: 1100.0,
        S_bytes: Some(16384),
        ..EntryData::default()
    }
}

/// A faster link with three ranges, per-byte overheads, G of 0.055 ns/B
/// (rounds to 0 in ns) and no rendezvous.
fn fast_entry() -> EntryData {
    let r = |from, to, g, big_g, o_s, big_o| RangeData {
        from_bytes: from,
        to_bytes: to,
        g_ns: g,
        G_ns_per_byte: big_g,
        o_s_ns: o_s,
        o_r_ns: 110.0,
        O_s_ns_per_byte: big_o,
        O_r_ns_per_byte: 0.02,
    };
    EntryData {
        peer: "node2".into(),
        transport: "rdma".into(),
        ranges: vec![
            r(1, 4096, 400.0, 0.073, 330.0, 0.01),
            r(4097, 262_144, 2300.0, 0.055, 900.0, 0.0),
            r(262_145, 4 << 20, 2600.0, 0.056, 950.0, 0.0),
        ],
        eel_ns: 590.0,
        L_ns: 150.0,
        S_bytes: None,
        ..EntryData::default()
    }
}

/// A link whose largest sizes cost more per byte than the sizes below them
/// (G 0.1124 ns/B above 2 MiB after 0.045 ns/B), as an oversubscribed MPI
/// probe can fit: that piece's line has a negative constant.
fn convex_entry() -> EntryData {
    let r = |from, to, g, big_g| RangeData {
        from_bytes: from,
        to_bytes: to,
        g_ns: g,
        G_ns_per_byte: big_g,
        o_s_ns: 700.0,
        o_r_ns: 600.0,
        O_s_ns_per_byte: 0.0,
        O_r_ns_per_byte: 0.0,
    };
    EntryData {
        peer: "vm".into(),
        transport: "mpi".into(),
        ranges: vec![
            r(1, 3496, 900.0, 0.9),
            r(3497, 65_536, 5000.0, 0.3),
            r(65_537, 2 << 20, 8000.0, 0.045),
            r((2 << 20) + 1, 4 << 20, 9000.0, 0.1124),
        ],
        eel_ns: 2040.0,
        L_ns: 1620.0,
        S_bytes: Some(3496),
        ..EntryData::default()
    }
}

/// The directory `ng-<tool>-<pid>` under the system's temporary
/// directory, created if need be.
fn scratch_dir(tool: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ng-{tool}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn args(format: Format) -> ExportArgs {
    common::export_args(format, "udp", &[2, 4, 8, 16, 32, 64, 128])
}

/// Sizes on both sides of every boundary of the sets (S among them).
fn sizes_of(sets: &[loggopsim::FlagSet]) -> Vec<(u64, usize)> {
    let mut v = Vec::new();
    for (i, f) in sets.iter().enumerate() {
        for s in [f.from_bytes, (f.from_bytes + f.to_bytes) / 2, f.to_bytes] {
            v.push((s, i));
        }
    }
    v
}

/// LogGOPSim's integers of a flag line.
fn parse_flags(line: &str) -> Vec<(String, f64)> {
    let t: Vec<&str> = line.split_whitespace().collect();
    t.chunks(2)
        .map(|c| (c[0].to_string(), c[1].parse().unwrap()))
        .collect()
}

/// LogGOPSim's own prices (LogGOPSim.cpp): a message 2o + L + (s−1)·max(G, O).
fn loggopsim_formula(flags: &[(String, f64)], s: u64) -> f64 {
    let v = |k: &str| flags.iter().find(|(f, _)| f == k).unwrap().1;
    2.0 * v("-o") + v("-L") + (s - 1) as f64 * v("-G").max(v("-O"))
}

#[test]
fn loggopsim_flags_reproduce_the_model_by_its_formula() {
    for e in [sim_entry(), fast_entry()] {
        let sets = loggopsim::flag_sets(&e).unwrap();
        let unit = loggopsim::choose_unit(&sets, Unit::Auto).unwrap();
        let per_ns = unit.per_ns();
        let pieces = model::pieces(&e);
        for (s, i) in sizes_of(&sets) {
            assert!(sets[i].unusable.is_none());
            let flags = parse_flags(&loggopsim::flags(&sets[i], unit));
            let sim = loggopsim_formula(&flags, s) / per_ns;
            let t = model::message_ns(&pieces, s);
            assert!(
                (sim - t).abs() <= 0.002 * t,
                "{}: {s} B: {sim} vs {t}",
                e.peer
            );
            // No sentinel: S is the entry's, or the largest measured size.
            let big_s = flags.iter().find(|(f, _)| f == "-S").unwrap().1 as u64;
            assert_eq!(
                big_s,
                e.S_bytes.unwrap_or(e.ranges.last().unwrap().to_bytes)
            );
        }
    }
    // G = 0.055 ns/B: ns cannot carry it, and asking for ns says so.
    let mut a = args(Format::Loggopsim);
    a.loggopsim_unit = Unit::Ns;
    let err = export::render(&a, &fast_entry(), &[], None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rounds") || err.contains("against the model"),
        "{err}"
    );
    a.loggopsim_unit = Unit::Auto;
    let text = export::render(&a, &fast_entry(), &[], None).unwrap();
    assert!(text.contains("times in ps"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with('-')).count(),
        3,
        "{text}"
    );
    // --bytes: the one line of that size's set.
    a.bytes = Some(65536);
    let line = export::render(&a, &fast_entry(), &[], None).unwrap();
    assert_eq!(line.lines().count(), 1);
    assert!(line.starts_with("-L ") && line.contains("-G 55 "), "{line}");
}

#[test]
fn model_is_continuous_across_ranges_with_the_handshake_above_s() {
    let p = model::pieces(&sim_entry());
    let t = |s| model::message_ns(&p, s);
    assert!((t(1) - 1700.0).abs() < 1e-9);
    // 2·EEL more above S, the bytes' G on both sides.
    assert!((t(16385) - t(16384) - 0.08 - 3400.0).abs() < 1e-6);
    let f = model::pieces(&fast_entry());
    let t = |s| model::message_ns(&f, s);
    assert!((t(4097) - t(4096) - 0.055).abs() < 1e-6);
    assert!((t(262_145) - t(262_144) - 0.056).abs() < 1e-6);
}

#[test]
fn loggopsim_says_which_sizes_it_cannot_take() {
    // A last range so much steeper than the one below that its line is
    // below zero at s = 1: LogGOPSim's 2o + L cannot be.
    let mut e = fast_entry();
    e.ranges[2].G_ns_per_byte = 0.081;
    let text = export::render(&args(Format::Loggopsim), &e, &[], None).unwrap();
    assert!(
        text.contains("# sizes 262145..4194304 B: LogGOPSim cannot take"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with('-')).count(),
        2,
        "{text}"
    );
    let mut a = args(Format::Loggopsim);
    a.bytes = Some(1 << 20);
    let err = export::render(&a, &e, &[], None).unwrap_err().to_string();
    assert!(err.contains("cannot take"), "{err}");
}

/// One LogGOPSim run of a GOAL schedule: each host's finish time.
fn run_loggopsim(goal: &str, flags: &str, dir: &Path) -> Vec<u64> {
    let bin = |v: &str| std::env::var(v).unwrap_or_else(|_| panic!("{v} is not set"));
    let txt = dir.join("s.goal");
    let bin_file = dir.join("s.bin");
    std::fs::write(&txt, goal).unwrap();
    let st = Command::new(bin("TXT2BIN"))
        .arg("-i")
        .arg(&txt)
        .arg("-o")
        .arg(&bin_file)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let out = Command::new(bin("LOGGOPSIM"))
        .arg("-f")
        .arg(&bin_file)
        .args(flags.split_whitespace())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<u64> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("Host ")?
                .split(": ")
                .nth(1)?
                .trim()
                .parse()
                .ok()
        })
        .collect();
    assert_eq!(times.len(), 2, "{text}");
    times
}

#[test]
#[cfg_attr(
    not(loggopsim_tests),
    ignore = "needs LogGOPSim, which the project does not ship: LOGGOPSIM=… TXT2BIN=… bash bench/exports.sh"
)]
fn loggopsim_reproduces_the_model_within_one_percent() {
    let dir = scratch_dir("loggopsim");
    let mut worst = 0.0f64;
    for e in [sim_entry(), fast_entry()] {
        let sets = loggopsim::flag_sets(&e).unwrap();
        let unit = loggopsim::choose_unit(&sets, Unit::Auto).unwrap();
        let per_ns = unit.per_ns();
        let pieces = model::pieces(&e);
        println!("{} over {} (unit {}):", e.peer, e.transport, unit.name());
        println!(
            "  size B     model T ns   LogGOPSim ns  err %   model 2T ns  ping-pong ns  err %"
        );
        for (s, i) in sizes_of(&sets) {
            let flags = loggopsim::flags(&sets[i], unit);
            let one = format!(
                "num_ranks 2\n\nrank 0 {{\nl1: send {s}b to 1 tag 0\n}}\n\n\
                 rank 1 {{\nl1: recv {s}b from 0 tag 0\n}}\n"
            );
            let pp = format!(
                "num_ranks 2\n\nrank 0 {{\nl1: send {s}b to 1 tag 0\nl2: recv {s}b from 1 tag 0\n\
                 l2 requires l1\n}}\n\nrank 1 {{\nl1: recv {s}b from 0 tag 0\n\
                 l2: send {s}b to 0 tag 0\nl2 requires l1\n}}\n"
            );
            let single = *run_loggopsim(&one, &flags, &dir).iter().max().unwrap() as f64 / per_ns;
            let ping = run_loggopsim(&pp, &flags, &dir)[0] as f64 / per_ns;
            let t = model::message_ns(&pieces, s);
            let (e1, e2) = ((single / t - 1.0) * 100.0, (ping / (2.0 * t) - 1.0) * 100.0);
            println!(
                "  {s:>7} {t:>13.1} {single:>14.1} {e1:>6.3} {:>13.1} {ping:>13.1} {e2:>6.3}",
                2.0 * t
            );
            worst = worst.max(e1.abs()).max(e2.abs());
            assert!(
                e1.abs() <= 1.0 && e2.abs() <= 1.0,
                "{s} B: {single} / {ping} vs {t}"
            );
        }
    }
    println!("LogGOPSim against the model: largest difference {worst:.3} %");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The broadcast, reduce, allreduce, allgather, alltoall and barrier
/// algorithms MPICH 4.0.2 knows (src/mpi/coll/src/csel_container.c): any
/// other name makes it abort in MPI_Init.
const MPICH_4_0_NAMES: &[&str] = &[
    "MPIR_Allgather_allcomm_nb",
    "MPIR_Allgather_inter_local_gather_remote_bcast",
    "MPIR_Allgather_intra_brucks",
    "MPIR_Allgather_intra_recursive_doubling",
    "MPIR_Allgather_intra_ring",
    "MPIR_Allreduce_allcomm_nb",
    "MPIR_Allreduce_inter_reduce_exchange_bcast",
    "MPIR_Allreduce_intra_recursive_doubling",
    "MPIR_Allreduce_intra_reduce_scatter_allgather",
    "MPIR_Allreduce_intra_smp",
    "MPIR_Alltoall_allcomm_nb",
    "MPIR_Alltoall_inter_pairwise_exchange",
    "MPIR_Alltoall_intra_brucks",
    "MPIR_Alltoall_intra_pairwise",
    "MPIR_Alltoall_intra_pairwise_sendrecv_replace",
    "MPIR_Alltoall_intra_scattered",
    "MPIR_Barrier_allcomm_nb",
    "MPIR_Barrier_inter_bcast",
    "MPIR_Barrier_intra_dissemination",
    "MPIR_Barrier_intra_smp",
    "MPIR_Bcast_allcomm_nb",
    "MPIR_Bcast_inter_remote_send_local_bcast",
    "MPIR_Bcast_intra_binomial",
    "MPIR_Bcast_intra_scatter_recursive_doubling_allgather",
    "MPIR_Bcast_intra_scatter_ring_allgather",
    "MPIR_Bcast_intra_smp",
    "MPIR_Reduce_allcomm_nb",
    "MPIR_Reduce_inter_local_reduce_remote_send",
    "MPIR_Reduce_intra_binomial",
    "MPIR_Reduce_intra_reduce_scatter_gather",
    "MPIR_Reduce_intra_smp",
];

fn leaves(v: &serde_json::Value, out: &mut Vec<String>) {
    if let Some(o) = v.as_object() {
        for (k, sub) in o {
            match k.strip_prefix("algorithm=") {
                Some(name) => out.push(name.to_string()),
                None => leaves(sub, out),
            }
        }
    }
}

#[test]
fn mpich_json_names_only_algorithms_mpich_4_0_knows() {
    for e in [sim_entry(), fast_entry()] {
        for margin in [0.0, 0.1, 0.99] {
            let mut a = args(Format::MpichJson);
            a.margin = margin;
            a.comm_sizes = vec![2, 4, 16, 128];
            let text = export::render(&a, &e, &[], None).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            let mut names = Vec::new();
            leaves(&v, &mut names);
            assert!(names.len() > 20);
            for n in &names {
                assert!(
                    MPICH_4_0_NAMES.contains(&n.as_str()),
                    "{n} (margin {margin})"
                );
            }
        }
    }
}

/// MPICH's evaluation of the tree (csel.c): the first sibling whose key
/// matches, in file order; the broadcast leaf of `ranks` and `bytes`.
fn mpich_bcast_leaf(tree: &serde_json::Value, ranks: u64, bytes: u64) -> String {
    let first = |o: &serde_json::Value, key: &str, x: u64| -> serde_json::Value {
        let (_, v) = o
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| match k.strip_prefix(key) {
                Some("=any") => true,
                Some(n) => n.strip_prefix("<=").unwrap().parse::<u64>().unwrap() >= x,
                None => false,
            })
            .unwrap();
        v.clone()
    };
    let intra = &tree["collective=bcast"]["comm_type=intra"];
    let by_msg = first(intra, "comm_size", ranks);
    let leaf = first(&by_msg, "avg_msg_size", bytes);
    let (k, _) = leaf.as_object().unwrap().iter().next().unwrap();
    k.trim_start_matches("algorithm=").to_string()
}

/// The JSON with every object's keys sorted as text (what the export once
/// wrote: `comm_size<=16` before `comm_size<=4`).
fn sorted_as_text(v: &serde_json::Value) -> serde_json::Value {
    match v.as_object() {
        Some(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            keys.sort();
            let m = keys
                .into_iter()
                .map(|k| (k.clone(), sorted_as_text(&o[k])))
                .collect();
            serde_json::Value::Object(m)
        }
        None => v.clone(),
    }
}

/// tests/exports/colls.c built with `mpicc`.
fn build_colls(mpicc: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/exports/colls.c");
    let exe = dir.join(format!("colls-{mpicc}"));
    let out = Command::new(mpicc)
        .arg("-O2")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("{mpicc}: {e}"));
    assert!(out.status.success(), "{mpicc}: {out:?}");
    exe
}

/// One 4-rank run: stdout and stderr, the run having succeeded.
fn run4(mpirun: &str, env: &[(&str, &Path)], mca: &[&str], exe: &Path, bytes: u64) -> String {
    let mut c = Command::new(mpirun);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .arg("-np")
        .arg("4");
    if mpirun.ends_with("openmpi") {
        c.arg("--oversubscribe");
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .args(mca)
        .arg(exe)
        .args([bytes.to_string(), "3".into(), "1".into()])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{mpirun} failed:\n{text}");
    assert!(text.contains("collectives=ok"), "{text}");
    text
}

/// Whether rank 1 finished its broadcast before rank 3 entered.
fn watch_first(text: &str) -> bool {
    if text.contains("watch_done_before_late_entered=yes") {
        return true;
    }
    assert!(text.contains("watch_done_before_late_entered=no"), "{text}");
    false
}

/// Trees MPICH runs: binomial does not pass rank 1's data through rank 3;
/// scatter + allgather needs every rank.
fn needs_every_rank(alg: &str) -> bool {
    alg.contains("scatter")
}

#[test]
#[cfg_attr(
    not(mpich_tests),
    ignore = "needs MPICH 4.0 (mpicc.mpich, mpirun.mpich: scripts/install-deps.sh)"
)]
fn mpich_starts_with_the_json_and_applies_its_small_communicator_rule() {
    let dir = scratch_dir("mpich");
    let exe = build_colls("mpicc.mpich", &dir);
    let text = export::render(&args(Format::MpichJson), &sim_entry(), &[], None).unwrap();
    let tree: serde_json::Value = serde_json::from_str(&text).unwrap();
    let sorted = sorted_as_text(&tree);
    // A size at which the 4-rank rule and the one a text order puts first
    // (comm_size<=16) run different kinds of tree.
    let bytes = [65536u64, 131_072, 262_144, 524_288, 1 << 20]
        .into_iter()
        .find(|&m| {
            needs_every_rank(&mpich_bcast_leaf(&tree, 4, m))
                != needs_every_rank(&mpich_bcast_leaf(&sorted, 4, m))
        })
        .expect("the rules of 4 and 16 ranks differ at some size");
    let ours = mpich_bcast_leaf(&tree, 4, bytes);
    let theirs = mpich_bcast_leaf(&sorted, 4, bytes);
    let file = dir.join("tree.json");
    let text_order = dir.join("sorted.json");
    std::fs::write(&file, &text).unwrap();
    std::fs::write(&text_order, serde_json::to_string(&sorted).unwrap()).unwrap();
    let var = "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE";
    let out = run4("mpirun.mpich", &[(var, &file)], &[], &exe, bytes);
    let first = watch_first(&out);
    println!("MPICH, exported JSON, 4 ranks, bcast {bytes} B: rule {ours}, rank 1 before rank 3: {first}");
    assert_eq!(first, !needs_every_rank(&ours), "{out}");
    let out = run4("mpirun.mpich", &[(var, &text_order)], &[], &exe, bytes);
    let first_sorted = watch_first(&out);
    println!("MPICH, keys sorted as text: rule {theirs}, rank 1 before rank 3: {first_sorted}");
    assert_eq!(first_sorted, !needs_every_rank(&theirs), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[cfg_attr(
    not(ompi_tests),
    ignore = "needs Open MPI 4.1 (mpicc.openmpi, mpirun.openmpi: scripts/install-deps.sh)"
)]
fn open_mpi_reads_and_applies_the_rules_file() {
    let dir = scratch_dir("ompi");
    let exe = build_colls("mpicc.openmpi", &dir);
    // No margin: where a segmented chain is predicted faster, it is taken.
    let mut a = args(Format::OmpiRules);
    a.margin = 0.0;
    a.comm_sizes = vec![2, 4, 8];
    let text = export::render(&a, &sim_entry(), &[], None).unwrap();
    // The bcast block of 4 ranks: (message size, algorithm) rules.
    let nums: Vec<u64> = text
        .lines()
        .map(|l| l.split('#').next().unwrap())
        .flat_map(|l| l.split_whitespace().map(|x| x.parse::<u64>().unwrap()))
        .collect();
    let rule_at = |bytes: u64| -> u64 {
        let mut i = 1;
        for _ in 0..nums[0] {
            let (coll, ncomm) = (nums[i], nums[i + 1]);
            i += 2;
            for _ in 0..ncomm {
                let (comm, nmsg) = (nums[i], nums[i + 1]);
                i += 2;
                let mut alg = 0;
                for k in 0..nmsg as usize {
                    let r = &nums[i + 4 * k..i + 4 * k + 4];
                    if r[0] <= bytes {
                        alg = r[1];
                    }
                }
                if coll == 7 && comm == 4 {
                    return alg;
                }
                i += 4 * nmsg as usize;
            }
        }
        panic!("no bcast rule for 4 ranks");
    };
    // A chain (2) or pipeline (3): rank 1 forwards to 2, 2 to 3, and with
    // segments in flight rank 1 cannot finish before the chain drains
    // through rank 3; coll/tuned's fixed decision for 4 ranks lets it.
    let bytes = [262_144u64, 1 << 20]
        .into_iter()
        .find(|&m| matches!(rule_at(m), 2 | 3))
        .expect("a chain rule for 4 ranks");
    let file = dir.join("rules.txt");
    std::fs::write(&file, &text).unwrap();
    let path = file.to_str().unwrap();
    let mca = [
        "--mca",
        "coll_tuned_use_dynamic_rules",
        "1",
        "--mca",
        "coll_tuned_dynamic_rules_filename",
        path,
        "--mca",
        "coll_base_verbose",
        "10",
    ];
    let out = run4("mpirun.openmpi", &[], &mca, &exe, bytes);
    // coll_base_verbose: coll/tuned is the component MPI_COMM_WORLD runs
    // (a release build of Open MPI prints nothing of the file itself).
    assert!(
        out.lines()
            .any(|l| l.contains("comm_select: selecting") && l.contains(" tuned,")),
        "{out}"
    );
    let with_rules = watch_first(&out);
    let fixed = watch_first(&run4("mpirun.openmpi", &[], &[], &exe, bytes));
    println!(
        "Open MPI, bcast {bytes} B on 4 ranks: rule algorithm {}; rank 1 before rank 3: \
         with the rules {with_rules}, fixed decision {fixed}",
        rule_at(bytes)
    );
    assert!(!with_rules && fixed, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The transport record of a contention probe: β, and the mixed scheme's
/// penalty at k = 1 (nearer 1: directions independent; nearer 2: shared).
fn contention_record(beta: f64, mixed_1: f64) -> netgauge::TransportExt {
    use netgauge::{Estimate, Scheme, Status, TransportExt};
    let est = |v: f64| Estimate {
        value: v,
        lo: v * 0.98,
        hi: v * 1.02,
    };
    let mut t = TransportExt::default();
    let k_beta: Vec<Estimate> = (1..=4).map(|k| est((k as f64 * beta).max(1.0))).collect();
    t.set_penalties(Scheme::Outgoing, &k_beta, Status::Identified)
        .unwrap();
    t.set_penalties(Scheme::Mixed, &[est(mixed_1)], Status::Identified)
        .unwrap();
    t.set_sharing(
        (est(beta), Status::Identified),
        (est(0.0), Status::NotAssessed),
        (est(0.0), Status::NotAssessed),
    );
    t
}

/// smpicc a test program into `dir`.
fn smpicc(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/exports")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let out = Command::new("smpicc")
        .arg("-O2")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "smpicc {name}: {out:?}");
    exe
}

/// smpirun `exe` on `ranks` hosts of the platform `xml`; its stdout lines
/// as (label, value) pairs: "label… value".
fn smpirun(dir: &Path, xml: &str, ranks: u32, exe: &Path, args: &[String]) -> Vec<(String, f64)> {
    let platform = dir.join("platform.xml");
    std::fs::write(&platform, xml).unwrap();
    let hostfile = dir.join("hosts");
    let hosts: String = (0..ranks).map(|i| format!("node-{i}\n")).collect();
    std::fs::write(&hostfile, hosts).unwrap();
    let out = Command::new("smpirun")
        .arg("-platform")
        .arg(&platform)
        .arg("-hostfile")
        .arg(&hostfile)
        .arg("-np")
        .arg(ranks.to_string())
        // What the program computes between calls is not part of the test.
        .arg("--cfg=smpi/simulate-computation:no")
        .arg("--cfg=smpi/wtime:0")
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "smpirun: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (label, v) = l.rsplit_once(' ')?;
            Some((label.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
#[cfg_attr(
    not(simgrid_tests),
    ignore = "needs SimGrid's SMPI (smpicc, smpirun: libsimgrid-dev, scripts/install-deps.sh)"
)]
fn smpi_reproduces_the_model_and_the_measured_sharing() {
    let dir = scratch_dir("smpi");
    let pingpong = smpicc(&dir, "smpi_pingpong");
    let conflict = smpicc(&dir, "smpi_conflict");
    let mut a = args(Format::Smpi);
    a.hosts = Some(5);
    // One message: half a simulated ping-pong against T(s), on both sides
    // of every piece's boundaries (S among them), and of every boundary of
    // the pieces SMPI gets (more where a line has a negative constant).
    let mut worst = 0.0f64;
    for e in [sim_entry(), fast_entry(), convex_entry()] {
        let xml = export::render(&a, &e, &[], None).unwrap();
        let pieces = model::pieces(&e);
        let written = smpi::smpi_pieces(&e).unwrap();
        assert_eq!(
            written.len() > pieces.len(),
            e.peer == "vm",
            "{} pieces for {}",
            written.len(),
            pieces.len()
        );
        let mut sizes: Vec<u64> = pieces
            .iter()
            .flat_map(|p| [p.from_bytes, (p.from_bytes + p.to_bytes) / 2, p.to_bytes])
            .chain(
                written
                    .iter()
                    .flat_map(|p| [p.from_bytes.saturating_sub(1).max(1), p.from_bytes]),
            )
            // Beyond the last range, where its line (its last chord) holds;
            // without S, sizes above the export's eager bound are not
            // detached in SMPI (--eager-up-to).
            .chain(e.S_bytes.map_or(vec![], |_| vec![8 << 20, 64 << 20]))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        let args: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
        let got = smpirun(&dir, &xml, 2, &pingpong, &args);
        assert_eq!(got.len(), sizes.len(), "{got:?}");
        println!(
            "{} over {}: size B, model T ns, SMPI ns, err %",
            e.peer, e.transport
        );
        for ((label, sim), s) in got.iter().zip(&sizes) {
            assert_eq!(label, &s.to_string());
            let t = model::message_ns(&pieces, *s);
            let err = (sim / t - 1.0) * 100.0;
            println!("  {s:>8} {t:>12.1} {sim:>12.1} {err:>7.3}");
            worst = worst.max(err.abs());
            assert!(
                err.abs() <= 1.0,
                "{s} B: SMPI {sim} ns, model {t} ns\n{xml}"
            );
        }
    }
    println!("SMPI against the model: largest difference {worst:.3} %");
    // Sharing: k flows of 8 MiB (rendezvous, no sleeps) out of, into, and
    // out of and into one host, against the measured record's penalties.
    let s: u64 = 8 << 20;
    let e = sim_entry();
    let t1 = model::message_ns(&model::pieces(&e), s);
    let g_net = e.ranges.last().unwrap().G_ns_per_byte;
    for (beta, mixed_1, shared) in [(0.8, 1.02, false), (0.9, 1.97, true)] {
        let record = contention_record(beta, mixed_1);
        let xml = export::render(&a, &e, &[], Some(&record)).unwrap();
        assert!(
            xml.contains(if shared {
                "\"SHARED\""
            } else {
                "\"SPLITDUPLEX\""
            }),
            "{xml}"
        );
        let got = smpirun(&dir, &xml, 5, &conflict, &[s.to_string()]);
        assert_eq!(got.len(), 4 + 4 + 2, "{got:?}");
        for (label, sim) in got {
            let (scheme, k) = label.split_once(' ').unwrap();
            let k: f64 = k.parse().unwrap();
            // Flows on one host link: k (2k when mixed on a shared link).
            let flows = if scheme == "mixed" && shared {
                2.0 * k
            } else {
                k
            };
            let penalty = (flows * beta).max(1.0);
            let want = t1 + (penalty - 1.0) * (s + 16) as f64 * g_net;
            let err = (sim / want - 1.0) * 100.0;
            println!(
                "  beta {beta} {scheme:>5} k={k}: penalty {:.3} (model {penalty:.3}), err {err:.3} %",
                sim / t1
            );
            assert!(err.abs() <= 1.0, "{label}: {sim} ns vs {want} ns\n{xml}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
