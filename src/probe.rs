//! One measurement, end to end: sweep → fit → intervals → a [`ProbeResult`].
//! Used by `ngctl probe` (once) and by the daemon (per peer, repeatedly).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::clock::Clock;
use crate::model::{self, FanoutSamples, Interval, LogGpFit, LogfpFit, SizeSamples};
use crate::sweep::{self, Progress, SweepConfig, SweepError};
use crate::transport::{PeerId, Transport};

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

/// The LogfP part of `ngctl probe --json`.
#[derive(Clone, Debug, Serialize)]
pub struct LogfpJson {
    pub f: Option<u32>,
    pub f_paper: Option<u32>,
    pub o_min_ns: f64,
    pub o_max_ns: f64,
    pub g_ns: f64,
    pub curve: Vec<model::FanoutPoint>,
}

/// A range in `ngctl probe --json`.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Serialize)]
pub struct RangeJson {
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    pub o_s_ns: f64,
    pub o_r_ns: f64,
    pub O_s_ns_per_byte: f64,
    pub O_r_ns_per_byte: f64,
}

/// Protocol-change detection as reported: both detectors, and which was used.
#[derive(Clone, Debug, Serialize)]
pub struct SegmentationJson {
    pub used: Option<model::Segmenter>,
    pub lookahead: Vec<u64>,
    pub optimal_bic: Vec<u64>,
}

/// The object `ngctl probe --json` prints (field names are part of the CLI
/// contract and reused by `ngctl dump --json`).
#[allow(non_snake_case)]
#[derive(Clone, Debug, Serialize)]
pub struct ProbeJson {
    pub eel_ns: f64,
    pub L_ns: f64,
    pub L_negative: bool,
    pub o_s_ns: f64,
    pub o_r_ns: f64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    pub S_bytes: Option<u64>,
    pub ranges: Vec<RangeJson>,
    pub logfp: Option<LogfpJson>,
    pub ci95: BTreeMap<String, Interval>,
    pub probe_bytes: u64,
    pub probe_messages: u64,
    pub elapsed_ns: f64,
    pub lost_rounds: u32,
    pub segmentation: SegmentationJson,
    pub sizes: usize,
    pub points: Vec<model::SizePoint>,
}

impl ProbeResult {
    pub fn to_json(&self) -> ProbeJson {
        let first = self.fit.ranges.first().cloned().unwrap_or_default();
        ProbeJson {
            eel_ns: self.fit.eel_ns,
            L_ns: self.fit.L_ns,
            L_negative: self.fit.L_negative,
            o_s_ns: first.o_s_ns,
            o_r_ns: first.o_r_ns,
            g_ns: first.g_ns,
            G_ns_per_byte: first.G_ns_per_byte,
            S_bytes: self.fit.S_bytes,
            ranges: self
                .fit
                .ranges
                .iter()
                .map(|r| RangeJson {
                    from_bytes: r.from_bytes,
                    to_bytes: r.to_bytes,
                    g_ns: r.g_ns,
                    G_ns_per_byte: r.G_ns_per_byte,
                    o_s_ns: r.o_s_ns,
                    o_r_ns: r.o_r_ns,
                    O_s_ns_per_byte: r.O_s_ns_per_byte,
                    O_r_ns_per_byte: r.O_r_ns_per_byte,
                })
                .collect(),
            logfp: self.logfp.as_ref().map(|l| LogfpJson {
                f: l.f,
                f_paper: l.f_paper,
                o_min_ns: l.o_min_ns,
                o_max_ns: l.o_max_ns,
                g_ns: l.g_ns,
                curve: l.points.clone(),
            }),
            ci95: self.ci95.clone(),
            probe_bytes: self.probe_bytes,
            probe_messages: self.probe_messages,
            elapsed_ns: self.elapsed_ns,
            lost_rounds: self.lost_rounds,
            segmentation: SegmentationJson {
                used: self.fit.segmenter,
                lookahead: self.fit.changes_lookahead.clone(),
                optimal_bic: self.fit.changes_optimal.clone(),
            },
            sizes: self.samples.len(),
            points: self.fit.points.clone(),
        }
    }
}
