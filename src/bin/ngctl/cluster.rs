//! `ngctl quiet`'s, `ngctl resume`'s and `ngctl matrix`'s flags (kept beside
//! ngctl.rs so the binary's main file stays clap definitions and dispatch).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use netgauged::ops::{self, MatrixArgs};
use netgauged::report;

#[derive(Args)]
pub struct QuietFlags {
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
    pub fn quiet(self) -> Result<()> {
        let q = ops::quiet(&super::shm(self.shm), self.name.as_deref(), self.for_)?;
        print!("{}", report::quiet_file(&q));
        Ok(())
    }

    pub fn resume(self) -> Result<()> {
        let q = ops::resume(&super::shm(self.shm), self.name.as_deref())?;
        print!("{}", report::quiet_file(&q));
        Ok(())
    }
}

#[derive(Args)]
pub struct MatrixFlags {
    /// Ask the daemons of these nodes (a hostlist, e.g. "node[001-128]").
    #[arg(long, conflicts_with = "segments")]
    nodes: Option<String>,
    #[arg(long, default_value_t = 7470)]
    port: u16,
    #[arg(long, default_value = "/etc/netgauged/cluster.key")]
    key_file: PathBuf,
    /// Or read these segment files (gathered from the nodes).
    #[arg(long, num_args = 1..)]
    segments: Vec<PathBuf>,
    /// Slurm topology.conf: also the leaf-switch group×group matrices.
    #[arg(long)]
    topology: Option<PathBuf>,
    #[arg(long)]
    transport: Option<String>,
    #[arg(long, default_value = "table", value_parser = ["table", "csv", "json"])]
    format: String,
}

impl MatrixFlags {
    pub fn run(self) -> Result<()> {
        let a = MatrixArgs {
            nodes: self.nodes,
            port: self.port,
            key_file: self.key_file,
            segments: self.segments,
            topology: self.topology,
            transport: self.transport,
            timeout: ops::MATRIX_TIMEOUT,
        };
        print!("{}", report::matrix(&ops::matrix(&a)?, &self.format)?);
        Ok(())
    }
}
