use netgauge::{flags, EntryData, RangeData};

use crate::cluster::matrix::{group_matrix, node_matrix, summarize, transports, NodeView};

fn entry(peer: &str, transport: &str, eel: f64, g_per_byte: f64) -> EntryData {
    EntryData {
        peer: peer.into(),
        transport: transport.into(),
        ranges: vec![
            RangeData {
                from_bytes: 1,
                to_bytes: 1024,
                g_ns: 500.0,
                G_ns_per_byte: 2.0 * g_per_byte,
                ..Default::default()
            },
            RangeData {
                from_bytes: 1025,
                to_bytes: 65536,
                g_ns: 900.0,
                G_ns_per_byte: g_per_byte,
                ..Default::default()
            },
        ],
        eel_ns: eel,
        flags: flags::VALID,
        measured_unix_ns: 7,
        ..Default::default()
    }
}

#[test]
fn a_view_is_the_own_entries_and_the_class_for_the_rest() {
    let entries = vec![
        entry("b", "udp", 9000.0, 0.1),
        entry("@leaf1", "udp", 12000.0, 0.2),
        entry("@leaf1", "raw", 11000.0, 0.2),
    ];
    let map = vec![
        ("b".to_string(), "@leaf1".to_string()),
        ("c".to_string(), "@leaf1".to_string()),
    ];
    let v = summarize(&entries, &map);
    let keys: Vec<(&str, &str, Option<&str>)> = v
        .iter()
        .map(|e| (e.peer.as_str(), e.transport.as_str(), e.class.as_deref()))
        .collect();
    assert_eq!(
        keys,
        vec![
            ("b", "raw", Some("@leaf1")),
            ("b", "udp", None),
            ("c", "raw", Some("@leaf1")),
            ("c", "udp", Some("@leaf1")),
        ]
    );
    let b = &v[1];
    assert_eq!((b.eel_ns, b.g_ns, b.G_ns_per_byte), (9000.0, 500.0, 0.1));
    assert_eq!(b.bandwidth_bytes_per_s(), Some(1e10));
    assert_eq!(b.flags & flags::CLASS, 0);
    assert_ne!(v[3].flags & flags::CLASS, 0);
    assert_eq!(v[3].eel_ns, 12000.0);
}

#[test]
fn the_node_and_group_matrices() {
    let view = |node: &str, peers: &[(&str, f64)]| NodeView {
        node: node.into(),
        entries: summarize(
            &peers
                .iter()
                .map(|&(p, eel)| entry(p, "udp", eel, 0.1))
                .collect::<Vec<_>>(),
            &[],
        ),
    };
    // a, b on leaf x; c on leaf y; d never answered.
    let views = vec![
        view("a", &[("b", 1.0), ("c", 10.0), ("d", 20.0)]),
        view("b", &[("a", 3.0), ("c", 12.0)]),
        view("c", &[("a", 11.0), ("b", 13.0)]),
    ];
    assert_eq!(transports(&views), vec!["udp".to_string()]);
    let m = node_matrix(&views, "udp");
    assert_eq!(m.rows, ["a", "b", "c", "d"]);
    assert_eq!(m.cell(0, 1).unwrap().eel_ns, 1.0);
    assert_eq!(m.cell(1, 0).unwrap().eel_ns, 3.0);
    assert_eq!(m.cell(0, 3).unwrap().eel_ns, 20.0);
    assert!(m.cell(3, 0).is_none(), "d's own view was not gathered");
    assert!(m.cell(2, 2).is_none());
    assert_eq!(m.filled(), 7);
    assert_eq!(node_matrix(&views, "raw").filled(), 0);
    let g = group_matrix(&m, |n| if n == "c" { "y".into() } else { "x".into() });
    assert_eq!(g.rows, ["x", "y"]);
    // x→x: a→b 1, b→a 3, a→d 20: median 3, three pairs.
    let xx = g.cell(0, 0).unwrap();
    assert_eq!((xx.eel_ns, xx.pairs), (3.0, 3));
    // x→y: 10, 12 → 11; y→x: 11, 13 → 12.
    assert_eq!(g.cell(0, 1).unwrap().eel_ns, 11.0);
    assert_eq!(g.cell(1, 0).unwrap().eel_ns, 12.0);
    assert!(g.cell(1, 1).is_none());
}
