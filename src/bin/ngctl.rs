//! ngctl: the operator's tool. Thin: parsing and printing only.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use netgauged::clock::{clock_info, HostClock, VirtualClock};
use netgauged::probe::{self, ProbeOptions};
use netgauged::report;
use netgauged::sweep::{Progress, SweepConfig};
use netgauged::transport::sim::{SimParams, SimTransport};
use netgauged::transport::udp::{UdpOptions, UdpTransport};

#[derive(Parser)]
#[command(name = "ngctl", version, about = "netgauged operator tool")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TransportName {
    Sim,
    Udp,
    /// MPI point-to-point (build with `--features mpi`, run under mpirun).
    Mpi,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show the probe clock: source, rate, read cost, agreement with the kernel.
    Clock {
        #[arg(long)]
        json: bool,
        /// Also calibrate for 2 s against CLOCK_MONOTONIC_RAW.
        #[arg(long)]
        long: bool,
    },
    /// Answer probes (the mirror server).
    Serve {
        #[arg(long, value_enum)]
        transport: TransportName,
        #[arg(long, default_value = "0.0.0.0:7470")]
        listen: SocketAddr,
        /// Exit after this many seconds without a message (0: never).
        #[arg(long, default_value_t = 0)]
        idle_exit_s: u64,
    },
    /// Measure once, like Netgauge, without the daemon.
    Probe {
        #[arg(long, value_enum)]
        transport: TransportName,
        /// HOST:PORT of an `ngctl serve` (udp).
        #[arg(long)]
        peer: Option<String>,
        /// Ground truth of the sim transport, e.g. L=1100,o=300,g=450,G=0.08,S=16384
        #[arg(long)]
        model: Option<String>,
        #[arg(long, default_value_t = 128 * 1024)]
        max_size: u64,
        #[arg(long, default_value_t = 1)]
        min_size: u64,
        /// LogfP 1:P−P:1 up to this many peers (sim: default 16; udp: 0).
        #[arg(long)]
        fanout_peers: Option<usize>,
        /// Deadline of every wait for an answer, in ms.
        #[arg(long, default_value_t = 250)]
        timeout_ms: u64,
        /// Sizes and repetitions: adaptive (default) or Netgauge's fixed schedule.
        #[arg(long, default_value = "adaptive")]
        schedule: String,
        /// Bootstrap resamples for the 95 % intervals.
        #[arg(long, default_value_t = 200)]
        resamples: usize,
        #[arg(long)]
        json: bool,
        /// Include the raw samples in the JSON.
        #[arg(long)]
        raw: bool,
        /// Publish the result into the segment (see --shm).
        #[arg(long)]
        publish: bool,
        /// Segment file (default $NETGAUGE_SEGMENT or /dev/shm/netgauged).
        #[arg(long)]
        shm: Option<std::path::PathBuf>,
    },
    /// Predict collective algorithms from the segment and choose the fastest.
    Predict(netgauged::predict::PredictArgs),
    /// Export the segment's parameters for simulators and MPI libraries.
    Export(netgauged::export::ExportArgs),
}

struct Bar(Option<indicatif::ProgressBar>);

impl Progress for Bar {
    fn sizes(&mut self, done: usize, total: usize, size_bytes: u64) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(format!("{size_bytes} B"));
        }
    }
}

fn progress_bar(json: bool) -> Bar {
    if json || !std::io::stderr().is_terminal() {
        return Bar(None);
    }
    let bar = indicatif::ProgressBar::new(1);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} sizes {pos}/{len} {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    Bar(Some(bar))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ngctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Predict(args) => netgauged::predict::run(&args),
        Cmd::Export(args) => netgauged::export::run(&args),
        Cmd::Clock { json, long } => {
            let clock = HostClock::detect();
            let info = clock_info(&clock, long);
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!("{info}");
            }
            Ok(())
        }
        Cmd::Serve {
            transport,
            listen,
            idle_exit_s,
        } => {
            if transport != TransportName::Udp {
                bail!("`serve` answers real transports; sim needs no server");
            }
            let mut t = UdpTransport::listen(listen, UdpOptions::default())
                .with_context(|| format!("cannot listen on {listen}"))?;
            eprintln!("ngctl serve: answering udp probes on {}", t.local_addr()?);
            let idle = Duration::from_millis(500);
            let limit = idle_exit_s * 2;
            let mut quiet = 0u64;
            let mut last_msgs = 0u64;
            let stats = netgauged::pattern::prtt::serve(&mut t, idle, |st| {
                if st.messages == last_msgs {
                    quiet += 1;
                } else {
                    quiet = 0;
                    last_msgs = st.messages;
                }
                limit == 0 || quiet <= limit
            })?;
            eprintln!(
                "ngctl serve: idle, exiting after {} messages and {} answers",
                stats.messages, stats.answers
            );
            Ok(())
        }
        Cmd::Probe {
            transport,
            peer,
            model,
            max_size,
            min_size,
            fanout_peers,
            timeout_ms,
            schedule,
            resamples,
            json,
            raw,
            publish,
            shm,
        } => {
            let mut sweep = match schedule.as_str() {
                "adaptive" => SweepConfig::default(),
                "netgauge" => SweepConfig::netgauge(max_size),
                other => bail!("unknown schedule {other:?} (adaptive or netgauge)"),
            };
            sweep.max_size_bytes = max_size;
            sweep.min_size_bytes = min_size;
            sweep.timeout = Duration::from_millis(timeout_ms);
            let mut opts = ProbeOptions {
                sweep,
                resamples,
                ..ProbeOptions::default()
            };
            let mut bar = progress_bar(json);
            let mut peer_name = peer.clone().unwrap_or_else(|| "sim".into());
            let result = match transport {
                TransportName::Mpi => match probe_mpi(&mut opts, fanout_peers, &mut bar)? {
                    Some((r, name)) => {
                        peer_name = name;
                        r
                    }
                    None => return Ok(()), // a serving rank
                },
                TransportName::Sim => {
                    let params: SimParams = model
                        .as_deref()
                        .unwrap_or("L=1100,o=300,g=450,G=0.08")
                        .parse()
                        .context("bad --model")?;
                    opts.seed = params.seed;
                    let peers = fanout_peers.unwrap_or(16).max(1);
                    opts.fanout_peers = Some(peers);
                    let clock = VirtualClock::new();
                    let mut t = SimTransport::new(params, clock.clone(), peers);
                    probe::run(&mut t, &clock, 0, &opts, &mut bar)?
                }
                TransportName::Udp => {
                    let peer = peer.context("--peer HOST:PORT is required for udp")?;
                    let addr = resolve(&peer)?;
                    let clock = HostClock::detect();
                    let mut t = UdpTransport::connect(addr, UdpOptions::default())
                        .with_context(|| format!("cannot start a probe session with {peer}"))?;
                    probe::run(&mut t, &clock, 0, &opts, &mut bar)
                        .with_context(|| format!("probe of {peer} failed"))?
                }
            };
            if let Some(b) = &bar.0 {
                b.finish_and_clear();
            }
            let out = result.to_json();
            if publish {
                let path = netgauged::predict::segment_path(shm.as_deref());
                let name = format!("{transport:?}").to_lowercase();
                let entry = netgauged::publish::entry_from_probe(&result, &peer_name, &name);
                netgauged::publish::publish(&path, &entry)?;
                eprintln!(
                    "ngctl probe: published ({peer_name}, {name}) into {}",
                    path.display()
                );
            }
            if json {
                let mut v = serde_json::to_value(&out)?;
                if raw {
                    v["raw"] = serde_json::json!({
                        "sizes": result.samples,
                        "fanout": result.fanout,
                    });
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                println!(
                    "probe over {:?} ({} sizes, {} … {} B):",
                    transport, out.sizes, min_size, max_size
                );
                print!("{}", report::probe_table(&out));
            }
            Ok(())
        }
    }
}

#[cfg(feature = "mpi")]
fn probe_mpi(
    opts: &mut ProbeOptions,
    fanout_peers: Option<usize>,
    bar: &mut Bar,
) -> Result<Option<(probe::ProbeResult, String)>> {
    let _universe =
        netgauged::transport::mpi::initialize().context("MPI is already initialized")?;
    let (_, size) = netgauged::transport::mpi::world_rank_size();
    opts.fanout_peers = fanout_peers.or(Some(size - 1)).filter(|&p| p >= 2);
    let probe = netgauged::transport::mpi::run_probe(opts, bar)?;
    Ok(probe.map(|p| (p.result, p.peer_name)))
}

#[cfg(not(feature = "mpi"))]
fn probe_mpi(
    _opts: &mut ProbeOptions,
    _fanout_peers: Option<usize>,
    _bar: &mut Bar,
) -> Result<Option<(probe::ProbeResult, String)>> {
    bail!("this ngctl was built without MPI: rebuild with `cargo build --features mpi`")
}

fn resolve(peer: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    peer.to_socket_addrs()
        .with_context(|| format!("cannot resolve {peer}"))?
        .next()
        .with_context(|| format!("{peer} resolves to no address"))
}
