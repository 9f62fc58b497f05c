//! The standing responders: the link layer's PRTT responder on the UDP
//! port and on each raw Ethernet interface a peer wants raw on, each on a
//! busy-polling thread of its own that opens its link, reports what it
//! tells peers (its MAC), and serves until shutdown (a link that fails is
//! opened again, after a pause that grows). Sessions are admitted
//! through the shared gate: the nonce of the session this node accepted,
//! from the address (udp) or MAC (raw) the control plane authenticated.
//! Idle, a responder sleeps in poll(2) on its socket and wakes once per
//! [`POLL`] to look at the shutdown flag.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::bounded;

use super::cluster::Peer;
use super::config::Config;
use super::{sys, thread_error, DaemonError, Shutdown};
use crate::clock::HostClock;
use crate::link::{self, Kind, LinkSpec, Local, NoRendezvous, OpenError, ServePolicy};
use crate::transport::dgram::SessionGate;
use crate::transport::kind::PeerEndpoint;
use crate::transport::raw_eth;
use crate::transport::TransportError;

/// Granularity of the responders' look at the shutdown flag: an idle
/// responder wakes this often (a few microseconds each time), and a
/// SIGTERM ends it within this.
const POLL: Duration = Duration::from_millis(250);
/// How long the main thread waits for a responder thread to open its link.
const OPEN_WAIT: Duration = Duration::from_secs(10);
/// The first pause before a failed responder's link is opened again; each
/// further failure doubles it, up to `REOPEN_MAX`.
const REOPEN_FIRST: Duration = Duration::from_secs(1);
const REOPEN_MAX: Duration = Duration::from_secs(60);

/// Serves `link` until `stop`; a link that fails (its socket or interface
/// gone) is opened again after a pause that doubles from `backoff` up to
/// [`REOPEN_MAX`], since peers are still told this node answers there.
/// Returns the sessions admitted over every link.
fn keep_serving<L, E: std::fmt::Display>(
    mut link: L,
    mut serve: impl FnMut(&mut L) -> (Result<(), TransportError>, u64),
    mut open: impl FnMut() -> Result<L, E>,
    stop: &AtomicBool,
    mut backoff: Duration,
    what: impl std::fmt::Display,
) -> u64 {
    let mut sessions = 0;
    let first = backoff;
    loop {
        let since = std::time::Instant::now();
        let (served, admitted) = serve(&mut link);
        sessions += admitted;
        let Err(e) = served else {
            return sessions;
        };
        // A link that served a while before it failed starts the pauses
        // afresh: a failure weeks later does not wait out the longest.
        if since.elapsed() >= REOPEN_MAX {
            backoff = first;
        }
        tracing::error!("{what} responder failed: {e}; opening it again");
        drop(link);
        link = loop {
            if !pause_unless_stopped(stop, backoff) {
                return sessions;
            }
            backoff = (backoff * 2).min(REOPEN_MAX);
            match open() {
                Ok(l) => break l,
                Err(e) => tracing::error!("{what} responder could not open again: {e}"),
            }
        };
    }
}

/// Sleeps `d` in steps of [`POLL`]; false (at once) when `stop` is set.
fn pause_unless_stopped(stop: &AtomicBool, d: Duration) -> bool {
    let end = std::time::Instant::now() + d;
    loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(POLL));
    }
}

/// Open `spec`'s responder on a thread of its own and serve until
/// `shutdown`; the thread returns the sessions it admitted.
fn start(
    spec: LinkSpec,
    name: &'static str,
    cpu: Option<usize>,
    shutdown: &Arc<AtomicBool>,
) -> Result<Result<(Local, JoinHandle<u64>), OpenError>, DaemonError> {
    let (tx, rx) = bounded(1);
    let stop = shutdown.clone();
    let h = sys::spawn_busy(name, cpu, move || {
        let link = match link::open_responder(&spec, &mut NoRendezvous) {
            Ok(l) => {
                let _ = tx.send(Ok(l.local()));
                l
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return 0;
            }
        };
        keep_serving(
            link,
            |l| {
                let mut policy = ServePolicy::new(POLL);
                policy.stop = Some(&stop);
                let served = link::serve(l, policy).map(|_| ());
                (served, l.sessions_started())
            },
            || link::open_responder(&spec, &mut NoRendezvous),
            &stop,
            REOPEN_FIRST,
            spec.kind,
        )
    })
    .map_err(thread_error(name))?;
    Ok(match rx.recv_timeout(OPEN_WAIT) {
        Ok(Ok(local)) => Ok((local, h)),
        Ok(Err(e)) => {
            let _ = h.join();
            Err(e)
        }
        Err(_) => Err(OpenError::Rendezvous(format!(
            "the thread {name} did not open its link within {OPEN_WAIT:?}"
        ))),
    })
}

fn spec(kind: Kind, clock: HostClock, gate: &Arc<SessionGate>) -> LinkSpec {
    let mut s = LinkSpec::new(kind);
    s.options.clock = clock;
    s.options.gate = Some(gate.clone());
    s
}

/// The UDP responder (every node runs one).
pub(super) fn start_udp(
    cfg: &Config,
    addr: SocketAddr,
    clock: HostClock,
    gate: &Arc<SessionGate>,
    shutdown: &Arc<Shutdown>,
) -> Result<JoinHandle<u64>, DaemonError> {
    let mut s = spec(super::FALLBACK, clock, gate);
    s.options.listen = Some(addr);
    let (_, h) = start(s, "ng-responder", cfg.probe_cpu, shutdown.flag())?
        .map_err(DaemonError::Responder)?;
    Ok(h)
}

/// The raw responders that run, and toward whom.
pub(super) struct Raw {
    /// Per peer name: the local interface toward it and our MAC there.
    pub toward: HashMap<String, (String, [u8; 6])>,
    pub threads: Vec<JoinHandle<u64>>,
}

/// One raw Ethernet responder per interface named by a peer that wants
/// raw. Without CAP_NET_RAW: one line, and those peers use udp.
pub(super) fn start_raw(
    peers: &[Peer],
    clock: HostClock,
    gate: &Arc<SessionGate>,
    shutdown: &Arc<Shutdown>,
    cpu: Option<usize>,
) -> Result<Raw, DaemonError> {
    let mut raw = Raw {
        toward: HashMap::new(),
        threads: Vec::new(),
    };
    let Some(kind) =
        Kind::daemon_kinds().find(|k| k.descriptor().endpoint == PeerEndpoint::MacOnLink)
    else {
        return Ok(raw);
    };
    let mut ifaces: HashMap<String, [u8; 6]> = HashMap::new();
    let mut failed: std::collections::HashSet<String> = Default::default();
    for p in peers {
        let Some(ifname) = p.interface.as_deref().filter(|_| p.wants(kind)) else {
            continue;
        };
        if failed.contains(ifname) {
            continue;
        }
        if let Some(mac) = ifaces.get(ifname) {
            raw.toward
                .insert(p.name.clone(), (ifname.to_string(), *mac));
            continue;
        }
        let mut s = spec(kind, clock, gate);
        s.device = Some(ifname.to_string());
        match start(s, "ng-raw-responder", cpu, shutdown.flag())? {
            Ok((Local::Mac { mac, .. }, h)) => {
                ifaces.insert(ifname.to_string(), mac);
                raw.toward.insert(p.name.clone(), (ifname.to_string(), mac));
                raw.threads.push(h);
            }
            Ok((_, h)) => raw.threads.push(h),
            Err(OpenError::Transport(e)) if raw_eth::needs_cap_net_raw(&e) => {
                tracing::warn!("raw Ethernet unavailable (no CAP_NET_RAW): peers use udp");
                break;
            }
            Err(e) => {
                tracing::warn!("raw Ethernet on {ifname} unavailable ({e}): peers there use udp");
                failed.insert(ifname.to_string());
            }
        }
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn a_failed_responder_is_opened_again_until_it_ends_well_or_is_stopped() {
        // Link 0 fails, the first reopen fails, link 1 fails, link 2 ends
        // (shutdown): three links served, sessions summed over them.
        let stop = AtomicBool::new(false);
        let opened = Cell::new(0u32);
        let opens = Cell::new(0u32);
        let sessions = keep_serving(
            0u32,
            |l| match *l {
                2 => (Ok(()), 5),
                _ => (Err(TransportError::Io(std::io::Error::other("gone"))), 1),
            },
            || {
                opens.set(opens.get() + 1);
                if opens.get() == 1 {
                    return Err("no such device");
                }
                opened.set(opened.get() + 1);
                Ok(opened.get())
            },
            &stop,
            Duration::from_millis(1),
            "test",
        );
        assert_eq!((sessions, opens.get(), opened.get()), (7, 3, 2));
        // Stopped while it waits to reopen: it returns without opening.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let sessions = keep_serving(
            0u32,
            |_| (Err(TransportError::Io(std::io::Error::other("gone"))), 3),
            || -> Result<u32, &str> { panic!("opened after stop") },
            &stop,
            Duration::from_secs(3600),
            "test",
        );
        assert_eq!(sessions, 3);
    }
}
