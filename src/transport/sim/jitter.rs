//! Jitter: every span booked on a time line is stretched by `1 + X`, `X`
//! drawn from a seeded Lomax (Pareto II) law.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::clock::VirtualClock;

/// Shape α of the Lomax law of the jitter stretch.
const LOMAX_SHAPE: f64 = 3.0;

/// Seeded stretch of spans: `1 + X`, `X ~ Lomax(shape 3, scale 2·jitter)`.
#[derive(Debug)]
pub(super) struct Stretch {
    rng: Pcg64Mcg,
    /// Lomax scale λ; `E[X] = λ/(α−1)`. Zero: no jitter.
    scale: f64,
}

impl Stretch {
    pub(super) fn new(jitter: f64, seed: u64) -> Self {
        let scale = if jitter.is_finite() && jitter > 0.0 {
            jitter * (LOMAX_SHAPE - 1.0)
        } else {
            0.0
        };
        Self {
            rng: Pcg64Mcg::seed_from_u64(seed),
            scale,
        }
    }

    /// One draw of `X ≥ 0`.
    pub(super) fn draw(&mut self) -> f64 {
        // Inverse CDF of the Lomax law; u in (0, 1].
        let u = 1.0 - self.rng.gen::<f64>();
        self.scale * (u.powf(-1.0 / LOMAX_SHAPE) - 1.0)
    }

    /// A span of `ns` nanoseconds, stretched, in picoseconds.
    pub(super) fn span_ps(&mut self, ns: f64) -> u64 {
        // `max` also maps NaN to 0.
        let ps = ns.max(0.0) * VirtualClock::PS_PER_NS;
        if ps == 0.0 {
            return 0;
        }
        let ps = if self.scale > 0.0 {
            ps * (1.0 + self.draw())
        } else {
            ps
        };
        // Float-to-int casts saturate.
        ps.round() as u64
    }
}
