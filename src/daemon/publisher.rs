//! The publisher (the daemon's main thread): owns the segment writer;
//! publishes whole results only (a failed probe publishes nothing and marks
//! the entry stale), beats the heartbeat, watches the quiet file, writes
//! the state and status files, and keeps the node's view (what `Entries`
//! answers) current.
//!
//! The segment is sized from the peer list: an entry per peer and
//! transport the configuration may ask for, an entry per coverage class
//! of this node and transport, and every peer in the peer → class map, so
//! a reader asking for a peer this node has not measured gets its class's
//! entry, flagged CLASS.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use netgauge::{EntryData, SegmentOptions, SegmentWriter};

use super::admission::expire_session;
use super::cluster::Peer;
use super::config::Config;
use super::probe_thread::PeerClass;
use super::status::{self, StatusFile};
use super::{quiet, state, DaemonError, Shared, FALLBACK};
use crate::cluster::matrix::summarize;
use crate::control::ControlServer;
use crate::link::Kind;
use crate::model::LogfpFit;
use crate::publish::attach_logfp;

/// What the probe thread hands the publisher.
pub(super) enum Outcome {
    Publish(Box<EntryData>),
    Stale {
        peer: String,
        transport: String,
    },
    /// A re-check agreed with the entry: it is confirmed at that time.
    Checked {
        peer: String,
        transport: String,
        at_unix_ns: u64,
    },
    Logfp {
        peers: Vec<String>,
        transport: String,
        fit: LogfpFit,
    },
}

/// The published entries, by (peer, transport).
pub(super) type Entries = HashMap<(String, String), EntryData>;

/// The segment's sizes for `peers` and this node's `classes`.
pub(super) fn segment_options(peers: &[Peer], classes: &[PeerClass]) -> SegmentOptions {
    let kinds_of = |p: &Peer| {
        Kind::daemon_kinds()
            .filter(|&k| k == FALLBACK || p.wants(k))
            .count()
    };
    let per_peer: usize = peers.iter().map(kinds_of).sum();
    let max_kinds = peers.iter().map(kinds_of).max().unwrap_or(1);
    let mut names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    SegmentOptions {
        capacity_entries: (per_peer + names.len() * max_kinds).max(16),
        class_capacity: names.len().clamp(1, netgauge::layout::MAX_CLASSES),
        map_capacity: peers.len().clamp(1, netgauge::layout::MAX_MAP_PEERS),
    }
}

/// Create (or re-open) the segment sized for the peers, map every peer to
/// its coverage class, and fill it from the state file with the entries of
/// the peers and classes (flagged RESTORED until a re-check confirms
/// them): readers get values at once.
pub(super) fn open_segment(
    cfg: &Config,
    node: &str,
    clock_desc: &str,
    peers: &[Peer],
    classes: &[PeerClass],
) -> Result<(SegmentWriter, Entries), DaemonError> {
    let seg_err = |source| DaemonError::Segment {
        path: cfg.shm.clone(),
        source,
    };
    let options = segment_options(peers, classes);
    let mut writer = SegmentWriter::create_or_open_with(&cfg.shm, &options, node, clock_desc)
        .map_err(seg_err)?;
    let map: Vec<(&str, &str)> = peers
        .iter()
        .zip(classes)
        .map(|(p, c)| (p.name.as_str(), c.name.as_str()))
        .collect();
    if let Err(e) = writer.set_peer_classes(map) {
        tracing::warn!("peer → class map not published: {e}");
    }
    let loaded = match state::load(&cfg.state_file) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("{e}; starting without stored parameters");
            Vec::new()
        }
    };
    let mut entries = Entries::new();
    let known = |n: &str| {
        peers.binary_search_by(|p| p.name.as_str().cmp(n)).is_ok()
            || classes.iter().any(|c| c.name == n)
    };
    for mut e in loaded {
        if known(&e.peer) {
            e.flags |= netgauge::flags::RESTORED;
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
        "segment {} ready: {} entries restored, generation {:016x} (room for {} entries, {} classes, {} peers mapped)",
        cfg.shm.display(),
        entries.len(),
        writer.generation(),
        options.capacity_entries,
        options.class_capacity,
        options.map_capacity
    );
    Ok((writer, entries))
}

/// Rebuild the node's view (what `Entries` answers) from the entries and
/// the writer's class map.
fn refresh_view(shared: &Shared, entries: &Entries, class_of: &[(String, String)]) {
    let all: Vec<EntryData> = entries.values().cloned().collect();
    let view = Arc::new(summarize(&all, class_of));
    *shared.view.lock().unwrap_or_else(|e| e.into_inner()) = view;
}

pub(super) fn publish_loop(
    cfg: &Config,
    shared: &Shared,
    writer: &mut SegmentWriter,
    entries: &mut Entries,
    rx: &Receiver<Outcome>,
    server: &ControlServer,
) {
    // Per transport: the peers of the last fan-out and its fit.
    let mut logfp: HashMap<String, (Vec<String>, LogfpFit)> = HashMap::new();
    let mut last_beat = Instant::now() - Duration::from_secs(1);
    let class_of: Vec<(String, String)> = shared
        .peers
        .iter()
        .filter_map(|p| Some((p.name.clone(), writer.peer_class(&p.name)?.to_string())))
        .collect();
    refresh_view(shared, entries, &class_of);
    let mut watch = quiet::Watch::default();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    while !shared.shutdown.load(Ordering::Relaxed) {
        let q = watch.poll(&cfg.shm, euid, crate::publish::unix_now_ns());
        if shared.quiet.swap(q.quiet, Ordering::Relaxed) != q.quiet {
            if q.quiet {
                tracing::info!(
                    "quiet (held by {}): no probes, sessions declined",
                    q.holders.join(", ")
                );
            } else {
                tracing::info!("resumed");
            }
        }
        *shared
            .quiet_status
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = q;
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
            Ok(Outcome::Checked {
                peer,
                transport,
                at_unix_ns,
            }) => {
                if let Some(e) = entries.get_mut(&(peer.clone(), transport.clone())) {
                    e.ext.checked_unix_ns = at_unix_ns;
                    e.flags &= !(netgauge::flags::RESTORED | netgauge::flags::STALE);
                    match writer.upsert(e) {
                        Ok(_) => dirty = true,
                        Err(err) => tracing::warn!("cannot confirm {peer}/{transport}: {err}"),
                    }
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
                    dirty = true;
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
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        }
        if dirty {
            let all: Vec<EntryData> = entries.values().cloned().collect();
            if let Err(e) = state::save(&cfg.state_file, &shared.node, &all) {
                tracing::warn!("{e}");
            }
            refresh_view(shared, entries, &class_of);
        }
        if last_beat.elapsed() >= Duration::from_secs(1) {
            last_beat = Instant::now();
            writer.heartbeat();
            expire_session(shared);
            write_status(cfg, shared, server);
        }
    }
}

fn write_status(cfg: &Config, shared: &Shared, server: &ControlServer) {
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
        schedule: shared
            .sched_status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone(),
        quiet: Some(
            shared
                .quiet_status
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        ),
    };
    if let Err(e) = status::write(&cfg.shm, &st) {
        tracing::debug!(
            "status file {}: {e}",
            status::status_path(&cfg.shm).display()
        );
    }
}
