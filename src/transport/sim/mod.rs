//! `sim`: a discrete-event LogGP / LogGPS / LogfP network in virtual time.
//!
//! The simulator is the ground-truth instrument for the estimators: it never
//! evaluates a closed-form PRTT formula. It keeps, per resource, the time at
//! which that resource is next free (the client CPU is the shared
//! [`VirtualClock`]; every server has a CPU; every node has a NIC; every
//! directed link is FIFO) and books each span of work on them.
//!
//! # Semantics (per message of `s` payload bytes)
//!
//! * Sending: the sender CPU is busy `o + s·O` posting it (LogfP: see below).
//!   Only then may the sender NIC inject it, and no earlier than
//!   `g + (s'−1)·G` after it began injecting the previous message `s'`
//!   (the gap is a property of the sending NIC, whatever the destination).
//!   The last byte arrives `L + (s−1)·G` after injection begins, never before
//!   an earlier message on the same directed link (FIFO).
//! * Receiving: once the message has fully arrived and the receiver CPU is
//!   free, the receiver CPU is busy `o + s·O`.
//! * LogfP (`f`): in a *run* of posts to distinct peers (a run ends when a
//!   post goes to a peer already in the run, or the client CPU does anything
//!   else: a receive, a spin, a rendezvous), the 2nd … f-th messages of the
//!   run are injected without waiting `g` after the previous one (they still
//!   wait for its bytes to leave, `(s'−1)·G`); the first message of a run and
//!   the (f+1)-th onwards pay `g`. Without `f` every message pays `g`.
//! * LogfP overhead (`omin`/`omax`, either given, a missing one counts as 0):
//!   the first post of a run costs `o_min + o_max`, each further post of the
//!   run `o_min`, so `P` posts cost `P·o_min + o_max`, i.e.
//!   `o(P) = o_min + o_max/P` per message. This replaces `o` for posts
//!   (sends, and the server's single-message answers and control messages,
//!   which are runs of one); receives still cost `o + s·O`.
//! * LogGPS (`S`): a message with `s > S` first exchanges a 0-byte request
//!   and a 0-byte answer (rendezvous). The sender posts the request, the
//!   receiver handles it (receive overhead) and posts the answer, the sender
//!   handles that, then posts the data as usual. Control messages obey the
//!   NIC gaps and the FIFO links. The client's `send` blocks for the whole
//!   handshake. A server answer with `s > S` sends its request eagerly; the
//!   client handles it (and the rest of the handshake happens) inside the
//!   client's `recv`, the way a posted receive drives a rendezvous.
//! * Jitter: every span booked on a time line (each `o`, each `s·O`, each
//!   `g`, each `(s−1)·G`, each `L`) is stretched by `1 + X`, `X` drawn from a
//!   Lomax (Pareto II) law with shape 3 and scale `2·jitter`, so `E[X] =
//!   jitter`, the median is about half the mean and the tail is polynomial.
//!   The client's own `Clock::spin` is never stretched. `jitter = 0` is exact.
//!
//! # Servers
//!
//! Every peer is a mirror server embedded in the simulator: it receives each
//! message, and answers a message whose `Meta::answer` is set with one message
//! of the same size (a reverse burst: as many as `Meta::answers` says, posted
//! back to back, the report on the last). The answer's `Meta::report_ns` is the mean simulated
//! receive busy time of the data messages it received since its previous
//! answer, in ns (rounded). Server work is evaluated eagerly when the client
//! sends (a server only reacts to the client's messages, which reach it in
//! order), except the rendezvous of an answer, which is evaluated when the
//! client receives it. Resources stay serialised in every case; should a
//! pattern send more messages to a server before receiving that server's
//! rendezvous answer, the late handshake is booked after the server's later
//! work (serialised, though not strictly in time order). The PRTT and
//! fan-out patterns never do that.
//!
//! Not modelled: a receive-side gap or bandwidth sharing on the client's
//! incoming link (answers from many servers only contend for the client CPU).
//!
//! # Counters
//!
//! [`Transport::counters`](crate::transport::Transport::counters) counts
//! the client endpoint's data messages (payload bytes and messages sent and
//! received); the 0-byte rendezvous control messages are not counted.
//! [`SimTransport::server_counters`] gives the same for all servers together
//! (received = the client's messages, sent = the answers).
//!
//! # Layout
//!
//! - `params`: [`SimParams`], parsed from and displayed as the `--model`
//!   string;
//! - `jitter`: the seeded Lomax stretch of every booked span;
//! - this module: the resources (NICs, FIFO links, embedded servers,
//!   messages in flight, the client's LogfP run) and [`SimTransport`];
//! - `events`: booking work on those resources (posts, receives,
//!   injections, the servers' answers and rendezvous handshakes);
//! - `client`: the [`Transport`](crate::transport::Transport)
//!   implementation of the client endpoint.

mod client;
mod events;
mod jitter;
mod open;
mod params;

pub use params::{SimParamError, SimParams};

use crate::clock::VirtualClock;
use crate::transport::{Counters, Meta, PeerId};
use jitter::Stretch;

/// Largest message the simulator accepts.
pub const SIM_MAX_MSG_BYTES: usize = 1 << 30;

/// A node's NIC: when it last began injecting, and how long that message's
/// bytes took to leave.
#[derive(Clone, Copy, Debug, Default)]
struct Nic {
    busy: bool,
    last_inject_ps: u64,
    last_wire_ps: u64,
}

/// A directed link: FIFO, an arrival is never earlier than the previous one.
#[derive(Clone, Copy, Debug, Default)]
struct Link {
    last_arrival_ps: u64,
}

/// An embedded mirror server.
#[derive(Clone, Copy, Debug, Default)]
struct Server {
    cpu_free_ps: u64,
    nic: Nic,
    /// Client → server.
    up: Link,
    /// Server → client.
    down: Link,
    /// Receive busy time of the data messages since the previous answer.
    burst_recv_ps: u64,
    burst_messages: u64,
}

/// A message on its way to (or waiting at) the client.
#[derive(Clone, Copy, Debug)]
struct Inbound {
    /// Order of creation, to break ties between equal arrival times.
    seq: u64,
    /// When it has fully arrived at the client.
    arrival_ps: u64,
    peer: PeerId,
    bytes: usize,
    meta: Meta,
    /// A rendezvous request preceding an answer of `bytes` bytes (the
    /// arrival is the request's); false: the data itself.
    rendezvous: bool,
}

/// The client's current LogfP run of posts to distinct peers.
#[derive(Clone, Debug, Default)]
struct Run {
    open: bool,
    generation: u64,
    posts: u32,
    /// When the run's last post finished (the run ends if the client CPU has
    /// done anything since).
    last_end_ps: u64,
    /// `member[peer] == generation`: that peer already is in the run.
    member: Vec<u64>,
}

/// The simulated network seen from the client endpoint; the peers are
/// embedded mirror servers.
#[derive(Debug)]
pub struct SimTransport {
    params: SimParams,
    clock: VirtualClock,
    stretch: Stretch,
    servers: Vec<Server>,
    client_nic: Nic,
    run: Run,
    inbound: Vec<Inbound>,
    next_seq: u64,
    counters: Counters,
    server_counters: Counters,
}

impl SimTransport {
    /// A network of the client and `peers` mirror servers, on `clock` (the
    /// client CPU's time line).
    pub fn new(params: SimParams, clock: VirtualClock, peers: usize) -> Self {
        Self {
            stretch: Stretch::new(params.jitter, params.seed),
            params,
            clock,
            servers: vec![Server::default(); peers],
            client_nic: Nic::default(),
            run: Run {
                member: vec![0; peers],
                ..Run::default()
            },
            inbound: Vec::with_capacity(peers.max(1) * 2),
            next_seq: 0,
            counters: Counters::default(),
            server_counters: Counters::default(),
        }
    }

    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// The client's time line.
    pub fn clock(&self) -> &VirtualClock {
        &self.clock
    }

    /// Data messages the servers received (the client's) and sent (answers).
    pub fn server_counters(&self) -> Counters {
        self.server_counters
    }
}

/// A simulator of `model` (the `SimParams` syntax) with `peers` peers and
/// its clock, for tests.
#[cfg(test)]
pub(crate) fn sim(model: &str, peers: usize) -> (SimTransport, VirtualClock) {
    let clock = VirtualClock::new();
    let params: SimParams = model.parse().expect("test model parses");
    (SimTransport::new(params, clock.clone(), peers), clock)
}

#[cfg(test)]
mod tests;
