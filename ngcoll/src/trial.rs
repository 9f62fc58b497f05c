//! The first calls of a class where the plan chose one of ours (or another
//! of the library's algorithms, which counts as ours here): both are
//! timed, and the faster kept.
//!
//! The plan prices a call from the segment; where it is wrong, a program
//! would lose on every call of the class. So where the plan runs one of our
//! algorithms, the class's first calls run ours and the library's own in
//! turn: one of each untimed (first touch of buffers, the library's own
//! set-up), then [`Trial::calls`] of each, timed, in the order A B B A A B
//! B A … (so that a drift of the machine weighs on both alike). At the
//! last of them every rank contributes the median of its own calls' times
//! on each side to one allreduce (a sum: the ranks' mean time in the call,
//! what a program's ranks wait), and the class keeps ours only where its
//! sum is the lesser. Every rank counts the same calls of the class (the
//! conditions that keep a call outside the model are the same on every
//! rank, [`crate::entry`]), so every rank runs the same side in the same
//! call and enters the allreduce in the same call.
//!
//! A verdict is not for ever: a program's calls of a class change their
//! pattern (synchronized calls, then back to back), and four calls of each
//! side near a ratio of 1 are a small sample. After each verdict the class
//! is tried again, after [`RECHECK_FIRST`] of its calls, then after four
//! times as many each time (64, 256, 1024, … with the default): a program
//! spends at most one trial's calls on the slower side per quadrupling of
//! its calls. A re-trial has no untimed calls (both sides have run).
//!
//! A call's time is read with `Instant` (`clock_gettime`, which the vDSO
//! answers without a system call on a TSC clock source), only during a
//! class's trial; afterwards a call of such a class costs one more lookup
//! and atomic load, and every interposed call two thread-local accesses.
//! A tie keeps the library's own.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::time::Instant;

use netgauge::select::Collective;

use crate::mpi::{Mpi, Raw};
use crate::plan::{Plan, CLASSES, COLLECTIVES};

/// Most timed calls per side (`NETGAUGE_COLL_TRIAL` above it is rejected).
pub const MAX_CALLS: usize = 8;

/// Untimed calls before the first trial's timed ones: one of each side.
const WARM: u32 = 2;

/// Calls of the class after its first verdict before it is tried again;
/// each later interval is four times the one before.
pub const RECHECK_FIRST: u32 = 64;

/// The interval stops growing after this many verdicts (64 · 4^12 calls).
const MAX_RECHECK_SHIFT: u32 = 12;

/// A class's verdict.
const OPEN: u8 = 0;
const OURS: u8 = 1;
const LIBRARY: u8 = 2;

/// One class's trial on one communicator.
pub struct Trial {
    /// Timed calls per side (0: no trials, the plan's choice stands).
    calls: u32,
    /// Calls of the class in the open trial, or since its last verdict.
    seen: AtomicU32,
    verdict: AtomicU8,
    /// Verdicts so far, and the last one (kept while a re-trial is open).
    rounds: AtomicU32,
    last: AtomicU8,
    /// This rank's timed calls, ns: ours, then the library's.
    ns: [[AtomicU32; MAX_CALLS]; 2],
    /// The ranks' sums of medians, ns (ours, the library's), once decided.
    sums: [AtomicU32; 2],
}

/// A finished trial: which side was kept, and the ranks' sums of their
/// median times on each (ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub kept_ours: bool,
    pub ours_ns: u32,
    pub library_ns: u32,
    /// Trials finished so far (this outcome is the last one's).
    pub rounds: u32,
}

/// Which side a call of a class runs, and whether it is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Ours; `Some(k)`: timed, its k-th timed call.
    Ours(Option<usize>),
    /// The library's own; `Some(k)`: timed.
    Library(Option<usize>),
}

impl Side {
    pub fn ours(self) -> bool {
        matches!(self, Side::Ours(_))
    }

    /// Whether the call is one of the trial's timed calls.
    pub fn is_timed(self) -> bool {
        matches!(self, Side::Ours(Some(_)) | Side::Library(Some(_)))
    }
}

/// The order of the timed calls: call j (from 0) runs ours when j mod 4 is
/// 0 or 3 (A B B A); both sides' k-th timed call is call 2k or 2k + 1.
fn timed_side(j: u32) -> Side {
    let k = Some((j / 2) as usize);
    if matches!(j % 4, 0 | 3) {
        Side::Ours(k)
    } else {
        Side::Library(k)
    }
}

/// The median of `xs` (the mean of the middle two for an even count).
fn median(xs: &mut [f64]) -> f64 {
    xs.sort_unstable_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        0.5 * (xs[n / 2 - 1] + xs[n / 2])
    }
}

impl Trial {
    pub fn new(calls: usize) -> Trial {
        Trial {
            calls: calls.min(MAX_CALLS) as u32,
            seen: AtomicU32::new(0),
            verdict: AtomicU8::new(OPEN),
            rounds: AtomicU32::new(0),
            last: AtomicU8::new(OPEN),
            ns: Default::default(),
            sums: Default::default(),
        }
    }

    /// The side of the class's next call (counts it).
    pub fn next(&self) -> Side {
        if self.calls == 0 {
            return Side::Ours(None);
        }
        let verdict = self.verdict.load(Ordering::Acquire);
        if verdict != OPEN {
            let since = self.seen.fetch_add(1, Ordering::Relaxed);
            if since < self.recheck_after() {
                return if verdict == OURS {
                    Side::Ours(None)
                } else {
                    Side::Library(None)
                };
            }
            // Tried again from this call on.
            self.seen.store(0, Ordering::Relaxed);
            self.verdict.store(OPEN, Ordering::Release);
        }
        let i = self.seen.fetch_add(1, Ordering::Relaxed);
        let warm = if self.rounds.load(Ordering::Relaxed) == 0 {
            WARM
        } else {
            0
        };
        match i {
            _ if i >= warm => timed_side(i - warm),
            0 => Side::Ours(None),
            _ => Side::Library(None),
        }
    }

    /// Calls of the class after the last verdict before the next trial.
    fn recheck_after(&self) -> u32 {
        let done = self.rounds.load(Ordering::Relaxed).max(1);
        RECHECK_FIRST << (2 * (done - 1).min(MAX_RECHECK_SHIFT))
    }

    /// Records a timed call; after the last one, agrees with every rank on
    /// the verdict (one allreduce on the communicator's `shadow`). A failed
    /// allreduce keeps the library's own.
    pub fn record<M: Mpi + ?Sized>(&self, m: &M, shadow: Option<Raw>, side: Side, ns: f64) {
        let (s, k) = match side {
            Side::Ours(Some(k)) => (0, k),
            Side::Library(Some(k)) => (1, k),
            _ => return,
        };
        let Some(slot) = self.ns[s].get(k) else {
            return;
        };
        slot.store(ns.clamp(0.0, f64::from(u32::MAX)) as u32, Ordering::Relaxed);
        // The last timed call is ours' (j = 2·calls − 1 ≡ 3 mod 4 for an
        // even count) or the library's (odd count): whichever, k is the last.
        let last_j = 2 * self.calls - 1;
        if timed_side(last_j) != side {
            return;
        }
        let mut med = [0.0; 2];
        for (side, out) in med.iter_mut().enumerate() {
            let mut xs = [0.0; MAX_CALLS];
            let n = self.calls as usize;
            for (x, a) in xs.iter_mut().zip(&self.ns[side]).take(n) {
                *x = f64::from(a.load(Ordering::Relaxed));
            }
            *out = median(&mut xs[..n]);
        }
        // Every rank reaches the same verdict from its own copy of the sums:
        // each median is a whole or half count of ns below 2^32, so their
        // sum over fewer than 2^20 ranks is exact in f64, whatever order the
        // library adds them in.
        let verdict = match shadow.map(|c| m.allreduce_sum_f64x2(med, c)) {
            Some(Ok(sum)) => {
                for (a, v) in self.sums.iter().zip(sum) {
                    a.store(v.clamp(0.0, f64::from(u32::MAX)) as u32, Ordering::Relaxed);
                }
                if sum[0] < sum[1] {
                    OURS
                } else {
                    LIBRARY
                }
            }
            _ => LIBRARY,
        };
        self.seen.store(0, Ordering::Relaxed);
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.last.store(verdict, Ordering::Relaxed);
        self.verdict.store(verdict, Ordering::Release);
    }

    /// The last verdict (for the log), None before the first or without
    /// trials.
    pub fn outcome(&self) -> Option<Outcome> {
        let v = self.last.load(Ordering::Relaxed);
        (v != OPEN).then(|| Outcome {
            kept_ours: v == OURS,
            ours_ns: self.sums[0].load(Ordering::Relaxed),
            library_ns: self.sums[1].load(Ordering::Relaxed),
            rounds: self.rounds.load(Ordering::Relaxed),
        })
    }
}

/// A communicator's trials: one per (collective, class) where its plan
/// chose one of ours (a few dozen of the plan's 384 slots: a program with
/// many communicators keeps a few KiB for each).
pub struct Trials {
    /// Per collective and class: the index of its trial, or `NONE`
    /// (empty: no trials at all).
    index: Vec<u16>,
    trials: Vec<Trial>,
}

const NONE: u16 = u16::MAX;

impl Trials {
    /// No trials (`NETGAUGE_COLL_TRIAL=0`, a forced choice, a communicator
    /// that always passes through).
    pub fn none() -> Trials {
        Trials {
            index: Vec::new(),
            trials: Vec::new(),
        }
    }

    /// A trial of `calls` per side for every class where `plan` chose ours.
    pub fn new(plan: &Plan, calls: usize) -> Trials {
        if calls == 0 {
            return Trials::none();
        }
        let mut t = Trials {
            index: vec![NONE; COLLECTIVES * CLASSES],
            trials: Vec::new(),
        };
        for coll in Collective::ALL {
            for c in 0..CLASSES {
                if plan.slot(coll, c).replaces_library() {
                    t.index[coll as usize * CLASSES + c] = t.trials.len() as u16;
                    t.trials.push(Trial::new(calls));
                }
            }
        }
        t
    }

    /// The trial of `coll` in size class `class`, if it has one.
    #[inline]
    pub fn get(&self, coll: Collective, class: usize) -> Option<&Trial> {
        let i = *self.index.get(coll as usize * CLASSES + class)?;
        self.trials.get(usize::from(i))
    }
}

/// The timed call of this thread's current collective, if any: its
/// communicator's shadow, the class's trial, the side and when it started.
#[derive(Clone, Copy)]
struct Pending {
    shadow: Option<Raw>,
    trial: &'static Trial,
    side: Side,
    start: Instant,
}

thread_local! {
    static PENDING: Cell<Option<Pending>> = const { Cell::new(None) };
}

/// Timings started and not yet recorded, on every thread. Between a
/// program's calls it is 0, and [`timed`] then reaches for no thread-local
/// state: the library's own calls, most of a program's, would otherwise pay
/// for it in cache misses (cold, a few hundred ns a call; bench/ngcoll.md).
static STARTED: AtomicU32 = AtomicU32::new(0);

/// Starts timing this thread's current call (the plan lookup of the call
/// found the class in its trial, `side` timed).
pub fn start(shadow: Option<Raw>, trial: &'static Trial, side: Side) {
    STARTED.fetch_add(1, Ordering::Relaxed);
    PENDING.with(|p| {
        p.set(Some(Pending {
            shadow,
            trial,
            side,
            start: Instant::now(),
        }))
    });
}

/// Runs one interposed collective, `call`, and records its time if its plan
/// lookup started a trial's timed call.
pub fn timed<M: Mpi + ?Sized, R>(m: &M, call: impl FnOnce() -> R) -> R {
    // None started anywhere: this thread has no outer call's timing to keep
    // aside, and unless `call` starts one, nothing to record.
    if STARTED.load(Ordering::Relaxed) == 0 {
        let r = call();
        if STARTED.load(Ordering::Relaxed) != 0 {
            record_pending(m, None);
        }
        return r;
    }
    // An interposed collective inside `call` (an error handler, an MPI
    // whose PMPI_ calls an MPI_ symbol) has its own timing: the outer
    // call's is kept aside and restored.
    let outer = PENDING.with(|p| p.take());
    let r = call();
    record_pending(m, outer);
    r
}

/// Records this thread's pending timing, if `call` started one (another
/// thread's may be what made [`STARTED`] non-zero), and puts `outer` back.
fn record_pending<M: Mpi + ?Sized>(m: &M, outer: Option<Pending>) {
    if let Some(p) = PENDING.with(|p| p.replace(outer)) {
        STARTED.fetch_sub(1, Ordering::Relaxed);
        p.trial
            .record(m, p.shadow, p.side, p.start.elapsed().as_nanos() as f64);
    }
}

#[cfg(test)]
mod tests;
