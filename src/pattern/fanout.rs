//! The 1:P−P:1 pattern of the LogfP paper: one message to each of P peers,
//! then one answer from each. It measures the posting time o(P)·P and the
//! round trip RTT(P).

use std::time::Duration;

use crate::clock::Clock;
use crate::transport::{Meta, Transport, TransportError};

/// One completed 1:P−P:1 round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FanoutSample {
    /// Time to post the P messages (the CPU's send overheads), ns.
    pub post_ns: f64,
    /// Time from the first post until the last answer arrived, ns.
    pub rtt_ns: f64,
    /// Mean receive overhead per answer, as the transport measured it, ns.
    pub recv_ns: f64,
}

/// Send `size_bytes` to peers 0..`peers`, each asking for an answer, and wait
/// for all answers.
pub fn fanout<T: Transport, C: Clock>(
    transport: &mut T,
    clock: &C,
    peers: usize,
    size_bytes: usize,
    timeout: Duration,
) -> Result<FanoutSample, TransportError> {
    let meta = Meta {
        answer: true,
        report_ns: 0,
    };
    let start = clock.now();
    for peer in 0..peers {
        transport.send(peer, size_bytes, meta)?;
    }
    let posted = clock.now();
    let mut recv_ns = 0.0;
    for _ in 0..peers {
        recv_ns += transport.recv(None, timeout)?.overhead_ns;
    }
    let end = clock.now();
    Ok(FanoutSample {
        post_ns: clock.to_ns(posted.wrapping_sub(start)),
        rtt_ns: clock.to_ns(end.wrapping_sub(start)),
        recv_ns: recv_ns / peers.max(1) as f64,
    })
}
