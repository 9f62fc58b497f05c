//! `ngctl serve`: answer probes (the mirror server), through the link
//! layer's responder. What the kind's peers provide decides the shape: a
//! standing responder on a UDP port or an Ethernet interface, or (queue
//! pairs) a TCP listener whose clients each set up a session; kinds whose
//! peers provide nothing (sim, mpi) need no server.

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use super::{max_msg_bytes, Note, OpsError, RawArgs, VerbsArgs};
use crate::clock::{ClockChoice, HostClock};
use crate::link::{self, Kind, LinkSpec, Local, NoRendezvous, ServePolicy};
use crate::transport::kind::PeerEndpoint;
use crate::transport::raw_eth;

/// How often a standing responder looks at its idle limit.
const POLL: Duration = Duration::from_millis(500);

/// What `ngctl serve` is asked to do.
#[derive(Clone, Debug)]
pub struct ServeArgs {
    pub kind: Kind,
    pub clock: ClockChoice,
    pub listen: SocketAddr,
    /// Exit after this long without a message (None: never).
    pub idle_exit: Option<Duration>,
    pub verbs: VerbsArgs,
    /// Queue pairs: the largest message accepted.
    pub max_size_bytes: u64,
    /// raw: the interface and how it receives.
    pub raw: RawArgs,
    /// Pin the responder (and the threads it starts) to this CPU.
    pub cpu: Option<usize>,
}

/// Answer probes until the idle limit.
pub fn serve(a: &ServeArgs, note: &mut dyn FnMut(Note)) -> Result<(), OpsError> {
    let kind = a.kind;
    let endpoint = kind.descriptor().endpoint;
    if endpoint == PeerEndpoint::None {
        return Err(OpsError::NoServer(kind));
    }
    kind.check_built()?;
    if let Some(cpu) = a.cpu {
        crate::probe::cpu::pin(cpu).map_err(|source| OpsError::Pin { cpu, source })?;
    }
    let mut spec = LinkSpec::new(kind);
    spec.options.clock = HostClock::choose(a.clock)?;
    if let PeerEndpoint::QueuePair { .. } = endpoint {
        let device = a.verbs.device_for(kind)?;
        spec.device = Some(device.clone());
        a.verbs.apply(&mut spec, max_msg_bytes(a.max_size_bytes)?);
        // A missing device is one clear line, before anything else is said.
        link::check(&spec)?;
        let listener = TcpListener::bind(a.listen).map_err(|source| OpsError::Listen {
            addr: a.listen,
            source,
        })?;
        let at = listener.local_addr().map_err(|source| OpsError::Listen {
            addr: a.listen,
            source,
        })?;
        note(Note::Listening {
            kind,
            at: format!("{at} ({device})"),
        });
        return Ok(link::serve_sessions(
            &spec,
            &listener,
            a.idle_exit,
            &mut |e| note(Note::Session(e)),
        )?);
    }
    let mut t = match endpoint {
        PeerEndpoint::MacOnLink => {
            let ifname = a.raw.apply(&mut spec)?;
            link::open_responder(&spec, &mut NoRendezvous).map_err(|source| OpsError::Open {
                what: format!("cannot open raw Ethernet on {ifname}"),
                source,
            })?
        }
        _ => {
            spec.options.listen = Some(a.listen);
            link::open_responder(&spec, &mut NoRendezvous).map_err(|source| OpsError::Open {
                what: format!("cannot listen on {}", a.listen),
                source,
            })?
        }
    };
    let at = match t.local() {
        Local::Addr(addr) => addr.to_string(),
        Local::Mac { mac, rx } => format!(
            "{} ({}, {rx:?})",
            spec.device.as_deref().unwrap_or("?"),
            raw_eth::format_mac(&mac)
        ),
        Local::None => String::new(),
    };
    note(Note::Listening { kind, at });
    let mut policy = ServePolicy::new(POLL);
    policy.idle_exit = a.idle_exit;
    let served = link::serve(&mut t, policy);
    if let Ok(s) = &served {
        note(Note::Idle {
            messages: s.stats.messages,
            answers: s.stats.answers,
        });
    }
    if let Some(frames) = t.ignored() {
        note(Note::Ignored {
            who: "serve",
            frames,
        });
    }
    served?;
    Ok(())
}
