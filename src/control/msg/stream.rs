//! The operator's streaming measurements (`ngctl ebb`): the order to
//! stream to a partner over a window, its result, and the effective
//! bisection bandwidth handed to a node to publish.

use serde::{Deserialize, Serialize};

use super::name_ok;
use crate::transport::Kind;

/// See [`Msg::StreamOrder`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamOrder {
    /// Names the order; repeated in its result.
    pub nonce: u64,
    /// The node to stream to (a configured peer of the receiver).
    pub partner: String,
    pub transport: Kind,
    pub size_bytes: u64,
    /// Messages per burst (the PRTT method's n).
    pub burst: u32,
    /// Start and length of the window, CLOCK_REALTIME ns (the nodes' clocks
    /// must agree to a small share of the window).
    pub start_unix_ns: u64,
    pub duration_ns: u64,
    /// The stream ends earlier once it has moved this many payload bytes
    /// (what the partner consents to carry).
    pub max_bytes: u64,
    /// The partner streams back at the same time.
    pub bidirectional: bool,
}

/// See [`Msg::StreamResult`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub nonce: u64,
    /// Payload bandwidth towards the partner and back (NaN when not
    /// streamed or not measured), bytes per second.
    pub out_bytes_per_s: f64,
    pub in_bytes_per_s: f64,
    /// Burst rounds measured in the window.
    pub rounds: u32,
    /// Payload bytes moved (sent and received).
    pub bytes: u64,
    /// Why there is no result.
    pub error: Option<String>,
}

/// See [`Msg::Bisection`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BisectionReport {
    pub transport: Kind,
    /// As the segment's transport record holds it.
    pub result: netgauge::Bisection,
}

/// Longest stream window an order may ask for.
pub const MAX_STREAM_NS: u64 = 60_000_000_000;
/// Largest message of a stream order.
pub const MAX_STREAM_MSG_BYTES: u64 = 64 << 20;

impl StreamOrder {
    pub(super) fn check(&self) -> Result<(), &'static str> {
        if !name_ok(&self.partner) {
            return Err("stream_order: bad partner name");
        }
        if self.duration_ns == 0 || self.duration_ns > MAX_STREAM_NS {
            return Err("stream_order: window empty or longer than 60 s");
        }
        if !(1..=MAX_STREAM_MSG_BYTES).contains(&self.size_bytes) {
            return Err("stream_order: message size out of range");
        }
        if !(2..=crate::transport::Meta::MAX_ANSWERS).contains(&self.burst) {
            return Err("stream_order: burst out of range");
        }
        if self.max_bytes < self.size_bytes {
            return Err("stream_order: byte limit below one message");
        }
        Ok(())
    }
}

impl BisectionReport {
    pub(super) fn check(&self) -> Result<(), &'static str> {
        let b = &self.result;
        let v = [
            b.min_bytes_per_s,
            b.median_bytes_per_s,
            b.mean_bytes_per_s,
            b.max_bytes_per_s,
        ];
        if v.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err("bisection: bandwidth not a finite non-negative number");
        }
        if !(v[0] <= v[1] && v[1] <= v[3] && v[0] <= v[2] && v[2] <= v[3]) {
            return Err("bisection: min, median, mean, max out of order");
        }
        if b.nodes < 2 || b.rounds == 0 {
            return Err("bisection: fewer than 2 nodes or no round");
        }
        Ok(())
    }
}
