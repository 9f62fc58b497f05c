//! What ngctl writes besides its result (beside ngctl.rs so the binary's
//! main file stays clap definitions and dispatch): the shared output flags,
//! the progress bar and notes on stderr, and the man pages.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use netgauged::ops::Note;
use netgauged::report;

/// The output flags every subcommand shares.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub json: bool,
    pub csv: bool,
    pub wide: bool,
    pub quiet: bool,
}

impl Out {
    /// How `netgauged::report` is to format a result.
    pub fn report(&self) -> report::Output {
        report::Output {
            format: if self.json {
                report::OutputFormat::Json
            } else if self.csv {
                report::OutputFormat::Csv
            } else {
                report::OutputFormat::Text
            },
            wide: self.wide,
        }
    }

    /// The progress bar (on a terminal, for tables, unless quiet), and the
    /// notes that go to stderr above it (none when quiet).
    pub fn progress_bar(&self) -> (report::Bar, impl FnMut(Note)) {
        report::progress_bar(self.json || self.csv, self.quiet)
    }

    /// A note, to stderr unless quiet.
    pub fn note(&self, n: &Note) {
        if !self.quiet {
            report::eprint_note(n);
        }
    }

    /// A line to stderr unless quiet.
    pub fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}

/// The man pages of `cmd` and of each of its subcommands (`ngctl.1`,
/// `ngctl-probe.1`, …) written into `dir`, from the CLI definition itself.
pub fn write_man_pages(cmd: clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    let mut pages = vec![(cmd.get_name().to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("{}-{}", cmd.get_name(), sub.get_name());
        pages.push((
            name.clone(),
            sub.clone().display_name(name.clone()).bin_name(name),
        ));
    }
    for (name, page) in pages {
        let mut buf = Vec::new();
        clap_mangen::Man::new(page).render(&mut buf)?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}
