//! The link layer: open a driver or a responder for a [`LinkSpec`], and
//! answer PRTT rounds on it until a [`ServePolicy`] says stop. The daemon,
//! `ngctl` and the MPI probe all open their links here.
//!
//! Layering: above the transports (whose [`Open`] impls it dispatches to
//! by [`Kind`], from the one list in `transport::kind`) and the patterns
//! (the responder runs `pattern::prtt::serve`); below the probe, the
//! daemon and the CLI's operations. A verbs session's endpoints travel
//! through an abstract [`Rendezvous`] that the caller brings (the daemon's
//! control connection, `ngctl`'s TCP side channel): nothing here knows the
//! control plane.
//!
//! [`Link`] is an enum over the transports, not a trait object: a probe
//! loop over it pays one predictable branch per call, as with the host
//! clock.

mod responder;
mod sessions;
mod wait;

pub use responder::{serve, Ended, ServePolicy, Served};
pub use sessions::{serve_sessions, SessionEvent};
pub use wait::SpinThenYield;

use std::time::Duration;

use crate::clock::VirtualClock;
use crate::transport::kind::with_kinds;
pub use crate::transport::kind::Kind;
pub use crate::transport::open::{
    LinkOptions, LinkSpec, Local, NoRendezvous, Open, OpenError, Peer, QpEndpoint, Rendezvous,
    SimSpec, VerbsParams,
};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

macro_rules! define_link {
    ($( $variant:ident $module:ident :: $ty:ident $([$feature:literal])? = $desc:expr; )*) => {
        /// An open link of any kind.
        // A handful exist at a time; boxing the larger variants would put a
        // pointer chase into every probe call.
        #[allow(clippy::large_enum_variant)]
        pub enum Link {
            $( $( #[cfg(feature = $feature)] )? $variant(crate::transport::$module::$ty), )*
        }

        /// Check that this node can open `spec.kind` (device, privileges).
        pub fn check(spec: &LinkSpec) -> Result<(), OpenError> {
            match spec.kind {
                $(
                    $( #[cfg(feature = $feature)] )?
                    Kind::$variant => <crate::transport::$module::$ty as Open>::check(spec),
                    $( #[cfg(not(feature = $feature))] Kind::$variant => Err(not_built(spec.kind)), )?
                )*
            }
        }

        /// Open one end of `spec` (verbs: through `rdv`).
        fn open(spec: &LinkSpec, rdv: &mut dyn Rendezvous, role: Role) -> Result<Link, OpenError> {
            spec.kind.check_built()?;
            Ok(match spec.kind {
                $(
                    $( #[cfg(feature = $feature)] )?
                    Kind::$variant => Link::$variant(match role {
                        Role::Driver => <crate::transport::$module::$ty as Open>::driver(spec, rdv)?,
                        Role::Responder => <crate::transport::$module::$ty as Open>::responder(spec, rdv)?,
                    }),
                    $( #[cfg(not(feature = $feature))] Kind::$variant => return Err(not_built(spec.kind)), )?
                )*
            })
        }

        /// `$e` with `$t` bound to the transport inside `$link`, whatever
        /// its kind: the one match every delegating method is.
        macro_rules! each {
            ($link:expr, $t:ident => $e:expr) => {
                match $link {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant($t) => $e, )*
                }
            };
        }

        impl Link {
            pub fn kind(&self) -> Kind {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(_) => Kind::$variant, )*
                }
            }
            /// What this end tells its peers.
            pub fn local(&self) -> Local {
                each!(self, t => Open::local(t))
            }
            /// Frames received and not used (None: the transport does not count them).
            pub fn ignored(&self) -> Option<String> {
                each!(self, t => Open::ignored(t))
            }
            /// Sessions this responder admitted.
            pub fn sessions_started(&self) -> u64 {
                each!(self, t => Open::sessions_started(t))
            }
            /// The clock of a link in virtual time (None: real time).
            pub fn virtual_clock(&self) -> Option<VirtualClock> {
                each!(self, t => Open::virtual_clock(t))
            }
        }

        impl Transport for Link {
            fn caps(&self) -> Caps {
                each!(self, t => t.caps())
            }
            #[inline]
            fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
                each!(self, t => t.send(peer, bytes, meta))
            }
            #[inline]
            fn recv(&mut self, from: Option<PeerId>, timeout: Duration) -> Result<Received, TransportError> {
                each!(self, t => t.recv(from, timeout))
            }
            fn counters(&self) -> Counters {
                each!(self, t => t.counters())
            }
        }
    };
}

with_kinds!(define_link);

/// Which end of a link.
#[derive(Clone, Copy)]
enum Role {
    Driver,
    Responder,
}

/// Open the driving end of `spec` (verbs: through `rdv`).
pub fn open_driver(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Link, OpenError> {
    open(spec, rdv, Role::Driver)
}

/// Open the answering end of `spec` (verbs: through `rdv`).
pub fn open_responder(spec: &LinkSpec, rdv: &mut dyn Rendezvous) -> Result<Link, OpenError> {
    open(spec, rdv, Role::Responder)
}

/// The error of a kind this build lacks.
#[allow(dead_code)] // unused when every feature is on
fn not_built(kind: Kind) -> OpenError {
    match kind.check_built() {
        Err(e) => e.into(),
        Ok(()) => OpenError::NoResponder(kind),
    }
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Link({})", self.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn sim_opens_in_virtual_time_and_has_no_responder() {
        let mut spec = LinkSpec::new(Kind::Sim);
        assert!(matches!(
            open_driver(&spec, &mut NoRendezvous),
            Err(OpenError::Missing { what: "model", .. })
        ));
        spec.options.sim = Some(SimSpec {
            params: "L=1000,o=200,g=300,G=0.1".parse().unwrap(),
            peers: 3,
        });
        let l = open_driver(&spec, &mut NoRendezvous).unwrap();
        assert_eq!((l.kind(), l.caps().peers), (Kind::Sim, 3));
        assert!(l.virtual_clock().is_some());
        assert!(matches!(
            open_responder(&spec, &mut NoRendezvous),
            Err(OpenError::NoResponder(Kind::Sim))
        ));
    }

    #[test]
    fn a_kind_this_build_lacks_says_which_feature() {
        for &k in Kind::ALL.iter().filter(|k| !k.built()) {
            let e = open_driver(&LinkSpec::new(k), &mut NoRendezvous).unwrap_err();
            assert!(matches!(e, OpenError::NotBuilt(_)), "{k}: {e}");
            assert!(check(&LinkSpec::new(k)).is_err());
        }
    }

    /// A UDP responder (its `Open` impl: a `Link` holds the sim too and
    /// does not cross threads) and a driver opened through the link layer:
    /// the caps follow the kind's descriptor, and the one responder
    /// answers until its stop flag is set.
    #[test]
    fn udp_through_the_link_layer() {
        use crate::transport::udp::UdpTransport;
        let mut spec = LinkSpec::new(Kind::Udp);
        spec.options.listen = Some("127.0.0.1:0".parse().unwrap());
        let mut server = UdpTransport::responder(&spec, &mut NoRendezvous).unwrap();
        let Local::Addr(addr) = Open::local(&server) else {
            panic!("no address")
        };
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let srv = s.spawn(|| {
                let mut p = ServePolicy::new(Duration::from_millis(20));
                p.stop = Some(&stop);
                serve(&mut server, p)
            });
            let mut d = LinkSpec::new(Kind::Udp);
            d.peer = Peer::Addr(addr);
            let mut l = open_driver(&d, &mut NoRendezvous).unwrap();
            let c = l.caps();
            let desc = Kind::Udp.descriptor();
            assert_eq!(
                (c.one_sided, c.has_recv_overhead),
                (desc.one_sided, desc.recv_overhead)
            );
            let ask = crate::transport::Meta {
                answer: true,
                report_ns: 0,
            };
            l.send(0, 100, ask).unwrap();
            let r = l.recv(Some(0), Duration::from_secs(2)).unwrap();
            assert_eq!(r.bytes, 100);
            stop.store(true, Ordering::Relaxed);
            let served = srv.join().unwrap().unwrap();
            assert_eq!((served.ended, served.stats.answers), (Ended::Shutdown, 1));
        });
    }
}
