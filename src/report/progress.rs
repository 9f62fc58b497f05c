//! The sweep's progress on a terminal, and the notes an operation reports
//! as it runs, written to stderr above the bar.

use std::io::IsTerminal;

use crate::ops::Note;
use crate::sweep::Progress;

/// An indicatif bar over the sizes of a sweep (hidden when stderr is not
/// a terminal, or for JSON).
pub struct Bar(pub indicatif::ProgressBar);

impl Progress for Bar {
    fn sizes(&mut self, done: usize, total: usize, size_bytes: u64) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
        self.0.set_message(format!("{size_bytes} B"));
    }
}

/// The progress bar (hidden when `hide`, or when stderr is not a
/// terminal), and the notes that go to stderr above it (none when `quiet`).
pub fn progress_bar(hide: bool, quiet: bool) -> (Bar, impl FnMut(Note)) {
    let bar = if hide || quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(1).with_style(
            indicatif::ProgressStyle::with_template("{spinner} sizes {pos}/{len} {bar:30} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    };
    (Bar(bar.clone()), move |n: Note| {
        if !quiet {
            bar.suspend(|| eprint_note(&n))
        }
    })
}

/// A note, on stderr.
pub fn eprint_note(n: &Note) {
    eprintln!("{}", super::note(n));
}

/// Set up a command-line tool's terminal: a reader that stops early
/// (`ngctl dump | head`) ends the tool quietly, as it does any Unix
/// filter, instead of a panic in `println!`; logs go to stderr (level from
/// `RUST_LOG`, default warn), with colour codes only on a terminal. Call
/// first thing in `main`.
pub fn init_terminal() {
    // SAFETY: called before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
