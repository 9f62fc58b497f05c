use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::cluster::hostlist::HostlistError;
use crate::cluster::peers::{
    parse_peers_file, ExplicitPeer, PeerSet, PeerSources, PeersError, Source,
};

fn table() -> HashMap<String, IpAddr> {
    (1..=6)
        .map(|i| {
            (
                format!("node{i}"),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, i as u8)),
            )
        })
        .collect()
}

fn resolver(t: &HashMap<String, IpAddr>) -> impl FnMut(&str) -> Result<IpAddr, String> + '_ {
    move |name| {
        t.get(name)
            .copied()
            .ok_or_else(|| format!("{name}: no such host"))
    }
}

/// A `[[peer]]` of the configuration.
fn explicit(name: &str, address: &str) -> ExplicitPeer {
    ExplicitPeer {
        name: name.into(),
        address: address.parse().unwrap(),
    }
}

#[test]
fn sources_merge_into_members_and_peers() {
    let file = "# the rest of the rack\nnode[4-6]\n\nlogin1   # head node\n";
    let explicit = [
        explicit("node2", "192.168.1.2:9000"),
        explicit("extra", "192.168.1.9:7470"),
    ];
    let sources = PeerSources {
        hostlist: Some("node[1-4]"),
        file: Some(("/etc/netgauged/peers", file)),
        explicit: &explicit,
        port: 7470,
        ..PeerSources::default()
    };
    let t = table();
    let set = PeerSet::build(&sources, "node1", resolver(&t)).unwrap();
    assert_eq!(
        set.members,
        ["extra", "login1", "node1", "node2", "node3", "node4", "node5", "node6"]
    );
    assert!(set.self_listed);
    let names: Vec<&str> = set.peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["extra", "login1", "node2", "node3", "node4", "node5", "node6"]
    );
    // An explicit entry gives a listed name its own address.
    let n2 = set.peer("node2").unwrap();
    assert_eq!(n2.address, Some("192.168.1.2:9000".parse().unwrap()));
    assert_eq!((n2.source, n2.explicit), (Source::Hostlist, Some(0)));
    // Others resolve at the configured port.
    let n5 = set.peer("node5").unwrap();
    assert_eq!(n5.address, Some(SocketAddr::from(([10, 0, 0, 5], 7470))));
    assert_eq!(n5.source, Source::File { line: 2 });
    assert_eq!(set.peer("node4").unwrap().source, Source::Hostlist);
    assert_eq!(
        set.peer("extra").unwrap().source,
        Source::Explicit { index: 1 }
    );
    // A name that does not resolve stays a member (the rounds are the
    // same on every node) and is reported.
    assert_eq!(set.peer("login1").unwrap().address, None);
    assert_eq!(
        set.unresolved,
        vec![("login1".to_string(), "login1: no such host".to_string())]
    );
    assert_eq!(set.members_expression(), "extra,login1,node[1-6]");
}

#[test]
fn explicit_peers_alone_keep_working() {
    let explicit = [explicit("b", "10.9.0.2:7470")];
    let sources = PeerSources {
        explicit: &explicit,
        ..PeerSources::default()
    };
    let set = PeerSet::build(&sources, "a", |_| Err("not asked".to_string())).unwrap();
    assert_eq!(set.members, ["b"]);
    assert!(!set.self_listed, "a node missing from the list is told so");
    assert_eq!(set.peers[0].address, Some("10.9.0.2:7470".parse().unwrap()));
    assert!(set.unresolved.is_empty());
}

#[test]
fn mistakes_are_named() {
    let t = table();
    let build = |s: &PeerSources<'_>| PeerSet::build(s, "node1", resolver(&t));
    assert_eq!(build(&PeerSources::default()), Err(PeersError::Empty));
    let e = build(&PeerSources {
        file: Some(("peers.txt", "node1\n\nnode[2-\n")),
        ..PeerSources::default()
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            PeersError::File {
                line: 3,
                source: HostlistError::Unbalanced { .. },
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("peers.txt line 3: "), "{e}");
    let twice = [explicit("x", "10.0.0.1:1"), explicit("x", "10.0.0.2:1")];
    assert_eq!(
        build(&PeerSources {
            explicit: &twice,
            ..PeerSources::default()
        }),
        Err(PeersError::ExplicitTwice("x".into()))
    );
    let long = format!("n{}", "x".repeat(63));
    assert_eq!(
        build(&PeerSources {
            hostlist: Some(&long),
            ..PeerSources::default()
        }),
        Err(PeersError::BadName(long.clone()))
    );
    assert!(matches!(
        build(&PeerSources {
            hostlist: Some("a[1-5]"),
            file: Some(("f", "b[1-5]")),
            max_hosts: 8,
            ..PeerSources::default()
        }),
        Err(PeersError::TooMany(8))
    ));
    assert!(matches!(
        build(&PeerSources {
            hostlist: Some("a[1-9:2]"),
            ..PeerSources::default()
        }),
        Err(PeersError::Hostlist(HostlistError::BadRange { .. }))
    ));
}

#[test]
fn peers_file_lines() {
    let got = parse_peers_file("f", "a[1-2] # two\n#x\n  b  \n", 100).unwrap();
    assert_eq!(
        got,
        vec![(1, "a1".into()), (1, "a2".into()), (3, "b".into())]
    );
    assert!(matches!(
        parse_peers_file("f", "a[1-3]\nb[1-3]\n", 5),
        Err(PeersError::File { line: 2, .. })
    ));
}
