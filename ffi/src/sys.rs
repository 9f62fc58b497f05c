//! The few system interfaces the crate needs: mmap, pread, clocks,
//! randomness, flock.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// A shared file mapping, unmapped on drop.
pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through
// atomics (see reader.rs / writer.rs), so sharing the pointer across threads
// is sound. Drop unmaps it exactly once.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only hands out a base pointer.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps the first `len` bytes of `file` shared, read-only or read-write.
    pub(crate) fn map(file: &File, len: usize, writable: bool) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh mapping at an address the kernel chooses; no Rust
        // object aliases it. The fd is valid for the duration of the call.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    #[inline]
    pub(crate) fn base(&self) -> *mut u8 {
        self.ptr
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len came from a successful mmap and are unmapped once;
        // no reference into the mapping outlives `self` (borrows are tied to it).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec. glibc serves CLOCK_REALTIME
    // and CLOCK_REALTIME_COARSE from the vDSO (no system call) on x86-64.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CLOCK_REALTIME in ns (writer side: heartbeat and publish times).
pub(crate) fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// CLOCK_REALTIME_COARSE in ns (reader side: staleness). The coarse clock
/// is read from the vDSO data page without a TSC read or a system call, at a
/// few ns; its resolution (one tick, ≤ 4 ms) is ample for a rule in seconds.
#[inline]
pub(crate) fn realtime_coarse_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME_COARSE)
}

/// A random non-zero u64 (getrandom, falling back to time and pid).
pub(crate) fn random_u64() -> u64 {
    let mut v: u64 = 0;
    // SAFETY: writes at most 8 bytes into `v`.
    let n = unsafe { libc::getrandom((&mut v as *mut u64).cast(), 8, libc::GRND_NONBLOCK) };
    if n != 8 {
        let t = realtime_ns();
        let pid = u64::from(std::process::id());
        v = (t ^ (pid << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        v ^= v >> 31;
    }
    if v == 0 {
        1
    } else {
        v
    }
}

/// Takes an exclusive, non-blocking advisory lock on `file`.
pub(crate) fn lock_exclusive(file: &File) -> io::Result<()> {
    // SAFETY: flock on a valid fd has no memory effects.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The native-endian u64 at `offset` of `file`, as the writer's atomics
/// store it (pread: no mapping yet).
pub(crate) fn read_u64_at(file: &File, offset: u64) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 8];
    file.read_exact_at(&mut b, offset)?;
    Ok(u64::from_ne_bytes(b))
}

/// Sets the file's mode regardless of the umask.
pub(crate) fn fchmod(file: &File, mode: u32) -> io::Result<()> {
    // SAFETY: fchmod on a valid fd has no memory effects.
    let rc = unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
