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
//! | `NETGAUGE_COLL_TRIAL` | where the plan chose one of ours: how many of a class's calls run ours and the library's own each, timed, before the faster is kept, at first and at each re-trial (`ngcoll::trial`; 0: the plan's choice stands untried; more than 8 is rejected; none under `NETGAUGE_COLL_FORCE`) | 4 |
//! | `NETGAUGE_COLL_FORCE` | testing: `cycle` (every call on a communicator takes the next of our algorithms and the library's, in turn) or `coll=alg[:segment],…` (no segment, or 0: the plan's, else the whole message) | none |
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
    /// (collective, algorithm or None for the library, chain segment).
    Fixed(Vec<(Collective, Option<Algorithm>, u64)>),
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
}

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
            let s: f64 = v
                .trim()
                .parse()
                .map_err(|_| bad("NETGAUGE_COLL_STALE_S", &v, "expected seconds"))?;
            if !(s.is_finite() && s >= 0.0) {
                return Err(bad("NETGAUGE_COLL_STALE_S", &v, "expected seconds ≥ 0"));
            }
            c.stale_after_ns = Some((s * 1e9) as u64);
        }
        if let Some(v) = get("NETGAUGE_COLL_MARGIN") {
            let m: f64 = v
                .trim()
                .parse()
                .map_err(|_| bad("NETGAUGE_COLL_MARGIN", &v, "expected a fraction"))?;
            if !(0.0..1.0).contains(&m) {
                return Err(bad("NETGAUGE_COLL_MARGIN", &v, "expected 0 ≤ margin < 1"));
            }
            c.margin = m;
        }
        if let Some(v) = get("NETGAUGE_COLL_YIELD") {
            c.polite = match v.trim() {
                "1" | "on" | "yes" => Some(true),
                "0" | "off" | "no" => Some(false),
                _ => return Err(bad("NETGAUGE_COLL_YIELD", &v, "expected 0 or 1")),
            };
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
                    let (alg, seg) = match rest.split_once(':') {
                        Some((a, s)) => (
                            a.trim(),
                            s.trim()
                                .parse()
                                .map_err(|_| bad("NETGAUGE_COLL_FORCE", &v, "bad segment size"))?,
                        ),
                        None => (rest.trim(), 0),
                    };
                    let alg =
                        if alg == "library" {
                            None
                        } else {
                            Some(algorithm(coll, alg).ok_or_else(|| {
                                bad("NETGAUGE_COLL_FORCE", &v, "unknown algorithm")
                            })?)
                        };
                    list.push((coll, alg, seg));
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
    }

    #[test]
    fn force_lists() {
        assert_eq!(
            parse(&[("NETGAUGE_COLL_FORCE", "cycle")]).unwrap().force,
            Force::Cycle
        );
        let c = parse(&[(
            "NETGAUGE_COLL_FORCE",
            "bcast=pipelined_chain:8192,allreduce=library",
        )])
        .unwrap();
        assert_eq!(
            c.force,
            Force::Fixed(vec![
                (Collective::Bcast, Some(Algorithm::BcastChain), 8192),
                (Collective::Allreduce, None, 0)
            ])
        );
        assert!(parse(&[("NETGAUGE_COLL_FORCE", "bcast=nonsense")]).is_err());
        assert!(parse(&[("NETGAUGE_COLL_FORCE", "gather=ring")]).is_err());
    }
}
