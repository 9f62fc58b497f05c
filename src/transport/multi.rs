//! Several single-peer endpoints as one multi-peer transport, for the
//! 1:P−P:1 fan-out across a node's peers (peer i = endpoint i).

use std::time::{Duration, Instant};

use super::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

pub struct Multi<T: Transport> {
    links: Vec<T>,
    /// Where the next any-peer receive starts polling (round robin).
    next: usize,
}

impl<T: Transport> Multi<T> {
    pub fn new(links: Vec<T>) -> Self {
        Multi { links, next: 0 }
    }
    pub fn into_inner(self) -> Vec<T> {
        self.links
    }
}

impl<T: Transport> Transport for Multi<T> {
    fn caps(&self) -> Caps {
        let mut caps = self.links.first().map_or(
            Caps {
                max_msg_bytes: 0,
                one_sided: false,
                has_recv_overhead: false,
                peers: 0,
            },
            |l| l.caps(),
        );
        for l in &self.links {
            caps.max_msg_bytes = caps.max_msg_bytes.min(l.caps().max_msg_bytes);
        }
        caps.peers = self.links.len();
        caps
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        self.links
            .get_mut(peer)
            .ok_or(TransportError::NoPeer(peer))?
            .send(0, bytes, meta)
    }

    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        if let Some(p) = from {
            let mut r = self
                .links
                .get_mut(p)
                .ok_or(TransportError::NoPeer(p))?
                .recv(Some(0), timeout)?;
            r.peer = p;
            return Ok(r);
        }
        let n = self.links.len();
        if n == 0 {
            return Err(TransportError::NoPeer(0));
        }
        let deadline = Instant::now() + timeout;
        loop {
            for k in 0..n {
                let i = (self.next + k) % n;
                match self.links[i].recv(Some(0), Duration::ZERO) {
                    Ok(mut r) => {
                        self.next = (i + 1) % n;
                        r.peer = i;
                        return Ok(r);
                    }
                    Err(TransportError::Timeout(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            if Instant::now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
        }
    }

    fn counters(&self) -> Counters {
        self.links.iter().fold(Counters::default(), |mut c, l| {
            let x = l.counters();
            c.sent_bytes += x.sent_bytes;
            c.sent_messages += x.sent_messages;
            c.recv_bytes += x.recv_bytes;
            c.recv_messages += x.recv_messages;
            c
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::prtt::serve;
    use crate::transport::udp::{UdpOptions, UdpTransport};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// Three UDP mirror servers behind one Multi: messages reach the right
    /// link, answers come back tagged with their link's index.
    #[test]
    fn routes_by_peer_and_tags_answers() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut servers = Vec::new();
        let mut links = Vec::new();
        for _ in 0..3 {
            let mut srv =
                UdpTransport::listen("127.0.0.1:0".parse().unwrap(), UdpOptions::default())
                    .unwrap();
            let addr = srv.local_addr().unwrap();
            let stop = stop.clone();
            servers.push(std::thread::spawn(move || {
                serve(&mut srv, Duration::from_millis(20), |_| {
                    !stop.load(Ordering::Relaxed)
                })
            }));
            links.push(UdpTransport::connect(addr, UdpOptions::default()).unwrap());
        }
        let mut m = Multi::new(links);
        assert_eq!(m.caps().peers, 3);
        let ask = Meta {
            answer: true,
            report_ns: 0,
        };
        let t = Duration::from_secs(2);
        m.send(2, 8, ask).unwrap();
        let r = m.recv(None, t).unwrap();
        assert_eq!((r.peer, r.bytes), (2, 8));
        m.send(0, 4, ask).unwrap();
        m.send(1, 5, ask).unwrap();
        let mut got =
            [m.recv(None, t).unwrap(), m.recv(None, t).unwrap()].map(|r| (r.peer, r.bytes));
        got.sort_unstable();
        assert_eq!(got, [(0, 4), (1, 5)]);
        assert!(matches!(m.send(3, 1, ask), Err(TransportError::NoPeer(3))));
        assert_eq!(m.counters().sent_messages, 3);
        assert!(matches!(
            m.recv(None, Duration::from_millis(30)),
            Err(TransportError::Timeout(_))
        ));
        stop.store(true, Ordering::Relaxed);
        drop(m);
        for s in servers {
            s.join().unwrap().unwrap();
        }
    }
}
