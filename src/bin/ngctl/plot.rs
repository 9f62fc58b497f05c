//! `ngctl plot`'s flags and run (beside ngctl.rs so the binary's main file
//! stays clap definitions and dispatch).

use std::path::PathBuf;

use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::Args;
use netgauged::ops::{self, OpsError};
use netgauged::report::plot::{self, Figure, ImageFormat};
use netgauged::report::{self, Meta};
use serde::Serialize;

use super::flags::EntryFlags;
use super::Out;

fn image_format_parser() -> impl TypedValueParser<Value = ImageFormat> {
    PossibleValuesParser::new(ImageFormat::ALL.map(ImageFormat::name))
        .try_map(|s| s.parse::<ImageFormat>())
}

fn side_parser() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(i64::from(plot::MIN_SIDE_PX)..=i64::from(plot::MAX_SIDE_PX))
}

#[derive(Args)]
pub struct PlotFlags {
    /// A saved `ngctl probe --json --raw` ("-": stdin). Without it: the
    /// segment entry of --peer and --transport (the model only).
    #[arg(conflicts_with_all = ["shm", "peer", "transport"])]
    file: Option<String>,
    /// The image to write; its extension (.svg, .png) gives the format.
    #[arg(short, long)]
    output: PathBuf,
    /// Image format, when the extension of --output does not say.
    #[arg(long, value_parser = image_format_parser())]
    format: Option<ImageFormat>,
    /// Width of the image, pixels (200 to 8192).
    #[arg(long, default_value_t = 960, value_parser = side_parser())]
    width: u32,
    /// Height of the image, pixels (200 to 8192).
    #[arg(long, default_value_t = 640, value_parser = side_parser())]
    height: u32,
    #[command(flatten)]
    entry: EntryFlags,
}

/// What `ngctl plot --json` prints besides the envelope.
#[derive(Serialize)]
struct PlotJson<'a> {
    output: String,
    /// "probe" or "segment".
    source: &'static str,
    bytes: usize,
    #[serde(flatten)]
    layout: &'a plot::Layout,
}

impl PlotFlags {
    /// The format: --format, else the extension; both given must agree.
    fn format(&self) -> Result<ImageFormat, OpsError> {
        let by_name = ImageFormat::from_path(&self.output);
        match (self.format, by_name) {
            (Some(f), Some(e)) if f != e => Err(OpsError::Usage(format!(
                "--format {} contradicts --output {}",
                f.name(),
                self.output.display()
            ))),
            (Some(f), _) | (None, Some(f)) => Ok(f),
            (None, None) => Err(OpsError::Usage(format!(
                "--output {}: name it .svg or .png, or give --format",
                self.output.display()
            ))),
        }
    }

    pub fn run(self, o: &Out) -> Result<()> {
        super::no_csv(o, "plot")?;
        let format = self.format()?;
        let (fig, transport, peer, source) = match &self.file {
            Some(file) => {
                let p = ops::load_probe(file)?;
                let fig = Figure::from_probe(&p.result, p.peer.as_deref(), p.timestamp_unix_ns);
                (fig, p.result.transport.clone(), p.peer, "probe")
            }
            None => {
                let e = self.entry.load()?;
                let fig = Figure::from_entry(&e);
                (fig, Some(e.transport), Some(e.peer), "segment")
            }
        };
        let (bytes, layout) = plot::render(&fig, format, self.width, self.height)?;
        std::fs::write(&self.output, &bytes).map_err(|source| OpsError::Write {
            what: self.output.display().to_string(),
            source,
        })?;
        if o.json {
            let meta = Meta {
                command: "plot",
                transport: transport.as_deref(),
                peer: peer.as_deref(),
                clock: None,
            };
            let body = PlotJson {
                output: self.output.display().to_string(),
                source,
                bytes: bytes.len(),
                layout: &layout,
            };
            print!("{}", report::json_doc(&meta, &body)?);
        } else {
            o.say(&format!(
                "wrote {} ({}, {}×{} px)",
                self.output.display(),
                format.name(),
                layout.width_px,
                layout.height_px
            ));
        }
        Ok(())
    }
}
