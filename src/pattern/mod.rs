//! Measurement procedures, written once over [`Transport`](crate::transport::Transport)
//! and [`Clock`](crate::clock::Clock): PRTT(n,d,s) client and mirror server,
//! the 1:P−P:1 fan-out, bandwidth-sharing conflicts (k flows out of and
//! into this node at once), and (over [`AllRanks`](crate::transport::AllRanks))
//! the all-ranks exchange.

pub mod conflict;
pub mod exchange;
pub mod fanout;
pub mod overlap;
pub mod prtt;
