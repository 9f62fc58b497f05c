//! The costs of each message size a simulation uses, looked up once, and
//! the node's copy lanes.

use super::super::cost::{
    bytes_part_ns, contention, copy_lanes, in_working_set, msg, node_copy_lanes, send_overhead_ns,
    Msg, NODE_LANES_FROM_BYTES,
};
use super::super::Network;
use crate::ext::Scheme;
use crate::types::{LookupError, Params};

/// The costs of one message size, looked up once per simulation.
#[derive(Clone, Copy, Debug)]
pub(super) struct Cost {
    pub(super) t_ns: f64,
    pub(super) x_ns: f64,
    /// Whether `x_ns` is the measured all-ranks step (else T(s)).
    pub(super) x_measured: bool,
    /// The part of `x_ns` that moves the bytes (X(s) − X(1), or T(s) −
    /// T(1)): what the penalties stretch.
    pub(super) x_bytes_ns: f64,
    pub(super) gap_ns: f64,
    pub(super) o_s_ns: f64,
    /// Busy CPU of the two ends: the smallest message's send and receive
    /// overheads (a call's own work) and the bytes' one copy at the gap's
    /// per-byte rate G, split between sender and receiver. Not o_s(s) and
    /// o_r(s) of the message's range: a burst's time per message holds the
    /// waits of a sender whose receiver was not running, which is no work
    /// a shared core does.
    pub(super) cpu_send_ns: f64,
    pub(super) cpu_recv_ns: f64,
    pub(super) copy_ns: f64,
    /// The part of T(s) that moves the bytes (T(s) − T(1), the
    /// handshake left out): what holds a copy lane.
    pub(super) bytes_ns: f64,
    pub(super) eager: bool,
    /// Transfers of this size the node moves at once (None: no limit).
    pub(super) lanes: Option<usize>,
}

/// Cost lookups by size (a simulation uses a handful of sizes).
pub(super) struct Costs<'a, N: Network + ?Sized> {
    pub(super) net: &'a N,
    pub(super) p: usize,
    /// The bytes one rank's buffers of the call span
    /// ([`Schedule::working_set`]): every transfer's bytes move at least at
    /// the rate measured at this size (`cost::in_working_set`).
    pub(super) ws: u64,
    /// The node's copy lanes for large transfers, once looked up.
    pub(super) node_lanes: Option<Option<usize>>,
    pub(super) cache: Vec<(u64, Cost)>,
    /// The index in `cache` of the size last looked up: a schedule's ops
    /// mostly repeat one size.
    pub(super) last: usize,
    pub(super) lanes: Lanes,
    /// Lane time reserved, over the number of lanes (ns).
    pub(super) lane_ns: f64,
    /// Contention factors looked up: (scheme, k, relative, factor).
    pub(super) factors: Vec<(Scheme, usize, bool, Option<f64>)>,
}

impl<N: Network + ?Sized> Costs<'_, N> {
    /// `cost::contention`, looked up once per (scheme, k, relative).
    pub(super) fn factor(&mut self, scheme: Scheme, k: usize, relative: bool) -> Option<f64> {
        let key = (scheme, k, relative);
        if let Some(f) = self.factors.iter().find(|f| (f.0, f.1, f.2) == key) {
            return f.3;
        }
        let f = contention(self.net, scheme, k, relative);
        self.factors.push((scheme, k, relative, f));
        f
    }

    /// Transfers of `bytes` the node moves at once: the node's one count
    /// from [`NODE_LANES_FROM_BYTES`] (`cost::node_copy_lanes`), the
    /// count measured at the size below it.
    fn lanes(&mut self, bytes: u64) -> Result<Option<usize>, LookupError> {
        if bytes < NODE_LANES_FROM_BYTES {
            return copy_lanes(self.net, self.p, bytes);
        }
        if let Some(n) = self.node_lanes {
            return Ok(n);
        }
        let n = node_copy_lanes(self.net, self.p)?;
        self.node_lanes = Some(n);
        Ok(n)
    }

    /// The costs of a size by its index in the cache (from [`Costs::index`]).
    #[inline]
    pub(super) fn at(&self, i: u32) -> &Cost {
        &self.cache[i as usize].1
    }

    /// The costs of `bytes`.
    pub(super) fn get(&mut self, bytes: u64) -> Result<&Cost, LookupError> {
        let i = self.index(bytes)?;
        Ok(self.at(i))
    }

    /// The index of the costs of `bytes` in the cache, looked up (and
    /// computed) once per size.
    #[inline]
    pub(super) fn index(&mut self, bytes: u64) -> Result<u32, LookupError> {
        if self.cache.get(self.last).is_some_and(|(b, _)| *b == bytes) {
            return Ok(self.last as u32);
        }
        self.index_other(bytes)
    }

    /// [`Costs::index`] of a size other than the last one.
    fn index_other(&mut self, bytes: u64) -> Result<u32, LookupError> {
        if let Some(i) = self.cache.iter().position(|(b, _)| *b == bytes) {
            self.last = i;
            return Ok(i as u32);
        }
        let ws = self.ws;
        let m: Msg = msg(self.net, bytes)?;
        let p: Params = self.net.at(bytes)?;
        let o_s = send_overhead_ns(&p, bytes, m.t_ns);
        let small = self.net.at(1)?;
        // The fixed overheads of one message, each at most the one-byte
        // message's whole time (see `send_overhead_ns`).
        let one = msg(self.net, 1)?.t_ns;
        let (o_s1, o_r1) = (
            send_overhead_ns(&small, 1, one),
            small.o_r_ns.clamp(0.0, one.max(0.0)),
        );
        let copy = 0.5 * bytes as f64 * p.G_ns_per_byte.max(0.0);
        let eager = p.S_bytes == u64::MAX || bytes <= p.S_bytes;
        // The bytes' parts at this size and, in a larger working set, at
        // the rate measured at the working set's size.
        let own_bytes = bytes_part_ns(self.net, bytes)?;
        let bytes_ns = if ws > bytes {
            in_working_set(own_bytes, bytes_part_ns(self.net, ws)?, bytes, ws)
        } else {
            own_bytes
        };
        let t_ns = m.t_ns + (bytes_ns - own_bytes);
        let x = self.net.exchange_ns(self.p, bytes);
        let (x_ns, x_bytes_ns) = match (x, self.net.exchange_ns(self.p, 1)) {
            (Some(x), Some(x1)) => {
                let own = (x - x1).max(0.0);
                let wide = match self.net.exchange_ns(self.p, ws) {
                    Some(xw) if ws > bytes => in_working_set(own, (xw - x1).max(0.0), bytes, ws),
                    _ => own,
                };
                (x + (wide - own), wide)
            }
            (Some(x), None) => (x, 0.0),
            (None, _) => (t_ns, bytes_ns),
        };
        let c = Cost {
            t_ns,
            x_ns,
            x_measured: x.is_some(),
            x_bytes_ns,
            gap_ns: m.gap_ns,
            o_s_ns: o_s,
            cpu_send_ns: o_s1 + copy,
            cpu_recv_ns: o_r1 + copy,
            // A memory copy runs at about the per-byte gap of shared memory.
            copy_ns: bytes as f64 * p.G_ns_per_byte.max(0.0),
            bytes_ns,
            eager,
            lanes: self.lanes(bytes)?,
        };
        self.cache.push((bytes, c));
        self.last = self.cache.len() - 1;
        Ok(self.last as u32)
    }
}

/// The node's copy lanes: per lane, the intervals reserved by transfers,
/// in order and disjoint. A transfer takes the earliest interval, on any
/// lane, that starts no earlier than it is ready and overlaps no reserved
/// one.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    pub(super) busy: Vec<Vec<(f64, f64)>>,
}

impl Lanes {
    /// Reserves `dur_ns` from `ready` on one of `n` lanes; returns when the
    /// transfer starts.
    pub(super) fn reserve(&mut self, n: usize, ready: f64, dur_ns: f64) -> f64 {
        if self.busy.len() < n {
            self.busy.resize(n, Vec::new());
        }
        let mut best: Option<(usize, f64)> = None;
        for (i, lane) in self.busy[..n].iter().enumerate() {
            let mut t = ready;
            // Intervals that end by `ready` cannot be in the way.
            let first = lane.partition_point(|&(_, b)| b <= ready);
            for &(a, b) in &lane[first..] {
                if t + dur_ns <= a {
                    break;
                }
                t = t.max(b);
            }
            if best.map_or(true, |(_, bt)| t < bt) {
                best = Some((i, t));
            }
        }
        let (i, t) = best.unwrap_or((0, ready));
        let lane = &mut self.busy[i];
        let at = lane.partition_point(|&(a, _)| a < t);
        lane.insert(at, (t, t + dur_ns));
        t
    }
}
