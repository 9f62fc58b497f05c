//! Bandwidth sharing (Vienne et al.): penalties of k concurrent flows per
//! conflict scheme with bootstrap intervals, the β fit of the sharing
//! model, the model's penalty of any set of flows between nodes (their
//! placement simulator's step), and its error measures E_rel and E_abs.
//!
//! A conflict cell holds the rounds `pattern::conflict` timed for one
//! (scheme, k): every flow's time at n messages and at one. A flow class's
//! gap is (the rounds' mean time at n − at 1) / (n − 1), the PRTT method's
//! gap with the answers' cost cancelled, each side taken at the lower
//! quartile of its rounds ([`ROUND_QUANTILE`]); the penalty of
//! k flows is that gap over the same class's gap alone (k = 1): the paper's
//! T_shared / T_ref for the same amount of data. The incoming scheme's
//! penalty is its slowest flow's: the k requests leave this node one after
//! the other (each as large as the answers it asks for), so the flows into
//! it start staggered by one message time each and the first ones meet
//! fewer competitors; the mean flow then reads low by about (k² − 1)/6
//! messages per burst, while the last flow's end is the time the k flows'
//! bytes took through the shared link, from the first start. The mixed
//! scheme's
//! penalty is the mean of its outgoing and its incoming class, each against
//! its own reference.

use serde::{Deserialize, Serialize};

use rand::Rng as _;

use super::stats::{percentile_ci95, quantile, seeded_rng, Rng};

/// The quantile of a cell's rounds that stands for it. Interference only
/// adds time (a responder or this node descheduled by other work on a
/// shared host), and a round of one message per flow, short as it is,
/// loses a large share to one such wait: on a loaded 2-core host the
/// median single round of a 100 Mbit/s link read 8.5 or 12 ms from run to
/// run, its lower quartile 8.5–9.3 ms. The lower quartile keeps what the
/// link does and still averages over a quarter of the rounds.
pub const ROUND_QUANTILE: f64 = 0.25;

/// A conflict scheme (the paper's elementary conflicts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conflict {
    /// k flows out of this node at once (1:k).
    Outgoing,
    /// k flows into this node at once (k:1).
    Incoming,
    /// k flows out to k peers and k flows in from k others, at once.
    Mixed,
}

impl Conflict {
    pub const ALL: [Conflict; 3] = [Conflict::Outgoing, Conflict::Incoming, Conflict::Mixed];

    pub fn name(self) -> &'static str {
        match self {
            Conflict::Outgoing => "outgoing",
            Conflict::Incoming => "incoming",
            Conflict::Mixed => "mixed",
        }
    }

    /// Flows out and flows in of k concurrent flows of this scheme.
    pub fn flows(self, k: usize) -> (usize, usize) {
        match self {
            Conflict::Outgoing => (k, 0),
            Conflict::Incoming => (0, k),
            Conflict::Mixed => (k, k),
        }
    }

    /// The largest k this scheme reaches with `peers` peers (mixed needs
    /// disjoint senders and receivers).
    pub fn max_k(self, peers: usize) -> usize {
        match self {
            Conflict::Mixed => peers / 2,
            _ => peers,
        }
    }
}

/// The rounds of one (scheme, k): per round the time of every flow (out
/// flows first, then in flows), at n messages and at one, ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConflictCell {
    pub scheme: Conflict,
    pub k: usize,
    /// Messages per flow of the burst rounds.
    pub n: u32,
    pub size_bytes: u64,
    /// `flows` values per round.
    pub burst_ns: Vec<f64>,
    pub single_ns: Vec<f64>,
}

impl ConflictCell {
    pub fn new(scheme: Conflict, k: usize, n: u32, size_bytes: u64, rounds: usize) -> Self {
        let f = Self::flow_count(scheme, k);
        ConflictCell {
            scheme,
            k,
            n,
            size_bytes,
            burst_ns: Vec::with_capacity(rounds * f),
            single_ns: Vec::with_capacity(rounds * f),
        }
    }

    fn flow_count(scheme: Conflict, k: usize) -> usize {
        let (o, i) = scheme.flows(k);
        o + i
    }

    pub fn flows(&self) -> usize {
        Self::flow_count(self.scheme, self.k)
    }

    /// Per round, the mean time of the flows of one class (out or in), or
    /// (slowest) their maximum. Empty when the cell has no such flows.
    fn class_rounds(&self, times: &[f64], out: bool, slowest: bool) -> Vec<f64> {
        let (o, i) = self.scheme.flows(self.k);
        let (from, len) = if out { (0, o) } else { (o, i) };
        let f = self.flows();
        if len == 0 || f == 0 {
            return Vec::new();
        }
        times
            .chunks_exact(f)
            .map(|r| &r[from..from + len])
            .filter(|c| c.iter().all(|x| x.is_finite()))
            .map(|c| {
                if slowest {
                    c.iter().copied().fold(f64::MIN, f64::max)
                } else {
                    c.iter().sum::<f64>() / len as f64
                }
            })
            .collect()
    }
}

/// Everything a conflict probe measured (what `--raw` keeps).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ContentionRaw {
    /// Peers the probe had (k ≤ peers; mixed k ≤ peers / 2).
    pub peers: usize,
    pub cells: Vec<ConflictCell>,
    /// Rounds lost and repeated.
    pub lost_rounds: u32,
}

/// A value with its 95 % interval (NaN when not measured).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Est {
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub value: f64,
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub lo: f64,
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub hi: f64,
}

impl Est {
    pub const NONE: Est = Est {
        value: f64::NAN,
        lo: f64::NAN,
        hi: f64::NAN,
    };

    /// Whether `x` lies in the interval.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// The penalty of k flows of one scheme.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Penalty {
    pub k: usize,
    /// T_shared / T_ref of the flows' mean, with its 95 % interval.
    pub penalty: Est,
    /// The same for the slowest flow of each round (what a step that
    /// waits for all its transfers pays).
    pub slowest: Est,
    /// Gap per message of a flow under this conflict, ns (the mean over
    /// the out and in classes for mixed).
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub gap_ns: f64,
    /// Mixed only: the outgoing and the incoming class on their own.
    pub out: Option<Est>,
    pub inc: Option<Est>,
    /// Rounds behind the value.
    pub rounds: usize,
}

/// The fit of a conflict probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContentionFit {
    pub size_bytes: u64,
    /// One per scheme of [`Conflict::ALL`], k = 1 first.
    pub outgoing: Vec<Penalty>,
    pub incoming: Vec<Penalty>,
    pub mixed: Vec<Penalty>,
    /// β of the sharing model: the outgoing penalty per flow, the least
    /// squares slope of P(k) = β·k over k ≥ 2 (the paper's estimate).
    pub beta: Est,
    /// The same slope over the incoming penalties (the model has one β;
    /// a link whose two directions share differently shows here).
    pub beta_in: Est,
    /// The model's error on the measured cells with this β (γ = 0: every
    /// flow of a symmetric scheme is strongly slow), per cent: the mean of
    /// |E_rel| over every measured (scheme, k ≥ 2).
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub e_abs_pct: f64,
    /// Gap of one flow alone, out and in, ns.
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub ref_gap_out_ns: f64,
    #[serde(with = "netgauge::ext::nan_as_null")]
    pub ref_gap_in_ns: f64,
}

impl ContentionFit {
    pub fn scheme(&self, s: Conflict) -> &[Penalty] {
        match s {
            Conflict::Outgoing => &self.outgoing,
            Conflict::Incoming => &self.incoming,
            Conflict::Mixed => &self.mixed,
        }
    }
}

/// The rounds of one cell by class: (out, in) × (mean, slowest), burst and single.
#[derive(Clone, Default)]
struct CellRounds {
    /// [class][slowest] → per-round values at n and at 1.
    burst: [[Vec<f64>; 2]; 2],
    single: [[Vec<f64>; 2]; 2],
    n: u32,
}

impl CellRounds {
    fn of(c: &ConflictCell) -> Self {
        let mut r = CellRounds {
            n: c.n,
            ..Default::default()
        };
        for (class, out) in [(0, true), (1, false)] {
            for (w, slowest) in [(0, false), (1, true)] {
                r.burst[class][w] = c.class_rounds(&c.burst_ns, out, slowest);
                r.single[class][w] = c.class_rounds(&c.single_ns, out, slowest);
            }
        }
        r
    }

    fn rounds(&self) -> usize {
        self.burst
            .iter()
            .map(|c| c[0].len())
            .max()
            .unwrap_or(0)
            .min(self.single.iter().map(|c| c[0].len()).max().unwrap_or(0))
    }

    /// Gap of a class (0 out, 1 in) from the medians, or from a bootstrap
    /// resample of the rounds when `rng` is given.
    fn gap(
        &self,
        class: usize,
        slowest: bool,
        mut rng: Option<&mut Rng>,
        scratch: &mut Vec<f64>,
    ) -> f64 {
        let w = usize::from(slowest);
        let (b, s) = (&self.burst[class][w], &self.single[class][w]);
        if b.is_empty() || s.is_empty() || self.n < 2 {
            return f64::NAN;
        }
        let mut pick = |xs: &[f64]| match rng.as_deref_mut() {
            Some(rng) => {
                scratch.clear();
                scratch.extend((0..xs.len()).map(|_| xs[rng.gen_range(0..xs.len())]));
                quantile(scratch, ROUND_QUANTILE)
            }
            None => quantile(xs, ROUND_QUANTILE),
        };
        let (tb, ts) = (pick(b), pick(s));
        (tb - ts) / f64::from(self.n - 1)
    }
}

/// Point values of every (scheme, k) and β, from the rounds or from one
/// bootstrap resample.
struct Point {
    /// [scheme][k − 1] → (mean penalty, slowest penalty, gap, out, in)
    cells: [Vec<[f64; 5]>; 3],
    beta: f64,
    beta_in: f64,
}

fn slope_through_origin(points: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in points.filter(|p| p.1.is_finite()) {
        sxy += x * y;
        sxx += x * x;
    }
    if sxx > 0.0 {
        sxy / sxx
    } else {
        f64::NAN
    }
}

fn point(cells: &[(Conflict, usize, CellRounds)], mut rng: Option<&mut Rng>) -> Point {
    let mut scratch = Vec::new();
    let mut gap =
        |c: &CellRounds, class, slowest| c.gap(class, slowest, rng.as_deref_mut(), &mut scratch);
    let find = |s: Conflict, k: usize| cells.iter().find(|c| c.0 == s && c.1 == k).map(|c| &c.2);
    let (ref_out, ref_in) = (
        find(Conflict::Outgoing, 1).map_or(f64::NAN, |c| gap(c, 0, false)),
        find(Conflict::Incoming, 1).map_or(f64::NAN, |c| gap(c, 1, false)),
    );
    let mut out: [Vec<[f64; 5]>; 3] = Default::default();
    for (i, s) in Conflict::ALL.iter().enumerate() {
        let kmax = cells
            .iter()
            .filter(|c| c.0 == *s)
            .map(|c| c.1)
            .max()
            .unwrap_or(0);
        for k in 1..=kmax {
            let Some(c) = find(*s, k) else {
                out[i].push([f64::NAN; 5]);
                continue;
            };
            let v = match s {
                Conflict::Outgoing => {
                    let g = gap(c, 0, false);
                    [
                        g / ref_out,
                        gap(c, 0, true) / ref_out,
                        g,
                        f64::NAN,
                        f64::NAN,
                    ]
                }
                Conflict::Incoming => {
                    // The slowest flow: see the module documentation.
                    let g = gap(c, 1, true);
                    [g / ref_in, g / ref_in, g, f64::NAN, f64::NAN]
                }
                Conflict::Mixed => {
                    let (go, gi) = (gap(c, 0, false), gap(c, 1, false));
                    let (po, pi) = (go / ref_out, gi / ref_in);
                    let slow = (gap(c, 0, true) / ref_out).max(gap(c, 1, true) / ref_in);
                    [(po + pi) / 2.0, slow, (go + gi) / 2.0, po, pi]
                }
            };
            out[i].push(v);
        }
    }
    let beta_of = |v: &Vec<[f64; 5]>| {
        slope_through_origin(
            v.iter()
                .enumerate()
                .skip(1)
                .map(|(i, p)| ((i + 1) as f64, p[0])),
        )
    };
    Point {
        beta: beta_of(&out[0]),
        beta_in: beta_of(&out[1]),
        cells: out,
    }
}

/// Penalties with bootstrap intervals (`resamples` replicates; 0: no
/// intervals) and the β fit.
pub fn fit_contention(raw: &ContentionRaw, resamples: usize, seed: u64) -> ContentionFit {
    let cells: Vec<(Conflict, usize, CellRounds)> = raw
        .cells
        .iter()
        .map(|c| (c.scheme, c.k, CellRounds::of(c)))
        .collect();
    let p = point(&cells, None);
    let mut rng = seeded_rng(seed);
    let reps: Vec<Point> = (0..resamples)
        .map(|_| point(&cells, Some(&mut rng)))
        .collect();
    let est = |value: f64, pick: &dyn Fn(&Point) -> f64| -> Est {
        if resamples == 0 || !value.is_finite() {
            return Est {
                value,
                lo: f64::NAN,
                hi: f64::NAN,
            };
        }
        let xs: Vec<f64> = reps.iter().map(pick).filter(|x| x.is_finite()).collect();
        if xs.len() < resamples / 2 {
            return Est {
                value,
                lo: f64::NAN,
                hi: f64::NAN,
            };
        }
        let (lo, hi) = percentile_ci95(&xs);
        Est { value, lo, hi }
    };
    let mut schemes: [Vec<Penalty>; 3] = Default::default();
    for (i, s) in Conflict::ALL.iter().enumerate() {
        for (j, v) in p.cells[i].iter().enumerate() {
            let at = |f: usize| move |q: &Point| q.cells[i].get(j).map_or(f64::NAN, |c| c[f]);
            let rounds = cells
                .iter()
                .find(|c| c.0 == *s && c.1 == j + 1)
                .map_or(0, |c| c.2.rounds());
            schemes[i].push(Penalty {
                k: j + 1,
                penalty: est(v[0], &at(0)),
                slowest: est(v[1], &at(1)),
                gap_ns: v[2],
                out: (*s == Conflict::Mixed).then(|| est(v[3], &at(3))),
                inc: (*s == Conflict::Mixed).then(|| est(v[4], &at(4))),
                rounds,
            });
        }
    }
    let beta = est(p.beta, &|q| q.beta);
    let beta_in = est(p.beta_in, &|q| q.beta_in);
    let e_abs_pct = model_error(&schemes, p.beta);
    let [outgoing, incoming, mixed] = schemes;
    let ref_gap = |s: &[Penalty]| s.first().map_or(f64::NAN, |p| p.gap_ns);
    ContentionFit {
        size_bytes: raw.cells.first().map_or(0, |c| c.size_bytes),
        ref_gap_out_ns: ref_gap(&outgoing),
        ref_gap_in_ns: ref_gap(&incoming),
        outgoing,
        incoming,
        mixed,
        beta,
        beta_in,
        e_abs_pct,
    }
}

/// E_abs (per cent) of the sharing model with `beta` (γ = 0) over every
/// measured (scheme, k ≥ 2): the model's penalty of a symmetric conflict
/// of k flows is k·β.
fn model_error(schemes: &[Vec<Penalty>; 3], beta: f64) -> f64 {
    let (pred, meas): (Vec<f64>, Vec<f64>) = schemes
        .iter()
        .flatten()
        .filter(|p| p.k >= 2 && p.penalty.value.is_finite())
        .map(|p| (p.k as f64 * beta, p.penalty.value))
        .unzip();
    e_abs(&pred, &meas)
}

/// E_rel of one prediction, per cent: (T_p − T_m) / T_m · 100 (negative:
/// optimistic).
pub fn e_rel(predicted: f64, measured: f64) -> f64 {
    (predicted - measured) / measured * 100.0
}

/// E_abs, per cent: the mean |E_rel| over the communications of a graph;
/// NaN when there are none.
pub fn e_abs(predicted: &[f64], measured: &[f64]) -> f64 {
    let v: Vec<f64> = predicted
        .iter()
        .zip(measured)
        .map(|(&p, &m)| e_rel(p, m).abs())
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// The sharing model's parameters (Vienne et al., Gigabit Ethernet model).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sharing {
    pub beta: f64,
    pub gamma_o: f64,
    pub gamma_i: f64,
}

/// The model's penalty of each flow of a communication graph (flows as
/// (source node, destination node), all starting together with the same
/// amount of data): p = max(p_o, p_i) with
/// p_o = 1 if the source sends one flow, else Δ_o·β·(1 + γ_o(Δ_o − |C_o^m|))
/// for a strongly slow flow (its destination has the largest incoming
/// degree among the source's flows) and Δ_o·β·(1 − γ_o/|C_o^m|) for the
/// others; p_i likewise with the incoming degree and γ_i. What a step of
/// a collective pays for its concurrent transfers, and the placement
/// simulator's step.
pub fn sharing_penalties(flows: &[(usize, usize)], m: Sharing) -> Vec<f64> {
    let out_deg = |v: usize| flows.iter().filter(|f| f.0 == v).count();
    let in_deg = |v: usize| flows.iter().filter(|f| f.1 == v).count();
    flows
        .iter()
        .map(|&(s, d)| {
            let (dout, din) = (out_deg(s), in_deg(d));
            // Outgoing: the flows leaving s, ranked by their destinations'
            // incoming degree; incoming: the flows reaching d, ranked by
            // their sources' outgoing degree.
            let out_far = flows.iter().filter(|f| f.0 == s).map(|f| in_deg(f.1));
            let in_far = flows.iter().filter(|f| f.1 == d).map(|f| out_deg(f.0));
            let p_o = side_penalty(dout, din, out_far, m.beta, m.gamma_o);
            let p_i = side_penalty(din, dout, in_far, m.beta, m.gamma_i);
            p_o.max(p_i)
        })
        .collect()
}

/// One side's penalty of a flow in [`sharing_penalties`]: 1 when its node
/// has `k` ≤ 1 flows on this side, else k·β·(1 + γ(k − |C^m|)) when the
/// flow's far end, of degree `own`, has the largest degree among `degs`
/// (the far ends' degrees of the node's `k` flows, |C^m| of them the
/// largest) and k·β·(1 − γ/|C^m|) when not.
fn side_penalty(
    k: usize,
    own: usize,
    degs: impl Iterator<Item = usize> + Clone,
    beta: f64,
    gamma: f64,
) -> f64 {
    if k <= 1 {
        return 1.0;
    }
    let max = degs.clone().max().unwrap_or(0);
    let card = degs.filter(|&x| x == max).count() as f64;
    let k = k as f64;
    if own == max {
        k * beta * (1.0 + gamma * (k - card))
    } else {
        k * beta * (1.0 - gamma / card)
    }
}

#[cfg(test)]
#[path = "contention_tests.rs"]
mod tests;
