//! Without the `verbs` feature: the interface of `verbs.rs`, with no device
//! ever opening (the daemon logs one line and keeps its other transports).

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::config::VerbsConfig;
use super::{JobError, Tx};
use crate::clock::HostClock;
use crate::control::{Connection, TransportKind, VerbsEndpoint};
use crate::transport::{Caps, Counters, Meta, PeerId, Received, Transport, TransportError};

/// No verbs device can exist in this build.
pub enum Node {}

impl Node {
    pub fn open(_: &VerbsConfig, _: u64, _: HostClock) -> Result<Node, String> {
        Err("this netgauged was built without the `verbs` feature".into())
    }
}

pub enum Link {}

impl Transport for Link {
    fn caps(&self) -> Caps {
        match *self {}
    }
    fn send(&mut self, _: PeerId, _: usize, _: Meta) -> Result<(), TransportError> {
        match *self {}
    }
    fn recv(&mut self, _: Option<PeerId>, _: Duration) -> Result<Received, TransportError> {
        match *self {}
    }
    fn counters(&self) -> Counters {
        match *self {}
    }
}

pub fn link(
    node: &Node,
    _: &mut Connection,
    _: &str,
    _: &str,
    _: u64,
    _: Tx,
) -> Result<Link, JobError> {
    match *node {}
}

pub enum Serving {}

pub fn answer(s: &Serving, _: TransportKind, _: &VerbsEndpoint) -> Result<VerbsEndpoint, String> {
    match *s {}
}

pub fn spawn_responder(
    node: Arc<Node>,
    _: Arc<AtomicU64>,
    _: Arc<AtomicBool>,
    _: Option<usize>,
    _: impl Fn(u64) + Send + 'static,
) -> std::io::Result<(Serving, JoinHandle<()>)> {
    match *node {}
}
