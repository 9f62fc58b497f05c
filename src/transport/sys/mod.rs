//! Kernel-facing helpers of the datagram transports (the `phy/sys` layer).
//!
//! Thin wrappers over the system calls the UDP and raw Ethernet devices
//! make: socket addresses, `sendmsg`/`recvfrom`, socket options, `poll(2)`
//! ([`socket`]); AF_PACKET sockets, interface ioctls, the classic BPF
//! filter and the PACKET_MMAP receive ring ([`packet`]). No protocol logic
//! lives here: what a frame means is the datagram core's business
//! ([`super::dgram`]); these functions only move bytes and report what the
//! kernel said. Every `unsafe` block of the datagram transports is here,
//! each with the reason it holds.

pub mod packet;
pub mod socket;

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
