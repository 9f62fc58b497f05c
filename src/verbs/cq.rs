//! Completion queues and their completions.

use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

use super::{os_err, Context, VerbsError};

/// A completion queue.
pub struct Cq {
    pub(super) cq: NonNull<sys::ibv_cq>,
    _ctx: Arc<Context>,
}

// SAFETY: completion queues are thread-safe verbs objects.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}

/// One work completion, reduced to what we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub byte_len: u32,
}

impl Completion {
    pub fn ok(&self) -> bool {
        self.status == sys::ibv_wc_status::IBV_WC_SUCCESS
    }
}

/// The text libibverbs gives for a completion status.
pub fn wc_status_str(status: u32) -> String {
    // SAFETY: ibv_wc_status_str returns a static NUL-terminated string for
    // any value ("unknown" for values it does not know).
    unsafe { CStr::from_ptr(sys::ibv_wc_status_str(status)) }
        .to_string_lossy()
        .into_owned()
}

impl Cq {
    pub fn new(ctx: &Arc<Context>, entries: u32) -> Result<Arc<Cq>, VerbsError> {
        // SAFETY: the context is open; no channel, no user context.
        let cq = unsafe {
            sys::ibv_create_cq(
                ctx.raw(),
                entries as i32,
                ptr::null_mut(),
                ptr::null_mut(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(|| os_err("ibv_create_cq"))?;
        Ok(Arc::new(Cq {
            cq,
            _ctx: ctx.clone(),
        }))
    }

    /// Poll for one completion (no system call for user-space providers).
    #[inline]
    pub fn poll(&self) -> Result<Option<Completion>, VerbsError> {
        // SAFETY: ibv_wc is plain old data; all-zero is valid.
        let mut wc: sys::ibv_wc = unsafe { std::mem::zeroed() };
        // SAFETY: the CQ is live; wc has room for the one entry asked for.
        let n = unsafe { sys::ibv_poll_cq(self.cq.as_ptr(), 1, &mut wc) };
        if n < 0 {
            return Err(VerbsError::Os {
                what: "ibv_poll_cq",
                source: io::Error::from_raw_os_error(libc::EIO),
            });
        }
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(Completion {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
            byte_len: wc.byte_len,
        }))
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: QPs hold an Arc<Cq>: none is attached any more; freed once.
        unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
    }
}
