//! The latency run: a dedicated ping-pong of PRTT(1,0,s) at a few small
//! sizes, `latency_samples` timed round trips each, whose halves give the
//! distribution of the half round trip (`model::latency`). Same pattern,
//! clock and loss handling as the sweep; the sample buffers are allocated
//! before the timed loop, which only sends, receives and reads the clock.

use super::loss::{round, LossGuard};
use super::{SweepConfig, SweepError};
use crate::clock::Clock;
use crate::model::latency::LatencySamples;
use crate::transport::{PeerId, Transport};

/// Untimed round trips of a size before its timed ones (its buffers and
/// the path's caches warm at this size).
pub const LATENCY_WARMUP_ROUNDS: u32 = 8;

/// Most timed round trips per size a run may ask for (ngctl's bound).
pub const MAX_LATENCY_SAMPLES: u32 = 1_000_000;

/// The sizes of the latency run: the sweep's grid sizes up to
/// `cfg.latency_max_bytes`, thinned to at most `cfg.latency_sizes` spread
/// evenly over the grid's indices, the first and the last of them kept.
/// Empty when the run is off, or the sweep has no size that small (a sweep
/// of the bandwidth-bound sizes alone).
pub fn latency_sizes(cfg: &SweepConfig) -> Vec<u64> {
    if cfg.latency_samples == 0 || cfg.latency_sizes == 0 {
        return Vec::new();
    }
    let want = cfg.latency_sizes.min(netgauge::layout::MAX_LATENCY);
    let bound = cfg.latency_max_bytes;
    let grid: Vec<u64> = cfg
        .initial_sizes()
        .into_iter()
        .filter(|&s| s <= bound)
        .collect();
    if grid.len() <= want {
        return grid;
    }
    let last = grid.len() - 1;
    let mut out: Vec<u64> = (0..want)
        .map(|i| {
            let at = if want == 1 { 0 } else { i * last / (want - 1) };
            grid[at]
        })
        .collect();
    out.dedup();
    out
}

/// Run the latency stage over `sizes` (each at most the transport's
/// largest message; larger ones are left out).
pub(super) fn latency_run<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
    sizes: &[u64],
) -> Result<Vec<LatencySamples>, SweepError> {
    let max = transport.caps().max_msg_bytes;
    let want = cfg.latency_samples.min(MAX_LATENCY_SAMPLES) as usize;
    let mut out = Vec::with_capacity(sizes.len());
    for &size_bytes in sizes.iter().filter(|&&s| s as usize <= max) {
        let s = size_bytes as usize;
        let t = cfg.timeout;
        let mut warm = 0;
        while warm < LATENCY_WARMUP_ROUNDS {
            let r = round(transport, clock, peer, 1, 0, s, t, guard);
            if guard.count(transport, r, size_bytes, t)?.is_some() {
                warm += 1;
            }
        }
        let mut half_rtt_ns = Vec::with_capacity(want);
        while half_rtt_ns.len() < want {
            let r = round(transport, clock, peer, 1, 0, s, t, guard);
            if let Some(r) = guard.count(transport, r, size_bytes, t)? {
                half_rtt_ns.push(r.rtt_ns / 2.0);
            }
        }
        out.push(LatencySamples {
            size_bytes,
            half_rtt_ns,
        });
    }
    Ok(out)
}
