//! One measurement, end to end: sweep → fit → intervals → a [`ProbeResult`].
//! Used by `ngctl probe` (once) and by the daemon (per peer, repeatedly);
//! [`ranks`] is the MPI probe that every rank of a job runs.

use std::collections::BTreeMap;

use crate::clock::Clock;
use crate::model::{self, FanoutSamples, Interval, LogGpFit, LogfpFit, SizeSamples};
use crate::sweep::{self, Progress, SweepConfig, SweepError};
use crate::transport::{PeerId, Transport};

pub mod contention;
pub mod overlap;
#[cfg(feature = "mpi")]
pub mod ranks;

#[derive(Clone, Debug)]
pub struct ProbeOptions {
    pub sweep: SweepConfig,
    /// Run the 1:P−P:1 pattern for P = 1..=this (needs that many peers).
    pub fanout_peers: Option<usize>,
    pub fanout_size_bytes: usize,
    /// Bootstrap resamples for the 95 % intervals (0: none).
    pub resamples: usize,
    pub seed: u64,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self {
            sweep: SweepConfig::default(),
            fanout_peers: None,
            fanout_size_bytes: 1,
            resamples: 200,
            seed: 1,
        }
    }
}

/// Everything one probe produced, raw samples included.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub fit: LogGpFit,
    pub logfp: Option<LogfpFit>,
    pub ci95: BTreeMap<String, Interval>,
    /// Payload bytes sent by both sides.
    pub probe_bytes: u64,
    pub probe_messages: u64,
    /// Duration of the probe on the probe's clock (virtual for `sim`).
    pub elapsed_ns: f64,
    pub lost_rounds: u32,
    pub samples: Vec<SizeSamples>,
    pub fanout: Vec<FanoutSamples>,
}

/// Measure `peer` (and, for LogfP, peers 0..fanout_peers).
pub fn run<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    opts: &ProbeOptions,
    progress: &mut dyn Progress,
) -> Result<ProbeResult, SweepError> {
    let before = transport.counters();
    let start = clock.now();
    let swept = sweep::sweep(transport, clock, peer, &opts.sweep, progress)?;
    let fanout = match opts.fanout_peers {
        Some(p) if p >= 2 => sweep::fanout_sweep(
            transport,
            clock,
            p.min(transport.caps().peers),
            opts.fanout_size_bytes,
            &opts.sweep,
        )?,
        _ => Vec::new(),
    };
    let elapsed_ns = clock.to_ns(clock.now().wrapping_sub(start));
    let after = transport.counters();
    let mut result = fit(swept.samples, fanout, opts);
    result.probe_bytes =
        (after.sent_bytes - before.sent_bytes) + (after.recv_bytes - before.recv_bytes);
    result.probe_messages =
        (after.sent_messages - before.sent_messages) + (after.recv_messages - before.recv_messages);
    result.elapsed_ns = elapsed_ns;
    result.lost_rounds = swept.lost_rounds;
    Ok(result)
}

/// The fit of measured samples: LogGP(S) with its intervals and, when there
/// are fan-out samples, LogfP. [`run`] ends here; `ngctl fit` re-fits a saved
/// probe's raw samples with it (the counters and the duration stay 0).
pub fn fit(
    samples: Vec<SizeSamples>,
    fanout: Vec<FanoutSamples>,
    opts: &ProbeOptions,
) -> ProbeResult {
    let fit = model::fit::fit_loggp(&samples);
    let mut ci95 = if opts.resamples > 0 {
        model::fit::ci95_loggp(&samples, opts.resamples, opts.seed)
    } else {
        BTreeMap::new()
    };
    let logfp = if fanout.is_empty() {
        None
    } else {
        if opts.resamples > 0 {
            ci95.extend(model::logfp::ci95_logfp(&fanout, opts.resamples, opts.seed));
        }
        Some(model::logfp::fit_logfp(&fanout))
    };
    ProbeResult {
        fit,
        logfp,
        ci95,
        probe_bytes: 0,
        probe_messages: 0,
        elapsed_ns: 0.0,
        lost_rounds: 0,
        samples,
        fanout,
    }
}
