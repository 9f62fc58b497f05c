//! ngctl: the operator's tool. Thin: flags into the option structs of
//! `netgauged::ops`, the operation, and the strings `netgauged::report`
//! makes of its result, printed.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};
use netgauged::clock::ClockChoice;
use netgauged::export::{self, ExportArgs};
use netgauged::ops::{self, exit, FitArgs, OpsError};
use netgauged::predict::{self, PredictArgs};
use netgauged::report;

#[path = "ngctl/cluster.rs"]
mod cluster;
#[path = "ngctl/contention.rs"]
mod contention;
#[path = "ngctl/flags.rs"]
mod flags;
#[path = "ngctl/plot.rs"]
mod plot;
#[path = "ngctl/progress.rs"]
mod progress;
use flags::*;
use progress::Out;

/// What `ngctl --help` ends with.
const EXIT_CODES: &str = "\
Output: tables for people (80 columns; --wide for every column), --json
(docs/ngctl.schema.json), --csv. Progress and notes go to stderr (-q: none).

Exit codes: 0 done, 1 failed, 2 wrong command line, 3 the daemon is not
running, 4 no segment, 5 no such entry (or several: name one).

Example:
  ngctl probe --transport sim --model L=1100,o=300,g=450,G=0.08";

#[derive(Parser)]
#[command(name = "ngctl", version, term_width = 80, after_help = EXIT_CODES)]
#[command(about = "netgauged's operator tool: measure, inspect and export LogGP(S) parameters")]
struct Cli {
    /// Clock to time with: auto (the TSC when flagged invariant), tsc,
    /// monotonic-raw.
    #[arg(long, global = true, default_value = "auto", value_parser = clock_parser())]
    clock: ClockChoice,
    /// Print JSON (docs/ngctl.schema.json) instead of tables.
    #[arg(long, global = true, conflicts_with = "csv")]
    json: bool,
    /// Print CSV (one row per range or candidate) instead of tables.
    #[arg(long, global = true)]
    csv: bool,
    /// Tables with every column, wider than 80 columns.
    #[arg(long, global = true)]
    wide: bool,
    /// No progress or notes on stderr (errors only).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show the probe clock: source, rate, read cost, agreement with the kernel.
    #[command(after_help = "Example:\n  ngctl clock --long")]
    Clock {
        /// Also calibrate for 2 s against CLOCK_MONOTONIC_RAW.
        #[arg(long)]
        long: bool,
    },
    /// Answer probes (the mirror server).
    #[command(
        after_help = "Example:\n  ngctl serve --transport udp --listen 0.0.0.0:7470 --cpu 1"
    )]
    Serve(ServeFlags),
    /// Re-fit the raw samples of a saved `ngctl probe --json --raw` with this estimator.
    #[command(
        after_help = "Example:\n  ngctl probe --transport sim --json --raw > p.json\n  ngctl fit p.json"
    )]
    Fit(FitFlags),
    /// Measure once, like Netgauge, without the daemon.
    #[command(
        after_help = "Examples:\n  ngctl probe --transport sim --model L=1100,o=300,g=450,G=0.08\n  ngctl probe --transport udp --peer node2:7470 --cpu 2"
    )]
    Probe(ProbeFlags),
    /// Draw a probe or a segment entry: PRTT against size, the fitted model,
    /// protocol changes and o(P), as SVG or PNG.
    #[command(
        after_help = "Examples:\n  ngctl probe --transport sim --json --raw > p.json\n  ngctl plot p.json -o p.svg\n  ngctl plot --peer node2 --transport udp -o node2.png"
    )]
    Plot(plot::PlotFlags),
    /// Is the daemon alive, and what is it doing?
    #[command(after_help = "Example:\n  ngctl status --shm /run/netgauged/segment")]
    Status(SegmentFlags),
    /// How a peer's entries changed: the daemon's sweeps, re-checks, repairs.
    #[command(
        after_help = "Reads the history file the daemon keeps beside its state file (the status\nfile beside the segment names it). Events: sweep, recheck-agree,\nrecheck-disagree (with the largest deviation), repair (re-measured after a\nconfirmed disagreement; flagged changed), stale, restored.\n\nExamples:\n  ngctl history node2\n  ngctl history node2 --transport udp --since 1d --csv"
    )]
    History(HistoryFlags),
    /// Predict collective algorithms from the segment and choose the fastest.
    #[command(after_help = "Example:\n  ngctl predict bcast --ranks 16 --bytes 1048576")]
    Predict(PredictFlags),
    /// Export the segment's parameters for simulators and MPI libraries.
    #[command(
        after_help = "Examples:\n  ngctl export --format loggopsim --bytes 65536\n  ngctl export --format mpich-json --peer node2 --transport udp > tree.json"
    )]
    Export(ExportFlags),
    /// Show every entry of the shared-memory segment.
    #[command(after_help = "Example:\n  ngctl dump --json")]
    Dump(SegmentFlags),
    /// Hold this node quiet (no probes, sessions declined) until resumed (root).
    #[command(after_help = "Example:\n  ngctl quiet --name job4711 --for 2h")]
    Quiet(cluster::QuietFlags),
    /// Let go of `ngctl quiet` as --name, or for every holder (root).
    #[command(after_help = "Example:\n  ngctl resume --name job4711")]
    Resume(cluster::QuietFlags),
    /// Node×node (or group×group) matrices of EEL, g, G and bandwidth.
    #[command(
        after_help = "Examples:\n  ngctl matrix --nodes 'node[001-128]' --topology topology.conf\n  ngctl matrix --segments seg1 seg2 --csv"
    )]
    Matrix(cluster::MatrixFlags),
    /// Bandwidth sharing once: penalties of k flows out, in and both at once.
    #[command(after_help = "Example:\n  ngctl contention --transport sim")]
    Contention(contention::ContentionFlags),
    /// Effective bisection bandwidth of the daemons' nodes (random matchings).
    #[command(after_help = "Example:\n  ngctl ebb --nodes a,b,c,d --rounds 4")]
    Ebb(contention::EbbFlags),
    /// CPU overlap once: how much of a transfer the CPU can compute (Bell et al.).
    #[command(after_help = "Example:\n  ngctl overlap --transport sim --sizes 1,65536")]
    Overlap(contention::OverlapFlags),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  ngctl completions bash > /usr/share/bash-completion/completions/ngctl"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (ngctl.1 and one per subcommand) into a directory.
    #[command(after_help = "Example:\n  ngctl man /usr/local/share/man/man1")]
    Man {
        /// Directory to write into (created if missing).
        dir: PathBuf,
    },
}

fn main() -> ExitCode {
    report::init_terminal();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(e) => {
            eprintln!("ngctl: {e:#}");
            ExitCode::from(
                e.downcast_ref::<OpsError>()
                    .map_or(exit::FAILURE, OpsError::exit_code),
            )
        }
    }
}

/// Refuses `--json` and `--csv` for a command that prints a sentence.
fn text_only(out: &Out, command: &str) -> Result<()> {
    no_csv(out, command)?;
    if out.json {
        return Err(OpsError::Usage(format!("--json: {command} prints a sentence")).into());
    }
    Ok(())
}

/// Refuses `--csv` for a command that has no rows to print.
fn no_csv(out: &Out, command: &str) -> Result<()> {
    if out.csv {
        return Err(OpsError::Usage(format!("--csv: {command} has no rows; use --json")).into());
    }
    Ok(())
}

fn run(cli: Cli) -> Result<()> {
    let clock = cli.clock;
    let out = Out {
        json: cli.json,
        csv: cli.csv,
        wide: cli.wide,
        quiet: cli.quiet,
    };
    match cli.cmd {
        Cmd::Clock { long } => {
            no_csv(&out, "clock")?;
            print!("{}", report::clock(&ops::clock(clock, long)?, out.json)?);
        }
        Cmd::Serve(f) => ops::serve(&f.args(clock), &mut |n| out.note(&n))?,
        Cmd::Probe(f) => {
            let raw = f.raw;
            let a = f.args(clock)?;
            let (mut bar, mut note) = out.progress_bar();
            let res = ops::probe(&a, &mut bar, &mut note);
            bar.0.finish_and_clear();
            if let Some(o) = res? {
                print!("{}", report::probe(&o, &out.report(), raw)?);
            }
        }
        Cmd::Fit(f) => {
            let to = (ops::shm_path(f.shm.as_deref()), f.peer, f.transport);
            let a = options!(f => FitArgs { file; publish: f.publish.then_some(to) });
            let (r, x, sizes) = ops::refit(&a, &mut |n| out.note(&n))?;
            print!(
                "{}",
                report::refit(&r, x.as_ref(), &a.file, sizes, &out.report())?
            );
        }
        Cmd::Dump(f) => {
            let d = ops::dump(&ops::shm_path(f.shm.as_deref()))?;
            print!("{}", report::dump(&d, &out.report())?);
        }
        Cmd::Status(f) => {
            no_csv(&out, "status")?;
            let st = ops::status(&ops::shm_path(f.shm.as_deref()))?;
            print!("{}", report::status(&st, out.json)?);
            st.check_alive()?;
        }
        Cmd::History(f) => {
            let a = netgauged::ops::HistoryArgs {
                shm: ops::shm_path(f.shm.as_deref()),
                file: f.file,
                peer: f.peer,
                transport: f.transport,
                since: f.since,
            };
            print!("{}", report::history(&ops::history(&a)?, &out.report())?);
        }
        Cmd::Predict(f) => {
            let a = options!(f => PredictArgs { collective, ranks, bytes, gamma_ns_per_byte, cores;
                peer: f.entry.peer, transport: f.entry.transport, shm: f.entry.shm });
            print!("{}", report::predict(&predict::run(&a)?, &out.report())?);
        }
        Cmd::Plot(f) => f.run(&out)?,
        Cmd::Quiet(f) => f.quiet(&out)?,
        Cmd::Resume(f) => f.resume(&out)?,
        Cmd::Matrix(f) => f.run(&out)?,
        Cmd::Contention(f) => f.run(clock, &out)?,
        Cmd::Ebb(f) => f.run(&out)?,
        Cmd::Overlap(f) => f.run(clock, &out)?,
        Cmd::Export(f) => {
            if out.json || out.csv {
                return Err(OpsError::Usage(
                    "--json/--csv: export writes its consumer's format (--format)".into(),
                )
                .into());
            }
            let a = options!(f => ExportArgs { format, comm_sizes, max_bytes, gamma_ns_per_byte, cores, margin, loggopsim_unit, bytes, hosts, trials;
                shm: f.entry.shm, peer: f.entry.peer, transport: f.entry.transport });
            print!("{}", export::run(&a)?);
        }
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "ngctl", &mut std::io::stdout());
        }
        Cmd::Man { dir } => {
            for path in progress::write_man_pages(Cli::command(), &dir)? {
                out.say(&format!("wrote {}", path.display()));
            }
        }
    }
    Ok(())
}
