//! The cluster's members and this node's peers, from the sources the
//! daemon reads:
//! - a hostlist expression (`peers = "node[001-128,130]"`);
//! - a peers file: one hostlist expression or host per line, `#` comments,
//!   blank lines ignored (the caller reads the file; this parses its text);
//! - explicit entries (`[[peer]]` with a name and an address): they keep
//!   working alone, and beside a hostlist they give a listed name its own
//!   address (an override).
//!
//! Names from all sources are merged (a name listed twice is one member).
//! The members, sorted, are what every node derives the probing rounds
//! from, so they include this node and every name whether it resolves here
//! or not: a name that does not resolve stays a member (its rounds come and
//! are skipped), and is reported in [`PeerSet::unresolved`].
//!
//! Resolution is the caller's: a name becomes an address through the
//! resolver function given to [`PeerSet::build`] (the daemon passes one
//! that asks the system's resolver; tests pass a table), at the configured
//! control port.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use super::hostlist::{self, HostlistError};

/// Longest peer name: what a segment entry holds.
pub const NAME_MAX_BYTES: usize = netgauge::layout::PEER_MAX_BYTES;

/// An explicit `[[peer]]`: a name and its control address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExplicitPeer {
    pub name: String,
    pub address: SocketAddr,
}

/// Where a member's name came from (the first source that named it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Hostlist,
    /// The peers file, at this line (1-based).
    File {
        line: usize,
    },
    /// `[[peer]]` number `index` (0-based, in the caller's order).
    Explicit {
        index: usize,
    },
}

/// A peer of this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    /// The control address, or None when the name did not resolve.
    pub address: Option<SocketAddr>,
    pub source: Source,
    /// The `[[peer]]` entry that gives this peer its address, if any.
    pub explicit: Option<usize>,
}

/// What the peer set is built from.
#[derive(Clone, Copy, Debug)]
pub struct PeerSources<'a> {
    /// A hostlist expression.
    pub hostlist: Option<&'a str>,
    /// The peers file: its name (for errors) and its text.
    pub file: Option<(&'a str, &'a str)>,
    pub explicit: &'a [ExplicitPeer],
    /// Control port of peers named without an address.
    pub port: u16,
    /// Bound on the names each expression may expand to.
    pub max_hosts: usize,
}

impl Default for PeerSources<'_> {
    fn default() -> Self {
        Self {
            hostlist: None,
            file: None,
            explicit: &[],
            port: 7470,
            max_hosts: hostlist::DEFAULT_MAX_HOSTS,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeersError {
    #[error("peers: {0}")]
    Hostlist(HostlistError),
    #[error("{file} line {line}: {source}")]
    File {
        file: String,
        line: usize,
        source: HostlistError,
    },
    #[error("peer name {0:?}: 1 to {NAME_MAX_BYTES} bytes")]
    BadName(String),
    #[error("[[peer]] {0:?} is listed twice")]
    ExplicitTwice(String),
    #[error("more than {0} peers in all")]
    TooMany(usize),
    #[error("no peers: give a hostlist, a peers file or [[peer]] entries")]
    Empty,
}

/// The members of the cluster and the peers of this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerSet {
    /// Every member, this node included when listed, sorted and distinct:
    /// the list the rounds are derived from (the same on every node).
    pub members: Vec<String>,
    /// Every member but this node, sorted by name.
    pub peers: Vec<Peer>,
    /// Whether this node's own name is among the members (a node that is
    /// not cannot take part in the rounds).
    pub self_listed: bool,
    /// Peers whose name did not resolve, with the resolver's reason.
    pub unresolved: Vec<(String, String)>,
}

/// The names of a peers file: (line, name) in file order.
pub fn parse_peers_file(
    file: &str,
    text: &str,
    max_hosts: usize,
) -> Result<Vec<(usize, String)>, PeersError> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let left = max_hosts.saturating_sub(out.len());
        let names = hostlist::expand_max(line, left).map_err(|source| PeersError::File {
            file: file.to_string(),
            line: i + 1,
            source,
        })?;
        out.extend(names.into_iter().map(|n| (i + 1, n)));
    }
    Ok(out)
}

impl PeerSet {
    /// Merge the sources; resolve the names without an explicit address
    /// with `resolve` (its error text is kept for the report), at
    /// `sources.port`. This node (`self_name`) is a member but not a peer.
    pub fn build(
        sources: &PeerSources<'_>,
        self_name: &str,
        mut resolve: impl FnMut(&str) -> Result<IpAddr, String>,
    ) -> Result<PeerSet, PeersError> {
        let mut named: BTreeMap<String, Source> = BTreeMap::new();
        let mut add = |name: String, source: Source| -> Result<(), PeersError> {
            if name.is_empty() || name.len() > NAME_MAX_BYTES {
                return Err(PeersError::BadName(name));
            }
            named.entry(name).or_insert(source);
            if named.len() > sources.max_hosts {
                return Err(PeersError::TooMany(sources.max_hosts));
            }
            Ok(())
        };
        if let Some(expr) = sources.hostlist {
            for n in hostlist::expand_max(expr, sources.max_hosts).map_err(PeersError::Hostlist)? {
                add(n, Source::Hostlist)?;
            }
        }
        if let Some((file, text)) = sources.file {
            for (line, n) in parse_peers_file(file, text, sources.max_hosts)? {
                add(n, Source::File { line })?;
            }
        }
        let mut explicit: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, p) in sources.explicit.iter().enumerate() {
            if explicit.insert(p.name.as_str(), index).is_some() {
                return Err(PeersError::ExplicitTwice(p.name.clone()));
            }
            add(p.name.clone(), Source::Explicit { index })?;
        }
        if named.is_empty() {
            return Err(PeersError::Empty);
        }
        let self_listed = named.contains_key(self_name);
        let mut unresolved = Vec::new();
        let mut peers = Vec::with_capacity(named.len());
        for (name, &source) in &named {
            if name == self_name {
                continue;
            }
            let explicit = explicit.get(name.as_str()).copied();
            let address = match explicit {
                Some(i) => Some(sources.explicit[i].address),
                None => match resolve(name) {
                    Ok(ip) => Some(SocketAddr::new(ip, sources.port)),
                    Err(why) => {
                        unresolved.push((name.clone(), why));
                        None
                    }
                },
            };
            peers.push(Peer {
                name: name.clone(),
                address,
                source,
                explicit,
            });
        }
        Ok(PeerSet {
            members: named.into_keys().collect(),
            peers,
            self_listed,
            unresolved,
        })
    }

    /// The peer named `name`.
    pub fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.peers[i])
    }

    /// The members as one hostlist expression (for logs and status).
    pub fn members_expression(&self) -> String {
        hostlist::compress(&self.members)
    }
}
