//! Helpers of the adversary tests: scratch directories, daemons as child
//! processes, and the attacker (many unauthenticated connections in four
//! patterns).
#![allow(dead_code)] // each test file uses its own part

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use netgauged::control::{ClusterKey, ConnConfig, Connection, ControlServer, Msg, ServerConfig};

pub const NETGAUGED: &str = env!("CARGO_BIN_EXE_netgauged");
pub const NGCTL_PATH: &str = env!("CARGO_BIN_EXE_ngctl");

/// The cluster key of these tests (random bytes, in hex).
pub const KEY_HEX: &str = "8f1dc2075ea933f061bb029c47d8157ae428906bcf1153a63ef7840d69b225c8";

pub fn key() -> ClusterKey {
    let b: Vec<u8> = (0..KEY_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&KEY_HEX[i..i + 2], 16).unwrap())
        .collect();
    ClusterKey::from_bytes(&b).unwrap()
}

/// An echo server on 127.0.0.1 whose pre-authentication table holds at
/// most `max_pending` connections, `per_source` of one source address,
/// with handshake deadlines (10 s) long enough that only eviction ends a
/// pending connection while a test looks.
pub fn evicting_echo_server(max_pending: usize, per_source: usize) -> ControlServer {
    let mut scfg = ServerConfig::new("srv", key());
    scfg.max_pending = max_pending;
    scfg.max_pending_per_source = per_source;
    scfg.timeouts.first_byte = Duration::from_secs(10);
    scfg.timeouts.handshake = Duration::from_secs(10);
    ControlServer::bind("127.0.0.1:0", scfg, |_: &str, m: Msg| Some(m)).unwrap()
}

/// A scratch directory (mode 0755, this user's) removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("ngadv-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        Scratch(p)
    }
    pub fn at(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    /// The cluster key file (0600).
    pub fn key_file(&self) -> PathBuf {
        let k = self.at("key");
        if !k.exists() {
            std::fs::write(&k, KEY_HEX).unwrap();
            std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        k
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Poll `f` every 50 ms for up to `limit`: a bound so a broken daemon fails
/// the test instead of hanging it.
pub fn wait_for<T>(limit: Duration, f: impl FnMut() -> Option<T>) -> Option<T> {
    crate::common::daemon::wait_every(Duration::from_millis(50), limit, f)
}

/// A netgauged process (killed on drop) and its log.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    /// Start `netgauged --config cfg` (inside namespace `ns` if given).
    pub fn start(ns: Option<&str>, cfg: &Path, args: &[&str], log: &Path) -> Daemon {
        let out = std::fs::File::create(log).unwrap();
        let mut c = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, NETGAUGED]);
                c
            }
            None => Command::new(NETGAUGED),
        };
        let child = c
            .arg("--config")
            .arg(cfg)
            .args(args)
            .env("RUST_LOG", "netgauged=debug")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("spawn netgauged");
        Daemon {
            child,
            log: log.to_path_buf(),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if it ends within `limit`.
    pub fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        wait_for(limit, || self.child.try_wait().ok().flatten())
    }

    /// SIGTERM; how long until it exited (panics past 10 s).
    pub fn sigterm(&mut self) -> (Duration, std::process::ExitStatus) {
        let t = Instant::now();
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let st = self
            .exit_within(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("no exit 10 s after SIGTERM:\n{}", self.log()));
        (t.elapsed(), st)
    }

    /// A field of /proc/<pid>/status (Threads, VmRSS in kB, …).
    pub fn proc_field(&self, field: &str) -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A daemon configuration: node `node` listening on `listen`, with its
/// runtime and state directories under `dir`, and `peers` (name,
/// address).
pub fn daemon_config(
    dir: &Path,
    node: &str,
    listen: SocketAddr,
    udp_port: u16,
    peers: &[(&str, SocketAddr)],
    extra: &str,
) -> PathBuf {
    let key = dir.join("key");
    if !key.exists() {
        std::fs::write(&key, KEY_HEX).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let mut t = format!(
        "node = \"{node}\"\nlisten = \"{listen}\"\nudp_port = {udp_port}\n\
         runtime_dir = \"{}\"\nstate_dir = \"{}\"\nkey_file = \"{}\"\nlock_memory = false\n{extra}\n",
        dir.join(format!("run-{node}")).display(),
        dir.join(format!("state-{node}")).display(),
        key.display()
    );
    for (name, addr) in peers {
        t.push_str(&format!(
            "[[peer]]\nname = \"{name}\"\naddress = \"{addr}\"\n"
        ));
    }
    let p = dir.join(format!("{node}.toml"));
    std::fs::write(&p, t).unwrap();
    p
}

/// A loopback port nobody listens on right now, as an address.
pub fn free_loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// [`daemon_config`] of node "n1" alone on loopback: free control and UDP
/// ports, one peer "p1" at a port nobody serves, no re-check or fan-out
/// for an hour. The configuration's path and the control address.
pub fn lone_daemon_config(dir: &Path) -> (PathBuf, SocketAddr) {
    let listen = free_loopback();
    let cfg = daemon_config(
        dir,
        "n1",
        listen,
        free_port(),
        &[("p1", free_loopback())],
        "recheck_interval_s = 3600.0\nfanout_interval_s = 0",
    );
    (cfg, listen)
}

/// Its segment path.
pub fn segment_of(dir: &Path, node: &str) -> PathBuf {
    dir.join(format!("run-{node}")).join("segment")
}

// ---------------------------------------------------------------------
// The attacker: many connections, four patterns.

/// What the attacker did.
#[derive(Default, Debug)]
pub struct AttackStats {
    /// Connections opened.
    pub opened: AtomicU64,
    /// Connections the server closed or reset.
    pub closed: AtomicU64,
}

/// The four patterns of unauthenticated connections.
#[derive(Clone, Copy, Debug)]
enum Pattern {
    /// Connects and sends nothing.
    Idle,
    /// Trickles a hello, one byte every 50 ms.
    Slow,
    /// Sends 64 random bytes.
    Garbage,
    /// Replays a captured client hello (valid tag, old nonce).
    Replay,
}

/// A non-blocking connect from `source` (any if None) to `target`.
pub fn connect_from(source: Option<IpAddr>, target: SocketAddr) -> Option<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(t) = target else {
        return None;
    };
    // SAFETY: a plain socket(2) call; the descriptor is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is fresh and owned by nobody else.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    let sa = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    if let Some(IpAddr::V4(src)) = source {
        let a = sa(src, 0);
        // SAFETY: a valid sockaddr_in of `len` bytes.
        if unsafe { libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), len) } != 0 {
            return None;
        }
    }
    // Closing resets (no TIME_WAIT): thousands of re-opens from one
    // address must not run out of ports.
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid linger struct of its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    let a = sa(*t.ip(), t.port());
    // SAFETY: a valid sockaddr_in of `len` bytes.
    let rc = unsafe { libc::connect(fd, (&a as *const libc::sockaddr_in).cast(), len) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINPROGRESS) {
        return None;
    }
    Some(s)
}

/// Whether the server closed or reset `s` (a peek that says so).
pub fn closed_by_server(s: &TcpStream) -> bool {
    let mut b = [0u8; 256];
    match s.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => {
            // A server hello (replay): consume it.
            let _ = (&*s).read(&mut b);
            false
        }
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::NotConnected
        ),
    }
}

/// One pattern's connections, re-opened as soon as the server closes them.
fn attack_pattern(
    p: Pattern,
    n: usize,
    source: Option<IpAddr>,
    target: SocketAddr,
    hello: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    stats: Arc<AttackStats>,
) {
    struct Slot {
        s: TcpStream,
        sent: usize,
        last: Instant,
    }
    let mut slots: Vec<Option<Slot>> = (0..n).map(|_| None).collect();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (p as u64);
    while !stop.load(Ordering::Relaxed) {
        for slot in &mut slots {
            let Some(x) = slot else {
                if let Some(s) = connect_from(source, target) {
                    stats.opened.fetch_add(1, Ordering::Relaxed);
                    *slot = Some(Slot {
                        s,
                        sent: 0,
                        last: Instant::now(),
                    });
                }
                continue;
            };
            if closed_by_server(&x.s) {
                stats.closed.fetch_add(1, Ordering::Relaxed);
                *slot = None;
                continue;
            }
            match p {
                Pattern::Idle => {}
                Pattern::Slow => {
                    if x.sent < hello.len() && x.last.elapsed() >= Duration::from_millis(50) {
                        if let Ok(k) = (&x.s).write(&hello[x.sent..x.sent + 1]) {
                            x.sent += k;
                        }
                        x.last = Instant::now();
                    }
                }
                Pattern::Garbage => {
                    if x.sent == 0 {
                        let mut junk = [0u8; 64];
                        for b in &mut junk {
                            seed ^= seed << 13;
                            seed ^= seed >> 7;
                            seed ^= seed << 17;
                            *b = seed as u8;
                        }
                        if let Ok(k) = (&x.s).write(&junk) {
                            x.sent = k;
                        }
                    }
                }
                Pattern::Replay => {
                    if x.sent < hello.len() {
                        if let Ok(k) = (&x.s).write(&hello[x.sent..]) {
                            x.sent += k;
                        }
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// `conns` unauthenticated connections to `target` from `source`, a
/// quarter of each pattern, inside namespace `netns` if given; until
/// `stop`.
pub fn attack(
    target: SocketAddr,
    source: Option<IpAddr>,
    conns: usize,
    hello: Vec<u8>,
    netns: Option<String>,
    stop: Arc<AtomicBool>,
) -> (Vec<JoinHandle<()>>, Arc<AttackStats>) {
    let stats = Arc::new(AttackStats::default());
    let hello = Arc::new(hello);
    let threads = [
        Pattern::Idle,
        Pattern::Slow,
        Pattern::Garbage,
        Pattern::Replay,
    ]
    .into_iter()
    .map(|p| {
        let (hello, stop, stats, netns) =
            (hello.clone(), stop.clone(), stats.clone(), netns.clone());
        std::thread::spawn(move || {
            if let Some(ns) = netns {
                use std::os::fd::AsRawFd;
                let f = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("netns");
                // SAFETY: setns on an open netns descriptor; affects this
                // thread only.
                assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
            }
            attack_pattern(p, conns / 4, source, target, hello, stop, stats);
        })
    })
    .collect();
    (threads, stats)
}

/// The bytes of a genuine client hello from `node` to `to`, captured on
/// the wire (what an eavesdropper replays).
pub fn capture_hello(node: &str, to: &str) -> Vec<u8> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let (node, to) = (node.to_string(), to.to_string());
    let client = std::thread::spawn(move || {
        let mut cc = ConnConfig::new(&node, key());
        cc.timeouts.handshake = Duration::from_millis(300);
        let _ = Connection::connect(addr, &to, &cc);
    });
    let (mut s, _) = l.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
    s.read_exact(&mut body).unwrap();
    drop(s);
    client.join().unwrap();
    let mut f = prefix.to_vec();
    f.extend_from_slice(&body);
    f
}
