//! ngctl: the operator's tool. Thin: parsing and printing only.

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use netgauged::clock::{clock_info, ClockChoice, HostClock, VirtualClock};
use netgauged::model::exchange::{fit_exchange, ExchangeFit, ExchangeRaw};
use netgauged::probe::{self, ProbeOptions};
use netgauged::publish::entry_from_exchange;
use netgauged::report;
use netgauged::sweep::{Progress, SweepConfig};
use netgauged::transport::raw_eth::{self, RawEthOptions, RawEthTransport, RxMode};
use netgauged::transport::sim::{SimParams, SimTransport};
use netgauged::transport::udp::{UdpOptions, UdpTransport};

#[derive(Parser)]
#[command(name = "ngctl", version, about = "netgauged operator tool")]
struct Cli {
    /// Clock to time with: auto (the TSC when flagged invariant, else
    /// CLOCK_MONOTONIC_RAW), tsc (also when not flagged invariant, if two
    /// calibrations agree), monotonic-raw.
    #[arg(long, global = true, value_enum, default_value_t = ClockChoice::Auto)]
    clock: ClockChoice,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TransportName {
    Sim,
    Udp,
    /// One-sided RDMA write (verbs; needs --device).
    Rdma,
    /// Two-sided "Myrinet-style" verbs messages with eager/rendezvous.
    Msg,
    /// Raw Ethernet (AF_PACKET, needs CAP_NET_RAW).
    Raw,
    /// MPI point-to-point (build with `--features mpi`, run under mpirun).
    Mpi,
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

/// Flags of the verbs transports (rdma, msg).
#[derive(clap::Args, Clone, Debug)]
struct VerbsArgs {
    /// RDMA device (e.g. rxe0, mlx5_0).
    #[arg(long)]
    device: Option<String>,
    /// GID index (RoCE); default: the first RoCE v2 GID (IPv4-mapped preferred).
    #[arg(long)]
    gid_index: Option<u32>,
    /// msg: largest eager message; larger ones use the rendezvous.
    #[arg(long, default_value_t = 16 * 1024)]
    eager_max: usize,
    /// rdma: largest inline write. Default: 0 on software devices (rxe, siw:
    /// their inline path is a copy in the kernel, and perftest turns it off
    /// there too), 256 B otherwise.
    #[arg(long)]
    inline_max: Option<u32>,
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
        verbs: VerbsArgs,
        /// rdma/msg: largest message accepted.
        #[arg(long, default_value_t = 1 << 20)]
        max_size: u64,
        #[command(flatten)]
        raw: RawArgs,
    },
    /// Re-fit a saved probe: the raw samples of `ngctl probe --json --raw`
    /// through this version's estimator (LogGP(S), intervals, LogfP).
    Fit {
        /// The saved `ngctl probe --json --raw` output ("-": stdin).
        file: String,
        #[arg(long)]
        json: bool,
        /// Write the re-fitted entry into the shared-memory segment.
        #[arg(long)]
        publish: bool,
        /// Segment path (default /dev/shm/netgauged, or $NETGAUGE_SEGMENT).
        #[arg(long)]
        shm: Option<String>,
        /// Peer and transport names of the published entry.
        #[arg(long, default_value = "refit")]
        peer: String,
        #[arg(long, default_value = "mpi")]
        transport: String,
    },
    /// Measure once, like Netgauge, without the daemon.
    Probe {
        #[arg(long, value_enum)]
        transport: TransportName,
        /// HOST:PORT of an `ngctl serve` (udp); rdma/msg: one or several,
        /// comma-separated (for --fanout-peers).
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
        /// LogfP 1:P−P:1 up to this many peers (sim: default 16; udp: 0;
        /// rdma/msg: P queue pairs, spread round robin over the servers of
        /// --peer, default one per server).
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
        /// Write the result into the shared-memory segment.
        #[arg(long)]
        publish: bool,
        /// Segment path (default /dev/shm/netgauged, or $NETGAUGE_SEGMENT).
        #[arg(long)]
        shm: Option<String>,
        #[command(flatten)]
        verbs: VerbsArgs,
        /// Most repetitions per size (fewer: a quicker, rougher sweep).
        #[arg(long)]
        max_reps: Option<u32>,
        /// Fewest repetitions per size, also for large sizes that the byte
        /// budget would cut (more: a steadier fit where traffic is free,
        /// e.g. MPI over shared memory).
        #[arg(long)]
        min_reps: Option<u32>,
    },
    /// Is the daemon alive, and what is it doing?
    Status {
        #[arg(long)]
        shm: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Predict collective algorithms from the segment and choose the fastest.
    Predict(netgauged::predict::PredictArgs),
    /// Export the segment's parameters for simulators and MPI libraries.
    Export(netgauged::export::ExportArgs),
    /// Show every entry of the shared-memory segment.
    Dump {
        #[arg(long)]
        shm: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

fn shm_path(shm: Option<String>) -> String {
    shm.or_else(|| std::env::var(netgauge::PATH_ENV).ok())
        .unwrap_or_else(|| netgauge::DEFAULT_PATH.to_string())
}

fn node_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Capacity of a segment `ngctl probe --publish` creates (the daemon sizes
/// its own from its peer list).
const PROBE_SEGMENT_ENTRIES: usize = 64;

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
    // A reader that stops early (`ngctl dump | head`) ends ngctl quietly, as
    // it does any Unix filter, instead of a panic in println!.
    // SAFETY: called before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
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
    let clock_choice = cli.clock;
    match cli.cmd {
        Cmd::Predict(args) => netgauged::predict::run(&args),
        Cmd::Export(args) => netgauged::export::run(&args),
        Cmd::Clock { json, long } => {
            let clock = HostClock::choose(clock_choice)?;
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
            verbs,
            max_size,
            raw,
        } => {
            if matches!(transport, TransportName::Rdma | TransportName::Msg) {
                return verbs_cli::serve(
                    transport,
                    listen,
                    idle_exit_s,
                    &verbs,
                    max_size,
                    HostClock::choose(clock_choice)?,
                );
            }
            match transport {
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
                _ => bail!("`serve` answers real transports; sim needs no server"),
            }
        }
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
            publish,
            shm,
            verbs,
            max_reps,
            min_reps,
        } => {
            let mut sweep = match schedule.as_str() {
                "adaptive" => SweepConfig::default(),
                "netgauge" => SweepConfig::netgauge(max_size),
                other => bail!("unknown schedule {other:?} (adaptive or netgauge)"),
            };
            sweep.max_size_bytes = max_size;
            sweep.min_size_bytes = min_size;
            sweep.timeout = Duration::from_millis(timeout_ms);
            if let Some(r) = max_reps {
                sweep.max_reps = r.max(1);
                sweep.min_reps = sweep.min_reps.min(sweep.max_reps);
            }
            if let Some(r) = min_reps {
                sweep.min_reps = r.max(1);
                sweep.max_reps = sweep.max_reps.max(sweep.min_reps);
            }
            let mut opts = ProbeOptions {
                sweep,
                resamples,
                ..ProbeOptions::default()
            };
            let mut bar = progress_bar(json);
            let mut clock_desc = "virtual (sim)".to_string();
            let mut mpi_peer: Option<String> = None;
            let mut exchange_raw: Option<ExchangeRaw> = None;
            let result = match transport {
                TransportName::Mpi => match probe_mpi(&mut opts, fanout_peers, &mut bar)? {
                    Some((r, name, x)) => {
                        mpi_peer = Some(name);
                        exchange_raw = x;
                        r
                    }
                    None => return Ok(()), // a serving rank
                },
                TransportName::Raw => {
                    let (ifname, o) = raw_args.get()?;
                    let mac = peer_mac
                        .clone()
                        .context("--peer-mac AA:BB:CC:DD:EE:FF is required for raw")?;
                    let mac = raw_eth::parse_mac(&mac)?;
                    let who = format!("{} on {ifname}", raw_eth::format_mac(&mac));
                    let clock = HostClock::choose(clock_choice)?;
                    clock_desc =
                        format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
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
                TransportName::Rdma | TransportName::Msg => {
                    let peer = peer
                        .clone()
                        .context("--peer HOST:PORT is required for rdma/msg")?;
                    let addrs = peer
                        .split(',')
                        .map(|p| resolve(p.trim()))
                        .collect::<Result<Vec<_>>>()?;
                    let clock = HostClock::choose(clock_choice)?;
                    clock_desc =
                        format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
                    let target = Target {
                        servers: &addrs,
                        fanout_peers,
                    };
                    verbs_cli::probe(
                        transport, target, &verbs, max_size, &mut opts, &mut bar, clock,
                    )
                    .with_context(|| format!("probe of {peer} failed"))?
                }
                TransportName::Udp => {
                    let peer = peer
                        .clone()
                        .context("--peer HOST:PORT is required for udp")?;
                    let addr = resolve(&peer)?;
                    let clock = HostClock::choose(clock_choice)?;
                    clock_desc =
                        format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
                    let mut t = UdpTransport::connect(addr, UdpOptions::default())
                        .with_context(|| format!("cannot start a probe session with {peer}"))?;
                    probe::run(&mut t, &clock, 0, &opts, &mut bar)
                        .with_context(|| format!("probe of {peer} failed"))?
                }
            };
            if let Some(b) = &bar.0 {
                b.finish_and_clear();
            }
            let exchange = exchange_raw
                .as_ref()
                .and_then(|x| fit_exchange(x.ranks, &x.sizes));
            if publish {
                let path = shm_path(shm);
                let peer_name = match transport {
                    TransportName::Sim => "sim".to_string(),
                    TransportName::Mpi => mpi_peer.clone().unwrap_or_else(|| "rank1".into()),
                    TransportName::Raw => peer.clone().or(peer_mac.clone()).unwrap_or_default(),
                    _ => peer.clone().unwrap_or_default(),
                };
                let name = format!("{transport:?}").to_lowercase();
                publish_result(
                    &path,
                    &peer_name,
                    &name,
                    &clock_desc,
                    &result,
                    exchange.as_ref(),
                )?;
            }
            let out = result.to_json();
            let raw = raw.then(|| {
                serde_json::json!({
                    "sizes": result.samples,
                    "fanout": result.fanout,
                    "exchange": exchange_raw,
                })
            });
            let title = format!(
                "probe over {:?} ({} sizes, {} … {} B):",
                transport, out.sizes, min_size, max_size
            );
            print_result(&out, exchange.as_ref(), json, raw, &title)
        }
        Cmd::Fit {
            file,
            json,
            publish,
            shm,
            peer,
            transport,
        } => refit(&file, json, publish.then_some((shm, peer, transport))),
        Cmd::Dump { shm, json } => dump(shm, json),
        Cmd::Status { shm, json } => status(shm, json),
    }
}

/// Write `result` into the segment at `path` as the entry (peer, transport).
fn publish_result(
    path: &str,
    peer: &str,
    transport: &str,
    clock_desc: &str,
    result: &probe::ProbeResult,
    exchange: Option<&ExchangeFit>,
) -> Result<()> {
    let entry = netgauged::publish::entry_from_probe(peer, transport, result);
    let mut w = netgauge::SegmentWriter::create_or_open(
        path,
        PROBE_SEGMENT_ENTRIES,
        &node_name(),
        clock_desc,
    )
    .with_context(|| format!("cannot open the segment {path}"))?;
    w.upsert(&entry)
        .with_context(|| format!("cannot publish into {path}"))?;
    eprintln!("published {peer}/{transport} into {path}");
    if let Some(x) = exchange.and_then(|x| entry_from_exchange(peer, transport, x)) {
        w.upsert(&x)
            .with_context(|| format!("cannot publish into {path}"))?;
        eprintln!("published {peer}/{} into {path}", x.transport);
    }
    Ok(())
}

/// The raw part of `ngctl probe --json --raw`.
#[derive(serde::Deserialize)]
struct SavedRaw {
    sizes: Vec<netgauged::model::SizeSamples>,
    #[serde(default)]
    fanout: Vec<netgauged::model::FanoutSamples>,
    #[serde(default)]
    exchange: Option<ExchangeRaw>,
}

#[derive(serde::Deserialize)]
struct SavedProbe {
    raw: Option<SavedRaw>,
}

/// Where `ngctl fit --publish` writes: segment path, peer, transport.
type PublishTo = (Option<String>, String, String);

fn refit(file: &str, json: bool, publish: Option<PublishTo>) -> Result<()> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).context("cannot read stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?
    };
    let saved: SavedProbe = serde_json::from_str(&text)
        .with_context(|| format!("{file} is not the JSON of `ngctl probe --json --raw`"))?;
    let raw = saved.raw.with_context(|| {
        format!("{file} has no raw samples (save the probe with `ngctl probe --json --raw`)")
    })?;
    let n = raw.sizes.len();
    let result = probe::fit(raw.sizes, raw.fanout, &ProbeOptions::default());
    let exchange = raw
        .exchange
        .as_ref()
        .and_then(|x| fit_exchange(x.ranks, &x.sizes));
    if let Some((shm, peer, transport)) = publish {
        let path = shm_path(shm);
        publish_result(
            &path,
            &peer,
            &transport,
            &format!("re-fit of {file}"),
            &result,
            exchange.as_ref(),
        )?;
    }
    let title = format!("re-fit of {file} ({n} sizes):");
    print_result(&result.to_json(), exchange.as_ref(), json, None, &title)
}

/// What `ngctl probe` and `ngctl fit` print: the JSON of the fit (with the
/// exchange fit and, for `--raw`, the samples), or the tables under `title`.
fn print_result(
    out: &probe::ProbeJson,
    exchange: Option<&ExchangeFit>,
    json: bool,
    raw: Option<serde_json::Value>,
    title: &str,
) -> Result<()> {
    if json {
        let mut v = serde_json::to_value(out)?;
        if let Some(x) = exchange {
            v["exchange"] = serde_json::to_value(x)?;
        }
        if let Some(r) = raw {
            v["raw"] = r;
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{title}");
        print!("{}", report::probe_table(out));
        if let Some(x) = exchange {
            print!("{}", report::exchange_table(x));
        }
    }
    Ok(())
}

fn dump(shm: Option<String>, json: bool) -> Result<()> {
    let path = shm_path(shm);
    let reader = netgauge::Reader::open(&path)
        .map_err(|e| anyhow::anyhow!("cannot read the segment {path}: {e}"))?;
    let info = reader
        .info()
        .map_err(|e| anyhow::anyhow!("the segment {path} is not valid: {e}"))?;
    let entries = reader
        .snapshot()
        .map_err(|e| anyhow::anyhow!("the segment {path} is not valid: {e}"))?;
    let now = netgauged::publish::unix_now_ns();
    let alive = info.heartbeat_unix_ns != 0
        && now.saturating_sub(info.heartbeat_unix_ns) < netgauge::DEFAULT_STALE_AFTER_NS;
    if json {
        let v = serde_json::json!({
            "node": info.node_name,
            "generation": info.generation,
            "writer_pid": info.writer_pid,
            "writer_alive": alive,
            "clock": info.clock_desc,
            "entries": entries.iter().map(|e| netgauged::publish::entry_json(e, now)).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "segment {path}: node {}, generation {:016x}, writer pid {} ({}), clock {}",
        info.node_name,
        info.generation,
        info.writer_pid,
        if alive {
            "alive"
        } else {
            "not running: values are as last published"
        },
        info.clock_desc
    );
    if entries.is_empty() {
        println!("  (no entries)");
    }
    for e in &entries {
        let v = netgauged::publish::entry_json(e, now);
        let probe = netgauged::publish::entry_probe_json(e);
        println!(
            "\n{} over {} — measured {:.1} s ago, {} samples, flags {}",
            e.peer,
            e.transport,
            v["age_s"].as_f64().unwrap_or(f64::NAN),
            e.samples,
            netgauged::publish::flag_names(e.flags).join(",")
        );
        print!("{}", report::probe_table(&probe));
    }
    Ok(())
}

fn status(shm: Option<String>, json: bool) -> Result<()> {
    let path = shm_path(shm);
    let reader = netgauge::Reader::open(&path)
        .map_err(|e| anyhow::anyhow!("cannot read the segment {path}: {e}"))?;
    let info = reader
        .info()
        .map_err(|e| anyhow::anyhow!("the segment {path} is not valid: {e}"))?;
    let now = netgauged::publish::unix_now_ns();
    let beat_age_s = now.saturating_sub(info.heartbeat_unix_ns) as f64 / 1e9;
    let alive = info.heartbeat_unix_ns != 0
        && now.saturating_sub(info.heartbeat_unix_ns) < netgauge::DEFAULT_STALE_AFTER_NS;
    let status_path = netgauged::daemon::status_path(std::path::Path::new(&path));
    let st: Option<serde_json::Value> = std::fs::read(&status_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if json {
        let v = serde_json::json!({
            "alive": alive,
            "heartbeat_age_s": beat_age_s,
            "generation": format!("{:016x}", info.generation),
            "node": info.node_name,
            "writer_pid": info.writer_pid,
            "daemon": st,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "netgauged on {}: {} (pid {}, generation {:016x}, heartbeat {:.1} s ago)",
            info.node_name,
            if alive { "alive" } else { "NOT RUNNING" },
            info.writer_pid,
            info.generation,
            beat_age_s
        );
        if let Some(st) = &st {
            println!(
                "  budget {} B/s, used {:.0} B/s on average ({} B in {:.0} s); control rejects {}",
                st["budget_bytes_per_s"],
                st["spent_bytes_per_s"].as_f64().unwrap_or(0.0),
                st["spent_bytes"],
                st["uptime_s"].as_f64().unwrap_or(0.0),
                st["control_rejects"]
            );
            for p in st["peers"].as_array().into_iter().flatten() {
                let last = p["last_probe_unix_ns"]
                    .as_u64()
                    .map_or("never".to_string(), |t| {
                        format!("{:.0} s ago", now.saturating_sub(t) as f64 / 1e9)
                    });
                println!(
                    "  {:<20} {:<8} {:<4} last probe {last}, failures {}{}",
                    p["name"].as_str().unwrap_or("?"),
                    p["phase"].as_str().unwrap_or("?"),
                    p["transport"].as_str().unwrap_or("?"),
                    p["failures"],
                    p["last_error"]
                        .as_str()
                        .map_or(String::new(), |e| format!(" ({e})"))
                );
            }
        }
    }
    if alive {
        Ok(())
    } else {
        bail!("the daemon writing {path} is not running")
    }
}

#[cfg(feature = "mpi")]
fn probe_mpi(
    opts: &mut ProbeOptions,
    fanout_peers: Option<usize>,
    bar: &mut Bar,
) -> Result<Option<(probe::ProbeResult, String, Option<ExchangeRaw>)>> {
    let _universe =
        netgauged::transport::mpi::initialize().context("MPI is already initialized")?;
    let (_, size) = netgauged::transport::mpi::world_rank_size();
    opts.fanout_peers = fanout_peers.or(Some(size - 1)).filter(|&p| p >= 2);
    let probe = netgauged::transport::mpi::run_probe(opts, bar)?;
    Ok(probe.map(|p| {
        let x = (!p.exchange.is_empty()).then_some(ExchangeRaw {
            ranks: p.ranks,
            sizes: p.exchange,
        });
        (p.result, p.peer_name, x)
    }))
}

#[cfg(not(feature = "mpi"))]
fn probe_mpi(
    _opts: &mut ProbeOptions,
    _fanout_peers: Option<usize>,
    _bar: &mut Bar,
) -> Result<Option<(probe::ProbeResult, String, Option<ExchangeRaw>)>> {
    bail!("this ngctl was built without MPI: rebuild with `cargo build --features mpi`")
}

fn resolve(peer: &str) -> Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    peer.to_socket_addrs()
        .with_context(|| format!("cannot resolve {peer}"))?
        .next()
        .with_context(|| format!("{peer} resolves to no address"))
}

/// The verbs arms of `serve` and `probe` (rdma, msg).
#[cfg(feature = "verbs")]
mod verbs_cli {
    use std::net::{SocketAddr, TcpListener};
    use std::time::Duration;

    use anyhow::{bail, Context, Result};
    use netgauged::clock::HostClock;
    use netgauged::pattern::prtt;
    use netgauged::probe::{self, ProbeOptions, ProbeResult};
    use netgauged::sweep::Progress;
    use netgauged::transport::multi::Multi;
    use netgauged::transport::rdma_write::{RdmaWriteTransport, VerbsOptions};
    use netgauged::transport::verbs_msg::{MsgOptions, VerbsMsgTransport};
    use netgauged::transport::Transport;
    use netgauged::verbs::exchange::{self, ExchangeError, SideChannel};
    use netgauged::verbs::VerbsError;

    use super::{Target, TransportName, VerbsArgs};

    fn options(v: &VerbsArgs, max_size: u64, clock: HostClock) -> Result<VerbsOptions> {
        let device = v
            .device
            .as_deref()
            .context("--device DEV is required for rdma/msg (see `ibv_devices`)")?;
        let mut o = VerbsOptions::new(device);
        o.link.gid_index = v.gid_index;
        let software = device.starts_with("rxe") || device.starts_with("siw");
        o.link.max_inline_bytes =
            v.inline_max
                .unwrap_or(if software { 0 } else { o.link.max_inline_bytes });
        o.max_msg_bytes = usize::try_from(max_size).context("--max-size too large")?;
        o.clock = clock;
        Ok(o)
    }

    /// One queue pair: the plain probe. Several (`--fanout-peers P`, or
    /// several servers): P queue pairs, round robin over the servers, as one
    /// multi-peer transport; the LogGP sweep runs on the first, then the
    /// 1:P−P:1 fan-out over all of them.
    pub fn probe(
        which: TransportName,
        target: Target<'_>,
        v: &VerbsArgs,
        max_size: u64,
        opts: &mut ProbeOptions,
        bar: &mut dyn Progress,
        clock: HostClock,
    ) -> Result<ProbeResult> {
        let Target {
            servers,
            fanout_peers,
        } = target;
        let o = options(v, max_size, clock)?;
        let qps = fanout_peers.unwrap_or(servers.len()).max(1);
        if servers.is_empty() {
            bail!("no server given");
        }
        if which == TransportName::Rdma {
            let mut links = Vec::with_capacity(qps);
            for i in 0..qps {
                let t = RdmaWriteTransport::connect(servers[i % servers.len()], &o)
                    .with_context(|| format!("queue pair {i}"))?;
                tracing::info!(
                    "rdma: {} inline ≤ {} B, path MTU {} B",
                    t.device(),
                    t.max_inline_bytes(),
                    t.path_mtu_bytes()
                );
                links.push(t);
            }
            run(links, &clock, opts, bar)
        } else {
            let mo = MsgOptions {
                verbs: o,
                eager_max_bytes: v.eager_max,
            };
            let mut links = Vec::with_capacity(qps);
            for i in 0..qps {
                links.push(
                    VerbsMsgTransport::connect(servers[i % servers.len()], &mo)
                        .with_context(|| format!("queue pair {i}"))?,
                );
            }
            let r = run(links, &clock, opts, bar)?;
            Ok(r)
        }
    }

    fn run<T: Transport>(
        mut links: Vec<T>,
        clock: &HostClock,
        opts: &mut ProbeOptions,
        bar: &mut dyn Progress,
    ) -> Result<ProbeResult> {
        // The sweep warms the path (and the fan-out every queue pair).
        if links.len() == 1 {
            let mut t = links.pop().expect("one link");
            return Ok(probe::run(&mut t, clock, 0, opts, bar)?);
        }
        opts.fanout_peers = Some(links.len());
        let mut m = Multi::new(links);
        Ok(probe::run(&mut m, clock, 0, opts, bar)?)
    }

    /// Answer clients until none comes for `idle_exit_s`; several sessions
    /// (a fan-out's queue pairs) are served at once by this one thread.
    pub fn serve(
        which: TransportName,
        listen: SocketAddr,
        idle_exit_s: u64,
        v: &VerbsArgs,
        max_size: u64,
        clock: HostClock,
    ) -> Result<()> {
        let o = options(v, max_size, clock)?;
        // A missing device is one clear line, before anything else is said.
        drop(netgauged::verbs::Context::open(&o.link.device)?);
        let listener =
            TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
        eprintln!(
            "ngctl serve: answering {} probes on {} ({})",
            if which == TransportName::Rdma {
                "rdma"
            } else {
                "msg"
            },
            listener.local_addr()?,
            o.link.device
        );
        let wait = (idle_exit_s > 0).then(|| Duration::from_secs(idle_exit_s));
        if which == TransportName::Rdma {
            serve_all(&listener, wait, idle_exit_s, o.exchange_timeout, |side| {
                RdmaWriteTransport::accept_on(side, &o)
            })
        } else {
            let mo = MsgOptions {
                verbs: o.clone(),
                eager_max_bytes: v.eager_max,
            };
            serve_all(&listener, wait, idle_exit_s, o.exchange_timeout, |side| {
                VerbsMsgTransport::accept_on(side, &mo)
            })
        }
    }

    /// Set up one session on an accepted side channel. A failed exchange
    /// (the client gave up, sent garbage) is reported and skipped; a local
    /// failure (device, memory) ends `serve`.
    fn add<T>(
        side: SideChannel,
        open: &impl Fn(SideChannel) -> Result<T, VerbsError>,
        links: &mut Vec<T>,
        sides: &mut Vec<SideChannel>,
    ) -> Result<()> {
        let who = side.peer().to_string();
        let watch = side.try_clone()?;
        match open(side) {
            Ok(t) => {
                links.push(t);
                sides.push(watch);
                eprintln!("ngctl serve: session with {who} ({} active)", links.len());
                Ok(())
            }
            Err(e @ VerbsError::Exchange(_)) => {
                eprintln!("ngctl serve: session set-up with {who} failed: {e}");
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn serve_all<T: Transport>(
        listener: &TcpListener,
        wait: Option<Duration>,
        idle_exit_s: u64,
        io_timeout: Duration,
        open: impl Fn(SideChannel) -> Result<T, VerbsError>,
    ) -> Result<()> {
        let mut links: Vec<T> = Vec::new();
        let mut sides: Vec<SideChannel> = Vec::new();
        loop {
            if links.is_empty() {
                match exchange::accept(listener, wait, io_timeout) {
                    Ok(side) => add(side, &open, &mut links, &mut sides)?,
                    Err(ExchangeError::AcceptTimeout(_)) => {
                        eprintln!("ngctl serve: idle, exiting");
                        return Ok(());
                    }
                    Err(e) => eprintln!("ngctl serve: session set-up failed: {e}"),
                }
                continue;
            }
            let mut pending = None;
            let (stats, quiet) =
                serve_round(&mut links, &sides, listener, &mut pending, idle_exit_s);
            if let Err(e) = &stats {
                eprintln!("ngctl serve: {e}");
            }
            // Drop the sessions whose client left (all of them after an
            // error that names no one, or a quiet spell past the limit).
            let before = links.len();
            let mut k = 0;
            while k < sides.len() {
                if sides[k].peer_closed() || stats.is_err() || quiet {
                    eprintln!("ngctl serve: session with {} ended", sides[k].peer());
                    drop(links.remove(k));
                    sides.remove(k);
                } else {
                    k += 1;
                }
            }
            if let Ok(st) = stats {
                if links.len() < before {
                    eprintln!(
                        "ngctl serve: {} messages and {} answers in this round",
                        st.messages, st.answers
                    );
                }
            }
            if let Some(stream) = pending {
                let side = stream
                    .set_nonblocking(false)
                    .map_err(|source| ExchangeError::Io {
                        peer: "a new client".into(),
                        source,
                    })
                    .and_then(|()| SideChannel::from_stream(stream, io_timeout));
                match side {
                    Ok(side) => add(side, &open, &mut links, &mut sides)?,
                    Err(e) => eprintln!("ngctl serve: session set-up failed: {e}"),
                }
            }
        }
    }

    /// Serve the current sessions until one of them ends, a new client
    /// knocks, or (`idle_exit_s`) all stay quiet too long (then true). One
    /// session is served directly, several through `Multi`.
    fn serve_round<T: Transport>(
        links: &mut Vec<T>,
        sides: &[SideChannel],
        listener: &TcpListener,
        pending: &mut Option<std::net::TcpStream>,
        idle_exit_s: u64,
    ) -> (
        Result<prtt::ServeStats, netgauged::transport::TransportError>,
        bool,
    ) {
        let idle = Duration::from_millis(500);
        let limit = idle_exit_s * 2;
        let mut seen = (0u64, 0u64, 0u64);
        let mut quiet = 0u64;
        let mut too_quiet = false;
        // Looked at only after a timeout or an ended session, never per
        // message: the checks make system calls.
        let keep_going = |st: &prtt::ServeStats| {
            if (st.timeouts, st.sessions_ended) == (seen.1, seen.2) {
                return true;
            }
            quiet = if st.messages == seen.0 { quiet + 1 } else { 0 };
            seen = (st.messages, st.timeouts, st.sessions_ended);
            if sides.iter().any(|s| s.peer_closed()) {
                return false;
            }
            if let Ok((stream, _)) = listener.accept() {
                *pending = Some(stream);
                return false;
            }
            too_quiet = limit != 0 && quiet > limit;
            !too_quiet
        };
        let r = if links.len() == 1 {
            prtt::serve(&mut links[0], idle, keep_going)
        } else {
            let mut m = Multi::new(std::mem::take(links));
            let r = prtt::serve(&mut m, idle, keep_going);
            *links = m.into_inner();
            r
        };
        (r, too_quiet)
    }
}

/// Where a verbs probe goes: its servers, and how many queue pairs to open
/// over them (round robin; None: one per server).
pub struct Target<'a> {
    pub servers: &'a [SocketAddr],
    pub fanout_peers: Option<usize>,
}

/// Without the `verbs` feature the verbs transports say so.
#[cfg(not(feature = "verbs"))]
mod verbs_cli {
    use std::net::SocketAddr;

    use anyhow::{bail, Result};
    use netgauged::probe::{ProbeOptions, ProbeResult};
    use netgauged::sweep::Progress;

    use netgauged::clock::HostClock;

    use super::{TransportName, VerbsArgs};

    pub fn probe(
        _: TransportName,
        _: super::Target<'_>,
        _: &VerbsArgs,
        _: u64,
        _: &mut ProbeOptions,
        _: &mut dyn Progress,
        _: HostClock,
    ) -> Result<ProbeResult> {
        bail!("this ngctl was built without the `verbs` feature")
    }

    pub fn serve(
        _: TransportName,
        _: SocketAddr,
        _: u64,
        _: &VerbsArgs,
        _: u64,
        _: HostClock,
    ) -> Result<()> {
        bail!("this ngctl was built without the `verbs` feature")
    }
}

/// The mirror server, until `idle_exit_s` of silence (0: never).
fn serve_loop<T: netgauged::transport::Transport>(t: &mut T, idle_exit_s: u64) -> Result<()> {
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
