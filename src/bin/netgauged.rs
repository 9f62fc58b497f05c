//! netgauged: the per-node daemon. Thin: configuration, logging, signals.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::Parser;
use netgauged::daemon::{self, config::Config};

#[derive(Parser)]
#[command(
    name = "netgauged",
    version,
    about = "netgauged: keeps the LogGP segment current"
)]
struct Cli {
    /// TOML configuration (see systemd/netgauged.toml).
    #[arg(long, default_value = "/etc/netgauged/netgauged.toml")]
    config: PathBuf,
    /// Override `node`.
    #[arg(long)]
    node: Option<String>,
    /// Override `listen` (control plane ADDR:PORT).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Override `udp_port`.
    #[arg(long)]
    udp_port: Option<u16>,
    /// Override `shm` (segment path).
    #[arg(long)]
    shm: Option<PathBuf>,
    /// Override `key_file`.
    #[arg(long)]
    key_file: Option<PathBuf>,
    /// Override `state_file`.
    #[arg(long)]
    state_file: Option<PathBuf>,
    /// Override `budget_bytes_per_s`.
    #[arg(long)]
    budget_bytes_per_s: Option<u64>,
    /// Override `recheck_interval_s`.
    #[arg(long)]
    recheck_interval_s: Option<f64>,
    /// Override `max_size_bytes`.
    #[arg(long)]
    max_size_bytes: Option<u64>,
    /// Override `fanout_interval_s`.
    #[arg(long)]
    fanout_interval_s: Option<f64>,
}

fn main() -> ExitCode {
    // Under systemd stderr goes to the journal, which stamps time itself.
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if journal {
        fmt.without_time().with_ansi(false).init();
    } else {
        fmt.init();
    }
    let cli = Cli::parse();
    let mut cfg = match Config::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return ExitCode::from(2);
        }
    };
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = cli.$f { cfg.$f = v; } )* };
    }
    set!(
        listen,
        udp_port,
        shm,
        key_file,
        state_file,
        budget_bytes_per_s,
        recheck_interval_s,
        max_size_bytes,
        fanout_interval_s
    );
    if cli.node.is_some() {
        cfg.node = cli.node;
    }
    let shutdown = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        if let Err(e) = signal_hook::flag::register(sig, shutdown.clone()) {
            tracing::error!("cannot handle signal {sig}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match daemon::run(cfg, shutdown) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
