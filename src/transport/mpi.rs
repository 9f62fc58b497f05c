//! MPI point-to-point transport (cargo feature `mpi`): MPI_Isend / matched
//! probe + MPI_Imrecv on a private duplicate of a communicator, so the probe
//! measures the MPI library's own LogGP(S) parameters, eager/rendezvous
//! switch included (Netgauge's MPI mode).
//!
//! - Peer ids number the *other* ranks in order: peer p is rank p if p < me,
//!   else rank p + 1. Rank 0 probing rank 1 uses peer 0.
//! - [`Meta`] travels in the tag, so the payload is exactly the requested
//!   size: bit 0 = answer, bit 1 = stop (end of session), bits 2.. =
//!   report_ns (clamped to what MPI_TAG_UB allows; Open MPI's is 2^31 − 1,
//!   i.e. 0.5 s of receive overhead).
//! - Every wait is bounded: sends are MPI_Isend + MPI_Test polled against a
//!   deadline; receives poll MPI_Improbe against the deadline, then
//!   MPI_Imrecv + MPI_Test against it. Nothing calls a blocking MPI function.
//!   A request that cannot finish by its deadline is freed and its buffer is
//!   kept alive until the process ends (MPI may still read or write it).
//! - Receive overhead: the time from the matched probe that found the message
//!   to the MPI_Test that completed its receive (for eager messages the copy
//!   out of the shared-memory/eager buffer).
//! - [`AllRanks`]: the barrier, exchange step and maximum over ranks that
//!   the all-ranks exchange pattern (`pattern::exchange`) runs on, each an
//!   MPI non-blocking collective or point-to-point pair polled against its
//!   deadline.

use std::ffi::{c_int, c_void};
use std::time::{Duration, Instant};

use mpi::ffi;

use super::open::{LinkSpec, Open, OpenError, Rendezvous};
use super::{AllRanks, Caps, Counters, Meta, PeerId, Received, Transport, TransportError};
use crate::clock::{Clock, HostClock};

const TAG_ANSWER: c_int = 1;
const TAG_STOP: c_int = 2;
const TAG_REPORT_SHIFT: u32 = 2;
/// Answer and stop together never occur in a probe: the tag of a control
/// message carrying a rank's processor name.
const TAG_NAME: c_int = TAG_ANSWER | TAG_STOP;
/// The exchange steps' messages (answer and stop with a report of 1).
const TAG_EXCHANGE: c_int = TAG_NAME | (1 << TAG_REPORT_SHIFT);
/// Transfers each way one conflict step posts at most.
pub const MAX_CONCURRENT: usize = 8;
const MAX_NAME_BYTES: usize = 255;

/// Settings of an [`MpiTransport`].
#[derive(Clone, Copy, Debug)]
pub struct MpiOptions {
    /// Largest message (and size of each of the two preallocated buffers).
    pub max_msg_bytes: usize,
    /// How long `send` may wait for local completion (a rendezvous send
    /// completes only once the receiver has matched it).
    pub send_timeout: Duration,
    pub clock: HostClock,
}

impl Default for MpiOptions {
    fn default() -> Self {
        Self {
            max_msg_bytes: 4 << 20,
            send_timeout: Duration::from_secs(2),
            clock: HostClock::default(),
        }
    }
}

fn check(rc: c_int, what: &str) -> Result<(), TransportError> {
    // MPI_SUCCESS is 0 in every implementation.
    if rc == 0 {
        Ok(())
    } else {
        Err(TransportError::Protocol(format!(
            "{what} failed with MPI error {rc}"
        )))
    }
}

/// Initialize MPI (MPI_THREAD_SINGLE). `None` if MPI was already initialized.
pub fn initialize() -> Option<mpi::environment::Universe> {
    mpi::initialize()
}

/// Rank and size of MPI_COMM_WORLD.
pub fn world_rank_size() -> (usize, usize) {
    let (mut rank, mut size) = (0 as c_int, 0 as c_int);
    // SAFETY: MPI is initialized by the caller (an `initialize()` Universe is
    // alive); the out-pointers are valid locals.
    unsafe {
        ffi::MPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut rank);
        ffi::MPI_Comm_size(ffi::RSMPI_COMM_WORLD, &mut size);
    }
    (rank.max(0) as usize, size.max(1) as usize)
}

/// The MPI processor name (host name) of this rank.
pub fn processor_name() -> String {
    mpi::environment::processor_name().unwrap_or_else(|_| String::from("unknown"))
}

/// A message [`MpiTransport::matched_recv`] received.
struct Matched {
    bytes: usize,
    tag: c_int,
    src_rank: usize,
    /// Clock reading when the probe matched it.
    found_at: u64,
}

/// The MPI transport on a duplicate of MPI_COMM_WORLD.
pub struct MpiTransport {
    comm: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    max_report_ns: u32,
    tx: Vec<u8>,
    rx: Vec<u8>,
    /// A request was abandoned at a deadline: MPI may still touch the
    /// buffers, so they are leaked instead of freed on drop.
    abandoned: bool,
    counters: Counters,
    opts: MpiOptions,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("max_msg_bytes", &self.opts.max_msg_bytes)
            .finish()
    }
}

impl MpiTransport {
    /// Duplicate MPI_COMM_WORLD (collective: every rank must call it).
    /// MPI must be initialized (see [`initialize`]).
    pub fn world(opts: MpiOptions) -> Result<MpiTransport, TransportError> {
        // SAFETY: a plain handle value, overwritten by MPI_Comm_dup.
        let mut comm: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: MPI is initialized; `comm` is a valid out-pointer.
        check(
            unsafe { ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm) },
            "MPI_Comm_dup",
        )?;
        let (mut rank, mut size) = (0 as c_int, 0 as c_int);
        // SAFETY: `comm` is the communicator MPI just created.
        unsafe {
            check(ffi::MPI_Comm_rank(comm, &mut rank), "MPI_Comm_rank")?;
            check(ffi::MPI_Comm_size(comm, &mut size), "MPI_Comm_size")?;
        }
        let mut tag_ub: *mut c_int = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: MPI_TAG_UB is a predefined attribute of every communicator;
        // MPI stores a pointer to its int value in `tag_ub`.
        let tag_ub_value = unsafe {
            ffi::MPI_Comm_get_attr(
                comm,
                ffi::MPI_TAG_UB as c_int,
                &mut tag_ub as *mut *mut c_int as *mut c_void,
                &mut flag,
            );
            if flag != 0 && !tag_ub.is_null() {
                *tag_ub
            } else {
                32767
            }
        };
        let max_report_ns = (tag_ub_value.max(32767) >> TAG_REPORT_SHIFT) as u32;
        Ok(MpiTransport {
            comm,
            rank: rank as usize,
            size: size as usize,
            max_report_ns,
            tx: vec![0x5a; opts.max_msg_bytes.max(1)],
            rx: vec![0; opts.max_msg_bytes.max(1)],
            abandoned: false,
            counters: Counters::default(),
            opts,
        })
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// The rank a peer id stands for.
    pub fn peer_rank(&self, peer: PeerId) -> Option<usize> {
        if peer + 1 >= self.size {
            return None;
        }
        Some(if peer < self.rank { peer } else { peer + 1 })
    }

    /// The peer id of a rank (None for this rank itself or out of range).
    pub fn rank_peer(&self, rank: usize) -> Option<PeerId> {
        if rank >= self.size || rank == self.rank {
            None
        } else if rank < self.rank {
            Some(rank)
        } else {
            Some(rank - 1)
        }
    }

    fn encode_tag(&self, meta: Meta, stop: bool) -> c_int {
        let report = meta.report_ns.min(self.max_report_ns) as c_int;
        (report << TAG_REPORT_SHIFT)
            | if meta.answer { TAG_ANSWER } else { 0 }
            | if stop { TAG_STOP } else { 0 }
    }

    /// Rank 0 learns the processor name of every other rank (each other rank
    /// sends its own); a bounded wait of `timeout` per rank. On rank 0 the
    /// result is indexed by rank (its own name first); elsewhere it is empty.
    pub fn gather_names(&mut self, timeout: Duration) -> Result<Vec<String>, TransportError> {
        let me = processor_name();
        if self.rank != 0 {
            let n = me.len().min(MAX_NAME_BYTES).min(self.tx.len());
            let mut buf = std::mem::take(&mut self.tx);
            buf[..n].copy_from_slice(&me.as_bytes()[..n]);
            self.tx = buf;
            let peer = self.rank_peer(0).ok_or(TransportError::NoPeer(0))?;
            self.post_tag(peer, n, TAG_NAME)?;
            // Restore the probe fill pattern.
            self.tx[..n].fill(0x5a);
            return Ok(Vec::new());
        }
        let mut names = vec![me];
        for rank in 1..self.size {
            let bytes = self.recv_tag(rank as c_int, TAG_NAME, timeout)?;
            let end = bytes.min(MAX_NAME_BYTES);
            names.push(String::from_utf8_lossy(&self.rx[..end]).into_owned());
        }
        Ok(names)
    }

    /// Receive one message with exactly this tag from `rank` into `rx`.
    fn recv_tag(
        &mut self,
        rank: c_int,
        tag: c_int,
        timeout: Duration,
    ) -> Result<usize, TransportError> {
        Ok(self.matched_recv(rank, tag, timeout)?.bytes)
    }

    /// Wait for a message from `source` with `tag` (MPI_Improbe polled
    /// against the deadline), then receive it into `rx` (MPI_Imrecv polled
    /// against it). A message larger than `rx` is drained and refused.
    #[inline]
    fn matched_recv(
        &mut self,
        source: c_int,
        tag: c_int,
        timeout: Duration,
    ) -> Result<Matched, TransportError> {
        let deadline = Instant::now() + timeout;
        // SAFETY: plain constant handle values.
        let mut msg: ffi::MPI_Message = unsafe { ffi::RSMPI_MESSAGE_NULL };
        // SAFETY: MPI_Status is plain old data.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        let mut spins = 0u32;
        let found_at = loop {
            let mut flag: c_int = 0;
            // SAFETY: our communicator; valid out-pointers.
            check(
                unsafe {
                    ffi::MPI_Improbe(source, tag, self.comm, &mut flag, &mut msg, &mut status)
                },
                "MPI_Improbe",
            )?;
            if flag != 0 {
                break self.opts.clock.now();
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && Instant::now() >= deadline {
                return Err(TransportError::Timeout(timeout));
            }
        };
        let mut count: c_int = 0;
        // SAFETY: `status` was filled by the matched probe.
        check(
            unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut count) },
            "MPI_Get_count",
        )?;
        let bytes = count.max(0) as usize;
        if bytes > self.rx.len() {
            // A matched message cannot be received in pieces: drain it into
            // a temporary buffer (never on a valid probe, whose sizes are
            // bounded by max_msg_bytes).
            let mut sink = vec![0u8; bytes];
            // SAFETY: `sink` holds `bytes` bytes; `msg` is the matched message.
            unsafe {
                ffi::MPI_Mrecv(
                    sink.as_mut_ptr() as *mut c_void,
                    count,
                    ffi::RSMPI_UINT8_T,
                    &mut msg,
                    ffi::RSMPI_STATUS_IGNORE,
                )
            };
            return Err(TransportError::TooLarge {
                bytes,
                max: self.rx.len(),
            });
        }
        // SAFETY: a plain handle value.
        let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `rx` holds at least `bytes` bytes and outlives the request
        // (or is leaked if the request is abandoned); `msg` is matched.
        check(
            unsafe {
                ffi::MPI_Imrecv(
                    self.rx.as_mut_ptr() as *mut c_void,
                    count,
                    ffi::RSMPI_UINT8_T,
                    &mut msg,
                    &mut req,
                )
            },
            "MPI_Imrecv",
        )?;
        self.wait_request(&mut req, deadline.max(Instant::now() + timeout), timeout)?;
        Ok(Matched {
            bytes,
            tag: status.MPI_TAG,
            src_rank: status.MPI_SOURCE.max(0) as usize,
            found_at,
        })
    }

    /// Tell `peer` the session is over (its `recv` returns `PeerGone`, and
    /// the generic `serve` counts a session end).
    pub fn send_stop(&mut self, peer: PeerId) -> Result<(), TransportError> {
        self.post(peer, 0, Meta::default(), true)
    }

    fn post(
        &mut self,
        peer: PeerId,
        bytes: usize,
        meta: Meta,
        stop: bool,
    ) -> Result<(), TransportError> {
        if bytes > self.opts.max_msg_bytes {
            return Err(TransportError::TooLarge {
                bytes,
                max: self.opts.max_msg_bytes,
            });
        }
        let tag = self.encode_tag(meta, stop);
        self.post_tag(peer, bytes, tag)
    }

    fn post_tag(&mut self, peer: PeerId, bytes: usize, tag: c_int) -> Result<(), TransportError> {
        let rank = self.peer_rank(peer).ok_or(TransportError::NoPeer(peer))?;
        // SAFETY: RSMPI_REQUEST_NULL is a plain handle value.
        let mut req: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: `tx` lives as long as the transport (or forever, if the
        // request is abandoned below).
        unsafe { self.isend(bytes, rank, tag, &mut req) }?;
        let deadline = Instant::now() + self.opts.send_timeout;
        self.wait_request(&mut req, deadline, self.opts.send_timeout)?;
        self.counters.sent(bytes);
        Ok(())
    }

    /// MPI_Isend of the first `n` bytes of the send buffer to `rank`.
    ///
    /// # Safety
    /// `n` ≤ the send buffer's length, and the buffer must outlive the
    /// request: it completes, or it is freed and the transport marked
    /// abandoned (the buffer then is never freed).
    unsafe fn isend(
        &self,
        n: usize,
        rank: usize,
        tag: c_int,
        req: &mut ffi::MPI_Request,
    ) -> Result<(), TransportError> {
        debug_assert!(n <= self.tx.len());
        // SAFETY: the caller's guarantee for the buffer; our communicator.
        let rc = unsafe {
            ffi::MPI_Isend(
                self.tx.as_ptr() as *const c_void,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                rank as c_int,
                tag,
                self.comm,
                req,
            )
        };
        check(rc, "MPI_Isend")
    }

    /// MPI_Irecv of `n` bytes from `rank` into the receive buffer at
    /// `offset`.
    ///
    /// # Safety
    /// `offset + n` ≤ the receive buffer's length; the buffer must outlive
    /// the request, as for [`MpiTransport::isend`].
    unsafe fn irecv(
        &mut self,
        offset: usize,
        n: usize,
        rank: usize,
        tag: c_int,
        req: &mut ffi::MPI_Request,
    ) -> Result<(), TransportError> {
        debug_assert!(offset + n <= self.rx.len());
        // SAFETY: the caller's guarantee for the buffer; our communicator.
        let rc = unsafe {
            ffi::MPI_Irecv(
                self.rx.as_mut_ptr().add(offset) as *mut c_void,
                n as c_int,
                ffi::RSMPI_UINT8_T,
                rank as c_int,
                tag,
                self.comm,
                req,
            )
        };
        check(rc, "MPI_Irecv")
    }

    /// One exchange step: send `bytes` to `partner` and receive `bytes` from
    /// it at once (MPI_Irecv + MPI_Isend, polled together until `deadline`).
    fn exchange_step(
        &mut self,
        partner: usize,
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let n = bytes.min(self.tx.len()).min(self.rx.len());
        // SAFETY: plain handle values.
        let mut reqs = unsafe { [ffi::RSMPI_REQUEST_NULL, ffi::RSMPI_REQUEST_NULL] };
        // SAFETY: `rx` and `tx` outlive the requests (or are leaked if a
        // request is abandoned).
        unsafe { self.irecv(0, n, partner, TAG_EXCHANGE, &mut reqs[0]) }?;
        // SAFETY: as above.
        if let Err(e) = unsafe { self.isend(n, partner, TAG_EXCHANGE, &mut reqs[1]) } {
            // The receive is posted: let it complete in the background and
            // never free its buffer.
            return self.abandon(&mut reqs[..1], e);
        }
        self.wait_all(&mut reqs, deadline)
    }

    /// Receives of `bytes` from every rank of `from` (each into its own
    /// part of the receive buffer) and sends of `bytes` to every rank of
    /// `to` (all from the send buffer), posted at once, then waited for.
    /// At most [`MAX_CONCURRENT`] each way; the receive buffer must hold
    /// `from.len()` messages.
    fn concurrent_step(
        &mut self,
        to: &[usize],
        from: &[usize],
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        if to.len() > MAX_CONCURRENT || from.len() > MAX_CONCURRENT {
            return Err(TransportError::Protocol(format!(
                "at most {MAX_CONCURRENT} concurrent transfers each way"
            )));
        }
        let n = bytes.min(self.tx.len());
        if n * from.len() > self.rx.len() {
            return Err(TransportError::TooLarge {
                bytes: n * from.len(),
                max: self.rx.len(),
            });
        }
        // SAFETY: plain handle values.
        let mut reqs = unsafe { [ffi::RSMPI_REQUEST_NULL; 2 * MAX_CONCURRENT] };
        let mut posted = 0;
        for (i, &f) in from.iter().enumerate() {
            // SAFETY: `rx[i·n..(i+1)·n]` is within the buffer (checked
            // above) and outlives the request (or is leaked if it is
            // abandoned).
            let rc = unsafe { self.irecv(i * n, n, f, TAG_EXCHANGE, &mut reqs[posted]) };
            if let Err(e) = rc {
                return self.abandon(&mut reqs[..posted], e);
            }
            posted += 1;
        }
        for &t in to {
            // SAFETY: `tx` outlives the request (or is leaked if it is
            // abandoned).
            let rc = unsafe { self.isend(n, t, TAG_EXCHANGE, &mut reqs[posted]) };
            if let Err(e) = rc {
                return self.abandon(&mut reqs[..posted], e);
            }
            posted += 1;
        }
        self.wait_all(&mut reqs[..posted], deadline)
    }

    /// Lets posted requests complete in the background (their buffers are
    /// never freed) and returns `e`.
    fn abandon(
        &mut self,
        reqs: &mut [ffi::MPI_Request],
        e: TransportError,
    ) -> Result<(), TransportError> {
        for r in reqs.iter_mut() {
            // SAFETY: requests of ours, active.
            unsafe { ffi::MPI_Request_free(r) };
        }
        self.abandoned = true;
        Err(e)
    }

    /// Poll requests with MPI_Testall until all complete or `deadline`
    /// passes (then they are freed and the buffers abandoned).
    fn wait_all(
        &mut self,
        reqs: &mut [ffi::MPI_Request],
        deadline: Instant,
    ) -> Result<(), TransportError> {
        let test = |reqs: &mut [ffi::MPI_Request], done: &mut c_int| {
            // SAFETY: `reqs` are requests of ours (active or null).
            let rc = unsafe {
                ffi::MPI_Testall(
                    reqs.len() as c_int,
                    reqs.as_mut_ptr(),
                    done,
                    ffi::RSMPI_STATUSES_IGNORE,
                )
            };
            check(rc, "MPI_Testall")
        };
        if self.poll_until(reqs, deadline, test)? {
            Ok(())
        } else {
            Err(TransportError::Timeout(
                deadline.saturating_duration_since(Instant::now()),
            ))
        }
    }

    /// MPI_Ibarrier, polled until `deadline`.
    fn ibarrier(&mut self, deadline: Instant) -> Result<(), TransportError> {
        // SAFETY: a plain handle value.
        let mut req = unsafe { [ffi::RSMPI_REQUEST_NULL] };
        // SAFETY: our communicator; valid out-pointer.
        check(
            unsafe { ffi::MPI_Ibarrier(self.comm, &mut req[0]) },
            "MPI_Ibarrier",
        )?;
        self.wait_all(&mut req, deadline)
    }

    /// Element-wise maximum of `vals` over all ranks (MPI_Iallreduce, polled
    /// until `deadline`); every rank gets the result. On a timeout both
    /// buffers are leaked (MPI may still use them).
    fn iallreduce_max(
        &mut self,
        vals: Vec<f64>,
        deadline: Instant,
    ) -> Result<Vec<f64>, TransportError> {
        let mut out = vec![0f64; vals.len()];
        // SAFETY: a plain handle value.
        let mut req = unsafe { [ffi::RSMPI_REQUEST_NULL] };
        // SAFETY: both buffers hold vals.len() doubles and live until the
        // request completes, or forever if it is abandoned (below).
        check(
            unsafe {
                ffi::MPI_Iallreduce(
                    vals.as_ptr() as *const c_void,
                    out.as_mut_ptr() as *mut c_void,
                    vals.len() as c_int,
                    ffi::RSMPI_DOUBLE,
                    ffi::RSMPI_MAX,
                    self.comm,
                    &mut req[0],
                )
            },
            "MPI_Iallreduce",
        )?;
        if let Err(e) = self.wait_all(&mut req, deadline) {
            std::mem::forget(vals);
            std::mem::forget(out);
            return Err(e);
        }
        Ok(out)
    }

    /// Poll `req` with MPI_Test until it completes or `deadline` passes
    /// (then it is freed and the buffers abandoned).
    fn wait_request(
        &mut self,
        req: &mut ffi::MPI_Request,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), TransportError> {
        let test = |reqs: &mut [ffi::MPI_Request], done: &mut c_int| {
            // SAFETY: `reqs` is the one active request of ours; status is
            // ignored.
            let rc = unsafe { ffi::MPI_Test(&mut reqs[0], done, ffi::RSMPI_STATUS_IGNORE) };
            check(rc, "MPI_Test")
        };
        if self.poll_until(std::slice::from_mut(req), deadline, test)? {
            Ok(())
        } else {
            Err(TransportError::Timeout(timeout))
        }
    }

    /// Calls `test` on `reqs` until it reports them all complete (`true`)
    /// or, looked at every 64 polls, `deadline` has passed (`false`): then
    /// the requests still active are freed and the buffers abandoned.
    fn poll_until(
        &mut self,
        reqs: &mut [ffi::MPI_Request],
        deadline: Instant,
        mut test: impl FnMut(&mut [ffi::MPI_Request], &mut c_int) -> Result<(), TransportError>,
    ) -> Result<bool, TransportError> {
        let mut spins = 0u32;
        loop {
            let mut done: c_int = 0;
            test(reqs, &mut done)?;
            if done != 0 {
                return Ok(true);
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(64) && Instant::now() >= deadline {
                for r in reqs.iter_mut() {
                    // SAFETY: a null request is skipped; freeing an active
                    // one lets it complete in the background. Its buffer is
                    // never freed (abandoned).
                    unsafe {
                        if *r != ffi::RSMPI_REQUEST_NULL {
                            ffi::MPI_Request_free(r);
                        }
                    }
                }
                self.abandoned = true;
                return Ok(false);
            }
        }
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        if self.abandoned {
            std::mem::forget(std::mem::take(&mut self.tx));
            std::mem::forget(std::mem::take(&mut self.rx));
        }
        // SAFETY: `comm` is our duplicate; MPI is still initialized as long as
        // the Universe outlives the transport (callers drop it first). If MPI
        // was already finalized, skip.
        unsafe {
            let mut finalized: c_int = 0;
            ffi::MPI_Finalized(&mut finalized);
            if finalized == 0 {
                ffi::MPI_Comm_free(&mut self.comm);
            }
        }
    }
}

impl Transport for MpiTransport {
    fn caps(&self) -> Caps {
        Caps {
            peers: self.size.saturating_sub(1),
            ..Caps::single(super::Kind::Mpi, self.opts.max_msg_bytes)
        }
    }

    fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
        self.post(peer, bytes, meta, false)
    }

    fn recv(
        &mut self,
        from: Option<PeerId>,
        timeout: Duration,
    ) -> Result<Received, TransportError> {
        let source = match from {
            Some(p) => self.peer_rank(p).ok_or(TransportError::NoPeer(p))? as c_int,
            // SAFETY: a plain constant.
            None => unsafe { ffi::RSMPI_ANY_SOURCE },
        };
        // SAFETY: a plain constant.
        let any_tag = unsafe { ffi::RSMPI_ANY_TAG };
        let Matched {
            bytes,
            tag,
            src_rank,
            found_at,
        } = self.matched_recv(source, any_tag, timeout)?;
        let clock = self.opts.clock;
        let overhead_ns = clock.to_ns(clock.now().wrapping_sub(found_at));
        let peer = self
            .rank_peer(src_rank)
            .ok_or_else(|| TransportError::Protocol(format!("message from rank {src_rank}")))?;
        if tag & TAG_STOP != 0 && tag & TAG_ANSWER == 0 {
            return Err(TransportError::PeerGone(format!(
                "rank {src_rank} ended the session"
            )));
        }
        self.counters.received(bytes);
        Ok(Received {
            peer,
            bytes,
            meta: Meta {
                answer: tag & TAG_ANSWER != 0,
                report_ns: (tag >> TAG_REPORT_SHIFT).max(0) as u32,
            },
            overhead_ns,
        })
    }

    fn counters(&self) -> Counters {
        self.counters
    }
}

impl AllRanks for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.size
    }
    fn barrier(&mut self, deadline: Instant) -> Result<(), TransportError> {
        self.ibarrier(deadline)
    }
    fn exchange(
        &mut self,
        partner: usize,
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        self.exchange_step(partner, bytes, deadline)
    }
    fn concurrent(
        &mut self,
        to: &[usize],
        from: &[usize],
        bytes: usize,
        deadline: Instant,
    ) -> Result<(), TransportError> {
        self.concurrent_step(to, from, bytes, deadline)
    }
    fn max_over_ranks(
        &mut self,
        vals: Vec<f64>,
        deadline: Instant,
    ) -> Result<Vec<f64>, TransportError> {
        self.iallreduce_max(vals, deadline)
    }
}

/// Every rank opens the same communicator (MPI_Comm_dup is collective):
/// the driver is rank 0, the others answer it.
impl Open for MpiTransport {
    fn driver(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let d = MpiOptions::default();
        Ok(MpiTransport::world(MpiOptions {
            max_msg_bytes: spec.options.max_msg_bytes.unwrap_or(d.max_msg_bytes),
            clock: spec.options.clock,
            ..d
        })?)
    }

    fn responder(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        Self::driver(spec, rdv)
    }
}
