//! Contention in the daemon: the conflict probe this node drives over its
//! known peers (k flows out, in and both, `probe::contention`), the flow
//! sessions it serves for others' conflict probes and bisection rounds
//! (consented only within its budget and never while quiet), and the
//! stream orders an operator's `ngctl ebb` sends (stream to a partner over
//! a time window, all pairs of a matching at once).
//!
//! Budget: a flow session states the payload bytes it will carry
//! (`SizePlan::Flow`). The serving node takes them from a token bucket of
//! its own budget rate holding [`FLOW_WINDOW_S`] of it (full at start) and
//! refuses with `Budget` when it cannot pay. A conflict probe runs in a
//! fan-out round of the cluster schedule, on the meetings whose partners
//! admitted that round: its bytes are settled with the round on both sides
//! as the fan-out's are. A stream order's flows run outside the rounds:
//! their bytes are charged to the schedule's budget when consented. Peers
//! hold the cluster key and are trusted to carry no more than they stated.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::admission::DriveClaim;
use super::config::Config;
use super::job::{connect, measured_first, sessions_with, JobCtx, JobError, Meeting};
use super::Shared;
use crate::control::{self, RejectReason, SizePlan, StreamOrder, StreamResult};
use crate::link::Kind;
use crate::model::contention::{Conflict, ContentionFit};
use crate::probe::contention::{self, ContentionOptions, ContentionResult, MAX_K};
use crate::transport::multi::Multi;

/// The flow budget holds this many seconds of the node's budget rate.
pub(super) const FLOW_WINDOW_S: f64 = 600.0;
/// Lost rounds are repeated: a session may carry this much more than the
/// plan says.
const LOSS_ALLOWANCE: f64 = 1.25;
/// A stream order whose driver or partner is busy tries again this often.
const BUSY_RETRY: Duration = Duration::from_millis(100);
/// A stream order must start within this long of its arrival.
const MAX_LEAD: Duration = Duration::from_secs(60);

/// What flow sessions of others may still carry through this node: a token
/// bucket refilled at the budget rate. Pure over an explicit `now`.
#[derive(Debug)]
pub(super) struct FlowBudget {
    tokens: f64,
    capacity: f64,
    rate: f64,
    last: Instant,
}

impl FlowBudget {
    pub fn new(budget_bytes_per_s: u64, now: Instant) -> Self {
        let capacity = budget_bytes_per_s as f64 * FLOW_WINDOW_S;
        FlowBudget {
            tokens: capacity,
            capacity,
            rate: budget_bytes_per_s as f64,
            last: now,
        }
    }

    /// Take `bytes` if the bucket holds them.
    pub fn take(&mut self, bytes: u64, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + dt * self.rate).min(self.capacity);
        self.last = now;
        if bytes as f64 > self.tokens {
            return false;
        }
        self.tokens -= bytes as f64;
        true
    }
}

impl Shared {
    /// True while a job owns this node (`ngctl quiet`; the publisher sets
    /// it from the quiet file). A quiet node drives no conflict probe or
    /// stream, and consents to no flow session.
    pub(super) fn quiet(&self) -> bool {
        self.quiet.load(Ordering::Relaxed)
    }

    /// Consent to serving (or, for a stream order, driving) a flow session
    /// of `bytes`: refused while quiet or when the flow budget cannot pay.
    /// On consent the bytes are taken; a flow outside the schedule's rounds
    /// is charged to the schedule's budget as well (a round's are settled
    /// with the round).
    pub(super) fn consent_flow(&self, bytes: u64, rounds: Rounds) -> Result<(), RejectReason> {
        if self.quiet() {
            return Err(RejectReason::Quiet);
        }
        let mut b = self.flow_budget.lock().unwrap_or_else(|e| e.into_inner());
        if !b.take(bytes, Instant::now()) {
            return Err(RejectReason::Budget);
        }
        drop(b);
        if rounds == Rounds::Outside {
            self.schedule()
                .node_mut()
                .spent_outside_rounds(bytes, super::unix_now_s());
        }
        Ok(())
    }
}

/// Whether a flow runs in a round of the cluster schedule (its bytes are
/// settled with the round) or outside them (an operator's stream order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rounds {
    Within,
    Outside,
}

/// The conflict probe's options from the configuration.
pub(super) fn options(cfg: &Config) -> ContentionOptions {
    let c = &cfg.contention;
    ContentionOptions {
        size_bytes: usize::try_from(c.size_bytes.min(cfg.max_size_bytes)).unwrap_or(usize::MAX),
        burst: c.burst,
        rounds: c.rounds as usize,
        max_k: (c.max_k as usize).min(MAX_K),
        schemes: Conflict::ALL.to_vec(),
        ..ContentionOptions::default()
    }
}

/// The conflict probe over the meetings of a fan-out round (up to
/// [`MAX_K`] partners that admitted it), each asked to consent to the bytes
/// its flows will carry. The caller holds the claim to drive.
pub(super) fn contention_job(
    ctx: &JobCtx<'_>,
    kind: Kind,
    meetings: &mut [Meeting],
) -> Result<ContentionResult, JobError> {
    if ctx.shared.quiet() {
        return Err(JobError::Quiet);
    }
    let opts = options(ctx.cfg);
    let per_peer = opts.bytes_per_peer(meetings.len());
    let plan = |j: usize| SizePlan::Flow {
        bytes: (per_peer[j] as f64 * LOSS_ALLOWANCE) as u64,
    };
    sessions_with(ctx, kind, meetings, plan, |links| {
        let r = contention::run(&mut Multi::new(links), &ctx.clock, &opts, &mut ())?;
        let bytes = r.probe_bytes;
        Ok((r, bytes))
    })
}

/// The payload bytes the conflict probe with `k` partners is planned to
/// carry (what its partners are asked to consent to).
pub(super) fn planned_bytes(cfg: &Config, k: usize) -> u64 {
    let per_peer = options(cfg).bytes_per_peer(k);
    per_peer
        .iter()
        .map(|&b| (b as f64 * LOSS_ALLOWANCE) as u64)
        .sum()
}

/// The conflict probe over the meetings of a fan-out round, when it is
/// due and this node is not quiet: for each fan-out kind, over up to
/// [`MAX_K`] of the partners (each consents to its flows' bytes), its bytes
/// charged to the round before it runs. Returns the bytes moved.
pub(super) fn conflict_probe(
    ctx: &JobCtx<'_>,
    meetings: &mut [Meeting],
    plan: &[(Kind, Vec<usize>)],
    due_s: &mut f64,
    mut publish: impl FnMut(Kind, ContentionFit),
) -> u64 {
    let cfg = ctx.cfg;
    let now = super::unix_now_s();
    if cfg.contention.interval_s <= 0.0 || now < *due_s || ctx.shared.quiet() {
        return 0;
    }
    let mut bytes = 0;
    for (kind, peers) in plan {
        let k = peers.len().min(MAX_K);
        let planned = planned_bytes(cfg, k);
        if !ctx.shared.schedule().node_mut().charge_more(planned, now) {
            tracing::debug!("conflict probe over {kind}: the budget cannot pay {planned} B now");
            return bytes;
        }
        let Ok(_claim) = DriveClaim::take(ctx.shared) else {
            return bytes;
        };
        let subset = &mut measured_first(meetings, peers)[..k];
        match contention_job(ctx, *kind, subset) {
            Ok(r) => {
                bytes += r.probe_bytes;
                tracing::info!(
                    "conflict probe over {kind} with {k} peers: beta {:.2} ({} B in {:.1} s)",
                    r.fit.beta.value,
                    r.probe_bytes,
                    r.elapsed_ns * 1e-9
                );
                publish(*kind, r.fit);
            }
            Err(e) => {
                tracing::info!(
                    "conflict probe over {kind} with {k} peers: {e}; at the next fan-out"
                );
                return bytes;
            }
        }
    }
    *due_s = now + cfg.contention.interval_s;
    bytes
}

/// A stream order from an operator: stream to the partner over the
/// order's window (its consent, then ours, then the link; we wait for the
/// start and stream), and say what came of it.
pub(super) fn stream_order(ctx: &JobCtx<'_>, from: &str, o: &StreamOrder) -> StreamResult {
    let mut r = StreamResult {
        nonce: o.nonce,
        out_bytes_per_s: f64::NAN,
        in_bytes_per_s: f64::NAN,
        rounds: 0,
        bytes: 0,
        error: None,
    };
    if let Err(e) = run_order(ctx, from, o, &mut r) {
        let mut text = e;
        if text.len() > control::msg::MAX_TEXT_BYTES {
            let mut cut = control::msg::MAX_TEXT_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        tracing::info!("stream order from {from} to {}: {text}", o.partner);
        r.error = Some(text);
    }
    r
}

fn run_order(
    ctx: &JobCtx<'_>,
    from: &str,
    o: &StreamOrder,
    r: &mut StreamResult,
) -> Result<(), String> {
    if control::operator_of(from).is_none() {
        return Err("stream orders come from an operator's ngctl".into());
    }
    let now_unix = crate::publish::unix_now_ns();
    let start_in = Duration::from_nanos(o.start_unix_ns.saturating_sub(now_unix));
    if o.start_unix_ns <= now_unix || start_in > MAX_LEAD {
        return Err(format!(
            "the window starts {} (must be in the next {MAX_LEAD:?})",
            if o.start_unix_ns <= now_unix {
                "in the past"
            } else {
                "too late"
            }
        ));
    }
    let peer = ctx
        .shared
        .peers
        .iter()
        .position(|p| p.name == o.partner)
        .ok_or_else(|| format!("{} is not a member of this node's cluster", o.partner))?;
    let size = usize::try_from(o.size_bytes).map_err(|_| "message too large".to_string())?;
    ctx.shared
        .consent_flow(o.max_bytes, Rounds::Outside)
        .map_err(|why| format!("refused: {why:?}"))?;
    let start = Instant::now() + start_in;
    let until = start + Duration::from_nanos(o.duration_ns);
    let timeout = Duration::from_secs(5).max(Duration::from_nanos(o.duration_ns) / 2);
    let mut meeting = connect(ctx, peer).map_err(|e| e.to_string())?;
    // This node or the partner may be busy with a session of a round:
    // try again until the window starts.
    let m = loop {
        let claim = DriveClaim::take(ctx.shared);
        let result = claim.and_then(|_claim| {
            let plan = SizePlan::Flow { bytes: o.max_bytes };
            meeting.session(ctx, o.transport, plan, |link| {
                // The session is set up: wait for the common start.
                if ctx
                    .shared
                    .shutdown
                    .wait(start.saturating_duration_since(Instant::now()))
                {
                    return Err(JobError::Unexpected("shutting down"));
                }
                Ok(contention::stream(
                    link,
                    &ctx.clock,
                    o.bidirectional,
                    o.burst,
                    size,
                    until,
                    o.max_bytes,
                    timeout,
                )?)
            })
        });
        match result {
            Ok(m) => break m,
            Err(e @ (JobError::Refused(_, RejectReason::Busy) | JobError::Occupied(_))) => {
                if Instant::now() + BUSY_RETRY >= start {
                    return Err(format!("{e} until the window started"));
                }
                std::thread::sleep(BUSY_RETRY);
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    if Instant::now() > until + timeout {
        return Err("the stream overran its window".into());
    }
    r.out_bytes_per_s = m.out_bytes_per_s;
    r.in_bytes_per_s = m.in_bytes_per_s;
    r.rounds = m.rounds;
    r.bytes = m.bytes;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flow_budget_refills_at_the_budget_rate() {
        let t0 = Instant::now();
        let mut b = FlowBudget::new(1000, t0);
        assert!(b.take(600_000, t0));
        assert!(!b.take(1, t0));
        assert!(!b.take(10_000, t0));
        // 10 s later: 10 000 bytes more.
        assert!(b.take(10_000, t0 + Duration::from_secs(10)));
        assert!(!b.take(1_000, t0 + Duration::from_secs(10)));
        // Never more than the window holds.
        assert!(!b.take(600_001, t0 + Duration::from_secs(10_000)));
        assert!(b.take(600_000, t0 + Duration::from_secs(10_000)));
    }
}
