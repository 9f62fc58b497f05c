//! The control server when its process is out of descriptors. A test
//! binary of its own: RLIMIT_NOFILE belongs to the whole process, and is
//! lowered here.
//!
//! Out of descriptors, an accept fails (EMFILE) while the listener stays
//! readable. The server then evicts an unauthenticated connection (the
//! oldest of the source with the most pending) to give a descriptor back,
//! so a stranger's flood cannot keep a real peer out, and with nothing to
//! evict it rests the listener instead of waking poll(2) at once, again
//! and again.

mod common;
mod hostile;

use std::fs::File;
use std::net::TcpStream;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use hostile::*;
use netgauged::control::{ConnConfig, Connection, Hello, Msg};
use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// The highest descriptor this process has open.
fn highest_fd() -> u64 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap_or(2)
}

/// The stat file of this process's thread named `name`, opened now so it
/// can be read when no descriptor is left.
fn thread_stat(name: &str) -> File {
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return File::open(e.path().join("stat")).unwrap();
        }
    }
    panic!("no thread named {name}");
}

/// CPU time (user + system, in clock ticks) in a thread's stat file.
fn ticks(stat: &File) -> u64 {
    let mut b = [0u8; 1024];
    let n = stat.read_at(&mut b, 0).unwrap();
    let line = std::str::from_utf8(&b[..n]).unwrap();
    // The fields after the command's closing parenthesis; utime and stime
    // are the 14th and 15th of the line.
    let f: Vec<&str> = line[line.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Opens /dev/null until the process is out of descriptors.
fn fill_descriptors() -> Vec<File> {
    let mut held = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(f) => held.push(f),
            Err(e) if e.raw_os_error() == Some(libc::EMFILE) => return held,
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn out_of_descriptors_a_floods_oldest_makes_room_and_the_listener_rests() {
    // Deadlines long enough that only eviction ends a connection here.
    let server = evicting_echo_server(1024, 1024);
    let addr = server.local_addr();
    // The oldest from one source (a peer mid-handshake), then three from
    // another (a flood).
    let idle: Vec<TcpStream> = ["127.0.0.3", "127.0.0.2", "127.0.0.2", "127.0.0.2"]
        .iter()
        .map(|src| {
            let s = connect_from(Some(src.parse().unwrap()), addr).unwrap();
            // Accepted (not just queued) before the next one.
            std::thread::sleep(Duration::from_millis(20));
            s
        })
        .collect();
    let preauth = thread_stat("ctl-preauth");
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    setrlimit(Resource::RLIMIT_NOFILE, highest_fd() + 8, hard).unwrap();
    let mut held = fill_descriptors();

    // One descriptor free: a stranger's connect takes it, and the server
    // has none to accept it with. It evicts the oldest connection of the
    // source with the most pending (the flood's), not the oldest of all.
    held.pop();
    let newcomer = TcpStream::connect(addr).unwrap();
    let gone = |s: &TcpStream| {
        wait_for(Duration::from_secs(2), || closed_by_server(s).then_some(())).is_some()
    };
    assert!(gone(&idle[1]), "the flood's oldest was not evicted");
    assert!(
        !closed_by_server(&idle[0]),
        "the lone source's connection was evicted"
    );
    assert!(
        !idle[2..].iter().any(closed_by_server),
        "a newer one was evicted"
    );
    assert_eq!(server.counters().snapshot().evicted, 1);

    // A real peer (its socket, the server's accept, the server's copy of
    // the authenticated connection) gets in the same way.
    held.truncate(held.len().saturating_sub(3));
    let mut c = Connection::connect(addr, "srv", &ConnConfig::new("peer", key())).unwrap();
    let hello = Msg::Hello(Hello {
        node: "peer".into(),
        generation: 1,
        nonce: 2,
        time_unix_ns: 3,
    });
    let deadline = Instant::now() + Duration::from_secs(2);
    assert!(matches!(c.request(&hello, deadline), Ok(Msg::Hello(_))));
    drop(c);

    // Nothing left to evict, and no descriptor: the listener rests. A
    // server that polled it at once again and again would spend most of
    // a core on it; one that rests, almost nothing.
    drop((idle, newcomer));
    // The server closes those as it reads their ends: take every
    // descriptor it gives back until none comes for 50 ms.
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let more = fill_descriptors();
        if more.is_empty() {
            break;
        }
        held.extend(more);
    }
    held.pop();
    let _queued = TcpStream::connect(addr).unwrap();
    held.extend(fill_descriptors());
    let evicted = server.counters().snapshot().evicted;
    // SAFETY: sysconf reads a configuration value; no memory is passed.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let before = ticks(&preauth);
    std::thread::sleep(Duration::from_secs(1));
    let spent = ticks(&preauth) - before;
    assert!(
        spent < ticks_per_s * 4 / 10,
        "the server thread spent {spent} of {ticks_per_s} ticks in 1 s with nothing it could accept"
    );
    // It had nothing to evict (else the count would have grown).
    assert_eq!(server.counters().snapshot().evicted, evicted);
    drop(held);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
}
