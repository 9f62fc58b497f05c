//! The process's libngcoll state and each communicator's.
//!
//! [`init`] runs inside MPI_Init / MPI_Init_thread, once: it reads the
//! settings, opens the segment, learns which world ranks share a node (one
//! allgather of host names and forced-choice digests) and agrees with
//! every other rank whether the library is on (one allreduce: a rank
//! without a usable segment or attribute keyval, or whose
//! NETGAUGE_COLL_FORCE differs from another's, turns it off everywhere,
//! since every rank must take the same path in every collective), and in
//! a second allreduce whether every rank may run the library's other
//! algorithms ([`before_init`] turns Open MPI's dynamic rules on for them
//! first). The result is set once into a process-wide `OnceLock`, and
//! never changes after; an interposed MPI_Bcast has no other way to reach
//! it. The only mutable parts are the plan cache and the list of
//! communicators for the finalize log, behind mutexes that are taken when
//! a communicator is set up or at MPI_Finalize, never per call, two
//! per-thread caches read per call (the last communicator's state, the
//! layouts of predefined datatypes), and a communicator's duplicates for
//! the library's other algorithms, each made at the first call that needs
//! it (an atomic per entry, [`CommState::alt_comm`]).
//!
//! A communicator is set up at its first intercepted collective, which
//! every one of its ranks enters ([`state`]): its shadow (a duplicate, so
//! ngcoll's messages never match the program's), its placement, and its
//! plan, built by its rank 0 and broadcast (a rank that does not receive it
//! intact turns every rank to the library's own, in the allreduce that
//! agrees the trials' length). One that spans another job's ranks, meets
//! the cap on open shadows, or whose duplicate the library refuses passes
//! through instead (`setup`). The state hangs on the communicator as an
//! MPI attribute, released when the communicator is freed.

use std::ffi::c_void;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use netgauge::select::{Algorithm, Collective, Library, ViewOptions};
use netgauge::{EntryData, Reader};

use crate::config::{Config, Force, Forced, Mode};
use crate::gate;
use crate::host::{hostname, measure_gamma, online_cores, sched_slice_ns};
use crate::mpi::{Mpi, Raw};
use crate::plan::share::{self, Inputs};
use crate::plan::{self, Alt, Plan, Setup, Slot, CLASSES, COLLECTIVES, LIBRARY};
use crate::trial::{Trial, Trials};

mod comm_setup;
mod start;

use comm_setup::{make_alt, setup};
pub use start::{before_init, init};

/// Host names are compared on this many bytes.
const HOST_BYTES: usize = 64;
/// What each rank gives MPI_Init's allgather: its host name and the digest
/// of its NETGAUGE_COLL_FORCE.
const GATHER_BYTES: usize = HOST_BYTES + 8;

/// A digest of a forced choice, alike on every rank of one program (one
/// build of this library, std's hasher with its fixed keys).
fn force_digest(f: &Force) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    format!("{f:?}").hash(&mut h);
    h.finish()
}

/// Largest message size a plan decides (larger ones keep its decision):
/// beyond it the simulation of a plan costs more than it is worth.
pub const PLAN_MAX_BYTES: u64 = 64 << 20;

/// The process-wide state, set once at MPI_Init.
pub struct Runtime {
    pub cfg: Config,
    /// False: every collective passes through (the agreement of `init`).
    pub enabled: bool,
    keyval: i32,
    reader: Option<Reader>,
    /// Host name of every node, and the node of every world rank.
    hosts: Vec<String>,
    world_node: Vec<u32>,
    my_node: u32,
    /// Online cores of this node and the job's ranks on it.
    cores: usize,
    ranks_here: usize,
    polite: bool,
    lib: Library,
    /// The library's other algorithms may be run (every rank agreed at
    /// MPI_Init: `NETGAUGE_COLL_LIBRARY_ALGS`, and the library takes a
    /// forced algorithm per communicator, [`Mpi::library_algorithms`]).
    library_algs: bool,
    spin_slice_ns: f64,
    gamma: OnceLock<f64>,
    /// First touch of fresh memory, ns per byte (measured once).
    fresh: OnceLock<f64>,
    plans: Mutex<Vec<CachedPlan>>,
    comms: Mutex<Vec<Arc<CommState>>>,
    next_comm: AtomicU64,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime if MPI_Init went through libngcoll and it is on (whether
/// it is on is published once at MPI_Init, in [`gate`]).
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    RUNTIME.get().filter(|_| gate::on())
}

/// The runtime whatever its state (finalize, diagnostics).
pub fn runtime_any() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// A plan built for one communicator shape, with where it came from.
type CachedPlan = (PlanKey, Arc<Plan>, String);

/// Plans a process keeps for the shapes it has planned (about 12 KiB
/// each): a program that makes communicators of ever new sizes keeps the
/// latest, and a shape that fell out is planned again.
const MAX_CACHED_PLANS: usize = 64;

/// Keeps `entry` in the plan cache, dropping the oldest past
/// [`MAX_CACHED_PLANS`] (their communicators keep their own reference).
fn cache_plan(cache: &mut Vec<CachedPlan>, entry: CachedPlan) {
    if cache.len() >= MAX_CACHED_PLANS {
        cache.remove(0);
    }
    cache.push(entry);
}

/// Plans are shared by communicators of the same shape.
#[derive(Clone, Debug, PartialEq)]
struct PlanKey {
    ranks: usize,
    one_node: bool,
    peer: String,
    cores: usize,
}

/// One communicator's state.
#[repr(C, align(64))]
pub struct CommState {
    // What every call reads, first (`repr(C)` keeps the order, the
    // alignment starts it on a cache line of its own after the Arc's
    // counts): one line for a call the plan gives to the library's own.
    /// The communicator has been freed (its attribute released): a cached
    /// pointer to this state must not be used for its handle any more.
    freed: AtomicBool,
    log: bool,
    /// The shadow communicator (None: this communicator always passes
    /// through: an inter-communicator, or a single rank).
    pub shadow: Option<Raw>,
    pub plan: Arc<Plan>,
    /// Per entry of the plan's [`Plan::alts`], the duplicate on which the
    /// library runs that algorithm: [`ALT_NOT_MADE`] until the first call
    /// that needs it makes it, [`ALT_REFUSED`] if that failed on some rank,
    /// else its handle, [`ALT_FREED`] once freed with the shadow.
    alt_comms: Vec<AtomicUsize>,
    force: Force,
    // The rest.
    pub id: u64,
    pub size: usize,
    pub rank: usize,
    /// The shadow has been freed.
    closed: AtomicBool,
    pub polite: bool,
    pub nodes: usize,
    /// Where the plan's parameters came from (for the log).
    pub source: String,
    scratch: Mutex<Vec<u8>>,
    pub(crate) calls: Vec<AtomicU64>,
    /// Per collective: bit c set where class c goes to the library's own
    /// without a trial (the pass-through gate's bits, [`library_masks`]).
    library: [u64; COLLECTIVES],
    /// Per collective and class: the trial of the plan's choice of ours
    /// against the library's own (empty: no trials, `NETGAUGE_COLL_TRIAL=0`
    /// or a forced choice).
    trials: Trials,
    cycle: AtomicU64,
}

/// Scratch memory of a call, borrowed from its communicator.
pub struct Scratch<'a> {
    guard: Option<std::sync::MutexGuard<'a, Vec<u8>>>,
    own: Vec<u8>,
}

impl Scratch<'_> {
    pub fn ptr(&mut self) -> *mut u8 {
        match &mut self.guard {
            Some(g) => g.as_mut_ptr(),
            None => self.own.as_mut_ptr(),
        }
    }
}

impl CommState {
    /// The communicator has been freed: its handle may name another now.
    #[inline]
    pub(crate) fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }

    /// The shadow has been freed (with the communicator, or at
    /// MPI_Finalize, before which a collective may still come from a
    /// delete callback): a call takes the library's own.
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn passthrough(id: u64, size: usize, rank: usize) -> CommState {
        CommState {
            id,
            size,
            rank,
            shadow: None,
            closed: AtomicBool::new(true),
            freed: AtomicBool::new(false),
            polite: false,
            nodes: 1,
            plan: Arc::new(Plan::library()),
            alt_comms: Vec::new(),
            library: [!0; COLLECTIVES],
            source: String::new(),
            scratch: Mutex::new(Vec::new()),
            calls: Vec::new(),
            trials: Trials::none(),
            cycle: AtomicU64::new(0),
            log: false,
            force: Force::None,
        }
    }

    /// A state with the gate's bits `library` and, with `log`, the log's
    /// counters (the gate's tests).
    #[cfg(test)]
    pub(crate) fn for_gate(library: [u64; COLLECTIVES], log: bool) -> CommState {
        let mut st = CommState::passthrough(0, 2, 0);
        st.library = library;
        if log {
            st.calls = (0..COLLECTIVES * CLASSES)
                .map(|_| AtomicU64::new(0))
                .collect();
        }
        st
    }

    /// A state deciding by `plan` and `force` (the gate's tests).
    #[cfg(test)]
    pub(crate) fn for_plan(plan: Plan, force: Force) -> CommState {
        let mut st = CommState::passthrough(0, 2, 0);
        st.library = library_masks(&plan, &force);
        st.plan = Arc::new(plan);
        st.force = force;
        st
    }

    /// The log's count of `coll` calls in `class` (the gate's tests).
    #[cfg(test)]
    pub(crate) fn counted(&self, coll: Collective, class: usize) -> u64 {
        self.calls[coll as usize * CLASSES + class].load(Ordering::Relaxed)
    }

    /// Per collective: the classes that go to the library's own without a
    /// trial, as bits.
    pub(crate) fn library_masks(&self) -> [u64; COLLECTIVES] {
        self.library
    }

    /// The log's per-class call counters (`COLLECTIVES * CLASSES` of them,
    /// collective-major), or null when not logging.
    pub(crate) fn counts_ptr(&self) -> *mut AtomicU64 {
        if self.calls.len() == COLLECTIVES * CLASSES {
            self.calls.as_ptr() as *mut AtomicU64
        } else {
            std::ptr::null_mut()
        }
    }

    /// `bytes` of scratch, kept by the communicator for its next calls
    /// (collectives on one communicator never run concurrently; if they
    /// do, erroneously, the second gets memory of its own).
    pub fn scratch(&self, bytes: usize) -> Scratch<'_> {
        match self.scratch.try_lock() {
            Ok(mut g) => {
                if g.len() < bytes {
                    g.resize(bytes, 0);
                }
                Scratch {
                    guard: Some(g),
                    own: Vec::new(),
                }
            }
            Err(_) => Scratch {
                guard: None,
                own: vec![0; bytes],
            },
        }
    }

    /// The trial of `coll` at `bytes`' class, if trials are on.
    #[inline]
    pub fn trial(&'static self, coll: Collective, bytes: u64) -> Option<&'static Trial> {
        self.trials.get(coll, plan::class_of(bytes))
    }

    /// The trial of `coll` in class `class` (the log).
    pub(crate) fn trial_of(&self, coll: Collective, class: usize) -> Option<&Trial> {
        self.trials.get(coll, class)
    }

    /// Counts a call of `coll` with `bytes` in its class (log mode).
    #[inline]
    pub fn count(&self, coll: Collective, bytes: u64) {
        if self.log {
            if let Some(c) = self
                .calls
                .get(coll as usize * CLASSES + plan::class_of(bytes))
            {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The decision for one call of `coll` with `bytes`.
    #[inline]
    pub fn pick(&self, coll: Collective, bytes: u64) -> Slot {
        self.count(coll, bytes);
        match &self.force {
            Force::None => *self.plan.get(coll, bytes),
            Force::Cycle => self.cycled(coll, bytes),
            Force::Fixed(list) => {
                let mut s = *self.plan.get(coll, bytes);
                match list.iter().find(|(c, _)| *c == coll) {
                    Some((_, Forced::Library)) => s.alg = LIBRARY,
                    Some(&(_, Forced::Ours(alg, seg))) => {
                        s.alg = alg as u32;
                        // No segment given: the plan's (0, the whole
                        // message, where the plan has none).
                        if seg != 0 {
                            s.seg_bytes = u32::try_from(seg).unwrap_or(u32::MAX);
                        }
                    }
                    // The set-up wrote it into the plan (`force_alts`).
                    Some((_, Forced::LibraryAlg { .. })) | None => {}
                }
                s
            }
        }
    }

    /// Frees (or disconnects) the communicators of the library's other
    /// algorithms made so far, with the shadow.
    fn free_alt_comms<M: Mpi + ?Sized>(&self, m: &M, disconnect: bool) {
        for a in &self.alt_comms {
            // Only a made one changes (to freed); one never needed stays
            // so for the log, and `alt_comm` makes none once the shadow
            // is closed.
            let c = match a.load(Ordering::Relaxed) {
                ALT_NOT_MADE | ALT_REFUSED | ALT_FREED => continue,
                c => {
                    a.store(ALT_FREED, Ordering::Relaxed);
                    c
                }
            };
            let _ = if disconnect {
                m.comm_disconnect(c)
            } else {
                m.comm_free(c)
            };
            ALTS_OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether entry `k` of the plan's alternatives has its duplicate
    /// (Some(true)), could not have it (Some(false)), or has not been
    /// needed yet (None). For the log.
    pub fn alt_made(&self, k: usize) -> Option<bool> {
        match self.alt_comms.get(k)?.load(Ordering::Relaxed) {
            ALT_NOT_MADE => None,
            ALT_REFUSED => Some(false),
            _ => Some(true),
        }
    }

    /// Where `slot` names another of the library's algorithms: the
    /// communicator on which the library runs it, made (collectively: every
    /// rank of the communicator is in this call, which every rank gives the
    /// same slot) at the first call that needs it; the caller's own
    /// communicator where it could not be made on every rank (the library's
    /// own choice). None for any other slot.
    pub fn alt_comm<M: Mpi + ?Sized>(&self, m: &M, slot: &Slot, comm: Raw) -> Option<Raw> {
        let k = slot.alt()?;
        let Some(a) = self.alt_comms.get(k) else {
            return Some(comm);
        };
        match a.load(Ordering::Relaxed) {
            ALT_NOT_MADE => {}
            ALT_REFUSED | ALT_FREED => return Some(comm),
            c => return Some(c),
        }
        let (Some(shadow), Some(alt)) = (self.shadow, self.plan.alts().get(k)) else {
            return Some(comm);
        };
        // A closed shadow (MPI_Finalize freed it): the library's own, and
        // nothing recorded (the entry was not refused).
        if self.is_closed() {
            return Some(comm);
        }
        let made = make_alt(m, shadow, alt);
        a.store(made.unwrap_or(ALT_REFUSED), Ordering::Relaxed);
        Some(made.unwrap_or(comm))
    }

    /// `NETGAUGE_COLL_FORCE=cycle`: call n of this communicator takes
    /// candidate n mod (k + 1) of the k algorithms it can run for `coll`
    /// and the library's own; the chain's segment rotates as well. Every
    /// rank counts the same calls, so every rank picks the same.
    fn cycled(&self, coll: Collective, bytes: u64) -> Slot {
        let n = self.cycle.fetch_add(1, Ordering::Relaxed) as usize;
        let algs: Vec<Algorithm> = plan::runnable(self.size)
            .into_iter()
            .filter(|a| a.collective() == coll)
            .collect();
        let mut s = Slot::library();
        if let Some(&a) = algs.get(n % (algs.len() + 1)) {
            s.alg = a as u32;
            let segs = [1024u64, 4096, 65536, bytes.max(1)];
            s.seg_bytes = segs[(n / (algs.len() + 1)) % segs.len()] as u32;
        }
        s
    }
}

/// Per collective, bit c set where [`CommState::pick`] gives class c to the
/// library's own under `plan` and `force` (so no trial either: trials are
/// only where the plan chose ours). Classes beyond an MPI `int` of bytes
/// and a choice per call (`cycle`) are left clear: the full path decides.
pub(crate) fn library_masks(plan: &Plan, force: &Force) -> [u64; COLLECTIVES] {
    let mut masks = [0u64; COLLECTIVES];
    if *force == Force::Cycle {
        return masks;
    }
    for (coll, mask) in Collective::ALL.into_iter().zip(masks.iter_mut()) {
        let forced = match force {
            Force::Fixed(list) => list.iter().find(|(c, _)| *c == coll).map(|f| f.1),
            _ => None,
        };
        for class in 0..CLASSES {
            if plan::class_bounds(class).1 > i32::MAX as u64 {
                break;
            }
            let library = match forced {
                Some(Forced::Library) => true,
                Some(Forced::Ours(..)) => false,
                Some(Forced::LibraryAlg { .. }) | None => {
                    !plan.slot(coll, class).replaces_library()
                }
            };
            if library {
                *mask |= 1 << class;
            }
        }
    }
    masks
}

/// A heap-held state behind an MPI attribute: released by the attribute's
/// delete callback.
extern "C" fn release_state(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: every attribute value of ngcoll's keyval is an
    // `Arc::into_raw` of a CommState, released exactly once, here.
    let st = unsafe { Arc::from_raw(p as *const CommState) };
    gate::forget(Arc::as_ptr(&st));
    st.freed.store(true, Ordering::Release);
    // The shadow is freed by the free of the user communicator that
    // triggered this callback (`comm_free`, `comm_disconnect`, interposed
    // in C and in Fortran) or by `finalize`, before MPI_Finalize frees the
    // attributes. A shadow still open here belongs to a communicator freed
    // past libngcoll (a binding it does not interpose): `finalize` frees it
    // (the list holds it) and the log counts it.
    if st.shadow.is_some() && !st.closed.load(Ordering::Relaxed) {
        SHADOWS_LEFT.fetch_add(1, Ordering::Relaxed);
    }
}

/// Shadows freed with their communicators, and shadows whose communicators
/// were freed past libngcoll (the log's last line).
static SHADOWS_RELEASED: AtomicU64 = AtomicU64::new(0);
/// Shadows open now, and how many may be: a program keeps every
/// communicator beyond those (MPICH's 2048 context ids less these).
static SHADOWS_OPEN: AtomicU64 = AtomicU64::new(0);
const MAX_SHADOWS: u64 = 256;
/// Communicators of the library's other algorithms open now, and how many
/// may be (Open MPI's only: its ob1 messages carry a 16-bit context id).
static ALTS_OPEN: AtomicU64 = AtomicU64::new(0);
/// Such communicators made, in all (the log's last line).
static ALTS_MADE: AtomicU64 = AtomicU64::new(0);
const MAX_ALTS_OPEN: u64 = 1024;
/// [`CommState::alt_comm`]'s states besides a handle (no Open MPI
/// communicator is at address 0, 1 or 2): not made yet, refused, made and
/// freed since.
const ALT_NOT_MADE: usize = 0;
const ALT_REFUSED: usize = 1;
const ALT_FREED: usize = 2;
static SHADOWS_LEFT: AtomicU64 = AtomicU64::new(0);

fn warn(msg: &str) {
    eprintln!("ngcoll: {msg}");
}

/// This communicator's state, set up at its first collective. None: pass
/// through (libngcoll off, or setup failed).
///
/// Called from an interposed collective on `comm`: every rank of `comm`
/// calls it in the same collective.
#[inline]
pub fn state<M: Mpi + ?Sized>(m: &M, comm: Raw) -> Option<&'static CommState> {
    find(m, comm, true)
}

/// This communicator's state if a collective has set it up (never sets it
/// up: a call that is not collective on every rank may ask).
pub fn existing_state<M: Mpi + ?Sized>(m: &M, comm: Raw) -> Option<&'static CommState> {
    find(m, comm, false)
}

#[inline]
fn find<M: Mpi + ?Sized>(m: &M, comm: Raw, set_up: bool) -> Option<&'static CommState> {
    // A state in the cache was set up with libngcoll on (it never goes off
    // again): the runtime is read only on a miss.
    if let Some(p) = crate::hot::last_state(comm) {
        if gate::wants(comm) {
            crate::hot::with_last(|st| gate::open(comm, st));
        }
        // SAFETY: see above; the 'static lifetime is never used beyond the
        // call.
        return Some(unsafe { &*p });
    }
    let rt = runtime()?;
    let st = match m.attr_get(comm, rt.keyval) {
        Ok(Some(p)) => {
            let p = p as *const CommState;
            // SAFETY: the attribute value is an Arc<CommState> held by the
            // attribute until the communicator is freed, which cannot
            // happen while this collective on it runs: take a reference of
            // our own for the cache.
            unsafe {
                Arc::increment_strong_count(p);
                Arc::from_raw(p)
            }
        }
        Ok(None) if set_up => setup(m, rt, comm)?,
        Ok(None) | Err(_) => return None,
    };
    let p = Arc::as_ptr(&st);
    gate::open(comm, &st);
    crate::hot::set_last(comm, st);
    // SAFETY: the communicator's attribute holds an Arc of the state until
    // the communicator is freed, which cannot happen during this
    // collective on it (the thread's cache holds another, unless its
    // thread-local is gone: `hot`).
    Some(unsafe { &*p })
}

/// MPI_Finalize's part (before PMPI_Finalize): every shadow communicator
/// still open freed, then the log.
pub fn finalize<M: Mpi + ?Sized>(m: &M) {
    m.release_tools();
    let Some(rt) = runtime() else { return };
    gate::close();
    let list: Vec<Arc<CommState>> = match rt.comms.lock() {
        Ok(mut l) => std::mem::take(&mut *l),
        Err(_) => return,
    };
    let mut at_finalize = 0u64;
    for st in &list {
        if let Some(sh) = st.shadow {
            if !st.closed.swap(true, Ordering::Relaxed) {
                let _ = m.comm_free(sh);
                st.free_alt_comms(m, false);
                SHADOWS_OPEN.fetch_sub(1, Ordering::Relaxed);
                at_finalize += 1;
            }
        }
    }
    if rt.cfg.mode == Mode::Log {
        let mut text = String::new();
        for st in list.iter().filter(|s| s.rank == 0 && s.log) {
            if let Some(src) = Some(&st.source).filter(|s| !s.is_empty()) {
                let _ = writeln!(
                    text,
                    "ngcoll: comm {} ({} ranks): parameters from {src}",
                    st.id, st.size
                );
            }
            text.push_str(&crate::log::lines(st, rt.lib));
        }
        if !text.is_empty() {
            eprint!("{text}");
        }
        // A line of its own, in one write (under PIPE_BUF: atomic): a
        // reader of every rank's merged output finds it whole.
        if m.comm_rank(m.comm_world()).ok() == Some(0) {
            let line = format!(
                "ngcoll: world rank 0: shadow communicators: {} released with their communicators, \
                 {at_finalize} at MPI_Finalize, {} of which after their communicators were freed \
                 past libngcoll; {} duplicates running another of the library's algorithms made, \
                 {} still open\n",
                SHADOWS_RELEASED.load(Ordering::Relaxed),
                SHADOWS_LEFT.load(Ordering::Relaxed),
                ALTS_MADE.load(Ordering::Relaxed),
                ALTS_OPEN.load(Ordering::Relaxed),
            );
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        }
    }
}

/// Frees a communicator's shadow when the program frees the communicator
/// (called by the interposed MPI_Comm_free before the library's).
pub fn comm_free<M: Mpi + ?Sized>(m: &M, comm: Raw) {
    release_shadow(m, comm, false);
}

/// Disconnects a communicator's shadow when the program disconnects the
/// communicator (called by the interposed MPI_Comm_disconnect before the
/// library's): a shadow only freed would keep the processes connected.
pub fn comm_disconnect<M: Mpi + ?Sized>(m: &M, comm: Raw) {
    release_shadow(m, comm, true);
}

fn release_shadow<M: Mpi + ?Sized>(m: &M, comm: Raw, disconnect: bool) {
    let Some(rt) = runtime() else { return };
    if let Ok(Some(p)) = m.attr_get(comm, rt.keyval) {
        // SAFETY: see `state`: the attribute still holds the Arc.
        let st = unsafe { &*(p as *const CommState) };
        st.freed.store(true, Ordering::Release);
        gate::forget(st);
        if let Some(sh) = st.shadow {
            if !st.closed.swap(true, Ordering::Relaxed) {
                SHADOWS_RELEASED.fetch_add(1, Ordering::Relaxed);
                SHADOWS_OPEN.fetch_sub(1, Ordering::Relaxed);
                let _ = if disconnect {
                    m.comm_disconnect(sh)
                } else {
                    m.comm_free(sh)
                };
                st.free_alt_comms(m, disconnect);
            }
        }
    }
}

#[cfg(test)]
mod tests;
