//! What a caller sees, and the choice that never loses to the library's
//! own.
//!
//! A program does not see one synchronized call's completion only. It sees
//! its own rank's completion (a broadcast root may return as soon as its
//! sends are out), and calls issued back to back, where the next call
//! starts on each rank as soon as that rank returned from the previous one,
//! so a rank that is released early runs ahead and a schedule whose ranks
//! wait on each other call after call pays for it every call. [`View`]
//! holds four prices of one algorithm, each from the schedule simulation
//! of `sim`:
//!
//! - `sync_ns`: one call that every rank enters at once, until the last
//!   rank returns (what `candidates` prices in closed form);
//! - `rank_avg_ns`: the same call, the mean over ranks of each rank's own
//!   return;
//! - `back_to_back_ns`: the steady-state time per call, mean over ranks,
//!   calls back to back from one root;
//! - `rotating_ns`: the same with the root rotating (call k from rank
//!   k mod P); equal to `back_to_back_ns` for collectives without a root.
//!
//! Ranks that share cores (`cores` < P) cannot be busier than the cores:
//! calls back to back take at least the ranks' busy CPU time (overheads,
//! combining, copies) per call divided by the cores. A library whose waits spin
//! (MPICH) keeps a core while it waits; with more ranks than cores, a rank
//! it waits for runs only when the scheduler preempts the spinner, so every
//! wait that blocks costs, in expectation, a share (P − C)/P of the
//! scheduler's time slice (`spin_slice_ns`).
//!
//! [`choose`] takes one of our algorithms only where it is predicted
//! faster than the library's own choice by more than `margin` (the
//! geometric mean of the four ratios ≤ 1 − margin) and slower in no view
//! by more than half the margin: where the two are within the model's
//! noise, or ours would lose in one way a program calls, the library's own
//! choice stays; so it does where the library's root runs ahead of its
//! readers ([`Library::root_runs_ahead`]).

use super::library::Library;
use super::schedule::Schedule;
use super::sim::{run, Issue, SimError, Work};
use super::{Algorithm, Collective, Network};

/// Calls simulated back to back, and the first ones left out as warm-up
/// (fewer beyond 16 ranks, where a call has many more messages to run).
fn calls(p: usize) -> (usize, usize) {
    if p <= 16 {
        (12, 4)
    } else {
        (6, 2)
    }
}

/// The four prices of one algorithm (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct View {
    pub sync_ns: f64,
    pub rank_avg_ns: f64,
    pub back_to_back_ns: f64,
    pub rotating_ns: f64,
}

impl View {
    pub fn prices(&self) -> [f64; 4] {
        [
            self.sync_ns,
            self.rank_avg_ns,
            self.back_to_back_ns,
            self.rotating_ns,
        ]
    }
}

/// How the ranks run.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ViewOptions {
    /// Cost of combining one byte, ns.
    pub gamma_ns_per_byte: f64,
    /// Cores the communicator's ranks share (0: at least one per rank).
    pub cores: usize,
    /// The scheduler's time slice, for libraries that spin (0: none).
    pub spin_slice_ns: f64,
    /// First writes to freshly mapped memory, ns per byte (0: not priced).
    pub fresh_ns_per_byte: f64,
    /// Our algorithms run by this library's implementation (an exported
    /// rules file makes the library run the algorithm it names), or None:
    /// by libngcoll's.
    pub ours_run_by: Option<Library>,
    /// What a call that does not take the library's own choice costs
    /// before it runs, ns, in every view: libngcoll's path to its plan's
    /// decision (0 for a rules file, which the library reads itself).
    pub path_ns: f64,
}

impl Default for ViewOptions {
    fn default() -> Self {
        ViewOptions {
            gamma_ns_per_byte: super::DEFAULT_GAMMA_NS_PER_BYTE,
            cores: 0,
            spin_slice_ns: 0.0,
            fresh_ns_per_byte: 0.0,
            ours_run_by: None,
            path_ns: 0.0,
        }
    }
}

/// `v` with `ns` added to each of its prices.
fn plus(v: View, ns: f64) -> View {
    View {
        sync_ns: v.sync_ns + ns,
        rank_avg_ns: v.rank_avg_ns + ns,
        back_to_back_ns: v.back_to_back_ns + ns,
        rotating_ns: v.rotating_ns + ns,
    }
}

/// Prices `sched` over `p` ranks and `m` bytes. `spins`: the schedule runs
/// inside a library whose waits spin; `runs_ahead`: except calls back to
/// back from one root, whose root runs ahead of its readers
/// ([`Library::root_runs_ahead`]).
pub fn view<N: Network + ?Sized>(
    net: &N,
    sched: Schedule,
    p: usize,
    m: u64,
    opts: &ViewOptions,
    spins: bool,
    runs_ahead: bool,
) -> Result<View, SimError> {
    if p <= 1 {
        return Ok(View::default());
    }
    let g = Work {
        gamma_ns_per_byte: opts.gamma_ns_per_byte,
        fresh_ns_per_byte: opts.fresh_ns_per_byte,
    };
    let (calls, warmup) = calls(p);
    let one = run(
        net,
        sched,
        p,
        m,
        g,
        Issue::BackToBack {
            calls: 1,
            rotate: false,
        },
    )?;
    let fixed = run(
        net,
        sched,
        p,
        m,
        g,
        Issue::BackToBack {
            calls,
            rotate: false,
        },
    )?;
    let rotating = if sched.rooted() {
        run(
            net,
            sched,
            p,
            m,
            g,
            Issue::BackToBack {
                calls,
                rotate: true,
            },
        )?
    } else {
        fixed.clone()
    };
    let pf = p as f64;
    let sync = one.finish[0].iter().cloned().fold(0.0, f64::max);
    let avg = one.finish[0].iter().sum::<f64>() / pf;
    let steady = |r: &super::sim::Run| {
        let n = (calls - warmup) as f64;
        (0..p)
            .map(|k| (r.finish[calls - 1][k] - r.finish[warmup - 1][k]) / n)
            .sum::<f64>()
            / pf
    };
    let mut v = View {
        sync_ns: sync,
        rank_avg_ns: avg,
        back_to_back_ns: steady(&fixed),
        rotating_ns: steady(&rotating),
    };
    // The node's copy lanes bound the throughput of calls back to back as
    // the cores do: ranks may run several calls ahead (eager credits), so
    // a few simulated calls need not reach the lanes' steady state.
    v.back_to_back_ns = v.back_to_back_ns.max(fixed.lane_ns / calls as f64);
    v.rotating_ns = v.rotating_ns.max(rotating.lane_ns / calls as f64);
    if opts.cores > 0 && opts.cores < p {
        let c = opts.cores as f64;
        // Busy CPU per call over the cores bounds the throughput of calls
        // back to back. (One call's latency is not bounded so: its ranks
        // mostly wait, and the hand-over to a rank that was not running is
        // in the measured EEL already.)
        let cpu_per_call = fixed.cpu_ns.iter().sum::<f64>() / (calls as f64 * c);
        let cpu_rot = rotating.cpu_ns.iter().sum::<f64>() / (calls as f64 * c);
        v.back_to_back_ns = v.back_to_back_ns.max(cpu_per_call);
        v.rotating_ns = v.rotating_ns.max(cpu_rot);
        if spins && opts.spin_slice_ns > 0.0 {
            let share = (pf - c) / pf * opts.spin_slice_ns;
            let per_call = |blocked: &[u32], calls: usize| {
                blocked.iter().cloned().max().unwrap_or(0) as f64 / calls as f64 * share
            };
            v.sync_ns += per_call(&one.blocked, 1);
            v.rank_avg_ns += per_call(&one.blocked, 1);
            if !runs_ahead {
                v.back_to_back_ns += per_call(&fixed.blocked, calls);
            }
            v.rotating_ns += per_call(&rotating.blocked, calls);
        }
    }
    Ok(v)
}

/// One candidate of ours with its prices.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Priced {
    pub algorithm: Algorithm,
    /// The chain's segment size (0 for the others).
    pub segment_bytes: u64,
    pub view: View,
}

/// The outcome of [`choose`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// Our algorithm, or None: the library's own choice.
    pub ours: Option<Priced>,
    /// Our best candidate, chosen or not (None if none applies).
    pub best_ours: Option<Priced>,
    /// What the library runs, and its prices.
    pub library: LibraryChoice,
}

/// The library's own choice for one call with its prices: what every
/// candidate is judged against.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LibraryChoice {
    pub schedule: Schedule,
    pub view: View,
    /// Its root runs ahead of its readers ([`Library::root_runs_ahead`]):
    /// no candidate replaces it.
    pub runs_ahead: bool,
}

impl LibraryChoice {
    /// Prices what the library runs for `call`.
    pub fn of<N: Network + ?Sized>(
        net: &N,
        call: &Call,
        opts: &ViewOptions,
    ) -> Result<LibraryChoice, SimError> {
        let Call {
            lib,
            coll,
            ranks: p,
            bytes: m,
            one_node,
        } = *call;
        let schedule = lib.schedule(coll, p, m, one_node);
        let runs_ahead = lib.root_runs_ahead(schedule, m);
        let view = view(net, schedule, p, m, opts, lib.spins(), runs_ahead)?;
        Ok(LibraryChoice {
            schedule,
            view,
            runs_ahead,
        })
    }
}

/// Segment sizes the chain is priced with: powers of two from 1 KiB (and
/// at least m/256: more segments than that gain nothing measurable and
/// cost the simulation their number) up to the message, and the message.
pub fn chain_segments(m: u64) -> impl Iterator<Item = u64> {
    let min = (m / 256).max(1024);
    (10..=30)
        .map(|k| 1u64 << k)
        .filter(move |&s| s >= min && s < m)
        .chain(std::iter::once(m.max(1)))
}

/// A candidate's standing against the library's own choice: the geometric
/// mean of its four price ratios (which ranks candidates) and the worst
/// ratio (which may disqualify it).
pub fn judge(v: &View, library: &[f64; 4]) -> (f64, f64) {
    let mut worst: f64 = 0.0;
    let mut log_sum = 0.0;
    for (o, l) in v.prices().iter().zip(library) {
        let r = if *l > 0.0 { o / l } else { 1.0 };
        worst = worst.max(r);
        log_sum += r.max(1e-9).ln();
    }
    ((log_sum / 4.0).exp(), worst)
}

/// Whether a candidate judged (`score`, `worst`) replaces the library's
/// own choice: faster by more than `margin`, slower in no view by more
/// than half of it.
fn beats(score: f64, worst: f64, margin: f64) -> bool {
    score <= 1.0 - margin && worst <= 1.0 + margin / 2.0
}

/// Chooses between `ours` (the algorithms the caller can run) and the
/// library's own choice for `coll` over `p` ranks and `m` bytes (see the
/// module documentation). `one_node`: every rank on one node.
#[allow(clippy::too_many_arguments)]
pub fn choose<N: Network + ?Sized>(
    net: &N,
    lib: Library,
    coll: Collective,
    p: usize,
    m: u64,
    one_node: bool,
    ours: &[Algorithm],
    opts: &ViewOptions,
    margin: f64,
) -> Result<Decision, SimError> {
    let call = Call {
        lib,
        coll,
        ranks: p,
        bytes: m,
        one_node,
    };
    let library = LibraryChoice::of(net, &call, opts)?;
    let runs_ahead = library.runs_ahead;
    let mut best: Option<(f64, Priced)> = None;
    let mut best_any: Option<(f64, Priced)> = None;
    let lib_prices = library.view.prices();
    for &a in ours.iter().filter(|a| a.collective() == coll) {
        let segs: Vec<u64> = if a == Algorithm::BcastChain {
            chain_segments(m).collect()
        } else {
            vec![0]
        };
        for seg in segs {
            let sched = Schedule::of(a, seg);
            let sched = opts.ours_run_by.map_or(sched, |l| l.implementation(sched));
            let v = plus(view(net, sched, p, m, opts, false, false)?, opts.path_ns);
            let (score, worst) = judge(&v, &lib_prices);
            let priced = Priced {
                algorithm: a,
                segment_bytes: seg,
                view: v,
            };
            if best_any.map_or(true, |(s, _)| score < s) {
                best_any = Some((score, priced));
            }
            // Where the library's root runs ahead of its readers, its calls
            // back to back cost the readers' copies alone; ours, on
            // point-to-point with waits that yield on a shared core, are
            // not priced at that grain (bench/ngcoll.md): the library keeps
            // those sizes.
            if beats(score, worst, margin) && !runs_ahead && best.map_or(true, |(s, _)| score < s) {
                best = Some((score, priced));
            }
        }
    }
    Ok(Decision {
        ours: best.map(|b| b.1),
        best_ours: best_any.map(|b| b.1),
        library,
    })
}

/// One collective call as a library decides it: which library, which
/// collective, over how many ranks and bytes, all on one node or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub lib: Library,
    pub coll: Collective,
    pub ranks: usize,
    pub bytes: u64,
    pub one_node: bool,
}

/// The best of `candidates`, schedules the library itself runs when told
/// to (a rules file names them), against its own choice for `call`
/// (`library`: [`LibraryChoice::of`] the call, or [`Decision::library`]),
/// by the rule of [`choose`]; None where the library's own choice stays.
/// Each candidate carries the caller's name for it (`T`), returned with
/// its prices.
pub fn choose_named<N: Network + ?Sized, T: Copy>(
    net: &N,
    call: &Call,
    library: &LibraryChoice,
    candidates: &[(T, Schedule)],
    opts: &ViewOptions,
    margin: f64,
) -> Result<Option<(T, View)>, SimError> {
    let Call {
        lib,
        ranks: p,
        bytes: m,
        ..
    } = *call;
    let lib_prices = library.view.prices();
    let runs_ahead = library.runs_ahead;
    let mut best: Option<(f64, T, View)> = None;
    for &(name, sched) in candidates {
        if sched == library.schedule {
            continue;
        }
        let v = plus(
            view(net, sched, p, m, opts, lib.spins(), false)?,
            opts.path_ns,
        );
        let (score, worst) = judge(&v, &lib_prices);
        if beats(score, worst, margin) && !runs_ahead && best.map_or(true, |(s, ..)| score < s) {
            best = Some((score, name, v));
        }
    }
    Ok(best.map(|(_, name, v)| (name, v)))
}
