//! The sweep's last stage: long bursts at the largest size, doubled until
//! the path's sustained rate shows, then repeated until it is known
//! (`model::bandwidth` fits and judges it).
//!
//! A sweep's own bursts (PRTT(n, 0, s), n of 4–64, sized to the round trip)
//! can pass entirely inside a token bucket's or a credit window's
//! allowance, so the largest range's G may be a burst rate no stream keeps
//! up. Here PRTT(n, 0, s) is measured for n = 2, 4, 8, … at one size s (the
//! largest, at most a quarter of [`MAX_BURST_BYTES`]).
//!
//! Each length is repeated until its time is *confirmed*: two repetitions
//! within 0.5 % (or 5 µs) of each other, the lesser of the least such pair
//! being the length's time ([`confirmed_least`]). A round on a host shared
//! with other work is mostly made longer, by amounts that scatter (a
//! descheduled responder, a delayed soft interrupt), and behind a large
//! bucket now and then shorter (a longer pause before it filled the bucket
//! further), while clean rounds repeat to a fraction of a percent; two that
//! agree are the path's time, a single one may be either.
//! Lengths double until the increment of the last doubling agrees with the
//! one before ("settled") and lasts at least [`MIN_INCREMENT_NS`] (the noise
//! of a clean round is far below that), or the next burst would exceed
//! [`MAX_BURST_BYTES`], or, once [`MIN_LENGTHS`] lengths are measured, would
//! last longer than [`MAX_BURST_NS`] ([`may_double`]). Then the two longest lengths (and the one before,
//! while the last two increments disagree by more than
//! [`TARGET_REL_HALFWIDTH`]) are repeated in turn until the sustained time
//! per message is known within [`TARGET_REL_HALFWIDTH`] (an interval that
//! holds the increments' disagreement, `model::bandwidth`), or each has
//! [`MAX_REPS`] repetitions.
//!
//! Losses end the stage, not the sweep: what it measured until then is
//! kept with the reason it stopped, and the fit says whether that is
//! enough.

use super::loss::{round, LossGuard};
use super::{SweepConfig, SweepError};
use crate::clock::Clock;
use crate::model::bandwidth::{confirmed_least, sustained, two_least};
use crate::model::{BurstLength, BurstSamples};
use crate::transport::{PeerId, Transport};

/// Largest burst of the stage, bytes: far below the transports' socket
/// buffers and rings (8 MiB), so a responder that is not scheduled for a
/// few milliseconds loses nothing, and below where an unshaped host's own
/// copies slow down (bench/shaper.md).
pub const MAX_BURST_BYTES: u64 = 2 << 20;
/// Longest a burst may last once [`MIN_LENGTHS`] lengths are measured, ns.
/// The byte cap alone lets a stage of small messages on a slow or noisy
/// host grow to tens of thousands of messages a burst (on a loaded emulated
/// guest, 64 B bursts doubled to 32768 messages, 0.7 s each, 750 000
/// messages in the stage: bench/verbs.md); the sustained rate behind a
/// token bucket shows long before on any path that fills its bucket within
/// a tenth of a second (a tbf bucket of up to 2 MiB at 168 Mbit/s; buckets
/// are a few milliseconds of their rate).
pub const MAX_BURST_NS: f64 = 100e6;
/// Lengths measured before [`MAX_BURST_NS`] applies: two increments to
/// judge "settled" by, as with the byte cap at the largest sizes.
pub const MIN_LENGTHS: usize = 3;
/// The last doubling must add at least this much transfer time before the
/// rate counts as known (unless the burst cap comes first).
pub const MIN_INCREMENT_NS: f64 = 2e6;
/// Least repetitions of each burst length while the lengths grow...
pub const DISCOVERY_REPS: u32 = 2;
/// ... and the most, when no two of them agree.
pub const DISCOVERY_MAX_REPS: u32 = 8;
/// The first burst length.
pub const FIRST_LENGTH: u32 = 2;
/// Most repetitions of the two lengths the rate is taken between.
pub const MAX_REPS: u32 = 12;
/// Stop repeating once the sustained time per message is known within
/// this fraction (half the ±5 % an identified G may have).
pub const TARGET_REL_HALFWIDTH: f64 = 0.02;

/// Do two of `xs` agree closely enough to give the length a time
/// ([`confirmed_least`])?
pub fn confirmed(xs: &[f64]) -> bool {
    confirmed_least(xs).is_some()
}

/// The size the stage runs at: the largest of the sweep, at most a quarter
/// of the burst cap (so the lengths 1, 2, 4 and 8 fit under it).
pub fn burst_size(cfg: &SweepConfig, transport_max_bytes: usize) -> u64 {
    cfg.max_size_bytes
        .min(transport_max_bytes as u64)
        .clamp(1, MAX_BURST_BYTES / 4)
}

/// May the stage double its longest length `n` (of `measured` lengths), at
/// `s` bytes a message, whose burst took `burst_ns` (its least round)?
/// Within the byte cap, and within the time cap once [`MIN_LENGTHS`] lengths
/// are measured. The sweep and its cost estimate both grow by this rule.
pub fn may_double(n: u32, s: u64, measured: usize, burst_ns: f64) -> bool {
    u64::from(n) * 2 * s <= MAX_BURST_BYTES
        && (measured < MIN_LENGTHS || 2.0 * burst_ns <= MAX_BURST_NS)
}

/// Measure the long bursts at the sweep's largest size. Only a transport
/// error other than a loss is an error; losses end the stage.
pub(super) fn long_bursts<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peer: PeerId,
    cfg: &SweepConfig,
    guard: &mut LossGuard,
) -> Result<BurstSamples, SweepError> {
    let s = burst_size(cfg, transport.caps().max_msg_bytes);
    let mut out = BurstSamples {
        size_bytes: s,
        lengths: Vec::with_capacity(12),
        stopped: None,
    };
    // The repetitions of one length; a loss ends the stage.
    let mut rep =
        |out: &mut BurstSamples, i: usize, guard: &mut LossGuard| -> Result<bool, SweepError> {
            let n = out.lengths[i].n;
            loop {
                match round(transport, clock, peer, n, 0, s as usize, cfg.timeout, guard) {
                    Ok(r) => {
                        guard.on_success();
                        out.lengths[i].prtt_ns.push(r.rtt_ns);
                        return Ok(true);
                    }
                    Err(e) => match guard.on_error(transport, e, s, cfg.timeout) {
                        Ok(()) => continue,
                        Err(SweepError::PeerLost { losses, .. }) => {
                            out.stopped =
                                Some(format!("{losses} bursts of {n} × {s} B in a row were lost"));
                            guard.on_success();
                            return Ok(false);
                        }
                        Err(other) => return Err(other),
                    },
                }
            }
        };
    // Grow: n = 2, 4, 8, … each until its least time is confirmed, until
    // settled.
    let mut n = FIRST_LENGTH;
    loop {
        out.lengths.push(BurstLength {
            n,
            prtt_ns: Vec::with_capacity(MAX_REPS as usize),
        });
        let i = out.lengths.len() - 1;
        while out.lengths[i].prtt_ns.len() < DISCOVERY_REPS as usize
            || (!confirmed(&out.lengths[i].prtt_ns)
                && out.lengths[i].prtt_ns.len() < DISCOVERY_MAX_REPS as usize)
        {
            if !rep(&mut out, i, guard)? {
                return Ok(out);
            }
        }
        if let Some(e) = sustained(&out, 0) {
            let increment_ns = e.per_message_ns * f64::from(e.to_messages - e.from_messages);
            if e.settled && increment_ns >= MIN_INCREMENT_NS {
                break;
            }
        }
        let (least, _) = two_least(&out.lengths[i].prtt_ns);
        if !may_double(n, s, out.lengths.len(), least) {
            break;
        }
        n *= 2;
    }
    // Repeat the two longest in turn until the rate is known; while the
    // last two increments disagree, the third longest too (on a busy host
    // its least round may be the one still lifted, and the increments only
    // agree once all three are clean).
    let k = out.lengths.len();
    if k < 2 {
        return Ok(out);
    }
    while out.lengths[k - 1].prtt_ns.len() < MAX_REPS as usize {
        let est = sustained(&out, 1);
        let settled = k < 3 || est.is_some_and(|e| e.settled);
        if settled && est.is_some_and(|e| e.rel_halfwidth() <= TARGET_REL_HALFWIDTH) {
            break;
        }
        // The increments' disagreement is part of the interval: while it
        // alone is beyond the target, the third longest is repeated too.
        let agree = k < 3
            || est.is_some_and(|e| {
                (e.per_message_ns - e.previous_ns).abs() <= TARGET_REL_HALFWIDTH * e.per_message_ns
            });
        let from = if agree { k - 2 } else { k - 3 };
        for i in from..k {
            if !rep(&mut out, i, guard)? {
                return Ok(out);
            }
        }
    }
    Ok(out)
}
