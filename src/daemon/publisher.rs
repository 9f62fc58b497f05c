//! The publisher (the daemon's main thread): owns the segment writer;
//! publishes whole results only (a failed probe publishes nothing and marks
//! the entry stale), beats the heartbeat, writes the state and status
//! files.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use netgauge::{EntryData, SegmentWriter};

use super::admission::expire_session;
use super::config::Config;
use super::status::{self, StatusFile};
use super::{state, DaemonError, Shared};
use crate::control::BisectionReport;
use crate::control::ControlServer;
use crate::model::contention::ContentionFit;
use crate::model::LogfpFit;
use crate::publish::{attach_logfp, set_bisection, set_contention};

/// What the probe thread hands the publisher.
pub(super) enum Outcome {
    Publish(Box<EntryData>),
    Stale {
        peer: String,
        transport: String,
    },
    Logfp {
        peers: Vec<String>,
        transport: String,
        fit: LogfpFit,
    },
    /// A conflict probe's penalties and sharing fit for a transport.
    Contention {
        transport: String,
        fit: Box<ContentionFit>,
    },
    /// An effective bisection bandwidth this node's operator measured.
    Bisection(BisectionReport),
}

/// The published entries, by (peer, transport).
pub(super) type Entries = HashMap<(String, String), EntryData>;

/// Create (or re-open) the segment and fill it from the state file with
/// the entries of the configured peers: readers get values at once.
pub(super) fn open_segment(
    cfg: &Config,
    node: &str,
    clock_desc: &str,
    capacity: usize,
) -> Result<(SegmentWriter, Entries), DaemonError> {
    let mut writer =
        SegmentWriter::create_or_open(&cfg.shm, capacity, node, clock_desc).map_err(|source| {
            DaemonError::Segment {
                path: cfg.shm.clone(),
                source,
            }
        })?;
    let loaded = match state::load(&cfg.state_file) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("{e}; starting without stored parameters");
            Vec::new()
        }
    };
    let mut entries = Entries::new();
    for e in loaded {
        if cfg.peers.iter().any(|p| p.name == e.peer) {
            if let Err(err) = writer.upsert(&e) {
                tracing::warn!(
                    "stored entry {}/{} not restored: {err}",
                    e.peer,
                    e.transport
                );
                continue;
            }
            entries.insert((e.peer.clone(), e.transport.clone()), e);
        }
    }
    writer.heartbeat();
    tracing::info!(
        "segment {} ready: {} entries restored, generation {:016x}",
        cfg.shm.display(),
        entries.len(),
        writer.generation()
    );
    Ok((writer, entries))
}

pub(super) fn publish_loop(
    cfg: &Config,
    shared: &Shared,
    writer: &mut SegmentWriter,
    entries: &mut Entries,
    rx: &Receiver<Outcome>,
    server: &ControlServer,
) {
    use std::sync::atomic::Ordering;
    // Per transport: the peers of the last fan-out and its fit.
    let mut logfp: HashMap<String, (Vec<String>, LogfpFit)> = HashMap::new();
    let mut last_beat = Instant::now() - Duration::from_secs(1);
    while !shared.shutdown.load(Ordering::Relaxed) {
        let mut dirty = false;
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(Outcome::Publish(mut e)) => {
                if let Some((peers, fit)) = logfp.get(&e.transport) {
                    if peers.contains(&e.peer) {
                        attach_logfp(&mut e, fit);
                    }
                }
                match writer.upsert(&e) {
                    Ok(_) => {
                        entries.insert((e.peer.clone(), e.transport.clone()), *e);
                        dirty = true;
                    }
                    Err(err) => tracing::error!("cannot publish {}/{}: {err}", e.peer, e.transport),
                }
            }
            Ok(Outcome::Stale { peer, transport }) => {
                if entries.contains_key(&(peer.clone(), transport.clone())) {
                    if let Err(err) = writer.mark_stale(&peer, &transport) {
                        tracing::warn!("cannot mark {peer}/{transport} stale: {err}");
                    }
                    if let Some(e) = entries.get_mut(&(peer, transport)) {
                        e.flags |= netgauge::flags::STALE;
                    }
                }
            }
            Ok(Outcome::Logfp {
                peers,
                transport,
                fit,
            }) => {
                for p in &peers {
                    if let Some(e) = entries.get_mut(&(p.clone(), transport.clone())) {
                        attach_logfp(e, &fit);
                        if let Err(err) = writer.upsert(e) {
                            tracing::error!("cannot publish LogfP for {p}: {err}");
                        }
                    }
                }
                tracing::info!(
                    "LogfP over {} peers ({transport}): f {:?}, o_min {:.0} ns, o_max {:.0} ns",
                    peers.len(),
                    fit.f,
                    fit.o_min_ns,
                    fit.o_max_ns
                );
                logfp.insert(transport, (peers, fit));
                dirty = true;
            }
            Ok(Outcome::Contention { transport, fit }) => {
                publish_transport(writer, &transport, |t| {
                    set_contention(t, &fit, crate::publish::unix_now_ns())
                });
            }
            Ok(Outcome::Bisection(b)) => {
                let transport = b.transport.name();
                publish_transport(writer, transport, |t| set_bisection(t, &b.result));
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
        if dirty {
            let all: Vec<EntryData> = entries.values().cloned().collect();
            if let Err(e) = state::save(&cfg.state_file, &shared.node, &all) {
                tracing::warn!("{e}");
            }
        }
        if last_beat.elapsed() >= Duration::from_secs(1) {
            last_beat = Instant::now();
            writer.heartbeat();
            expire_session(shared);
            write_status(cfg, shared, server);
        }
    }
}

/// Change the record of `transport` (kept as it was otherwise) and publish.
fn publish_transport(
    writer: &mut SegmentWriter,
    transport: &str,
    change: impl FnOnce(&mut netgauge::TransportExt),
) {
    let mut t = writer.transport_ext(transport).copied().unwrap_or_default();
    change(&mut t);
    if let Err(e) = writer.set_transport_ext(transport, &t) {
        tracing::error!("cannot publish the {transport} record: {e}");
    }
}

fn write_status(cfg: &Config, shared: &Shared, server: &ControlServer) {
    use std::sync::atomic::Ordering;
    let uptime_s = shared.started.elapsed().as_secs_f64();
    let spent = shared.spent_bytes.load(Ordering::Relaxed);
    let st = StatusFile {
        node: shared.node.clone(),
        pid: std::process::id(),
        generation: shared.generation,
        uptime_s,
        updated_unix_ns: crate::publish::unix_now_ns(),
        peers: shared
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        budget_bytes_per_s: shared.budget_bytes_per_s,
        spent_bytes: spent,
        spent_bytes_per_s: spent as f64 / uptime_s.max(1.0),
        control_rejects: server.counters().snapshot(),
        responder_sessions: 0,
    };
    if let Err(e) = status::write(&cfg.shm, &st) {
        tracing::debug!(
            "status file {}: {e}",
            status::status_path(&cfg.shm).display()
        );
    }
}
