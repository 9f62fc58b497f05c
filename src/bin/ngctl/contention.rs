//! `ngctl contention`'s, `ngctl ebb`'s and `ngctl overlap`'s flags (kept beside ngctl.rs so the binary's main
//! file stays clap definitions and dispatch).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use netgauged::clock::ClockChoice;
use netgauged::ops::{self, ContentionArgs, EbbArgs};
use netgauged::report;
use netgauged::transport::Kind;

use super::{kind_parser, Out, VerbsFlags};

/// The servers of `ngctl contention` and `ngctl overlap`.
#[derive(Args)]
pub struct ServerFlags {
    /// Transport to measure.
    #[arg(long, value_parser = kind_parser())]
    transport: Kind,
    /// The `ngctl serve` responders, comma-separated HOST:PORT (udp, rdma, msg).
    #[arg(long)]
    peer: Option<String>,
    /// sim: the ground truth, e.g. L=2000,o=300,g=500,G=0.5
    #[arg(long)]
    model: Option<String>,
    #[command(flatten)]
    verbs: VerbsFlags,
}

impl ServerFlags {
    fn servers(self, clock: ClockChoice, sim_peers: usize) -> ops::Servers {
        ops::Servers {
            kind: self.transport,
            clock,
            peers: self.peer,
            model: self.model,
            sim_peers,
            verbs: self.verbs.into(),
        }
    }
}

#[derive(Args)]
pub struct ContentionFlags {
    #[command(flatten)]
    servers: ServerFlags,
    /// sim: peers simulated.
    #[arg(long, default_value_t = 4)]
    peers: usize,
    /// Message size of every flow.
    #[arg(long, default_value_t = 64 * 1024)]
    size: usize,
    /// Messages per flow of a burst round.
    #[arg(long, default_value_t = 16)]
    burst: u32,
    /// Repetitions of every (scheme, k).
    #[arg(long, default_value_t = 12)]
    rounds: usize,
    /// Largest k (default: as many as the peers allow, at most 8).
    #[arg(long, default_value_t = 8)]
    max_k: usize,
    /// Schemes, any of outgoing,incoming,mixed.
    #[arg(long, default_value = "outgoing,incoming,mixed")]
    schemes: String,
    /// Least wait for a round, in ms.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 200)]
    resamples: usize,
    /// Include every round's flow times in the JSON.
    #[arg(long)]
    raw: bool,
    /// Write the penalties and β into the shared-memory segment.
    #[arg(long)]
    publish: bool,
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    shm: Option<String>,
}

impl ContentionFlags {
    pub fn run(self, clock: ClockChoice, o: &Out) -> Result<()> {
        super::no_csv(o, "contention")?;
        let raw = self.raw;
        let (mut bar, mut note) = o.progress_bar();
        let out = ops::contention(&self.args(clock)?, &mut bar, &mut note);
        bar.0.finish_and_clear();
        print!("{}", report::contention(&out?, o.json, raw)?);
        Ok(())
    }

    pub fn args(self, clock: ClockChoice) -> Result<ContentionArgs> {
        let f = self;
        let options = ops::ContentionOptions {
            size_bytes: f.size,
            burst: f.burst,
            rounds: f.rounds,
            max_k: f.max_k,
            schemes: ops::parse_schemes(&f.schemes)?,
            timeout: Duration::from_millis(f.timeout_ms),
            resamples: f.resamples,
            ..ops::default_options()
        };
        Ok(ContentionArgs {
            servers: f.servers.servers(clock, f.peers),
            options,
            publish: f.publish.then(|| ops::shm_path(f.shm.as_deref())),
        })
    }
}

#[derive(Args)]
pub struct EbbFlags {
    /// This node's daemon configuration (name, cluster key, peers).
    #[arg(long, default_value = "/etc/netgauged.toml")]
    config: PathBuf,
    /// The node set, comma-separated names (default: this node and its peers).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<String>,
    /// Transport the daemons stream over.
    #[arg(long, value_parser = kind_parser(), default_value = "udp")]
    transport: Kind,
    /// Random perfect matchings measured.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds every pair streams in a round.
    #[arg(long, default_value_t = 3.0)]
    window_s: f64,
    /// Message size of the streams, bytes.
    #[arg(long, default_value_t = 64 * 1024)]
    size: u64,
    /// Messages per burst.
    #[arg(long, default_value_t = 16)]
    burst: u32,
    /// Most payload bytes a pair moves in a round (what its nodes consent to).
    #[arg(long, default_value_t = 256 << 20)]
    max_bytes: u64,
    /// Seed of the matchings (default: random).
    #[arg(long)]
    seed: Option<u64>,
    /// Hand the result to this node's daemon for its segment.
    #[arg(long)]
    publish: bool,
}

impl EbbFlags {
    pub fn run(self, o: &Out) -> Result<()> {
        super::no_csv(o, "ebb")?;
        if !(self.window_s > 0.0 && self.window_s <= 60.0) {
            anyhow::bail!("--window-s must be in (0, 60]");
        }
        let a = EbbArgs {
            config: self.config,
            nodes: self.nodes,
            transport: self.transport,
            rounds: self.rounds,
            window: Duration::from_secs_f64(self.window_s),
            size_bytes: self.size,
            burst: self.burst,
            max_bytes: self.max_bytes,
            seed: self.seed,
            publish: self.publish,
        };
        print!("{}", report::ebb(&ops::ebb(&a)?, o.json)?);
        Ok(())
    }
}

#[derive(Args)]
pub struct OverlapFlags {
    #[command(flatten)]
    servers: ServerFlags,
    /// Message sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,1024,4096,16384,65536")]
    sizes: Vec<usize>,
    /// Rounds without and with computation per size.
    #[arg(long, default_value_t = 30)]
    rounds: usize,
    /// Bootstrap resamples for the 95 % intervals.
    #[arg(long, default_value_t = 200)]
    resamples: usize,
    /// Write the fractions into the entry of this peer name (and the
    /// transport) in the shared-memory segment.
    #[arg(long)]
    publish: Option<String>,
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    shm: Option<String>,
}

impl OverlapFlags {
    pub fn run(self, clock: ClockChoice, o: &Out) -> Result<()> {
        super::no_csv(o, "overlap")?;
        let f = self;
        let a = ops::OverlapArgs {
            servers: f.servers.servers(clock, 1),
            options: ops::OverlapOptions {
                sizes: f.sizes,
                rounds: f.rounds,
                resamples: f.resamples,
                ..ops::OverlapOptions::default()
            },
            publish: f.publish.map(|p| (ops::shm_path(f.shm.as_deref()), p)),
        };
        let (mut bar, mut note) = o.progress_bar();
        let out = ops::overlap(&a, &mut bar, &mut note);
        bar.0.finish_and_clear();
        print!("{}", report::overlap(&out?, o.json)?);
        Ok(())
    }
}
