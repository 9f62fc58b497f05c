//! A wait that spins, then gives the CPU away between short spins: for
//! links whose waits poll user-space memory (an RDMA device's completion
//! queue or a written buffer) on a CPU they may share with the device's
//! own work.

use std::time::{Duration, Instant};

use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

/// `recv` spins for its first `spin_first` (every answer of a healthy path
/// arrives well within it), then yields the CPU between spins of
/// `spin_slice`: on a probe CPU of its own `sched_yield` returns at once,
/// but where the probe shares CPUs with the device's work (a software RDMA
/// device such as rxe processes packets in kernel softirqs) a wait that
/// only spins starves the very work it waits for.
/// [`plain`](Self::plain) passes every wait straight through.
pub struct SpinThenYield<T> {
    inner: T,
    /// (spin_first, spin_slice); None: plain.
    spin: Option<(Duration, Duration)>,
}

impl<T: Transport> SpinThenYield<T> {
    pub fn new(inner: T, spin_first: Duration, spin_slice: Duration) -> Self {
        SpinThenYield {
            inner,
            spin: Some((spin_first, spin_slice)),
        }
    }
    /// Waits as `inner` waits.
    pub fn plain(inner: T) -> Self {
        SpinThenYield { inner, spin: None }
    }
    pub fn get_ref(&self) -> &T {
        &self.inner
    }
    pub fn into_inner(self) -> T {
        self.inner
    }
}

impl<T: Transport> Transport for SpinThenYield<T> {
    fn caps(&self) -> Caps {
        self.inner.caps()
    }
    #[inline]
    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        self.inner.send(peer, bytes, meta)
    }
    #[inline]
    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        let Some((spin_first, spin_slice)) = self.spin else {
            return self.inner.recv(from, timeout);
        };
        let first = timeout.min(spin_first);
        match self.inner.recv(from, first) {
            Err(TransportError::Timeout(_)) if timeout > first => {}
            r => return r,
        }
        let deadline = Instant::now() + (timeout - first);
        loop {
            std::thread::yield_now();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.inner.recv(from, left.min(spin_slice)) {
                Err(TransportError::Timeout(_)) if left.is_zero() => {
                    return Err(TransportError::Timeout(timeout))
                }
                Err(TransportError::Timeout(_)) => {}
                r => return r,
            }
        }
    }
    fn counters(&self) -> Counters {
        self.inner.counters()
    }
}
