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
//! of the same size. The answer's `Meta::report_ns` is the mean simulated
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
//! [`Transport::counters`] counts the client endpoint's data messages
//! (payload bytes and messages sent and received); the 0-byte rendezvous
//! control messages are not counted. [`SimTransport::server_counters`] gives
//! the same for all servers together (received = the client's messages,
//! sent = the answers).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::clock::{Clock, VirtualClock};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

/// Largest message the simulator accepts.
pub const SIM_MAX_MSG_BYTES: usize = 1 << 30;

/// Shape α of the Lomax law of the jitter stretch.
const LOMAX_SHAPE: f64 = 3.0;

/// Parameters of the simulated network. Times in ns, `G` and `O` in ns per
/// byte, `S` in bytes.
///
/// Parsed from and displayed as `L=1100,o=300,g=450,G=0.08,S=16384,f=6,
/// omin=150,omax=900,O=0.01,jitter=0.02,seed=7` (every key optional).
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimParams {
    /// Latency: injection start to arrival of the last byte, minus `(s−1)·G`.
    pub L_ns: f64,
    /// CPU overhead per message (send and receive).
    pub o_ns: f64,
    /// Gap between successive injections of one NIC.
    pub g_ns: f64,
    /// Gap per byte (inverse bandwidth).
    pub G_ns_per_byte: f64,
    /// LogGPS rendezvous threshold: messages larger than this use a handshake.
    pub S_bytes: Option<u64>,
    /// LogfP: messages to distinct peers injected without paying `g`.
    pub f: Option<u32>,
    /// LogfP: `o(P) = o_min + o_max/P` for posts.
    pub o_min_ns: Option<f64>,
    pub o_max_ns: Option<f64>,
    /// LogGPS: CPU overhead per byte (send and receive).
    pub O_ns_per_byte: f64,
    /// Mean relative stretch of every span (0.02 = 2 %); 0 = deterministic.
    pub jitter: f64,
    /// Seed of the jitter generator.
    pub seed: u64,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            L_ns: 0.0,
            o_ns: 0.0,
            g_ns: 0.0,
            G_ns_per_byte: 0.0,
            S_bytes: None,
            f: None,
            o_min_ns: None,
            o_max_ns: None,
            O_ns_per_byte: 0.0,
            jitter: 0.0,
            seed: 1,
        }
    }
}

/// Why a `--model` string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimParamError {
    #[error("unknown sim parameter `{0}` (known: L, o, g, G, S, f, omin, omax, O, jitter, seed)")]
    UnknownKey(String),
    #[error("sim parameter `{0}` has no value (expected key=value)")]
    MissingValue(String),
    #[error("sim parameter `{key}` given twice")]
    Duplicate { key: String },
    #[error("sim parameter `{key}`: bad value `{value}`: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: &'static str,
    },
}

fn parse_nonneg_f64(key: &str, value: &str) -> Result<f64, SimParamError> {
    let bad = |reason| SimParamError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let v: f64 = value.parse().map_err(|_| bad("not a number"))?;
    if !v.is_finite() {
        return Err(bad("must be finite"));
    }
    if v < 0.0 {
        return Err(bad("must not be negative"));
    }
    Ok(v)
}

fn parse_int<T: FromStr>(key: &str, value: &str) -> Result<T, SimParamError> {
    value.parse().map_err(|_| SimParamError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: "not a non-negative integer",
    })
}

impl FromStr for SimParams {
    type Err = SimParamError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const KEYS: [&str; 11] = [
            "L", "o", "g", "G", "S", "f", "omin", "omax", "O", "jitter", "seed",
        ];
        let mut p = SimParams::default();
        let mut seen = [false; KEYS.len()];
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let Some((key, value)) = part.split_once('=') else {
                return Err(SimParamError::MissingValue(part.to_string()));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(index) = KEYS.iter().position(|k| *k == key) else {
                return Err(SimParamError::UnknownKey(key.to_string()));
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(SimParamError::Duplicate {
                    key: key.to_string(),
                });
            }
            match key {
                "L" => p.L_ns = parse_nonneg_f64(key, value)?,
                "o" => p.o_ns = parse_nonneg_f64(key, value)?,
                "g" => p.g_ns = parse_nonneg_f64(key, value)?,
                "G" => p.G_ns_per_byte = parse_nonneg_f64(key, value)?,
                "O" => p.O_ns_per_byte = parse_nonneg_f64(key, value)?,
                "omin" => p.o_min_ns = Some(parse_nonneg_f64(key, value)?),
                "omax" => p.o_max_ns = Some(parse_nonneg_f64(key, value)?),
                "jitter" => p.jitter = parse_nonneg_f64(key, value)?,
                "S" => p.S_bytes = Some(parse_int(key, value)?),
                "f" => {
                    let f: u32 = parse_int(key, value)?;
                    if f == 0 {
                        return Err(SimParamError::BadValue {
                            key: key.to_string(),
                            value: value.to_string(),
                            reason: "must be at least 1",
                        });
                    }
                    p.f = Some(f);
                }
                "seed" => p.seed = parse_int(key, value)?,
                _ => unreachable!("every key of KEYS is matched"),
            }
        }
        Ok(p)
    }
}

impl fmt::Display for SimParams {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            out,
            "L={},o={},g={},G={}",
            self.L_ns, self.o_ns, self.g_ns, self.G_ns_per_byte
        )?;
        if let Some(s) = self.S_bytes {
            write!(out, ",S={s}")?;
        }
        if let Some(f) = self.f {
            write!(out, ",f={f}")?;
        }
        if let Some(v) = self.o_min_ns {
            write!(out, ",omin={v}")?;
        }
        if let Some(v) = self.o_max_ns {
            write!(out, ",omax={v}")?;
        }
        write!(
            out,
            ",O={},jitter={},seed={}",
            self.O_ns_per_byte, self.jitter, self.seed
        )
    }
}

/// Seeded stretch of spans: `1 + X`, `X ~ Lomax(shape 3, scale 2·jitter)`.
#[derive(Debug)]
struct Stretch {
    rng: Pcg64Mcg,
    /// Lomax scale λ; `E[X] = λ/(α−1)`. Zero: no jitter.
    scale: f64,
}

impl Stretch {
    fn new(jitter: f64, seed: u64) -> Self {
        let scale = if jitter.is_finite() && jitter > 0.0 {
            jitter * (LOMAX_SHAPE - 1.0)
        } else {
            0.0
        };
        Self {
            rng: Pcg64Mcg::seed_from_u64(seed),
            scale,
        }
    }

    /// One draw of `X ≥ 0`.
    fn draw(&mut self) -> f64 {
        // Inverse CDF of the Lomax law; u in (0, 1].
        let u = 1.0 - self.rng.gen::<f64>();
        self.scale * (u.powf(-1.0 / LOMAX_SHAPE) - 1.0)
    }

    /// A span of `ns` nanoseconds, stretched, in picoseconds.
    fn span_ps(&mut self, ns: f64) -> u64 {
        // `max` also maps NaN to 0.
        let ps = ns.max(0.0) * VirtualClock::PS_PER_NS;
        if ps == 0.0 {
            return 0;
        }
        let ps = if self.scale > 0.0 {
            ps * (1.0 + self.draw())
        } else {
            ps
        };
        // Float-to-int casts saturate.
        ps.round() as u64
    }
}

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

    fn rendezvous(&self, bytes: usize) -> bool {
        self.params.S_bytes.is_some_and(|s| bytes as u64 > s)
    }

    fn logfp_overhead(&self) -> bool {
        self.params.o_min_ns.is_some() || self.params.o_max_ns.is_some()
    }

    /// CPU busy time of posting `bytes`, the `index`-th post (1-based) of a
    /// run.
    fn post_ps(&mut self, bytes: usize, index: u32) -> u64 {
        let fixed = if self.logfp_overhead() {
            let o_min = self.params.o_min_ns.unwrap_or(0.0);
            if index <= 1 {
                o_min + self.params.o_max_ns.unwrap_or(0.0)
            } else {
                o_min
            }
        } else {
            self.params.o_ns
        };
        let per_byte = bytes as f64 * self.params.O_ns_per_byte;
        self.stretch
            .span_ps(fixed)
            .saturating_add(self.stretch.span_ps(per_byte))
    }

    /// CPU busy time of receiving `bytes`.
    fn recv_ps(&mut self, bytes: usize) -> u64 {
        let per_byte = bytes as f64 * self.params.O_ns_per_byte;
        self.stretch
            .span_ps(self.params.o_ns)
            .saturating_add(self.stretch.span_ps(per_byte))
    }

    /// Inject `bytes` on `nic` once the post finished at `ready_ps`; returns
    /// when the last byte arrives at the far end of `link`.
    fn transmit(
        stretch: &mut Stretch,
        params: &SimParams,
        nic: &mut Nic,
        link: &mut Link,
        ready_ps: u64,
        bytes: usize,
        pays_gap: bool,
    ) -> u64 {
        let wire_ps = stretch.span_ps(bytes.saturating_sub(1) as f64 * params.G_ns_per_byte);
        let allowed_ps = if nic.busy {
            let gap_ps = if pays_gap {
                stretch.span_ps(params.g_ns)
            } else {
                0
            };
            nic.last_inject_ps
                .saturating_add(nic.last_wire_ps)
                .saturating_add(gap_ps)
        } else {
            0
        };
        let inject_ps = ready_ps.max(allowed_ps);
        *nic = Nic {
            busy: true,
            last_inject_ps: inject_ps,
            last_wire_ps: wire_ps,
        };
        let arrival_ps = inject_ps
            .saturating_add(wire_ps)
            .saturating_add(stretch.span_ps(params.L_ns))
            .max(link.last_arrival_ps);
        link.last_arrival_ps = arrival_ps;
        arrival_ps
    }

    /// Client → server `peer`: inject after `ready_ps`; returns the arrival.
    fn client_transmit(
        &mut self,
        peer: PeerId,
        ready_ps: u64,
        bytes: usize,
        pays_gap: bool,
    ) -> u64 {
        Self::transmit(
            &mut self.stretch,
            &self.params,
            &mut self.client_nic,
            &mut self.servers[peer].up,
            ready_ps,
            bytes,
            pays_gap,
        )
    }

    /// Server `peer` → client: inject after `ready_ps`; returns the arrival.
    fn server_transmit(&mut self, peer: PeerId, ready_ps: u64, bytes: usize) -> u64 {
        let server = &mut self.servers[peer];
        Self::transmit(
            &mut self.stretch,
            &self.params,
            &mut server.nic,
            &mut server.down,
            ready_ps,
            bytes,
            true,
        )
    }

    /// Server `peer` handles a 0-byte control message that arrived at
    /// `arrival_ps` and posts the 0-byte reply; returns the reply's arrival
    /// at the client.
    fn server_control_reply(&mut self, peer: PeerId, arrival_ps: u64) -> u64 {
        let recv_ps = self.recv_ps(0);
        let post_ps = self.post_ps(0, 1);
        let server = &mut self.servers[peer];
        let posted_ps = arrival_ps
            .max(server.cpu_free_ps)
            .saturating_add(recv_ps)
            .saturating_add(post_ps);
        server.cpu_free_ps = posted_ps;
        self.server_transmit(peer, posted_ps, 0)
    }

    /// Server `peer` receives a data message arriving at `arrival_ps` and,
    /// if asked, answers it.
    fn server_receive(&mut self, peer: PeerId, arrival_ps: u64, bytes: usize, meta: Meta) {
        let recv_ps = self.recv_ps(bytes);
        let server = &mut self.servers[peer];
        server.cpu_free_ps = arrival_ps.max(server.cpu_free_ps).saturating_add(recv_ps);
        server.burst_recv_ps = server.burst_recv_ps.saturating_add(recv_ps);
        server.burst_messages += 1;
        self.server_counters.recv_bytes += bytes as u64;
        self.server_counters.recv_messages += 1;
        if !meta.answer {
            return;
        }
        let mean_ps = server.burst_recv_ps as f64 / server.burst_messages as f64;
        let report_ns = (mean_ps / VirtualClock::PS_PER_NS)
            .round()
            .min(u32::MAX as f64) as u32;
        server.burst_recv_ps = 0;
        server.burst_messages = 0;
        let rendezvous = self.rendezvous(bytes);
        // The request of a rendezvous, or the data itself.
        let post_bytes = if rendezvous { 0 } else { bytes };
        let post_ps = self.post_ps(post_bytes, 1);
        let posted_ps = self.servers[peer].cpu_free_ps.saturating_add(post_ps);
        self.servers[peer].cpu_free_ps = posted_ps;
        let arrival_ps = self.server_transmit(peer, posted_ps, post_bytes);
        self.server_counters.sent_bytes += bytes as u64;
        self.server_counters.sent_messages += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.inbound.push(Inbound {
            seq,
            arrival_ps,
            peer,
            bytes,
            meta: Meta {
                answer: false,
                report_ns,
            },
            rendezvous,
        });
    }

    /// Move the client clock forward to `ps` (never backwards).
    fn advance_to_ps(&self, ps: u64) {
        let now = self.clock.now();
        if ps > now {
            self.clock.spin(ps - now);
        }
    }

    /// The pending message to receive next: the earliest arrival from
    /// `from` (or anyone).
    fn next_inbound(&self, from: Option<PeerId>) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, m) in self.inbound.iter().enumerate() {
            if from.is_some_and(|p| p != m.peer) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) => {
                    let b = &self.inbound[b];
                    (m.arrival_ps, m.seq) < (b.arrival_ps, b.seq)
                }
            };
            if better {
                best = Some(i);
            }
        }
        best
    }
}

fn duration_ps(d: Duration) -> u64 {
    d.as_nanos().saturating_mul(1000).min(u64::MAX as u128) as u64
}

impl Transport for SimTransport {
    fn caps(&self) -> Caps {
        Caps {
            max_msg_bytes: SIM_MAX_MSG_BYTES,
            one_sided: false,
            has_recv_overhead: true,
            peers: self.servers.len(),
        }
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        if peer >= self.servers.len() {
            return Err(TransportError::NoPeer(peer));
        }
        if bytes > SIM_MAX_MSG_BYTES {
            return Err(TransportError::TooLarge {
                bytes,
                max: SIM_MAX_MSG_BYTES,
            });
        }
        let now_ps = self.clock.now();
        let (posted_ps, pays_gap) = if self.rendezvous(bytes) {
            // Blocking handshake; it ends any run.
            self.run.open = false;
            let request_ps = now_ps.saturating_add(self.post_ps(0, 1));
            let request_arrival_ps = self.client_transmit(peer, request_ps, 0, true);
            let reply_arrival_ps = self.server_control_reply(peer, request_arrival_ps);
            let handled_ps = request_ps
                .max(reply_arrival_ps)
                .saturating_add(self.recv_ps(0));
            let posted_ps = handled_ps.saturating_add(self.post_ps(bytes, 1));
            (posted_ps, true)
        } else {
            let run = &mut self.run;
            if !run.open || run.last_end_ps != now_ps || run.member[peer] == run.generation {
                run.open = true;
                run.generation += 1;
                run.posts = 0;
            }
            run.posts += 1;
            run.member[peer] = run.generation;
            let index = run.posts;
            let f = self.params.f.unwrap_or(1).max(1);
            let pays_gap = index == 1 || index > f;
            let posted_ps = now_ps.saturating_add(self.post_ps(bytes, index));
            self.run.last_end_ps = posted_ps;
            (posted_ps, pays_gap)
        };
        self.advance_to_ps(posted_ps);
        let arrival_ps = self.client_transmit(peer, posted_ps, bytes, pays_gap);
        self.counters.sent_bytes += bytes as u64;
        self.counters.sent_messages += 1;
        self.server_receive(peer, arrival_ps, bytes, meta);
        Ok(())
    }

    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        // Receiving is "something else": it ends the LogfP run.
        self.run.open = false;
        if let Some(peer) = from {
            if peer >= self.servers.len() {
                return Err(TransportError::NoPeer(peer));
            }
        }
        let Some(index) = self.next_inbound(from) else {
            // Nothing is pending and nothing can ever arrive.
            return Err(TransportError::Timeout(timeout));
        };
        let now_ps = self.clock.now();
        let deadline_ps = now_ps.saturating_add(duration_ps(timeout));
        let pending = self.inbound[index];
        if pending.rendezvous {
            let request_ps = now_ps.max(pending.arrival_ps);
            if request_ps > deadline_ps {
                self.advance_to_ps(deadline_ps);
                return Err(TransportError::Timeout(timeout));
            }
            // Handle the request, post the 0-byte reply; the server handles
            // it and posts the data.
            let reply_ps = request_ps
                .saturating_add(self.recv_ps(0))
                .saturating_add(self.post_ps(0, 1));
            let peer = pending.peer;
            let reply_arrival_ps = self.client_transmit(peer, reply_ps, 0, true);
            let handle_ps = self.recv_ps(0);
            let post_ps = self.post_ps(pending.bytes, 1);
            let server = &mut self.servers[peer];
            let data_posted_ps = reply_arrival_ps
                .max(server.cpu_free_ps)
                .saturating_add(handle_ps)
                .saturating_add(post_ps);
            server.cpu_free_ps = data_posted_ps;
            let data_arrival_ps = self.server_transmit(peer, data_posted_ps, pending.bytes);
            let entry = &mut self.inbound[index];
            entry.rendezvous = false;
            entry.arrival_ps = data_arrival_ps;
            // CPU work is not interrupted by the deadline; only waiting is.
            self.advance_to_ps(reply_ps);
        }
        let pending = self.inbound[index];
        let start_ps = self.clock.now().max(pending.arrival_ps);
        if start_ps > deadline_ps {
            self.advance_to_ps(deadline_ps);
            return Err(TransportError::Timeout(timeout));
        }
        let busy_ps = self.recv_ps(pending.bytes);
        self.advance_to_ps(start_ps.saturating_add(busy_ps));
        self.inbound.swap_remove(index);
        self.counters.recv_bytes += pending.bytes as u64;
        self.counters.recv_messages += 1;
        Ok(Received {
            peer: pending.peer,
            bytes: pending.bytes,
            meta: pending.meta,
            overhead_ns: busy_ps as f64 / VirtualClock::PS_PER_NS,
        })
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

/// How the link layer opens a simulated link (`crate::transport::open`):
/// the whole network runs in process, so there is no responder.
mod open {
    use super::SimTransport;
    use crate::clock::VirtualClock;
    use crate::transport::open::{LinkSpec, Open, OpenError, Rendezvous};

    impl Open for SimTransport {
        fn driver(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            let sim = spec.options.sim.as_ref().ok_or(OpenError::Missing {
                kind: spec.kind,
                what: "model",
            })?;
            Ok(SimTransport::new(
                sim.params,
                VirtualClock::new(),
                sim.peers,
            ))
        }

        fn responder(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
            Err(OpenError::NoResponder(spec.kind))
        }

        fn virtual_clock(&self) -> Option<VirtualClock> {
            Some(self.clock().clone())
        }
    }
}

#[cfg(test)]
mod tests {
    //! Every expected time below is derived by hand from the semantics in
    //! the module documentation (resources booked one span after another),
    //! not from a PRTT formula; the formulas only appear as cross-checks in
    //! the comments.

    use super::*;

    const LONG: Duration = Duration::from_secs(1);

    fn sim(model: &str, peers: usize) -> (SimTransport, VirtualClock) {
        let clock = VirtualClock::new();
        let params: SimParams = model.parse().expect("test model parses");
        (SimTransport::new(params, clock.clone(), peers), clock)
    }

    const ASK: Meta = Meta {
        answer: true,
        report_ns: 0,
    };
    const NO_ASK: Meta = Meta {
        answer: false,
        report_ns: 0,
    };

    /// PRTT(n, d, s) against peer 0, in ps of virtual time.
    fn prtt_ps(t: &mut SimTransport, clock: &VirtualClock, n: usize, d_ps: u64, s: usize) -> u64 {
        let start = clock.now();
        for i in 0..n {
            if i > 0 && d_ps > 0 {
                clock.spin(d_ps);
            }
            let meta = if i + 1 == n { ASK } else { NO_ASK };
            t.send(0, s, meta).unwrap();
        }
        let got = t.recv(Some(0), LONG).unwrap();
        assert_eq!(got.bytes, s);
        assert_eq!(got.peer, 0);
        clock.now() - start
    }

    const BASE: &str = "L=1100,o=300,g=450,G=0.08,O=0.01";

    #[test]
    fn single_message_round_trip_to_the_picosecond() {
        // s = 1000: o + s·O = 300 + 10 = 310 ns; (s−1)·G = 999·0.08 = 79.92 ns.
        // client posts 0→310, injects at 310, last byte at the server at
        // 310 + 79.92 + 1100 = 1489.92; server receives →1799.92, posts the
        // answer →2109.92, injects, arrival 2109.92 + 79.92 + 1100 = 3289.84;
        // client receives →3599.84 ns.
        // (= 2(L + 2o' + (s−1)G) with o' = o + sO.)
        let (mut t, clock) = sim(BASE, 1);
        t.send(0, 1000, ASK).unwrap();
        assert_eq!(clock.now(), 310_000, "send returns at local completion");
        let got = t.recv(Some(0), LONG).unwrap();
        assert_eq!(clock.now(), 3_599_840);
        assert_eq!(got.overhead_ns, 310.0);
        assert_eq!(got.meta.report_ns, 310, "server o_r = o + s·O");
        assert!(!got.meta.answer);
    }

    #[test]
    fn back_to_back_gap_bound() {
        // s = 1: o + s·O = 300.01 ns < g + 0·G = 450 ns. Injections at
        // 300.01 + 450k (k = 0..9), arrivals 1100 later, the server receives
        // each in 300.01 < 450 (no queue): the 10th is received at
        // 300.01 + 4050 + 1100 + 300.01; answer posted +300.01, arrives
        // +1100, received +300.01: 7450.04 ns.
        // (= PRTT(1,0,1) + 9·450 with PRTT(1,0,1) = 3400.04.)
        let (mut t, clock) = sim(BASE, 1);
        assert_eq!(prtt_ps(&mut t, &clock, 1, 0, 1), 3_400_040);
        let (mut t, clock) = sim(BASE, 1);
        assert_eq!(prtt_ps(&mut t, &clock, 10, 0, 1), 7_450_040);
    }

    #[test]
    fn back_to_back_overhead_bound() {
        // o = 600 > g = 450, s = 1, O = G = 0: posts end at 600(k+1), the NIC
        // is ready 450 after each injection, so injections are at 600(k+1);
        // the server gets one every 600 and needs 600 each. Last received at
        // 6000 + 1100 + 600, answer +600 +1100, received +600 = 10000 ns.
        let (mut t, clock) = sim("L=1100,o=600,g=450", 1);
        assert_eq!(prtt_ps(&mut t, &clock, 10, 0, 1), 10_000_000);
    }

    #[test]
    fn back_to_back_with_delay() {
        // d = 1000 ns between posts (client spin, never stretched):
        // post ends at 300.01 + 1300.01k, NIC gap 450 < 1300.01, so the
        // 10th arrives at 300.01 + 9·1300.01 + 1100; then as above:
        // 300.01 + 11700.09 + 1100 + 300.01·3 + 1100 = 15100.13 ns.
        let (mut t, clock) = sim(BASE, 1);
        assert_eq!(prtt_ps(&mut t, &clock, 10, 1_000_000, 1), 15_100_130);
    }

    #[test]
    fn receiver_bound_and_report() {
        // Posts cost omin + omax = 100 (each post to the same peer is a run of
        // one), receives o = 600, g = 200, L = 1000, s = 1.
        // Injections at 100 + 200k, arrivals 1100 + 200k; the server CPU is
        // the bottleneck: it finishes the 10th at 1100 + 10·600 = 7100,
        // posts the answer →7200, arrival 8200, client receives →8800 ns.
        let (mut t, clock) = sim("L=1000,o=600,g=200,omin=100,omax=0", 1);
        let start = clock.now();
        for i in 0..10 {
            t.send(0, 1, if i == 9 { ASK } else { NO_ASK }).unwrap();
        }
        assert_eq!(clock.now(), 1_000_000, "10 posts of 100 ns");
        let got = t.recv(None, LONG).unwrap();
        assert_eq!(clock.now() - start, 8_800_000);
        assert_eq!(got.meta.report_ns, 600);
        assert_eq!(got.overhead_ns, 600.0);
    }

    #[test]
    fn report_is_the_server_receive_overhead_per_size() {
        let (mut t, _clock) = sim(BASE, 1);
        for (s, expect) in [(0usize, 300u32), (1000, 310), (100_000, 1300)] {
            t.send(0, s, ASK).unwrap();
            let got = t.recv(Some(0), LONG).unwrap();
            assert_eq!(got.meta.report_ns, expect, "s = {s}");
            assert_eq!(got.overhead_ns, expect as f64, "client o_r, s = {s}");
        }
    }

    const RDV: &str = "L=1100,o=300,g=450,G=0.08,O=0.01,S=16384";

    #[test]
    fn rendezvous_only_above_threshold() {
        // s = S = 16384: eager. o' = 300 + 163.84 = 463.84,
        // (s−1)G = 16383·0.08 = 1310.64: 4·463.84 + 2·(1100 + 1310.64)
        // = 6676.64 ns.
        let (mut t, clock) = sim(RDV, 1);
        t.send(0, 16384, ASK).unwrap();
        assert_eq!(clock.now(), 463_840, "no handshake at s = S");
        t.recv(Some(0), LONG).unwrap();
        assert_eq!(clock.now(), 6_676_640);

        // s = S + 1 = 16385: o' = 463.85, (s−1)G = 1310.72.
        // client: request posted 0→300, injected 300, at server 1400;
        // server handles 1400→1700, posts reply →2000, at client 3100;
        // client handles 3100→3400, posts data →3863.85 (send returns).
        // NIC: allowed 300 + 450; data injected 3863.85, at the server
        // 3863.85 + 1310.72 + 1100 = 6274.57; received →6738.42.
        // Answer > S: server posts its request →7038.42 (NIC allowed
        // 2000 + 450), at client 8138.42. Client (in recv) handles it
        // →8438.42, posts its reply →8738.42 (NIC allowed 3863.85 + 1310.72
        // + 450), at server 9838.42; server handles →10138.42, posts data
        // →10602.27, at client 10602.27 + 1310.72 + 1100 = 13012.99;
        // received →13476.84 ns.
        // Cross-check: eager value 4·463.85 + 2·(1100 + 1310.72) = 6676.84,
        // plus two handshakes of 2L + 4o = 3400 each.
        let (mut t, clock) = sim(RDV, 1);
        t.send(0, 16385, ASK).unwrap();
        assert_eq!(clock.now(), 3_863_850, "send blocks for the handshake");
        let got = t.recv(Some(0), LONG).unwrap();
        assert_eq!(clock.now(), 13_476_840);
        assert_eq!(got.bytes, 16385);
        assert_eq!(got.overhead_ns, 463.85);
        assert_eq!(got.meta.report_ns, 464, "463.85 rounded");
    }

    #[test]
    fn rendezvous_gap_jump() {
        // PRTT(2,0,16385), continuing the hand computation of the single
        // case: the 1st data is injected at 3863.85 and received by the
        // server →6738.42 (no answer asked). 2nd send at 3863.85: request
        // posted →4163.85, but the NIC is allowed only at 3863.85 + 1310.72
        // + 450 = 5624.57; at server 6724.57, server busy until 6738.42,
        // handles →7038.42, reply →7338.42, at client 8438.42; client
        // handles →8738.42, posts data →9202.27, injected (allowed 5624.57 +
        // 450) at 9202.27, at server 11612.99, received →12076.84; answer
        // request →12376.84, at client 13476.84; client handles →13776.84,
        // reply →14076.84, at server 15176.84; server handles →15476.84,
        // posts data →15940.69, at client 18351.41; received →18815.26 ns.
        let (mut t, clock) = sim(RDV, 1);
        let two = prtt_ps(&mut t, &clock, 2, 0, 16385);
        assert_eq!(two, 18_815_260);
        // g jumps from max(o', g + (s−1)G) = 1760.72 to 5338.42: about one
        // small round trip (2L + 4o = 3400) more.
        assert_eq!(two - 13_476_840, 5_338_420);
    }

    const FANOUT: &str = "L=1100,o=300,g=450,omin=150,omax=900";

    /// Send 1 byte to peers 0..p (each asks for an answer), receive p
    /// answers; returns the client clock after the posts and after each
    /// receive.
    fn fanout(model: &str, p: usize) -> (u64, Vec<u64>) {
        let (mut t, clock) = sim(model, p);
        for peer in 0..p {
            t.send(peer, 1, ASK).unwrap();
        }
        let posted = clock.now();
        let mut done = Vec::new();
        let mut seen = vec![false; p];
        for _ in 0..p {
            let got = t.recv(None, LONG).unwrap();
            assert!(!std::mem::replace(&mut seen[got.peer], true));
            done.push(clock.now());
        }
        (posted, done)
    }

    #[test]
    fn logfp_overhead_of_a_run() {
        // P = 5 posts to distinct peers: 5·150 + 900 = 1650 ns.
        let (posted, _) = fanout(FANOUT, 5);
        assert_eq!(posted, 1_650_000);
        // A post to a peer already in the run starts a new run:
        // 1050 + 150 + 1050.
        let (mut t, clock) = sim(FANOUT, 2);
        for peer in [0, 1, 0] {
            t.send(peer, 1, NO_ASK).unwrap();
        }
        assert_eq!(clock.now(), 2_250_000);
        // Anything else the CPU does (here a spin) ends the run too.
        let (mut t, clock) = sim(FANOUT, 2);
        t.send(0, 1, NO_ASK).unwrap();
        clock.spin(10_000);
        t.send(1, 1, NO_ASK).unwrap();
        assert_eq!(clock.now(), 2_110_000);
    }

    #[test]
    fn logfp_first_f_injections_pay_no_gap() {
        // f = 3, posts end at 1050, 1200, 1350, 1500, 1650. Injections: 1050,
        // 1200 and 1350 (2nd and 3rd pay no g), 4th at 1350 + 450 = 1800,
        // 5th at 2250. Arrivals +1100: 2150, 2300, 2450, 2900, 3350; each
        // server receives (300) and posts its answer (run of one: 1050):
        // answers arrive at 4600, 4750, 4900, 5350, 5800. The client (free
        // at 1650) receives them one after the other, 300 each:
        // 4900, 5200, 5500, 5800, 6100.
        let (_, done) = fanout(&format!("{FANOUT},f=3"), 5);
        assert_eq!(
            done,
            [4_900_000, 5_200_000, 5_500_000, 5_800_000, 6_100_000]
        );
        // Without f every injection pays g: 1050, 1500, 1950, 2400, 2850;
        // answers at 4600, 5050, 5500, 5950, 6400; received +300 each.
        let (_, done) = fanout(FANOUT, 5);
        assert_eq!(
            done,
            [4_900_000, 5_350_000, 5_800_000, 6_250_000, 6_700_000]
        );
    }

    #[test]
    fn lomax_stretch_has_the_requested_mean_and_median() {
        let jitter = 0.02;
        let mut s = Stretch::new(jitter, 3);
        let n = 400_000;
        let mut xs: Vec<f64> = (0..n).map(|_| s.draw()).collect();
        assert!(xs.iter().all(|&x| x >= 0.0));
        let mean = xs.iter().sum::<f64>() / n as f64;
        assert!((mean / jitter - 1.0).abs() < 0.02, "mean {mean}");
        xs.sort_by(f64::total_cmp);
        let median = xs[n / 2];
        // Lomax median: λ(2^(1/α) − 1) with λ = 2·jitter: 0.0104.
        let expect = 2.0 * jitter * (2f64.powf(1.0 / 3.0) - 1.0);
        assert!((median / expect - 1.0).abs() < 0.02, "median {median}");
        assert!(median < 0.6 * mean);
    }

    #[test]
    fn links_are_fifo_under_jitter() {
        // With a large jitter, L alone would often let a later message
        // overtake an earlier one; the link keeps them in order, and every
        // arrival is at least the jitter-free injection + L.
        let params: SimParams = "L=1000,g=10,jitter=1,seed=5".parse().unwrap();
        let mut stretch = Stretch::new(params.jitter, params.seed);
        let (mut nic, mut link) = (Nic::default(), Link::default());
        let mut last = 0;
        let mut ordered_by_link = 0;
        for k in 0..2000u64 {
            let arrival = SimTransport::transmit(
                &mut stretch,
                &params,
                &mut nic,
                &mut link,
                k * 10_000,
                1,
                true,
            );
            assert!(arrival >= last, "message {k} overtook");
            assert!(arrival >= nic.last_inject_ps + 1_000_000);
            assert!(nic.last_inject_ps >= k * 10_000);
            if arrival == last {
                ordered_by_link += 1;
            }
            last = arrival;
        }
        // The constraint did bind (otherwise this test would prove nothing).
        assert!(ordered_by_link > 0);
    }

    /// `n` single-message round trips of 1000 bytes, in ps.
    fn rtt_samples(jitter: f64, seed: u64, n: usize) -> Vec<u64> {
        let (mut t, clock) = sim(&format!("{BASE},jitter={jitter},seed={seed}"), 1);
        (0..n)
            .map(|_| {
                let start = clock.now();
                t.send(0, 1000, ASK).unwrap();
                t.recv(Some(0), LONG).unwrap();
                clock.now() - start
            })
            .collect()
    }

    #[test]
    fn jitter_stretches_every_span_by_the_mean() {
        const EXACT_PS: u64 = 3_599_840; // single_message_round_trip above
        let samples = rtt_samples(0.02, 11, 500_000);
        assert!(samples.iter().all(|&rtt| rtt >= EXACT_PS));
        let mean = samples.iter().map(|&r| r as f64).sum::<f64>() / samples.len() as f64;
        let stretch = mean / EXACT_PS as f64 - 1.0;
        // Within 0.5 % of 2 % (relative): 0.0199 ..= 0.0201. Over seeds
        // 1..29 with 300000 samples the mean stretch spread was about 4e-5
        // (largest deviation 7.9e-5); 500000 samples leave more margin.
        assert!((stretch - 0.02).abs() <= 0.0001, "mean stretch {stretch}");
        // Heavy tail: some sample far out.
        let max = *samples.iter().max().unwrap();
        assert!(max as f64 > 1.2 * EXACT_PS as f64);
    }

    #[test]
    fn jitter_is_reproducible_per_seed() {
        assert_eq!(rtt_samples(0.02, 7, 100), rtt_samples(0.02, 7, 100));
        assert_ne!(rtt_samples(0.02, 7, 100), rtt_samples(0.02, 8, 100));
        // No jitter: exact whatever the seed.
        assert!(rtt_samples(0.0, 9, 50).iter().all(|&r| r == 3_599_840));
    }

    #[test]
    fn recv_times_out_without_hanging() {
        let (mut t, clock) = sim(BASE, 2);
        // Nothing pending: immediately, no time passes.
        assert!(matches!(
            t.recv(None, LONG),
            Err(TransportError::Timeout(d)) if d == LONG
        ));
        assert_eq!(clock.now(), 0);
        // A message without answer request produces nothing to receive.
        t.send(0, 1000, NO_ASK).unwrap();
        assert!(t.recv(Some(0), LONG).is_err());
        assert_eq!(clock.now(), 310_000);

        // The answer reaches the client at 310 + 3289.84 = 3599.84 (send at
        // 310, see single_message_round_trip); waiting 1 µs from 620 gives
        // up at 1620 exactly.
        t.send(0, 1000, ASK).unwrap();
        assert_eq!(clock.now(), 620_000);
        // Only peer 0 will answer.
        assert!(matches!(
            t.recv(Some(1), LONG),
            Err(TransportError::Timeout(_))
        ));
        assert_eq!(clock.now(), 620_000);
        assert!(matches!(
            t.recv(Some(0), Duration::from_micros(1)),
            Err(TransportError::Timeout(_))
        ));
        assert_eq!(clock.now(), 1_620_000);
        // It is still there afterwards. The second message is injected at
        // 620 (NIC allowed at 310 + 79.92 + 450 = 839.92, so at 839.92),
        // at the server 2019.84; server free (first received at 1799.92),
        // receives →2329.84, answers →2639.84, at client 3819.76, received
        // →4129.76.
        let got = t.recv(Some(0), LONG).unwrap();
        assert_eq!(got.bytes, 1000);
        assert_eq!(clock.now(), 4_129_760);
        assert!(matches!(
            t.recv(Some(5), LONG),
            Err(TransportError::NoPeer(5))
        ));
    }

    #[test]
    fn errors_and_counters() {
        let (mut t, _clock) = sim(BASE, 2);
        assert!(matches!(
            t.send(2, 1, NO_ASK),
            Err(TransportError::NoPeer(2))
        ));
        assert!(matches!(
            t.send(0, SIM_MAX_MSG_BYTES + 1, NO_ASK),
            Err(TransportError::TooLarge { .. })
        ));
        for i in 0..3 {
            t.send(1, 100, if i == 2 { ASK } else { NO_ASK }).unwrap();
        }
        t.recv(None, LONG).unwrap();
        let expect_client = Counters {
            sent_bytes: 300,
            sent_messages: 3,
            recv_bytes: 100,
            recv_messages: 1,
        };
        assert_eq!(t.counters(), expect_client);
        let expect_servers = Counters {
            sent_bytes: 100,
            sent_messages: 1,
            recv_bytes: 300,
            recv_messages: 3,
        };
        assert_eq!(t.server_counters(), expect_servers);
        let caps = t.caps();
        assert_eq!(caps.peers, 2);
        assert!(caps.has_recv_overhead && !caps.one_sided);
        assert!(caps.max_msg_bytes >= 1 << 30);
    }

    #[test]
    fn model_strings_parse_and_round_trip() {
        let text =
            "L=1100,o=300,g=450,G=0.08,S=16384,f=6,omin=150,omax=900,O=0.01,jitter=0.02,seed=7";
        let p: SimParams = text.parse().unwrap();
        assert_eq!(p.L_ns, 1100.0);
        assert_eq!(p.o_ns, 300.0);
        assert_eq!(p.g_ns, 450.0);
        assert_eq!(p.G_ns_per_byte, 0.08);
        assert_eq!(p.S_bytes, Some(16384));
        assert_eq!(p.f, Some(6));
        assert_eq!(p.o_min_ns, Some(150.0));
        assert_eq!(p.o_max_ns, Some(900.0));
        assert_eq!(p.O_ns_per_byte, 0.01);
        assert_eq!(p.jitter, 0.02);
        assert_eq!(p.seed, 7);
        assert_eq!(p.to_string(), text);
        assert_eq!(p.to_string().parse::<SimParams>().unwrap(), p);
        // Absent keys keep their defaults.
        let d: SimParams = "".parse().unwrap();
        assert_eq!(d, SimParams::default());
        assert_eq!(d.seed, 1);
        let q: SimParams = " L = 5 , ".parse().unwrap();
        assert_eq!(q.L_ns, 5.0);
        assert_eq!(q.to_string().parse::<SimParams>().unwrap(), q);
    }

    #[test]
    fn bad_model_strings_name_the_key() {
        let err = |s: &str| s.parse::<SimParams>().unwrap_err();
        assert_eq!(err("L=1,x=2"), SimParamError::UnknownKey("x".into()));
        assert_eq!(err("l=1"), SimParamError::UnknownKey("l".into()));
        assert_eq!(err("L"), SimParamError::MissingValue("L".into()));
        assert_eq!(err("o=1,o=2"), SimParamError::Duplicate { key: "o".into() });
        for (text, key) in [
            ("g=abc", "g"),
            ("G=-1", "G"),
            ("L=inf", "L"),
            ("o=NaN", "o"),
            ("S=1.5", "S"),
            ("S=-3", "S"),
            ("f=0", "f"),
            ("seed=x", "seed"),
            ("jitter=-0.1", "jitter"),
        ] {
            match err(text) {
                SimParamError::BadValue { key: k, .. } => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
            assert!(err(text).to_string().contains(&format!("`{key}`")));
        }
    }
}
