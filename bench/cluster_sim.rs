//! The cluster simulated in virtual time (bench/cluster.md).
//!
//!     cargo run --release --example cluster_sim -- [OPTIONS]
//!
//! Measures the session costs with real sweeps over the `sim` transport
//! (intra-leaf and inter-leaf models), then runs N nodes' schedules over
//! the shared rounds for the horizon and prints one Markdown table.

use clap::Parser;
use netgauged::cluster::schedule::{RecheckPlan, ScheduleConfig};
use netgauged::cluster::sim::{self, SimConfig, SimReport, Spread};
use netgauged::probe::ProbeOptions;
use netgauged::transport::sim::SimParams;

#[derive(Parser, Debug)]
#[command(about = "Simulate netgauged's cluster schedule in virtual time")]
struct Args {
    /// Nodes of the cluster.
    #[arg(long, default_value_t = 1024)]
    nodes: usize,
    /// Nodes per leaf switch.
    #[arg(long, default_value_t = 64)]
    per_leaf: usize,
    /// Simulated hours.
    #[arg(long, default_value_t = 30.0)]
    hours: f64,
    /// Seed of the events, the jitter draws and the pairing.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Probe budget per node, bytes per second (default: the schedule's).
    #[arg(long)]
    budget: Option<u64>,
    /// Round length, seconds (default: the schedule's).
    #[arg(long)]
    round_s: Option<f64>,
    /// A fan-out round every this many seconds (default: the schedule's;
    /// 0: none).
    #[arg(long)]
    fanout_interval_s: Option<f64>,
    /// Mesh sessions at once over the cluster, at most (default: the
    /// schedule's, no cap).
    #[arg(long)]
    mesh_pairs_per_round: Option<u32>,
    /// Nodes that fail once (for --fail-hours) in the first half of the run.
    #[arg(long, default_value_t = 0)]
    fail: usize,
    #[arg(long, default_value_t = 2.0)]
    fail_hours: f64,
    /// Mean share of nodes quiet (in a job), and the mean job length.
    #[arg(long, default_value_t = 0.0)]
    quiet: f64,
    #[arg(long, default_value_t = 4.0)]
    quiet_hours: f64,
    /// Probability that a re-check of an unchanged link disagrees.
    #[arg(long, default_value_t = 0.05)]
    false_disagreement: f64,
    /// Share of links that differ from their coverage class.
    #[arg(long, default_value_t = 0.001)]
    changed_links: f64,
    /// Link model within a leaf (`ngctl --model` syntax).
    #[arg(long, default_value = "L=1100,o=300,g=450,G=0.08,S=16384,jitter=0.02")]
    intra: String,
    /// Link model between leaves.
    #[arg(long, default_value = "L=1600,o=300,g=450,G=0.08,S=16384,jitter=0.02")]
    inter: String,
    /// Largest size of a full sweep.
    #[arg(long, default_value_t = 128 * 1024)]
    max_size: u64,
    /// Sweeps per link class and job measured for the costs.
    #[arg(long, default_value_t = 3)]
    cost_runs: u64,
    /// Start of the run on the shared clock, seconds (rounds are aligned
    /// to 0, so this sets where in a cycle and a coverage pass it starts).
    #[arg(long, default_value_t = 1.0e9)]
    start_s: f64,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let intra: SimParams = a.intra.parse()?;
    let inter: SimParams = a.inter.parse()?;
    let mut full = ProbeOptions {
        resamples: 0,
        ..ProbeOptions::default()
    };
    full.sweep.max_size_bytes = a.max_size;
    let mut schedule = ScheduleConfig {
        seed: a.seed,
        ..ScheduleConfig::default()
    };
    if let Some(f) = a.fanout_interval_s {
        schedule.fanout_interval_s = f;
    }
    let fanout_peers = (a.per_leaf.saturating_sub(1)).min(schedule.fanout_max_peers as usize);
    let costs = sim::measure_costs(
        &intra,
        &inter,
        &full,
        &RecheckPlan::default(),
        fanout_peers,
        a.cost_runs,
    )?;
    if let Some(b) = a.budget {
        schedule.budget_bytes_per_s = b;
    }
    if let Some(r) = a.round_s {
        schedule.round_s = r;
    }
    if let Some(c) = a.mesh_pairs_per_round {
        schedule.mesh_pairs_per_round = c;
    }
    let cfg = SimConfig {
        nodes: a.nodes,
        per_leaf: a.per_leaf,
        schedule,
        costs,
        horizon_s: a.hours * 3600.0,
        start_s: a.start_s,
        seed: a.seed,
        failures: a.fail,
        failure_down_s: a.fail_hours * 3600.0,
        quiet_fraction: a.quiet,
        quiet_mean_s: a.quiet_hours * 3600.0,
        false_disagreement: a.false_disagreement,
        changed_links: a.changed_links,
        ..SimConfig::default()
    };
    let report = sim::run(&cfg)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&cfg, &report);
    }
    Ok(())
}

fn time(t: Option<f64>) -> String {
    match t {
        None => "not within the run".into(),
        Some(s) if s < 3600.0 => format!("{:.1} min", s / 60.0),
        Some(s) => format!("{:.2} h", s / 3600.0),
    }
}

fn mb(b: f64) -> String {
    format!("{:.3} MB", b / 1e6)
}

fn spread(s: &Spread, f: impl Fn(f64) -> String) -> String {
    format!("{} (max {})", f(s.mean), f(s.max))
}

fn print_table(cfg: &SimConfig, r: &SimReport) {
    let c = &r.costs;
    let row = |k: &str, v: String| println!("| {k} | {v} |");
    println!("| quantity | value |");
    println!("|---|---|");
    row(
        "cluster",
        format!(
            "{} nodes, {} leaves, {} coverage classes",
            r.nodes, r.leaves, r.classes
        ),
    );
    row(
        "rounds",
        format!(
            "{} s; mesh sessions at once: {}; coverage: {} round(s) per pass, one per block of {}; fan-out: one round per {}; cycle {:.2} h",
            cfg.schedule.round_s,
            match cfg.schedule.mesh_pairs_per_round {
                0 => "no cap".to_string(),
                c => format!("at most {c}"),
            },
            r.coverage_rounds,
            r.block_rounds.map_or("-".into(), |b| b.to_string()),
            if cfg.schedule.fanout_interval_s > 0.0 {
                format!("{} s", cfg.schedule.fanout_interval_s)
            } else {
                "none".into()
            },
            r.cycle_s / 3600.0
        ),
    );
    row(
        "session costs (sim transport, largest of the runs)",
        format!(
            "full sweep intra {} / {:.3} s, inter {} / {:.3} s; re-check intra {} / {:.3} s, inter {} / {:.3} s; fan-out {} / {:.3} s",
            mb(c.intra.full.bytes as f64),
            c.intra.full.seconds,
            mb(c.inter.full.bytes as f64),
            c.inter.full.seconds,
            mb(c.intra.recheck.bytes as f64),
            c.intra.recheck.seconds,
            mb(c.inter.recheck.bytes as f64),
            c.inter.recheck.seconds,
            mb(c.fanout.bytes as f64),
            c.fanout.seconds
        ),
    );
    row(
        "budget per node",
        format!("{}/s", mb(cfg.schedule.budget_bytes_per_s as f64)),
    );
    row(
        "events",
        format!(
            "{} failed node(s) for {:.1} h; quiet share {:.1} % (mean job {:.1} h); false disagreements {} %; changed links {} %",
            r.failed_nodes,
            cfg.failure_down_s / 3600.0,
            100.0 * r.quiet_share,
            cfg.quiet_mean_s / 3600.0,
            100.0 * cfg.false_disagreement,
            100.0 * cfg.changed_links
        ),
    );
    row("every coverage class fresh", time(r.classes_fresh_s));
    row(
        "rounds after that with every class fresh",
        format!("{:.2} %", 100.0 * r.classes_fresh_share),
    );
    row("full mesh, unordered pairs", time(r.mesh_pairs_s));
    row(
        "full mesh, ordered pairs (99 %)",
        time(r.mesh_directed_99_s),
    );
    row("full mesh, ordered pairs", time(r.mesh_directed_s));
    row(
        "ordered pairs measured at the end",
        format!("{:.3} %", 100.0 * r.directed_share_at_end),
    );
    if r.failed_nodes > 0 {
        row(
            "full mesh among nodes that never failed",
            time(r.mesh_directed_unfailed_s),
        );
        row(
            "every pair with a failed end",
            time(r.mesh_directed_failed_s),
        );
    }
    row(
        "control sessions per node per second (requests on them)",
        format!(
            "{} ({})",
            spread(&r.sessions_per_s, |x| format!("{x:.4}")),
            spread(&r.requests_per_s, |x| format!("{x:.4}"))
        ),
    );
    row(
        "probe bytes per node per second",
        format!(
            "{}; busiest node-hour {}/s",
            spread(&r.bytes_per_s, |x| format!("{}/s", mb(x))),
            mb(r.peak_hour_bytes_per_s)
        ),
    );
    row(
        "share of time in sessions",
        spread(&r.busy_share, |x| format!("{:.3} %", 100.0 * x)),
    );
    row(
        "full sweeps / re-checks / fan-outs driven per node",
        format!(
            "{} / {} / {}",
            spread(&r.full_sweeps_per_node, |x| format!("{x:.1}")),
            spread(&r.rechecks_per_node, |x| format!("{x:.0}")),
            spread(&r.fanouts_per_node, |x| format!("{x:.1}"))
        ),
    );
    row(
        "class sweeps / pair sweeps run as re-checks / repairs deferred / rounds skipped (budget)",
        format!(
            "{} / {} / {} / {}",
            r.class_sweeps_deferred, r.pair_sweeps_deferred, r.repairs_deferred, r.budget_skips
        ),
    );
    row(
        "partner skipped (backing off) / unreachable / declined quiet / declined budget",
        format!(
            "{} / {} / {} / {}",
            r.partner_down, r.unreachable, r.declined_quiet, r.declined_budget
        ),
    );
    row(
        "confirmed disagreements / repairs pending at the end / sessions over their round",
        format!(
            "{} / {} / {}",
            r.confirmed_disagreements, r.repairs_pending_at_end, r.overruns
        ),
    );
}
