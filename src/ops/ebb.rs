//! `ngctl ebb`: the effective bisection bandwidth of a node set, measured by
//! the nodes' daemons. Each round is a random perfect matching of the
//! nodes; every pair streams both ways at once over the same time window
//! (a `StreamOrder` to one node of the pair, whose daemon asks its partner's
//! consent for a flow session), and each direction's bandwidth is one
//! sample. The distribution (min, median, mean, max) is given per round and
//! over all rounds; with `publish`, this node's daemon writes the overall
//! one into its segment.
//!
//! The tool speaks to the daemons as this node's operator
//! (`control::operator_name`), with the cluster key of the daemon's
//! configuration: a daemon takes stream orders only from operators.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::Serialize;

use super::{usage, OpsError};
use crate::control::{
    self, BisectionReport, ConnConfig, Connection, Msg, StreamOrder, StreamResult,
};
use crate::daemon::config::Config;
use crate::link::Kind;

/// What `ngctl ebb` is asked to do.
#[derive(Clone, Debug)]
pub struct EbbArgs {
    /// The daemon configuration of this node (its name, key and peers).
    pub config: PathBuf,
    /// The node set (names); empty: this node and all its peers.
    pub nodes: Vec<String>,
    pub transport: Kind,
    pub rounds: usize,
    /// How long every pair streams in a round.
    pub window: Duration,
    pub size_bytes: u64,
    pub burst: u32,
    /// Most payload bytes one pair may move in a round (what its nodes
    /// are asked to consent to).
    pub max_bytes: u64,
    /// Seed of the matchings (None: random).
    pub seed: Option<u64>,
    /// Hand the overall result to this node's daemon to publish.
    pub publish: bool,
}

/// One pair of a round: `a` streamed to `b` and back.
#[derive(Clone, Debug, Serialize)]
pub struct EbbPair {
    pub a: String,
    pub b: String,
    /// Payload bandwidth a → b and b → a, bytes/s (None: not measured).
    pub a_to_b_bytes_per_s: Option<f64>,
    pub b_to_a_bytes_per_s: Option<f64>,
    pub bytes: u64,
    pub error: Option<String>,
}

/// A distribution of per-direction bandwidths, bytes/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub samples: usize,
    pub min_bytes_per_s: f64,
    pub median_bytes_per_s: f64,
    pub mean_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
}

impl Distribution {
    /// Of the finite samples; None when there is none.
    pub fn of(samples: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = samples.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Distribution {
            samples: n,
            min_bytes_per_s: v[0],
            median_bytes_per_s: median,
            mean_bytes_per_s: v.iter().sum::<f64>() / n as f64,
            max_bytes_per_s: v[n - 1],
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct EbbRound {
    pub pairs: Vec<EbbPair>,
    /// The node left out (an odd node set).
    pub idle: Option<String>,
    pub distribution: Option<Distribution>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EbbResult {
    pub transport: Kind,
    pub nodes: Vec<String>,
    pub msg_bytes: u64,
    pub window_s: f64,
    pub rounds: Vec<EbbRound>,
    pub overall: Option<Distribution>,
    /// The daemon of this node took the result to publish.
    pub published: bool,
}

impl EbbPair {
    fn samples(&self) -> impl Iterator<Item = f64> {
        [self.a_to_b_bytes_per_s, self.b_to_a_bytes_per_s]
            .into_iter()
            .flatten()
    }
}

/// A random perfect matching of `n` nodes: pairs of indices, every node in
/// at most one (one left out when `n` is odd), and the one left out.
pub fn matching(n: usize, rng: &mut impl rand::Rng) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let idle = (n % 2 == 1).then(|| order[n - 1]);
    let pairs = order.chunks_exact(2).map(|c| (c[0], c[1])).collect();
    (pairs, idle)
}

/// Where a node's daemon listens: this node's own listening address (as
/// the daemon finds it; a wildcard address means the loopback), a peer's
/// configured address.
fn address_book(cfg: &Config, me: &str) -> Result<Vec<(String, SocketAddr)>, OpsError> {
    let mut own = cfg.listen_addr().map_err(|e| usage(e.to_string()))?;
    if own.ip().is_unspecified() {
        own.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let mut book = vec![(me.to_string(), own)];
    book.extend(cfg.peers.iter().map(|p| (p.name.clone(), p.address)));
    Ok(book)
}

/// Slack after a window for the daemons' answers (the stream's last round
/// and the session's end).
const ANSWER_SLACK: Duration = Duration::from_secs(20);
/// From sending the orders to the window's start: time for every driver to
/// negotiate its session.
const LEAD: Duration = Duration::from_secs(2);

fn order_one(
    cc: &ConnConfig,
    addr: SocketAddr,
    node: &str,
    order: &StreamOrder,
    deadline: Instant,
) -> Result<StreamResult, String> {
    let mut conn = Connection::connect(addr, node, cc).map_err(|e| format!("{node}: {e}"))?;
    let answer = conn.request(&Msg::StreamOrder(order.clone()), deadline);
    conn.close();
    match answer.map_err(|e| format!("{node}: {e}"))? {
        Msg::StreamResult(r) if r.nonce == order.nonce => Ok(r),
        other => Err(format!("{node}: unexpected answer {}", other.kind())),
    }
}

fn finite(x: f64) -> Option<f64> {
    (x.is_finite() && x > 0.0).then_some(x)
}

/// Measure; publish when asked.
pub fn ebb(a: &EbbArgs) -> Result<EbbResult, OpsError> {
    let cfg = Config::load(&a.config).map_err(|e| usage(format!("{}: {e}", a.config.display())))?;
    let me = cfg.node_name();
    let key = control::load_key(&cfg.key_file)
        .map_err(|e| usage(format!("{}: {e}", cfg.key_file.display())))?;
    let cc = ConnConfig::new(&control::operator_name(&me), key);
    let book = address_book(&cfg, &me)?;
    let nodes: Vec<(String, SocketAddr)> = if a.nodes.is_empty() {
        book.clone()
    } else {
        a.nodes
            .iter()
            .map(|n| {
                book.iter()
                    .find(|(name, _)| name == n)
                    .cloned()
                    .ok_or_else(|| usage(format!("{n} is neither this node nor a peer of it")))
            })
            .collect::<Result<_, _>>()?
    };
    if nodes.len() < 2 || a.rounds == 0 {
        return Err(usage("ebb needs at least 2 nodes and 1 round"));
    }
    let order = |partner: &str, nonce: u64, start_unix_ns: u64| StreamOrder {
        nonce,
        partner: partner.to_string(),
        transport: a.transport,
        size_bytes: a.size_bytes,
        burst: a.burst,
        start_unix_ns,
        duration_ns: a.window.as_nanos() as u64,
        max_bytes: a.max_bytes,
        bidirectional: true,
    };
    Msg::StreamOrder(order("x", 0, 1))
        .validate()
        .map_err(|e| usage(format!("{e}")))?;
    let mut rng = match a.seed {
        Some(s) => rand::rngs::StdRng::seed_from_u64(s),
        None => rand::rngs::StdRng::from_entropy(),
    };
    let mut rounds = Vec::with_capacity(a.rounds);
    for _ in 0..a.rounds {
        let (pairs, idle) = matching(nodes.len(), &mut rng);
        let start_unix_ns = crate::publish::unix_now_ns() + LEAD.as_nanos() as u64;
        let deadline = Instant::now() + LEAD + a.window + ANSWER_SLACK;
        let results: Vec<Result<StreamResult, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = pairs
                .iter()
                .map(|&(x, y)| {
                    let o = order(&nodes[y].0, rand::random(), start_unix_ns);
                    let (cc, (name, addr)) = (&cc, &nodes[x]);
                    s.spawn(move || order_one(cc, *addr, name, &o, deadline))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("order thread panicked".into()))
                })
                .collect()
        });
        let pairs: Vec<EbbPair> = pairs
            .iter()
            .zip(results)
            .map(|(&(x, y), r)| {
                let mut p = EbbPair {
                    a: nodes[x].0.clone(),
                    b: nodes[y].0.clone(),
                    a_to_b_bytes_per_s: None,
                    b_to_a_bytes_per_s: None,
                    bytes: 0,
                    error: None,
                };
                match r {
                    Ok(r) => {
                        p.a_to_b_bytes_per_s = finite(r.out_bytes_per_s);
                        p.b_to_a_bytes_per_s = finite(r.in_bytes_per_s);
                        p.bytes = r.bytes;
                        p.error = r.error;
                    }
                    Err(e) => p.error = Some(e),
                }
                p
            })
            .collect();
        let distribution = Distribution::of(pairs.iter().flat_map(EbbPair::samples));
        rounds.push(EbbRound {
            pairs,
            idle: idle.map(|i| nodes[i].0.clone()),
            distribution,
        });
    }
    let overall = Distribution::of(
        rounds
            .iter()
            .flat_map(|r| r.pairs.iter().flat_map(EbbPair::samples)),
    );
    let mut result = EbbResult {
        transport: a.transport,
        nodes: nodes.iter().map(|n| n.0.clone()).collect(),
        msg_bytes: a.size_bytes,
        window_s: a.window.as_secs_f64(),
        rounds,
        overall,
        published: false,
    };
    if let (true, Some(d)) = (a.publish, overall) {
        let report = BisectionReport {
            transport: a.transport,
            result: netgauge::Bisection {
                min_bytes_per_s: d.min_bytes_per_s,
                median_bytes_per_s: d.median_bytes_per_s,
                mean_bytes_per_s: d.mean_bytes_per_s,
                max_bytes_per_s: d.max_bytes_per_s,
                nodes: result.nodes.len() as u32,
                rounds: result.rounds.len() as u32,
                msg_bytes: a.size_bytes,
                measured_unix_ns: crate::publish::unix_now_ns(),
            },
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let (name, addr) = &book[0];
        let mut conn = Connection::connect(*addr, name, &cc)
            .map_err(|e| usage(format!("cannot reach this node's daemon: {e}")))?;
        let answer = conn.request(&Msg::Bisection(report), deadline);
        conn.close();
        result.published = matches!(answer, Ok(Msg::Bisection(_)));
        if !result.published {
            return Err(usage(
                "this node's daemon did not take the result to publish",
            ));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matching_pairs_every_node_once() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in 2..10 {
            let (pairs, idle) = matching(n, &mut rng);
            let mut seen: Vec<usize> = pairs.iter().flat_map(|&(a, b)| [a, b]).collect();
            seen.extend(idle);
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
            assert_eq!(pairs.len(), n / 2);
            assert_eq!(idle.is_some(), n % 2 == 1);
        }
    }

    #[test]
    fn matchings_vary() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let first = matching(8, &mut rng).0;
        assert!((0..20).any(|_| matching(8, &mut rng).0 != first));
    }

    #[test]
    fn the_distribution_of_finite_samples() {
        let d = Distribution::of([4.0, f64::NAN, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(d.samples, 4);
        assert_eq!(
            (
                d.min_bytes_per_s,
                d.median_bytes_per_s,
                d.mean_bytes_per_s,
                d.max_bytes_per_s
            ),
            (1.0, 2.5, 2.5, 4.0)
        );
        assert_eq!(Distribution::of([7.0]).unwrap().median_bytes_per_s, 7.0);
        assert!(Distribution::of([f64::NAN]).is_none());
    }
}
