//! Memory: protection domains, pinned (mlocked) buffers, and their
//! registrations.

use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

use super::{os_err, pin_error, Context, VerbsError};

/// A protection domain.
pub struct Pd {
    pub(super) pd: NonNull<sys::ibv_pd>,
    ctx: Arc<Context>,
}

// SAFETY: protection domains are thread-safe verbs objects.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}

impl Pd {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>, VerbsError> {
        // SAFETY: the context is open.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.raw()) };
        let pd = NonNull::new(pd).ok_or_else(|| os_err("ibv_alloc_pd"))?;
        Ok(Arc::new(Pd {
            pd,
            ctx: ctx.clone(),
        }))
    }
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: MRs and QPs hold an Arc<Pd>: none is alive; freed once.
        unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

/// Page-aligned anonymous memory, locked in RAM (mlock), zero-filled.
pub struct PinnedBuf {
    ptr: NonNull<u8>,
    len: usize,
    map_len: usize,
    pub huge_pages: bool,
}

// SAFETY: the buffer is plain memory owned by this value.
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    /// Map and lock `len` bytes (at least one page). With `huge`, try
    /// 2 MiB huge pages first and fall back to normal pages.
    pub fn new(len: usize, huge: bool) -> Result<PinnedBuf, VerbsError> {
        if len == 0 {
            return Err(VerbsError::Invalid("a pinned buffer of 0 bytes".into()));
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let mut attempts: [(usize, i32, bool); 2] = [(0, 0, false); 2];
        let mut k = 0;
        if huge {
            let huge_len = len.div_ceil(2 << 20) * (2 << 20);
            attempts[k] = (huge_len, libc::MAP_HUGETLB, true);
            k += 1;
        }
        attempts[k] = (len.div_ceil(page) * page, 0, false);
        k += 1;
        for &(map_len, extra, is_huge) in &attempts[..k] {
            // SAFETY: an anonymous private mapping; no existing memory is
            // touched.
            let p = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    map_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                if is_huge {
                    continue;
                }
                return Err(os_err("mmap of a probe buffer"));
            }
            // SAFETY: p is the start of our fresh mapping of map_len bytes.
            if unsafe { libc::mlock(p, map_len) } != 0 {
                let source = io::Error::last_os_error();
                // SAFETY: unmapping the mapping we just made.
                unsafe { libc::munmap(p, map_len) };
                return Err(pin_error("mlock", map_len, source));
            }
            return Ok(PinnedBuf {
                // SAFETY: mmap succeeded, so p is not null.
                ptr: unsafe { NonNull::new_unchecked(p as *mut u8) },
                len,
                map_len,
                huge_pages: is_huge,
            });
        }
        Err(VerbsError::Invalid("no mapping attempt left".into()))
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unlocked and unmapped once; any MR over it
        // was deregistered before (Mr drops its registration first).
        unsafe {
            libc::munlock(self.ptr.as_ptr() as *const libc::c_void, self.map_len);
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.map_len);
        }
    }
}

/// Access rights of a memory registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub remote_write: bool,
    pub remote_read: bool,
}

/// A registered pinned buffer. The NIC may write into it at any time, so
/// its bytes are only reached through raw pointers (volatile/atomic reads).
pub struct Mr {
    mr: NonNull<sys::ibv_mr>,
    buf: PinnedBuf,
    _pd: Arc<Pd>,
}

// SAFETY: memory regions are thread-safe verbs objects; the buffer is owned.
unsafe impl Send for Mr {}

impl Mr {
    /// Pin `len` bytes and register them with `pd`.
    pub fn new(pd: &Arc<Pd>, len: usize, access: Access, huge: bool) -> Result<Mr, VerbsError> {
        let buf = PinnedBuf::new(len, huge)?;
        let mut flags = sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0;
        if access.remote_write {
            flags |= sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        }
        if access.remote_read {
            flags |= sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0;
        }
        // SAFETY: buf is a live mapping of at least len bytes that outlives
        // the registration (dropped after it, see Drop).
        let mr = unsafe {
            sys::ibv_reg_mr(
                pd.pd.as_ptr(),
                buf.as_ptr() as *mut libc::c_void,
                len,
                flags as i32,
            )
        };
        match NonNull::new(mr) {
            Some(mr) => Ok(Mr {
                mr,
                buf,
                _pd: pd.clone(),
            }),
            None => Err(pin_error("ibv_reg_mr", len, io::Error::last_os_error())),
        }
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.buf.as_ptr()
    }
    pub fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn lkey(&self) -> u32 {
        // SAFETY: the registration is live while self is.
        unsafe { self.mr.as_ref().lkey }
    }
    pub fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { self.mr.as_ref().rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: deregistered once, before `buf` (a field) is unmapped.
        unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
    }
}
