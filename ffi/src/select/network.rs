//! The network a selection prices: LogGP(S) parameters as a function of the
//! message size, the all-ranks exchange step when it was measured, and the
//! transport's contention penalties when they were published.

use crate::ext::{Scheme, TransportExt, TransportField};
use crate::layout::TRANSPORT_MAX_BYTES;
use crate::types::{LookupError, Params};
use crate::Reader;

/// Parameters as a function of the message size.
pub trait Network {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError>;

    /// The measured time of one step in which all `ranks` ranks exchange
    /// `msg_bytes` with a partner at once (the MPI probe's exchange sweep,
    /// published as the entry [`exchange_transport`] names), if there is
    /// one for this many ranks. Without it the selector stretches the pair's
    /// T(s) by the sharing of P busy ranks ([`Sharing`]).
    fn exchange_ns(&self, _ranks: usize, _msg_bytes: u64) -> Option<f64> {
        None
    }

    /// The published bandwidth-sharing penalty T_shared / T_ref of `k`
    /// concurrent flows of `scheme` on this transport ([`penalty_of`]), or
    /// None without a contention record (then the selector prices as if
    /// there were no record: see `cost::contention`).
    fn penalty(&self, _scheme: Scheme, _k: usize) -> Option<f64> {
        None
    }
}

/// The penalty of `k` flows of `scheme` in a transport's record: the
/// measured one when k was measured; beyond the largest measured k_max,
/// pen(k_max)·k/k_max (fair sharing of what k_max flows got, the linear
/// growth of Vienne et al.'s model). None when the scheme has no
/// penalties, when its status says they are not identified (a reason other
/// than "not assessed"), or when a value needed is not a positive finite
/// number. No allocation.
pub fn penalty_of(t: &TransportExt, scheme: Scheme, k: usize) -> Option<f64> {
    if k == 0
        || t.status(TransportField::penalty(scheme))
            .is_not_identified()
    {
        return None;
    }
    let row = t.penalties(scheme);
    let usable = |v: f64| (v.is_finite() && v > 0.0).then_some(v);
    match row.get(k - 1) {
        Some(e) => usable(e.value),
        None => {
            let last = usable(row.last()?.value)?;
            Some(last * k as f64 / row.len() as f64)
        }
    }
}

/// The transport name of the exchange entry of `ranks` ranks measured over
/// `transport`: "mpi" and 4 ranks give "mpi-x4". Written into `buf` (no
/// allocation: reader lookups use it); None if it would not fit a
/// transport name.
pub fn exchange_transport<'b>(
    transport: &str,
    ranks: usize,
    buf: &'b mut [u8; TRANSPORT_MAX_BYTES],
) -> Option<&'b str> {
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut r = ranks;
    loop {
        digits[n] = b'0' + (r % 10) as u8;
        n += 1;
        r /= 10;
        if r == 0 {
            break;
        }
    }
    let len = transport.len() + 2 + n;
    if len > buf.len() {
        return None;
    }
    buf[..transport.len()].copy_from_slice(transport.as_bytes());
    buf[transport.len()..transport.len() + 2].copy_from_slice(b"-x");
    for i in 0..n {
        buf[transport.len() + 2 + i] = digits[n - 1 - i];
    }
    std::str::from_utf8(&buf[..len]).ok()
}

/// The exchange step at `bytes`: its range's line g + (s − 1)·G (see
/// `model::exchange` of the daemon crate), lowered where the range starts
/// more than a rendezvous above the range below it (that range's line, so
/// lowered, at the threshold), each range keeping its own slope. And at
/// most the least such value at the start of any range above: an exchange
/// of more bytes takes no less time than one of fewer, so a range lifted
/// above the ones after it was measured disturbed. (A range is fitted on
/// few sizes, and one step disturbed by another job can lift it several
/// times over its neighbours.) `ranges` in increasing order of their first
/// size.
///
/// A rendezvous at a threshold costs at most the step below twice plus a
/// handshake: the first fragment goes as an eager message of the size
/// below, the rest after a round trip (an eager limit of 4 KiB that a
/// 4096-byte payload and its header no longer fit doubles the measured
/// step there, bench/mpi.md). The handshake is a round trip between two
/// ranks while every rank does the same: the larger of
/// `pair_handshake_ns` (twice the pair's EEL) and twice the exchange's own
/// step at its smallest size, which carries the sharing of the cores and
/// the link that the pair's EEL does not.
fn exchange_envelope<'a>(
    ranges: impl Iterator<Item = &'a Params>,
    bytes: u64,
    pair_handshake_ns: f64,
) -> Option<f64> {
    let at = bytes.max(1);
    // The previous range and how far its line is lowered.
    let mut prev: Option<(&Params, f64)> = None;
    let mut handshake_ns = pair_handshake_ns.max(0.0);
    let mut here: Option<f64> = None;
    let mut above = f64::INFINITY;
    for p in ranges {
        let start = p.range_from_bytes;
        let drop = match prev {
            None => {
                let smallest = p.gap_ns(start.max(1));
                if smallest.is_finite() {
                    handshake_ns = handshake_ns.max(2.0 * smallest);
                }
                0.0
            }
            Some((q, q_drop)) => {
                let below = q.gap_ns(start) - q_drop;
                let cap = 2.0 * below.max(0.0) + handshake_ns;
                (p.gap_ns(start) - cap).max(0.0)
            }
        };
        if start <= at {
            here = Some((p.gap_ns(at) - drop).max(0.0));
        } else {
            above = above.min((p.gap_ns(start) - drop).max(0.0));
        }
        prev = Some((p, drop));
    }
    here.map(|v| v.min(above))
}

impl Network for Params {
    fn at(&self, _msg_bytes: u64) -> Result<Params, LookupError> {
        Ok(*self)
    }
}

/// One [`Params`] per protocol range (as lookups of sizes in each range
/// return them); the range containing the size is used, the nearest one
/// outside all ranges.
impl Network for [Params] {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        let first = self.first().ok_or(LookupError::NotFound)?;
        let mut best = *first;
        for p in self {
            if msg_bytes >= p.range_from_bytes && msg_bytes <= p.range_to_bytes {
                return Ok(*p);
            }
            if msg_bytes > p.range_to_bytes {
                best = *p;
            }
        }
        Ok(best)
    }
}

/// Live lookups of one (peer, transport) entry of a segment.
#[derive(Clone, Copy, Debug)]
pub struct ReaderNetwork<'a> {
    pub reader: &'a Reader,
    pub peer: &'a str,
    pub transport: &'a str,
}

impl Network for ReaderNetwork<'_> {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        self.reader.lookup(self.peer, self.transport, msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        let mut buf = [0u8; TRANSPORT_MAX_BYTES];
        let name = exchange_transport(self.transport, ranks, &mut buf)?;
        // The ranges at and below msg_bytes, each found by a lookup just
        // below the previous one's start, then those above, each found by
        // a lookup just above the previous one's end (at most the entry's
        // ranges either way).
        const N: usize = crate::layout::MAX_RANGES;
        let mut down = [Params::default(); N];
        let mut n = 0;
        let mut at = msg_bytes;
        while n < N {
            let Ok(p) = self.reader.lookup(self.peer, name, at) else {
                break;
            };
            down[n] = p;
            n += 1;
            if p.range_from_bytes <= 1 || p.range_from_bytes > at {
                break;
            }
            at = p.range_from_bytes - 1;
        }
        let mut up = [Params::default(); N];
        let mut k = 0;
        let mut end = if n > 0 {
            down[0].range_to_bytes
        } else {
            u64::MAX
        };
        while k < N && end < u64::MAX {
            let Ok(p) = self.reader.lookup(self.peer, name, end + 1) else {
                break;
            };
            if p.range_from_bytes <= end {
                break;
            }
            up[k] = p;
            k += 1;
            end = p.range_to_bytes;
        }
        let handshake = self.at(msg_bytes).map_or(0.0, |p| 2.0 * p.eel_ns);
        // Found from the top down, then upwards; the envelope walks up.
        exchange_envelope(down[..n].iter().rev().chain(&up[..k]), msg_bytes, handshake)
    }

    fn penalty(&self, scheme: Scheme, k: usize) -> Option<f64> {
        // The record is a fixed-size copy out of the segment (no
        // allocation); NotFound on a segment without one.
        let t = self.reader.transport_ext(self.transport).ok()?;
        penalty_of(&t, scheme, k)
    }
}

/// A pair's ranges, the exchange ranges measured with `exchange_ranks`
/// ranks and the transport's contention record (a snapshot of the entries
/// and the record, as `ngctl predict` reads them).
#[derive(Clone, Copy, Debug)]
pub struct Measured<'a> {
    pub pair: &'a [Params],
    pub exchange: &'a [Params],
    pub exchange_ranks: usize,
    /// The transport's contention record, if the segment has one.
    pub contention: Option<&'a TransportExt>,
}

impl Network for Measured<'_> {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        self.pair.at(msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        if ranks != self.exchange_ranks || self.exchange.is_empty() {
            return None;
        }
        let handshake = self.pair.at(msg_bytes).map_or(0.0, |p| 2.0 * p.eel_ns);
        exchange_envelope(self.exchange.iter(), msg_bytes, handshake)
    }

    fn penalty(&self, scheme: Scheme, k: usize) -> Option<f64> {
        penalty_of(self.contention?, scheme, k)
    }
}

/// A network with its contention penalties hidden: what the selector
/// predicts without the record (`ngctl predict` shows both).
#[derive(Clone, Copy, Debug)]
pub struct NoContention<'a, N: Network + ?Sized>(pub &'a N);

impl<N: Network + ?Sized> Network for NoContention<'_, N> {
    fn at(&self, msg_bytes: u64) -> Result<Params, LookupError> {
        self.0.at(msg_bytes)
    }

    fn exchange_ns(&self, ranks: usize, msg_bytes: u64) -> Option<f64> {
        self.0.exchange_ns(ranks, msg_bytes)
    }
}
