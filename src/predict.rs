//! `ngctl predict`: every candidate algorithm's predicted time for a
//! collective, from the parameters in the segment, and the choice; and the
//! segment reading that `ngctl export` shares with it.

use std::path::{Path, PathBuf};

use netgauge::select::{self, Algorithm, Collective, Measured, Network, SelectOptions};
use netgauge::{EntryData, Params, Reader};
use serde::Serialize;

use crate::ops::OpsError;

type Result<T> = std::result::Result<T, OpsError>;

/// The segment file: `--shm`, else `$NETGAUGE_SEGMENT`, else the default.
pub fn segment_path(shm: Option<&Path>) -> PathBuf {
    match shm {
        Some(p) => p.to_path_buf(),
        None => std::env::var_os(netgauge::PATH_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(netgauge::DEFAULT_PATH)),
    }
}

/// Every entry of the segment (one snapshot). Offline use: the heartbeat is
/// not checked (a one-shot `ngctl probe --publish` has no daemon behind it).
pub fn load_entries(shm: Option<&Path>) -> Result<Vec<EntryData>> {
    let path = segment_path(shm);
    let mut reader = Reader::open(&path).map_err(|source| OpsError::SegmentOpen {
        path: path.display().to_string(),
        source,
    })?;
    reader.set_stale_after_ns(0);
    reader.snapshot().map_err(|e| OpsError::Snapshot {
        path: path.display().to_string(),
        reason: e.to_string(),
    })
}

/// The entry of (peer, transport) among `entries` (of the segment `shm`).
/// Without a peer or a transport, the only entry that fits what is given;
/// when several fit, the error lists them (an all-ranks exchange entry,
/// `<transport>-x<P>`, is never a pair's entry).
pub fn find_entry(
    entries: &[EntryData],
    shm: Option<&Path>,
    peer: Option<&str>,
    transport: Option<&str>,
) -> Result<EntryData> {
    let pairs: Vec<&EntryData> = entries
        .iter()
        .filter(|e| !is_exchange(&e.transport))
        .filter(|e| transport.is_none_or(|t| e.transport == t))
        .filter(|e| peer.is_none_or(|p| e.peer == p))
        .collect();
    let path = segment_path(shm).display().to_string();
    match pairs.as_slice() {
        [e] => Ok((*e).clone()),
        [] => Err(OpsError::NoEntry {
            peer: peer.unwrap_or("(any)").to_string(),
            transport: transport.unwrap_or("(any)").to_string(),
            path,
        }),
        several => Err(OpsError::Ambiguous {
            what: format!("{} entries in {path} fit", several.len()),
            list: several
                .iter()
                .map(|e| format!("  --peer {} --transport {}", e.peer, e.transport))
                .collect::<Vec<_>>()
                .join("\n"),
        }),
    }
}

/// Whether a transport name is that of an all-ranks exchange entry
/// (`<transport>-x<P>`).
fn is_exchange(transport: &str) -> bool {
    transport
        .rsplit_once("-x")
        .is_some_and(|(_, p)| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Read the entry of (peer, transport) from the segment ([`load_entries`],
/// [`find_entry`]).
pub fn load_entry(
    shm: Option<&Path>,
    peer: Option<&str>,
    transport: Option<&str>,
) -> Result<EntryData> {
    find_entry(&load_entries(shm)?, shm, peer, transport)
}

/// The exchange ranges of `ranks` ranks published beside the entry (peer,
/// transport) (see [`select::exchange_transport`]); empty if there are none.
pub fn exchange_of(
    entries: &[EntryData],
    peer: &str,
    transport: &str,
    ranks: usize,
) -> Vec<Params> {
    let mut buf = [0u8; netgauge::layout::TRANSPORT_MAX_BYTES];
    let Some(name) = select::exchange_transport(transport, ranks, &mut buf) else {
        return Vec::new();
    };
    entries
        .iter()
        .find(|e| e.transport == name && e.peer == peer)
        .map(EntryData::params)
        .unwrap_or_default()
}

/// What `ngctl predict` is asked.
#[derive(Clone, Debug)]
pub struct PredictArgs {
    pub collective: Collective,
    /// Number of processes P.
    pub ranks: usize,
    /// Message size in bytes (ignored for barrier).
    pub bytes: u64,
    /// Peer name of the segment entry (None: the only one that fits).
    pub peer: Option<String>,
    /// Transport of the segment entry (None: the only one that fits).
    pub transport: Option<String>,
    /// Segment file (None: $NETGAUGE_SEGMENT or the default).
    pub shm: Option<PathBuf>,
    /// Cost of combining one byte in a reduction.
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: at least one core per rank).
    /// With fewer cores than ranks, steps in which more ranks move bytes
    /// than there are cores take proportionally longer per byte.
    pub cores: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct CandidateJson {
    pub algorithm: &'static str,
    pub predicted_ns: f64,
    pub segment_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PredictJson {
    pub collective: &'static str,
    pub ranks: usize,
    pub bytes: u64,
    pub peer: String,
    pub transport: String,
    /// Whether the all-ranks exchange measured with this many ranks was
    /// used (else the pair's T(s) under processor sharing).
    pub measured_exchange: bool,
    pub candidates: Vec<CandidateJson>,
    pub choice: CandidateJson,
}

/// Predict from an explicit parameter set.
pub fn predict<N: Network + ?Sized>(
    net: &N,
    coll: Collective,
    ranks: usize,
    bytes: u64,
    opts: &SelectOptions,
) -> Result<(Vec<CandidateJson>, CandidateJson)> {
    let c = select::candidates(net, coll, ranks, bytes, opts)?;
    let conv = |ch: &select::Choice| CandidateJson {
        algorithm: ch.algorithm().map_or("?", Algorithm::name),
        predicted_ns: ch.predicted_ns,
        segment_bytes: ch.segment_bytes,
    };
    Ok((c.as_slice().iter().map(conv).collect(), conv(&c.best())))
}

/// Every candidate's predicted time for the collective asked, and the
/// choice, from the segment's parameters.
pub fn run(args: &PredictArgs) -> Result<PredictJson> {
    if args.ranks == 0 {
        return Err(OpsError::Usage("--ranks must be at least 1".into()));
    }
    let entries = load_entries(args.shm.as_deref())?;
    let entry = find_entry(
        &entries,
        args.shm.as_deref(),
        args.peer.as_deref(),
        args.transport.as_deref(),
    )?;
    let pair = entry.params();
    let exchange = exchange_of(&entries, &entry.peer, &entry.transport, args.ranks);
    let net = Measured {
        pair: &pair,
        exchange: &exchange,
        exchange_ranks: args.ranks,
    };
    let opts = SelectOptions {
        gamma_ns_per_byte: args.gamma_ns_per_byte,
        cores: args.cores,
    };
    let (candidates, choice) = predict(&net, args.collective, args.ranks, args.bytes, &opts)?;
    Ok(PredictJson {
        collective: args.collective.name(),
        ranks: args.ranks,
        bytes: args.bytes,
        peer: entry.peer.clone(),
        transport: entry.transport.clone(),
        measured_exchange: !exchange.is_empty(),
        candidates,
        choice,
    })
}
