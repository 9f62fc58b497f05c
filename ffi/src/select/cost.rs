//! Point-to-point costs of the model at one size (see the module
//! documentation of `select`): T(s), gap(s), a forwarding rank's CPU time,
//! LogfP bursts, and one all-ranks step.

use super::{Network, Sharing, LOGFP_MAX_BYTES};
use crate::ext::Scheme;
use crate::types::{line_ns, LookupError, Params};

/// The point-to-point costs of the model at one size.
pub(super) struct Msg {
    /// T(s): one message end to end, rendezvous included.
    pub(super) t_ns: f64,
    /// gap(s): earliest start of the sender's next message.
    pub(super) gap_ns: f64,
    /// CPU time of a rank that receives the message and sends it on:
    /// o_s + o_r + (s−1)·max(O_s, O_r). Both ends' per-byte overheads
    /// contain the one copy of the bytes per hop (module doc), so it is
    /// counted once; o_s(s) + o_r(s) would count it twice and price the
    /// period at about twice the gap and T(s) (bench/mpi.md).
    pub(super) forward_ns: f64,
}

/// T(s) of the module documentation for one parameter set: the one-byte
/// end-to-end latency plus (s−1)·G, plus the rendezvous handshake. Without
/// a measured EEL (0 or not finite) its LogGP value L + o_s + o_r.
pub fn one_message_ns(p: &Params, msg_bytes: u64) -> f64 {
    // One Params is a network of one range: the lookup cannot fail.
    one_message_on(p, msg_bytes).unwrap_or(f64::NAN)
}

/// T(s) over a network of ranges: the bytes of each range cost that range's
/// G, so T is continuous across ranges except for the rendezvous handshake
/// above S. The first range's message is EEL + (s−1)·G; a later range's
/// starts where the range below ends, T(from − 1), and adds (s − from + 1)·G
/// (sizes between two ranges count at the lower one's G). One range's
/// `EEL + (s−1)·G` with its own G from s = 1 is what [`one_message_ns`] gives:
/// across ranges it puts the line of a narrow range (a few bisection sizes
/// with a steep, noisy G) or of a few disturbed large sizes (G = 0) under
/// every byte of the message, so that a small message costs a multiple of
/// EEL, or a large one no more than EEL.
pub(super) fn one_message_on<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    let p = net.at(bytes)?;
    let handshake = if p.S_bytes != u64::MAX && bytes > p.S_bytes {
        2.0 * eel_of(&p)
    } else {
        0.0
    };
    Ok((bytes_time(net, bytes)? + handshake).max(0.0))
}

/// T(s) without the handshake (see [`one_message_on`]).
fn bytes_time<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    let p = net.at(bytes)?;
    let big_g = p.G_ns_per_byte.max(0.0);
    let from = p.range_from_bytes;
    if from > 1 && from <= bytes {
        let below = net.at(from - 1)?;
        if below.range_from_bytes < from {
            return Ok(bytes_time(net, from - 1)? + (bytes - from + 1) as f64 * big_g);
        }
    }
    Ok(line_ns(eel_of(&p), big_g, bytes))
}

/// gap(s) over a network of ranges: its range's line g + (s−1)·G, at most
/// the gap where the range below ends plus this range's G for the bytes
/// beyond it (the continuation [`one_message_on`] gives T(s)). A wide
/// range's line is fitted mostly by its large sizes, and its intercept g
/// can lie far above what its small sizes take (9 µs at 309 B where the
/// range below ends at 1 µs): without the bound every sender's next small
/// message waits that intercept, and a root that sends several (a tree)
/// is priced far above one that sends once (a chain). Never above the
/// range's own line.
pub(super) fn gap_on<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    let p = net.at(bytes)?;
    let own = p.gap_ns(bytes);
    let from = p.range_from_bytes;
    if from > 1 && from <= bytes {
        let below = net.at(from - 1)?;
        if below.range_from_bytes < from {
            let continued =
                gap_on(net, from - 1)? + (bytes - from + 1) as f64 * p.G_ns_per_byte.max(0.0);
            return Ok(own.min(continued));
        }
    }
    Ok(own)
}

/// The part of T(s) that moves the bytes: T(s) − T(1) without the
/// handshake.
pub(super) fn bytes_part_ns<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<f64, LookupError> {
    Ok((bytes_time(net, bytes)? - bytes_time(net, 1)?).max(0.0))
}

/// How many transfers of `bytes` the node moves at once, from
/// its all-ranks exchange of `p` ranks (None without one): the exchange
/// moves P transfers at once, and its bytes take X(s) − X(1) where one
/// pair's take T(s) − T(1), so the node moves P·(T(s) − T(1)) / (X(s) −
/// X(1)) of them in parallel, rounded, at least 1 and at most P. Where the
/// node's single-copy transfers serialize, this is 1; where each pair's
/// copies run on cores of their own, P (or the cores' share).
pub(super) fn copy_lanes<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bytes: u64,
) -> Result<Option<usize>, LookupError> {
    let (Some(x), Some(x1)) = (net.exchange_ns(p, bytes), net.exchange_ns(p, 1)) else {
        return Ok(None);
    };
    let pair = bytes_part_ns(net, bytes)?;
    let exch = x - x1;
    if p == 0 || exch <= 0.0 || pair <= 0.0 {
        return Ok(None);
    }
    let lanes = (p as f64 * pair / exch).round();
    Ok(Some((lanes.max(1.0) as usize).min(p)))
}

/// Messages of at least this many bytes are priced with the node's one
/// copy-lane count ([`node_copy_lanes`]); from here the bytes' part of a
/// transfer dominates its fixed part on the nodes measured (bench/ngcoll.md).
pub const NODE_LANES_FROM_BYTES: u64 = 64 * 1024;

/// The largest size [`node_copy_lanes`] looks at (the MPI probe's default
/// largest size).
pub const NODE_LANES_TO_BYTES: u64 = 4 << 20;

/// How many large transfers the node moves at once: the least of
/// [`copy_lanes`] over the powers of two from [`NODE_LANES_FROM_BYTES`] to
/// [`NODE_LANES_TO_BYTES`] (None without an exchange measurement). The
/// count is a property of the node (how many single-copy transfers it
/// moves at once), one number for every large size: a count derived per
/// size rounds differently where the pair's buffers stay in a core's
/// cache and the P ranks' do not (the pair moves its bytes faster there,
/// and the ratio overstates the lanes), and two algorithms priced at
/// different sizes would get different lane counts on one node. The least
/// is the count the node holds at every size.
pub(super) fn node_copy_lanes<N: Network + ?Sized>(
    net: &N,
    p: usize,
) -> Result<Option<usize>, LookupError> {
    let mut least: Option<usize> = None;
    let mut s = NODE_LANES_FROM_BYTES;
    while s <= NODE_LANES_TO_BYTES {
        if let Some(n) = copy_lanes(net, p, s)? {
            least = Some(least.map_or(n, |l| l.min(n)));
        }
        s *= 2;
    }
    Ok(least)
}

/// The bytes' part of a transfer of `bytes` when the rank's buffers of
/// the call span `working_set` bytes: `own` (the part measured at `bytes`)
/// or, if larger, the per-byte rate the same measurement shows at the
/// working set, `at_ws`·(bytes − 1)/(working_set − 1). A probe's sweep
/// reuses buffers of the message's size, which stay in the caches at sizes
/// where a collective's vectors (a ring's blocks of a larger vector, a
/// pipeline's segments) do not: the rate of the sweep at the vector's
/// size is the one its pieces see. Never less than `own`: a transfer is
/// no faster for being part of more data.
pub(super) fn in_working_set(own: f64, at_ws: f64, bytes: u64, working_set: u64) -> f64 {
    if working_set <= bytes || working_set <= 1 || bytes == 0 {
        return own;
    }
    let scaled = at_ws * (bytes - 1) as f64 / (working_set - 1) as f64;
    own.max(scaled)
}

/// The measured EEL, or without one (0 or not finite) L + o_s + o_r.
fn eel_of(p: &Params) -> f64 {
    if p.eel_ns.is_finite() && p.eel_ns > 0.0 {
        p.eel_ns
    } else {
        p.L_ns + p.o_s_ns + p.o_r_ns
    }
}

/// The sender's overhead o_s(s) = o_s + (s−1)·O_s of the range, at most
/// the message's whole time T(s) (`t_ns`): the sender's work is part of
/// the end-to-end time the probe measures for the same size, so a larger
/// fitted value (a burst disturbed by another job can put milliseconds
/// into o_s or O_s) is not what the sender spends.
pub(super) fn send_overhead_ns(p: &Params, bytes: u64, t_ns: f64) -> f64 {
    line_ns(p.o_s_ns, p.O_s_ns_per_byte, bytes).clamp(0.0, t_ns.max(0.0))
}

pub(super) fn msg<N: Network + ?Sized>(net: &N, bytes: u64) -> Result<Msg, LookupError> {
    let p = net.at(bytes)?;
    let t_ns = one_message_on(net, bytes)?;
    let o_s_ns = send_overhead_ns(&p, bytes, t_ns);
    let gap_ns = gap_on(net, bytes)?.max(o_s_ns).max(0.0);
    // Receiving and sending on: at most the two messages' whole times.
    let forward_ns = line_ns(
        p.o_s_ns + p.o_r_ns,
        p.O_s_ns_per_byte.max(p.O_r_ns_per_byte),
        bytes,
    )
    .clamp(0.0, 2.0 * t_ns);
    Ok(Msg {
        t_ns,
        gap_ns,
        forward_ns,
    })
}

impl Msg {
    /// T(s) in a step stretched by processor sharing.
    pub(super) fn t_shared(&self, stretch: f64) -> f64 {
        self.t_ns * stretch
    }
}

/// Gap before the (j+1)-th of a burst of `burst` sends of `bytes`, LogfP
/// for small messages: the first f messages pay only the posting overhead
/// o(burst) = o_min + o_max / burst, later ones the LogfP gap g_f.
pub(super) fn burst_gap<N: Network + ?Sized>(
    net: &N,
    bytes: u64,
    j: usize,
    burst: usize,
    m: &Msg,
) -> Result<f64, LookupError> {
    if bytes <= LOGFP_MAX_BYTES {
        let p = net.at(bytes)?;
        if p.f > 0 && (p.o_min_ns > 0.0 || p.o_max_ns > 0.0) {
            let o_burst = p.o_min_ns + p.o_max_ns / burst.max(1) as f64;
            return Ok(if j < p.f as usize {
                o_burst
            } else {
                p.g_f_ns.max(o_burst)
            });
        }
    }
    Ok(m.gap_ns)
}

/// The stretch of a transfer when its rank has `k` transfers of `scheme`
/// in flight, from the transport's published penalties; None without a
/// record (the caller keeps the pricing it has without one).
///
/// `relative`: the base time the factor multiplies already holds one
/// transfer of the scheme under contention (the measured all-ranks step
/// X(s) holds one exchange per rank; a point-to-point T(s) is the probe's
/// flow alone, which is what pen(1) is relative to), so the factor is
/// pen(k)/pen(1), the growth beyond the first flow, and the conflict the
/// base holds is not counted twice. Otherwise pen(k). At least 1: k flows
/// at once are no faster than one.
pub(super) fn contention<N: Network + ?Sized>(
    net: &N,
    scheme: Scheme,
    k: usize,
    relative: bool,
) -> Option<f64> {
    let pk = net.penalty(scheme, k.max(1))?;
    let f = if relative {
        pk / net.penalty(scheme, 1)?
    } else {
        pk
    };
    Some(f.max(1.0))
}

/// One step in which all P ranks exchange `bytes` with a partner at once:
/// [`exchange_step_k`] with one exchange per rank.
pub(super) fn exchange_step<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bytes: u64,
    sh: Sharing,
) -> Result<f64, LookupError> {
    match exchange_step_k(net, p, bytes, sh, 1)? {
        Some(t) => Ok(t),
        None => Ok(msg(net, bytes)?.t_shared(sh.factor(p))),
    }
}

/// One step in which each of the P ranks has `k` exchanges in flight at
/// once (k sends and k receives: the penalties' mixed scheme). None for
/// k > 1 without a contention record (the caller keeps its own pricing);
/// k = 1 always has a price:
///
/// - the measured all-ranks step X(s) ([`Network::exchange_ns`]) with its
///   bytes' part X(s) − X(1) stretched by pen_mixed(k)/pen_mixed(1) with a
///   record, X(s) without (X holds one exchange per rank with its
///   contention already);
/// - else the pair's T(s) with its bytes' part T(s) − T(1) stretched by
///   pen_mixed(k) with a record, at least T(s) stretched by the sharing of
///   P busy ranks (the probe's conflict and processor sharing bound the
///   same step: the larger governs, they are not multiplied); T(s)
///   stretched by the sharing without.
///
/// The penalties are bandwidth sharing: they stretch the time the bytes
/// take, not a message's fixed latency (a record measured with large flows
/// says nothing of what a few bytes' messages cost at once).
pub(super) fn exchange_step_k<N: Network + ?Sized>(
    net: &N,
    p: usize,
    bytes: u64,
    sh: Sharing,
    k: usize,
) -> Result<Option<f64>, LookupError> {
    let measured = net.exchange_ns(p, bytes);
    let f = contention(net, Scheme::Mixed, k, measured.is_some());
    if f.is_none() && k > 1 {
        return Ok(None);
    }
    let f = f.unwrap_or(1.0);
    Ok(Some(match measured {
        Some(x) => {
            let x1 = net.exchange_ns(p, 1).unwrap_or(x).min(x);
            x1 + (x - x1) * f
        }
        None => {
            let t = msg(net, bytes)?.t_ns;
            let pen = t + bytes_part_ns(net, bytes)? * (f - 1.0);
            pen.max(t * sh.factor(p))
        }
    }))
}

pub(super) fn ceil_log2(p: usize) -> u32 {
    usize::BITS - (p.max(1) - 1).leading_zeros()
}
