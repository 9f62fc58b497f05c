//! RC queue pairs: creation, the RESET → INIT → RTR → RTS transitions, and
//! the pre-built send and receive work requests the hot path posts.

use std::ptr::{self, NonNull};
use std::sync::Arc;

use rdma_sys as sys;

use super::{check_rc, os_err, Cq, Mr, Pd, VerbsError};

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
        self.set_flag(sys::ibv_send_flags::IBV_SEND_INLINE.0, inline);
    }

    /// Ask for a completion (or not: an unsignaled request completes
    /// silently unless it fails).
    #[inline]
    pub fn set_signaled(&mut self, signaled: bool) {
        self.set_flag(sys::ibv_send_flags::IBV_SEND_SIGNALED.0, signaled);
    }

    #[inline]
    fn set_flag(&mut self, flag: u32, on: bool) {
        if on {
            self.wr.send_flags |= flag;
        } else {
            self.wr.send_flags &= !flag;
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
