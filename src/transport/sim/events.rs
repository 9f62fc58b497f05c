//! Booking work on the simulated resources: CPU time of posts and
//! receives, injections on a NIC and arrivals over a FIFO link, and the
//! embedded servers' receives, answers and rendezvous replies.

use super::jitter::Stretch;
use super::params::SimParams;
use super::{Inbound, Link, Nic, SimTransport};
use crate::clock::{Clock, VirtualClock};
use crate::transport::{Meta, PeerId};

impl SimTransport {
    pub(super) fn rendezvous(&self, bytes: usize) -> bool {
        self.params.S_bytes.is_some_and(|s| bytes as u64 > s)
    }

    fn logfp_overhead(&self) -> bool {
        self.params.o_min_ns.is_some() || self.params.o_max_ns.is_some()
    }

    /// CPU busy time of posting `bytes`, the `index`-th post (1-based) of a
    /// run.
    pub(super) fn post_ps(&mut self, bytes: usize, index: u32) -> u64 {
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
    pub(super) fn recv_ps(&mut self, bytes: usize) -> u64 {
        let per_byte = bytes as f64 * self.params.O_ns_per_byte;
        self.stretch
            .span_ps(self.params.o_ns)
            .saturating_add(self.stretch.span_ps(per_byte))
    }

    /// Inject `bytes` on `nic` once the post finished at `ready_ps`; returns
    /// when the last byte arrives at the far end of `link`.
    pub(super) fn transmit(
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
    pub(super) fn client_transmit(
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
    pub(super) fn server_transmit(&mut self, peer: PeerId, ready_ps: u64, bytes: usize) -> u64 {
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
    /// `arrival_ps` and posts `reply_bytes` in reply (0: the answer to a
    /// rendezvous request; the data, once the client has answered the
    /// server's own request); returns the reply's arrival at the client.
    pub(super) fn server_control_reply(
        &mut self,
        peer: PeerId,
        arrival_ps: u64,
        reply_bytes: usize,
    ) -> u64 {
        let recv_ps = self.recv_ps(0);
        let post_ps = self.post_ps(reply_bytes, 1);
        let server = &mut self.servers[peer];
        let posted_ps = arrival_ps
            .max(server.cpu_free_ps)
            .saturating_add(recv_ps)
            .saturating_add(post_ps);
        server.cpu_free_ps = posted_ps;
        self.server_transmit(peer, posted_ps, reply_bytes)
    }

    /// Server `peer` receives a data message arriving at `arrival_ps` and,
    /// if asked, answers it.
    pub(super) fn server_receive(
        &mut self,
        peer: PeerId,
        arrival_ps: u64,
        bytes: usize,
        meta: Meta,
    ) {
        let recv_ps = self.recv_ps(bytes);
        let server = &mut self.servers[peer];
        server.cpu_free_ps = arrival_ps.max(server.cpu_free_ps).saturating_add(recv_ps);
        server.burst_recv_ps = server.burst_recv_ps.saturating_add(recv_ps);
        server.burst_messages += 1;
        self.server_counters.received(bytes);
        let answers = meta.answers();
        if answers == 0 {
            return;
        }
        let mean_ps = server.burst_recv_ps as f64 / server.burst_messages as f64;
        let report_ns = (mean_ps / VirtualClock::PS_PER_NS)
            .round()
            .min(u32::MAX as f64) as u32;
        server.burst_recv_ps = 0;
        server.burst_messages = 0;
        let rendezvous = self.rendezvous(bytes);
        // The request of a rendezvous, or the data itself; a reverse burst
        // posts its answers back to back, the report on the last.
        let post_bytes = if rendezvous { 0 } else { bytes };
        for i in 1..=answers {
            let post_ps = self.post_ps(post_bytes, 1);
            let posted_ps = self.servers[peer].cpu_free_ps.saturating_add(post_ps);
            self.servers[peer].cpu_free_ps = posted_ps;
            let arrival_ps = self.server_transmit(peer, posted_ps, post_bytes);
            self.server_counters.sent(bytes);
            let seq = self.next_seq;
            self.next_seq += 1;
            self.inbound.push(Inbound {
                seq,
                arrival_ps,
                peer,
                bytes,
                meta: Meta {
                    answer: false,
                    report_ns: if i == answers { report_ns } else { 0 },
                },
                rendezvous,
            });
        }
    }

    /// Move the client clock forward to `ps` (never backwards).
    pub(super) fn advance_to_ps(&self, ps: u64) {
        let now = self.clock.now();
        if ps > now {
            self.clock.spin(ps - now);
        }
    }

    /// The pending message to receive next: the earliest arrival from
    /// `from` (or anyone).
    pub(super) fn next_inbound(&self, from: Option<PeerId>) -> Option<usize> {
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
