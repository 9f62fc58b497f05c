//! A thin safe wrapper over libibverbs (through the raw `rdma-sys` bindings):
//! just what the verbs transports need.
//!
//! - [`Context::open`]: a device by name (with the list of devices present in
//!   the error when there is no such device), its port attributes and GIDs
//!   ([`Context::port`], [`Context::gid`], [`Context::default_gid_index`]).
//! - [`Pd`], [`PinnedBuf`] (page-aligned, mlocked, optionally huge pages),
//!   [`Mr`] (a registered pinned buffer; a refusal caused by
//!   `RLIMIT_MEMLOCK` names the limit and the bytes asked), [`Cq`], [`Qp`]
//!   (RC) with the state transitions RESET → INIT → RTR → RTS.
//! - Ownership encodes the destruction order: a `Qp` holds its `Pd` and `Cq`s,
//!   an `Mr` its `Pd`, a `Pd` and a `Cq` their `Context`; each frees its verbs
//!   object in `Drop` before its parents are released.
//!
//! The hot-path calls ([`Qp::post_send`], [`Qp::post_recv`], [`Cq::poll`])
//! take pre-built work requests and never allocate.
//!
//! Layout: `device` (device list, [`Context`], ports and GIDs), `memory`
//! ([`Pd`], [`PinnedBuf`], [`Mr`]), `cq` ([`Cq`], [`Completion`]), `qp`
//! ([`Qp`] and its pre-built work requests), `link` ([`LinkOptions`],
//! [`Link`]: the local end of one RC connection, opened in one call), and
//! [`exchange`] (the endpoint records both ends trade). This module holds
//! the error type and the return-code helpers they share.

mod cq;
mod device;
pub mod exchange;
mod link;
mod memory;
mod qp;

pub use cq::{wc_status_str, Completion, Cq};
pub use device::{
    device_names, mtu_bytes, Context, PortInfo, LINK_LAYER_ETHERNET, LINK_LAYER_INFINIBAND,
};
pub use link::{Link, LinkOptions};
pub use memory::{Access, Mr, Pd, PinnedBuf};
pub use qp::{PathParams, Qp, QpCaps, RecvWr, RemoteQp, SendOp, SendWr};

use std::io;

/// Errors of the verbs layer.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    #[error("no RDMA device named {name:?} (present: {})", if present.is_empty() { "none".to_string() } else { present.join(", ") })]
    NoDevice { name: String, present: Vec<String> },
    #[error("{what} failed: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "cannot pin {bytes} bytes of memory ({what}): RLIMIT_MEMLOCK is {} (raise it, e.g. `ulimit -l unlimited` or LimitMEMLOCK=infinity in the unit): {source}",
        fmt_limit(*limit_bytes)
    )]
    MemlockLimit {
        what: &'static str,
        bytes: usize,
        /// The soft RLIMIT_MEMLOCK in bytes (None: unlimited).
        limit_bytes: Option<u64>,
        #[source]
        source: io::Error,
    },
    #[error("port {port} of {device} is not active (state {state})")]
    PortDown {
        device: String,
        port: u8,
        state: u32,
    },
    #[error("GID index {index} of {device} port {port} is not usable ({why})")]
    BadGid {
        device: String,
        port: u8,
        index: u32,
        why: String,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Exchange(#[from] exchange::ExchangeError),
}

fn fmt_limit(limit: Option<u64>) -> String {
    match limit {
        Some(b) => format!("{b} bytes ({} KiB)", b / 1024),
        None => "unlimited".to_string(),
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (None: unlimited or unknown).
pub fn memlock_limit_bytes() -> Option<u64> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid struct we pass.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut rl) };
    if rc != 0 || rl.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(rl.rlim_cur)
    }
}

/// A refusal to pin `bytes` of memory (`what`: mlock, ibv_reg_mr): ENOMEM,
/// EPERM and EAGAIN are what RLIMIT_MEMLOCK causes, and the error then
/// names the limit; anything else is an OS error.
fn pin_error(what: &'static str, bytes: usize, source: io::Error) -> VerbsError {
    match source.raw_os_error() {
        Some(libc::ENOMEM) | Some(libc::EPERM) | Some(libc::EAGAIN) => VerbsError::MemlockLimit {
            what,
            bytes,
            limit_bytes: memlock_limit_bytes(),
            source,
        },
        _ => VerbsError::Os { what, source },
    }
}

fn os_err(what: &'static str) -> VerbsError {
    VerbsError::Os {
        what,
        source: io::Error::last_os_error(),
    }
}

/// A verbs return code (0 or an errno value, as most verbs return).
fn check_rc(rc: i32, what: &'static str) -> Result<(), VerbsError> {
    if rc == 0 {
        Ok(())
    } else {
        let errno = if rc > 0 {
            rc
        } else {
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        };
        Err(VerbsError::Os {
            what,
            source: io::Error::from_raw_os_error(errno),
        })
    }
}

#[cfg(test)]
mod tests;
