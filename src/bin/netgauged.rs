//! netgauged: the per-node daemon. The measurement core is in the library;
//! the daemon itself (control plane, scheduler, publication) is not built yet.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "netgauged: the daemon is not implemented in this version; use `ngctl probe` \
         for one-shot measurements"
    );
    ExitCode::from(2)
}
