//! What the two verbs transports (`rdma_write`, `verbs_msg`) share: their
//! options, how they are read from a [`LinkSpec`], how long a wait spins
//! before it yields, and the order of a session's set-up over a
//! [`Rendezvous`]. Not a transport of its own.

use std::time::Duration;

use super::open::{LinkSpec, OpenError, QpEndpoint, Rendezvous};
use crate::clock::HostClock;
use crate::verbs::{exchange, LinkOptions, VerbsError};

/// Settings of an RDMA transport session (also used by `verbs_msg`).
#[derive(Clone, Debug)]
pub struct VerbsOptions {
    pub link: LinkOptions,
    /// Largest message.
    pub max_msg_bytes: usize,
    /// Try huge pages for the buffers.
    pub huge_pages: bool,
    /// Deadline of each step of the endpoint exchange.
    pub exchange_timeout: Duration,
    /// How long `send` may wait for its local completion.
    pub send_timeout: Duration,
    pub clock: HostClock,
}

impl VerbsOptions {
    pub fn new(device: &str) -> VerbsOptions {
        VerbsOptions {
            link: LinkOptions::new(device),
            max_msg_bytes: 1 << 20,
            huge_pages: false,
            exchange_timeout: exchange::DEFAULT_TIMEOUT,
            send_timeout: Duration::from_secs(5),
            clock: HostClock::default(),
        }
    }
}

/// A wait longer than this yields the CPU at each clock checkpoint
/// ([`SpinDeadline::yielding_after`]).
pub const YIELD_AFTER: Duration = Duration::from_micros(100);

/// The options of `spec` (its device, `options.verbs`, the largest
/// message and the clock). Software devices (rxe, siw) default to no
/// inline data: their inline path is a copy in the kernel, and perftest
/// turns it off there too.
pub fn options(spec: &LinkSpec) -> Result<VerbsOptions, OpenError> {
    let device = spec.device()?;
    let v = &spec.options.verbs;
    let mut o = VerbsOptions::new(device);
    o.link.port = v.port;
    o.link.gid_index = v.gid_index;
    let software = device.starts_with("rxe") || device.starts_with("siw");
    o.link.max_inline_bytes =
        v.inline_max_bytes
            .unwrap_or(if software { 0 } else { o.link.max_inline_bytes });
    if let Some(m) = spec.options.max_msg_bytes {
        o.max_msg_bytes = m;
    }
    if let Some(t) = v.exchange_timeout {
        o.exchange_timeout = t;
    }
    if let Some(t) = v.send_timeout {
        o.send_timeout = t;
    }
    o.clock = spec.options.clock;
    Ok(o)
}

/// The driver's set-up: send our endpoint, connect to the peer's, confirm.
pub fn drive<T>(
    mine: QpEndpoint,
    rdv: &mut dyn Rendezvous,
    connect: impl FnOnce(QpEndpoint) -> Result<T, VerbsError>,
) -> Result<T, OpenError> {
    let theirs = rdv.exchange(&mine)?;
    let t = connect(theirs)?;
    rdv.ready()?;
    Ok(t)
}

/// The responder's set-up, once it has the peer's endpoint: connect (ready
/// to receive), then answer with our endpoint, confirm.
pub fn answer<T>(
    mine: QpEndpoint,
    peer: QpEndpoint,
    rdv: &mut dyn Rendezvous,
    connect: impl FnOnce(QpEndpoint) -> Result<T, VerbsError>,
) -> Result<T, OpenError> {
    let t = connect(peer)?;
    rdv.answer(&mine)?;
    rdv.ready()?;
    Ok(t)
}
