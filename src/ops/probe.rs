//! `ngctl probe`: measure once, like Netgauge, without the daemon. The link
//! opens through the link layer; what the kind's peer must provide (its
//! descriptor's endpoint) decides which flags are needed:
//! - none, in process: the sim model (`--model`), in virtual time;
//! - none, under mpirun: the ranks of the job (`probe::ranks`);
//! - a UDP port (`--peer`), a MAC on a link (`--interface`,
//!   `--peer-mac`), or queue pairs exchanged with one or several servers
//!   (`--peer a,b`, `--device`; `--fanout-peers P` queue pairs over them).

use std::time::Duration;

use super::{max_msg_bytes, required, resolve, usage, Note, OpsError, RawArgs, VerbsArgs};
use crate::clock::{ClockChoice, HostClock};
use crate::link::{self, Kind, Link, LinkSpec, NoRendezvous, Peer, Rendezvous, SimSpec};
use crate::model::exchange::{fit_exchange, ExchangeFit, ExchangeRaw};
use crate::probe::{self, ProbeOptions, ProbeResult};
use crate::sweep::{Progress, SweepConfig, MAX_LATENCY_SAMPLES};
use crate::transport::kind::PeerEndpoint;
use crate::transport::multi::Multi;
use crate::transport::raw_eth;
use crate::transport::sim::SimParams;

/// The default model of the sim transport.
const DEFAULT_MODEL: &str = "L=1100,o=300,g=450,G=0.08";
/// Peers the sim transport simulates for LogfP unless told otherwise.
const SIM_FANOUT_PEERS: usize = 16;
/// Largest message size of a probe (1 GiB).
pub const MAX_SIZE_LIMIT_BYTES: u64 = 1 << 30;
/// Most peers of a LogfP fan-out.
pub const MAX_FANOUT_PEERS: usize = 1024;
/// Longest wait for an answer.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
/// Most bootstrap resamples and repetitions per size.
pub const MAX_RESAMPLES: usize = 100_000;
pub const MAX_REPS_LIMIT: u32 = 100_000;

/// Sizes and repetitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Geometric sizes, repetitions until the intervals are tight.
    Adaptive,
    /// Netgauge's fixed schedule.
    Netgauge,
}

impl std::str::FromStr for Schedule {
    type Err = OpsError;
    fn from_str(s: &str) -> Result<Self, OpsError> {
        match s {
            "adaptive" => Ok(Schedule::Adaptive),
            "netgauge" => Ok(Schedule::Netgauge),
            other => Err(usage(format!(
                "unknown schedule {other:?} (adaptive or netgauge)"
            ))),
        }
    }
}

/// What `ngctl probe` is asked to do.
#[derive(Clone, Debug)]
pub struct ProbeArgs {
    pub kind: Kind,
    pub clock: ClockChoice,
    /// udp: HOST:PORT; rdma/msg: one or several, comma-separated.
    pub peer: Option<String>,
    /// raw: the server's MAC.
    pub peer_mac: Option<String>,
    /// raw: the local interface and how it receives.
    pub raw: RawArgs,
    /// sim: the ground truth.
    pub model: Option<String>,
    pub max_size_bytes: u64,
    pub min_size_bytes: u64,
    pub fanout_peers: Option<usize>,
    pub timeout: Duration,
    pub schedule: Schedule,
    pub resamples: usize,
    pub verbs: VerbsArgs,
    pub max_reps: Option<u32>,
    pub min_reps: Option<u32>,
    /// Write the result into this segment.
    pub publish: Option<String>,
    /// Pin the probing thread to this CPU.
    pub cpu: Option<usize>,
    /// Round trips per size of the latency run (0: none).
    pub latency_samples: u32,
    /// Show the latency run's histogram (needs a latency run).
    pub histogram: bool,
}

impl ProbeArgs {
    /// Every bound, checked before anything runs: each value out of range
    /// is one clear line (a size or a count without a bound would make a
    /// loop or an allocation without one).
    pub fn check(&self) -> Result<(), OpsError> {
        if !(1..=MAX_SIZE_LIMIT_BYTES).contains(&self.max_size_bytes) {
            return Err(usage(format!(
                "--max-size {} is out of range: 1 to {MAX_SIZE_LIMIT_BYTES} bytes",
                self.max_size_bytes
            )));
        }
        if !(1..=self.max_size_bytes).contains(&self.min_size_bytes) {
            return Err(usage(format!(
                "--min-size {} is out of range: 1 to --max-size ({})",
                self.min_size_bytes, self.max_size_bytes
            )));
        }
        if self.fanout_peers.is_some_and(|p| p > MAX_FANOUT_PEERS) {
            return Err(usage(format!(
                "--fanout-peers {} is out of range: at most {MAX_FANOUT_PEERS}",
                self.fanout_peers.unwrap_or(0)
            )));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return Err(usage(format!(
                "--timeout-ms {} is out of range: 1 to {}",
                self.timeout.as_millis(),
                MAX_TIMEOUT.as_millis()
            )));
        }
        if self.resamples > MAX_RESAMPLES {
            return Err(usage(format!(
                "--resamples {} is out of range: at most {MAX_RESAMPLES}",
                self.resamples
            )));
        }
        // A flag the transport would ignore is a mistake to say, not to
        // pass over in silence.
        let name = self.kind.name();
        let ignored = [
            (
                "--fanout-peers",
                self.fanout_peers.is_some() && matches!(self.kind, Kind::Udp | Kind::Raw),
                "its probe has one peer (the daemon runs the fan-out over its peers)",
            ),
            (
                "--model",
                self.model.is_some() && self.kind != Kind::Sim,
                "the model is the sim transport's ground truth",
            ),
            (
                "--peer-mac",
                self.peer_mac.is_some() && self.kind != Kind::Raw,
                "only raw Ethernet addresses its peer by MAC",
            ),
            (
                "--interface",
                self.raw.interface.is_some() && self.kind != Kind::Raw,
                "only raw Ethernet opens an interface",
            ),
        ];
        if let Some((flag, _, why)) = ignored.iter().find(|(_, given, _)| *given) {
            return Err(usage(format!(
                "{flag} does nothing with --transport {name}: {why}"
            )));
        }
        if self.latency_samples > MAX_LATENCY_SAMPLES {
            return Err(usage(format!(
                "--latency-samples {} is out of range: 0 (none) to {MAX_LATENCY_SAMPLES}",
                self.latency_samples
            )));
        }
        if self.histogram && self.latency_samples == 0 {
            return Err(usage(
                "--histogram shows the latency run, which --latency-samples 0 turns off",
            ));
        }
        for (flag, v) in [("--max-reps", self.max_reps), ("--min-reps", self.min_reps)] {
            if v.is_some_and(|r| r == 0 || r > MAX_REPS_LIMIT) {
                return Err(usage(format!(
                    "{flag} {} is out of range: 1 to {MAX_REPS_LIMIT}",
                    v.unwrap_or(0)
                )));
            }
        }
        Ok(())
    }
}

/// What one probe produced.
#[derive(Debug)]
pub struct ProbeOutput {
    pub kind: Kind,
    /// The peer's name (the name a published entry has).
    pub peer: String,
    /// The clock the probe timed with, as a segment describes it.
    pub clock_desc: String,
    pub result: ProbeResult,
    /// The MPI all-ranks exchange: raw rounds and their fit.
    pub exchange_raw: Option<ExchangeRaw>,
    pub exchange: Option<ExchangeFit>,
    pub min_size_bytes: u64,
    pub max_size_bytes: u64,
    /// Show the latency run's histogram.
    pub histogram: bool,
}

fn sweep_config(a: &ProbeArgs) -> SweepConfig {
    let mut sweep = match a.schedule {
        Schedule::Adaptive => SweepConfig::default(),
        Schedule::Netgauge => SweepConfig::netgauge(a.max_size_bytes),
    };
    sweep.max_size_bytes = a.max_size_bytes;
    sweep.min_size_bytes = a.min_size_bytes;
    sweep.timeout = a.timeout;
    sweep.latency_samples = a.latency_samples;
    if let Some(r) = a.max_reps {
        sweep.max_reps = r.max(1);
        sweep.min_reps = sweep.min_reps.min(sweep.max_reps);
    }
    if let Some(r) = a.min_reps {
        sweep.min_reps = r.max(1);
        sweep.large_min_reps = sweep.min_reps;
        sweep.max_reps = sweep.max_reps.max(sweep.min_reps);
    }
    sweep
}

/// The host clock and how a segment describes it.
pub(super) fn host_clock(choice: ClockChoice) -> Result<(HostClock, String), OpsError> {
    let clock = HostClock::choose(choice)?;
    let desc = format!("{} {:.6} MHz", clock.source_name(), clock.rate_hz() / 1e6);
    Ok((clock, desc))
}

/// Measure. `None`: this process was a serving MPI rank.
pub fn probe(
    a: &ProbeArgs,
    progress: &mut dyn Progress,
    note: &mut dyn FnMut(Note),
) -> Result<Option<ProbeOutput>, OpsError> {
    a.check()?;
    if let Some(cpu) = a.cpu {
        probe::cpu::pin(cpu).map_err(|source| OpsError::Pin { cpu, source })?;
    }
    let base = ProbeOptions::for_kind(a.kind);
    let mut opts = ProbeOptions {
        sweep: SweepConfig {
            traits: base.sweep.traits,
            switches: base.sweep.switches,
            ..sweep_config(a)
        },
        resamples: a.resamples,
        ..base
    };
    let d = a.kind.descriptor();
    let measured = if d.mpirun {
        a.kind.check_built()?;
        match ranks(a, &mut opts, progress, note)? {
            Some(m) => m,
            None => return Ok(None),
        }
    } else if d.endpoint == PeerEndpoint::None {
        in_process(a, &mut opts, progress)?
    } else {
        a.kind.check_built()?;
        over_network(a, &mut opts, progress, note)?
    };
    let Measured {
        mut result,
        peer,
        clock_desc,
        exchange_raw,
        contention,
    } = measured;
    result.transport = Some(a.kind.name().to_string());
    let exchange = exchange_raw
        .as_ref()
        .and_then(|x| fit_exchange(x.ranks, &x.sizes));
    if let Some(path) = &a.publish {
        let transport = a.kind.name();
        super::publish_result(
            path,
            &peer,
            transport,
            &clock_desc,
            &result,
            exchange.as_ref(),
        )?
        .into_iter()
        .chain(
            contention
                .map(|rec| super::segment::publish_record(path, transport, &clock_desc, &rec))
                .transpose()?,
        )
        .for_each(|(peer, transport)| {
            note(Note::Published {
                peer,
                transport,
                path: path.clone(),
            })
        });
    }
    Ok(Some(ProbeOutput {
        kind: a.kind,
        peer,
        clock_desc,
        result,
        exchange_raw,
        exchange,
        min_size_bytes: a.min_size_bytes,
        max_size_bytes: a.max_size_bytes,
        histogram: a.histogram,
    }))
}

/// A probe's result and what publishing it needs.
struct Measured {
    result: ProbeResult,
    /// The peer name of a published entry.
    peer: String,
    clock_desc: String,
    exchange_raw: Option<ExchangeRaw>,
    /// The transport's contention record measured with it (MPI).
    contention: Option<netgauge::TransportExt>,
}

/// A link in process (sim): the model is the peer, the clock virtual.
fn in_process(
    a: &ProbeArgs,
    opts: &mut ProbeOptions,
    progress: &mut dyn Progress,
) -> Result<Measured, OpsError> {
    let params: SimParams = a
        .model
        .as_deref()
        .unwrap_or(DEFAULT_MODEL)
        .parse()
        .map_err(OpsError::Model)?;
    opts.seed = params.seed;
    let peers = a.fanout_peers.unwrap_or(SIM_FANOUT_PEERS).max(1);
    opts.fanout_peers = Some(peers);
    let mut spec = LinkSpec::new(a.kind);
    spec.options.sim = Some(SimSpec { params, peers });
    let mut link = link::open_driver(&spec, &mut NoRendezvous)?;
    let result = match link.virtual_clock() {
        Some(clock) => probe::run(&mut link, &clock, 0, opts, progress),
        None => probe::run(&mut link, &host_clock(a.clock)?.0, 0, opts, progress),
    };
    Ok(Measured {
        result: result.map_err(|source| OpsError::Probe {
            who: a.kind.name().into(),
            source,
        })?,
        peer: a.kind.name().into(),
        clock_desc: "virtual (sim)".into(),
        exchange_raw: None,
        contention: None,
    })
}

/// Peers over a network: one link, or (queue pairs) several as one
/// multi-peer link for the fan-out.
fn over_network(
    a: &ProbeArgs,
    opts: &mut ProbeOptions,
    progress: &mut dyn Progress,
    note: &mut dyn FnMut(Note),
) -> Result<Measured, OpsError> {
    let kind = a.kind;
    let mut spec = LinkSpec::new(kind);
    // The peer(s), and how the operator names them.
    let (who, servers) = match kind.descriptor().endpoint {
        PeerEndpoint::MacOnLink => {
            let ifname = a.raw.apply(&mut spec)?;
            let mac = a
                .peer_mac
                .as_deref()
                .ok_or_else(|| required("--peer-mac AA:BB:CC:DD:EE:FF", kind))?;
            let mac = raw_eth::parse_mac(mac)?;
            spec.peer = Peer::Mac(mac);
            let who = format!("{} on {ifname}", raw_eth::format_mac(&mac));
            (who, Vec::new())
        }
        _ => {
            let peer = a
                .peer
                .clone()
                .ok_or_else(|| required("--peer HOST:PORT", kind))?;
            let servers = peer
                .split(',')
                .map(|p| resolve(p.trim()))
                .collect::<Result<Vec<_>, _>>()?;
            (peer, servers)
        }
    };
    let (clock, clock_desc) = host_clock(a.clock)?;
    spec.options.clock = clock;
    let mut links = match kind.descriptor().endpoint {
        PeerEndpoint::QueuePair { .. } => {
            spec.device = Some(a.verbs.device_for(kind)?);
            a.verbs.apply(&mut spec, max_msg_bytes(a.max_size_bytes)?);
            let qps = a.fanout_peers.unwrap_or(servers.len()).max(1);
            queue_pairs(&spec, &servers, qps, &who)?
        }
        _ => {
            if let Some(&addr) = servers.first() {
                spec.peer = Peer::Addr(addr);
            }
            let link =
                link::open_driver(&spec, &mut NoRendezvous).map_err(|source| OpsError::Open {
                    what: format!("cannot start a probe session with {who}"),
                    source,
                })?;
            Links::new(vec![link])
        }
    };
    let result = links
        .probe(&clock, opts, progress)
        .map_err(|source| OpsError::Probe {
            who: who.clone(),
            source,
        })?;
    for l in &links.links {
        if let Some(frames) = l.ignored() {
            note(Note::Ignored {
                who: "probe",
                frames,
            });
        }
    }
    Ok(Measured {
        result,
        peer: a.peer.clone().or(a.peer_mac.clone()).unwrap_or_default(),
        clock_desc,
        exchange_raw: None,
        contention: None,
    })
}

/// The links of one probe, and the rendezvous channels they keep open
/// (a verbs server ends a session when its side channel closes).
pub(super) struct Links {
    links: Vec<Link>,
    _sides: Vec<Box<dyn Rendezvous>>,
}

impl Links {
    /// Links that need no rendezvous kept open.
    pub(super) fn new(links: Vec<Link>) -> Self {
        Links {
            links,
            _sides: Vec::new(),
        }
    }

    /// The links, and what must outlive them (drop it after them).
    pub(super) fn into_parts(self) -> (Vec<Link>, Vec<Box<dyn Rendezvous>>) {
        (self.links, self._sides)
    }

    /// One link: the plain probe. Several: one multi-peer transport; the
    /// LogGP sweep runs on the first, then the 1:P−P:1 fan-out over all.
    fn probe(
        &mut self,
        clock: &HostClock,
        opts: &mut ProbeOptions,
        progress: &mut dyn Progress,
    ) -> Result<ProbeResult, crate::sweep::SweepError> {
        if let [t] = &mut self.links[..] {
            return probe::run(t, clock, 0, opts, progress);
        }
        opts.fanout_peers = Some(self.links.len());
        let mut m = Multi::new(std::mem::take(&mut self.links));
        let r = probe::run(&mut m, clock, 0, opts, progress);
        self.links = m.into_inner();
        r
    }
}

/// `qps` queue pairs, round robin over `servers`, each set up through a
/// TCP side channel to its server.
#[cfg(feature = "verbs")]
pub(super) fn queue_pairs(
    spec: &LinkSpec,
    servers: &[std::net::SocketAddr],
    qps: usize,
    who: &str,
) -> Result<Links, OpsError> {
    use crate::verbs::exchange::{Dial, DEFAULT_TIMEOUT};
    let timeout = spec
        .options
        .verbs
        .exchange_timeout
        .unwrap_or(DEFAULT_TIMEOUT);
    let mut out = Links {
        links: Vec::with_capacity(qps),
        _sides: Vec::with_capacity(qps),
    };
    for i in 0..qps {
        // Dialled once the queue pair is set up (a missing device or too
        // little lockable memory says so, whether the server is there or not).
        let mut side = Dial::new(servers[i % servers.len()], timeout);
        let link = link::open_driver(spec, &mut side).map_err(|source| OpsError::Open {
            what: format!("cannot start a probe session with {who}: queue pair {i}"),
            source,
        })?;
        out.links.push(link);
        out._sides.push(Box::new(side));
    }
    Ok(out)
}

#[cfg(not(feature = "verbs"))]
pub(super) fn queue_pairs(
    spec: &LinkSpec,
    _: &[std::net::SocketAddr],
    _: usize,
    _: &str,
) -> Result<Links, OpsError> {
    spec.kind.check_built()?;
    Err(OpsError::Link(crate::link::OpenError::NoResponder(
        spec.kind,
    )))
}

/// The MPI probe on this rank (`None`: a serving rank).
#[cfg(feature = "mpi")]
fn ranks(
    a: &ProbeArgs,
    opts: &mut ProbeOptions,
    progress: &mut dyn Progress,
    note: &mut dyn FnMut(Note),
) -> Result<Option<Measured>, OpsError> {
    use crate::probe::ranks::{self, RankOutcome};
    use crate::transport::mpi;
    let _universe = mpi::initialize().ok_or(OpsError::MpiInitialized)?;
    let (_, size) = mpi::world_rank_size();
    opts.fanout_peers = a.fanout_peers.or(Some(size - 1)).filter(|&p| p >= 2);
    let (clock, clock_desc) = host_clock(a.clock)?;
    match ranks::run(opts, clock, progress)? {
        RankOutcome::Served {
            rank,
            exchange_error,
        } => {
            if let Some(error) = exchange_error {
                note(Note::ExchangeFailed { rank, error });
            }
            Ok(None)
        }
        RankOutcome::Probed(p) => {
            if let Some(error) = p.exchange_error {
                note(Note::ExchangeFailed { rank: 0, error });
            }
            let exchange_raw = (!p.exchange.is_empty()).then_some(ExchangeRaw {
                ranks: p.ranks,
                sizes: p.exchange,
            });
            Ok(Some(Measured {
                result: p.result,
                peer: p.peer_name,
                clock_desc,
                exchange_raw,
                contention: p.contention,
            }))
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn ranks(
    a: &ProbeArgs,
    _: &mut ProbeOptions,
    _: &mut dyn Progress,
    _: &mut dyn FnMut(Note),
) -> Result<Option<Measured>, OpsError> {
    a.kind.check_built()?;
    Err(OpsError::Link(crate::link::OpenError::NoResponder(a.kind)))
}
