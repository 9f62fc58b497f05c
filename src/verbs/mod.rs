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

pub mod exchange;

use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

/// `IBV_LINK_LAYER_INFINIBAND` / `_ETHERNET` (preprocessor constants that
/// the bindings do not carry).
pub const LINK_LAYER_INFINIBAND: u8 = 1;
pub const LINK_LAYER_ETHERNET: u8 = 2;

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

/// Names of the RDMA devices present (empty when there are none or
/// libibverbs finds no provider).
pub fn device_names() -> Vec<String> {
    let mut n: i32 = 0;
    // SAFETY: ibv_get_device_list returns an array of n device pointers
    // (or NULL), freed below with ibv_free_device_list.
    let list = unsafe { sys::ibv_get_device_list(&mut n) };
    if list.is_null() {
        return Vec::new();
    }
    let mut names = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n, so the entry is a valid device pointer of the list;
        // its name is a NUL-terminated string owned by the device.
        let name = unsafe {
            let dev = *list.add(i);
            CStr::from_ptr(sys::ibv_get_device_name(dev))
        };
        names.push(name.to_string_lossy().into_owned());
    }
    // SAFETY: list came from ibv_get_device_list and is freed once.
    unsafe { sys::ibv_free_device_list(list) };
    names
}

/// An open device.
pub struct Context {
    ctx: NonNull<sys::ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread (the library
// locks internally where needed); we never share them without Arc.
unsafe impl Send for Context {}
// SAFETY: as above; all methods take &self and call thread-safe verbs.
unsafe impl Sync for Context {}

/// The attributes of a port we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub state: u32,
    /// `ibv_mtu` enum value (1 = 256 B … 5 = 4096 B).
    pub active_mtu: u32,
    pub lid: u16,
    pub link_layer: u8,
    pub gid_table_len: u32,
    pub max_msg_bytes: u32,
}

impl PortInfo {
    /// The active MTU in bytes.
    pub fn mtu_bytes(&self) -> usize {
        mtu_bytes(self.active_mtu)
    }
    pub fn is_ethernet(&self) -> bool {
        self.link_layer == LINK_LAYER_ETHERNET
    }
}

/// Bytes of an `ibv_mtu` enum value.
pub fn mtu_bytes(mtu: u32) -> usize {
    128usize << mtu.clamp(1, 5)
}

impl Context {
    /// Open the device called `name`.
    pub fn open(name: &str) -> Result<Arc<Context>, VerbsError> {
        let mut n: i32 = 0;
        // SAFETY: as in device_names.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::NoDevice {
                name: name.to_string(),
                present: Vec::new(),
            });
        }
        let mut present = Vec::new();
        let mut opened: *mut sys::ibv_context = ptr::null_mut();
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n: a valid device of the list, its name NUL-terminated.
            let (dev, dev_name) = unsafe {
                let dev = *list.add(i);
                (
                    dev,
                    CStr::from_ptr(sys::ibv_get_device_name(dev))
                        .to_string_lossy()
                        .into_owned(),
                )
            };
            if dev_name == name {
                // SAFETY: dev is valid until the list is freed; an opened
                // context stays valid after ibv_free_device_list.
                opened = unsafe { sys::ibv_open_device(dev) };
                if opened.is_null() {
                    let e = os_err("ibv_open_device");
                    // SAFETY: freed once.
                    unsafe { sys::ibv_free_device_list(list) };
                    return Err(e);
                }
                break;
            }
            present.push(dev_name);
        }
        // SAFETY: list came from ibv_get_device_list and is freed once.
        unsafe { sys::ibv_free_device_list(list) };
        match NonNull::new(opened) {
            Some(ctx) => Ok(Arc::new(Context {
                ctx,
                name: name.to_string(),
            })),
            None => Err(VerbsError::NoDevice {
                name: name.to_string(),
                present,
            }),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attributes of `port` (1-based).
    pub fn port(&self, port: u8) -> Result<PortInfo, VerbsError> {
        // SAFETY: ibv_port_attr is plain old data; all-zero is valid.
        let mut attr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; attr is a valid out-pointer of the
        // size the inline wrapper passes to the provider.
        let rc = unsafe { sys::___ibv_query_port(self.ctx.as_ptr(), port, &mut attr) };
        check_rc(rc, "ibv_query_port")?;
        Ok(PortInfo {
            state: attr.state,
            active_mtu: attr.active_mtu,
            lid: attr.lid,
            link_layer: attr.link_layer,
            gid_table_len: attr.gid_tbl_len.max(0) as u32,
            max_msg_bytes: attr.max_msg_sz,
        })
    }

    /// GID `index` of `port`.
    pub fn gid(&self, port: u8, index: u32) -> Result<[u8; 16], VerbsError> {
        let mut gid = sys::ibv_gid { raw: [0; 16] };
        // SAFETY: the context is open; gid is a valid 16-byte out-pointer.
        let rc = unsafe { sys::ibv_query_gid(self.ctx.as_ptr(), port, index as i32, &mut gid) };
        if rc != 0 {
            return Err(VerbsError::BadGid {
                device: self.name.clone(),
                port,
                index,
                why: format!("ibv_query_gid: {}", io::Error::last_os_error()),
            });
        }
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(unsafe { gid.raw })
    }

    /// The kernel's type of GID `index` ("RoCE v2", "IB/RoCE v1"), if sysfs
    /// tells.
    pub fn gid_type(&self, port: u8, index: u32) -> Option<String> {
        let p = format!(
            "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}",
            self.name
        );
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The GID index to use when none is given: 0 on InfiniBand; on RoCE the
    /// first non-zero RoCE v2 GID, preferring an IPv4-mapped one.
    pub fn default_gid_index(&self, port: u8, info: &PortInfo) -> u32 {
        if !info.is_ethernet() {
            return 0;
        }
        let mut first_v2 = None;
        for i in 0..info.gid_table_len.min(256) {
            let Ok(g) = self.gid(port, i) else { continue };
            if g == [0; 16] {
                continue;
            }
            let v2 = self
                .gid_type(port, i)
                .map(|t| t.contains("v2"))
                .unwrap_or(true);
            if !v2 {
                continue;
            }
            if g[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
                return i;
            }
            first_v2.get_or_insert(i);
        }
        first_v2.unwrap_or(0)
    }

    fn raw(&self) -> *mut sys::ibv_context {
        self.ctx.as_ptr()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every child object holds an Arc<Context>, so none is
        // alive any more; the context is closed once.
        unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
    }
}

/// A protection domain.
pub struct Pd {
    pd: NonNull<sys::ibv_pd>,
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
                return Err(match source.raw_os_error() {
                    Some(libc::ENOMEM) | Some(libc::EPERM) | Some(libc::EAGAIN) => {
                        VerbsError::MemlockLimit {
                            what: "mlock",
                            bytes: map_len,
                            limit_bytes: memlock_limit_bytes(),
                            source,
                        }
                    }
                    _ => VerbsError::Os {
                        what: "mlock",
                        source,
                    },
                });
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
            None => {
                let source = io::Error::last_os_error();
                Err(match source.raw_os_error() {
                    Some(libc::ENOMEM) | Some(libc::EPERM) | Some(libc::EAGAIN) => {
                        VerbsError::MemlockLimit {
                            what: "ibv_reg_mr",
                            bytes: len,
                            limit_bytes: memlock_limit_bytes(),
                            source,
                        }
                    }
                    _ => VerbsError::Os {
                        what: "ibv_reg_mr",
                        source,
                    },
                })
            }
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

/// A completion queue.
pub struct Cq {
    cq: NonNull<sys::ibv_cq>,
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

/// Sizes of an RC queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    /// Largest inline payload asked for; the device may grant less (or
    /// refuse, then smaller values are tried down to 0).
    pub max_inline_bytes: u32,
}

/// Where the peer's queue pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteQp {
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
    pub lid: u16,
    /// `ibv_mtu` value the peer can take.
    pub mtu: u32,
}

/// How to reach the peer and how hard to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathParams {
    pub port: u8,
    /// Use the GRH with this source GID index (RoCE needs it; IB within a
    /// subnet does not).
    pub sgid_index: Option<u32>,
    /// `ibv_mtu` value.
    pub mtu: u32,
    /// Local ACK timeout exponent (4.096 µs · 2^timeout).
    pub timeout: u8,
    pub retry_cnt: u8,
    /// RNR retries (7 = forever; 0 = an RNR is an error at once).
    pub rnr_retry: u8,
    /// Outstanding RDMA reads/atomics in each direction.
    pub rd_atomic: u8,
}

/// An RC queue pair.
pub struct Qp {
    qp: NonNull<sys::ibv_qp>,
    max_inline_bytes: u32,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _pd: Arc<Pd>,
}

// SAFETY: queue pairs are thread-safe verbs objects; posting takes &mut self.
unsafe impl Send for Qp {}

impl Qp {
    /// Create an RC QP in RESET.
    pub fn new_rc(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        caps: QpCaps,
    ) -> Result<Qp, VerbsError> {
        let mut inline = caps.max_inline_bytes;
        loop {
            // SAFETY: plain old data; all-zero is valid.
            let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
            init.send_cq = send_cq.cq.as_ptr();
            init.recv_cq = recv_cq.cq.as_ptr();
            init.cap.max_send_wr = caps.max_send_wr;
            init.cap.max_recv_wr = caps.max_recv_wr;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.cap.max_inline_data = inline;
            init.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
            init.sq_sig_all = 0;
            // SAFETY: pd and both CQs are live (and kept alive by the Qp).
            let qp = unsafe { sys::ibv_create_qp(pd.pd.as_ptr(), &mut init) };
            if let Some(qp) = NonNull::new(qp) {
                return Ok(Qp {
                    qp,
                    max_inline_bytes: init.cap.max_inline_data,
                    _send_cq: send_cq.clone(),
                    _recv_cq: recv_cq.clone(),
                    _pd: pd.clone(),
                });
            }
            if inline == 0 {
                return Err(os_err("ibv_create_qp"));
            }
            inline = if inline > 64 { inline / 2 } else { 0 };
        }
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: the QP is live.
        unsafe { self.qp.as_ref().qp_num }
    }

    /// The inline payload size the device granted.
    pub fn max_inline_bytes(&self) -> u32 {
        self.max_inline_bytes
    }

    fn modify(
        &mut self,
        attr: &mut sys::ibv_qp_attr,
        mask: u32,
        what: &'static str,
    ) -> Result<(), VerbsError> {
        // SAFETY: the QP is live; attr is a valid attribute struct whose
        // fields named by mask are set.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), attr, mask as i32) };
        check_rc(rc, what)
    }

    /// RESET → INIT with remote write and read allowed.
    pub fn to_init(&mut self, port: u8) -> Result<(), VerbsError> {
        use sys::ibv_qp_attr_mask as m;
        // SAFETY: plain old data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
        a.qp_access_flags = (sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ)
            .0;
        let mask =
            (m::IBV_QP_STATE | m::IBV_QP_PKEY_INDEX | m::IBV_QP_PORT | m::IBV_QP_ACCESS_FLAGS).0;
        self.modify(&mut a, mask, "ibv_modify_qp(INIT)")
    }

    /// INIT → RTR towards `remote`.
    pub fn to_rtr(&mut self, remote: &RemoteQp, path: &PathParams) -> Result<(), VerbsError> {
        use sys::ibv_qp_attr_mask as m;
        // SAFETY: plain old data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = path.mtu.min(remote.mtu).clamp(1, 5);
        a.dest_qp_num = remote.qpn;
        a.rq_psn = remote.psn;
        a.max_dest_rd_atomic = path.rd_atomic;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.sl = 0;
        a.ah_attr.src_path_bits = 0;
        a.ah_attr.port_num = path.port;
        if let Some(sgid) = path.sgid_index {
            a.ah_attr.is_global = 1;
            a.ah_attr.grh.dgid = sys::ibv_gid { raw: remote.gid };
            a.ah_attr.grh.sgid_index = sgid as u8;
            a.ah_attr.grh.hop_limit = 64;
            a.ah_attr.grh.flow_label = 0;
            a.ah_attr.grh.traffic_class = 0;
        }
        let mask = (m::IBV_QP_STATE
            | m::IBV_QP_AV
            | m::IBV_QP_PATH_MTU
            | m::IBV_QP_DEST_QPN
            | m::IBV_QP_RQ_PSN
            | m::IBV_QP_MAX_DEST_RD_ATOMIC
            | m::IBV_QP_MIN_RNR_TIMER)
            .0;
        self.modify(&mut a, mask, "ibv_modify_qp(RTR)")
    }

    /// RTR → RTS with our send PSN.
    pub fn to_rts(&mut self, psn: u32, path: &PathParams) -> Result<(), VerbsError> {
        use sys::ibv_qp_attr_mask as m;
        // SAFETY: plain old data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        a.timeout = path.timeout;
        a.retry_cnt = path.retry_cnt;
        a.rnr_retry = path.rnr_retry;
        a.sq_psn = psn;
        a.max_rd_atomic = path.rd_atomic;
        let mask = (m::IBV_QP_STATE
            | m::IBV_QP_TIMEOUT
            | m::IBV_QP_RETRY_CNT
            | m::IBV_QP_RNR_RETRY
            | m::IBV_QP_SQ_PSN
            | m::IBV_QP_MAX_QP_RD_ATOMIC)
            .0;
        self.modify(&mut a, mask, "ibv_modify_qp(RTS)")
    }

    /// Post one pre-built send work request (its `next` must be null and its
    /// scatter list must point into a registered region that stays alive
    /// until the completion, or be inline).
    #[inline]
    pub fn post_send(&mut self, wr: &mut SendWr) -> Result<(), VerbsError> {
        wr.wr.sg_list = &mut wr.sge;
        wr.wr.next = ptr::null_mut();
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: the QP is live; wr is a fully initialised single work
        // request whose sge points into a registration the caller keeps
        // alive (SendWr is only built from an &Mr by the transports).
        let rc = unsafe { sys::ibv_post_send(self.qp.as_ptr(), &mut wr.wr, &mut bad) };
        check_rc(rc, "ibv_post_send")
    }

    /// Post one pre-built receive work request.
    #[inline]
    pub fn post_recv(&mut self, wr: &mut RecvWr) -> Result<(), VerbsError> {
        wr.wr.sg_list = &mut wr.sge;
        wr.wr.next = ptr::null_mut();
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: as for post_send, for a receive request.
        let rc = unsafe { sys::ibv_post_recv(self.qp.as_ptr(), &mut wr.wr, &mut bad) };
        check_rc(rc, "ibv_post_recv")
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: destroyed once, before the CQs and PD it holds are released.
        unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
    }
}

/// Send work request opcodes we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    Send,
    RdmaWrite,
    RdmaRead,
}

/// A send work request with its one scatter/gather entry, built once and
/// re-posted with new offsets and lengths.
pub struct SendWr {
    wr: sys::ibv_send_wr,
    sge: sys::ibv_sge,
}

// SAFETY: the raw pointers inside are re-pointed at the own sge on every
// post; the struct carries no thread affinity.
unsafe impl Send for SendWr {}

impl SendWr {
    pub fn new(op: SendOp, wr_id: u64, mr: &Mr) -> SendWr {
        // SAFETY: plain old data; all-zero is valid (null pointers).
        let mut wr: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.num_sge = 1;
        wr.opcode = match op {
            SendOp::Send => sys::ibv_wr_opcode::IBV_WR_SEND,
            SendOp::RdmaWrite => sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
            SendOp::RdmaRead => sys::ibv_wr_opcode::IBV_WR_RDMA_READ,
        };
        wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        SendWr {
            wr,
            sge: sys::ibv_sge {
                addr: mr.addr(),
                length: 0,
                lkey: mr.lkey(),
            },
        }
    }

    /// Local bytes `[addr, addr+len)` (must lie inside the Mr given to `new`).
    #[inline]
    pub fn set_local(&mut self, addr: u64, len: u32) {
        self.sge.addr = addr;
        self.sge.length = len;
    }

    /// The remote side of a write or read.
    #[inline]
    pub fn set_remote(&mut self, addr: u64, rkey: u32) {
        self.wr.wr.rdma = sys::rdma_t {
            remote_addr: addr,
            rkey,
        };
    }

    #[inline]
    pub fn set_inline(&mut self, inline: bool) {
        let f = sys::ibv_send_flags::IBV_SEND_INLINE.0;
        if inline {
            self.wr.send_flags |= f;
        } else {
            self.wr.send_flags &= !f;
        }
    }

    /// Ask for a completion (or not: an unsignaled request completes
    /// silently unless it fails).
    #[inline]
    pub fn set_signaled(&mut self, signaled: bool) {
        let f = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
        if signaled {
            self.wr.send_flags |= f;
        } else {
            self.wr.send_flags &= !f;
        }
    }

    #[inline]
    pub fn set_wr_id(&mut self, wr_id: u64) {
        self.wr.wr_id = wr_id;
    }
}

/// A receive work request with its one scatter/gather entry.
pub struct RecvWr {
    wr: sys::ibv_recv_wr,
    sge: sys::ibv_sge,
}

// SAFETY: as for SendWr.
unsafe impl Send for RecvWr {}

impl RecvWr {
    /// Receive into `[addr, addr+len)` of `mr`.
    pub fn new(wr_id: u64, mr: &Mr, addr: u64, len: u32) -> RecvWr {
        RecvWr {
            wr: sys::ibv_recv_wr {
                wr_id,
                next: ptr::null_mut(),
                sg_list: ptr::null_mut(),
                num_sge: 1,
            },
            sge: sys::ibv_sge {
                addr,
                length: len,
                lkey: mr.lkey(),
            },
        }
    }
}

/// How to open the local end of a verbs session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkOptions {
    pub device: String,
    /// 1-based port number.
    pub port: u8,
    /// GID index (RoCE); None: [`Context::default_gid_index`].
    pub gid_index: Option<u32>,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    /// Inline payload to ask the device for.
    pub max_inline_bytes: u32,
    /// 0: an RNR NAK is an error at once (proves credit flow control).
    pub rnr_retry: u8,
    /// ACK timeout exponent and transport retries (a dead peer surfaces as
    /// a "retry exceeded" completion after about retry_cnt · 4.096 µs · 2^timeout).
    pub ack_timeout: u8,
    pub retry_cnt: u8,
}

impl LinkOptions {
    pub fn new(device: &str) -> LinkOptions {
        LinkOptions {
            device: device.to_string(),
            port: 1,
            gid_index: None,
            max_send_wr: 16,
            max_recv_wr: 16,
            max_inline_bytes: 256,
            rnr_retry: 7,
            ack_timeout: 14,
            retry_cnt: 7,
        }
    }
}

/// The local end of one RC connection: device, PD, CQs and a QP in INIT.
pub struct Link {
    pub qp: Qp,
    pub send_cq: Arc<Cq>,
    pub recv_cq: Arc<Cq>,
    pub pd: Arc<Pd>,
    pub ctx: Arc<Context>,
    pub port: PortInfo,
    pub gid_index: Option<u32>,
    pub gid: [u8; 16],
    pub psn: u32,
    path: PathParams,
}

impl Link {
    /// Open the device, check the port, choose the GID, create PD, CQs and
    /// an RC QP, and move it to INIT.
    pub fn open(o: &LinkOptions) -> Result<Link, VerbsError> {
        let ctx = Context::open(&o.device)?;
        let port = ctx.port(o.port)?;
        if port.state != sys::ibv_port_state::IBV_PORT_ACTIVE {
            return Err(VerbsError::PortDown {
                device: o.device.clone(),
                port: o.port,
                state: port.state,
            });
        }
        // RoCE needs a GID (GRH); InfiniBand uses the LID unless a GID index
        // is asked for explicitly.
        let gid_index = match (o.gid_index, port.is_ethernet()) {
            (Some(i), _) => Some(i),
            (None, true) => Some(ctx.default_gid_index(o.port, &port)),
            (None, false) => None,
        };
        let gid = match gid_index {
            Some(i) => {
                if i >= port.gid_table_len {
                    return Err(VerbsError::BadGid {
                        device: o.device.clone(),
                        port: o.port,
                        index: i,
                        why: format!("the table has {} entries", port.gid_table_len),
                    });
                }
                let g = ctx.gid(o.port, i)?;
                if g == [0; 16] {
                    return Err(VerbsError::BadGid {
                        device: o.device.clone(),
                        port: o.port,
                        index: i,
                        why: "it is empty (no address on the netdev?)".into(),
                    });
                }
                g
            }
            None => [0; 16],
        };
        let pd = Pd::new(&ctx)?;
        let send_cq = Cq::new(&ctx, o.max_send_wr * 2 + 4)?;
        let recv_cq = Cq::new(&ctx, o.max_recv_wr * 2 + 4)?;
        let mut qp = Qp::new_rc(
            &pd,
            &send_cq,
            &recv_cq,
            QpCaps {
                max_send_wr: o.max_send_wr,
                max_recv_wr: o.max_recv_wr,
                max_inline_bytes: o.max_inline_bytes,
            },
        )?;
        qp.to_init(o.port)?;
        let path = PathParams {
            port: o.port,
            sgid_index: gid_index,
            mtu: port.active_mtu,
            timeout: o.ack_timeout,
            retry_cnt: o.retry_cnt,
            rnr_retry: o.rnr_retry,
            rd_atomic: 4,
        };
        Ok(Link {
            qp,
            send_cq,
            recv_cq,
            pd,
            ctx,
            port,
            gid_index,
            gid,
            psn: exchange::random_psn(),
            path,
        })
    }

    /// Our half of the endpoint record (buffer fields from `mr`).
    pub fn endpoint(&self, kind: exchange::EndpointKind, mr: &Mr) -> exchange::Endpoint {
        exchange::Endpoint {
            kind,
            mtu: self.port.active_mtu as u8,
            qpn: self.qp.qpn(),
            psn: self.psn,
            gid: self.gid,
            lid: self.port.lid,
            rkey: mr.rkey(),
            addr: mr.addr(),
            size_bytes: mr.len() as u64,
            max_inline_bytes: self.qp.max_inline_bytes(),
            tokens: 0,
            token_bytes: 0,
            eager_max_bytes: 0,
            max_msg_bytes: 0,
        }
    }

    /// INIT → RTR → RTS towards the peer.
    pub fn connect(&mut self, peer: &exchange::Endpoint) -> Result<(), VerbsError> {
        let remote = RemoteQp {
            qpn: peer.qpn,
            psn: peer.psn,
            gid: peer.gid,
            lid: peer.lid,
            mtu: u32::from(peer.mtu),
        };
        self.qp.to_rtr(&remote, &self.path)?;
        self.qp.to_rts(self.psn, &self.path)
    }

    /// The path MTU in bytes the connection uses.
    pub fn path_mtu_bytes(&self, peer: &exchange::Endpoint) -> usize {
        mtu_bytes(self.port.active_mtu.min(u32::from(peer.mtu)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_enum_to_bytes() {
        assert_eq!(mtu_bytes(1), 256);
        assert_eq!(mtu_bytes(3), 1024);
        assert_eq!(mtu_bytes(5), 4096);
        assert_eq!(mtu_bytes(9), 4096);
    }

    #[test]
    fn pinned_buffer_is_zeroed_and_aligned() {
        let b = match PinnedBuf::new(10_000, false) {
            Ok(b) => b,
            Err(e @ VerbsError::MemlockLimit { .. }) => {
                // A host with a tiny memlock limit: the error must say so.
                let msg = e.to_string();
                assert!(msg.contains("RLIMIT_MEMLOCK"), "{msg}");
                eprintln!("skipped: {msg}");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        assert_eq!(b.len(), 10_000);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        // SAFETY: the mapping is at least 10 000 bytes long.
        let s = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
        assert!(s.iter().all(|&x| x == 0));
    }

    #[test]
    fn memlock_error_names_limit_and_bytes() {
        let e = VerbsError::MemlockLimit {
            what: "ibv_reg_mr",
            bytes: 139_264,
            limit_bytes: Some(65_536),
            source: io::Error::from_raw_os_error(libc::ENOMEM),
        };
        let m = e.to_string();
        assert!(m.contains("RLIMIT_MEMLOCK is 65536 bytes (64 KiB)"), "{m}");
        assert!(m.contains("139264 bytes"), "{m}");
    }

    #[test]
    fn missing_device_is_a_clear_error() {
        match Context::open("nosuch-device-xyz") {
            Err(VerbsError::NoDevice { name, .. }) => assert_eq!(name, "nosuch-device-xyz"),
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("a device called nosuch-device-xyz exists?"),
        }
    }
}
