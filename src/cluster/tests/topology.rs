use crate::cluster::hostlist::{HostlistError, RangeProblem};
use crate::cluster::topology::{logical_lines, Topology, TopologyError, TopologyProblem};

const TREE: &str = "\
# two leaves under one top switch
SwitchName=s0 Nodes=node[01-32]
SwitchName=s1 Nodes=node[33-64] LinkSpeed=100
SwitchName=top Switches=s[0-1]
";

#[test]
fn leaves_and_tree() {
    let t = Topology::parse(TREE).unwrap();
    assert_eq!(t.leaf_of("node05").unwrap().name, "s0");
    assert_eq!(t.leaf_of("node40").unwrap().name, "s1");
    assert!(t.leaf_of("node65").is_none());
    assert_eq!(t.node_count(), 64);
    let leaves: Vec<&str> = t.leaves().map(|s| s.name.as_str()).collect();
    assert_eq!(leaves, ["s0", "s1"]);
    let roots: Vec<&str> = t.roots().map(|s| s.name.as_str()).collect();
    assert_eq!(roots, ["top"]);
    let top = t.switch("top").unwrap();
    assert_eq!(top.line, 4);
    assert_eq!(top.children.len(), 2);
    assert!(!top.is_leaf());
    assert_eq!(t.switch("s1").unwrap().parents, vec![2]);
    assert_eq!(t.switch("s1").unwrap().line, 3);
}

#[test]
fn slurm_syntax_details() {
    // Case-insensitive keys, quoted values, comments, a continued line
    // (trailing blanks after the backslash), an escaped '#', a switch with
    // several parents, an empty leaf and blank lines.
    let text = "switchname=s0 \\  \n   nodes=\"a[1-2],b1\"   # first leaf\n\
                \n\
                SWITCHNAME=s1 Nodes=c1 linkspeed=\\#5\n\
                SwitchName=spare\n\
                SwitchName=x Switches=s0,s1\n\
                SwitchName=y Switches=s[0-1]\n";
    let t = Topology::parse(text).unwrap();
    assert_eq!(t.switch("s0").unwrap().nodes, ["a1", "a2", "b1"]);
    assert_eq!(t.switch("s0").unwrap().line, 1);
    assert_eq!(t.switch("s1").unwrap().line, 4);
    assert_eq!(t.switch("s0").unwrap().parents.len(), 2);
    assert_eq!(t.leaves().count(), 2, "the empty switch is not a group");
    assert_eq!(t.roots().count(), 3);
    // Logical lines keep the number of their first physical line.
    let lines = logical_lines("a=1 \\\n b=2\n# only a comment\nc=3 \\\\\nd=\\\\4\n");
    assert_eq!(
        lines,
        vec![
            (1, "a=1  b=2".to_string()),
            (4, "c=3 \\".to_string()),
            (5, "d=\\4".to_string())
        ]
    );
}

fn problem(text: &str) -> (usize, TopologyProblem) {
    match Topology::parse(text) {
        Err(TopologyError { line, problem }) => (line, problem),
        Ok(_) => panic!("{text:?} parsed"),
    }
}

#[test]
fn mistakes_are_named_with_their_line() {
    use TopologyProblem as P;
    let cases = [
        ("", (0, P::NoSwitches)),
        ("# nothing\n\n", (0, P::NoSwitches)),
        (
            "SwitchName=s0 Nodes=a1\nSwitchName=s1 Foo=1\n",
            (2, P::UnknownKey("Foo".into())),
        ),
        ("Nodes=a1\n", (1, P::NoSwitchName)),
        (
            "SwitchName=s0 Nodes=a1 nodes=a2\n",
            (1, P::DuplicateKey("nodes".into())),
        ),
        (
            "SwitchName=s0 Nodes=a1\nSwitchName=s[1-2] Nodes=b1\n",
            (2, P::SwitchNameList("s[1-2]".into())),
        ),
        (
            "SwitchName=s0 Nodes=a1 Switches=s1\n",
            (1, P::NodesAndSwitches("s0".into())),
        ),
        (
            "SwitchName=s0 Nodes=a1\n\nSwitchName=s0 Nodes=a2\n",
            (
                3,
                P::DuplicateSwitch {
                    name: "s0".into(),
                    first_line: 1,
                },
            ),
        ),
        (
            "SwitchName=s0 Nodes=a1\nSwitchName=top Switches=s[0-1]\n",
            (
                2,
                P::UnknownSwitch {
                    name: "top".into(),
                    child: "s1".into(),
                },
            ),
        ),
        (
            "SwitchName=s0 Nodes=a[1-4]\nSwitchName=s1 \\\n Nodes=a[4-5]\n",
            (
                2,
                P::NodeOnTwoLeaves {
                    node: "a4".into(),
                    first: "s0".into(),
                    first_line: 1,
                    second: "s1".into(),
                },
            ),
        ),
        (
            "SwitchName=a Switches=b\nSwitchName=b Switches=c\nSwitchName=c Switches=a\n",
            (1, P::Cycle(vec!["a".into(), "b".into(), "c".into()])),
        ),
        ("SwitchName=a Switches=a\n", (1, P::Cycle(vec!["a".into()]))),
        ("SwitchName=s0 Nodes=\"a1\n", (1, P::Quote)),
        ("SwitchName=s0 Nodes\n", (1, P::Syntax("Nodes".into()))),
        ("SwitchName=s0 Nodes=\n", (1, P::Syntax("Nodes=".into()))),
    ];
    for (text, want) in cases {
        assert_eq!(problem(text), want, "{text:?}");
    }
    match problem("SwitchName=s0\nSwitchName=s1 Nodes=a[3-1]\n") {
        (
            2,
            TopologyProblem::Hostlist {
                key: "Nodes",
                source:
                    HostlistError::BadRange {
                        problem: RangeProblem::Reversed,
                        ..
                    },
            },
        ) => {}
        other => panic!("{other:?}"),
    }
    // An even number of backslashes does not continue the line.
    assert_eq!(problem("SwitchName=s0 Nodes=a1 \\\\\n Nodes=a2\n").0, 1);
    let e = Topology::parse("SwitchName=s0 Nodes=a1 Foo=1").unwrap_err();
    assert_eq!(
        e.to_string(),
        "topology.conf line 1: unknown parameter \"Foo\" (known: SwitchName, Nodes, Switches, LinkSpeed)"
    );
}

#[test]
fn node_count_is_bounded() {
    assert_eq!(
        problem_max(
            "SwitchName=s0 Nodes=a[1-6]\nSwitchName=s1 Nodes=b[1-6]\n",
            10
        ),
        (2, TopologyProblem::TooManyNodes(10))
    );
    assert!(Topology::parse_max("SwitchName=s0 Nodes=a[1-10]\n", 10).is_ok());
}

fn problem_max(text: &str, max: usize) -> (usize, TopologyProblem) {
    let e = Topology::parse_max(text, max).unwrap_err();
    (e.line, e.problem)
}
