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
use netgauged::transport::raw_eth::{self, RawEthOptions, RawEthTransport, RxMode};
use netgauged::transport::sim::{SimParams, SimTransport};
use netgauged::transport::udp::{UdpOptions, UdpTransport};
use netgauged::transport::Transport;

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
    /// Raw Ethernet (AF_PACKET, needs CAP_NET_RAW).
    Raw,
}

/// Options of `--transport raw`.
#[derive(clap::Args)]
struct RawArgs {
    /// Network interface for `--transport raw`.
    #[arg(long)]
    interface: Option<String>,
    /// Receive path of `--transport raw`: ring (PACKET_MMAP) or recv.
    #[arg(long, default_value = "ring")]
    raw_rx: RxMode,
}

impl RawArgs {
    fn get(&self) -> Result<(&str, RawEthOptions)> {
        let ifname = self
            .interface
            .as_deref()
            .context("--interface IF is required for raw")?;
        let opts = RawEthOptions {
            rx: self.raw_rx,
            ..RawEthOptions::default()
        };
        Ok((ifname, opts))
    }
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
        #[command(flatten)]
        raw: RawArgs,
    },
    /// Measure once, like Netgauge, without the daemon.
    Probe {
        #[arg(long, value_enum)]
        transport: TransportName,
        /// HOST:PORT of an `ngctl serve` (udp).
        #[arg(long)]
        peer: Option<String>,
        /// MAC of the `ngctl serve --transport raw` interface (raw).
        #[arg(long)]
        peer_mac: Option<String>,
        #[command(flatten)]
        raw_args: RawArgs,
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
    },
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
            raw,
        } => match transport {
            TransportName::Sim => bail!("`serve` answers real transports; sim needs no server"),
            TransportName::Udp => {
                let mut t = UdpTransport::listen(listen, UdpOptions::default())
                    .with_context(|| format!("cannot listen on {listen}"))?;
                eprintln!("ngctl serve: answering udp probes on {}", t.local_addr()?);
                serve_loop(&mut t, idle_exit_s)
            }
            TransportName::Raw => {
                let (ifname, opts) = raw.get()?;
                let mut t = RawEthTransport::listen(ifname, opts)
                    .with_context(|| format!("cannot open raw Ethernet on {ifname}"))?;
                let mac = raw_eth::format_mac(&t.interface().mac);
                eprintln!(
                    "ngctl serve: answering raw probes on {ifname} ({mac}, {:?})",
                    t.rx_mode()
                );
                let r = serve_loop(&mut t, idle_exit_s);
                eprintln!("ngctl serve: ignored frames: {:?}", t.ignored());
                r
            }
        },
        Cmd::Probe {
            transport,
            peer,
            peer_mac,
            raw_args,
            model,
            max_size,
            min_size,
            fanout_peers,
            timeout_ms,
            schedule,
            resamples,
            json,
            raw,
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
            let result = match transport {
                TransportName::Raw => {
                    let (ifname, o) = raw_args.get()?;
                    let mac =
                        peer_mac.context("--peer-mac AA:BB:CC:DD:EE:FF is required for raw")?;
                    let mac = raw_eth::parse_mac(&mac)?;
                    let who = format!("{} on {ifname}", raw_eth::format_mac(&mac));
                    let clock = HostClock::detect();
                    let mut t = RawEthTransport::connect(ifname, mac, o)
                        .with_context(|| format!("cannot start a raw probe session with {who}"))?;
                    let r = probe::run(&mut t, &clock, 0, &opts, &mut bar)
                        .with_context(|| format!("raw probe of {who} failed"))?;
                    eprintln!("ngctl probe: ignored frames: {:?}", t.ignored());
                    r
                }
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

fn resolve(peer: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    peer.to_socket_addrs()
        .with_context(|| format!("cannot resolve {peer}"))?
        .next()
        .with_context(|| format!("{peer} resolves to no address"))
}

/// The mirror server, until `idle_exit_s` of silence (0: never).
fn serve_loop<T: Transport>(t: &mut T, idle_exit_s: u64) -> Result<()> {
    let idle = Duration::from_millis(500);
    let limit = idle_exit_s * 2;
    let mut quiet = 0u64;
    let mut last_msgs = 0u64;
    let stats = netgauged::pattern::prtt::serve(t, idle, |st| {
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
