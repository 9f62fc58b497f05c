//! Network namespaces, veth pairs and raw frames for the tests that need
//! root. Such a test is declared with `root_test!` (`common/mod.rs`: it is
//! ignored, with the reason, unless the build script set `netns_tests` in
//! a build made as root) and calls [`require_root`] through
//! [`Netns::new`], so a build made as root but run by another user fails
//! with a clear message instead of passing without running. Every
//! namespace has a name unique to the process and is deleted on drop, also
//! when a test fails.
#![allow(dead_code)] // each test file uses its own part of the helpers

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use netgauged::transport::dgram::wire::Header;
use netgauged::transport::raw_eth::{frame_prefix, interface_info};
use netgauged::transport::sys::{packet, socket};

/// Panic with a clear message unless the process is root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test needs root (network namespaces, veth pairs, CAP_NET_RAW); it was built \
         to run because the build was made as root: run it as root, or build as another \
         user (or with NETGAUGED_NETNS_TESTS=0) to have it listed as ignored"
    );
}

/// Run `ip` with `args`; panic if it fails.
pub fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// A tbf shaper on `dev` of namespace `ns` (`op`: add, change or
/// replace): `rate`, a bucket of `burst`, 400 ms of queue.
pub fn tbf(ns: &str, dev: &str, op: &str, rate: &str, burst: &str) {
    ip(&[
        "netns", "exec", ns, "tc", "qdisc", op, "dev", dev, "root", "tbf", "rate", rate, "burst",
        burst, "latency", "400ms",
    ]);
}

/// A network namespace of its own, deleted on drop.
pub struct Netns(String);

impl Netns {
    /// A new namespace named `<prefix><pid>-<n>`. Needs root.
    pub fn new(prefix: &str) -> Netns {
        require_root();
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "{prefix}{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ip(&["netns", "add", &name]);
        Netns(name)
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// Run `f` on a thread inside the namespace; sockets it opens stay in
    /// the namespace wherever they are used later.
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::spawn(move || {
            let file = std::fs::File::open(&path).expect("open netns");
            // SAFETY: file is an open netns descriptor; setns affects only
            // this thread.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in netns")
    }

    /// The MAC address of `dev` in this namespace.
    pub fn mac(&self, dev: &'static str) -> [u8; 6] {
        self.run(move || interface_info(dev).expect("interface").mac)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// A veth pair `a_dev` (in `a`) — `b_dev` (in `b`), both up, with `mtu`.
pub fn veth(a: &Netns, a_dev: &str, b: &Netns, b_dev: &str, mtu: usize) {
    ip(&[
        "link", "add", a_dev, "netns", &a.0, "type", "veth", "peer", "name", b_dev, "netns", &b.0,
    ]);
    let mtu = mtu.to_string();
    for (ns, dev) in [(a, a_dev), (b, b_dev)] {
        ip(&["-n", &ns.0, "link", "set", dev, "mtu", &mtu, "up"]);
    }
}

/// A raw socket on one interface of a namespace that sends and receives
/// whole Ethernet frames, written by the test.
pub struct RawPort(OwnedFd);

impl RawPort {
    /// Send only (protocol 0: receives nothing).
    pub fn sender(ns: &Netns, dev: &'static str) -> RawPort {
        Self::open(ns, dev, 0)
    }

    /// Sends, and receives the frames of `ethertype` (not its own).
    pub fn of_type(ns: &Netns, dev: &'static str, ethertype: u16) -> RawPort {
        Self::open(ns, dev, ethertype)
    }

    fn open(ns: &Netns, dev: &'static str, protocol: u16) -> RawPort {
        ns.run(move || {
            let index = interface_info(dev).expect("interface").index;
            let sock = packet::open_socket().expect("AF_PACKET socket");
            packet::ignore_outgoing(sock.as_fd()).expect("PACKET_IGNORE_OUTGOING");
            packet::bind(sock.as_fd(), index, protocol).expect("bind");
            RawPort(sock)
        })
    }

    /// Send one whole frame.
    pub fn send(&self, frame: &[u8]) {
        let sent = socket::send_two(self.0.as_fd(), None, frame, &[]).expect("send");
        assert!(sent, "transmit queue full");
    }

    /// One received frame, if any is queued.
    pub fn recv<'b>(&self, buf: &'b mut [u8]) -> Option<&'b [u8]> {
        match socket::recv_from(self.0.as_fd(), buf, None).expect("recv") {
            Some(n) if n <= buf.len() => Some(&buf[..n]),
            _ => None,
        }
    }

    /// Wait up to `ms` milliseconds for a frame.
    pub fn wait(&self, ms: u64) {
        socket::wait_readable(self.0.as_fd(), std::time::Duration::from_millis(ms));
    }
}

/// A whole frame from `src` to `dst`: the Ethernet header, `h` and
/// `h.frag_len` payload bytes (zeros).
pub fn eth_frame(dst: &[u8; 6], src: &[u8; 6], h: &Header) -> Vec<u8> {
    let mut hdr = [0u8; netgauged::transport::dgram::wire::HEADER_LEN];
    h.encode(&mut hdr).expect("encode");
    let mut f = frame_prefix(dst, src, &hdr).to_vec();
    f.resize(f.len() + h.frag_len as usize, 0);
    f
}
