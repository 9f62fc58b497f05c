//! The client endpoint: [`Transport`] over the simulated network.

use std::time::Duration;

use super::{SimTransport, SIM_MAX_MSG_BYTES};
use crate::clock::{Clock, VirtualClock};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

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
            let reply_arrival_ps = self.server_control_reply(peer, request_arrival_ps, 0);
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
        self.counters.sent(bytes);
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
            let data_arrival_ps = self.server_control_reply(peer, reply_arrival_ps, pending.bytes);
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
        self.counters.received(pending.bytes);
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
