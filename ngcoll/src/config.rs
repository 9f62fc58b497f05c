//! libngcoll's settings, from the environment (read once, at MPI_Init).
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `NETGAUGE_COLL` | `off` (pure pass-through), `on`, `log` (on, and one line per (collective, size class, communicator) at MPI_Finalize) | `on` |
//! | `NETGAUGE_SHM` | the segment file | `$NETGAUGE_SEGMENT`, else the daemon's `/dev/shm/netgauged` |
//! | `NETGAUGE_COLL_TRANSPORT` | the segment entry's transport for ranks on one node, tried first between nodes | `mpi` |
//! | `NETGAUGE_COLL_STALE_S` | the segment is stale when its heartbeat is older (0: never, e.g. a one-shot `ngctl probe --publish`) | 5 |
//! | `NETGAUGE_COLL_MARGIN` | how much faster (geometric mean of the four views; no view slower by more than half of it) one of ours must be predicted to replace the library's own choice | 0.1 |
//! | `NETGAUGE_COLL_YIELD` | `1`/`0`: our waits poll and give the core away between polls, or call PMPI_Waitall | MPICH (whose waits spin) on a node with more ranks than cores |
//! | `NETGAUGE_COLL_TRIAL` | where the plan chose one of ours or another of the library's algorithms: how many of a class's calls run ours and the library's own each, timed, before the faster is kept, at first and at each re-trial (`ngcoll::trial`; 0: the plan's choice stands untried; more than 8 is rejected; none under `NETGAUGE_COLL_FORCE`) | 4 |
//! | `NETGAUGE_COLL_PATH_NS` | what a call that does not take the library's own choice costs in libngcoll's path to it, ns, added to every price of ours and of the library's other algorithms (so the margin rule, no view slower than the library's own by more than half the margin, counts it) | 80 where the node runs more ranks than cores (its calls run cold, [`PATH_COLD_NS`]), else 30 |
//! | `NETGAUGE_COLL_LIBRARY_ALGS` | `1`/`0`: the library's other algorithms are candidates too, each run on a duplicate of the communicator made with it forced (Open MPI 4.1: libngcoll turns coll/tuned's dynamic rules on at MPI_Init unless the program sets any coll/tuned parameter, in its environment or an MCA parameter file; they are used only where every rank has those rules on, no rules file, no algorithm forced for the whole process, and fewer than MPI_THREAD_MULTIPLE) | 1 |
//! | `NETGAUGE_COLL_MAX_RANKS` | the largest communicator libngcoll plans for; a larger one runs the library's own collectives, with one warning per communicator shape (its ranks decide the plan in shares at the communicator's first collective, and the model's work for one share grows nearly as P²: bench/ngcoll.md) | [`DEFAULT_MAX_RANKS`] |
//! | `NETGAUGE_COLL_FORCE` | testing: `cycle` (every call on a communicator takes the next of our algorithms and the library's, in turn) or `coll=alg[:segment],…` (no segment, or 0: the plan's, else the whole message; `library` the library's own choice, `library:N[/fan[/segment]]` Open MPI's coll/tuned algorithm N; each collective at most once) | none |
//!
//! Every rank must see the same values (mpirun passes the environment on).
//! A value that one rank rejects turns libngcoll off on every rank, with one
//! warning from the lowest such rank: the rank still takes part in MPI_Init's
//! set-up and votes. `NETGAUGE_COLL=off` on some ranks only turns it off on
//! every rank (one warning from rank 0 if it is on): an off rank takes part
//! in the set-up's two collectives at MPI_Init and votes. A
//! `NETGAUGE_COLL_FORCE` unlike another rank's (the one setting that decides
//! on each rank which algorithm a call runs) turns it off on every rank too,
//! with one warning from rank 0: the allgather carries a digest of it.

use std::path::PathBuf;

use netgauge::select::{Algorithm, Collective};

/// libngcoll's path to a decision other than the library's own choice, per
/// call, ns, where the node runs more ranks than cores: every call follows
/// another process's time slice and finds the path's state out of the
/// caches (measured: the fixed decision's own algorithm run through the
/// path, against the library's own call, 4–64 B back to back, 4 ranks on
/// 2 cores; bench/ngcoll.md, "libngcoll's own path").
pub const PATH_COLD_NS: f64 = 80.0;
/// The same, warm (a rank per core; measured as above with 2 ranks on 2
/// cores: 21–41 ns).
pub const PATH_WARM_NS: f64 = 30.0;

/// `NETGAUGE_COLL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    On,
    Log,
}

/// `NETGAUGE_COLL_FORCE`.
#[derive(Clone, Debug, PartialEq)]
pub enum Force {
    None,
    Cycle,
    /// Per collective named, its choice.
    Fixed(Vec<(Collective, Forced)>),
}

/// One collective's forced choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forced {
    /// The library's own choice.
    Library,
    /// One of ours, and the chain's segment (0: the plan's).
    Ours(Algorithm, u64),
    /// Another of the library's algorithms: Open MPI's coll/tuned number,
    /// fan-in/out and segment size.
    LibraryAlg {
        number: u32,
        faninout: u32,
        segsize: u32,
    },
}

/// Why a setting was rejected.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("{var}={value:?}: {why}")]
    Bad {
        var: &'static str,
        value: String,
        why: &'static str,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub mode: Mode,
    pub shm: Option<PathBuf>,
    pub transport: String,
    /// None: the reader's default threshold.
    pub stale_after_ns: Option<u64>,
    pub margin: f64,
    pub polite: Option<bool>,
    /// Timed calls per side of a class's trial (0: none).
    pub trial: usize,
    pub force: Force,
    /// `NETGAUGE_COLL_LIBRARY_ALGS`.
    pub library_algs: bool,
    /// `NETGAUGE_COLL_PATH_NS` (None: by the node's placement).
    pub path_ns: Option<f64>,
    /// `NETGAUGE_COLL_MAX_RANKS`.
    pub max_ranks: usize,
}

/// The largest communicator planned unless `NETGAUGE_COLL_MAX_RANKS` says
/// otherwise: the largest power of two whose slowest share of the plan
/// keeps its ranks waiting under half a second with a core per rank
/// (`benches/plan_build.rs`, bench/ngcoll.md).
pub const DEFAULT_MAX_RANKS: usize = 256;

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::On,
            shm: None,
            transport: "mpi".into(),
            stale_after_ns: None,
            margin: 0.1,
            polite: None,
            trial: 4,
            force: Force::None,
            library_algs: true,
            path_ns: None,
            max_ranks: DEFAULT_MAX_RANKS,
        }
    }
}

fn bad(var: &'static str, value: &str, why: &'static str) -> ConfigError {
    ConfigError::Bad {
        var,
        value: value.to_string(),
        why,
    }
}

/// A 0/1 setting (on/off and yes/no too).
fn flag(var: &'static str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "1" | "on" | "yes" => Ok(true),
        "0" | "off" | "no" => Ok(false),
        _ => Err(bad(var, v, "expected 0 or 1")),
    }
}

/// A number setting: `what` when it does not parse, `check`'s reason when
/// it is out of range.
fn number(
    var: &'static str,
    v: &str,
    what: &'static str,
    check: impl Fn(f64) -> Result<f64, &'static str>,
) -> Result<f64, ConfigError> {
    let x: f64 = v.trim().parse().map_err(|_| bad(var, v, what))?;
    check(x).map_err(|why| bad(var, v, why))
}

/// `N[/fan[/segment]]`: one of the library's algorithms by its number
/// (not 0, the library's own choice).
fn library_alg(s: &str) -> Option<Forced> {
    let mut it = s.split('/').map(|x| x.trim().parse::<u32>());
    let number = it.next()?.ok().filter(|&n| n > 0)?;
    let faninout = it.next().transpose().ok()?.unwrap_or(0);
    let segsize = it.next().transpose().ok()?.unwrap_or(0);
    if it.next().is_some() {
        return None;
    }
    Some(Forced::LibraryAlg {
        number,
        faninout,
        segsize,
    })
}

/// An algorithm of `coll` by its name (the selector's names).
fn algorithm(coll: Collective, name: &str) -> Option<Algorithm> {
    coll.algorithms().iter().copied().find(|a| a.name() == name)
}

impl Config {
    /// From a variable lookup (the environment, or a map in tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let mut c = Config::default();
        if let Some(v) = get("NETGAUGE_COLL") {
            c.mode = match v.trim() {
                "off" | "0" => Mode::Off,
                "on" | "1" | "" => Mode::On,
                "log" => Mode::Log,
                _ => return Err(bad("NETGAUGE_COLL", &v, "expected off, on or log")),
            };
        }
        c.shm = get("NETGAUGE_SHM")
            .or_else(|| get(netgauge::PATH_ENV))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from);
        if let Some(v) = get("NETGAUGE_COLL_TRANSPORT").filter(|s| !s.is_empty()) {
            c.transport = v;
        }
        if let Some(v) = get("NETGAUGE_COLL_STALE_S") {
            let s = number("NETGAUGE_COLL_STALE_S", &v, "expected seconds", |s| {
                (s.is_finite() && s >= 0.0)
                    .then_some(s)
                    .ok_or("expected seconds ≥ 0")
            })?;
            c.stale_after_ns = Some((s * 1e9) as u64);
        }
        if let Some(v) = get("NETGAUGE_COLL_MARGIN") {
            c.margin = number("NETGAUGE_COLL_MARGIN", &v, "expected a fraction", |m| {
                (0.0..1.0)
                    .contains(&m)
                    .then_some(m)
                    .ok_or("expected 0 ≤ margin < 1")
            })?;
        }
        if let Some(v) = get("NETGAUGE_COLL_YIELD") {
            c.polite = Some(flag("NETGAUGE_COLL_YIELD", &v)?);
        }
        if let Some(v) = get("NETGAUGE_COLL_PATH_NS") {
            let ns = number("NETGAUGE_COLL_PATH_NS", &v, "expected nanoseconds", |ns| {
                (ns.is_finite() && (0.0..=1e6).contains(&ns))
                    .then_some(ns)
                    .ok_or("expected 0 to 1e6 ns")
            })?;
            c.path_ns = Some(ns);
        }
        if let Some(v) = get("NETGAUGE_COLL_MAX_RANKS") {
            let n = number("NETGAUGE_COLL_MAX_RANKS", &v, "expected ranks", |n| {
                (n.fract() == 0.0 && (2.0..=1e6).contains(&n))
                    .then_some(n)
                    .ok_or("expected 2 to 1000000 ranks")
            })?;
            c.max_ranks = n as usize;
        }
        if let Some(v) = get("NETGAUGE_COLL_LIBRARY_ALGS") {
            c.library_algs = flag("NETGAUGE_COLL_LIBRARY_ALGS", &v)?;
        }
        if let Some(v) = get("NETGAUGE_COLL_TRIAL") {
            c.trial = match v.trim().parse::<usize>() {
                Ok(n) if n <= crate::trial::MAX_CALLS => n,
                _ => return Err(bad("NETGAUGE_COLL_TRIAL", &v, "expected 0 to 8 calls")),
            };
        }
        if let Some(v) = get("NETGAUGE_COLL_FORCE").filter(|s| !s.trim().is_empty()) {
            c.force = if v.trim() == "cycle" {
                Force::Cycle
            } else {
                let mut list = Vec::new();
                for item in v.split(',') {
                    let (coll, rest) = item.split_once('=').ok_or_else(|| {
                        bad("NETGAUGE_COLL_FORCE", &v, "expected coll=alg[:segment]")
                    })?;
                    let coll: Collective = coll
                        .trim()
                        .parse()
                        .map_err(|_| bad("NETGAUGE_COLL_FORCE", &v, "unknown collective"))?;
                    let (alg, arg) = match rest.split_once(':') {
                        Some((a, s)) => (a.trim(), Some(s.trim())),
                        None => (rest.trim(), None),
                    };
                    let forced = match (alg, arg) {
                        ("library", None) => Forced::Library,
                        ("library", Some(a)) => library_alg(a).ok_or_else(|| {
                            bad(
                                "NETGAUGE_COLL_FORCE",
                                &v,
                                "expected library:N[/fan[/segment]]",
                            )
                        })?,
                        _ => {
                            let seg = match arg {
                                Some(s) => s.parse().map_err(|_| {
                                    bad("NETGAUGE_COLL_FORCE", &v, "bad segment size")
                                })?,
                                None => 0,
                            };
                            let a = algorithm(coll, alg).ok_or_else(|| {
                                bad("NETGAUGE_COLL_FORCE", &v, "unknown algorithm")
                            })?;
                            Forced::Ours(a, seg)
                        }
                    };
                    // One entry a collective: the set-up, the per-call
                    // choice and the library's masks each read the list,
                    // and two entries for one would set them apart.
                    if list.iter().any(|(c, _)| *c == coll) {
                        return Err(bad("NETGAUGE_COLL_FORCE", &v, "a collective named twice"));
                    }
                    list.push((coll, forced));
                }
                Force::Fixed(list)
            };
        }
        Ok(c)
    }

    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var(k).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(kv: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let m: HashMap<String, String> = kv
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_and_modes() {
        let c = parse(&[]).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(parse(&[("NETGAUGE_COLL", "off")]).unwrap().mode, Mode::Off);
        assert_eq!(parse(&[("NETGAUGE_COLL", "log")]).unwrap().mode, Mode::Log);
        assert!(parse(&[("NETGAUGE_COLL", "maybe")]).is_err());
    }

    #[test]
    fn segment_path_prefers_netgauge_shm() {
        let c = parse(&[("NETGAUGE_SHM", "/a"), ("NETGAUGE_SEGMENT", "/b")]).unwrap();
        assert_eq!(c.shm, Some(PathBuf::from("/a")));
        let c = parse(&[("NETGAUGE_SEGMENT", "/b")]).unwrap();
        assert_eq!(c.shm, Some(PathBuf::from("/b")));
    }

    #[test]
    fn numbers_are_checked() {
        assert_eq!(
            parse(&[("NETGAUGE_COLL_STALE_S", "0")])
                .unwrap()
                .stale_after_ns,
            Some(0)
        );
        assert_eq!(
            parse(&[("NETGAUGE_COLL_STALE_S", "2.5")])
                .unwrap()
                .stale_after_ns,
            Some(2_500_000_000)
        );
        assert!(parse(&[("NETGAUGE_COLL_STALE_S", "-1")]).is_err());
        assert!(parse(&[("NETGAUGE_COLL_MARGIN", "1.5")]).is_err());
        assert_eq!(
            parse(&[("NETGAUGE_COLL_MARGIN", "0.2")]).unwrap().margin,
            0.2
        );
        assert_eq!(
            parse(&[("NETGAUGE_COLL_YIELD", "0")]).unwrap().polite,
            Some(false)
        );
        assert_eq!(
            parse(&[("NETGAUGE_COLL_PATH_NS", "25")]).unwrap().path_ns,
            Some(25.0)
        );
        for bad_ns in ["-1", "x", "inf", "2e6"] {
            assert!(
                parse(&[("NETGAUGE_COLL_PATH_NS", bad_ns)]).is_err(),
                "{bad_ns}"
            );
        }
        assert_eq!(parse(&[]).unwrap().max_ranks, DEFAULT_MAX_RANKS);
        assert_eq!(
            parse(&[("NETGAUGE_COLL_MAX_RANKS", "4096")])
                .unwrap()
                .max_ranks,
            4096
        );
        for bad_ranks in ["1", "2.5", "-8", "x", "1e7"] {
            assert!(
                parse(&[("NETGAUGE_COLL_MAX_RANKS", bad_ranks)]).is_err(),
                "{bad_ranks}"
            );
        }
    }

    #[test]
    fn force_lists() {
        assert_eq!(
            parse(&[("NETGAUGE_COLL_FORCE", "cycle")]).unwrap().force,
            Force::Cycle
        );
        let c = parse(&[(
            "NETGAUGE_COLL_FORCE",
            "bcast=pipelined_chain:8192,allreduce=library,reduce=library:2/1/4096,barrier=library:4",
        )])
        .unwrap();
        assert_eq!(
            c.force,
            Force::Fixed(vec![
                (Collective::Bcast, Forced::Ours(Algorithm::BcastChain, 8192)),
                (Collective::Allreduce, Forced::Library),
                (
                    Collective::Reduce,
                    Forced::LibraryAlg {
                        number: 2,
                        faninout: 1,
                        segsize: 4096
                    }
                ),
                (
                    Collective::Barrier,
                    Forced::LibraryAlg {
                        number: 4,
                        faninout: 0,
                        segsize: 0
                    }
                ),
            ])
        );
        for bad_alg in ["library:0", "library:x", "library:1/2/3/4", "library:"] {
            assert!(
                parse(&[("NETGAUGE_COLL_FORCE", &format!("bcast={bad_alg}"))]).is_err(),
                "{bad_alg}"
            );
        }
        assert!(
            !parse(&[("NETGAUGE_COLL_LIBRARY_ALGS", "0")])
                .unwrap()
                .library_algs
        );
        assert!(parse(&[("NETGAUGE_COLL_LIBRARY_ALGS", "maybe")]).is_err());
        assert!(parse(&[("NETGAUGE_COLL_FORCE", "bcast=nonsense")]).is_err());
        assert!(parse(&[("NETGAUGE_COLL_FORCE", "gather=ring")]).is_err());
        let twice = parse(&[(
            "NETGAUGE_COLL_FORCE",
            "bcast=library,reduce=library,bcast=library:1",
        )]);
        assert!(
            matches!(&twice, Err(ConfigError::Bad { why, .. }) if why.contains("named twice")),
            "{twice:?}"
        );
    }
}
