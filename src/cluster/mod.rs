//! Cluster scale: who the peers are, and when each pair of nodes is probed.
//!
//! This layer is pure logic over explicit inputs (text, names, time): no
//! clock, no I/O, no threads. The daemon reads its files and the time and
//! calls it; the simulator drives the same code in virtual time.
//!
//! - [`hostlist`] — Slurm hostlist expressions (`node[001-128,130]`),
//!   bounded expansion and compression for display.
//! - [`topology`] — Slurm `topology.conf` (tree plugin): the leaf switch of
//!   every node, the switch groups, the tree.
//! - [`peers`] — the members and this node's peers from a hostlist, a
//!   peers file and explicit `[[peer]]` entries; names become addresses
//!   through a resolver the caller gives.
//! - [`rounds`] — rounds of disjoint pairs that every node derives alone
//!   from the sorted members, the switch groups and the time: coverage
//!   rounds (a representative pair per switch group and per pair of
//!   groups) interleaved with the full mesh's round-robin tournament.
//! - [`jobs`] — jobs, costs, plans, outcomes and the token bucket.
//! - [`schedule`] — one node's part in a round: drive, serve or skip, full
//!   sweep or cheap re-check, a token bucket charged before a job runs.
//! - [`node`] — the schedule a daemon holds ([`schedule::Schedule`]) and
//!   its status.
//! - [`matrix`] — a node's published view reduced to EEL, g and G, and
//!   the N×N (or group×group) matrix of many nodes' views.
//! - [`recheck`] — whether a re-check agrees with the entry it checks, and
//!   whether a full sweep's data show a disturbed link or host.
//! - [`sim`] — the cluster in virtual time over the `sim` transport's
//!   measured session costs (`bench/cluster_sim.rs`, `bench/cluster.md`).
//!
//! Data flows one way: peers/topology → membership → rounds → schedule;
//! the schedule says which session to run, the daemon runs it through the
//! link layer and reports the outcome back to the schedule.

pub mod hostlist;
pub mod jobs;
pub mod matrix;
pub mod node;
pub mod peers;
pub mod recheck;
pub mod rounds;
pub mod schedule;
pub mod sim;
pub mod topology;

#[cfg(test)]
mod tests;
