//! `ngctl plot`: the picture is real. A sim probe of a known model is
//! drawn to SVG and PNG; the SVG is rasterised by an independent renderer
//! (librsvg's rsvg-convert) and the pixels are read back: the PRTT(1,0,s)
//! colour is where the sim's ground truth puts the curve at the smallest
//! and the largest size (and not below it), o(P) is in the fan-out panel,
//! and ngctl's own PNG decodes at the size asked and shows the same. A
//! segment entry draws its model lines; bad input fails with the
//! documented exit codes.

mod common;

use std::path::Path;
use std::process::Command;

use common::{cli_json, ngctl, publish_sim, text, tmp_path};
use serde_json::Value;

/// The README example's sim model (ns, ns/B, bytes).
const MODEL: &str = "L=1100,o=300,g=450,G=0.08,S=16384,jitter=0.02,seed=7";
const L: f64 = 1100.0;
const O: f64 = 300.0;
const G: f64 = 0.08;
const S: u64 = 16384;
const MAX: u64 = 65536;
/// PRTT(1,0,s) and o(P) colours (`report::plot`).
const BLUE: [u8; 3] = [0x1f, 0x5f, 0xbf];
const PURPLE: [u8; 3] = [0x8a, 0x2b, 0xe2];

/// PRTT(1,0,s) of the sim without jitter: each way o + L + (s−1)·G + o,
/// and above S the rendezvous handshake before it, a 0-byte request and
/// answer (each o + L + o; a 0-byte message's (s−1)·G is −G).
fn true_prtt1(s: u64) -> f64 {
    let one_way = 2.0 * O + L + (s as f64 - 1.0) * G;
    let handshake = if s > S { 2.0 * (2.0 * O + L - G) } else { 0.0 };
    2.0 * (one_way + handshake)
}

/// An RGB image.
struct Image {
    width: u32,
    height: u32,
    rgb: Vec<[u8; 3]>,
}

impl Image {
    fn decode(path: &Path) -> Image {
        let bytes = std::fs::read(path).expect("the PNG");
        let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut reader = dec.read_info().expect("a PNG header");
        let mut buf = vec![0; reader.output_buffer_size().expect("a frame size")];
        let info = reader.next_frame(&mut buf).expect("a PNG frame");
        let channels = info.color_type.samples();
        let rgb = buf[..info.buffer_size()]
            .chunks(channels)
            .map(|p| match channels {
                1 | 2 => [p[0]; 3],
                _ => {
                    // Composite over white (alpha, when there is one).
                    let a = if channels == 4 {
                        f64::from(p[3]) / 255.0
                    } else {
                        1.0
                    };
                    std::array::from_fn(|i| (f64::from(p[i]) * a + 255.0 * (1.0 - a)).round() as u8)
                }
            })
            .collect();
        Image {
            width: info.width,
            height: info.height,
            rgb,
        }
    }

    /// Is a pixel close to `c` within `r` pixels of (x, y)?
    fn has_near(&self, c: [u8; 3], (x, y): (f64, f64), r: i64) -> bool {
        let (x, y) = (x.round() as i64, y.round() as i64);
        (y - r..=y + r).any(|py| {
            (x - r..=x + r).any(|px| {
                px >= 0 && py >= 0 && (px as u32) < self.width && (py as u32) < self.height && {
                    let p = self.rgb[(py as u32 * self.width + px as u32) as usize];
                    (0..3)
                        .map(|i| (i32::from(p[i]) - i32::from(c[i])).abs())
                        .sum::<i32>()
                        <= 60
                }
            })
        })
    }
}

/// Pixel position of a data point in a panel of `ngctl plot --json`,
/// following the schema's description of `panel`.
fn pixel(panel: &Value, x: f64, y_ns: f64) -> (f64, f64) {
    let f = |k: &str, i: usize| panel[k][i].as_f64().unwrap();
    let t = |v: f64| {
        if panel["x_log"] == true {
            v.ln()
        } else {
            v
        }
    };
    let fx = (t(x) - t(f("x_range", 0))) / (t(f("x_range", 1)) - t(f("x_range", 0)));
    let fy = (y_ns - f("y_range_ns", 0)) / (f("y_range_ns", 1) - f("y_range_ns", 0));
    (
        f("x_px", 0) + fx * (f("x_px", 1) - f("x_px", 0)),
        f("y_px", 1) - fy * (f("y_px", 1) - f("y_px", 0)),
    )
}

/// A saved sim probe of [`MODEL`] (`--json --raw`) from 1 B to [`MAX`].
fn saved_probe(name: &str) -> std::path::PathBuf {
    let max = MAX.to_string();
    let args = ["--model", MODEL, "--max-size", &max, "--resamples", "20"];
    common::saved_sim_probe("ng-plot", name, &args)
}

fn plot(args: &[&str]) -> Value {
    let mut all = vec!["plot", "--json"];
    all.extend_from_slice(args);
    let out = ngctl(&all);
    assert!(out.status.success(), "{all:?}: {}", text(&out.stderr));
    cli_json(&out.stdout)
}

/// `ngctl plot --json SOURCE -o OUT` with `args` added: its layout.
fn plot_to(source: &[&str], out: &Path, args: &[&str]) -> Value {
    let mut all = source.to_vec();
    all.extend_from_slice(&["-o", out.to_str().unwrap()]);
    all.extend_from_slice(args);
    plot(&all)
}

/// `svg` rasterised by librsvg into `png`, decoded.
fn rasterised(svg: &Path, png: &Path) -> Image {
    let out = Command::new("rsvg-convert")
        .arg("-o")
        .arg(png)
        .arg(svg)
        .output()
        .expect("rsvg-convert (librsvg2-bin, scripts/install-deps.sh)");
    assert!(out.status.success(), "rsvg-convert: {}", text(&out.stderr));
    Image::decode(png)
}

/// The PRTT(1,0,s) colour at the truth's smallest and largest size, none
/// halfway below the curve at the largest, and o(P) at P = 2.
fn check_curves(img: &Image, layout: &Value, what: &str) {
    let panel = &layout["prtt"];
    for s in [1, MAX] {
        let at = pixel(panel, s as f64, true_prtt1(s));
        assert!(
            img.has_near(BLUE, at, 4),
            "{what}: no PRTT(1,0,s) colour at s = {s} B, {:.0} ns, pixel {at:?}",
            true_prtt1(s)
        );
    }
    let below = pixel(panel, MAX as f64, true_prtt1(MAX) / 2.0);
    assert!(
        !img.has_near(BLUE, below, 3),
        "{what}: PRTT(1,0,s) colour below the curve at {below:?}"
    );
    let fan = &layout["fanout"];
    assert!(fan.is_object(), "{what}: no fan-out panel");
    // Without o_min/o_max the sim's posting overhead is o for every P;
    // between two measured P only the fitted line is there.
    for p in [2.0, 2.5] {
        let at = pixel(fan, p, O);
        assert!(
            img.has_near(PURPLE, at, 4),
            "{what}: no o(P) at P = {p}, {at:?}"
        );
    }
}

#[test]
fn a_sim_probe_is_drawn_where_its_model_says() {
    let saved = saved_probe("probe.json");
    let p = saved.to_str().unwrap();
    let raw: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    let sizes = raw["raw"]["sizes"].as_array().unwrap();
    assert_eq!(sizes.first().unwrap()["size_bytes"], 1);
    assert_eq!(sizes.last().unwrap()["size_bytes"], MAX);

    // SVG, rasterised by librsvg.
    let svg = tmp_path("ng-plot", "probe.svg");
    let layout = plot_to(&[p], &svg, &["--width", "900", "--height", "600"]);
    assert_eq!(layout["command"], "plot");
    assert_eq!(
        (layout["format"].as_str(), layout["source"].as_str()),
        (Some("svg"), Some("probe"))
    );
    assert_eq!(
        (layout["transport"].as_str(), layout["peer"].as_str()),
        (Some("sim"), Some("sim"))
    );
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(
        doc.starts_with("<svg") && doc.contains("PRTT(1,0,s)") && doc.contains("S = 16.00 KiB")
    );
    let rast = tmp_path("ng-plot", "probe-rsvg.png");
    let img = rasterised(&svg, &rast);
    assert_eq!((img.width, img.height), (900, 600));
    check_curves(&img, &layout, "rsvg-convert of the SVG");

    // ngctl's own PNG: decodes, the size asked, the same curves.
    let png = tmp_path("ng-plot", "probe.png");
    let layout = plot_to(&[p], &png, &["--width", "900", "--height", "600"]);
    assert_eq!(layout["format"], "png");
    let img = Image::decode(&png);
    assert_eq!((img.width, img.height), (900, 600));
    check_curves(&img, &layout, "ngctl's PNG");
    // --format when the name does not say.
    let other = tmp_path("ng-plot", "probe.image");
    let size = ["--width", "400", "--height", "300"];
    let layout = plot_to(&[p, "--format", "png"], &other, &size);
    let img = Image::decode(&other);
    assert_eq!(
        (img.width, img.height, layout["width_px"].as_u64()),
        (400, 300, Some(400))
    );
    for f in [&saved, &svg, &rast, &png, &other] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn a_segment_entry_draws_its_model_lines() {
    let saved = saved_probe("seg.json");
    let seg = tmp_path("ng-plot", "segment");
    let _ = std::fs::remove_file(&seg);
    let seg_s = seg.to_str().unwrap();
    let out = ngctl(&[
        "fit",
        saved.to_str().unwrap(),
        "--publish",
        "--shm",
        seg_s,
        "--peer",
        "node2",
        "--transport",
        "sim",
        "-q",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let svg = tmp_path("ng-plot", "seg.svg");
    let source = ["--shm", seg_s, "--peer", "node2", "--transport", "sim"];
    let layout = plot_to(&source, &svg, &[]);
    assert_eq!(
        (layout["source"].as_str(), layout["peer"].as_str()),
        (Some("segment"), Some("node2"))
    );
    let doc = std::fs::read_to_string(&svg).unwrap();
    assert!(
        doc.contains("PRTT(8,0,s)"),
        "the segment's burst lines are labelled with their n"
    );
    let rast = tmp_path("ng-plot", "seg-rsvg.png");
    let img = rasterised(&svg, &rast);
    // No samples: what is blue at both ends is the model line itself.
    check_curves(&img, &layout, "segment entry");
    for f in [&saved, &svg, &rast, &seg] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn bad_input_fails_clearly_with_the_documented_codes() {
    let dir = tmp_path("ng-plot", "bad");
    std::fs::create_dir_all(&dir).unwrap();
    let img = dir.join("x.svg");
    let img_s = img.to_str().unwrap();
    // A probe file `contents` named `name` fails (1) and says `why`; the
    // file stays for the checks below.
    let fails_with = |name: &str, contents: &str, why: &str| {
        let file = dir.join(name);
        std::fs::write(&file, contents).unwrap();
        let out = ngctl(&["plot", file.to_str().unwrap(), "-o", img_s]);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains(why), "{}", text(&out.stderr));
        file
    };
    // A malformed probe file.
    let junk = fails_with(
        "junk.json",
        "{ not json",
        "is not the JSON of `ngctl probe --json --raw`",
    );
    // A probe saved without --raw.
    fails_with(
        "plain.json",
        "{\"transport\": \"sim\"}",
        "has no raw samples",
    );
    // No segment (4); no such peer (5, the entries listed by name).
    let seg = dir.join("segment");
    let seg_s = seg.to_str().unwrap();
    let out = ngctl(&["plot", "--shm", seg_s, "-o", img_s]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let out = publish_sim(seg_s, "1024", &["-q"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ngctl(&["plot", "--shm", seg_s, "--peer", "nosuch", "-o", img_s]);
    assert_eq!(out.status.code(), Some(5));
    assert!(
        text(&out.stderr).contains("no entry for peer nosuch"),
        "{}",
        text(&out.stderr)
    );
    // Wrong command lines (2): a name that says no format, a format that
    // contradicts it, a file and a segment at once, an absurd size.
    for args in [
        vec!["plot", "--shm", seg_s, "-o", "x.gif"],
        vec!["plot", "--shm", seg_s, "-o", "x.svg", "--format", "png"],
        vec![
            "plot",
            junk.to_str().unwrap(),
            "--shm",
            seg_s,
            "-o",
            "x.svg",
        ],
        vec!["plot", "--shm", seg_s, "-o", "x.svg", "--csv"],
    ] {
        let out = ngctl(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = ngctl(&["plot", "--shm", seg_s, "-o", img_s, "--width", "10"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("200..=8192"),
        "{}",
        text(&out.stderr)
    );
    assert!(!img.exists(), "no image is written on failure");
    let _ = std::fs::remove_dir_all(&dir);
}
