//! Process set-up for the busy-polling threads: CPU pinning, locked
//! memory, SCHED_FIFO, and systemd notification. Each returns a typed
//! error; the daemon logs one line and carries on without it.

use std::io;
use std::thread::JoinHandle;

/// Spawn one of the daemon's busy-polling threads (the probe thread, the
/// responders), pinned to `cpu` when one is configured. A node either
/// drives or serves, never both, so they never poll at the same time and
/// share the one core: the daemon's probing keeps off the others. Without
/// a pin, a driver and a responder on one machine (two daemons in network
/// namespaces) may land on one core, where each spins out its yield
/// threshold before the other runs (bench/daemon.md).
pub fn spawn_busy<T: Send + 'static>(
    name: &'static str,
    cpu: Option<usize>,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if let Some(cpu) = cpu {
                if let Err(e) = pin_to_cpu(cpu) {
                    tracing::warn!("{name} not pinned to CPU {cpu}: {e}");
                }
            }
            f()
        })
}

/// Pin the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    crate::probe::cpu::pin(cpu)
}

/// Lock current and future memory (no page faults in probe loops).
pub fn lock_memory() -> io::Result<()> {
    use nix::sys::mman::{mlockall, MlockAllFlags};
    mlockall(MlockAllFlags::MCL_CURRENT | MlockAllFlags::MCL_FUTURE).map_err(io::Error::from)
}

/// Raise the soft limit on open descriptors to the hard one (a process
/// may, unprivileged) and return it: the control plane's table of
/// unauthenticated connections is sized to it, so strangers' connections
/// cannot take the descriptors the probe thread, the responders and the
/// publisher's files need.
pub fn raise_open_files() -> io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => return Ok(hard),
            Err(e) => tracing::warn!("RLIMIT_NOFILE kept at {soft} (raising it to {hard}: {e})"),
        }
    }
    Ok(soft)
}

/// Run the calling thread SCHED_FIFO at `priority` (needs CAP_SYS_NICE).
pub fn sched_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid, initialised sched_param that outlives the
    // call; pid 0 means the calling thread; the call does not retain it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Tell systemd something (no-op outside a `Type=notify` unit).
pub fn notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        tracing::debug!("sd_notify: {e}");
    }
}

/// The watchdog interval systemd asked for, if any.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    let mut usec = 0u64;
    sd_notify::watchdog_enabled(false, &mut usec).then(|| std::time::Duration::from_micros(usec))
}
