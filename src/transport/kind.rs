//! The one list of transports: [`Kind`], with what each kind is and needs
//! ([`Descriptor`]). Everything that names a transport derives from it:
//! the CLI's and the configuration's names, the control protocol's
//! session kind, the segment's transport column, the verbs endpoint
//! record's kind byte, and the link layer's dispatch
//! (`crate::link::Link`), which [`with_kinds!`] generates from the same
//! list.
//!
//! Adding a transport is one new file that implements
//! [`Transport`](super::Transport) and [`Open`](super::open::Open), plus
//! one line in the list below (and the file's `mod` line).

use std::fmt;
use std::str::FromStr;

/// The list of transports, one line each:
/// `Variant module::Type [cargo feature] = descriptor`. The order is the
/// control protocol's encoding of a kind (bincode's variant index): new
/// kinds go at the end.
///
/// Invokes `$callback!` with the list, so the link layer generates its
/// dispatch from the same lines.
macro_rules! with_kinds {
    ($callback:ident) => {
        $callback! {
            Udp udp::UdpTransport = kind("udp", "UDP datagrams (unprivileged)").endpoint(Port).daemon().daemon_fanout();
            Raw raw_eth::RawEthTransport = kind("raw", "Raw Ethernet (AF_PACKET, needs CAP_NET_RAW)").privilege("CAP_NET_RAW").endpoint(MacOnLink).daemon().daemon_fanout();
            Rdma rdma_write::RdmaWriteTransport ["verbs"] = kind("rdma", "One-sided RDMA write (verbs; needs --device)").one_sided().device().endpoint(QueuePair { record: 1 }).daemon().daemon_fanout();
            Msg verbs_msg::VerbsMsgTransport ["verbs"] = kind("msg", "Two-sided \"Myrinet-style\" verbs messages with eager/rendezvous").device().endpoint(QueuePair { record: 2 }).daemon().rendezvous().credit();
            Mpi mpi::MpiTransport ["mpi"] = kind("mpi", "MPI point-to-point (build with `--features mpi`, run under mpirun)").mpirun().rendezvous();
            Sim sim::SimTransport = kind("sim", "The LogGP(S)/LogfP model in virtual time, for ground truth (--model)").rendezvous();
        }
    };
}
pub(crate) use with_kinds;

/// What a peer must tell a driver before a link to it can open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEndpoint {
    /// Nothing: the model runs in process (sim), or the peers are the
    /// ranks of the job (mpi).
    None,
    /// A port at the peer's address (udp: its responder's UDP port).
    Port,
    /// The MAC address of the peer's responder on a link this node has an
    /// interface on.
    MacOnLink,
    /// A verbs queue pair (QPN, PSN, GID, buffer), exchanged per session
    /// through a rendezvous; `record` is the kind's code in the endpoint
    /// record.
    QueuePair { record: u8 },
}

/// What one kind of transport is and needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// The name the CLI, the configuration and the segment use.
    pub name: &'static str,
    /// One line for the CLI's help.
    pub summary: &'static str,
    /// The cargo feature the kind is built with (None: always).
    pub feature: Option<&'static str>,
    /// One-sided (RDMA write): the target's CPU takes no part, o_r = 0.
    pub one_sided: bool,
    /// The receiver pays a measurable receive overhead o_r.
    pub recv_overhead: bool,
    /// A capability opening it needs (raw sockets: CAP_NET_RAW).
    pub privilege: Option<&'static str>,
    /// It needs an RDMA device (whose waits poll user-space memory).
    pub device: bool,
    /// It runs under mpirun, every rank of the job a peer.
    pub mpirun: bool,
    /// The daemon probes its peers over it.
    pub daemon: bool,
    /// The daemon runs its LogfP fan-out (one link to each of several
    /// peers at once) over it.
    pub daemon_fanout: bool,
    /// What a peer must tell a driver.
    pub endpoint: PeerEndpoint,
    /// It may switch to a rendezvous protocol above some size (LogGPS S).
    pub rendezvous: bool,
    /// Credit-based flow control: a window of messages passes at once, the
    /// rest as credits return.
    pub credit: bool,
}

/// The descriptor every list line starts from: two-sided, with a receive
/// overhead, needing nothing, not run by the daemon.
pub const fn kind(name: &'static str, summary: &'static str) -> Descriptor {
    Descriptor {
        name,
        summary,
        feature: None,
        one_sided: false,
        recv_overhead: true,
        privilege: None,
        device: false,
        mpirun: false,
        daemon: false,
        daemon_fanout: false,
        endpoint: PeerEndpoint::None,
        rendezvous: false,
        credit: false,
    }
}

/// A builder method per capability flag: `.device()` sets `device`.
macro_rules! set_flags {
    ($($flag:ident),*) => {
        $(
            pub const fn $flag(mut self) -> Self {
                self.$flag = true;
                self
            }
        )*
    };
}

impl Descriptor {
    pub const fn one_sided(mut self) -> Self {
        self.one_sided = true;
        self.recv_overhead = false;
        self
    }
    pub const fn privilege(mut self, capability: &'static str) -> Self {
        self.privilege = Some(capability);
        self
    }
    set_flags!(device, mpirun, daemon, daemon_fanout, rendezvous, credit);
    pub const fn endpoint(mut self, e: PeerEndpoint) -> Self {
        self.endpoint = e;
        self
    }
    const fn feature(mut self, feature: Option<&'static str>) -> Self {
        self.feature = feature;
        self
    }
}

macro_rules! define_kinds {
    ($( $variant:ident $module:ident :: $ty:ident $([$feature:literal])? = $desc:expr; )*) => {
        /// A kind of transport (see the module documentation).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum Kind {
            $( $variant, )*
        }

        impl Kind {
            /// Every kind, in the list's order (compiled in or not).
            pub const ALL: &'static [Kind] = &[$( Kind::$variant, )*];

            /// What this kind is and needs.
            pub const fn descriptor(self) -> Descriptor {
                use PeerEndpoint::*;
                match self {
                    $( Kind::$variant => $desc.feature(first_feature(&[$($feature)?])), )*
                }
            }

            /// Whether this build has the kind.
            pub const fn built(self) -> bool {
                match self {
                    $( Kind::$variant => true $( && cfg!(feature = $feature) )?, )*
                }
            }
        }
    };
}

const fn first_feature(f: &[&'static str]) -> Option<&'static str> {
    match f {
        [x, ..] => Some(*x),
        [] => None,
    }
}

with_kinds!(define_kinds);

impl Kind {
    pub const fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// The kinds the daemon probes its peers over.
    pub fn daemon_kinds() -> impl Iterator<Item = Kind> {
        Kind::ALL.iter().copied().filter(|k| k.descriptor().daemon)
    }

    /// The kinds whose peers provide the same endpoint data as `self`,
    /// named together ("rdma/msg"), for messages about what they need.
    pub fn with_same_endpoint(self) -> String {
        let class = |k: Kind| std::mem::discriminant(&k.descriptor().endpoint);
        Kind::ALL
            .iter()
            .filter(|k| class(**k) == class(self))
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The kind whose verbs endpoint record carries `code`.
    pub fn of_record(code: u8) -> Option<Kind> {
        Kind::ALL
            .iter()
            .copied()
            .find(|k| k.descriptor().endpoint == PeerEndpoint::QueuePair { record: code })
    }

    /// This kind's code in a verbs endpoint record (None: not a queue pair).
    pub fn record(self) -> Option<u8> {
        match self.descriptor().endpoint {
            PeerEndpoint::QueuePair { record } => Some(record),
            _ => None,
        }
    }

    /// `Err` naming the missing cargo feature when this build lacks the kind.
    pub fn check_built(self) -> Result<(), NotBuilt> {
        match (self.built(), self.descriptor().feature) {
            (false, Some(feature)) => Err(NotBuilt {
                kind: self.name(),
                feature,
            }),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a transport.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown transport {name:?} (known: {})", known(|_| true))]
pub struct UnknownKind {
    pub name: String,
}

/// The names of the kinds `which` selects, comma-separated.
pub fn known(which: impl Fn(Kind) -> bool) -> String {
    Kind::ALL
        .iter()
        .filter(|k| which(**k))
        .map(|k| k.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Kind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Kind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownKind { name: s.into() })
    }
}

/// A kind this build does not have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: built without the `{feature}` feature (rebuild with `cargo build --features {feature}`)")]
pub struct NotBuilt {
    pub kind: &'static str,
    pub feature: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for &k in Kind::ALL {
            assert!(seen.insert(k.name()), "{k:?}");
            assert_eq!(k.name().parse::<Kind>().unwrap(), k);
            assert!(k.name().len() <= netgauge::layout::TRANSPORT_MAX_BYTES);
        }
        let e = "tcp".parse::<Kind>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown transport \"tcp\" (known: udp, raw, rdma, msg, mpi, sim)"
        );
    }

    #[test]
    fn the_control_protocol_encoding_is_the_list_order() {
        // bincode (fixint, little endian) writes a unit variant as its
        // index: the order the control protocol has always used.
        for (i, name) in ["udp", "raw", "rdma", "msg", "mpi", "sim"]
            .iter()
            .enumerate()
        {
            let k: Kind = name.parse().unwrap();
            let b = bincode::serialize(&k).unwrap();
            assert_eq!(b, (i as u32).to_le_bytes(), "{name}");
        }
    }

    #[test]
    fn descriptors_say_what_each_kind_needs() {
        let d = |k: Kind| k.descriptor();
        assert_eq!(
            Kind::daemon_kinds().collect::<Vec<_>>(),
            [Kind::Udp, Kind::Raw, Kind::Rdma, Kind::Msg]
        );
        assert!(d(Kind::Rdma).one_sided && !d(Kind::Rdma).recv_overhead);
        assert!(d(Kind::Msg).recv_overhead && d(Kind::Msg).device);
        assert_eq!(d(Kind::Raw).privilege, Some("CAP_NET_RAW"));
        assert_eq!(d(Kind::Mpi).feature, Some("mpi"));
        assert_eq!(d(Kind::Sim).feature, None);
        assert_eq!(Kind::Rdma.with_same_endpoint(), "rdma/msg");
        assert_eq!(Kind::of_record(2), Some(Kind::Msg));
        assert_eq!(Kind::Udp.record(), None);
        assert!(Kind::Udp.built() && Kind::Sim.built());
        assert_eq!(Kind::Mpi.built(), cfg!(feature = "mpi"));
        if !cfg!(feature = "mpi") {
            let e = Kind::Mpi.check_built().unwrap_err().to_string();
            assert!(e.contains("without the `mpi` feature"), "{e}");
        }
    }
}
