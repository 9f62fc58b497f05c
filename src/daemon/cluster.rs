//! The daemon's side of `cluster`: the members and peers from the
//! configuration's sources (hostlist, peers file, `[[peer]]`, topology),
//! the coverage-class names the segment publishes, and the resolver thread
//! that turns peer names into control addresses.
//!
//! Resolution never holds up the daemon: names resolve on a thread of
//! their own, each lookup with a deadline (`resolve_timeout_s`; the system
//! resolver has none of its own, so a lookup runs on a short-lived helper
//! thread that is abandoned at the deadline, at most a few at a time). A
//! name that does not resolve is logged once and tried again every
//! `resolve_retry_s`; until it resolves, its rounds find the peer
//! unreachable, as a dead one.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::config::{wants_transport, Config, PeerConfig};
use super::Shutdown;
use crate::cluster::peers::{ExplicitPeer, PeerSet, PeerSources};
use crate::cluster::rounds::{ClassId, Membership, ALL_GROUP, UNPLACED_GROUP};
use crate::cluster::topology::Topology;
use crate::transport::Kind;

/// One peer of this node, as the daemon runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Peer {
    pub name: String,
    /// Its member index in the membership.
    pub member: u32,
    /// The address a `[[peer]]` entry gives (else resolved by name).
    pub explicit: Option<SocketAddr>,
    /// Local interface toward it (raw Ethernet).
    pub interface: Option<String>,
    /// Transports asked for toward it, by name (None: the default).
    pub transports: Option<Vec<String>>,
}

impl Peer {
    /// Does the configuration ask for `kind` toward this peer?
    pub fn wants(&self, kind: Kind) -> bool {
        wants_transport(self.transports.as_deref(), self.interface.is_some(), kind)
    }
}

/// The cluster as this node sees it.
pub(super) struct ClusterPeers {
    pub membership: Membership,
    /// Every member but this node, sorted by name.
    pub peers: Vec<Peer>,
    /// The control port of peers resolved by name.
    pub port: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Peers(#[from] crate::cluster::peers::PeersError),
    #[error("{path}: {source}")]
    Topology {
        path: String,
        source: crate::cluster::topology::TopologyError,
    },
    #[error("{0}")]
    Schedule(#[from] crate::cluster::schedule::ScheduleError),
    #[error("{0} is not a member of the cluster: every node must list itself among the peers (the rounds are derived from the same list on every node)")]
    NotListed(String),
    #[error("{0} members: the segment maps at most {1} peers to their classes")]
    TooMany(usize, usize),
}

fn read(path: &Path) -> Result<String, ClusterError> {
    std::fs::read_to_string(path).map_err(|source| ClusterError::Read {
        path: path.display().to_string(),
        source,
    })
}

impl ClusterPeers {
    /// Read the configuration's sources. A `[[peer]]`-only configuration
    /// makes this node a member by itself (as before hostlists); with a
    /// hostlist or peers file this node must be listed.
    pub fn load(cfg: &Config, node: &str) -> Result<ClusterPeers, ClusterError> {
        let file = match &cfg.peers_file {
            Some(p) => Some((p.display().to_string(), read(p)?)),
            None => None,
        };
        let explicit: Vec<ExplicitPeer> = cfg
            .peers
            .iter()
            .map(|p| ExplicitPeer {
                name: p.name.clone(),
                address: p.address,
            })
            .collect();
        let sources = PeerSources {
            hostlist: cfg.hostlist.as_deref(),
            file: file.as_ref().map(|(n, t)| (n.as_str(), t.as_str())),
            explicit: &explicit,
            port: cfg.peer_port(),
            ..PeerSources::default()
        };
        // Names are resolved later, on the resolver thread.
        let set = PeerSet::build(&sources, node, |_| Err(String::new()))?;
        let listed = cfg.hostlist.is_some() || cfg.peers_file.is_some();
        if listed && !set.self_listed {
            return Err(ClusterError::NotListed(node.to_string()));
        }
        let mut members = set.members.clone();
        if !set.self_listed {
            members.push(node.to_string());
        }
        let max = netgauge::layout::MAX_MAP_PEERS;
        if members.len() > max {
            return Err(ClusterError::TooMany(members.len(), max));
        }
        let topology = match &cfg.topology_file {
            Some(p) => {
                let text = read(p)?;
                Some(
                    Topology::parse(&text).map_err(|source| ClusterError::Topology {
                        path: p.display().to_string(),
                        source,
                    })?,
                )
            }
            None => None,
        };
        let membership = match &topology {
            Some(t) => Membership::with_topology(&members, t)?,
            None => Membership::flat(&members)?,
        };
        let by_name = |n: &str| -> Option<&PeerConfig> { cfg.peers.iter().find(|p| p.name == n) };
        let peers = set
            .peers
            .iter()
            .map(|p| {
                let own = by_name(&p.name);
                Peer {
                    name: p.name.clone(),
                    member: membership.index_of(&p.name).unwrap_or(u32::MAX),
                    explicit: own.map(|o| o.address),
                    interface: own
                        .and_then(|o| o.interface.clone())
                        .or_else(|| own.is_none().then(|| cfg.interface.clone()).flatten()),
                    transports: own
                        .and_then(|o| o.transports.clone())
                        .or_else(|| own.is_none().then(|| cfg.transports.clone()).flatten()),
                }
            })
            .collect();
        Ok(ClusterPeers {
            membership,
            peers,
            port: cfg.peer_port(),
        })
    }
}

/// The segment name of a coverage class: `@` and its group (intra-switch)
/// or its two groups joined by `+`, `@c<id>` when that does not fit.
pub(super) fn class_name(m: &Membership, class: ClassId) -> String {
    let (i, j) = m.class_groups(class);
    let g = |x: u32| {
        let n = m.groups()[x as usize].name.as_str();
        match n {
            ALL_GROUP => "all",
            UNPLACED_GROUP => "unplaced",
            other => other,
        }
    };
    let name = if i == j {
        format!("@{}", g(i))
    } else {
        format!("@{}+{}", g(i), g(j))
    };
    let ok = name.len() <= netgauge::layout::PEER_MAX_BYTES
        && !name.bytes().any(|b| b == 0 || b.is_ascii_control());
    if ok {
        name
    } else {
        format!("@c{class}")
    }
}

/// The peers' control addresses as far as they are known.
pub(super) struct Addresses {
    table: Mutex<Vec<Option<SocketAddr>>>,
}

impl Addresses {
    /// Explicit addresses known at once, the rest to be resolved.
    pub fn new(peers: &[Peer]) -> Addresses {
        Addresses {
            table: Mutex::new(peers.iter().map(|p| p.explicit).collect()),
        }
    }

    pub fn get(&self, peer: usize) -> Option<SocketAddr> {
        self.lock().get(peer).copied().flatten()
    }

    fn set(&self, peer: usize, a: SocketAddr) {
        if let Some(x) = self.lock().get_mut(peer) {
            *x = Some(a);
        }
    }

    fn missing(&self) -> Vec<usize> {
        self.lock()
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_none())
            .map(|(i, _)| i)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<SocketAddr>>> {
        // Every writer leaves the table consistent.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Lookups abandoned at their deadline that have not returned yet: no
/// new lookup starts while this many are stuck.
const MAX_STUCK_LOOKUPS: usize = 4;

/// Resolve `name` at `port` within `deadline`. An IP literal needs no
/// lookup; anything else asks the system's resolver on a helper thread.
fn resolve_one(
    name: &str,
    port: u16,
    deadline: Duration,
    stuck: &Arc<AtomicUsize>,
) -> Result<SocketAddr, String> {
    if let Ok(ip) = name.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if stuck.load(Ordering::Relaxed) >= MAX_STUCK_LOOKUPS {
        return Err("earlier lookups still hang in the resolver".into());
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let host = name.to_string();
    let pending = stuck.clone();
    pending.fetch_add(1, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("ng-resolve".into())
        .spawn(move || {
            let r = (host.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| e.to_string())
                .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()));
            let _ = tx.send(r);
            pending.fetch_sub(1, Ordering::Relaxed);
        });
    if let Err(e) = spawned {
        stuck.fetch_sub(1, Ordering::Relaxed);
        return Err(format!("cannot start a lookup: {e}"));
    }
    match rx.recv_timeout(deadline) {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {deadline:?}")),
    }
}

/// Resolve every peer without an address, until all have one or
/// `shutdown`: a pass over the missing names, then `retry` of sleep.
pub(super) fn resolver_loop(
    peers: &[Peer],
    port: u16,
    addresses: &Addresses,
    timeout: Duration,
    retry: Duration,
    shutdown: &Shutdown,
) {
    let stuck = Arc::new(AtomicUsize::new(0));
    let mut failed_once = vec![false; peers.len()];
    loop {
        let missing = addresses.missing();
        if missing.is_empty() {
            tracing::debug!("every peer's address is known");
            return;
        }
        let mut resolved = 0;
        for i in missing {
            if shutdown.is_set() {
                return;
            }
            let p = &peers[i];
            match resolve_one(&p.name, port, timeout, &stuck) {
                Ok(a) => {
                    if failed_once[i] {
                        tracing::info!("{} resolves to {a} now", p.name);
                    }
                    addresses.set(i, a);
                    resolved += 1;
                }
                Err(why) if !failed_once[i] => {
                    failed_once[i] = true;
                    tracing::warn!(
                        "{} does not resolve ({why}); skipped until it does (tried every {retry:?})",
                        p.name
                    );
                }
                Err(why) => tracing::debug!("{} still does not resolve: {why}", p.name),
            }
        }
        if resolved > 0 {
            tracing::debug!("{resolved} peer address(es) resolved");
        }
        // Asleep until the next try, or the shutdown.
        if shutdown.wait(retry) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        let c: Config = toml::from_str(&format!("key_file = \"/k\"\n{text}")).unwrap();
        c.validate().unwrap();
        c
    }

    #[test]
    fn members_come_from_every_source_with_per_peer_settings() {
        let dir = std::env::temp_dir().join(format!("ngcluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("peers");
        std::fs::write(&file, "# more\nn[05-06]\n").unwrap();
        let topo = dir.join("topology.conf");
        std::fs::write(
            &topo,
            "SwitchName=s0 Nodes=n[01-03]\nSwitchName=s1 Nodes=n[04-06]\n",
        )
        .unwrap();
        let c = cfg(&format!(
            "peers = \"n[01-04]\"\npeers_file = \"{}\"\ntopology_file = \"{}\"\npeer_port = 7000\ninterface = \"eth1\"\ntransports = [\"raw\", \"udp\"]\n[[peer]]\nname = \"n03\"\naddress = \"10.0.0.3:7470\"\n",
            file.display(),
            topo.display()
        ));
        let cp = ClusterPeers::load(&c, "n02").unwrap();
        assert_eq!(cp.membership.len(), 6);
        let names: Vec<&str> = cp.peers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["n01", "n03", "n04", "n05", "n06"]);
        assert_eq!(cp.membership.groups().len(), 2);
        assert_eq!(cp.port, 7000);
        // The explicit entry keeps its address and the default transport
        // list (its own says nothing); listed peers get the defaults.
        let n03 = &cp.peers[1];
        assert_eq!(n03.explicit, Some("10.0.0.3:7470".parse().unwrap()));
        assert!(n03.wants(Kind::Udp) && !n03.wants(Kind::Raw));
        let n05 = &cp.peers[3];
        assert_eq!(n05.explicit, None);
        assert_eq!(n05.interface.as_deref(), Some("eth1"));
        assert!(n05.wants(Kind::Raw) && n05.wants(Kind::Udp));
        assert_eq!(cp.membership.name(n05.member), "n05");
        // Classes: two leaves.
        let m = &cp.membership;
        let (a, b) = (m.index_of("n01").unwrap(), m.index_of("n05").unwrap());
        assert_eq!(class_name(m, m.class_of(a, a)), "@s0");
        assert_eq!(class_name(m, m.class_of(a, b)), "@s0+s1");
        // A node missing from its own list is refused.
        assert!(matches!(
            ClusterPeers::load(&c, "n09"),
            Err(ClusterError::NotListed(_))
        ));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_peer_only_configuration_makes_this_node_a_member() {
        let c = cfg("[[peer]]\nname = \"b\"\naddress = \"10.0.0.2:7470\"\n");
        let cp = ClusterPeers::load(&c, "a").unwrap();
        assert_eq!(cp.membership.names(), ["a", "b"]);
        assert_eq!(class_name(&cp.membership, 0), "@all");
        let addrs = Addresses::new(&cp.peers);
        assert_eq!(addrs.get(0), Some("10.0.0.2:7470".parse().unwrap()));
    }

    #[test]
    fn names_resolve_with_a_deadline_and_literals_at_once() {
        let stuck = Arc::new(AtomicUsize::new(0));
        let d = Duration::from_secs(2);
        assert_eq!(
            resolve_one("10.1.2.3", 7470, d, &stuck),
            Ok("10.1.2.3:7470".parse().unwrap())
        );
        let a = resolve_one("localhost", 7470, d, &stuck).unwrap();
        assert!(a.ip().is_loopback() && a.port() == 7470, "{a}");
        assert!(resolve_one("no-such-host.invalid", 7470, d, &stuck).is_err());
        let peers = vec![Peer {
            name: "127.0.0.1".into(),
            member: 0,
            explicit: None,
            interface: None,
            transports: None,
        }];
        let addrs = Addresses::new(&peers);
        assert_eq!(addrs.get(0), None);
        let stop = Shutdown::new();
        resolver_loop(&peers, 9, &addrs, d, d, &stop);
        assert_eq!(addrs.get(0), Some("127.0.0.1:9".parse().unwrap()));
    }
}
