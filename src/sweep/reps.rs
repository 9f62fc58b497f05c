//! How much a size is measured: its warm-up, its settle rounds, its burst
//! length cap and its repetitions, bounded by the payload they send (the
//! fit of a range draws on all its sizes, so a large size need not be known
//! alone as well as a small one). `cost` plans with the same rules.

use super::SweepConfig;

/// Above this size a size's repetitions are bounded by
/// [`SIZE_PAYLOAD_BYTES`] (below, by [`SMALL_PAYLOAD_BYTES`]), its least
/// repetitions are `large_min_reps`, and no settle rounds precede them.
const BYTE_BUDGET_SIZE: u64 = 16 * 1024;
/// The payload (both directions) a size above [`BYTE_BUDGET_SIZE`] may
/// send in its repetitions beyond its least ones: a bound in bytes, so a
/// sweep's cost behind a slow link stays a few tens of megabytes
/// (bench/shaper.md).
pub const SIZE_PAYLOAD_BYTES: u64 = 1 << 20;
/// The same for the sizes up to [`BYTE_BUDGET_SIZE`] (but the smallest,
/// which carries EEL): a repetition of 1 KiB in bursts of 16 pays 26 of
/// the 40 of `max_reps`, the least repetitions always run.
pub const SMALL_PAYLOAD_BYTES: u64 = 1 << 20;

/// The largest n of a size's bursts: `n_max`, and no more messages than
/// [`BURST_CAP_BYTES`] hold. A busy host inflates the warm-up's round trip
/// and so the n it asks for; a large size's gap dominates its round trip
/// anyway.
pub(crate) fn burst_cap(cfg: &SweepConfig, size_bytes: u64) -> u32 {
    let by_bytes = (BURST_CAP_BYTES / size_bytes.max(1)).min(u64::from(u32::MAX)) as u32;
    cfg.n_max.min(by_bytes).max(cfg.n_min).max(2)
}

/// See [`burst_cap`].
pub const BURST_CAP_BYTES: u64 = 512 << 10;

/// The warm-up rounds of `size_bytes` and their burst length: `warmup`
/// rounds of `n`, but one round of at most [`burst_cap`] above
/// [`BYTE_BUDGET_SIZE`] (two rounds of 8 messages cost a 128 KiB size more
/// than its three timed repetitions).
pub(crate) fn warmup_for(cfg: &SweepConfig, size_bytes: u64) -> (u32, u32) {
    let n = cfg.n.max(2);
    if size_bytes > BYTE_BUDGET_SIZE {
        (cfg.warmup.min(1), n.min(burst_cap(cfg, size_bytes)))
    } else {
        (cfg.warmup, n)
    }
}

/// Settle rounds before each timed repetition of `size_bytes`: none above
/// [`BYTE_BUDGET_SIZE`], where a burst's lazy completion is small against
/// the message's own time and two more round trips per repetition are a
/// quarter of its payload.
pub(crate) fn settle_for(cfg: &SweepConfig, size_bytes: u64) -> u32 {
    if size_bytes > BYTE_BUDGET_SIZE {
        0
    } else {
        cfg.settle_rounds
    }
}

/// The least and the most repetitions of `size_bytes` measured with bursts
/// of `n`: the smallest size (it carries EEL) up to `max_reps`; sizes
/// above [`BYTE_BUDGET_SIZE`] from `large_min_reps` up to what
/// [`SIZE_PAYLOAD_BYTES`] pays for; the others `min_reps` … `max_reps`.
pub(crate) fn rep_limits(cfg: &SweepConfig, size_bytes: u64, n: u32) -> (u32, u32) {
    let least = cfg.min_reps.max(1);
    let most = cfg.max_reps.max(least);
    if size_bytes == cfg.min_size_bytes {
        return (least, most);
    }
    let (least, payload) = if size_bytes <= BYTE_BUDGET_SIZE {
        (least, SMALL_PAYLOAD_BYTES)
    } else {
        (cfg.large_min_reps.clamp(1, least), SIZE_PAYLOAD_BYTES)
    };
    let per_rep = size_bytes * u64::from(2 * settle_for(cfg, size_bytes) + 2 + 2 * (n + 1));
    let paid = (payload / per_rep.max(1)) as u32;
    (least, paid.clamp(least, most))
}
