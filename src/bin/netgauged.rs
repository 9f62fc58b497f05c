//! netgauged: the per-node daemon. Thin: configuration, logging, signals.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use netgauged::daemon::{self, config::Config, Shutdown};

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
    /// Override `runtime_dir` (segment, lock, status file).
    #[arg(long)]
    runtime_dir: Option<PathBuf>,
    /// Override `shm` (segment path).
    #[arg(long)]
    shm: Option<PathBuf>,
    /// Override `state_dir`.
    #[arg(long)]
    state_dir: Option<PathBuf>,
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
    /// Tests of the systemd watchdog only: the publisher stalls this many
    /// seconds after the start (no heartbeat, no watchdog ping).
    #[arg(long, hide = true)]
    test_stall_publisher_after_s: Option<f64>,
}

fn main() -> ExitCode {
    // Under systemd stderr goes to the journal, which stamps time itself.
    let journal = std::env::var_os("JOURNAL_STREAM").is_some();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Colour codes only for a terminal: a redirected log stays plain text.
    if journal {
        fmt.without_time().with_ansi(false).init();
    } else {
        fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
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
    macro_rules! set_some {
        ($($f:ident),*) => { $( if cli.$f.is_some() { cfg.$f = cli.$f; } )* };
    }
    set!(
        udp_port,
        key_file,
        budget_bytes_per_s,
        recheck_interval_s,
        max_size_bytes,
        fanout_interval_s
    );
    set_some!(
        node,
        listen,
        runtime_dir,
        shm,
        state_dir,
        state_file,
        test_stall_publisher_after_s
    );
    let shutdown = Shutdown::new();
    if let Err(e) = daemon::spawn_signal_thread(shutdown.clone()) {
        tracing::error!("cannot handle SIGTERM/SIGINT: {e}");
        return ExitCode::FAILURE;
    }
    match daemon::run(cfg, shutdown) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
