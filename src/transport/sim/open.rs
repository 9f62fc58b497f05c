//! How the link layer opens a simulated link (`crate::transport::open`):
//! the whole network runs in process, so there is no responder.

use super::SimTransport;
use crate::clock::VirtualClock;
use crate::transport::open::{LinkSpec, Open, OpenError, Rendezvous};

impl Open for SimTransport {
    fn driver(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        let sim = spec.options.sim.as_ref().ok_or(OpenError::Missing {
            kind: spec.kind,
            what: "model",
        })?;
        Ok(SimTransport::new(
            sim.params,
            VirtualClock::new(),
            sim.peers,
        ))
    }

    fn responder(spec: &LinkSpec, _: &mut dyn Rendezvous) -> Result<Self, OpenError> {
        Err(OpenError::NoResponder(spec.kind))
    }

    fn virtual_clock(&self) -> Option<VirtualClock> {
        Some(self.clock().clone())
    }
}
