//! One measurement, end to end: sweep → fit → intervals → bandwidth →
//! verdicts → half-round-trip percentiles → a [`ProbeResult`]. Used by `ngctl probe` (once) and by the
//! daemon (per peer, repeatedly); [`ranks`] is the MPI probe that every
//! rank of a job runs; [`cpu`] reads the driving thread's context switches
//! and pins a thread; [`stability`] says whether the samples can be trusted.

use std::collections::BTreeMap;

use netgauge::ext::{Identification, LatencyPercentiles};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::model::bandwidth::{self, BandwidthFit};
use crate::model::latency::LatencySamples;
use crate::model::{
    self, BurstSamples, CpuShare, FanoutSamples, Interval, LinkTraits, LogGpFit, LogfpFit,
    SizeSamples,
};
use crate::sweep::{self, Progress, SweepConfig, SweepError};
use crate::transport::{Kind, PeerId, Transport};

pub mod contention;
pub mod cpu;
mod loss;
pub mod overlap;
#[cfg(feature = "mpi")]
pub mod ranks;
pub mod stability;

pub use stability::Stability;

/// What the fit may assume of a kind of transport (from its descriptor).
pub fn traits_of(kind: Kind) -> LinkTraits {
    let d = kind.descriptor();
    LinkTraits {
        rendezvous: d.rendezvous,
        recv_overhead: d.recv_overhead,
        one_sided: d.one_sided,
        credit: d.credit,
    }
}

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

impl ProbeOptions {
    /// The defaults for a kind of transport: its traits, and the driving
    /// thread's context switches counted where a host clock times it.
    pub fn for_kind(kind: Kind) -> Self {
        let mut o = Self::default();
        o.sweep.traits = traits_of(kind);
        if kind != Kind::Sim {
            o.sweep.switches = Some(cpu::thread_switches);
        }
        o
    }
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

/// What a probe measured: the raw part of `ngctl probe --json --raw`,
/// which `ngctl fit` re-fits.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Raw {
    pub sizes: Vec<SizeSamples>,
    #[serde(default)]
    pub fanout: Vec<FanoutSamples>,
    /// The long bursts of the sweep's last stage.
    #[serde(default)]
    pub bursts: Option<BurstSamples>,
    /// The smallest size's other measurement (the sweep kept the one with
    /// the lower median round trip in `sizes`).
    #[serde(default)]
    pub repeat: Option<SizeSamples>,
    /// The driving thread's context switches over the repeated smallest size.
    #[serde(default)]
    pub cpu: Option<CpuShare>,
    /// The latency run's half round trips per size.
    #[serde(default)]
    pub latency: Vec<LatencySamples>,
}

/// Everything one probe produced, raw samples included.
#[derive(Clone, Debug)]
pub struct ProbeResult {
    pub fit: LogGpFit,
    pub logfp: Option<LogfpFit>,
    pub ci95: BTreeMap<String, Interval>,
    /// The large-message bandwidth (the sustained G, a burst regime).
    pub bandwidth: BandwidthFit,
    /// Whether each parameter is identified, or why not.
    pub ident: Identification,
    /// The stability verdict on the samples.
    pub stability: Stability,
    /// What the fit assumed of the transport.
    pub traits: LinkTraits,
    /// The transport's name, when the caller knows it.
    pub transport: Option<String>,
    /// Payload bytes sent by both sides.
    pub probe_bytes: u64,
    pub probe_messages: u64,
    /// Duration of the probe on the probe's clock (virtual for `sim`).
    pub elapsed_ns: f64,
    pub lost_rounds: u32,
    pub samples: Vec<SizeSamples>,
    pub fanout: Vec<FanoutSamples>,
    pub bursts: Option<BurstSamples>,
    pub repeat: Option<SizeSamples>,
    pub cpu: Option<CpuShare>,
    /// The latency run's half round trips per size (empty: it did not run).
    pub latency_samples: Vec<LatencySamples>,
    /// Their nearest-rank percentiles, sizes increasing.
    pub latency: Vec<LatencyPercentiles>,
}

impl ProbeResult {
    /// The raw measurements (what `--raw` saves).
    pub fn raw(&self) -> Raw {
        Raw {
            sizes: self.samples.clone(),
            fanout: self.fanout.clone(),
            bursts: self.bursts.clone(),
            repeat: self.repeat.clone(),
            cpu: self.cpu,
            latency: self.latency_samples.clone(),
        }
    }
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
    let raw = Raw {
        sizes: swept.samples,
        fanout,
        bursts: swept.bursts,
        repeat: swept.repeat,
        cpu: swept.cpu,
        latency: swept.latency,
    };
    let mut result = fit(raw, opts);
    result.probe_bytes = after.bytes_since(&before);
    result.probe_messages = after.messages_since(&before);
    result.elapsed_ns = elapsed_ns;
    result.lost_rounds = swept.lost_rounds;
    Ok(result)
}

/// The fit of measured samples: LogGP(S) with its intervals, the
/// large-message bandwidth, the stability verdict and every parameter's
/// identification, and, when there are fan-out samples, LogfP. [`run`]
/// ends here; `ngctl fit` re-fits a saved probe's raw samples with it (the
/// counters and the duration stay 0).
pub fn fit(raw: Raw, opts: &ProbeOptions) -> ProbeResult {
    let traits = opts.sweep.traits;
    let Raw {
        sizes: samples,
        fanout,
        bursts,
        repeat,
        cpu,
        latency: latency_samples,
    } = raw;
    let fit = model::fit::fit_loggp_with(&samples, &traits);
    let mut ci95 = if opts.resamples > 0 {
        model::fit::ci95_loggp_with(&samples, opts.resamples, opts.seed, &traits)
    } else {
        BTreeMap::new()
    };
    let bandwidth = bandwidth::fit_bandwidth(&fit, &ci95, bursts.as_ref(), &traits, opts.resamples);
    let stability = stability::verdict(&samples, repeat.as_ref(), cpu.as_ref());
    let mut ident = model::ident::identify(
        &fit,
        &ci95,
        &bandwidth,
        &traits,
        stability.cause,
        opts.resamples > 0,
    );
    let logfp = if fanout.is_empty() {
        None
    } else {
        let lci = if opts.resamples > 0 {
            model::logfp::ci95_logfp(&fanout, opts.resamples, opts.seed)
        } else {
            BTreeMap::new()
        };
        let l = model::logfp::fit_logfp(&fanout);
        model::ident::identify_logfp(&mut ident, &l, &lci);
        ci95.extend(lci);
        Some(l)
    };
    ProbeResult {
        fit,
        logfp,
        ci95,
        bandwidth,
        ident,
        stability,
        traits,
        transport: None,
        probe_bytes: 0,
        probe_messages: 0,
        elapsed_ns: 0.0,
        lost_rounds: 0,
        samples,
        fanout,
        bursts,
        repeat,
        cpu,
        latency: model::latency::all_percentiles(&latency_samples),
        latency_samples,
    }
}
