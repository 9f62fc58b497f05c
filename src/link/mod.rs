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

        impl Link {
            pub fn kind(&self) -> Kind {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(_) => Kind::$variant, )*
                }
            }
            /// What this end tells its peers.
            pub fn local(&self) -> Local {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => Open::local(t), )*
                }
            }
            /// Frames received and not used (None: the transport does not count them).
            pub fn ignored(&self) -> Option<String> {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => Open::ignored(t), )*
                }
            }
            /// Sessions this responder admitted.
            pub fn sessions_started(&self) -> u64 {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => Open::sessions_started(t), )*
                }
            }
            /// The clock of a link in virtual time (None: real time).
            pub fn virtual_clock(&self) -> Option<VirtualClock> {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => Open::virtual_clock(t), )*
                }
            }
        }

        impl Transport for Link {
            fn caps(&self) -> Caps {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => t.caps(), )*
                }
            }
            #[inline]
            fn send(&mut self, peer: PeerId, bytes: usize, meta: Meta) -> Result<(), TransportError> {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => t.send(peer, bytes, meta), )*
                }
            }
            #[inline]
            fn recv(&mut self, from: Option<PeerId>, timeout: Duration) -> Result<Received, TransportError> {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => t.recv(from, timeout), )*
                }
            }
            fn counters(&self) -> Counters {
                match self {
                    $( $( #[cfg(feature = $feature)] )? Link::$variant(t) => t.counters(), )*
                }
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
