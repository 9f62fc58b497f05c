//! The MPI probe, which every rank of `mpirun -np N ngctl probe
//! --transport mpi` runs: rank 0 probes rank 1 (and runs the 1:P−P:1
//! fan-out over all other ranks when asked), then tells every other rank
//! to stop; the others answer it with the link layer's responder. Then
//! every rank runs the all-ranks exchange sweep and the conflict sweep
//! (`pattern::exchange`): rank 0 sending to, receiving from, or both, k
//! other ranks at once, whose penalties become the transport's contention
//! record.

use std::time::{Duration, Instant};

use super::{ProbeOptions, ProbeResult};
use crate::clock::HostClock;
use crate::link::{self, Kind, LinkSpec, NoRendezvous, Open, OpenError, ServePolicy};
use crate::model::exchange::ExchangeSamples;
use crate::pattern::exchange::{conflict_record, conflict_sweep, exchange_sizes, exchange_sweep};
use crate::sweep::{Progress, SweepError};
use crate::transport::mpi::MpiTransport;
use crate::transport::{AllRanks, TransportError};

/// Rounds per size of the exchange sweep.
const EXCHANGE_ROUNDS: usize = 21;
/// The whole exchange sweep must end within this (about 0.5 s on 4 ranks
/// sharing 2 cores up to 4 MiB).
const EXCHANGE_BUDGET: Duration = Duration::from_secs(60);
/// Rounds per (scheme, k) of the conflict sweep.
const CONFLICT_ROUNDS: usize = 21;
/// Message size of the conflict sweep's flows (at most the largest
/// message over the peers): a large message whose copy the concurrent
/// flows share, as in a linear alltoall of large blocks.
const CONFLICT_BYTES: u64 = 512 * 1024;
/// The whole conflict sweep must end within this.
const CONFLICT_BUDGET: Duration = Duration::from_secs(30);
/// How long rank 0 waits for each other rank's processor name.
const NAMES_WAIT: Duration = Duration::from_secs(10);
/// A serving rank gives up after this long without a message.
const SERVE_IDLE: Duration = Duration::from_secs(120);
/// How often a serving rank looks at its policy.
const SERVE_POLL: Duration = Duration::from_millis(200);

/// What rank 0 measured.
#[derive(Debug)]
pub struct MpiProbe {
    pub result: ProbeResult,
    /// Processor name of rank 1 ("rank1" if it did not say).
    pub peer_name: String,
    pub ranks: usize,
    /// The all-ranks exchange sweep; empty if it failed (the pair probe
    /// stands without it) or the number of ranks is not a power of two.
    pub exchange: Vec<ExchangeSamples>,
    /// Why the exchange sweep failed, if it did.
    pub exchange_error: Option<String>,
    /// The conflict sweep's penalties as the transport's contention
    /// record; None if it failed (the error is in `exchange_error`).
    pub contention: Option<netgauge::TransportExt>,
}

/// What one rank did.
#[derive(Debug)]
pub enum RankOutcome {
    /// Rank 0: the probe.
    Probed(Box<MpiProbe>),
    /// Another rank: it answered rank 0.
    Served {
        rank: usize,
        /// Why its part of the exchange sweep failed, if it did.
        exchange_error: Option<String>,
    },
}

impl RankOutcome {
    /// Rank 0's probe (None on the other ranks).
    pub fn into_probe(self) -> Option<MpiProbe> {
        match self {
            RankOutcome::Probed(p) => Some(*p),
            RankOutcome::Served { .. } => None,
        }
    }
}

/// Why an MPI probe failed.
#[derive(Debug, thiserror::Error)]
pub enum MpiProbeError {
    #[error("needs at least 2 MPI ranks (run under mpirun -np 2)")]
    TooFewRanks,
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error(transparent)]
    Sweep(#[from] SweepError),
}

/// Run the MPI probe on this rank (MPI initialized). `clock` times the
/// probe, the transport's receive overheads and the exchange sweep.
pub fn run(
    opts: &ProbeOptions,
    clock: HostClock,
    progress: &mut dyn Progress,
) -> Result<RankOutcome, MpiProbeError> {
    let mut spec = LinkSpec::new(Kind::Mpi);
    spec.options.clock = clock;
    spec.options.max_msg_bytes =
        Some((opts.sweep.max_size_bytes as usize).max(opts.fanout_size_bytes));
    // The communicator is collective: every rank opens the same link.
    let mut t = MpiTransport::driver(&spec, &mut NoRendezvous)?;
    if t.size() < 2 {
        return Err(MpiProbeError::TooFewRanks);
    }
    let names = t.gather_names(NAMES_WAIT)?;
    // The exchange pairs ranks by XOR: measured for a power-of-two number of
    // ranks only (others keep the selector's sharing model).
    let sizes = if t.size().is_power_of_two() {
        exchange_sizes(opts.sweep.max_size_bytes)
    } else {
        Vec::new()
    };
    let max_msg = opts.sweep.max_size_bytes.max(opts.fanout_size_bytes as u64);
    let sweep_all = |t: &mut MpiTransport| {
        let deadline = Instant::now() + EXCHANGE_BUDGET;
        exchange_sweep(t, &clock, &sizes, max_msg, EXCHANGE_ROUNDS, deadline)
    };
    let k_max = (t.size() - 1).clamp(1, netgauge::layout::MAX_K) as u64;
    let conflict_bytes = CONFLICT_BYTES.min(max_msg / k_max).max(1);
    let conflicts = |t: &mut MpiTransport| {
        let deadline = Instant::now() + CONFLICT_BUDGET;
        conflict_sweep(t, &clock, conflict_bytes, CONFLICT_ROUNDS, deadline)
    };
    if t.rank() != 0 {
        let mut policy = ServePolicy::new(SERVE_POLL);
        policy.until_session_end = true;
        policy.idle_exit = Some(SERVE_IDLE);
        link::serve(&mut t, policy)?;
        let exchange_error = sweep_all(&mut t).err().map(|e| e.to_string());
        let conflict_error = conflicts(&mut t).err().map(|e| e.to_string());
        return Ok(RankOutcome::Served {
            rank: t.rank(),
            exchange_error: exchange_error.or(conflict_error),
        });
    }
    let result = super::run(&mut t, &clock, 0, opts, progress);
    // Stop the servers whatever happened, so mpirun never hangs.
    for peer in 0..t.size() - 1 {
        let _ = t.send_stop(peer);
    }
    let (exchange, exchange_error) = match sweep_all(&mut t) {
        Ok(x) => (x, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    let (contention, exchange_error) = match conflicts(&mut t) {
        Ok(c) => (
            Some(conflict_record(&c, crate::publish::unix_now_ns())),
            exchange_error,
        ),
        Err(e) => (None, exchange_error.or(Some(e.to_string()))),
    };
    let result = result?;
    let peer_name = names
        .get(1)
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| "rank1".into());
    Ok(RankOutcome::Probed(Box::new(MpiProbe {
        result,
        peer_name,
        ranks: t.ranks(),
        exchange,
        exchange_error,
        contention,
    })))
}
