//! Pure math: estimators, least squares, protocol-change segmentation, LogfP
//! fit, bootstrap confidence intervals. No I/O, no clocks, no transports.
//!
//! Inputs are the raw samples the patterns collected (nanoseconds); outputs
//! are LogGP/LogGPS/LogfP parameter sets with 95 % intervals.

pub mod bandwidth;
pub mod contention;
pub mod exchange;
pub mod fit;
pub mod ident;
pub mod latency;
pub mod logfp;
pub mod lsq;
pub mod overlap;
pub mod segment;
pub mod stats;

use serde::{Deserialize, Serialize};

/// Raw PRTT samples at one message size (one entry per repetition).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SizeSamples {
    pub size_bytes: u64,
    /// n of PRTT(n, ·, s).
    pub n: u32,
    /// d of PRTT(n, d, s), in ns.
    pub d_ns: f64,
    /// PRTT(1, 0, s) samples.
    pub prtt1_ns: Vec<f64>,
    /// PRTT(n, 0, s) samples.
    pub prttn_ns: Vec<f64>,
    /// PRTT(n, d, s) samples.
    pub prttd_ns: Vec<f64>,
    /// Receive overhead o_r the server measured, one value per burst it answered
    /// (empty when the transport has no receive overhead).
    pub o_r_ns: Vec<f64>,
}

impl SizeSamples {
    /// Timed repetitions (each one PRTT(1,0,s), PRTT(n,0,s), PRTT(n,d,s)).
    pub fn rounds(&self) -> u32 {
        self.prtt1_ns.len() as u32
    }
}

/// Context switches of the driving thread over some rounds of a sweep: a
/// driver that busy-polls on a core of its own keeps it through a round
/// trip; one that shares its core with the responder (or another busy
/// process) gives it away in most of them.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CpuShare {
    /// Round trips measured (timed, warm-up and settle rounds).
    pub round_trips: u32,
    /// Voluntary and involuntary context switches over them.
    pub switches: u64,
}

/// Per-size derived values (robust point estimates from [`SizeSamples`]).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SizePoint {
    pub size_bytes: u64,
    /// g + (s−1)G = (PRTT(n,0,s) − PRTT(1,0,s)) / (n−1)
    pub gap_ns: f64,
    /// o_s(s) = (PRTT(n,d,s) − PRTT(1,0,s)) / (n−1) − d
    pub o_s_ns: f64,
    /// o_r(s), server-measured (0 when not available)
    pub o_r_ns: f64,
    /// PRTT(1,0,s) / 2
    pub half_rtt_ns: f64,
    /// Half-width of the 95 % interval of `gap_ns` (from the order-statistic
    /// intervals of the two medians; +∞ with too few repetitions, 0 in
    /// bootstrap resamples where it is not used).
    #[serde(default)]
    pub gap_hw_ns: f64,
    /// Half-width of the 95 % interval of `half_rtt_ns` (same conventions).
    #[serde(default)]
    pub half_rtt_hw_ns: f64,
    /// n of the PRTT(n, 0, s) bursts the gap was measured with (0 when not
    /// known: points saved before it was recorded).
    #[serde(default)]
    pub n: u32,
}

/// The rounds of the long-burst stage at one size: PRTT(n, 0, s) for
/// several burst lengths n, from which the sustained rate is fitted
/// ([`bandwidth`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BurstSamples {
    pub size_bytes: u64,
    /// Burst lengths, increasing n.
    pub lengths: Vec<BurstLength>,
    /// Why the stage stopped before its rate settled (a loss, the
    /// transport's limit), if it did.
    #[serde(default)]
    pub stopped: Option<String>,
}

/// PRTT(n, 0, s) samples of one burst length.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BurstLength {
    pub n: u32,
    pub prtt_ns: Vec<f64>,
}

/// What the fit may assume of the transport a sweep ran over (from its
/// kind's descriptor); the default assumes every protocol feature, which is
/// how a sweep of an unknown transport has always been fitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkTraits {
    /// The transport may switch to a rendezvous protocol (LogGPS S).
    pub rendezvous: bool,
    /// The receiver's overhead o_r is measured.
    pub recv_overhead: bool,
    /// One-sided: the target's CPU takes no part (o_r does not exist).
    pub one_sided: bool,
    /// Credit-based flow control: a window of messages passes at once, the
    /// rest as credits return.
    pub credit: bool,
}

impl Default for LinkTraits {
    fn default() -> Self {
        Self {
            rendezvous: true,
            recv_overhead: true,
            one_sided: false,
            credit: false,
        }
    }
}

/// Which protocol-change detector produced a segmentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Segmenter {
    /// Hoefler/Lichei/Rehm §3.5: lsq look-ahead with pfact.
    Lookahead,
    /// Optimal segmented least squares with an information-criterion penalty.
    OptimalBic,
}

/// One protocol range with its own parameter set: the segment's schema
/// of a range (`netgauge::RangeData`), produced here by the fit.
pub use netgauge::RangeData as Range;

/// LogGP(S) fit of one sweep.
#[allow(non_snake_case)]
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LogGpFit {
    /// PRTT(1,0,1)/2 (the smallest sampled size), what Netgauge reports as L.
    pub eel_ns: f64,
    /// EEL − o_s − o_r; may be negative (flagged).
    pub L_ns: f64,
    pub L_negative: bool,
    pub ranges: Vec<Range>,
    /// LogGPS rendezvous threshold S: the largest eager size, i.e. the last
    /// sampled size of the range before the first change where g jumps by at
    /// least half a small-message round trip (2·EEL). None if no such change.
    pub S_bytes: Option<u64>,
    /// The segmentation used, and both detectors' change points (the first
    /// size of each new range) for the report.
    pub segmenter: Option<Segmenter>,
    pub changes_lookahead: Vec<u64>,
    pub changes_optimal: Vec<u64>,
    /// Per-size points the fit was made from.
    pub points: Vec<SizePoint>,
}

/// Raw samples of the 1:P−P:1 pattern at one P.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FanoutSamples {
    pub peers: u32,
    /// Time to post one message to each of P peers (sum of posts), ns.
    pub post_ns: Vec<f64>,
    /// Time from the first post until all P answers arrived, ns.
    pub rtt_ns: Vec<f64>,
    /// The client's mean receive overhead per answer, ns (empty when the
    /// transport reports none).
    #[serde(default)]
    pub recv_ns: Vec<f64>,
}

/// One point of the measured LogfP curves.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct FanoutPoint {
    pub peers: u32,
    /// o(P): posting time per message.
    pub o_ns: f64,
    /// RTT(P)
    pub rtt_ns: f64,
    /// The client's receive overhead per answer (0 when not reported).
    #[serde(default)]
    pub recv_ns: f64,
}

/// LogfP fit.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LogfpFit {
    /// Number of messages injected without paying g: the two-regime
    /// breakpoint (None when RTT(P) shows no gap regime in the sampled P).
    pub f: Option<u32>,
    /// The LogfP paper's f: argmin of RTT(P)/P (None if the minimum is at
    /// the largest sampled P, i.e. no interior minimum).
    pub f_paper: Option<u32>,
    pub o_min_ns: f64,
    pub o_max_ns: f64,
    /// Gap per message in the P > f regime.
    pub g_ns: f64,
    pub points: Vec<FanoutPoint>,
}

/// A 95 % interval.
pub type Interval = (f64, f64);
