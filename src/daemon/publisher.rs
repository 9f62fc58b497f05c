//! The publisher (the daemon's main thread): owns the segment writer;
//! publishes whole results only (a failed probe publishes nothing and marks
//! the entry stale), beats the heartbeat, watches the quiet file, writes
//! the state and status files, keeps the node's view (what `Entries`
//! answers) current, and feeds the systemd watchdog.
//!
//! It sleeps until an outcome arrives, the shutdown, or its next beat
//! (every second: the segment's heartbeat, a few nanoseconds of work, is
//! what readers judge the daemon alive by; the quiet file is looked at on
//! the same beat). The state file is written when an entry changes; the
//! status file when what it shows changes, and at least every
//! [`STATUS_EVERY`].
//!
//! The segment is sized from the peer list: an entry per peer and
//! transport the configuration may ask for, an entry per coverage class
//! of this node and transport, and every peer in the peer → class map, so
//! a reader asking for a peer this node has not measured gets its class's
//! entry, flagged CLASS.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use netgauge::{flags, EntryData, SegmentOptions, SegmentWriter};

use super::admission::expire_session;
use super::cluster::Peer;
use super::config::Config;
use super::history::{Deviation, Event, History, Limits, Record};
use super::metrics::{self, Textfile};
use super::paths::DaemonFiles;
use super::probe_thread::PeerClass;
use super::state::{self, Provenance, Stored};
use super::status::{self, StatusFile};
use super::{quiet, sys, DaemonError, Shared, CONTROL_BEAT, FALLBACK};
use crate::cluster::matrix::summarize;
use crate::control::{BisectionReport, ControlServer, RejectSnapshot};
use crate::link::Kind;
use crate::model::contention::ContentionFit;
use crate::model::{Interval, LogfpFit};
use crate::publish::{attach_logfp, set_bisection, set_contention};

/// The heartbeat period.
const BEAT: Duration = Duration::from_secs(1);
/// The status file is rewritten at least this often.
const STATUS_EVERY: Duration = Duration::from_secs(30);

/// What the probe thread hands the publisher.
pub(super) enum Outcome {
    /// A new measurement, where it was made, and what made it (a sweep or
    /// a repair, for the history).
    Publish(Box<EntryData>, Provenance, Event),
    Stale {
        peer: String,
        transport: String,
    },
    Logfp {
        peers: Vec<String>,
        transport: String,
        fit: LogfpFit,
        /// Its `logfp.*` intervals.
        ci95: BTreeMap<String, Interval>,
    },
    /// A re-check agreed with the entry: it is current (a RESTORED entry
    /// stops being one).
    Confirmed {
        peer: String,
        transport: String,
        at_unix_ns: u64,
        deviation: Option<Deviation>,
    },
    /// A re-check disagreed with the entry (the schedule confirms it and
    /// repairs the entry): for the history.
    Disagreed {
        peer: String,
        transport: String,
        at_unix_ns: u64,
        deviation: Option<Deviation>,
    },
    /// The entry no longer describes the link (the peer's MAC changed):
    /// stale in the segment, gone from the state file.
    Dropped {
        peer: String,
        transport: String,
        why: String,
    },
    /// A conflict probe's penalties and sharing fit for a transport.
    Contention {
        transport: String,
        fit: Box<ContentionFit>,
    },
    /// An effective bisection bandwidth this node's operator measured.
    Bisection(BisectionReport),
}

/// The published entries and their provenance, by (peer, transport).
pub(super) type Entries = HashMap<(String, String), Stored>;

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
/// its coverage class, and fill it from the state file with the entries
/// of the peers and classes that may be restored (`state::restorable`),
/// each flagged RESTORED with its original measurement time: readers get
/// values at once, and can tell they are not current yet. Whatever a
/// re-opened segment still shows from the previous run that is not
/// restored is marked stale, so nothing of it passes for current.
pub(super) fn open_segment(
    files: &DaemonFiles,
    node: &str,
    clock_desc: &str,
    peers: &[Peer],
    classes: &[PeerClass],
    local: std::net::IpAddr,
) -> Result<(SegmentWriter, Entries), DaemonError> {
    let seg_err = |source| DaemonError::Segment {
        path: files.segment_path(),
        source,
    };
    let options = segment_options(peers, classes);
    let mut writer = SegmentWriter::create_or_open_in(
        &files.runtime,
        &files.segment,
        &options,
        node,
        clock_desc,
    )
    .map_err(|e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            seg_err(std::io::Error::new(
                e.kind(),
                "another writer (netgauged, ngctl --publish) holds its lock",
            ))
        } else {
            seg_err(e)
        }
    })?;
    if let Some(why) = writer.replaced_unusable() {
        tracing::warn!(
            "segment {}: the file there was not used ({why}); replaced by a new one",
            files.segment_path().display()
        );
    }
    let map: Vec<(&str, &str)> = peers
        .iter()
        .zip(classes)
        .map(|(p, c)| (p.name.as_str(), c.name.as_str()))
        .collect();
    if let Err(e) = writer.set_peer_classes(map) {
        tracing::warn!("peer → class map not published: {e}");
    }
    let (stored_node, loaded) = match state::load(&files.state, files.state_file()) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!("{e}; starting without stored parameters");
            (String::new(), Vec::new())
        }
    };
    let mut entries = Entries::new();
    let known_class = |n: &str| classes.iter().any(|c| c.name == n);
    for mut s in loaded {
        let (peer, transport) = (s.entry.peer.clone(), s.entry.transport.clone());
        let at = if peer.starts_with('@') {
            known_class(&peer).then_some(state::PeerAt::Class)
        } else {
            peers
                .binary_search_by(|p| p.name.as_str().cmp(&peer))
                .ok()
                .map(|i| state::PeerAt::Peer {
                    address: peers[i].explicit,
                    interface: peers[i].interface.as_deref(),
                })
        };
        if let Err(why) = state::restorable(&s, &stored_node, node, local, at) {
            tracing::info!("stored {peer}/{transport} not restored: {why}");
            continue;
        }
        s.entry.flags |= flags::RESTORED;
        if let Err(err) = writer.upsert(&s.entry) {
            tracing::warn!("stored entry {peer}/{transport} not restored: {err}");
            continue;
        }
        entries.insert((peer, transport), s);
    }
    for e in writer.entries() {
        let key = (e.peer.clone(), e.transport.clone());
        if !entries.contains_key(&key) && e.flags & flags::STALE == 0 {
            if let Err(err) = writer.mark_stale(&e.peer, &e.transport) {
                tracing::warn!("cannot mark {}/{} stale: {err}", e.peer, e.transport);
            }
        }
    }
    writer.heartbeat();
    tracing::info!(
        "segment {} ready: {} entries restored (flagged restored until re-checked), \
         generation {:016x} (room for {} entries, {} classes, {} peers mapped)",
        files.segment_path().display(),
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
    let all: Vec<EntryData> = entries.values().map(|s| s.entry.clone()).collect();
    let view = Arc::new(summarize(&all, class_of));
    *shared.view.lock().unwrap_or_else(|e| e.into_inner()) = view;
}

/// Replace `metrics_textfile` with the exposition of what the segment
/// holds now (timestamps, no ages: the file is read later).
fn write_textfile(t: &Textfile, shared: &Shared, server: &ControlServer, writer: &SegmentWriter) {
    let entries = writer.entries();
    let st = status_snapshot(shared, server.counters().snapshot());
    let now = crate::publish::unix_now_ns();
    let text = metrics::render(&metrics::Snapshot {
        entries: Some(&entries),
        // The publisher beat the heartbeat just before.
        heartbeat_unix_ns: Some(now),
        clock: &shared.clock_desc,
        status: &st,
        now_unix_ns: now,
        with_ages: false,
        http_rejects: &[],
    });
    if let Err(e) = t.write(&text) {
        tracing::warn!("metrics_textfile {}: {e}", t.dir().join(t.name()).display());
    }
}

/// What the last status file showed, to write it again only on change.
#[derive(Default)]
struct StatusSeen {
    version: u64,
    rejects: RejectSnapshot,
    spent_bytes: u64,
    /// Serving, driving.
    busy: (bool, bool),
    at: Option<Instant>,
}

/// Whether this node serves a live session, and whether it drives a job.
fn busy(shared: &Shared) -> (bool, bool) {
    let a = shared.activity();
    (a.serving_live(Instant::now()), a.driving)
}

/// The publisher's loop: until the shutdown.
pub(super) fn publish_loop(
    cfg: &Config,
    files: &DaemonFiles,
    shared: &Shared,
    writer: &mut SegmentWriter,
    entries: &mut Entries,
    rx: &Receiver<Outcome>,
    server: &ControlServer,
) {
    // Per transport: the peers of the last fan-out, its fit and intervals.
    let mut logfp: HashMap<String, Fanout> = HashMap::new();
    let started = Instant::now();
    let mut next_beat = started;
    let watchdog = sys::watchdog_interval().map(|d| d / 2);
    let mut last_ping = started;
    let mut seen = StatusSeen::default();
    let mut starving = false;
    // Written at the first beat, then after every outcome and with the
    // status file.
    let mut textfile_due = true;
    let shutdown = shared.shutdown.receiver();
    let class_of: Vec<(String, String)> = shared
        .peers
        .iter()
        .filter_map(|p| Some((p.name.clone(), writer.peer_class(&p.name)?.to_string())))
        .collect();
    refresh_view(shared, entries, &class_of);
    let mut history = open_history(cfg, files, shared, entries);
    let mut history_saved = history.pushed();
    let mut watch = quiet::Watch::default();
    let quiet_at = cfg.shm_path();
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    poll_quiet(shared, &mut watch, &quiet_at, euid);
    while !shared.shutdown.is_set() {
        let wait = next_beat.saturating_duration_since(Instant::now());
        let mut dirty = false;
        crossbeam_channel::select! {
            recv(rx) -> o => match o {
                Ok(o) => {
                    dirty = handle(o, writer, entries, &mut logfp, &mut history);
                    textfile_due = true;
                }
                Err(_) => break,
            },
            recv(shutdown) -> _ => break,
            default(wait) => {}
        }
        if history.pushed() != history_saved {
            history_saved = history.pushed();
            save_history(&history, files, shared);
        }
        if dirty {
            let all: Vec<Stored> = entries.values().cloned().collect();
            if let Err(e) = state::save(&files.state, files.state_file(), &shared.node, &all) {
                tracing::warn!("{e}");
            }
            refresh_view(shared, entries, &class_of);
            shared.status_version.fetch_add(1, Ordering::Relaxed);
        }
        if Instant::now() < next_beat {
            continue;
        }
        next_beat += BEAT;
        if next_beat < Instant::now() {
            next_beat = Instant::now() + BEAT;
        }
        if let Some(after) = cfg.test_stall_publisher_after_s {
            if started.elapsed().as_secs_f64() >= after {
                stall(shared);
                continue;
            }
        }
        writer.heartbeat();
        expire_session(shared);
        poll_quiet(shared, &mut watch, &quiet_at, euid);
        let status_due = write_status(files, shared, server, &mut seen);
        if let Some(t) = &files.metrics_textfile {
            if status_due || textfile_due {
                write_textfile(t, shared, server, writer);
                textfile_due = false;
            }
        }
        if let Some(every) = watchdog {
            if last_ping.elapsed() >= every {
                let control_ok = server.alive_within(2 * CONTROL_BEAT + BEAT);
                let probe_ok = shared.probe_alive.kept();
                if control_ok && probe_ok {
                    sys::notify(&[sd_notify::NotifyState::Watchdog]);
                    last_ping = Instant::now();
                    starving = false;
                } else if !starving {
                    starving = true;
                    tracing::error!(
                        "not feeding the watchdog: {} stopped making progress",
                        if control_ok {
                            "the probe thread"
                        } else {
                            "the control plane"
                        }
                    );
                }
            }
        }
    }
}

/// Look at the quiet file of the segment: the node is held quiet while a
/// holder's hold lasts. A change is logged and shows in the status file.
fn poll_quiet(shared: &Shared, watch: &mut quiet::Watch, shm: &Path, euid: u32) {
    let q = watch.poll(shm, euid, crate::publish::unix_now_ns());
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
    let mut held = shared
        .quiet_status
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if *held != q {
        *held = q;
        shared.status_version.fetch_add(1, Ordering::Relaxed);
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

/// The publisher's stall for tests of the watchdog (hidden flag
/// `--test-stall-publisher-after-s`): it stops beating, writing and
/// feeding the watchdog, as if stuck in a system call, until the process
/// ends; a SIGTERM still ends it (the signal thread's deadline).
fn stall(shared: &Shared) {
    tracing::warn!("test: the publisher stalls now (--test-stall-publisher-after-s)");
    while !shared.shutdown.is_set() {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Per transport: the peers of the last fan-out, its fit and intervals.
type Fanout = (Vec<String>, LogfpFit, BTreeMap<String, Interval>);

/// Act on one outcome; true if the stored entries changed.
fn handle(
    o: Outcome,
    writer: &mut SegmentWriter,
    entries: &mut Entries,
    logfp: &mut HashMap<String, Fanout>,
    history: &mut History,
) -> bool {
    let now = crate::publish::unix_now_ns();
    match o {
        Outcome::Publish(mut e, provenance, event) => {
            if let Some((peers, fit, ci95)) = logfp.get(&e.transport) {
                if peers.contains(&e.peer) {
                    attach_logfp(&mut e, fit, ci95);
                }
            }
            match writer.upsert(&e) {
                Ok(_) => {
                    history.push(Record::of(&e, event, now, None), now);
                    let key = (e.peer.clone(), e.transport.clone());
                    entries.insert(
                        key,
                        Stored {
                            provenance,
                            entry: *e,
                        },
                    );
                    true
                }
                Err(err) => {
                    tracing::error!("cannot publish {}/{}: {err}", e.peer, e.transport);
                    false
                }
            }
        }
        Outcome::Stale { peer, transport } => {
            if let Some(s) = entries.get_mut(&(peer.clone(), transport.clone())) {
                if let Err(err) = writer.mark_stale(&peer, &transport) {
                    tracing::warn!("cannot mark {peer}/{transport} stale: {err}");
                }
                if s.entry.flags & flags::STALE == 0 {
                    s.entry.flags |= flags::STALE;
                    history.push(Record::of(&s.entry, Event::Stale, now, None), now);
                }
            }
            false
        }
        Outcome::Logfp {
            peers,
            transport,
            fit,
            ci95,
        } => {
            for p in &peers {
                if let Some(s) = entries.get_mut(&(p.clone(), transport.clone())) {
                    attach_logfp(&mut s.entry, &fit, &ci95);
                    if let Err(err) = writer.upsert(&s.entry) {
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
            logfp.insert(transport, (peers, fit, ci95));
            true
        }
        Outcome::Confirmed {
            peer,
            transport,
            at_unix_ns,
            deviation,
        } => {
            let Some(s) = entries.get_mut(&(peer.clone(), transport.clone())) else {
                return false;
            };
            history.push(
                Record::of(&s.entry, Event::RecheckAgree, at_unix_ns, deviation),
                now,
            );
            let was_restored = s.entry.flags & flags::RESTORED != 0;
            s.entry.flags &= !(flags::RESTORED | flags::STALE);
            s.entry.ext.checked_unix_ns = at_unix_ns;
            if let Err(err) = writer.upsert(&s.entry) {
                tracing::warn!("cannot confirm {peer}/{transport}: {err}");
                return false;
            }
            if was_restored {
                tracing::info!("{peer}/{transport}: restored values confirmed by a re-check");
            }
            was_restored
        }
        Outcome::Disagreed {
            peer,
            transport,
            at_unix_ns,
            deviation,
        } => {
            if let Some(s) = entries.get(&(peer, transport)) {
                history.push(
                    Record::of(&s.entry, Event::RecheckDisagree, at_unix_ns, deviation),
                    now,
                );
            }
            false
        }
        Outcome::Dropped {
            peer,
            transport,
            why,
        } => {
            if entries.remove(&(peer.clone(), transport.clone())).is_none() {
                return false;
            }
            tracing::info!("{peer}/{transport}: stored values dropped: {why}");
            if let Err(err) = writer.mark_stale(&peer, &transport) {
                tracing::warn!("cannot mark {peer}/{transport} stale: {err}");
            }
            true
        }
        Outcome::Contention { transport, fit } => {
            publish_transport(writer, &transport, |t| {
                set_contention(t, &fit, crate::publish::unix_now_ns())
            });
            false
        }
        Outcome::Bisection(b) => {
            let transport = b.transport.name();
            publish_transport(writer, transport, |t| set_bisection(t, &b.result));
            false
        }
    }
}

/// The history from the history file (a file that cannot be read is
/// reported and replaced by a new history at once), with a record per
/// entry restored at this start.
fn open_history(cfg: &Config, files: &DaemonFiles, shared: &Shared, entries: &Entries) -> History {
    let now = crate::publish::unix_now_ns();
    let limits = Limits::of(cfg);
    let (mut h, mut write) = match History::load(&files.state, &files.history, limits, now) {
        Ok(h) => (h, false),
        Err(e) => {
            tracing::warn!("{e}; starting a new history (the file is replaced)");
            (History::new(limits), true)
        }
    };
    let mut restored: Vec<&Stored> = entries.values().collect();
    restored.sort_by(|a, b| {
        (&a.entry.peer, &a.entry.transport).cmp(&(&b.entry.peer, &b.entry.transport))
    });
    for s in restored {
        h.push(Record::of(&s.entry, Event::Restored, now, None), now);
        write = true;
    }
    if write {
        save_history(&h, files, shared);
    }
    h
}

fn save_history(h: &History, files: &DaemonFiles, shared: &Shared) {
    if let Err(e) = h.save(&files.state, &files.history, &shared.node) {
        tracing::warn!("{e}");
    }
}

/// Rewrite the status file if what it shows changed, or every
/// [`STATUS_EVERY`]; true if it was due (written or not).
fn write_status(
    files: &DaemonFiles,
    shared: &Shared,
    server: &ControlServer,
    seen: &mut StatusSeen,
) -> bool {
    let version = shared.status_version.load(Ordering::Relaxed);
    let rejects = server.counters().snapshot();
    let spent = shared.spent_bytes.load(Ordering::Relaxed);
    let now_busy = busy(shared);
    let changed = version != seen.version
        || rejects != seen.rejects
        || spent != seen.spent_bytes
        || now_busy != seen.busy;
    if !changed && seen.at.is_some_and(|t| t.elapsed() < STATUS_EVERY) {
        return false;
    }
    let st = StatusFile {
        history_file: Some(files.history_path()),
        ..status_snapshot(shared, rejects)
    };
    match status::write(&files.runtime, &files.status, &st) {
        Ok(()) => {
            *seen = StatusSeen {
                version,
                rejects,
                spent_bytes: spent,
                busy: now_busy,
                at: Some(Instant::now()),
            };
        }
        Err(e) => tracing::debug!(
            "status file {}: {e}",
            files.runtime.path().join(&files.status).display()
        ),
    }
    true
}

/// What the status file shows now, with the control plane's rejections
/// `rejects` (also the metrics' view of the daemon).
pub(super) fn status_snapshot(shared: &Shared, rejects: RejectSnapshot) -> StatusFile {
    let spent = shared.spent_bytes.load(Ordering::Relaxed);
    let uptime_s = shared.started.elapsed().as_secs_f64();
    let (serving, driving) = busy(shared);
    StatusFile {
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
        control_rejects: rejects,
        responder_sessions: u64::from(serving),
        driving,
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
        history_file: None,
    }
}
