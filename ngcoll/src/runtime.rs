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

use netgauge::select::{Algorithm, Collective, Library, Measured, ViewOptions};
use netgauge::{EntryData, Reader};

use crate::config::{Config, Force, Forced, Mode};
use crate::gate;
use crate::host::{hostname, measure_gamma, online_cores, sched_slice_ns};
use crate::mpi::{Mpi, Raw};
use crate::plan::{self, Alt, Plan, Setup, Slot, CLASSES, COLLECTIVES, LIBRARY};
use crate::trial::{Trial, Trials};

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
const PLAN_MAX_BYTES: u64 = 64 << 20;

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
    plans: Mutex<Vec<(PlanKey, Arc<Plan>)>>,
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

/// Whether the MPI running is the one this build was made for; the reason
/// if not.
fn same_abi<M: Mpi + ?Sized>(m: &M) -> Result<(), String> {
    let version = m.library_version();
    let ok = match m.abi_name() {
        "openmpi" => version.contains("Open MPI"),
        "mpich" => version.contains("MPICH"),
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(format!(
        "built for {} but running on {:?}",
        m.abi_name(),
        version.lines().next().unwrap_or("")
    ))
}

/// Opens the segment and checks it is fresh; the reason if not.
fn open_segment(cfg: &Config) -> Result<Reader, String> {
    let mut r = match &cfg.shm {
        Some(p) => Reader::open(p).map_err(|e| format!("segment {}: {e}", p.display()))?,
        None => Reader::open_default()
            .map_err(|e| format!("segment {}: {e}", netgauge::DEFAULT_PATH))?,
    };
    if let Some(ns) = cfg.stale_after_ns {
        r.set_stale_after_ns(ns);
    }
    let limit = cfg
        .stale_after_ns
        .unwrap_or(netgauge::DEFAULT_STALE_AFTER_NS);
    if limit > 0 {
        match r.heartbeat_age_ns() {
            None => return Err("the segment's writer has shut down (stale)".into()),
            Some(age) if age > limit => {
                return Err(format!(
                    "the segment is stale (last heartbeat {:.1} s ago)",
                    age as f64 / 1e9
                ))
            }
            _ => {}
        }
    }
    Ok(r)
}

/// The environment variable that turns Open MPI's coll/tuned dynamic rules
/// on, which a communicator's forced algorithm needs.
const OMPI_DYNAMIC_RULES: &str = "OMPI_MCA_coll_tuned_use_dynamic_rules";

/// MPI_Init's part before PMPI_Init (C and Fortran): under Open MPI,
/// where libngcoll may run the library's other algorithms (on, and
/// `NETGAUGE_COLL_LIBRARY_ALGS` not 0), turns coll/tuned's dynamic rules on
/// through the environment, which Open MPI reads in MPI_Init, unless the
/// program sets any coll/tuned parameter (in its environment, or in an MCA
/// parameter file: named by the environment, or the user's or the
/// system's default one, which the environment would override). Without a rules
/// file and a forced algorithm those rules decide as the fixed ones do, so
/// the library's own choice is unchanged (`init` checks that none is
/// forced); a duplicate made with an algorithm forced runs that one
/// (`Mpi::comm_dup_forced`). The variable is set before MPI exists, while
/// the program is normally still single-threaded. (An MCA parameter file
/// that turns the dynamic rules off is overridden by it; one that forces
/// an algorithm turns the alternatives off in `init`.)
pub fn before_init<M: Mpi + ?Sized>(m: &M) {
    if m.abi_name() != "openmpi" || RUNTIME.get().is_some() {
        return;
    }
    let Ok(cfg) = Config::from_env() else { return };
    if cfg.mode == Mode::Off || !cfg.library_algs {
        return;
    }
    // Any coll/tuned setting of the program's (a forced algorithm, a rules
    // file, the dynamic rules either way) is left alone: with the dynamic
    // rules on, a forced algorithm of its own would change the library's
    // own choice.
    let tuned = std::env::vars_os().any(|(k, _)| {
        k.to_str().is_some_and(|k| {
            k.starts_with("OMPI_MCA_coll_tuned_")
                || k == "OMPI_MCA_mca_base_param_files"
                || k == "OMPI_MCA_mca_base_envar_file_prefix"
        })
    });
    if !tuned && !param_files_name_tuned() {
        std::env::set_var(OMPI_DYNAMIC_RULES, "1");
    }
}

/// Whether Open MPI's default MCA parameter files (the user's and Debian's
/// system one) set any coll/tuned parameter: the environment would take
/// precedence over them, and turning the dynamic rules on would bring a
/// rules file or a forced algorithm of theirs into effect.
fn param_files_name_tuned() -> bool {
    let mut files = vec![std::path::PathBuf::from(
        "/etc/openmpi/openmpi-mca-params.conf",
    )];
    if let Some(home) = std::env::var_os("HOME") {
        files.push(std::path::Path::new(&home).join(".openmpi/mca-params.conf"));
    }
    files.iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines()
                .map(str::trim)
                .any(|l| !l.starts_with('#') && l.contains("coll_tuned_"))
        })
    })
}

/// MPI_Init's part (after PMPI_Init succeeded). Never fails: any problem
/// leaves libngcoll off, with one line on stderr.
pub fn init<M: Mpi + ?Sized>(m: &M) {
    if RUNTIME.get().is_some() {
        return;
    }
    // A rejected setting does not turn this rank off on its own: the other
    // ranks, whose settings may be good, are about to wait for it in the
    // set-up's collectives below, and would then run our algorithms against
    // its library calls. It takes part and votes every rank off.
    let (cfg, bad_setting) = match Config::from_env() {
        Ok(c) => (c, None),
        Err(e) => (Config::default(), Some(e.to_string())),
    };
    let lib = if m.abi_name() == "mpich" {
        Library::Mpich40
    } else {
        Library::OpenMpi41
    };
    let mut rt = Runtime {
        cfg,
        enabled: false,
        keyval: 0,
        reader: None,
        hosts: Vec::new(),
        world_node: Vec::new(),
        my_node: 0,
        cores: online_cores(),
        ranks_here: 1,
        polite: false,
        lib,
        library_algs: false,
        spin_slice_ns: 0.0,
        gamma: OnceLock::new(),
        fresh: OnceLock::new(),
        plans: Mutex::new(Vec::new()),
        comms: Mutex::new(Vec::new()),
        next_comm: AtomicU64::new(0),
    };
    // An off rank takes part in the set-up's collectives too (the others,
    // if on, wait for it there) and votes every rank off, silently; a call
    // of its own then touches nothing but the on/off flag.
    let off = rt.cfg.mode == Mode::Off && bad_setting.is_none();
    // The keyval is created here, before the vote (it is local): a rank
    // that cannot create it votes failure instead of staying off alone.
    let local = if let Some(why) = &bad_setting {
        Err(why.clone())
    } else if off {
        Err(String::new())
    } else {
        same_abi(m)
            .and_then(|()| open_segment(&rt.cfg))
            .and_then(|r| {
                let k = m
                    .keyval_create(release_state)
                    .map_err(|e| format!("cannot create the attribute keyval ({e})"))?;
                Ok((r, k))
            })
    };
    // Host names of every world rank (collective: every rank takes part).
    let world = m.comm_world();
    let (Ok(p), Ok(me)) = (m.comm_size(world), m.comm_rank(world)) else {
        let _ = RUNTIME.set(rt);
        return;
    };
    // Each rank's host name, then a digest of the setting that decides on
    // its own which algorithm a call runs (NETGAUGE_COLL_FORCE): ranks that
    // differ there would run different algorithms in one call.
    let mut mine = [0u8; GATHER_BYTES];
    let host = hostname();
    let hb = host.as_bytes();
    mine[..hb.len().min(HOST_BYTES)].copy_from_slice(&hb[..hb.len().min(HOST_BYTES)]);
    mine[HOST_BYTES..].copy_from_slice(&force_digest(&rt.cfg.force).to_le_bytes());
    let mut all = vec![0u8; GATHER_BYTES * p];
    let gathered = m.allgather_bytes(&mine, &mut all, world).is_ok();
    let same_force = all
        .chunks_exact(GATHER_BYTES)
        .all(|c| c[HOST_BYTES..] == mine[HOST_BYTES..]);
    // One vote per rank, the least wins: a rejected setting votes its rank
    // number (the lowest such rank reports it), NETGAUGE_COLL=off `p`,
    // NETGAUGE_COLL_FORCE unlike another rank's `p + 1`, any other failure
    // `p + 2`, ready `p + 3`. A failed vote counts as a failure.
    let p_i32 = i32::try_from(p).unwrap_or(i32::MAX - 3);
    let (vote_off, vote_unlike, vote_failed, vote_ready) = (p_i32, p_i32 + 1, p_i32 + 2, p_i32 + 3);
    let vote = match (&bad_setting, local.is_ok() && gathered) {
        (Some(_), _) => i32::try_from(me).unwrap_or(0),
        (None, _) if off => vote_off,
        (None, false) => vote_failed,
        (None, true) if !same_force => vote_unlike,
        (None, true) => vote_ready,
    };
    let least = m.allreduce_min(vote, world).unwrap_or(vote_failed);
    let agree = least == vote_ready;
    // The library's other algorithms, where every rank can run them (a
    // second vote, taken by every rank whatever the first: each rank's
    // library checks its own settings). Not with several threads in MPI:
    // forcing one writes a process-wide control variable around a
    // duplicate, which another thread's duplicate could catch.
    let can_alt =
        rt.cfg.library_algs && local.is_ok() && !m.thread_multiple() && m.library_algorithms();
    let every_rank_can_alt = m.allreduce_min(i32::from(can_alt), world).ok() == Some(1);
    rt.library_algs = agree && every_rank_can_alt;
    let bad_setting_somewhere = least < vote_off;
    if gathered {
        for r in 0..p {
            let raw = &all[r * GATHER_BYTES..r * GATHER_BYTES + HOST_BYTES];
            let n = raw.iter().position(|&b| b == 0).unwrap_or(HOST_BYTES);
            let name = String::from_utf8_lossy(&raw[..n]).into_owned();
            let idx = match rt.hosts.iter().position(|h| *h == name) {
                Some(i) => i,
                None => {
                    rt.hosts.push(name);
                    rt.hosts.len() - 1
                }
            };
            rt.world_node.push(idx as u32);
        }
        rt.my_node = rt.world_node[me];
        rt.ranks_here = rt.world_node.iter().filter(|&&n| n == rt.my_node).count();
    }
    let first_here = rt.world_node.iter().position(|&n| n == rt.my_node) == Some(me);
    match (&bad_setting, &local, agree) {
        (Some(why), _, _) if usize::try_from(least) == Ok(me) => warn(&format!(
            "rank {me}: {why}; collectives pass through on every rank"
        )),
        _ if bad_setting_somewhere || off => {}
        _ if least == vote_off && me == 0 => {
            warn("NETGAUGE_COLL=off on some ranks; collectives pass through on every rank")
        }
        _ if least == vote_off => {}
        _ if least == vote_unlike && me == 0 => warn(
            "NETGAUGE_COLL_FORCE differs between ranks; collectives pass through on every rank",
        ),
        _ if least == vote_unlike => {}
        (_, Err(why), _) if first_here => warn(&format!("{why}; collectives pass through")),
        (_, Ok(_), false) if me == 0 => {
            warn("another rank cannot use its segment; collectives pass through")
        }
        _ => {}
    }
    if let Ok((reader, keyval)) = local {
        rt.reader = Some(reader);
        rt.keyval = keyval;
        rt.enabled = agree;
    }
    // Open MPI's own waits give the core away when it runs oversubscribed
    // (mpirun sets mpi_yield_when_idle), so PMPI_Waitall does; MPICH's
    // spin, and a spinning rank keeps the one it waits for off the core.
    // A poll-and-yield loop of our own is much slower than Open MPI's
    // (sched_yield after every poll): only where the library spins.
    rt.polite = rt
        .cfg
        .polite
        .unwrap_or(lib.spins() && rt.ranks_here > rt.cores);
    if lib.spins() {
        rt.spin_slice_ns = sched_slice_ns();
    }
    let on = rt.enabled;
    let gated = !m.thread_multiple() && rt.cfg.force != Force::Cycle;
    if RUNTIME.set(rt).is_ok() {
        gate::set(on, gated);
    }
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

fn setup<M: Mpi + ?Sized>(m: &M, rt: &'static Runtime, comm: Raw) -> Option<Arc<CommState>> {
    let id = rt.next_comm.fetch_add(1, Ordering::Relaxed);
    let size = m.comm_size(comm).ok()?;
    let rank = m.comm_rank(comm).ok()?;
    let mut wr = vec![0i32; size];
    let inter = m.comm_is_inter(comm).ok()?;
    let placed = !inter && m.world_ranks(comm, &mut wr).is_ok();
    // A rank of another job (a communicator merged with a spawned or
    // connected job): that job may run without libngcoll, and a collective
    // of ours against its library's own would never match. Every member
    // of ours sees the other job's ranks as foreign, so all pass through.
    let foreign = placed && wr.iter().any(|&w| w < 0);
    // Shadows take communicators (context ids: MPICH has 2048 a process)
    // from the program: past MAX_SHADOWS open on any of its ranks (agreed
    // in one allreduce on the communicator, whose ranks are all in this
    // collective), a communicator passes through, once and for all; so
    // does one whose duplicate the library refuses on any rank (a second
    // allreduce agrees).
    let shadow = if inter || size <= 1 || foreign {
        None
    } else {
        let room = i32::from(SHADOWS_OPEN.load(Ordering::Relaxed) < MAX_SHADOWS);
        match m.allreduce_min(room, comm) {
            Ok(1) => {
                let dup = m.comm_dup(comm).ok();
                // A duplicate made on some ranks only (a failure local to
                // one, as of memory) is let go on every rank: all pass
                // through alike.
                match m.allreduce_min(i32::from(dup.is_some()), comm) {
                    Ok(1) => dup,
                    _ => {
                        if let Some(d) = dup {
                            let _ = m.comm_free(d);
                        }
                        None
                    }
                }
            }
            _ => None,
        }
    };
    if shadow.is_some() {
        SHADOWS_OPEN.fetch_add(1, Ordering::Relaxed);
    }
    let st = if let Some(shadow) = shadow {
        let node_of = |r: usize| -> u32 {
            usize::try_from(wr[r])
                .ok()
                .and_then(|w| rt.world_node.get(w).copied())
                .unwrap_or(u32::MAX)
        };
        let mut nodes: Vec<u32> = (0..size).map(node_of).collect();
        let here = nodes.iter().filter(|&&n| n == rt.my_node).count();
        nodes.sort_unstable();
        nodes.dedup();
        let n_nodes = if placed { nodes.len() } else { 2 };
        // Rank 0 plans, everyone takes its plan.
        let mut buf = vec![0u8; plan::PLAN_BYTES];
        let mut source = String::new();
        if rank == 0 {
            let (p, s) = plan_for(
                rt,
                size,
                node_of(0),
                (1..size).map(node_of).find(|&n| n != node_of(0)),
                here,
            );
            buf = p.encode();
            source = s;
        }
        let received = match m.bcast_bytes(&mut buf, 0, shadow) {
            Ok(()) => Plan::decode(&buf),
            Err(_) => None,
        };
        // Every rank must count a class's trial alike: the least of the
        // ranks' trial lengths (none under a forced choice), agreed by every
        // rank in one allreduce at set-up; a failure: no trials. The same
        // allreduce carries whether every rank has rank 0's plan (-1: one
        // has not): if not, every rank takes the library's.
        let mine = match (&received, &rt.cfg.force) {
            (None, _) => -1,
            (Some(_), Force::None) => rt.cfg.trial as i32,
            (Some(_), _) => 0,
        };
        let agreed = m.allreduce_min(mine, shadow).ok();
        let plan = match (received, agreed) {
            (Some(p), Some(c)) if c >= 0 => p,
            _ => {
                if !source.is_empty() {
                    source = "none: a rank did not receive the plan (the library's own)".into();
                }
                Plan::library()
            }
        };
        let plan = library_algorithms(rt, size, plan);
        let alt_comms = plan
            .alts()
            .iter()
            .map(|_| AtomicUsize::new(ALT_NOT_MADE))
            .collect();
        let calls = agreed.map_or(0, |c| c.max(0) as usize);
        let trials = Trials::new(&plan, calls);
        CommState {
            id,
            size,
            rank,
            shadow: Some(shadow),
            closed: AtomicBool::new(false),
            freed: AtomicBool::new(false),
            polite: rt.polite,
            nodes: n_nodes,
            alt_comms,
            library: library_masks(&plan, &rt.cfg.force),
            plan: Arc::new(plan),
            source,
            scratch: Mutex::new(Vec::new()),
            calls: if rt.cfg.mode == Mode::Log {
                (0..COLLECTIVES * CLASSES)
                    .map(|_| AtomicU64::new(0))
                    .collect()
            } else {
                Vec::new()
            },
            trials,
            cycle: AtomicU64::new(0),
            log: rt.cfg.mode == Mode::Log,
            force: rt.cfg.force.clone(),
        }
    } else {
        CommState::passthrough(id, size, rank)
    };
    let st = Arc::new(st);
    if let Ok(mut list) = rt.comms.lock() {
        // Kept: states still logged, and shadows whose communicators were
        // freed past libngcoll (still open: `finalize` frees them).
        list.retain(|s| {
            !s.freed.load(Ordering::Relaxed) || s.log || (s.shadow.is_some() && !s.is_closed())
        });
        list.push(st.clone());
    }
    let raw = Arc::into_raw(st.clone());
    if m.attr_set(comm, rt.keyval, raw as *mut c_void).is_err() {
        // SAFETY: the attribute did not take it: release its reference.
        drop(unsafe { Arc::from_raw(raw) });
        return None;
    }
    Some(st)
}

/// A communicator's plan with the library's other algorithms that
/// `NETGAUGE_COLL_FORCE` names written into it, or without any where the
/// library takes no forced algorithm (their classes go to the library's
/// own choice). Their communicators are made at their first calls
/// ([`CommState::alt_comm`]).
fn library_algorithms(rt: &Runtime, size: usize, plan: Plan) -> Plan {
    let mut plan = plan;
    if let Force::Fixed(list) = &rt.cfg.force {
        let forced: Vec<Alt> = list
            .iter()
            .filter_map(|(coll, f)| match *f {
                Forced::LibraryAlg {
                    number,
                    faninout,
                    segsize,
                } => Some(Alt::forced(*coll, size, number, faninout, segsize)),
                _ => None,
            })
            .collect();
        plan.force_alts(&forced);
    }
    if rt.library_algs {
        plan
    } else {
        plan.without_alts()
    }
}

/// The duplicate of `shadow` with `alt` forced, if every rank made it
/// (one allreduce on the shadow agrees; a rank past [`MAX_ALTS_OPEN`]
/// takes part in the duplicate and votes no).
fn make_alt<M: Mpi + ?Sized>(m: &M, shadow: Raw, alt: &Alt) -> Option<Raw> {
    let room = ALTS_OPEN.load(Ordering::Relaxed) < MAX_ALTS_OPEN;
    let (dup, forced) = m.comm_dup_forced(shadow, &alt.cvars());
    let ok = room && forced.is_ok() && dup.is_some_and(|d| d > ALT_FREED);
    if m.allreduce_min(i32::from(ok), shadow).ok() == Some(1) {
        ALTS_OPEN.fetch_add(1, Ordering::Relaxed);
        ALTS_MADE.fetch_add(1, Ordering::Relaxed);
        return dup;
    }
    if let Some(d) = dup {
        let _ = m.comm_free(d);
    }
    None
}

/// The plan of a communicator of `size` ranks, `first` the node of its rank
/// 0 and `other` that of its first rank elsewhere (None: all on one node);
/// `here` of its ranks on this node. Built once per shape and cached.
fn plan_for(
    rt: &Runtime,
    size: usize,
    first: u32,
    other: Option<u32>,
    here: usize,
) -> (Arc<Plan>, String) {
    let one_node = other.is_none();
    let peer_node = other.unwrap_or(first);
    let peer = rt
        .hosts
        .get(peer_node as usize)
        .cloned()
        .unwrap_or_default();
    // Ranks sharing this node's cores: the communicator gets its share.
    let cores = if rt.ranks_here > rt.cores {
        ((rt.cores * here) / rt.ranks_here).max(1)
    } else {
        0
    };
    let key = PlanKey {
        ranks: size,
        one_node,
        peer: peer.clone(),
        cores,
    };
    if let Ok(cache) = rt.plans.lock() {
        if let Some((_, p)) = cache.iter().find(|(k, _)| *k == key) {
            return (p.clone(), format!("segment entry of {peer} (cached plan)"));
        }
    }
    let (plan, source) = match build_plan(rt, size, one_node, &peer, cores) {
        Ok((p, s)) => (Arc::new(p), s),
        Err(why) => {
            warn(&format!(
                "no plan for {size} ranks ({why}); this communicator's collectives pass through"
            ));
            (Arc::new(Plan::library()), why)
        }
    };
    if let Ok(mut cache) = rt.plans.lock() {
        cache.push((key, plan.clone()));
    }
    (plan, source)
}

fn build_plan(
    rt: &Runtime,
    size: usize,
    one_node: bool,
    peer: &str,
    cores: usize,
) -> Result<(Plan, String), String> {
    let reader = rt.reader.as_ref().ok_or("no segment")?;
    let entries: Vec<EntryData> = reader
        .snapshot()
        .map_err(|e| format!("cannot read the segment: {e}"))?;
    let usable = |e: &&EntryData| {
        e.peer == peer && e.flags & netgauge::flags::STALE == 0 && !e.ranges.is_empty()
    };
    let order: Vec<&str> = if one_node {
        vec![rt.cfg.transport.as_str()]
    } else {
        let mut v = vec![rt.cfg.transport.as_str()];
        v.extend(
            ["mpi", "rdma", "msg", "raw", "udp"]
                .iter()
                .filter(|t| **t != rt.cfg.transport),
        );
        v
    };
    let entry = order
        .iter()
        .find_map(|t| entries.iter().filter(usable).find(|e| e.transport == *t))
        .ok_or_else(|| {
            format!(
                "no entry for {peer} over {} in the segment",
                order.join("/")
            )
        })?;
    let pair = entry.params();
    let exchange = plan::exchange_ranges(&entries, entry, size);
    // The transport's contention penalties, if the segment has them.
    let record = reader.transport_ext(&entry.transport).ok();
    let net = Measured {
        pair: &pair,
        exchange: &exchange,
        exchange_ranks: size,
        contention: record.as_ref(),
    };
    let gamma = *rt.gamma.get_or_init(measure_gamma);
    let fresh = *rt
        .fresh
        .get_or_init(netgauge::select::measure_fresh_ns_per_byte);
    let setup = Setup {
        lib: rt.lib,
        ranks: size,
        one_node,
        view: ViewOptions {
            gamma_ns_per_byte: gamma,
            cores,
            spin_slice_ns: rt.spin_slice_ns,
            fresh_ns_per_byte: fresh,
            ours_run_by: None,
            path_ns: rt.cfg.path_ns.unwrap_or(if rt.ranks_here > rt.cores {
                crate::config::PATH_COLD_NS
            } else {
                crate::config::PATH_WARM_NS
            }),
        },
        margin: rt.cfg.margin,
        max_bytes: PLAN_MAX_BYTES,
        library_algorithms: rt.library_algs,
    };
    let plan = plan::build(&net, &setup).map_err(|e| format!("the model failed: {e}"))?;
    let what = if exchange.is_empty() {
        ""
    } else {
        " and its all-ranks exchange"
    };
    Ok((plan, format!("{peer}/{}{what}", entry.transport)))
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
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;
    use crate::fake::{Fake, World};

    const SHADOW: Raw = 77;
    const COMM: Raw = 5;

    /// A communicator of 2 ranks whose plan runs Open MPI's linear reduce
    /// for every reduce.
    fn state() -> CommState {
        let mut plan = Plan::library();
        plan.force_alts(&[Alt::forced(Collective::Reduce, 2, 1, 0, 0)]);
        let mut st = CommState::passthrough(0, 2, 0);
        st.shadow = Some(SHADOW);
        st.closed = AtomicBool::new(false);
        st.alt_comms = plan
            .alts()
            .iter()
            .map(|_| AtomicUsize::new(ALT_NOT_MADE))
            .collect();
        st.plan = Arc::new(plan);
        st
    }

    #[test]
    fn an_alternatives_duplicate_is_made_once_at_its_first_call_and_freed_with_the_shadow() {
        let mut m = Fake::new(Arc::new(World::default()), 0, 2);
        m.forced_ok = true;
        let st = state();
        let slot = st.pick(Collective::Reduce, 64);
        assert_eq!(st.alt_made(0), None);
        // Not an alternative: none.
        assert_eq!(st.alt_comm(&m, &st.pick(Collective::Bcast, 64), COMM), None);
        assert_eq!(m.dups.load(Relaxed), 0);
        let c = st.alt_comm(&m, &slot, COMM).unwrap();
        assert!(c != COMM && c != SHADOW, "{c}");
        assert_eq!(st.alt_made(0), Some(true));
        // Every later call of any size of the collective: the same one.
        assert_eq!(
            st.alt_comm(&m, &st.pick(Collective::Reduce, 1 << 20), COMM),
            Some(c)
        );
        assert_eq!(m.dups.load(Relaxed), 1);
        st.free_alt_comms(&m, false);
        st.free_alt_comms(&m, true);
        assert_eq!(m.frees.load(Relaxed), 1, "freed once");
        // Freed: still reported made, and a call goes to the program's
        // communicator (the library's own).
        assert_eq!(st.alt_made(0), Some(true));
        assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
        assert_eq!(m.dups.load(Relaxed), 1);
    }

    #[test]
    fn a_duplicate_whose_algorithm_could_not_be_forced_is_let_go_for_good() {
        let m = Fake::new(Arc::new(World::default()), 0, 2);
        let st = state();
        let slot = st.pick(Collective::Reduce, 64);
        // The variables were not written: the duplicate is made (every rank
        // takes part), let go, and the call is the library's own.
        assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
        assert_eq!((m.dups.load(Relaxed), m.frees.load(Relaxed)), (1, 1));
        assert_eq!(st.alt_made(0), Some(false));
        // Not tried again.
        assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
        assert_eq!(m.dups.load(Relaxed), 1);
        st.free_alt_comms(&m, false);
        assert_eq!(m.frees.load(Relaxed), 1);
    }

    #[test]
    fn an_alternative_never_needed_is_logged_so_and_none_is_made_after_the_shadow_closed() {
        let mut m = Fake::new(Arc::new(World::default()), 0, 2);
        m.forced_ok = true;
        let st = state();
        st.free_alt_comms(&m, false);
        assert_eq!(st.alt_made(0), None);
        st.closed.store(true, Relaxed);
        let slot = st.pick(Collective::Reduce, 64);
        assert_eq!(st.alt_comm(&m, &slot, COMM), Some(COMM));
        assert_eq!((m.dups.load(Relaxed), st.alt_made(0)), (0, None));
    }
}
