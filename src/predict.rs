//! `ngctl predict`: every candidate algorithm's predicted time for a
//! collective, from the parameters in the segment, and the choice.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use netgauge::select::{self, Algorithm, Collective, Measured, Network, SelectOptions};
use netgauge::{EntryData, Params, Reader};
use serde::Serialize;

/// The segment file: `--shm`, else `$NETGAUGE_SEGMENT`, else the default.
pub fn segment_path(shm: Option<&Path>) -> PathBuf {
    match shm {
        Some(p) => p.to_path_buf(),
        None => std::env::var_os(netgauge::PATH_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(netgauge::DEFAULT_PATH)),
    }
}

/// One [`Params`] per protocol range of an entry, as lookups of sizes in
/// each range return them.
pub fn params_of_entry(e: &EntryData) -> Vec<Params> {
    e.ranges
        .iter()
        .map(|r| Params {
            eel_ns: e.eel_ns,
            L_ns: e.L_ns,
            o_s_ns: r.o_s_ns,
            o_r_ns: r.o_r_ns,
            g_ns: r.g_ns,
            G_ns_per_byte: r.G_ns_per_byte,
            O_s_ns_per_byte: r.O_s_ns_per_byte,
            O_r_ns_per_byte: r.O_r_ns_per_byte,
            o_min_ns: e.o_min_ns,
            o_max_ns: e.o_max_ns,
            g_f_ns: e.g_f_ns,
            S_bytes: e.S_bytes.unwrap_or(u64::MAX),
            range_from_bytes: r.from_bytes,
            range_to_bytes: r.to_bytes,
            measured_unix_ns: e.measured_unix_ns,
            samples: e.samples,
            f: e.f.unwrap_or(0),
            flags: e.flags,
        })
        .collect()
}

/// Every entry of the segment (one snapshot). Offline use: the heartbeat is
/// not checked (a one-shot `ngctl probe --publish` has no daemon behind it).
pub fn load_entries(shm: Option<&Path>) -> Result<Vec<EntryData>> {
    let path = segment_path(shm);
    let mut reader =
        Reader::open(&path).with_context(|| format!("cannot open segment {}", path.display()))?;
    reader.set_stale_after_ns(0);
    reader
        .snapshot()
        .map_err(|e| anyhow::anyhow!("cannot read segment {}: {e}", path.display()))
}

/// The entry of (peer, transport) among `entries` (of the segment `shm`);
/// without a peer, the first entry of that transport.
pub fn find_entry(
    entries: &[EntryData],
    shm: Option<&Path>,
    peer: Option<&str>,
    transport: &str,
) -> Result<EntryData> {
    entries
        .iter()
        .find(|e| e.transport == transport && peer.is_none_or(|p| e.peer == p))
        .cloned()
        .with_context(|| {
            format!(
                "no entry for peer {} over {transport} in {}",
                peer.unwrap_or("(any)"),
                segment_path(shm).display()
            )
        })
}

/// Read the entry of (peer, transport) from the segment ([`load_entries`],
/// [`find_entry`]).
pub fn load_entry(shm: Option<&Path>, peer: Option<&str>, transport: &str) -> Result<EntryData> {
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
        .map(params_of_entry)
        .unwrap_or_default()
}

#[derive(clap::Args, Clone, Debug)]
pub struct PredictArgs {
    /// bcast, allreduce or barrier.
    pub collective: Collective,
    /// Number of processes P.
    #[arg(long)]
    pub ranks: usize,
    /// Message size in bytes (ignored for barrier).
    #[arg(long, default_value_t = 0)]
    pub bytes: u64,
    /// Peer name of the segment entry (default: the first of the transport).
    #[arg(long)]
    pub peer: Option<String>,
    #[arg(long, default_value = "mpi")]
    pub transport: String,
    /// Segment file (default $NETGAUGE_SEGMENT or /dev/shm/netgauged).
    #[arg(long)]
    pub shm: Option<PathBuf>,
    /// Cost of combining one byte in a reduction.
    #[arg(long, default_value_t = select::DEFAULT_GAMMA_NS_PER_BYTE)]
    pub gamma_ns_per_byte: f64,
    /// Cores the ranks share on a node (0: at least one core per rank).
    /// With fewer cores than ranks, steps in which more ranks move bytes
    /// than there are cores take proportionally longer per byte.
    #[arg(long, default_value_t = 0)]
    pub cores: usize,
    #[arg(long)]
    pub json: bool,
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

pub fn run(args: &PredictArgs) -> Result<()> {
    if args.ranks == 0 {
        bail!("--ranks must be at least 1");
    }
    let entries = load_entries(args.shm.as_deref())?;
    let entry = find_entry(
        &entries,
        args.shm.as_deref(),
        args.peer.as_deref(),
        &args.transport,
    )?;
    let pair = params_of_entry(&entry);
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
    let out = PredictJson {
        collective: args.collective.name(),
        ranks: args.ranks,
        bytes: args.bytes,
        peer: entry.peer.clone(),
        transport: entry.transport.clone(),
        measured_exchange: !exchange.is_empty(),
        candidates,
        choice,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!(
            "{} of {} B on {} ranks ({} over {}{}):",
            out.collective,
            out.bytes,
            out.ranks,
            out.peer,
            out.transport,
            if out.measured_exchange {
                ", all-ranks exchange measured"
            } else {
                ""
            }
        );
        for c in &out.candidates {
            let seg = if c.segment_bytes > 0 {
                format!("  (segment {} B)", c.segment_bytes)
            } else {
                String::new()
            };
            let mark = if c.algorithm == out.choice.algorithm {
                " <- choice"
            } else {
                ""
            };
            println!(
                "  {:<24} {:>14.0} ns{seg}{mark}",
                c.algorithm, c.predicted_ns
            );
        }
    }
    Ok(())
}
