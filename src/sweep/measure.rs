//! How a size is measured: warm-up, the choice of n and d, then
//! repetitions of PRTT(1,0,s), PRTT(n,0,s) and PRTT(n,d,s) until the
//! estimates are tight enough.
//!
//! Several sizes can be measured together ([`measure_group`]): their
//! warm-ups and then their repetitions in turn, one repetition of each
//! size before the next of any. The sweep measures its smallest sizes so
//! (the EEL point and the latency-bound sizes up to
//! `SweepConfig::interleave_max_bytes`): a host that switches between a fast
//! and a slow mode while they are measured (an emulated guest does, every
//! few hundred milliseconds) then slows all of them alike, and EEL and the
//! half round trips of the sizes next to it come from the same stretch of
//! time. Measured one after the other, a switch between two of them reads
//! as a latency that differs by the mode's factor (bench/verbs.md).

use super::loss::{round, LossGuard};
use super::{burst_cap, rep_limits, settle_for, warmup_for, SweepConfig, SweepError};
use crate::clock::Clock;
use crate::model::{stats, SizeSamples};
use crate::transport::{PeerId, Transport};

/// How many of the ascending grid `sizes` a sweep measures together at
/// its start ([`measure_group`]): the smallest size (it carries EEL) and
/// every following size up to `cfg.interleave_max_bytes`; 0 for no sizes.
pub fn interleaved_len(cfg: &SweepConfig, sizes: &[u64]) -> usize {
    if sizes.is_empty() {
        return 0;
    }
    1 + sizes[1..]
        .iter()
        .take_while(|&&s| s <= cfg.interleave_max_bytes)
        .count()
}

/// One size under measurement: its samples so far and what its warm-up
/// chose.
struct SizeRun {
    out: SizeSamples,
    warmup: u32,
    warmed: u32,
    warm_prtt1_ns: f64,
    warm_gap_ns: f64,
    min_reps: u32,
    max_reps: u32,
    settle_rounds: u32,
}

impl SizeRun {
    /// Allocates the sample buffers for the most repetitions the size may
    /// take, so the timed loop never grows them.
    fn new(max_msg_bytes: usize, size_bytes: u64, cfg: &SweepConfig) -> Result<Self, SweepError> {
        if size_bytes as usize > max_msg_bytes {
            return Err(SweepError::TooLarge {
                size_bytes,
                max_bytes: max_msg_bytes,
            });
        }
        let (warmup, warm_n) = warmup_for(cfg, size_bytes);
        let cap = cfg.max_reps.max(cfg.min_reps).max(1) as usize;
        Ok(Self {
            out: SizeSamples {
                size_bytes,
                n: warm_n,
                prtt1_ns: Vec::with_capacity(cap),
                prttn_ns: Vec::with_capacity(cap),
                prttd_ns: Vec::with_capacity(cap),
                o_r_ns: Vec::with_capacity(2 * cap),
                d_ns: f64::NAN,
            },
            warmup,
            warmed: 0,
            warm_prtt1_ns: f64::NAN,
            warm_gap_ns: 0.0,
            min_reps: 0,
            max_reps: 0,
            settle_rounds: 0,
        })
    }

    /// One warm-up round (PRTT(1,0,s) then PRTT(n,0,s)): caches, page
    /// faults, lazy connection set-up. The last one also tells how long d
    /// must be. A lost round is counted and retried by the caller.
    fn warm_step<T: Transport, C: Clock>(
        &mut self,
        transport: &mut T,
        clock: &C,
        peer: PeerId,
        cfg: &SweepConfig,
        guard: &mut LossGuard,
    ) -> Result<(), SweepError> {
        let (s, t, warm_n) = (self.out.size_bytes as usize, cfg.timeout, self.out.n);
        let one = round(transport, clock, peer, 1, 0, s, t, guard);
        let many =
            one.and_then(|a| round(transport, clock, peer, warm_n, 0, s, t, guard).map(|b| (a, b)));
        match many {
            Ok((a, b)) => {
                guard.on_success();
                self.warm_prtt1_ns = a.rtt_ns;
                self.warm_gap_ns = (b.rtt_ns - a.rtt_ns) / f64::from(warm_n - 1);
                self.warmed += 1;
                Ok(())
            }
            Err(e) => guard.on_error(transport, e, self.out.size_bytes, t),
        }
    }

    /// After the warm-up: n (so the n−1 gaps add up to about two round
    /// trips, within `n_min` … the size's burst cap) and the repetitions.
    fn choose_n(&mut self, cfg: &SweepConfig) {
        let size_bytes = self.out.size_bytes;
        let n = if cfg.n_max > cfg.n_min && self.warmed > 0 && self.warm_gap_ns > 0.0 {
            let want = 1.0 + (2.0 * self.warm_prtt1_ns / self.warm_gap_ns).ceil();
            (want.min(f64::from(burst_cap(cfg, size_bytes))) as u32)
                .max(cfg.n_min)
                .max(2)
        } else {
            self.out.n
        };
        self.out.n = n;
        (self.min_reps, self.max_reps) = rep_limits(cfg, size_bytes, n);
        self.settle_rounds = settle_for(cfg, size_bytes);
    }

    /// One repetition: settle rounds, then PRTT(1,0,s), PRTT(n,0,s) and
    /// PRTT(n,d,s), recorded together. A lost round is counted (an error
    /// once too many are lost in a row) and the repetition dropped.
    fn repetition<T: Transport, C: Clock>(
        &mut self,
        transport: &mut T,
        clock: &C,
        peer: PeerId,
        cfg: &SweepConfig,
        guard: &mut LossGuard,
    ) -> Result<(), SweepError> {
        let (size_bytes, n, t) = (self.out.size_bytes, self.out.n, cfg.timeout);
        let s = size_bytes as usize;
        // Settle: the previous repetition's bursts may still occupy the
        // path (a software device completes them lazily); the single
        // message is timed on a path that has just carried a ping-pong.
        for _ in 0..self.settle_rounds {
            if let Err(e) = round(transport, clock, peer, 1, 0, s, t, guard) {
                guard.on_error(transport, e, size_bytes, t)?;
            }
        }
        let r1 = match round(transport, clock, peer, 1, 0, s, t, guard) {
            Ok(r) => r,
            Err(e) => return guard.on_error(transport, e, size_bytes, t),
        };
        let rn = match round(transport, clock, peer, n, 0, s, t, guard) {
            Ok(r) => r,
            Err(e) => return guard.on_error(transport, e, size_bytes, t),
        };
        if self.out.d_ns.is_nan() {
            // d ≥ g + (s−1)G is required; the paper takes d = PRTT(1,0,s) and
            // falls back to a larger delay when the gap exceeds it.
            let rtt = if self.warm_prtt1_ns.is_nan() {
                r1.rtt_ns
            } else {
                self.warm_prtt1_ns
            };
            let gap = self
                .warm_gap_ns
                .max((rn.rtt_ns - r1.rtt_ns) / f64::from(n - 1));
            self.out.d_ns = rtt.max(1.5 * gap);
        }
        let d = clock.from_ns(self.out.d_ns);
        let rd = match round(transport, clock, peer, n, d, s, t, guard) {
            Ok(r) => r,
            Err(e) => return guard.on_error(transport, e, size_bytes, t),
        };
        guard.on_success();
        self.out.prtt1_ns.push(r1.rtt_ns);
        self.out.prttn_ns.push(rn.rtt_ns);
        self.out.prttd_ns.push(rd.rtt_ns);
        if transport.caps().has_recv_overhead {
            self.out.o_r_ns.push(rn.server_o_r_ns);
            self.out.o_r_ns.push(rd.server_o_r_ns);
        }
        Ok(())
    }

    /// No more repetitions allowed.
    fn full(&self) -> bool {
        self.out.rounds() >= self.max_reps
    }

    /// The size's stop rule: its most repetitions, or its least and
    /// estimates known to `rel_tol`.
    fn done(&self, cfg: &SweepConfig) -> bool {
        let reps = self.out.rounds();
        // The smallest size also gives EEL = PRTT(1,0,s)/2 on its own, so its
        // round trip must be known better than the gaps (cheap: tiny payload).
        let eel_ok = self.out.size_bytes != cfg.min_size_bytes
            || stats::rel_halfwidth(&self.out.prtt1_ns) <= cfg.rel_tol / 4.0;
        reps >= self.max_reps
            || (reps >= self.min_reps && eel_ok && converged(&self.out, cfg.rel_tol))
    }
}

/// Measure `sizes` together: the warm-ups in turn, then one repetition of
/// each size in turn until every size meets its stop rule. A size that
/// meets it early goes on being measured (up to its most repetitions)
/// while the others have not, so all its samples come from the group's
/// whole stretch of time. One size alone is measured exactly as
/// [`measure_size`] does. The samples come back in the order of `sizes`.
pub(super) fn measure_group<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    sizes: &[u64],
    cfg: &SweepConfig,
    guard: &mut LossGuard,
) -> Result<Vec<SizeSamples>, SweepError> {
    let max = transport.caps().max_msg_bytes;
    let mut runs = sizes
        .iter()
        .map(|&s| SizeRun::new(max, s, cfg))
        .collect::<Result<Vec<_>, _>>()?;
    while runs.iter().any(|r| r.warmed < r.warmup) {
        for r in runs.iter_mut().filter(|r| r.warmed < r.warmup) {
            r.warm_step(transport, clock, peer, cfg, guard)?;
        }
    }
    for r in &mut runs {
        r.choose_n(cfg);
    }
    loop {
        for r in runs.iter_mut().filter(|r| !r.full()) {
            r.repetition(transport, clock, peer, cfg, guard)?;
        }
        if runs.iter().all(|r| r.done(cfg)) {
            return Ok(runs.into_iter().map(|r| r.out).collect());
        }
    }
}

/// Measure one size: warm-up, choose d, then repetitions of PRTT(1,0,s),
/// PRTT(n,0,s) and PRTT(n,d,s) until the estimates are tight enough.
pub(super) fn measure_size<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    size_bytes: u64,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
) -> Result<SizeSamples, SweepError> {
    let mut one = measure_group(transport, clock, peer, &[size_bytes], cfg, guard)?;
    Ok(one.remove(0))
}

/// Are the gap and overhead estimates of this size known to `rel_tol`?
fn converged(s: &SizeSamples, rel_tol: f64) -> bool {
    let k = f64::from(s.n - 1);
    let hw = |xs: &[f64]| {
        let (lo, hi) = stats::median_ci95(xs);
        (hi - lo) / 2.0
    };
    let (h1, hn, hd) = (hw(&s.prtt1_ns), hw(&s.prttn_ns), hw(&s.prttd_ns));
    let rtt = stats::median(&s.prtt1_ns);
    let gap = (stats::median(&s.prttn_ns) - rtt) / k;
    let o = (stats::median(&s.prttd_ns) - rtt) / k - s.d_ns;
    // Tiny quantities are judged against the round trip, so a near-zero
    // overhead does not demand endless repetitions.
    let floor = 0.05 * rtt;
    (h1 + hn) / k <= rel_tol * gap.abs().max(floor) && (h1 + hd) / k <= rel_tol * o.abs().max(floor)
}
