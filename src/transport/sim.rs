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
