//! `ngctl quiet`'s, `ngctl resume`'s and `ngctl matrix`'s flags (kept beside
//! ngctl.rs so the binary's main file stays clap definitions and dispatch).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use netgauged::ops::{self, MatrixArgs};
use netgauged::report;

use super::Out;

#[derive(Args)]
pub struct QuietFlags {
    /// Segment file (default $NETGAUGE_SEGMENT, else /run/netgauged/segment).
    #[arg(long)]
    shm: Option<String>,
    /// Who holds the node quiet (quiet: default "ngctl"); it resumes when the last lets go.
    #[arg(long)]
    name: Option<String>,
    /// quiet: only for this long (90s, 15m, 2h, 1d).
    #[arg(long = "for", value_parser = ops::parse_duration)]
    for_: Option<Duration>,
}

impl QuietFlags {
    pub fn quiet(self, o: &Out) -> Result<()> {
        super::text_only(o, "quiet")?;
        let q = ops::quiet(
            &ops::shm_path(self.shm.as_deref()),
            self.name.as_deref(),
            self.for_,
        )?;
        print!("{}", report::quiet_file(&q));
        Ok(())
    }

    pub fn resume(self, o: &Out) -> Result<()> {
        super::text_only(o, "resume")?;
        let q = ops::resume(&ops::shm_path(self.shm.as_deref()), self.name.as_deref())?;
        print!("{}", report::quiet_file(&q));
        Ok(())
    }
}

#[derive(Args)]
pub struct MatrixFlags {
    /// Ask the daemons of these nodes (a hostlist, e.g. "node[001-128]").
    #[arg(long, conflicts_with = "segments")]
    nodes: Option<String>,
    /// The daemons' control port.
    #[arg(long, default_value_t = 7470)]
    port: u16,
    /// The cluster key the daemons share.
    #[arg(long, default_value = "/etc/netgauged/cluster.key")]
    key_file: PathBuf,
    /// Or read these segment files (gathered from the nodes).
    #[arg(long, num_args = 1..)]
    segments: Vec<PathBuf>,
    /// Slurm topology.conf: also the leaf-switch group×group matrices.
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Only this transport's matrices (default: every transport).
    #[arg(long)]
    transport: Option<String>,
}

impl MatrixFlags {
    pub fn run(self, o: &Out) -> Result<()> {
        let a = MatrixArgs {
            nodes: self.nodes,
            port: self.port,
            key_file: self.key_file,
            segments: self.segments,
            topology: self.topology,
            transport: self.transport,
            timeout: ops::MATRIX_TIMEOUT,
        };
        let format = if o.json {
            "json"
        } else if o.csv {
            "csv"
        } else {
            "table"
        };
        print!("{}", report::matrix(&ops::matrix(&a)?, format)?);
        Ok(())
    }
}
