//! netgauged: continuous, non-intrusive LogGP/LogGPS/LogfP measurement.
//!
//! Data flows one way: transport → pattern → samples → model fit → publish.
//! See docs/ARCHITECTURE.md.

pub mod clock;
pub mod cluster;
pub mod control;
pub mod daemon;
pub mod export;
pub mod link;
pub mod model;
pub mod ops;
pub mod pattern;
pub mod predict;
pub mod probe;
pub mod publish;
pub mod report;
pub mod sweep;
pub mod transport;
#[cfg(feature = "verbs")]
pub mod verbs;
