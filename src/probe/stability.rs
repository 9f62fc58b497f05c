//! The stability verdict: can the small-message samples be trusted, and if
//! not, the likely cause and what fixes it.
//!
//! - **Shared core**: the driving thread gave its CPU away in at least
//!   [`SHARED_SWITCHES_PER_ROUND_TRIP`] of the round trips of the repeated
//!   smallest size. A driver that busy-polls on a core of its own keeps it
//!   (a scheduler tick or two over hundreds of round trips); one that
//!   shares its core with its responder hands it over in every round trip,
//!   and the round trip then measures the scheduler: on loopback EEL read
//!   3.4 µs on two cores and 55 µs on one, each time with a tight interval.
//! - **Multi-modal**: the round trips of the smallest size fall into two
//!   groups, each at least a quarter of the samples, a factor of at least
//!   [`MODE_RATIO`] apart (a path that alternates between two states).
//! - **Runs disagree**: the smallest size measured first and again at the
//!   end of the sweep gives median round trips whose 95 % intervals are
//!   disjoint and at least [`DISAGREE_REL`] apart (the sweep kept the lower).

use netgauge::ext::Instability;
use serde::{Deserialize, Serialize};

use crate::model::{stats, CpuShare, SizeSamples};

/// Context switches per round trip from which the driver is taken to share
/// its core.
pub const SHARED_SWITCHES_PER_ROUND_TRIP: f64 = 0.5;
/// Two groups of round trips this far apart are two modes.
pub const MODE_RATIO: f64 = 1.5;
/// Medians of the two measurements of the smallest size this far apart
/// (and beyond their intervals) disagree.
pub const DISAGREE_REL: f64 = 0.25;

/// The verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// `Instability::None` when the samples look sound.
    #[serde(with = "cause_name")]
    pub cause: Instability,
    /// What was seen, and what fixes it (empty when sound).
    pub detail: String,
}

impl Default for Stability {
    fn default() -> Self {
        Self {
            cause: Instability::None,
            detail: String::new(),
        }
    }
}

impl Stability {
    pub fn is_stable(&self) -> bool {
        self.cause == Instability::None
    }
}

/// The cause serialized by its name.
mod cause_name {
    use netgauge::ext::Instability;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(c: &Instability, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(c.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Instability, D::Error> {
        let name = String::deserialize(d)?;
        Ok([
            Instability::None,
            Instability::SharedCore,
            Instability::MultiModal,
            Instability::RunsDisagree,
            Instability::Interference,
        ]
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or(Instability::Unknown(255)))
    }
}

/// The two modes of `xs`, if it has them: (the upper end of the lower
/// group, the lower end of the upper group).
pub fn two_modes(xs: &[f64]) -> Option<(f64, f64)> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n < 8 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let quarter = n.div_ceil(4);
    (quarter - 1..n - quarter)
        .filter(|&i| v[i] > 0.0 && v[i + 1] >= MODE_RATIO * v[i])
        .max_by(|&a, &b| (v[a + 1] / v[a]).total_cmp(&(v[b + 1] / v[b])))
        .map(|i| (v[i], v[i + 1]))
}

/// The verdict on a sweep: `samples` (the smallest first), the smallest
/// size's other measurement and the driver's context switches.
pub fn verdict(
    samples: &[SizeSamples],
    repeat: Option<&SizeSamples>,
    cpu: Option<&CpuShare>,
) -> Stability {
    let fmt_us = |ns: f64| format!("{:.1} µs", ns / 1e3);
    if let Some(c) = cpu.filter(|c| c.round_trips > 0) {
        let per = c.switches as f64 / f64::from(c.round_trips);
        if per >= SHARED_SWITCHES_PER_ROUND_TRIP {
            return Stability {
                cause: Instability::SharedCore,
                detail: format!(
                    "the driving thread gave its CPU away {} times in {} round trips: the \
                     driver and the responder (or another busy process) share a core, and \
                     the round trips measure the scheduler; pin them to cores of their own \
                     (ngctl probe --cpu N, ngctl serve --cpu M; the daemon's probe_cpu)",
                    c.switches, c.round_trips
                ),
            };
        }
    }
    let smallest = samples.iter().min_by_key(|s| s.size_bytes);
    for s in smallest.into_iter().chain(repeat) {
        if let Some((lo, hi)) = two_modes(&s.prtt1_ns) {
            return Stability {
                cause: Instability::MultiModal,
                detail: format!(
                    "the {} B round trips fall into two groups (up to {} and from {}): the \
                     path or the hosts alternate between two states; EEL is not one number",
                    s.size_bytes,
                    fmt_us(lo),
                    fmt_us(hi)
                ),
            };
        }
    }
    if let (Some(a), Some(b)) = (smallest, repeat) {
        let (ma, mb) = (stats::median(&a.prtt1_ns), stats::median(&b.prtt1_ns));
        let (la, ha) = stats::median_ci95(&a.prtt1_ns);
        let (lb, hb) = stats::median_ci95(&b.prtt1_ns);
        let disjoint = ha < lb || hb < la;
        if disjoint && (ma - mb).abs() > DISAGREE_REL * ma.min(mb) {
            return Stability {
                cause: Instability::RunsDisagree,
                detail: format!(
                    "the {} B round trip measured twice reads {} and {} (medians, beyond their \
                     intervals); the lower is used: the host or the path changed during the \
                     sweep",
                    a.size_bytes,
                    fmt_us(ma.min(mb)),
                    fmt_us(ma.max(mb))
                ),
            };
        }
    }
    Stability::default()
}

#[cfg(test)]
mod tests;
