use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};

use crate::cluster::hostlist::{
    compress, expand, expand_max, HostlistError, RangeProblem, DEFAULT_MAX_HOSTS,
};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn expands_slurm_expressions() {
    assert_eq!(
        expand("node[001-003,130]").unwrap(),
        names(&["node001", "node002", "node003", "node130"])
    );
    assert_eq!(
        expand("rack[1-2]-node[01-02]").unwrap(),
        names(&[
            "rack1-node01",
            "rack1-node02",
            "rack2-node01",
            "rack2-node02"
        ])
    );
    assert_eq!(
        expand(" login1 , node[8-10]").unwrap(),
        names(&["login1", "node8", "node9", "node10"])
    );
    assert_eq!(expand("[08-10]").unwrap(), names(&["08", "09", "10"]));
    assert_eq!(expand("n[0-1]x").unwrap(), names(&["n0x", "n1x"]));
    assert_eq!(expand("a.b_c-1").unwrap(), names(&["a.b_c-1"]));
    assert_eq!(
        expand("n[7, 9-10]").unwrap(),
        names(&["n7", "n9", "n10"]),
        "blanks around ranges are allowed"
    );
}

fn problem(expr: &str) -> RangeProblem {
    match expand(expr) {
        Err(HostlistError::BadRange { problem, .. }) => problem,
        other => panic!("{expr}: expected a bad range, got {other:?}"),
    }
}

#[test]
fn refuses_what_slurm_does_not_mean() {
    assert_eq!(expand(""), Err(HostlistError::Empty));
    assert_eq!(expand("  "), Err(HostlistError::Empty));
    // Each refusal names where in the expression it is.
    type Refusal = fn(String) -> HostlistError;
    let cases: [(&str, Refusal); 7] = [
        ("node[1-3", |expr| HostlistError::Unbalanced { expr, at: 4 }),
        ("node1-3]", |expr| HostlistError::Unbalanced { expr, at: 7 }),
        ("n[[1]]", |expr| HostlistError::Nested { expr, at: 2 }),
        ("a,,b", |expr| HostlistError::EmptyHost { expr, at: 2 }),
        ("a,", |expr| HostlistError::EmptyHost { expr, at: 2 }),
        ("a b", |expr| HostlistError::BadChar {
            expr,
            ch: ' ',
            at: 1,
        }),
        ("n[1]#", |expr| HostlistError::BadChar {
            expr,
            ch: '#',
            at: 4,
        }),
    ];
    for (expr, want) in cases {
        assert_eq!(expand(expr), Err(want(expr.to_string())), "{expr:?}");
    }
    for (expr, want) in [
        ("n[]", RangeProblem::Empty),
        ("n[1,,2]", RangeProblem::Empty),
        ("n[3-1]", RangeProblem::Reversed),
        ("n[1-9:2]", RangeProblem::Step),
        ("n[1-9/2]", RangeProblem::Step),
        ("n[001-1000]", RangeProblem::Width),
        ("n[01-9]", RangeProblem::Width),
        ("n[1-010]", RangeProblem::Width),
        ("n[1234567890123456789]", RangeProblem::TooLong),
        ("n[a-b]", RangeProblem::NotANumber),
        ("n[-5]", RangeProblem::NotANumber),
        ("n[1-2-3]", RangeProblem::NotANumber),
    ] {
        assert_eq!(problem(expr), want, "{expr:?}");
    }
    let e = expand("n[1-9:2]").unwrap_err().to_string();
    assert!(e.contains("not Slurm hostlist syntax"), "{e}");
}

#[test]
fn expansion_is_bounded_before_anything_is_expanded() {
    assert_eq!(expand("n[1-65536]").unwrap().len(), DEFAULT_MAX_HOSTS);
    assert!(matches!(
        expand("n[1-65537]"),
        Err(HostlistError::TooMany { max: 65_536, .. })
    ));
    // 10^18 names would exhaust memory: the count is refused first.
    assert!(matches!(
        expand("n[0-999999999999999999]"),
        Err(HostlistError::TooMany { .. })
    ));
    // Counts multiply across groups and add across patterns; no overflow.
    assert!(matches!(
        expand("n[0-999999999999999999]x[0-999999999999999999]"),
        Err(HostlistError::TooMany { .. })
    ));
    assert!(matches!(
        expand_max("a[1-5],b[1-5]", 9),
        Err(HostlistError::TooMany { max: 9, .. })
    ));
    assert_eq!(expand_max("a[1-5],b[1-4]", 9).unwrap().len(), 9);
}

#[test]
fn compresses_for_display() {
    assert_eq!(
        compress(&["node130", "node002", "node001", "node003", "node002"]),
        "node[001-003,130]"
    );
    assert_eq!(compress(&["node8", "node9", "node10"]), "node[8-10]");
    assert_eq!(compress(&["node08", "node09", "node10"]), "node[08-10]");
    assert_eq!(compress(&["n9", "n010", "n10"]), "n[9,010,10]");
    assert_eq!(compress(&["node01-ib", "node02-ib"]), "node[01-02]-ib");
    assert_eq!(compress(&["node1", "login"]), "login,node1");
    assert_eq!(compress(&["node5"]), "node5");
    assert_eq!(compress::<&str>(&[]), "");
}

/// A random valid host name.
fn random_host(rng: &mut rand_pcg::Pcg64) -> String {
    const PREFIXES: [&str; 7] = ["node", "rack1-n", "gpu", "a.b-", "", "x_", "r1"];
    const SUFFIXES: [&str; 3] = ["", "-ib", ".eth"];
    if rng.gen_bool(0.05) {
        return ["login", "head", "io-a"][rng.gen_range(0..3)].to_string();
    }
    let prefix = PREFIXES[rng.gen_range(0..PREFIXES.len())];
    let suffix = SUFFIXES[rng.gen_range(0..SUFFIXES.len())];
    let v: u64 = rng.gen_range(0..300);
    let digits = if rng.gen_bool(0.5) {
        v.to_string()
    } else {
        let w = rng.gen_range(v.to_string().len()..=5);
        format!("{v:0w$}")
    };
    if prefix.is_empty() && suffix.is_empty() && digits.is_empty() {
        return "h".into();
    }
    format!("{prefix}{digits}{suffix}")
}

#[test]
fn property_compress_then_expand_gives_the_same_hosts() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(15);
    for _ in 0..500 {
        let n = rng.gen_range(1..60);
        let hosts: Vec<String> = (0..n).map(|_| random_host(&mut rng)).collect();
        let expr = compress(&hosts);
        let back = expand(&expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let want: BTreeSet<&String> = hosts.iter().collect();
        let got: BTreeSet<&String> = back.iter().collect();
        assert_eq!(got, want, "{expr}");
        assert_eq!(back.len(), want.len(), "no duplicates: {expr}");
        // Deterministic whatever the input order.
        let mut shuffled = hosts.clone();
        shuffled.reverse();
        assert_eq!(compress(&shuffled), expr);
    }
}

/// A random valid expression.
fn random_expression(rng: &mut rand_pcg::Pcg64) -> String {
    let mut patterns = Vec::new();
    for _ in 0..rng.gen_range(1..4) {
        let mut p = ["n", "rack", "a-", ""][rng.gen_range(0..4)].to_string();
        for g in 0..rng.gen_range(1..3) {
            if g > 0 {
                p.push_str(["-n", "x", "."][rng.gen_range(0..3)]);
            }
            let padded = rng.gen_bool(0.5);
            let ranges: Vec<String> = (0..rng.gen_range(1..4))
                .map(|_| {
                    let lo: u64 = rng.gen_range(0..90);
                    let hi = lo + rng.gen_range(0..12);
                    let f = |v: u64| {
                        if padded {
                            format!("{v:03}")
                        } else {
                            v.to_string()
                        }
                    };
                    if hi == lo {
                        f(lo)
                    } else {
                        format!("{}-{}", f(lo), f(hi))
                    }
                })
                .collect();
            p.push_str(&format!("[{}]", ranges.join(",")));
        }
        patterns.push(p);
    }
    patterns.join(",")
}

#[test]
fn property_expand_then_compress_round_trips() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(16);
    for _ in 0..500 {
        let expr = random_expression(&mut rng);
        let hosts = expand(&expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
        let again = expand(&compress(&hosts)).unwrap();
        let want: BTreeSet<&String> = hosts.iter().collect();
        let got: BTreeSet<&String> = again.iter().collect();
        assert_eq!(got, want, "{expr}");
        // A compressed list is a fixed point.
        assert_eq!(compress(&again), compress(&hosts));
    }
}

#[test]
fn arbitrary_text_never_panics() {
    // Bytes drawn from the characters that matter to the parsers; every
    // outcome is a value or an error, never a panic or an explosion.
    const ALPHABET: &[u8] = b"ab0129[]-,:/ #\\=\"\n.\tnodeSwitchNameNodesSwitches";
    let mut rng = rand_pcg::Pcg64::seed_from_u64(17);
    for _ in 0..20_000 {
        let len = rng.gen_range(0..40);
        let text: String = (0..len)
            .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
            .collect();
        if let Ok(hosts) = expand_max(&text, 1000) {
            assert!(hosts.len() <= 1000);
            let _ = expand_max(&compress(&hosts), 1000);
        }
        let _ = crate::cluster::topology::Topology::parse_max(&text, 1000);
        let _ = crate::cluster::peers::parse_peers_file("f", &text, 1000);
    }
}
