//! The local end of one RC connection, opened in one call: device, port
//! check, GID choice, PD, CQs and a QP in INIT; then connected to the
//! peer's endpoint record.

use std::sync::Arc;

use rdma_sys as sys;

use super::{
    exchange, mtu_bytes, Context, Cq, Mr, PathParams, Pd, PortInfo, Qp, QpCaps, RemoteQp,
    VerbsError,
};

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
