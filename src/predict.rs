//! `ngctl predict`: every candidate algorithm's predicted time for a
//! collective, from the parameters in the segment, and the choice, with and
//! without the transport's contention penalties; and the segment reading
//! that `ngctl export` shares with it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use netgauge::select::{
    self, Algorithm, Collective, Measured, Network, NoContention, SelectOptions,
};
use netgauge::{EntryData, LookupError, Params, Reader, Scheme, TransportExt, TransportField};
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

/// The contention record of `transport` in the segment `shm`, if it has
/// one (offline use, as [`load_entries`]).
pub fn load_transport_ext(shm: Option<&Path>, transport: &str) -> Option<TransportExt> {
    let mut reader = Reader::open(segment_path(shm)).ok()?;
    reader.set_stale_after_ns(0);
    reader.transport_ext(transport).ok()
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
    /// The same prediction without the contention penalties (equal to
    /// `predicted_ns` when the segment has no record).
    pub without_contention_ns: f64,
}

/// One penalty T_shared / T_ref of k concurrent flows of a scheme, as the
/// selector used it (beyond the largest measured k: extrapolated, see
/// [`select::penalty_of`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PenaltyJson {
    pub scheme: &'static str,
    pub k: usize,
    pub penalty: f64,
}

/// The transport's contention record as the selector reads it.
#[derive(Clone, Debug, Serialize)]
pub struct ContentionJson {
    /// Status of each scheme's penalties ("identified", "not_assessed",
    /// or why they are not identified, when the selector ignores them).
    pub status: Vec<(&'static str, &'static str)>,
    /// Published penalties per scheme, k = 1 first.
    pub penalties: Vec<(&'static str, Vec<f64>)>,
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
    /// The transport's contention record (None: the segment has none, and
    /// the prediction is the one without penalties).
    pub contention: Option<ContentionJson>,
    /// The penalties the candidates' prices used.
    pub penalties_used: Vec<PenaltyJson>,
    pub candidates: Vec<CandidateJson>,
    pub choice: CandidateJson,
    /// The algorithm chosen without the penalties.
    pub choice_without_contention: &'static str,
}

/// A network that notes every penalty the selector asks for.
struct Recording<'a, N: Network + ?Sized> {
    net: &'a N,
    used: RefCell<Vec<PenaltyJson>>,
}

impl<N: Network + ?Sized> Network for Recording<'_, N> {
    fn at(&self, msg_bytes: u64) -> std::result::Result<Params, LookupError> {
        self.net.at(msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        self.net.exchange_ns(ranks, msg_bytes)
    }

    fn penalty(&self, scheme: Scheme, k: usize) -> Option<f64> {
        let p = self.net.penalty(scheme, k)?;
        let row = PenaltyJson {
            scheme: scheme.name(),
            k,
            penalty: p,
        };
        let mut used = self.used.borrow_mut();
        if !used.contains(&row) {
            used.push(row);
        }
        Some(p)
    }
}

/// Every candidate, the choice, the choice without penalties, the
/// penalties used (see [`predict`]).
pub type Predicted = (
    Vec<CandidateJson>,
    CandidateJson,
    &'static str,
    Vec<PenaltyJson>,
);

/// Predict from an explicit parameter set: every candidate with and
/// without the network's contention penalties, the choice, the choice
/// without penalties, and the penalties the prices used.
pub fn predict<N: Network + ?Sized>(
    net: &N,
    coll: Collective,
    ranks: usize,
    bytes: u64,
    opts: &SelectOptions,
) -> Result<Predicted> {
    let name = |ch: &select::Choice| ch.algorithm().map_or("?", Algorithm::name);
    let rec = Recording {
        net,
        used: RefCell::new(Vec::new()),
    };
    let c = select::candidates(&rec, coll, ranks, bytes, opts)?;
    let bare = select::candidates(&NoContention(net), coll, ranks, bytes, opts)?;
    let mut out = Vec::new();
    for ch in c.as_slice() {
        out.push(CandidateJson {
            algorithm: name(ch),
            predicted_ns: ch.predicted_ns,
            segment_bytes: ch.segment_bytes,
            without_contention_ns: bare
                .as_slice()
                .iter()
                .find(|b| b.algorithm == ch.algorithm)
                .map_or(f64::NAN, |b| b.predicted_ns),
        });
    }
    let best = c.best();
    let choice = out
        .iter()
        .find(|x| x.algorithm == name(&best))
        .cloned()
        .ok_or_else(|| OpsError::Usage("no candidate".into()))?;
    Ok((out, choice, name(&bare.best()), rec.used.into_inner()))
}

/// The record as `ngctl predict` shows it.
fn contention_json(t: &TransportExt) -> ContentionJson {
    ContentionJson {
        status: Scheme::ALL
            .iter()
            .map(|s| (s.name(), t.status(TransportField::penalty(*s)).name()))
            .collect(),
        penalties: Scheme::ALL
            .iter()
            .map(|s| (s.name(), t.penalties(*s).iter().map(|e| e.value).collect()))
            .collect(),
    }
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
    let record = load_transport_ext(args.shm.as_deref(), &entry.transport);
    let net = Measured {
        pair: &pair,
        exchange: &exchange,
        exchange_ranks: args.ranks,
        contention: record.as_ref(),
    };
    let opts = SelectOptions {
        gamma_ns_per_byte: args.gamma_ns_per_byte,
        cores: args.cores,
    };
    let (candidates, choice, choice_without_contention, penalties_used) =
        predict(&net, args.collective, args.ranks, args.bytes, &opts)?;
    Ok(PredictJson {
        collective: args.collective.name(),
        ranks: args.ranks,
        bytes: args.bytes,
        peer: entry.peer.clone(),
        transport: entry.transport.clone(),
        measured_exchange: !exchange.is_empty(),
        contention: record.as_ref().map(contention_json),
        penalties_used,
        candidates,
        choice,
        choice_without_contention,
    })
}
