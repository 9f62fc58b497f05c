//! Adaptive sampling: which sizes to probe and how often.
//!
//! Netgauge steps sizes by 1 KiB (nothing between 1 and 1025 B) with a fixed
//! 100 repetitions. Here:
//! - sizes follow a geometric grid (`steps_per_octave` per doubling);
//! - a size gets repetitions until the 95 % intervals of the quantities the
//!   model needs (the gap and the overhead) are narrower than `rel_tol`, at
//!   least `min_reps`, at most `max_reps`;
//! - around every suspected protocol change, sizes are bisected down to two
//!   adjacent byte counts, so a rendezvous threshold is found exactly;
//! - the smallest sizes (the EEL point and the latency-bound sizes up to
//!   `interleave_max_bytes`) are measured first and together, a repetition
//!   of each in turn (`measure`), so EEL and their half round trips share
//!   one stretch of time; the others follow in [`measurement_order`];
//! - after the sizes, the smallest sizes are measured once more, together,
//!   and the measurement with the lower median round trip at the smallest
//!   kept (EEL free of the fresh path's first milliseconds), a ping-pong of many round trips at
//!   a few small sizes gives the half round trip's distribution
//!   (`latency`), and long bursts at the largest size show the sustained
//!   rate (`burst`).
//!
//! Every payload byte the probe puts on the wire is counted by the transport.
//! Losses and the wait for an answer are the `loss` submodule's; what a
//! sweep will cost before it runs is `cost`'s.

mod burst;
pub mod cost;
mod latency;
mod loss;
mod measure;
mod reps;

pub use burst::{burst_size, MAX_BURST_BYTES};
pub use latency::{latency_sizes, LATENCY_WARMUP_ROUNDS, MAX_LATENCY_SAMPLES};
pub use measure::interleaved_len;
pub(crate) use reps::{burst_cap, rep_limits, settle_for, warmup_for};
pub use reps::{BURST_CAP_BYTES, SIZE_PAYLOAD_BYTES, SMALL_PAYLOAD_BYTES};

use std::time::Duration;

use crate::clock::Clock;
use crate::model::latency::LatencySamples;
use crate::model::{
    self, lsq, stats, BurstSamples, CpuShare, FanoutSamples, LinkTraits, SizeSamples,
};
use crate::pattern::fanout::fanout;
use crate::pattern::prtt::prtt;
use crate::transport::{PeerId, Transport, TransportError};
use loss::{round, LossGuard, PACE_MIN_BYTES};
use measure::{measure_group, measure_size};

/// How sizes and repetitions are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Geometric grid, adaptive repetitions, bisection at protocol changes.
    Adaptive,
    /// Netgauge 2.4.6's default LogGP schedule: sizes 1, 1025, 2049, …,
    /// 100 repetitions each, n = 10 (kept for the probe-economy comparison).
    Netgauge,
}

#[derive(Clone, Debug)]
pub struct SweepConfig {
    pub schedule: Schedule,
    pub min_size_bytes: u64,
    pub max_size_bytes: u64,
    /// n of PRTT(n, d, s) during warm-up, and throughout when `n_max` ≤ `n`.
    pub n: u32,
    /// Per size, n is chosen between `n_min` and `n_max` so that the n−1
    /// gaps add up to about one round trip: the gap's signal then dominates
    /// the round trip's noise (a small g under a large L needs a larger n),
    /// while large, bandwidth-bound sizes need few messages.
    pub n_min: u32,
    pub n_max: u32,
    pub steps_per_octave: u32,
    /// Discarded PRTTs per size before measuring (also used to choose d).
    pub warmup: u32,
    /// Ping-pong of the smallest size for at least this long (and at least
    /// [`SESSION_WARMUP_ROUNDS`] round trips) before the first size is
    /// measured: a fresh path (queue pairs, kernel threads, caches, CPU
    /// frequency) is slower for its first milliseconds, and the first size
    /// would carry that into the fitted latency (bench/verbs.md, "a fresh
    /// session").
    pub session_warmup: Duration,
    /// Untimed PRTT(1, 0, s) before each timed one, so the single message
    /// runs on a path that has just carried a ping-pong: a device that
    /// completes a burst lazily (Soft-RoCE) makes a single message right
    /// after a burst slower than in a steady ping-pong (bench/verbs.md).
    pub settle_rounds: u32,
    pub min_reps: u32,
    /// Least repetitions of a size above 16 KiB (at most `min_reps`; the
    /// default is `min_reps`: fewer left the sim's jittered large-size
    /// medians too noisy for the segmentation).
    pub large_min_reps: u32,
    pub max_reps: u32,
    /// Stop repeating a size once the 95 % half-width of its gap and overhead
    /// estimates is below this fraction of their value (or of the round trip
    /// for tiny values).
    pub rel_tol: f64,
    /// Bisect protocol changes down to adjacent sizes.
    pub refine: bool,
    /// Deadline of every wait for an answer.
    pub timeout: Duration,
    /// A probe fails after this many consecutive lost rounds.
    pub max_consecutive_losses: u32,
    /// What the transport is: on one without a rendezvous protocol a change
    /// is bisected only to [`BISECT_REL`] of its size (no S to find to the
    /// byte; a shaper's bucket boundary is no protocol and costly to chase
    /// at large sizes).
    pub traits: LinkTraits,
    /// Measure the sustained rate with long bursts after the sizes.
    pub long_bursts: bool,
    /// The smallest size and the grid's sizes up to this bound are measured
    /// together, their repetitions in turn ([`interleaved_len`]), so EEL
    /// and the half round trips next to it come from one stretch of time:
    /// the sizes whose time is the latency alone, among them the 2 and 8 B
    /// that perftest's latency tools compare (0: the smallest size alone).
    pub interleave_max_bytes: u64,
    /// Measure the smallest sizes (those measured together) again after
    /// the others and keep the measurement whose smallest size has the
    /// lower median round trip.
    pub repeat_smallest: bool,
    /// Reads the calling thread's context switches so far; the sweep reads
    /// it around the repeated smallest size, so a driver that loses its CPU
    /// every round trip (to its responder on the same core) is told. None:
    /// not counted.
    pub switches: Option<fn() -> Option<u64>>,
    /// Timed PRTT(1,0,s) round trips per size of the latency run, whose
    /// halves give the half round trip's percentiles (0: no latency run).
    pub latency_samples: u32,
    /// The latency run's sizes: at most this many (at most
    /// `netgauge::layout::MAX_LATENCY`) of the grid's sizes up to
    /// `latency_max_bytes` ([`latency_sizes`]; none when the sweep starts
    /// above it).
    pub latency_sizes: usize,
    pub latency_max_bytes: u64,
}

/// The smallest sizes up to this many bytes are measured together by
/// default ([`SweepConfig::interleave_max_bytes`]): with two sizes per
/// octave 1, 2, 3, 4, 6 and 8 B.
pub const INTERLEAVE_MAX_BYTES: u64 = 8;

/// Sizes of the latency run by default: 1 B and three more of the grid up
/// to [`LATENCY_MAX_BYTES`].
pub const LATENCY_SIZES: usize = 4;
/// The latency run's sizes are at most this large by default: small
/// messages, whose time is the latency and not the bandwidth.
pub const LATENCY_MAX_BYTES: u64 = 64;

impl Default for SweepConfig {
    fn default() -> Self {
        Self {
            schedule: Schedule::Adaptive,
            min_size_bytes: 1,
            max_size_bytes: 128 * 1024,
            n: 8,
            n_min: 4,
            n_max: 64,
            steps_per_octave: 2,
            warmup: 2,
            session_warmup: Duration::from_millis(250),
            settle_rounds: 2,
            min_reps: 6,
            large_min_reps: 6,
            max_reps: 40,
            rel_tol: 0.02,
            refine: true,
            timeout: Duration::from_millis(250),
            max_consecutive_losses: 4,
            traits: LinkTraits::default(),
            long_bursts: true,
            interleave_max_bytes: INTERLEAVE_MAX_BYTES,
            repeat_smallest: true,
            switches: None,
            latency_samples: 0,
            latency_sizes: LATENCY_SIZES,
            latency_max_bytes: LATENCY_MAX_BYTES,
        }
    }
}

impl SweepConfig {
    /// Netgauge's schedule for the same size range.
    pub fn netgauge(max_size_bytes: u64) -> Self {
        Self {
            schedule: Schedule::Netgauge,
            max_size_bytes,
            n: 10,
            n_min: 10,
            n_max: 10,
            warmup: 0,
            session_warmup: Duration::ZERO,
            settle_rounds: 0,
            min_reps: 100,
            large_min_reps: 100,
            max_reps: 100,
            refine: false,
            long_bursts: false,
            interleave_max_bytes: 0,
            repeat_smallest: false,
            ..Self::default()
        }
    }

    /// The initial sizes of the sweep, ascending, without duplicates.
    pub fn initial_sizes(&self) -> Vec<u64> {
        let (lo, hi) = (self.min_size_bytes.max(1), self.max_size_bytes.max(1));
        let mut sizes = Vec::new();
        match self.schedule {
            Schedule::Netgauge => {
                let mut s = 1u64;
                while s <= hi {
                    if s >= lo {
                        sizes.push(s);
                    }
                    // At u64::MAX the next size does not exist.
                    let Some(next) = s.checked_add(1024) else {
                        break;
                    };
                    s = next;
                }
            }
            Schedule::Adaptive => {
                let steps = f64::from(self.steps_per_octave.max(1));
                let mut k = 0u32;
                // 2^(k/steps) passes any u64 by k = 64·steps (the cast
                // saturates, so `s > hi` alone never ends at u64::MAX).
                while f64::from(k) <= 64.0 * steps {
                    let s = (2f64.powf(f64::from(k) / steps)).round() as u64;
                    if s > hi {
                        break;
                    }
                    if s >= lo && sizes.last() != Some(&s) {
                        sizes.push(s);
                    }
                    k += 1;
                }
                if sizes.first() != Some(&lo) {
                    sizes.insert(0, lo);
                }
                if sizes.last() != Some(&hi) {
                    sizes.push(hi);
                }
            }
        }
        sizes
    }
}

/// Why a sweep stopped early.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the peer stopped answering: {losses} consecutive rounds at {size_bytes} B were lost (last: {last})")]
    PeerLost {
        size_bytes: u64,
        losses: u32,
        last: TransportError,
    },
    #[error("transport failed at {size_bytes} B: {source}")]
    Transport {
        size_bytes: u64,
        #[source]
        source: TransportError,
    },
    #[error("{size_bytes} B exceeds the transport's maximum message size of {max_bytes} B")]
    TooLarge { size_bytes: u64, max_bytes: usize },
}

/// Progress callbacks (the CLI draws a bar; the daemon logs).
pub trait Progress {
    /// `done` sizes of an expected `total` (the total can grow with refinement).
    fn sizes(&mut self, _done: usize, _total: usize, _size_bytes: u64) {}
}

impl Progress for () {}

/// The result of a LogGP sweep.
#[derive(Clone, Debug, Default)]
pub struct SweepResult {
    pub samples: Vec<SizeSamples>,
    /// Rounds lost and retried.
    pub lost_rounds: u32,
    /// The long bursts (None when the stage did not run).
    pub bursts: Option<BurstSamples>,
    /// The smallest size's other measurement (the one not kept).
    pub repeat: Option<SizeSamples>,
    /// Context switches of the driving thread over the repeated smallest
    /// size's rounds.
    pub cpu: Option<CpuShare>,
    /// The latency run's half round trips (empty when it did not run).
    pub latency: Vec<LatencySamples>,
}

/// Least number of round trips of the session warm-up.
pub const SESSION_WARMUP_ROUNDS: u32 = 16;
/// The warm-up ends after this many round trips even if its time has not
/// passed (a clock that barely advances, as a sim model without time,
/// would otherwise keep it going for ever).
const SESSION_WARMUP_MAX_ROUNDS: u32 = 1 << 20;

/// Round trips at the largest size in the session warm-up: the first use of
/// the whole buffer (page faults, a device's lazy set-up) is slow too.
const SESSION_WARMUP_TOP_ROUNDS: u32 = 3;

/// The session warm-up: PRTT(1, 0, min size) until `cfg.session_warmup` has
/// passed and at least [`SESSION_WARMUP_ROUNDS`] round trips were made, then
/// [`SESSION_WARMUP_TOP_ROUNDS`] at the largest size. Nothing is recorded.
fn warm_session<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
) -> Result<(), SweepError> {
    if cfg.session_warmup.is_zero() {
        return Ok(());
    }
    let max = transport.caps().max_msg_bytes;
    let s = (cfg.min_size_bytes.max(1) as usize).min(max);
    let timeout = cfg.timeout;
    warm_for(transport, clock, cfg, guard, s, |t| {
        prtt(t, clock, peer, 1, 0, s, timeout).map(drop)
    })?;
    let top = usize::try_from(cfg.max_size_bytes)
        .map_or(max, |m| m.min(max))
        .max(s);
    // Up to the largest size by doubling from PACE_MIN_BYTES, one round
    // each: every round's wait then follows from a round of half its size,
    // and a slow link's largest message is not taken for a lost one.
    let mut ramp = PACE_MIN_BYTES;
    while ramp < top {
        let r = round(transport, clock, peer, 1, 0, ramp, timeout, guard);
        if guard.count(transport, r, ramp as u64, timeout)?.is_some() {
            ramp *= 2;
        }
    }
    let mut done = 0;
    while done < SESSION_WARMUP_TOP_ROUNDS {
        let r = round(transport, clock, peer, 1, 0, top, timeout, guard);
        if guard.count(transport, r, top as u64, timeout)?.is_some() {
            done += 1;
        }
    }
    Ok(())
}

/// Repeat `round` (a pattern of `size_bytes`, nothing recorded) until
/// `cfg.session_warmup` has passed and at least [`SESSION_WARMUP_ROUNDS`]
/// rounds succeeded; losses count as in a measurement.
fn warm_for<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
    size_bytes: usize,
    mut round: impl FnMut(&mut T) -> Result<(), TransportError>,
) -> Result<(), SweepError> {
    let span = clock.from_ns(cfg.session_warmup.as_nanos() as f64);
    let start = clock.now();
    let mut rounds = 0u32;
    while rounds < SESSION_WARMUP_ROUNDS
        || (clock.now().wrapping_sub(start) < span && rounds < SESSION_WARMUP_MAX_ROUNDS)
    {
        let r = round(transport);
        if guard
            .count(transport, r, size_bytes as u64, cfg.timeout)?
            .is_some()
        {
            rounds += 1;
        }
    }
    Ok(())
}

/// Run the LogGP sweep against `peer`.
pub fn sweep<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    progress: &mut dyn Progress,
) -> Result<SweepResult, SweepError> {
    let mut guard = LossGuard::new(cfg.max_consecutive_losses);
    warm_session(transport, clock, peer, cfg, &mut guard)?;
    let sizes = cfg.initial_sizes();
    let mut samples = Vec::with_capacity(sizes.len() + 32);
    // The smallest sizes together (the order starts with the smallest),
    // then the others in the measurement order.
    let together = &sizes[..interleaved_len(cfg, &sizes)];
    if !together.is_empty() {
        progress.sizes(0, sizes.len(), together[0]);
        samples.extend(measure_group(
            transport, clock, peer, together, cfg, &mut guard,
        )?);
    }
    for j in measurement_order(sizes.len(), cfg.schedule).filter(|&j| j >= together.len()) {
        progress.sizes(samples.len(), sizes.len(), sizes[j]);
        samples.push(measure_size(
            transport, clock, peer, sizes[j], cfg, &mut guard,
        )?);
    }
    if cfg.refine {
        refine(
            transport,
            clock,
            peer,
            cfg,
            &mut guard,
            &mut samples,
            progress,
        )?;
    }
    samples.sort_by_key(|s| s.size_bytes);
    let (repeat, cpu) = if cfg.repeat_smallest && !samples.is_empty() {
        progress.sizes(samples.len(), samples.len() + 1, samples[0].size_bytes);
        repeat_smallest(
            transport,
            clock,
            peer,
            cfg,
            &mut guard,
            together,
            &mut samples,
        )?
    } else {
        (None, None)
    };
    let lat_sizes = latency_sizes(cfg);
    let latency = if lat_sizes.is_empty() {
        Vec::new()
    } else {
        progress.sizes(samples.len(), samples.len() + 1, lat_sizes[0]);
        latency::latency_run(transport, clock, peer, cfg, &mut guard, &lat_sizes)?
    };
    let bursts = if cfg.long_bursts {
        progress.sizes(samples.len(), samples.len() + 1, cfg.max_size_bytes);
        Some(burst::long_bursts(transport, clock, peer, cfg, &mut guard)?)
    } else {
        None
    };
    progress.sizes(samples.len(), samples.len(), cfg.max_size_bytes);
    Ok(SweepResult {
        samples,
        lost_rounds: guard.lost_rounds(),
        bursts,
        repeat,
        cpu,
        latency,
    })
}

/// Measure the smallest sizes (`together`, measured together at the
/// start) again, together; keep whichever measurement has the lower median
/// round trip at the smallest size, for all of them, and return the other
/// one's smallest size, with the driving thread's context switches over
/// the new rounds.
///
/// The smallest size is measured first, right after the session warm-up,
/// and carries EEL: a path that is still slow for its first milliseconds
/// (a software RDMA device's first round trips are the usual case)
/// inflates it, and interference only ever adds time. Measured again at
/// the end, on a path that has carried the whole sweep, the lower of the
/// two is the one without such effects; the two disagreeing beyond their
/// intervals is itself a finding (the model's stability verdict). The
/// sizes measured with it are kept or dropped with it, so EEL and their
/// half round trips always come from one stretch of time.
fn repeat_smallest<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
    together: &[u64],
    samples: &mut [SizeSamples],
) -> Result<(Option<SizeSamples>, Option<CpuShare>), SweepError> {
    let first = [samples[0].size_bytes];
    let sizes = if together.is_empty() {
        &first
    } else {
        together
    };
    let before = cfg.switches.and_then(|f| f());
    let mut again = measure_group(transport, clock, peer, sizes, cfg, guard)?;
    let after = cfg.switches.and_then(|f| f());
    let round_trips = again
        .iter()
        .map(|a| {
            let s = a.size_bytes;
            a.rounds() * (3 + settle_for(cfg, s)) + 2 * warmup_for(cfg, s).0
        })
        .sum();
    let cpu = match (before, after) {
        (Some(b), Some(a)) => Some(CpuShare {
            round_trips,
            switches: a.saturating_sub(b),
        }),
        _ => None,
    };
    let old_wins = stats::median(&samples[0].prtt1_ns) < stats::median(&again[0].prtt1_ns);
    if old_wins {
        return Ok((Some(again.swap_remove(0)), cpu));
    }
    for new in again.iter_mut() {
        if let Some(kept) = samples.iter_mut().find(|s| s.size_bytes == new.size_bytes) {
            std::mem::swap(kept, new);
        }
    }
    Ok((Some(again.swap_remove(0)), cpu))
}

/// The order the initial sizes (indices into the ascending grid) are
/// measured in. Netgauge's schedule goes up in size. Ours strides through
/// the grid by the golden ratio of its length (coprime to it, so every size
/// once, the smallest first): neighbouring sizes are measured far apart in
/// time. A stretch of interference (the host busy for a second, a guest
/// in its slow mode) then slows sizes scattered over the grid, outliers the
/// robust fits set aside, instead of a run of neighbours that looks like a
/// protocol change: a slow second over three consecutive sizes, measured in
/// ascending order, reads exactly as a rendezvous step (bench/verbs.md,
/// "measurement order").
pub fn measurement_order(n: usize, schedule: Schedule) -> impl Iterator<Item = usize> {
    let stride = match schedule {
        Schedule::Netgauge => 1,
        Schedule::Adaptive => {
            let gcd = |mut a: usize, mut b: usize| {
                while b != 0 {
                    (a, b) = (b, a % b);
                }
                a
            };
            let mut k = ((n as f64) * 0.618_033_988_75).round().max(1.0) as usize;
            while n > 1 && gcd(k, n) != 1 {
                k += 1;
            }
            k
        }
    };
    (0..n).map(move |i| (i * stride) % n.max(1))
}

/// Measure exactly `sizes` (a daemon's cheap re-check), no refinement;
/// the samples in the order of `sizes`.
pub fn measure_sizes<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    sizes: &[u64],
    cfg: &SweepConfig,
) -> Result<Vec<SizeSamples>, SweepError> {
    let mut guard = LossGuard::new(cfg.max_consecutive_losses);
    warm_session(transport, clock, peer, cfg, &mut guard)?;
    // The first size and the small ones after it together, as in a sweep.
    let k = interleaved_len(cfg, sizes);
    let mut out = measure_group(transport, clock, peer, &sizes[..k], cfg, &mut guard)?;
    for &s in &sizes[k..] {
        out.push(measure_size(transport, clock, peer, s, cfg, &mut guard)?);
    }
    Ok(out)
}

/// At most this many protocol changes are refined, each with at most
/// `MAX_BISECTIONS` extra sizes.
const MAX_REFINED_CHANGES: usize = 6;
const MAX_BISECTIONS: usize = 24;
/// On a transport without a rendezvous protocol a change is bisected until
/// the two sizes it lies between are within this fraction of each other:
/// such a change is a bend of the gap (a copy that leaves the cache, a
/// shaper's bucket), not a protocol whose threshold is a byte count, and
/// locating it to the byte costs many large sizes (bench/shaper.md).
pub const BISECT_REL: f64 = 1.0 / 16.0;

/// Bisect every suspected protocol change down to two adjacent sizes.
fn refine<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
    samples: &mut Vec<SizeSamples>,
    progress: &mut dyn Progress,
) -> Result<(), SweepError> {
    // Only the changes the fit actually uses are refined: a detector's
    // false alarm that the chosen segmentation rejected costs nothing.
    let fit = model::fit::fit_loggp_with(samples, &cfg.traits);
    let points = fit.points.clone();
    let changes: Vec<usize> = fit
        .ranges
        .iter()
        .skip(1)
        .filter_map(|r| points.iter().position(|p| p.size_bytes == r.from_bytes))
        .take(MAX_REFINED_CHANGES)
        .collect();

    let total_guess = samples.len() + changes.len() * 12;
    for &c in &changes {
        if c == 0 || c >= points.len() {
            continue;
        }
        // The lines on both sides, fitted away from the boundary.
        let left = side_line(&points[..c]);
        let right = side_line(&points[c..]);
        let (mut a, mut b) = (points[c - 1].size_bytes, points[c].size_bytes);
        let to_the_byte = cfg.traits.rendezvous;
        for _ in 0..MAX_BISECTIONS {
            if b - a <= 1 || (!to_the_byte && (b - a) as f64 <= BISECT_REL * a as f64) {
                break;
            }
            let m = a + (b - a) / 2;
            progress.sizes(samples.len(), total_guess.max(samples.len() + 1), m);
            let sm = measure_size(transport, clock, peer, m, cfg, guard)?;
            let gap = gap_of(&sm);
            let x = (m - 1) as f64;
            if (gap - left(x)).abs() <= (gap - right(x)).abs() {
                a = m;
            } else {
                b = m;
            }
            samples.push(sm);
        }
        // Both sizes that now bound the change (a threshold to the byte).
        if to_the_byte {
            confirm(transport, clock, peer, cfg, guard, samples, a)?;
            confirm(transport, clock, peer, cfg, guard, samples, b)?;
        }
    }
    Ok(())
}

fn gap_of(s: &SizeSamples) -> f64 {
    model::fit::size_points(std::slice::from_ref(s))
        .first()
        .map_or(f64::NAN, |p| p.gap_ns)
}

/// Measure `size` (one of the two sizes a bisected change ends between)
/// once more and keep whichever of its two measurements shows the smaller
/// gap. Interference on a real host only ever adds time (a descheduled
/// process, a busy software device), and a burst of it over one of these
/// sizes places a protocol change where there is none; a real change shows
/// in both measurements.
fn confirm<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
    samples: &mut [SizeSamples],
    size_bytes: u64,
) -> Result<(), SweepError> {
    let again = measure_size(transport, clock, peer, size_bytes, cfg, guard)?;
    if let Some(old) = samples.iter_mut().find(|s| s.size_bytes == size_bytes) {
        if gap_of(&again) < gap_of(old) {
            *old = again;
        }
    }
    Ok(())
}

/// A predictor of the gap on one side of a change: the least-squares line
/// of that side, or its single value.
fn side_line(points: &[model::SizePoint]) -> impl Fn(f64) -> f64 {
    let xs: Vec<f64> = points.iter().map(|p| (p.size_bytes - 1) as f64).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.gap_ns).collect();
    let line = lsq::fit_line(&xs, &ys);
    let mean = stats::median(&ys);
    move |x| match &line {
        Some(l) => l.at(x),
        None => mean,
    }
}

/// LogfP: the 1:P−P:1 pattern for P = 1..=max_peers.
pub fn fanout_sweep<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    max_peers: usize,
    size_bytes: usize,
    cfg: &SweepConfig,
) -> Result<Vec<FanoutSamples>, SweepError> {
    let mut guard = LossGuard::new(cfg.max_consecutive_losses);
    // Session warm-up over every peer's path (the sweep warmed only peer 0).
    if !cfg.session_warmup.is_zero() && max_peers > 0 {
        let timeout = cfg.timeout;
        warm_for(transport, clock, cfg, &mut guard, size_bytes, |t| {
            fanout(t, clock, max_peers, size_bytes, timeout).map(drop)
        })?;
    }
    let mut out = Vec::with_capacity(max_peers);
    for p in 1..=max_peers {
        let mut fs = FanoutSamples {
            peers: p as u32,
            post_ns: Vec::with_capacity(cfg.max_reps as usize),
            rtt_ns: Vec::with_capacity(cfg.max_reps as usize),
            recv_ns: Vec::with_capacity(cfg.max_reps as usize),
        };
        let mut warm = 0;
        loop {
            // Settle, as for the single message of the sweep.
            for _ in 0..cfg.settle_rounds {
                if let Err(e) = fanout(transport, clock, p, size_bytes, cfg.timeout) {
                    guard.on_error(transport, e, size_bytes as u64, cfg.timeout)?;
                }
            }
            match fanout(transport, clock, p, size_bytes, cfg.timeout) {
                Ok(r) => {
                    guard.on_success();
                    if warm < cfg.warmup {
                        warm += 1;
                        continue;
                    }
                    fs.post_ns.push(r.post_ns);
                    fs.rtt_ns.push(r.rtt_ns);
                    fs.recv_ns.push(r.recv_ns);
                }
                Err(e) => {
                    guard.on_error(transport, e, size_bytes as u64, cfg.timeout)?;
                    continue;
                }
            }
            let reps = fs.rtt_ns.len() as u32;
            let tight = stats::rel_halfwidth(&fs.rtt_ns) <= cfg.rel_tol
                && stats::rel_halfwidth(&fs.post_ns) <= 2.0 * cfg.rel_tol;
            if reps >= cfg.max_reps || (reps >= cfg.min_reps && tight) {
                break;
            }
        }
        out.push(fs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
