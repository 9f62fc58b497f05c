//! The driving thread's CPU: its context switches (for the stability
//! verdict) and pinning it to a core (`ngctl probe --cpu`, `ngctl serve
//! --cpu`).

/// Voluntary and involuntary context switches of the calling thread so
/// far (getrusage RUSAGE_THREAD), None if the kernel does not say.
pub fn thread_switches() -> Option<u64> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_THREAD asks about
    // the calling thread only; the kernel fills the whole struct on success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: getrusage succeeded, so the struct is initialised (it was
    // zeroed before, too).
    let ru = unsafe { ru.assume_init() };
    Some((ru.ru_nvcsw as u64).saturating_add(ru.ru_nivcsw as u64))
}

/// Pin the calling thread (and the threads it starts later) to `cpu`.
pub fn pin(cpu: usize) -> std::io::Result<()> {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(std::io::Error::from)?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_are_counted_and_grow_with_sleeps() {
        let a = thread_switches().expect("getrusage");
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let b = thread_switches().expect("getrusage");
        // Each sleep gives the CPU away at least once.
        assert!(b >= a + 3, "{a} → {b}");
    }
}
