//! `ngctl contention`: the conflict probe once, without the daemon, against
//! several `ngctl serve` responders (udp: one per `--peer`; rdma/msg: one
//! queue pair to each), or in the simulator (`--model`, `--peers`). The
//! daemon runs the same probe with its peers' consent and publishes it; this
//! is the operator's and the benchmark's way to run it by hand.

use std::time::Duration;

use super::{resolve, usage, OpsError, VerbsArgs};
use crate::clock::{ClockChoice, HostClock, VirtualClock};
use crate::link::{self, Kind, Link, LinkSpec, NoRendezvous, Peer, SimSpec};
use crate::model::contention::Conflict;
use crate::probe::contention::{self, ContentionOptions, ContentionResult};
use crate::sweep::{Progress, SweepError};
use crate::transport::kind::PeerEndpoint;
use crate::transport::multi::Multi;

/// The servers a measurement runs against: `ngctl serve` responders over
/// udp, rdma or msg, or the simulator.
#[derive(Clone, Debug)]
pub struct Servers {
    pub kind: Kind,
    pub clock: ClockChoice,
    /// The servers, comma-separated HOST:PORT (udp, rdma, msg).
    pub peers: Option<String>,
    /// sim: the model and how many peers it simulates.
    pub model: Option<String>,
    pub sim_peers: usize,
    pub verbs: VerbsArgs,
}

/// What `ngctl contention` is asked to do.
#[derive(Clone, Debug)]
pub struct ContentionArgs {
    pub servers: Servers,
    pub options: ContentionOptions,
    /// Write the penalties and the β fit into this segment.
    pub publish: Option<String>,
}

/// Parse `outgoing,incoming,mixed` (any subset).
pub fn parse_schemes(s: &str) -> Result<Vec<Conflict>, OpsError> {
    s.split(',')
        .map(|x| {
            Conflict::ALL
                .into_iter()
                .find(|c| c.name() == x.trim())
                .ok_or_else(|| usage(format!("unknown scheme {x:?} (outgoing, incoming, mixed)")))
        })
        .collect()
}

/// Open the links to `a`'s servers (messages up to `max_msg_bytes`) and
/// run `sim` (the simulator, virtual time) or `host` on them.
pub(super) fn on_servers<R>(
    a: &Servers,
    what: &str,
    max_msg_bytes: usize,
    progress: &mut dyn Progress,
    sim: impl FnOnce(&mut Link, &VirtualClock, &mut dyn Progress) -> Result<R, SweepError>,
    host: impl FnOnce(&mut Multi<Link>, &HostClock, &mut dyn Progress) -> Result<R, SweepError>,
) -> Result<R, OpsError> {
    let kind = a.kind;
    kind.check_built()?;
    let failed = |who: &str| {
        let who = who.to_string();
        move |source: SweepError| OpsError::Probe { who, source }
    };
    if kind.descriptor().endpoint == PeerEndpoint::None {
        let params = a
            .model
            .as_deref()
            .ok_or_else(|| usage("--model is required for sim"))?
            .parse()
            .map_err(OpsError::Model)?;
        let mut spec = LinkSpec::new(kind);
        spec.options.sim = Some(SimSpec {
            params,
            peers: a.sim_peers.max(1),
        });
        let mut l = link::open_driver(&spec, &mut NoRendezvous)?;
        let clock = l
            .virtual_clock()
            .ok_or_else(|| usage("sim without a virtual clock"))?;
        return sim(&mut l, &clock, progress).map_err(failed("sim"));
    }
    let peers = a
        .peers
        .as_deref()
        .ok_or_else(|| usage(format!("--peer HOST:PORT,… is required for {kind}")))?;
    let servers = peers
        .split(',')
        .map(|p| resolve(p.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let (clock, _) = super::probe::host_clock(a.clock)?;
    let mut spec = LinkSpec::new(kind);
    spec.options.clock = clock;
    let links = match kind.descriptor().endpoint {
        PeerEndpoint::QueuePair { .. } => {
            spec.device = Some(
                a.verbs
                    .device
                    .clone()
                    .ok_or_else(|| usage("--device DEV is required for rdma and msg"))?,
            );
            a.verbs.apply(&mut spec, max_msg_bytes.max(16 * 1024));
            super::probe::queue_pairs(&spec, &servers, servers.len(), peers)?
        }
        PeerEndpoint::Port => {
            let mut v: Vec<Link> = Vec::with_capacity(servers.len());
            for &addr in &servers {
                spec.peer = Peer::Addr(addr);
                v.push(
                    link::open_driver(&spec, &mut NoRendezvous).map_err(|source| {
                        OpsError::Open {
                            what: format!("cannot start a session with {addr}"),
                            source,
                        }
                    })?,
                );
            }
            super::probe::Links::new(v)
        }
        _ => {
            return Err(usage(format!(
                "ngctl {what} runs over udp, rdma, msg and sim; {kind} through the daemon"
            )))
        }
    };
    let (v, sides) = links.into_parts();
    let mut m = Multi::new(v);
    let r = host(&mut m, &clock, progress).map_err(failed(peers));
    drop(sides);
    r
}

/// Measure; publish when asked.
pub fn contention(
    a: &ContentionArgs,
    progress: &mut dyn Progress,
    note: &mut dyn FnMut(super::Note),
) -> Result<ContentionResult, OpsError> {
    let o = &a.options;
    let result = on_servers(
        &a.servers,
        "contention",
        o.size_bytes,
        progress,
        |l, clock, p| contention::run(l, clock, o, p),
        |m, clock, p| contention::run(m, clock, o, p),
    )?;
    if let Some(path) = &a.publish {
        let kind = a.servers.kind;
        super::publish_contention(path, kind.name(), &result.fit)?;
        note(super::Note::Published {
            peer: "(transport record)".into(),
            transport: kind.name().into(),
            path: path.clone(),
        });
    }
    Ok(result)
}

/// The default options of `ngctl contention`: a quicker probe than the
/// daemon's when the operator is watching.
pub fn default_options() -> ContentionOptions {
    ContentionOptions {
        timeout: Duration::from_secs(1),
        ..ContentionOptions::default()
    }
}
