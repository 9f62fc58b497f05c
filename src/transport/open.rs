//! How a link opens: what to open ([`LinkSpec`]), the endpoint data a verbs
//! peer provides ([`QpEndpoint`]) and the abstract rendezvous it travels
//! through ([`Rendezvous`]), and the small trait every transport
//! implements in its own file ([`Open`]). The link layer (`crate::link`)
//! dispatches to it by [`Kind`]; it knows nothing of the control plane or
//! of `ngctl`, which bring their own rendezvous.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::dgram::session::SessionGate;
use super::kind::{Kind, NotBuilt};
use super::raw_eth::RxMode;
use super::sim::SimParams;
use super::{Transport, TransportError};
use crate::clock::{HostClock, VirtualClock};

/// Where the peer of a driver is. Verbs peers are reached through the
/// rendezvous instead; sim and mpi need no address.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Peer {
    /// No address (a responder; sim; mpi; verbs through the rendezvous).
    #[default]
    None,
    /// A socket address (udp: the responder's port).
    Addr(SocketAddr),
    /// A MAC address on the link of `LinkSpec::device` (raw).
    Mac([u8; 6]),
}

/// The verbs transports' settings (rdma, msg).
#[derive(Clone, Debug, PartialEq)]
pub struct VerbsParams {
    /// 1-based port of the device.
    pub port: u8,
    /// GID index (RoCE); None: the first RoCE v2 GID, IPv4-mapped preferred.
    pub gid_index: Option<u32>,
    /// msg: largest eager message; larger ones use the rendezvous.
    pub eager_max_bytes: usize,
    /// rdma: largest inline write; None: 0 on software devices (rxe, siw,
    /// whose inline path is a copy in the kernel), the device's default
    /// otherwise.
    pub inline_max_bytes: Option<u32>,
    /// Deadline of each step of the endpoint exchange (None: the default).
    pub exchange_timeout: Option<Duration>,
    /// Deadline of a send's local completion (None: the default).
    pub send_timeout: Option<Duration>,
}

impl Default for VerbsParams {
    fn default() -> Self {
        VerbsParams {
            port: 1,
            gid_index: None,
            eager_max_bytes: 16 * 1024,
            inline_max_bytes: None,
            exchange_timeout: None,
            send_timeout: None,
        }
    }
}

/// The sim transport's model and the number of peers it simulates.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSpec {
    pub params: SimParams,
    pub peers: usize,
}

/// Everything a link may need; each transport reads its own part.
#[derive(Clone, Debug, Default)]
pub struct LinkOptions {
    /// The clock the transport times its waits and receive overheads with.
    pub clock: HostClock,
    /// Driver: the session nonce agreed on the control plane (None: random).
    pub session_nonce: Option<u64>,
    /// Responder: admit only the session this gate holds (its nonce, and
    /// the source the control plane authenticated; nonce 0: none).
    pub gate: Option<Arc<SessionGate>>,
    /// The largest message the link must carry (None: the transport's
    /// default). Datagram transports keep at least their default.
    pub max_msg_bytes: Option<usize>,
    /// Responder: where to listen (udp).
    pub listen: Option<SocketAddr>,
    /// raw: how frames reach user space.
    pub raw_rx: Option<RxMode>,
    /// rdma, msg.
    pub verbs: VerbsParams,
    /// sim: the model.
    pub sim: Option<SimSpec>,
}

impl LinkOptions {
    /// The largest message of a datagram link: the one asked for, but never
    /// below the transport's `default`.
    pub fn max_msg_bytes_at_least(&self, default: usize) -> usize {
        self.max_msg_bytes.map_or(default, |m| m.max(default))
    }
}

/// What to open: a kind, its peer, its local device and its options.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    pub kind: Kind,
    pub peer: Peer,
    /// The local device: the network interface (raw) or the RDMA device
    /// (rdma, msg).
    pub device: Option<String>,
    pub options: LinkOptions,
}

impl LinkSpec {
    pub fn new(kind: Kind) -> LinkSpec {
        LinkSpec {
            kind,
            peer: Peer::None,
            device: None,
            options: LinkOptions::default(),
        }
    }

    /// The device, or an error naming what is missing.
    pub fn device(&self) -> Result<&str, OpenError> {
        self.device.as_deref().ok_or(OpenError::Missing {
            kind: self.kind,
            what: "device",
        })
    }
}

/// Everything a peer needs to reach a verbs queue pair and its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpEndpoint {
    /// Which transport the queue pair belongs to (both sides must agree).
    pub kind: Kind,
    /// `ibv_mtu` value of the port.
    pub mtu: u8,
    pub qpn: u32,
    pub psn: u32,
    pub gid: [u8; 16],
    pub lid: u16,
    pub rkey: u32,
    /// Address and size of the buffer the peer may write into (rdma) or
    /// read from (msg rendezvous).
    pub addr: u64,
    pub size_bytes: u64,
    pub max_inline_bytes: u32,
    /// msg: receive tokens posted for the peer, and the bytes each holds.
    pub tokens: u32,
    pub token_bytes: u32,
    /// msg: the eager/rendezvous threshold this side uses.
    pub eager_max_bytes: u32,
    /// Largest message this side accepts.
    pub max_msg_bytes: u64,
}

/// The channel a verbs session's endpoints travel through: the daemon's
/// authenticated control connection, or `ngctl`'s TCP side channel.
///
/// Driver: [`exchange`](Self::exchange), connect, [`ready`](Self::ready).
/// Responder: [`peer_endpoint`](Self::peer_endpoint), set up and connect
/// (ready to receive), [`answer`](Self::answer), [`ready`](Self::ready).
/// Nothing is written to a queue pair before its owner has connected it.
pub trait Rendezvous {
    /// Send our endpoint, receive the peer's.
    fn exchange(&mut self, mine: &QpEndpoint) -> Result<QpEndpoint, OpenError>;
    /// The endpoint of the peer that asked for a session of `kind`.
    fn peer_endpoint(&mut self, kind: Kind) -> Result<QpEndpoint, OpenError>;
    /// Answer with our endpoint, once our queue pair can receive.
    fn answer(&mut self, mine: &QpEndpoint) -> Result<(), OpenError>;
    /// Both ends are connected.
    fn ready(&mut self) -> Result<(), OpenError> {
        Ok(())
    }
}

/// For kinds that exchange nothing per session.
pub struct NoRendezvous;

impl Rendezvous for NoRendezvous {
    fn exchange(&mut self, _: &QpEndpoint) -> Result<QpEndpoint, OpenError> {
        Err(OpenError::Rendezvous("no rendezvous for this link".into()))
    }
    fn peer_endpoint(&mut self, _: Kind) -> Result<QpEndpoint, OpenError> {
        Err(OpenError::Rendezvous("no rendezvous for this link".into()))
    }
    fn answer(&mut self, _: &QpEndpoint) -> Result<(), OpenError> {
        Err(OpenError::Rendezvous("no rendezvous for this link".into()))
    }
}

/// What an opened responder tells its peers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Local {
    /// Nothing (no standing responder).
    None,
    /// The UDP address it answers on.
    Addr(SocketAddr),
    /// The MAC it answers on (on the spec's interface), and how it
    /// receives.
    Mac { mac: [u8; 6], rx: RxMode },
}

/// Why a link did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    NotBuilt(#[from] NotBuilt),
    #[error("{kind} needs a {what}")]
    Missing { kind: Kind, what: &'static str },
    #[error("{0} has no responder")]
    NoResponder(Kind),
    #[error("{0}")]
    Rendezvous(String),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[cfg(feature = "verbs")]
    #[error(transparent)]
    Verbs(#[from] crate::verbs::VerbsError),
}

/// How one transport opens, implemented in the transport's own file.
pub trait Open: Transport + Sized {
    /// Check that this node can open the kind at all (device, privileges)
    /// without opening a link; the default has nothing to check.
    fn check(_spec: &LinkSpec) -> Result<(), OpenError> {
        Ok(())
    }

    /// The driving end toward `spec.peer` (verbs: through `rdv`).
    fn driver(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError>;

    /// The answering end (udp, raw: a standing responder that admits
    /// sessions; verbs: one session, through `rdv`).
    fn responder(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Self, OpenError>;

    /// What this end tells its peers.
    fn local(&self) -> Local {
        Local::None
    }

    /// Frames received and not used, for the operator (None: not counted).
    fn ignored(&self) -> Option<String> {
        None
    }

    /// Sessions this responder admitted.
    fn sessions_started(&self) -> u64 {
        0
    }

    /// The clock a link in virtual time runs on (None: real time).
    fn virtual_clock(&self) -> Option<VirtualClock> {
        None
    }
}
