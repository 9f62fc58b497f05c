//! The state file: the last good parameters of every (peer, transport), so a
//! restarted daemon fills the segment at once — flagged RESTORED, with
//! their original measurement time, until a re-check agrees. Each entry
//! keeps where it was measured ([`Provenance`]: this node's address, the
//! peer's address, and for raw Ethernet the interface and the peer's MAC);
//! an entry whose circumstances changed is not restored ([`restorable`]),
//! and the file names the node it belongs to. Written into the daemon's
//! own state directory under an unpredictable temporary name, fsynced,
//! then renamed over the old one: a crash leaves either the old or the new
//! file, never a torn one, and nothing planted at the name is written
//! through.

use std::ffi::OsStr;
use std::net::{IpAddr, SocketAddr};

use netgauge::files::Dir;
use netgauge::EntryData;
use serde::{Deserialize, Serialize};

use super::json_file::{self, JsonFile};

/// 2: entries carry their provenance (version 1 files are not restored).
const STATE_VERSION: u32 = 2;
/// Largest state file read back.
pub const MAX_STATE_BYTES: u64 = 256 << 20;

/// Where an entry was measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// This node's control-plane address then (the interface it probed
    /// from for udp).
    pub local: IpAddr,
    /// The peer's configured control-plane address then.
    pub peer_address: SocketAddr,
    /// raw: the local interface then.
    pub interface: Option<String>,
    /// raw: the MAC the peer announced then.
    pub peer_mac: Option<[u8; 6]>,
}

/// One stored entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Stored {
    pub provenance: Provenance,
    pub entry: EntryData,
}

/// The file: the node and its entries in the segment's own schema
/// (`EntryData`, whose non-finite values JSON keeps as null).
#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    node: String,
    entries: Vec<Stored>,
}

/// Why the state file could not be read or written.
pub type StateError = super::json_file::FileError;

fn state_file<'a>(dir: &'a Dir, name: &'a OsStr) -> JsonFile<'a> {
    JsonFile::new("state file", dir, name)
}

/// Write every entry, atomically, as file `name` of `dir`.
pub fn save(dir: &Dir, name: &OsStr, node: &str, entries: &[Stored]) -> Result<(), StateError> {
    let file = StateFile {
        version: STATE_VERSION,
        node: node.to_string(),
        entries: entries.to_vec(),
    };
    state_file(dir, name).save(&file, true, 0o600)
}

/// Read the entries back, with the node that wrote them. A missing file
/// is an empty state; a corrupt one, one of another version, or one that
/// is not the daemon's own private file is an error (the daemon logs it
/// and starts empty; the next save replaces it).
pub fn load(dir: &Dir, name: &OsStr) -> Result<(String, Vec<Stored>), StateError> {
    let f = state_file(dir, name);
    let Some(text) = f.read(MAX_STATE_BYTES)? else {
        return Ok((String::new(), Vec::new()));
    };
    let file: StateFile = json_file::parse(&text, STATE_VERSION, |v| {
        format!(
            "version {v} (this daemon writes {STATE_VERSION}, whose entries say where \
             they were measured); not restored"
        )
    })
    .map_err(|reason| f.invalid(reason))?;
    Ok((file.node, file.entries))
}

/// What the configuration says now of the peer an entry was measured
/// toward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerAt<'a> {
    /// A member peer: its configured address (None: resolved by name,
    /// checked when the peer is next met) and its interface (raw).
    Peer {
        address: Option<SocketAddr>,
        interface: Option<&'a str>,
    },
    /// A coverage class of this node (`@…`): no address of its own.
    Class,
}

/// Whether `s`, stored by node `stored_node`, may be restored by node
/// `node` listening on `local` toward `peer` (None: no longer a peer or
/// class of this node): the same node, from the same local address,
/// toward a peer at the same address, and for raw Ethernet over the same
/// interface (the peer's MAC, and a resolved peer's address, are checked
/// when the peer is next met). Else why not.
pub fn restorable(
    s: &Stored,
    stored_node: &str,
    node: &str,
    local: IpAddr,
    peer: Option<PeerAt<'_>>,
) -> Result<(), String> {
    if stored_node != node {
        return Err(format!(
            "measured by node {stored_node:?}, this is {node:?}"
        ));
    }
    let e = &s.entry;
    let Some(peer) = peer else {
        return Err("the peer is no longer configured".into());
    };
    let p = &s.provenance;
    if p.local != local {
        return Err(format!(
            "measured from {}, this node is now {local}",
            p.local
        ));
    }
    let PeerAt::Peer { address, interface } = peer else {
        return Ok(());
    };
    if let Some(a) = address.filter(|&a| a != p.peer_address) {
        return Err(format!(
            "measured toward {}, the peer is now at {a}",
            p.peer_address
        ));
    }
    let raw = e
        .transport
        .parse::<crate::transport::Kind>()
        .is_ok_and(|k| k.descriptor().endpoint == crate::transport::kind::PeerEndpoint::MacOnLink);
    if raw && (p.interface.is_none() || p.interface.as_deref() != interface || p.peer_mac.is_none())
    {
        return Err(format!(
            "measured over interface {:?}, the peer is now reached over {:?}",
            p.interface, interface
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::config::Config;

    /// What `cfg` says now of the peer `s` was measured toward.
    fn at<'a>(cfg: &'a Config, s: &Stored) -> Option<PeerAt<'a>> {
        cfg.peers
            .iter()
            .find(|p| p.name == s.entry.peer)
            .map(|p| PeerAt::Peer {
                address: Some(p.address),
                interface: p.interface.as_deref(),
            })
    }
    use crate::daemon::fixtures::entry;

    fn stored() -> Stored {
        Stored {
            provenance: Provenance {
                local: "10.0.0.1".parse().unwrap(),
                peer_address: "10.0.0.2:7470".parse().unwrap(),
                interface: None,
                peer_mac: None,
            },
            entry: entry(),
        }
    }

    fn scratch(tag: &str) -> (std::path::PathBuf, Dir) {
        crate::daemon::fixtures::scratch("ngstate", tag)
    }

    #[test]
    fn round_trip_keeps_every_value_and_nan() {
        let (dir, d) = scratch("rt");
        let name = OsStr::new("state.json");
        save(&d, name, "node01", &[stored()]).unwrap();
        let (node, back) = load(&d, name).unwrap();
        assert_eq!(node, "node01");
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].provenance, stored().provenance);
        let (a, b) = (&back[0].entry, entry());
        assert_eq!(a.ranges, b.ranges);
        assert_eq!(
            (a.eel_ns, a.S_bytes, a.curve.clone(), a.flags),
            (b.eel_ns, b.S_bytes, b.curve.clone(), b.flags)
        );
        assert!(a.o_min_ns.is_nan());
        // The file keeps the field names, NaN as null; only the daemon may
        // read it.
        let path = dir.join("state.json");
        let text = std::fs::read_to_string(&path).unwrap();
        for k in [
            "\"G_ns_per_byte\": 0.1",
            "\"o_min_ns\": null",
            "\"S_bytes\": 12288",
            "\"peer_address\": \"10.0.0.2:7470\"",
        ] {
            assert!(text.contains(k), "{k} in {text}");
        }
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn missing_is_empty_corrupt_old_or_planted_is_an_error() {
        let (dir, d) = scratch("bad");
        assert!(load(&d, OsStr::new("none.json")).unwrap().1.is_empty());
        std::fs::write(dir.join("bad.json"), b"{\"version\": 2, \"node\": ").unwrap();
        let e = load(&d, OsStr::new("bad.json")).unwrap_err().to_string();
        assert!(e.contains("not valid"), "{e}");
        std::fs::write(
            dir.join("v1.json"),
            b"{\"version\": 1, \"node\": \"a\", \"entries\": []}",
        )
        .unwrap();
        let e = load(&d, OsStr::new("v1.json")).unwrap_err().to_string();
        assert!(e.contains("version 1"), "{e}");
        // A link planted at the name is neither followed on load nor
        // written through on save.
        let victim = dir.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("link.json")).unwrap();
        assert!(load(&d, OsStr::new("link.json")).is_err());
        save(&d, OsStr::new("link.json"), "n", &[stored()]).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn only_what_was_measured_here_toward_the_same_peer_is_restored() {
        let cfg: Config = toml::from_str(
            "key_file = \"/k\"\n[[peer]]\nname = \"node02\"\naddress = \"10.0.0.2:7470\"\ninterface = \"eth1\"\n",
        )
        .unwrap();
        let here: IpAddr = "10.0.0.1".parse().unwrap();
        let s = stored();
        assert!(restorable(&s, "node01", "node01", here, at(&cfg, &s)).is_ok());
        // Another node's file, another local address.
        assert!(restorable(&s, "node01", "node09", here, at(&cfg, &s)).is_err());
        assert!(restorable(
            &s,
            "node01",
            "node01",
            "10.9.0.1".parse().unwrap(),
            at(&cfg, &s)
        )
        .is_err());
        // The peer moved.
        let mut moved = s.clone();
        moved.provenance.peer_address = "10.0.0.3:7470".parse().unwrap();
        assert!(restorable(&moved, "node01", "node01", here, at(&cfg, &moved)).is_err());
        // A peer no longer configured.
        let mut gone = s.clone();
        gone.entry.peer = "node03".into();
        assert!(restorable(&gone, "node01", "node01", here, at(&cfg, &gone)).is_err());
        // raw: the interface (and a MAC to check later) must be known.
        let mut raw = s.clone();
        raw.entry.transport = "raw".into();
        assert!(restorable(&raw, "node01", "node01", here, at(&cfg, &raw)).is_err());
        raw.provenance.interface = Some("eth1".into());
        raw.provenance.peer_mac = Some([2, 0, 0, 0, 0, 2]);
        assert!(restorable(&raw, "node01", "node01", here, at(&cfg, &raw)).is_ok());
        raw.provenance.interface = Some("eth0".into());
        assert!(restorable(&raw, "node01", "node01", here, at(&cfg, &raw)).is_err());
    }
}
