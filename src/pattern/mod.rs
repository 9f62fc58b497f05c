//! Measurement procedures, written once over [`Transport`](crate::transport::Transport)
//! and [`Clock`](crate::clock::Clock): PRTT(n,d,s) client and mirror server,
//! and the 1:P−P:1 fan-out.

pub mod fanout;
pub mod prtt;
