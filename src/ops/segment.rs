//! The operations on a segment and on saved probes: `ngctl fit` (re-fit a
//! saved probe, optionally publishing it), `ngctl dump`, `ngctl status`,
//! and `ngctl clock`.

use std::path::Path;

use netgauge::{EntryData, Reader, SegmentInfo};

use super::{node_name, OpsError};
use crate::clock::{clock_info, ClockChoice, ClockInfo, HostClock};
use crate::daemon::StatusFile;
use crate::model::exchange::{fit_exchange, ExchangeFit, ExchangeRaw};
use crate::probe::{self, ProbeOptions, ProbeResult};
use crate::publish::{entry_from_exchange, entry_from_probe, unix_now_ns};

/// Capacity of a segment `ngctl probe --publish` creates (the daemon sizes
/// its own from its peer list).
const PROBE_SEGMENT_ENTRIES: usize = 64;

/// The segment path: the given one, else `$NETGAUGE_SEGMENT`, else the
/// default.
pub fn shm_path(shm: Option<&str>) -> String {
    shm.map(str::to_string)
        .or_else(|| std::env::var(netgauge::PATH_ENV).ok())
        .unwrap_or_else(|| netgauge::DEFAULT_PATH.to_string())
}

/// Write `result` into the segment at `path` as the entry (peer,
/// transport), and the exchange fit beside it. Returns the (peer,
/// transport) of every entry written.
pub fn publish_result(
    path: &str,
    peer: &str,
    transport: &str,
    clock_desc: &str,
    result: &ProbeResult,
    exchange: Option<&ExchangeFit>,
) -> Result<Vec<(String, String)>, OpsError> {
    let entry = entry_from_probe(peer, transport, result);
    let mut w = writer(path, clock_desc)?;
    let publish = |source| OpsError::Publish {
        path: path.into(),
        source,
    };
    w.upsert(&entry).map_err(publish)?;
    let mut done = vec![(peer.to_string(), transport.to_string())];
    if let Some(x) = exchange.and_then(|x| entry_from_exchange(peer, transport, x)) {
        w.upsert(&x).map_err(publish)?;
        done.push((peer.to_string(), x.transport));
    }
    Ok(done)
}

/// Write a transport's contention record measured beside a probe (the MPI
/// probe's conflict sweep) into the segment at `path`; (node, transport)
/// for the note.
pub fn publish_record(
    path: &str,
    transport: &str,
    clock_desc: &str,
    rec: &netgauge::TransportExt,
) -> Result<(String, String), OpsError> {
    let mut w = writer(path, clock_desc)?;
    w.set_transport_ext(transport, rec)
        .map_err(|source| OpsError::Publish {
            path: path.into(),
            source,
        })?;
    Ok((node_name(), format!("{transport} (contention record)")))
}

/// The segment at `path` for `ngctl`'s own results (created if missing),
/// its heartbeat current: what `ngctl` writes there is fresh now.
pub(super) fn writer(path: &str, clock_desc: &str) -> Result<netgauge::SegmentWriter, OpsError> {
    let w = netgauge::SegmentWriter::create_or_open(
        path,
        PROBE_SEGMENT_ENTRIES,
        &node_name(),
        clock_desc,
    )
    .map_err(|source| OpsError::SegmentCreate {
        path: path.into(),
        source,
    })?;
    w.heartbeat();
    Ok(w)
}

/// Write a conflict probe's penalties and β into the record of `transport`
/// in the segment at `path` (its bisection part kept).
pub fn publish_contention(
    path: &str,
    transport: &str,
    fit: &crate::model::contention::ContentionFit,
) -> Result<(), OpsError> {
    let mut w = writer(path, "ngctl contention")?;
    let mut t = w.transport_ext(transport).copied().unwrap_or_default();
    crate::publish::set_contention(&mut t, fit, unix_now_ns());
    w.set_transport_ext(transport, &t)
        .map_err(|source| OpsError::Publish {
            path: path.into(),
            source,
        })
}

/// What `ngctl fit` is asked to do.
#[derive(Clone, Debug)]
pub struct FitArgs {
    /// The saved `ngctl probe --json --raw` output ("-": stdin).
    pub file: String,
    /// Publish into this segment as (peer, transport).
    pub publish: Option<(String, String, String)>,
}

/// The raw part of `ngctl probe --json --raw`.
#[derive(serde::Deserialize)]
struct SavedRaw {
    #[serde(flatten)]
    probe: probe::Raw,
    #[serde(default)]
    exchange: Option<ExchangeRaw>,
}

#[derive(serde::Deserialize)]
struct SavedProbe {
    raw: Option<SavedRaw>,
    /// The transport it ran over (older files: none, fitted as any).
    #[serde(default)]
    transport: Option<String>,
    /// The peer it measured (the JSON envelope's; older files: none).
    #[serde(default)]
    peer: Option<String>,
    /// When `ngctl probe` wrote it, ns since the Unix epoch.
    #[serde(default)]
    timestamp_unix_ns: Option<u64>,
}

/// A saved probe's raw samples, re-fitted ([`load_probe`]).
pub struct LoadedProbe {
    pub result: ProbeResult,
    pub exchange: Option<ExchangeFit>,
    /// The peer the probe measured, if the file names it.
    pub peer: Option<String>,
    /// When the probe was saved, ns since the Unix epoch, if known.
    pub timestamp_unix_ns: Option<u64>,
}

/// Read a saved `ngctl probe --json --raw` ("-": stdin) and re-fit its raw
/// samples with this version's estimator.
pub fn load_probe(file: &str) -> Result<LoadedProbe, OpsError> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|source| OpsError::Read {
            what: "stdin".into(),
            source,
        })?
    } else {
        std::fs::read_to_string(file).map_err(|source| OpsError::Read {
            what: file.to_string(),
            source,
        })?
    };
    let saved: SavedProbe =
        serde_json::from_str(&text).map_err(|source| OpsError::NotProbeJson {
            file: file.to_string(),
            source,
        })?;
    let raw = saved.raw.ok_or_else(|| OpsError::NoRawSamples {
        file: file.to_string(),
    })?;
    let nothing = |what| OpsError::NothingToFit {
        file: file.to_string(),
        what,
    };
    if raw.probe.sizes.is_empty() {
        return Err(nothing("no sizes"));
    }
    if raw.probe.sizes.iter().all(|s| s.prtt1_ns.is_empty()) {
        return Err(nothing("every size has no round trips"));
    }
    let opts = match saved
        .transport
        .as_deref()
        .map(str::parse::<crate::link::Kind>)
    {
        Some(Ok(kind)) => ProbeOptions::for_kind(kind),
        _ => ProbeOptions::default(),
    };
    let mut result = probe::fit(raw.probe, &opts);
    result.transport = saved.transport.clone();
    let exchange = raw
        .exchange
        .as_ref()
        .and_then(|x| fit_exchange(x.ranks, &x.sizes));
    Ok(LoadedProbe {
        result,
        exchange,
        peer: saved.peer,
        timestamp_unix_ns: saved.timestamp_unix_ns,
    })
}

/// Re-fit a saved probe's raw samples with this version's estimator.
/// Returns the result, the exchange fit and the number of sizes.
pub fn refit(
    a: &FitArgs,
    note: &mut dyn FnMut(super::Note),
) -> Result<(ProbeResult, Option<ExchangeFit>, usize), OpsError> {
    let file = &a.file;
    let LoadedProbe {
        result, exchange, ..
    } = load_probe(file)?;
    let n = result.samples.len();
    if let Some((path, peer, transport)) = &a.publish {
        let clock_desc = format!("re-fit of {file}");
        for (peer, transport) in publish_result(
            path,
            peer,
            transport,
            &clock_desc,
            &result,
            exchange.as_ref(),
        )? {
            note(super::Note::Published {
                peer,
                transport,
                path: path.clone(),
            });
        }
    }
    Ok((result, exchange, n))
}

/// A segment as `ngctl dump` shows it.
pub struct DumpData {
    pub path: String,
    pub info: SegmentInfo,
    pub entries: Vec<EntryData>,
    /// The per-transport records (contention, bisection).
    pub transports: Vec<(String, netgauge::TransportExt)>,
    pub now_unix_ns: u64,
    /// The writer's heartbeat is recent.
    pub alive: bool,
}

fn reader(path: &str) -> Result<(Reader, SegmentInfo), OpsError> {
    let reader = Reader::open(path).map_err(|e| match e {
        netgauge::ReaderError::Io(io) if io.kind() == std::io::ErrorKind::NotFound => {
            OpsError::NoSegment { path: path.into() }
        }
        e => OpsError::SegmentRead {
            path: path.into(),
            reason: e.to_string(),
        },
    })?;
    let info = reader.info().map_err(|e| invalid(path, e))?;
    Ok((reader, info))
}

fn invalid(path: &str, e: impl std::fmt::Display) -> OpsError {
    OpsError::SegmentInvalid {
        path: path.into(),
        reason: e.to_string(),
    }
}

fn alive(info: &SegmentInfo, now: u64) -> bool {
    info.heartbeat_unix_ns != 0
        && now.saturating_sub(info.heartbeat_unix_ns) < netgauge::DEFAULT_STALE_AFTER_NS
}

/// Every entry of the segment at `path`.
pub fn dump(path: &str) -> Result<DumpData, OpsError> {
    let (reader, info) = reader(path)?;
    let entries = reader.snapshot().map_err(|e| invalid(path, e))?;
    let transports = reader.transports_ext().map_err(|e| invalid(path, e))?;
    let now = unix_now_ns();
    Ok(DumpData {
        path: path.into(),
        alive: alive(&info, now),
        info,
        entries,
        transports,
        now_unix_ns: now,
    })
}

/// The daemon behind a segment, as `ngctl status` shows it.
pub struct StatusData {
    pub path: String,
    pub info: SegmentInfo,
    /// Seconds since the last heartbeat; None after a clean stop (the
    /// writer zeroes the heartbeat when it shuts down).
    pub heartbeat_age_s: Option<f64>,
    pub alive: bool,
    /// The daemon's status file, if it has one.
    pub daemon: Option<StatusFile>,
    pub now_unix_ns: u64,
}

impl StatusData {
    /// `Err` when the daemon is not running (after the status was shown).
    pub fn check_alive(&self) -> Result<(), OpsError> {
        if self.alive {
            Ok(())
        } else {
            Err(OpsError::NotRunning {
                path: self.path.clone(),
            })
        }
    }
}

/// The status of the daemon writing the segment at `path`.
pub fn status(path: &str) -> Result<StatusData, OpsError> {
    let (_, info) = reader(path)?;
    let now = unix_now_ns();
    Ok(StatusData {
        path: path.into(),
        heartbeat_age_s: (info.heartbeat_unix_ns != 0)
            .then(|| now.saturating_sub(info.heartbeat_unix_ns) as f64 / 1e9),
        alive: alive(&info, now),
        daemon: crate::daemon::status::read(Path::new(path)),
        info,
        now_unix_ns: now,
    })
}

/// The probe clock as `ngctl clock` shows it.
pub fn clock(choice: ClockChoice, long: bool) -> Result<ClockInfo, OpsError> {
    let clock = HostClock::choose(choice)?;
    Ok(clock_info(&clock, long))
}
