//! `ngctl plot`: a probe or a segment entry as a picture. [`Figure`] holds
//! what is drawn, in data units: the measured PRTT(1,0,s), PRTT(n,0,s) and
//! PRTT(n,d,s) with their 95 % intervals, the fitted model's lines per
//! protocol range, the protocol changes, and the LogfP o(P) curve.
//! [`render`] draws it (`draw`: plotters' SVG backend) and, for PNG,
//! rasterises that SVG with resvg and an embedded font, so both formats
//! show one picture and no system font is needed.
//!
//! The model lines are the model the exports and `ngctl predict` use
//! (`export::model`): T(s), one message end to end, so PRTT(1,0,s) =
//! 2·T(s); PRTT(n,0,s) = 2·T(s) + (n−1)·gap(s) with gap(s) = g + (s−1)·G
//! of the range that holds s; PRTT(n,d,s) = 2·T(s) + (n−1)·(d + o_s(s))
//! with o_s(s) = o_s + (s−1)·O_s. A probe's n and d are those its sweep
//! used at each size; a segment keeps neither, so its burst lines are drawn
//! for n = [`SEGMENT_BURST`] and the d the sweep would take,
//! max(PRTT(1,0,s), 1.5·gap(s)).

mod draw;

use std::path::Path;

use netgauge::{flags, EntryData, RangeData};
use serde::Serialize;

use crate::export::model::{self, Piece};
use crate::model::stats;
use crate::probe::ProbeResult;

pub use draw::{render, Layout, PanelLayout, PlotError, MAX_SIDE_PX, MIN_SIDE_PX};

/// n of a segment entry's PRTT(n,0,s) and PRTT(n,d,s) model lines.
pub const SEGMENT_BURST: u32 = 8;

/// The colour of each series, as `#rrggbb` (PRTT(1,0,s), PRTT(n,0,s),
/// PRTT(n,d,s)); measured points and model lines share it.
pub const SERIES_COLOURS: [&str; 3] = ["#1f5fbf", "#e07000", "#1a9a3a"];
/// o(P) of the fan-out panel.
pub const FANOUT_COLOUR: &str = "#8a2be2";
/// Range boundaries (protocol changes).
pub const BOUNDARY_COLOUR: &str = "#707070";
/// The rendezvous threshold S.
pub const S_COLOUR: &str = "#d01c1c";

/// The image formats `ngctl plot` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub const ALL: [ImageFormat; 2] = [ImageFormat::Svg, ImageFormat::Png];

    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Svg => "svg",
            ImageFormat::Png => "png",
        }
    }

    /// The format a file name's extension names (case-insensitive).
    pub fn from_path(path: &Path) -> Option<ImageFormat> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        ImageFormat::ALL.into_iter().find(|f| f.name() == ext)
    }
}

impl std::str::FromStr for ImageFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ImageFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown image format {s:?} (svg, png)"))
    }
}

/// A measured median with its 95 % interval (bounds not finite: no bar).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Measured {
    /// The x value: message size in bytes, or P in the fan-out panel.
    pub x: f64,
    pub median_ns: f64,
    pub lo_ns: f64,
    pub hi_ns: f64,
}

/// One series: measured points and the model's lines (one polyline per
/// protocol range, split at S).
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub label: String,
    pub colour: &'static str,
    pub measured: Vec<Measured>,
    pub model: Vec<Vec<(f64, f64)>>,
}

/// A vertical marker at a protocol change.
#[derive(Clone, Debug, PartialEq)]
pub struct Marker {
    /// Where, in bytes (a range's first size; S + ½ for the threshold).
    pub x: f64,
    pub label: String,
    /// The rendezvous threshold S (else a range boundary).
    pub threshold: bool,
}

/// Everything one picture shows.
#[derive(Clone, Debug)]
pub struct Figure {
    pub title: String,
    /// PRTT(1,0,s), PRTT(n,0,s), PRTT(n,d,s).
    pub series: [Series; 3],
    pub markers: Vec<Marker>,
    /// The sizes the x axis spans, bytes.
    pub sizes: (f64, f64),
    /// The LogfP o(P) panel, when there is fan-out data.
    pub fanout: Option<Series>,
}

/// Model points drawn per protocol piece (log-spaced).
const MODEL_STEPS: usize = 48;

/// "udp · peer node2 · 2026-11-27 16:30 UTC".
fn title(transport: &str, peer: Option<&str>, unix_ns: Option<u64>, what: &str) -> String {
    let mut t = format!("{what} over {transport}");
    if let Some(p) = peer.filter(|p| !p.is_empty()) {
        t.push_str(&format!(" to {p}"));
    }
    if let Some(ns) = unix_ns.filter(|&n| n > 0) {
        t.push_str(&format!(", {}", utc_minute(ns)));
    }
    t
}

/// `YYYY-MM-DD HH:MM UTC` of a Unix time in ns (proleptic Gregorian).
pub fn utc_minute(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

/// The range whose sizes hold `s` (below the first: the first; between
/// two: the lower).
fn range_at(ranges: &[RangeData], s: u64) -> Option<&RangeData> {
    ranges
        .iter()
        .rev()
        .find(|r| r.from_bytes <= s)
        .or(ranges.first())
}

/// The model's three round trips at size `s` for bursts of `n` with delay
/// `d_ns` (None: the delay the sweep takes, max(PRTT(1,0,s), 1.5·gap)).
fn model_at(pieces: &[Piece], ranges: &[RangeData], s: u64, n: u32, d_ns: Option<f64>) -> [f64; 3] {
    let rtt = 2.0 * model::message_ns(pieces, s);
    let Some(r) = range_at(ranges, s) else {
        return [rtt, f64::NAN, f64::NAN];
    };
    let k = f64::from(n.max(1) - 1);
    let gap = r.gap_ns(s);
    let o_s = netgauge::line_ns(r.o_s_ns, r.O_s_ns_per_byte, s);
    let d = d_ns.unwrap_or_else(|| rtt.max(1.5 * gap));
    [rtt, rtt + k * gap, rtt + k * (d + o_s)]
}

/// Log-spaced sizes from `a` to `b` (inclusive, both ≥ 1).
fn log_steps(a: f64, b: f64) -> impl Iterator<Item = f64> {
    let (a, b) = (a.max(1.0), b.max(1.0));
    let (la, lb) = (a.ln(), b.ln());
    (0..=MODEL_STEPS).map(move |i| match i {
        0 => a,
        MODEL_STEPS => b,
        _ => (la + (lb - la) * i as f64 / MODEL_STEPS as f64).exp(),
    })
}

/// The protocol changes of an entry: every range's start after the first,
/// and S.
fn markers(e: &EntryData) -> Vec<Marker> {
    let mut m: Vec<Marker> = e
        .ranges
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, r)| Marker {
            x: r.from_bytes as f64,
            label: format!("range {}", i + 1),
            threshold: false,
        })
        .collect();
    if let Some(s) = e.S_bytes {
        m.push(Marker {
            x: s as f64 + 0.5,
            label: format!("S = {}", super::fmt_bytes(s as f64)),
            threshold: true,
        });
    }
    m
}

fn empty_series() -> [Series; 3] {
    let labels = ["PRTT(1,0,s)", "PRTT(n,0,s)", "PRTT(n,d,s)"];
    std::array::from_fn(|i| Series {
        label: labels[i].to_string(),
        colour: SERIES_COLOURS[i],
        ..Series::default()
    })
}

/// The model lines over `[lo, hi]` bytes, one polyline per piece; `at`
/// gives the three round trips at a size.
fn model_lines(
    pieces: &[Piece],
    lo: f64,
    hi: f64,
    at: impl Fn(u64) -> [f64; 3],
) -> [Vec<Vec<(f64, f64)>>; 3] {
    let mut out: [Vec<Vec<(f64, f64)>>; 3] = Default::default();
    let last = pieces.len().saturating_sub(1);
    for (i, p) in pieces.iter().enumerate() {
        let from = (p.from_bytes as f64).max(lo);
        let to = if i == last {
            hi
        } else {
            (p.to_bytes as f64).min(hi)
        };
        if from > to {
            continue;
        }
        let mut lines: [Vec<(f64, f64)>; 3] = Default::default();
        for x in log_steps(from, to) {
            let v = at(x.round().max(1.0) as u64);
            for (line, y) in lines.iter_mut().zip(v) {
                if y.is_finite() {
                    line.push((x, y));
                }
            }
        }
        for (o, l) in out.iter_mut().zip(lines) {
            if l.len() >= 2 {
                o.push(l);
            }
        }
    }
    out
}

/// The LogfP overhead model o(P) = o_min + o_max/P over `[p_lo, p_hi]`.
fn fanout_model(o_min: f64, o_max: f64, p_lo: f64, p_hi: f64) -> Vec<(f64, f64)> {
    if !(o_min.is_finite() && o_max.is_finite()) || p_hi <= p_lo {
        return Vec::new();
    }
    (0..=MODEL_STEPS)
        .map(|i| {
            let p = p_lo + (p_hi - p_lo) * i as f64 / MODEL_STEPS as f64;
            (p, o_min + o_max / p)
        })
        .collect()
}

fn measured(x: f64, xs: &[f64]) -> Option<Measured> {
    if xs.is_empty() {
        return None;
    }
    let (lo, hi) = stats::median_ci95(xs);
    Some(Measured {
        x,
        median_ns: stats::median(xs),
        lo_ns: lo,
        hi_ns: hi,
    })
}

impl Figure {
    /// A probe's figure: its samples, and the model of its fit (`r` as
    /// `ngctl fit` re-fits it); `peer` and `unix_ns` for the title.
    pub fn from_probe(r: &ProbeResult, peer: Option<&str>, unix_ns: Option<u64>) -> Figure {
        let transport = r.transport.as_deref().unwrap_or("(unknown transport)");
        let e = crate::publish::entry_from_probe(peer.unwrap_or(""), transport, r);
        let pieces = model::pieces(&e);
        let mut series = empty_series();
        for s in r.samples.iter().filter(|s| !s.prtt1_ns.is_empty()) {
            let x = s.size_bytes.max(1) as f64;
            for (ser, xs) in series
                .iter_mut()
                .zip([&s.prtt1_ns, &s.prttn_ns, &s.prttd_ns])
            {
                ser.measured.extend(measured(x, xs));
            }
        }
        let sizes = series[0].measured.iter().map(|m| m.x);
        let lo = sizes.clone().fold(f64::INFINITY, f64::min);
        let hi = sizes.fold(0.0, f64::max);
        // PRTT(1,0,s): the model's line; the burst series at the sizes
        // measured, with the n and d used there, per range.
        let one = model_lines(&pieces, lo, hi, |s| {
            model_at(&pieces, &e.ranges, s, 1, Some(0.0))
        });
        series[0].model = one[0].clone();
        for (k, ser) in series.iter_mut().enumerate().skip(1) {
            let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut current: Option<u64> = None;
            for s in r.samples.iter().filter(|s| !s.prtt1_ns.is_empty()) {
                let size = s.size_bytes.max(1);
                let v = model_at(&pieces, &e.ranges, size, s.n, Some(s.d_ns))[k];
                // A new polyline where the range (or the S side) changes.
                let key = range_at(&e.ranges, size).map_or(0, |r| r.from_bytes)
                    + u64::from(e.S_bytes.is_some_and(|sb| size > sb));
                if current != Some(key) {
                    lines.push(Vec::new());
                    current = Some(key);
                }
                if v.is_finite() {
                    if let Some(l) = lines.last_mut() {
                        l.push((size as f64, v));
                    }
                }
            }
            ser.model = lines.into_iter().filter(|l| !l.is_empty()).collect();
        }
        let fanout = (!r.fanout.is_empty()).then(|| {
            let pts: Vec<Measured> = r
                .fanout
                .iter()
                .filter(|f| f.peers > 0)
                .filter_map(|f| {
                    let per: Vec<f64> = f.post_ns.iter().map(|p| p / f64::from(f.peers)).collect();
                    measured(f64::from(f.peers), &per)
                })
                .collect();
            fanout_series(pts, r.logfp.as_ref().map(|l| (l.o_min_ns, l.o_max_ns)))
        });
        Figure {
            title: title(transport, peer, unix_ns, "probe"),
            series,
            markers: markers(&e),
            sizes: (lo.min(hi), hi),
            fanout,
        }
    }

    /// A segment entry's figure: the model only (a segment keeps no
    /// samples), over its ranges' sizes.
    pub fn from_entry(e: &EntryData) -> Figure {
        let pieces = model::pieces(e);
        let lo = e.ranges.first().map_or(1, |r| r.from_bytes.max(1)) as f64;
        let hi = e
            .ranges
            .last()
            .map_or(lo, |r| r.to_bytes.max(r.from_bytes) as f64)
            .max(lo * 2.0);
        let mut series = empty_series();
        let lines = model_lines(&pieces, lo, hi, |s| {
            model_at(&pieces, &e.ranges, s, SEGMENT_BURST, None)
        });
        for (ser, l) in series.iter_mut().zip(lines) {
            ser.model = l;
        }
        for ser in series.iter_mut().skip(1) {
            ser.label = ser.label.replace("(n,", &format!("({SEGMENT_BURST},"));
        }
        let fanout = (e.flags & flags::HAS_LOGFP != 0 || !e.curve.is_empty()).then(|| {
            let pts = e
                .curve
                .iter()
                .map(|&(p, o, _)| Measured {
                    x: f64::from(p),
                    median_ns: o,
                    lo_ns: f64::NAN,
                    hi_ns: f64::NAN,
                })
                .collect();
            // The writer keeps o_min and o_max (NaN without a fan-out
            // fit) whether or not f was found (HAS_LOGFP: f).
            let model = (e.o_min_ns.is_finite() && e.o_max_ns.is_finite())
                .then_some((e.o_min_ns, e.o_max_ns));
            fanout_series(pts, model)
        });
        Figure {
            title: title(
                &e.transport,
                Some(&e.peer),
                Some(e.measured_unix_ns),
                "segment entry",
            ),
            series,
            markers: markers(e),
            sizes: (lo, hi),
            fanout,
        }
    }
}

/// The o(P) series: the measured points and the fitted o_min + o_max/P
/// (from P = 1 to the largest P measured, at least 2).
fn fanout_series(points: Vec<Measured>, model: Option<(f64, f64)>) -> Series {
    let p_hi = points.iter().map(|m| m.x).fold(2.0, f64::max);
    Series {
        label: "o(P)".into(),
        colour: FANOUT_COLOUR,
        model: model
            .map(|(a, b)| fanout_model(a, b, 1.0, p_hi))
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect(),
        measured: points,
    }
}

/// `#rrggbb` as bytes.
pub fn rgb(hex: &str) -> [u8; 3] {
    let h = hex.trim_start_matches('#');
    let byte = |i: usize| {
        h.get(i..i + 2)
            .and_then(|x| u8::from_str_radix(x, 16).ok())
            .unwrap_or(0)
    };
    [byte(0), byte(2), byte(4)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(from: u64, to: u64, g: f64, big_g: f64) -> RangeData {
        RangeData {
            from_bytes: from,
            to_bytes: to,
            g_ns: g,
            G_ns_per_byte: big_g,
            o_s_ns: 300.0,
            o_r_ns: 300.0,
            O_s_ns_per_byte: 0.0,
            O_r_ns_per_byte: 0.0,
        }
    }

    /// Two ranges split at 4 KiB, S = 16 KiB inside the second.
    fn entry() -> EntryData {
        EntryData {
            peer: "node2".into(),
            transport: "udp".into(),
            eel_ns: 1700.0,
            L_ns: 1100.0,
            S_bytes: Some(16384),
            ranges: vec![range(1, 4096, 450.0, 0.08), range(4097, 65536, 900.0, 0.5)],
            measured_unix_ns: 951_829_620 * 1_000_000_000,
            ..EntryData::default()
        }
    }

    #[test]
    fn dates_and_formats() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_minute(951_829_620_000_000_000), "2000-02-29 13:07 UTC");
        assert_eq!(
            utc_minute(1_795_797_418_210_514_157),
            "2026-11-27 16:36 UTC"
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("a/b.PNG")),
            Some(ImageFormat::Png)
        );
        assert_eq!(
            ImageFormat::from_path(Path::new("b.svg")),
            Some(ImageFormat::Svg)
        );
        assert_eq!(ImageFormat::from_path(Path::new("b.gif")), None);
        assert_eq!(ImageFormat::from_path(Path::new("svg")), None);
        assert!("jpeg".parse::<ImageFormat>().is_err());
        assert_eq!(rgb(SERIES_COLOURS[0]), [0x1f, 0x5f, 0xbf]);
    }

    /// The model lines follow T(s): 2·EEL at 1 B, the second range's G
    /// above 4 KiB, the handshake 2·EEL each way above S; the burst lines
    /// add (n−1)·gap(s) and (n−1)·(d + o_s).
    #[test]
    fn a_segment_entry_draws_the_model() {
        let e = entry();
        let f = Figure::from_entry(&e);
        assert_eq!(
            f.title,
            "segment entry over udp to node2, 2000-02-29 13:07 UTC"
        );
        assert_eq!(f.sizes, (1.0, 65536.0));
        assert!(f.series.iter().all(|s| s.measured.is_empty()));
        assert_eq!(f.series[1].label, "PRTT(8,0,s)");
        let m: Vec<(f64, bool)> = f.markers.iter().map(|m| (m.x, m.threshold)).collect();
        assert_eq!(m, vec![(4097.0, false), (16384.5, true)]);
        // Three pieces: range 1, range 2 up to S, range 2 above S.
        let one = &f.series[0].model;
        assert_eq!(one.len(), 3);
        let first = one[0][0];
        assert_eq!(first, (1.0, 3400.0));
        let t = |s: f64| {
            if s <= 4096.0 {
                1700.0 + (s - 1.0) * 0.08
            } else {
                1700.0 + 4095.0 * 0.08 + (s - 4096.0) * 0.5
            }
        };
        let (x, y) = *one[2].last().unwrap();
        assert_eq!(x, 65536.0);
        assert!((y - 2.0 * (t(x) + 3400.0)).abs() < 1e-6, "{y}");
        // PRTT(8,0,s) at 1 B: 2·T + 7·g; PRTT(8,d,s): d = max(PRTT1, 1.5·g).
        let (x, y) = f.series[1].model[0][0];
        assert_eq!((x, y), (1.0, 3400.0 + 7.0 * 450.0));
        let (_, y) = f.series[2].model[0][0];
        assert_eq!(y, 3400.0 + 7.0 * (3400.0 + 300.0));
        assert!(f.fanout.is_none());
    }

    #[test]
    fn svg_and_png_have_the_size_asked() {
        let f = Figure::from_entry(&entry());
        let (svg, layout) = render(&f, ImageFormat::Svg, 640, 400).unwrap();
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("width=\"640\"") && svg.contains("height=\"400\""));
        assert!(svg.contains("PRTT(1,0,s)") && svg.contains("S = 16.00 KiB"));
        assert!(layout.prtt.x_px[0] > 0 && layout.prtt.x_px[1] < 640);
        assert!(layout.prtt.y_px[0] > 0 && layout.prtt.y_px[1] < 400);
        let (png, layout) = render(&f, ImageFormat::Png, 640, 400).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR: width and height, big-endian, after the signature and the
        // chunk's length and type.
        assert_eq!(&png[16..24], &[0, 0, 2, 128, 0, 0, 1, 144]);
        assert_eq!(layout.format, ImageFormat::Png);
        assert!(matches!(
            render(&f, ImageFormat::Svg, 20, 400),
            Err(PlotError::Size(20, 400))
        ));
    }
}
