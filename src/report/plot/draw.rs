//! Drawing a [`Figure`]: SVG with plotters, PNG by rasterising that SVG
//! with resvg (font: Ubuntu Light, embedded by `epaint_default_fonts`).

use std::ops::Range;
use std::sync::Arc;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::{CoordTranslate, Shift};
use plotters::prelude::*;
use serde::Serialize;

use super::{rgb, Figure, ImageFormat, Series, BOUNDARY_COLOUR, S_COLOUR};
use crate::report::fmt_bytes;

/// Smallest and largest picture, pixels per side.
pub const MIN_SIDE_PX: u32 = 200;
pub const MAX_SIDE_PX: u32 = 8192;

#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("the picture must be {MIN_SIDE_PX} to {MAX_SIDE_PX} pixels per side, not {0}×{1}")]
    Size(u32, u32),
    #[error("nothing to plot: {0}")]
    Empty(&'static str),
    #[error("drawing failed: {0}")]
    Draw(String),
    #[error("rasterising the SVG failed: {0}")]
    Raster(String),
}

/// Where a panel's plotting area lies in the picture, and the data it
/// spans: a point (x, y) is drawn at x_px[0] + (x − x0)/(x1 − x0)·(x_px[1]
/// − x_px[0]) (ln x for a log axis), y_px[1] − (y − y0)/(y1 − y0)·(y_px[1]
/// − y_px[0]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PanelLayout {
    /// Left and right pixel column of the plotting area.
    pub x_px: [i32; 2],
    /// Top and bottom pixel row.
    pub y_px: [i32; 2],
    /// The x axis's data range (bytes, or peers P).
    pub x_range: [f64; 2],
    pub x_log: bool,
    /// The y axis's data range, ns.
    pub y_range_ns: [f64; 2],
}

/// The picture's size and its panels.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Layout {
    pub format: ImageFormat,
    pub width_px: u32,
    pub height_px: u32,
    /// PRTT against message size.
    pub prtt: PanelLayout,
    /// o(P) against P, when drawn.
    pub fanout: Option<PanelLayout>,
}

fn colour(hex: &str) -> RGBColor {
    let [r, g, b] = rgb(hex);
    RGBColor(r, g, b)
}

fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// A tick label with as many decimals as an axis up to `max` needs.
fn tick(v: f64, max: f64) -> String {
    let decimals = if max >= 20.0 {
        0
    } else if max >= 2.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$}")
}

/// The largest finite y of a series (ns): medians, interval tops, model.
fn series_max(s: &Series) -> f64 {
    let pts = s
        .measured
        .iter()
        .flat_map(|m| [m.median_ns, m.hi_ns])
        .chain(s.model.iter().flatten().map(|p| p.1));
    pts.filter(|v| v.is_finite()).fold(0.0, f64::max)
}

fn panel_layout<X, Y>(
    chart: &ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    x_range: [f64; 2],
    x_log: bool,
    y_range_ns: [f64; 2],
) -> PanelLayout
where
    X: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let (xs, ys): (Range<i32>, Range<i32>) = chart.plotting_area().get_pixel_range();
    PanelLayout {
        x_px: [xs.start, xs.end - 1],
        y_px: [ys.start, ys.end - 1],
        x_range,
        x_log,
        y_range_ns,
    }
}

/// Measured medians (dots) with their 95 % intervals (bars with caps).
fn draw_measured<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    s: &Series,
    y_scale: f64,
    cap: impl Fn(f64) -> (f64, f64),
) -> Result<(), PlotError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = colour(s.colour);
    let finite = |m: &&super::Measured| m.median_ns.is_finite();
    let bars = s
        .measured
        .iter()
        .filter(finite)
        .filter(|m| m.lo_ns.is_finite() && m.hi_ns.is_finite())
        .flat_map(|m| {
            let (a, b) = cap(m.x);
            let (lo, hi) = (m.lo_ns / y_scale, m.hi_ns / y_scale);
            [
                PathElement::new(vec![(m.x, lo), (m.x, hi)], c.stroke_width(1)),
                PathElement::new(vec![(a, lo), (b, lo)], c.stroke_width(1)),
                PathElement::new(vec![(a, hi), (b, hi)], c.stroke_width(1)),
            ]
        });
    chart.draw_series(bars).map_err(draw_err)?;
    let dots = s
        .measured
        .iter()
        .filter(finite)
        .map(|m| Circle::new((m.x, m.median_ns / y_scale), 3, c.filled()));
    chart.draw_series(dots).map_err(draw_err)?;
    Ok(())
}

/// The model's polylines, the first labelled for the legend.
fn draw_model<DB: DrawingBackend, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    s: &Series,
    y_scale: f64,
) -> Result<(), PlotError>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = colour(s.colour);
    for (i, line) in s.model.iter().enumerate() {
        let pts = line.iter().map(|&(x, y)| (x, y / y_scale));
        let drawn = chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))
            .map_err(draw_err)?;
        if i == 0 {
            drawn.label(s.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], c.stroke_width(2))
            });
        }
    }
    if s.model.is_empty() && !s.measured.is_empty() {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_err)?
            .label(s.label.clone())
            .legend(move |(x, y)| Circle::new((x + 11, y), 3, c.filled()));
    }
    Ok(())
}

/// The grid, tick labels and axis descriptions in the figure's one style.
fn mesh_style<'m, 'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB> {
    mesh.label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(225, 225, 225))
}

/// The legend, in corner `at` of the panel, in the figure's one style.
fn draw_legend<'a, 'b: 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    at: SeriesLabelPosition,
) -> Result<(), PlotError> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(190, 190, 190))
        .draw()
        .map_err(draw_err)
}

/// The PRTT panel.
fn prtt_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    fig: &Figure,
) -> Result<PanelLayout, PlotError> {
    let (lo, hi) = fig.sizes;
    let (x0, x1) = (lo.max(1.0) / 1.5, hi.max(lo.max(1.0) * 2.0) * 1.5);
    let y_max_ns = fig.series.iter().map(series_max).fold(0.0, f64::max) * 1.08;
    if y_max_ns.is_nan() || y_max_ns <= 0.0 {
        return Err(PlotError::Empty("no round trip to draw"));
    }
    // The y axis in µs (ticks read as plain numbers).
    let y_max = y_max_ns / 1e3;
    let mut chart = ChartBuilder::on(area)
        .caption(&fig.title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(46)
        .y_label_area_size(64)
        .build_cartesian_2d((x0..x1).log_scale().base(4.0), 0f64..y_max)
        .map_err(draw_err)?;
    mesh_style(
        chart
            .configure_mesh()
            .x_desc("message size s (bytes, log scale)")
            .y_desc("round trip (µs)")
            .x_labels(12)
            .y_labels(8)
            .x_label_formatter(&|v| fmt_bytes(*v))
            .y_label_formatter(&|v| tick(*v, y_max)),
    )
    .draw()
    .map_err(draw_err)?;
    // Protocol changes first, under the curves.
    for (i, m) in fig.markers.iter().enumerate() {
        let c = colour(if m.threshold {
            S_COLOUR
        } else {
            BOUNDARY_COLOUR
        });
        let style = c.stroke_width(if m.threshold { 2 } else { 1 });
        chart
            .draw_series(DashedLineSeries::new(
                vec![(m.x, 0.0), (m.x, y_max)],
                7,
                5,
                style,
            ))
            .map_err(draw_err)?;
        let y = y_max * (0.96 - 0.06 * (i % 4) as f64);
        chart
            .draw_series(std::iter::once(Text::new(
                m.label.clone(),
                (m.x * 1.06, y),
                ("sans-serif", 13).into_font().color(&c),
            )))
            .map_err(draw_err)?;
    }
    let cap = |x: f64| (x / 1.04, x * 1.04);
    for s in &fig.series {
        draw_measured(&mut chart, s, 1e3, cap)?;
    }
    for s in &fig.series {
        draw_model(&mut chart, s, 1e3)?;
    }
    let any_measured = fig.series.iter().any(|s| !s.measured.is_empty());
    if any_measured {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_err)?
            .label("dots: measured median, bars: 95 % interval")
            .legend(|(x, y)| Circle::new((x + 11, y), 3, BLACK.filled()));
    }
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
        .map_err(draw_err)?
        .label("lines: fitted model, dashed: protocol changes")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 22, y)], BLACK.stroke_width(2)));
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    Ok(panel_layout(&chart, [x0, x1], true, [0.0, y_max_ns]))
}

/// The LogfP panel: o(P) against P.
fn fanout_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    s: &Series,
) -> Result<PanelLayout, PlotError> {
    let p_hi = s
        .measured
        .iter()
        .map(|m| m.x)
        .chain(s.model.iter().flatten().map(|p| p.0))
        .fold(2.0, f64::max);
    let y_max = series_max(s) * 1.15;
    let y_max = if y_max > 0.0 { y_max } else { 1.0 };
    let (x0, x1) = (0.5, p_hi + 0.5);
    let mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, RangedCoordf64>> =
        ChartBuilder::on(area)
            .caption(
                "LogfP: send overhead per message o(P) = o_min + o_max/P",
                ("sans-serif", 16),
            )
            .margin(14)
            .x_label_area_size(42)
            .y_label_area_size(64)
            .build_cartesian_2d(x0..x1, 0f64..y_max)
            .map_err(draw_err)?;
    mesh_style(
        chart
            .configure_mesh()
            .x_desc("peers P")
            .y_desc("o(P) (ns)")
            .x_labels(16)
            .y_labels(6)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| tick(*v, y_max)),
    )
    .draw()
    .map_err(draw_err)?;
    draw_measured(&mut chart, s, 1.0, |x| (x - 0.12, x + 0.12))?;
    draw_model(&mut chart, s, 1.0)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(panel_layout(&chart, [x0, x1], false, [0.0, y_max]))
}

/// The figure as an SVG document of `width` × `height` pixels.
pub fn svg(fig: &Figure, width: u32, height: u32) -> Result<(String, Layout), PlotError> {
    if !(MIN_SIDE_PX..=MAX_SIDE_PX).contains(&width)
        || !(MIN_SIDE_PX..=MAX_SIDE_PX).contains(&height)
    {
        return Err(PlotError::Size(width, height));
    }
    let mut out = String::new();
    let (prtt, fanout) = {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (prtt, fanout) = match &fig.fanout {
            Some(s) => {
                let (top, bottom) = root.split_vertically(height * 64 / 100);
                (prtt_panel(&top, fig)?, Some(fanout_panel(&bottom, s)?))
            }
            None => (prtt_panel(&root, fig)?, None),
        };
        root.present().map_err(draw_err)?;
        (prtt, fanout)
    };
    let layout = Layout {
        format: ImageFormat::Svg,
        width_px: width,
        height_px: height,
        prtt,
        fanout,
    };
    Ok((out, layout))
}

/// The font database PNGs are drawn with: the embedded Ubuntu Light as
/// every generic family.
fn fonts() -> Arc<usvg::fontdb::Database> {
    let mut db = usvg::fontdb::Database::new();
    db.load_font_data(epaint_default_fonts::UBUNTU_LIGHT.to_vec());
    let family = db
        .faces()
        .next()
        .and_then(|f| f.families.first())
        .map(|f| f.0.clone());
    if let Some(family) = family {
        db.set_sans_serif_family(family.clone());
        db.set_serif_family(family.clone());
        db.set_monospace_family(family);
    }
    Arc::new(db)
}

/// An SVG document as PNG, at its own size.
pub fn rasterise(svg: &str) -> Result<Vec<u8>, PlotError> {
    let opt = usvg::Options {
        fontdb: fonts(),
        font_family: "sans-serif".into(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| PlotError::Raster(e.to_string()))?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or_else(|| {
            PlotError::Raster(format!("no {}×{} canvas", size.width(), size.height()))
        })?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PlotError::Raster(e.to_string()))
}

/// The figure in `format`, `width` × `height` pixels, and where its panels
/// lie.
pub fn render(
    fig: &Figure,
    format: ImageFormat,
    width: u32,
    height: u32,
) -> Result<(Vec<u8>, Layout), PlotError> {
    let (svg_text, mut layout) = svg(fig, width, height)?;
    layout.format = format;
    let bytes = match format {
        ImageFormat::Svg => svg_text.into_bytes(),
        ImageFormat::Png => rasterise(&svg_text)?,
    };
    Ok((bytes, layout))
}
