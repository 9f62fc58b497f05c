//! An in-process [`Mpi`] over threads, for the algorithms' unit tests: one
//! thread per rank, messages through shared mailboxes, a few datatypes and
//! operations.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Condvar, Mutex};

use crate::mpi::{Envelope, Mpi, MpiError, Raw, Slot, TypeInfo};

pub const BYTE: Raw = 1;
pub const I32: Raw = 2;
pub const I64: Raw = 3;
pub const F64: Raw = 4;

pub const SUM: Raw = 1;
pub const MAX: Raw = 2;
pub const MIN: Raw = 3;
pub const BAND: Raw = 4;

fn size_of(t: Raw) -> usize {
    match t {
        BYTE => 1,
        I32 => 4,
        _ => 8,
    }
}

/// (communicator, source, destination, tag).
type Key = (Raw, usize, usize, i32);

/// Messages in flight: payloads in order per key.
#[derive(Default)]
pub struct World {
    boxes: Mutex<HashMap<Key, VecDeque<Vec<u8>>>>,
    cv: Condvar,
}

struct Pending {
    buf: *mut u8,
    cap: usize,
    key: Key,
}

/// One rank.
pub struct Fake {
    pub world: Arc<World>,
    pub rank: usize,
    pub size: usize,
    pending: Mutex<Vec<Option<Pending>>>,
    /// Datatype layouts asked of this "MPI" (the cache's tests).
    pub type_lookups: std::sync::atomic::AtomicUsize,
    /// Messages this rank sent.
    pub sends: std::sync::atomic::AtomicUsize,
    /// Whether [`Mpi::comm_dup_forced`] writes its variables, and the
    /// duplicates made and communicators freed (the alternatives' tests).
    pub forced_ok: bool,
    pub dups: std::sync::atomic::AtomicUsize,
    pub frees: std::sync::atomic::AtomicUsize,
    /// Whether `allreduce_min` reduces over the ranks ([`run`]'s do) or
    /// returns this rank's value (a rank alone in a test).
    pub together: bool,
    /// The broadcast of this rank's (counted from 0) that fails, nothing
    /// received (usize::MAX: none), and the broadcasts made.
    pub fail_bcast: std::sync::atomic::AtomicUsize,
    bcasts: std::sync::atomic::AtomicUsize,
}

// SAFETY: the raw pointers in `pending` belong to the rank's own thread
// (the one that posted the receive and waits for it).
unsafe impl Sync for Fake {}

impl Fake {
    pub fn new(world: Arc<World>, rank: usize, size: usize) -> Fake {
        Fake {
            world,
            rank,
            size,
            pending: Mutex::new(Vec::new()),
            type_lookups: Default::default(),
            sends: Default::default(),
            forced_ok: false,
            dups: Default::default(),
            frees: Default::default(),
            together: false,
            fail_bcast: usize::MAX.into(),
            bcasts: Default::default(),
        }
    }
}

fn combine<T: Copy>(a: &mut [T], b: &[T], f: impl Fn(T, T) -> T) {
    for (x, y) in a.iter_mut().zip(b) {
        *x = f(*y, *x);
    }
}

impl Mpi for Fake {
    fn comm_world(&self) -> Raw {
        1
    }
    fn type_byte(&self) -> Raw {
        BYTE
    }
    fn in_place(&self) -> usize {
        1
    }
    fn comm_size(&self, _: Raw) -> Result<usize, MpiError> {
        Ok(self.size)
    }
    fn comm_rank(&self, _: Raw) -> Result<usize, MpiError> {
        Ok(self.rank)
    }
    fn comm_is_inter(&self, _: Raw) -> Result<bool, MpiError> {
        Ok(false)
    }
    fn comm_dup(&self, c: Raw) -> Result<Raw, MpiError> {
        Ok(c + 1000)
    }
    fn comm_free(&self, _: Raw) -> Result<(), MpiError> {
        self.frees
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn comm_dup_forced(
        &self,
        c: Raw,
        cvars: &[(String, i32)],
    ) -> (Option<Raw>, Result<(), MpiError>) {
        assert!(!cvars.is_empty());
        let n = self.dups.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let forced = if self.forced_ok {
            Ok(())
        } else {
            Err(MpiError(-1))
        };
        (Some(c + 2000 + n), forced)
    }
    fn world_ranks(&self, _: Raw, out: &mut [i32]) -> Result<(), MpiError> {
        for (i, o) in out.iter_mut().enumerate() {
            *o = i as i32;
        }
        Ok(())
    }
    fn keyval_create(&self, _: extern "C" fn(*mut c_void)) -> Result<i32, MpiError> {
        Ok(1)
    }
    fn attr_get(&self, _: Raw, _: i32) -> Result<Option<*mut c_void>, MpiError> {
        Ok(None)
    }
    fn attr_set(&self, _: Raw, _: i32, _: *mut c_void) -> Result<(), MpiError> {
        Ok(())
    }
    fn type_info(&self, t: Raw) -> Result<TypeInfo, MpiError> {
        self.type_lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let s = size_of(t);
        Ok(TypeInfo {
            size: s,
            extent: s,
            data_end: s,
            contiguous: true,
            predefined: true,
            class: match t {
                F64 => crate::mpi::TypeClass::Float,
                BYTE => crate::mpi::TypeClass::Byte,
                _ => crate::mpi::TypeClass::CInteger,
            },
        })
    }
    fn op_kind(&self, op: Raw) -> u32 {
        // The shim's numbering (ngc_op_kind): SUM 1, MAX 3, MIN 4, BAND 8.
        match op {
            SUM => 1,
            MAX => 3,
            MIN => 4,
            BAND => 8,
            _ => 0,
        }
    }
    unsafe fn reduce_local(
        &self,
        inbuf: *const u8,
        inout: *mut u8,
        count: usize,
        t: Raw,
        op: Raw,
    ) -> Result<(), MpiError> {
        macro_rules! go {
            ($ty:ty) => {{
                // SAFETY: the caller's guarantee: count elements each.
                let (a, b) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(inout as *mut $ty, count),
                        std::slice::from_raw_parts(inbuf as *const $ty, count),
                    )
                };
                match op {
                    SUM => combine(a, b, |x, y| x + y),
                    MAX => combine(a, b, |x, y| if x > y { x } else { y }),
                    MIN => combine(a, b, |x, y| if x < y { x } else { y }),
                    _ => return Err(MpiError(99)),
                }
            }};
        }
        match t {
            I32 => {
                // SAFETY: as above.
                let (a, b) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(inout as *mut i32, count),
                        std::slice::from_raw_parts(inbuf as *const i32, count),
                    )
                };
                match op {
                    SUM => combine(a, b, |x, y| x.wrapping_add(y)),
                    MAX => combine(a, b, |x, y| x.max(y)),
                    MIN => combine(a, b, |x, y| x.min(y)),
                    BAND => combine(a, b, |x, y| x & y),
                    _ => return Err(MpiError(99)),
                }
            }
            I64 => go!(i64),
            F64 => go!(f64),
            _ => return Err(MpiError(98)),
        }
        Ok(())
    }
    unsafe fn pack(
        &self,
        inbuf: *const u8,
        count: usize,
        t: Raw,
        out: *mut u8,
        out_len: usize,
        _: Raw,
    ) -> Result<usize, MpiError> {
        let n = count * size_of(t);
        assert!(n <= out_len);
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping(inbuf, out, n) };
        Ok(n)
    }
    unsafe fn unpack(
        &self,
        inbuf: *const u8,
        in_len: usize,
        out: *mut u8,
        count: usize,
        t: Raw,
        _: Raw,
    ) -> Result<(), MpiError> {
        let n = count * size_of(t);
        assert!(n <= in_len);
        // SAFETY: the caller's guarantee.
        unsafe { std::ptr::copy_nonoverlapping(inbuf, out, n) };
        Ok(())
    }
    unsafe fn isend(&self, buf: *const u8, e: Envelope, slot: &mut Slot) -> Result<(), MpiError> {
        assert!(e.peer < self.size, "send to {} of {}", e.peer, self.size);
        self.sends
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let n = e.count * size_of(e.datatype);
        // SAFETY: the caller's guarantee: n readable bytes.
        let data = unsafe { std::slice::from_raw_parts(buf, n) }.to_vec();
        let mut boxes = self.world.boxes.lock().unwrap();
        boxes
            .entry((e.comm, self.rank, e.peer, e.tag))
            .or_default()
            .push_back(data);
        self.world.cv.notify_all();
        *slot = 0;
        Ok(())
    }
    unsafe fn irecv(&self, buf: *mut u8, e: Envelope, slot: &mut Slot) -> Result<(), MpiError> {
        assert!(
            e.peer < self.size,
            "receive from {} of {}",
            e.peer,
            self.size
        );
        let mut p = self.pending.lock().unwrap();
        p.push(Some(Pending {
            buf,
            cap: e.count * size_of(e.datatype),
            key: (e.comm, e.peer, self.rank, e.tag),
        }));
        *slot = p.len() as u64;
        Ok(())
    }
    fn waitall(&self, slots: &mut [Slot], _polite: bool) -> Result<(), MpiError> {
        // Receives complete in posting order per key (MPI's matching).
        let mut order: Vec<u64> = slots.iter().copied().filter(|&s| s != 0).collect();
        order.sort_unstable();
        for s in order {
            let pend = self.pending.lock().unwrap()[s as usize - 1]
                .take()
                .expect("waited twice");
            let mut boxes = self.world.boxes.lock().unwrap();
            let data = loop {
                if let Some(d) = boxes.get_mut(&pend.key).and_then(|q| q.pop_front()) {
                    break d;
                }
                let (b, timeout) = self
                    .world
                    .cv
                    .wait_timeout(boxes, std::time::Duration::from_secs(20))
                    .unwrap();
                boxes = b;
                assert!(
                    !timeout.timed_out(),
                    "rank {} waits forever for {:?}",
                    self.rank,
                    pend.key
                );
            };
            assert!(
                data.len() <= pend.cap,
                "message of {} bytes into {}",
                data.len(),
                pend.cap
            );
            // SAFETY: the receive buffer holds cap ≥ len bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), pend.buf, data.len()) };
        }
        Ok(())
    }
    fn allgather_bytes(&self, send: &[u8], recv: &mut [u8], comm: Raw) -> Result<(), MpiError> {
        // Every rank sends its block to every other (a tag of its own).
        const TAG: i32 = -8;
        let n = send.len();
        assert_eq!(recv.len(), n * self.size, "allgather into the wrong size");
        recv[self.rank * n..(self.rank + 1) * n].copy_from_slice(send);
        let mut slots = vec![0; 2 * self.size];
        let e = |peer| Envelope {
            count: n,
            datatype: BYTE,
            peer,
            tag: TAG,
            comm,
        };
        for (r, block) in recv.chunks_mut(n.max(1)).enumerate() {
            if r == self.rank || n == 0 {
                continue;
            }
            // SAFETY: `send` and each block hold n bytes and live until
            // the waitall below.
            unsafe {
                self.isend(send.as_ptr(), e(r), &mut slots[2 * r])?;
                self.irecv(block.as_mut_ptr(), e(r), &mut slots[2 * r + 1])?;
            }
        }
        self.waitall(&mut slots, false)
    }
    fn allreduce_min(&self, v: i32, comm: Raw) -> Result<i32, MpiError> {
        if !self.together {
            return Ok(v);
        }
        let mut all = vec![0u8; 4 * self.size];
        self.allgather_bytes(&v.to_le_bytes(), &mut all, comm)?;
        Ok(all
            .chunks(4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .fold(v, i32::min))
    }
    fn allreduce_sum_f64x2(&self, v: [f64; 2], comm: Raw) -> Result<[f64; 2], MpiError> {
        // Every rank sends its pair to every other (a tag of its own).
        const TAG: i32 = -7;
        let mine: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        let mut theirs = vec![[0u8; 16]; self.size];
        let mut slots = vec![0; 2 * self.size];
        for r in (0..self.size).filter(|&r| r != self.rank) {
            // SAFETY: `mine` and `theirs[r]` hold 16 bytes each and live
            // until the waitall below.
            unsafe {
                let e = Envelope {
                    count: 16,
                    datatype: BYTE,
                    peer: r,
                    tag: TAG,
                    comm,
                };
                self.isend(mine.as_ptr(), e, &mut slots[2 * r])?;
                self.irecv(theirs[r].as_mut_ptr(), e, &mut slots[2 * r + 1])?;
            }
        }
        self.waitall(&mut slots, false)?;
        let mut sum = v;
        for (_, b) in theirs.iter().enumerate().filter(|&(r, _)| r != self.rank) {
            for (i, s) in sum.iter_mut().enumerate() {
                *s += f64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
            }
        }
        Ok(sum)
    }
    fn bcast_bytes(&self, buf: &mut [u8], root: usize, comm: Raw) -> Result<(), MpiError> {
        // The root sends to every other rank (a tag of its own).
        const TAG: i32 = -9;
        if self.bcasts.fetch_add(1, SeqCst) == self.fail_bcast.load(SeqCst) {
            return Err(MpiError(-1));
        }
        let mut slots = vec![0; self.size];
        let count = buf.len();
        let e = |peer| Envelope {
            count,
            datatype: BYTE,
            peer,
            tag: TAG,
            comm,
        };
        if self.rank == root {
            for r in (0..self.size).filter(|&r| r != root) {
                // SAFETY: `buf` lives until the waitall below.
                unsafe { self.isend(buf.as_ptr(), e(r), &mut slots[r])? };
            }
        } else {
            // SAFETY: `buf` holds its length and lives until the waitall.
            unsafe { self.irecv(buf.as_mut_ptr(), e(root), &mut slots[root])? };
        }
        self.waitall(&mut slots, false)
    }
    fn library_version(&self) -> String {
        "fake".into()
    }
    fn abi_name(&self) -> &'static str {
        "fake"
    }
    fn thread_multiple(&self) -> bool {
        // One thread per rank, in one process.
        true
    }
}

/// Runs `f(rank's MPI, rank)` on `p` threads and returns their results.
pub fn run<T: Send + 'static>(p: usize, f: impl Fn(&Fake) -> T + Send + Sync + 'static) -> Vec<T> {
    let world = Arc::new(World::default());
    let f = Arc::new(f);
    let handles: Vec<_> = (0..p)
        .map(|r| {
            let world = world.clone();
            let f = f.clone();
            std::thread::spawn(move || {
                let mut m = Fake::new(world, r, p);
                m.together = true;
                f(&m)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("rank panicked"))
        .collect()
}
