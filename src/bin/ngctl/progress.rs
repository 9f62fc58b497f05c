//! ngctl's progress bar and notes on stderr (beside ngctl.rs so the
//! binary's main file stays clap definitions and dispatch).

use std::io::IsTerminal;

use netgauged::ops::Note;
use netgauged::report;
use netgauged::sweep::Progress;

/// The sweep's progress on a terminal (hidden when stderr is not one, or
/// for JSON).
pub struct Bar(pub indicatif::ProgressBar);

impl Progress for Bar {
    fn sizes(&mut self, done: usize, total: usize, size_bytes: u64) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
        self.0.set_message(format!("{size_bytes} B"));
    }
}

/// The progress bar, and the notes that go to stderr above it.
pub fn progress_bar(json: bool) -> (Bar, impl FnMut(Note)) {
    let bar = if json || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(1).with_style(
            indicatif::ProgressStyle::with_template("{spinner} sizes {pos}/{len} {bar:30} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        )
    };
    (Bar(bar.clone()), move |n: Note| bar.suspend(|| note(&n)))
}

/// Notes go to stderr.
pub fn note(n: &Note) {
    eprintln!("{}", report::note(n));
}
