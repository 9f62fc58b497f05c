//! Every export against its consumer's documented format. The Open MPI rules
//! file is parsed with the grammar and checks of Open MPI 4.1's reader
//! (coll_base_dynamic_file.c: numbers read with `%li`, any other character
//! skipped, `#` skipping to the end of the line; counts ≥ 0; collective id <
//! COLLCOUNT; the first message size of every communicator size must be 0).

mod common;

use netgauge::{EntryData, RangeData};
use netgauged::export::{self, ExportArgs, Format, OMPI_COLLCOUNT};

fn entry() -> EntryData {
    EntryData {
        peer: "node1".into(),
        transport: "mpi".into(),
        ranges: vec![
            RangeData {
                from_bytes: 1,
                to_bytes: 4096,
                g_ns: 400.0,
                G_ns_per_byte: 0.08,
                o_s_ns: 330.0,
                o_r_ns: 110.0,
                O_s_ns_per_byte: 0.01,
                O_r_ns_per_byte: 0.02,
            },
            RangeData {
                from_bytes: 4097,
                to_bytes: 4 << 20,
                g_ns: 2300.0,
                G_ns_per_byte: 0.055,
                o_s_ns: 900.0,
                o_r_ns: 1200.0,
                O_s_ns_per_byte: 0.0,
                O_r_ns_per_byte: 0.1,
            },
        ],
        eel_ns: 590.0,
        L_ns: 150.0,
        S_bytes: Some(4096),
        ..EntryData::default()
    }
}

fn args(format: Format) -> ExportArgs {
    common::export_args(format, "mpi", &[2, 4, 8, 64])
}

/// Open MPI 4.1's tokenizer: the next number as `%li` reads it.
struct Tokens<'a> {
    s: &'a [u8],
    i: usize,
}

impl Tokens<'_> {
    fn next_long(&mut self) -> Option<i64> {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.i >= self.s.len() {
                return None;
            }
            let start = self.i;
            let mut j = self.i;
            if self.s[j] == b'+' || self.s[j] == b'-' {
                j += 1;
            }
            let digits = j;
            while j < self.s.len() && self.s[j].is_ascii_digit() {
                j += 1;
            }
            if j > digits {
                let text = std::str::from_utf8(&self.s[start..j]).unwrap();
                // %li: a leading 0 means octal (and 0x hex): we never want that.
                let body = text.trim_start_matches(['+', '-']);
                assert!(
                    body == "0" || !body.starts_with('0'),
                    "number {text} would be read as octal by %li"
                );
                self.i = j;
                return Some(text.parse().unwrap());
            }
            // Not a number: fread one character; '#' skips to the newline.
            let c = self.s[self.i];
            self.i += 1;
            if c == b'#' {
                while self.i < self.s.len() && self.s[self.i] != b'\n' {
                    self.i += 1;
                }
            }
        }
    }
}

#[derive(Debug, PartialEq)]
struct Rule {
    coll: i64,
    comm_size: i64,
    msgs: Vec<(i64, i64, i64, i64)>,
}

/// The reader's grammar and checks; Err(reason) where Open MPI would reject
/// the file (and silently fall back to its fixed rules).
fn parse_ompi(text: &str) -> Result<Vec<Rule>, String> {
    let mut t = Tokens {
        s: text.as_bytes(),
        i: 0,
    };
    let mut next = |what: &str| -> Result<i64, String> {
        match t.next_long() {
            Some(v) if v >= 0 => Ok(v),
            _ => Err(format!("could not read {what}")),
        }
    };
    let n = next("number of collectives")?;
    if n > i64::from(OMPI_COLLCOUNT) {
        return Err("more collectives than exist".into());
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..n {
        let ci = next("collective id")?;
        if ci >= i64::from(OMPI_COLLCOUNT) {
            return Err("collective id too large".into());
        }
        if !seen.insert(ci) {
            return Err("collective given twice".into());
        }
        let ncs = next("count of communicators")?;
        for _ in 0..ncs {
            let cs = next("communicator size")?;
            let nms = next("number of message sizes")?;
            let mut msgs = Vec::new();
            for k in 0..nms {
                let ms = next("message size")?;
                let alg = next("algorithm")?;
                let fan = next("fan in/out")?;
                let seg = next("segment size")?;
                if k == 0 && ms != 0 {
                    return Err("first message size must be 0".into());
                }
                msgs.push((ms, alg, fan, seg));
            }
            out.push(Rule {
                coll: ci,
                comm_size: cs,
                msgs,
            });
        }
    }
    Ok(out)
}

#[test]
fn ompi_rules_follow_the_4_1_reader_grammar() {
    let text = export::render(&args(Format::OmpiRules), &entry(), &[], None).unwrap();
    let rules = parse_ompi(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // 6 collectives × 4 communicator sizes.
    assert_eq!(rules.len(), 24);
    // Algorithm 0: coll/tuned's own fixed decision.
    let valid = |coll: i64| -> &'static [i64] {
        match coll {
            7 => &[0, 1, 3, 5, 6, 7, 8, 9],
            2 => &[0, 3, 4, 6],
            6 => &[0, 1, 3, 4, 6],
            11 => &[0, 1, 2, 4, 5, 7],
            0 => &[0, 2, 3, 4, 5],
            // Not the Bruck alltoall (3): wrong data in Open MPI 4.1.4.
            3 => &[0, 1, 2],
            _ => &[],
        }
    };
    for r in &rules {
        assert!([0, 2, 3, 6, 7, 11].contains(&r.coll));
        assert!([2, 4, 8, 64].contains(&r.comm_size));
        // Thresholds strictly increase (the reader takes the last rule whose
        // size is ≤ the message).
        for w in r.msgs.windows(2) {
            assert!(w[0].0 < w[1].0, "{r:?}");
        }
        for m in &r.msgs {
            assert!(valid(r.coll).contains(&m.1), "{r:?}");
            // The chains (bcast's pipeline, reduce's chain) have fan-out 1
            // and a segment size or 0 (unsegmented); nothing else sets
            // either.
            if (r.coll, m.1) == (7, 3) || (r.coll, m.1) == (11, 2) {
                assert_eq!(m.2, 1, "a chain of fan-out 1: {r:?}");
            } else {
                assert_eq!((m.2, m.3), (0, 0), "{r:?}");
            }
        }
    }
}

#[test]
fn rules_leave_the_library_its_own_choice_unless_ours_is_clearly_faster() {
    // A margin nothing can beat: every rule is coll/tuned's own decision.
    let mut a = args(Format::OmpiRules);
    a.margin = 0.99;
    let text = export::render(&a, &entry(), &[], None).unwrap();
    let rules = parse_ompi(&text).unwrap();
    for r in &rules {
        assert_eq!(r.msgs.len(), 1, "{r:?}");
        assert_eq!(r.msgs[0], (0, 0, 0, 0), "{r:?}");
    }
    // No margin: where one of ours is predicted faster at all it is taken,
    // somewhere (the library's unsegmented chain for large broadcasts on
    // 4–7 ranks is beaten by a segmented one).
    a.margin = 0.0;
    let text = export::render(&a, &entry(), &[], None).unwrap();
    let rules = parse_ompi(&text).unwrap();
    let b4 = rules
        .iter()
        .find(|r| r.coll == 7 && r.comm_size == 4)
        .unwrap();
    assert!(b4.msgs.iter().any(|m| m.1 != 0), "{b4:?}");
    // MPICH: the whole tree names MPICH algorithms, its defaults where
    // ours is not clearly faster.
    let mut a = args(Format::MpichJson);
    a.margin = 0.99;
    let text = export::render(&a, &entry(), &[], None).unwrap();
    assert!(text.contains("MPIR_Bcast_intra_binomial"), "{text}");
    assert!(
        text.contains("MPIR_Allreduce_intra_recursive_doubling"),
        "{text}"
    );
}

/// libngcoll's size classes up to `max` bytes (ngcoll's `class_bounds`:
/// 0–3 B one size each, then half octaves).
fn classes(max: u64) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = (0..4).map(|b| (b, b)).collect();
    let mut lo = 4u64;
    while lo <= max {
        v.push((lo, lo + lo / 2 - 1));
        v.push((lo + lo / 2, 2 * lo - 1));
        lo *= 2;
    }
    v
}

/// A size as libngcoll's log writes it.
fn log_bytes(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// libngcoll's log line of one class whose trial kept the library's own.
fn kept_library(ranks: u32, nodes: u32, coll: &str, (lo, hi): (u64, u64)) -> String {
    let size = if lo == hi {
        log_bytes(lo)
    } else {
        format!("{}–{}", log_bytes(lo), log_bytes(hi))
    };
    let s = if nodes == 1 { "" } else { "s" };
    format!(
        "ngcoll: comm 0 ({ranks} ranks, {nodes} node{s}) {coll} {size}: ours binomial — predicted …; \
         trial (the ranks' median times, summed) ours 9.0 µs vs Open MPI 4.1 7.0 µs, the last of 1: kept the library's own\n"
    )
}

/// The algorithm an Open MPI rules file names for `coll` over `p` ranks at
/// `m` bytes (the last rule at or below m; 0: the library's own).
fn alg_at(rules: &[Rule], coll: i64, p: i64, m: i64) -> i64 {
    let r = rules
        .iter()
        .find(|r| r.coll == coll && r.comm_size == p)
        .unwrap();
    r.msgs.iter().rev().find(|x| x.0 <= m).unwrap().1
}

#[test]
fn classes_whose_trials_kept_the_library_are_left_to_it() {
    let dir = std::env::temp_dir().join(format!("ng-trials-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let mut a = args(Format::OmpiRules);
    a.margin = 0.0;
    let rules =
        |a: &ExportArgs| parse_ompi(&export::render(a, &entry(), &[], None).unwrap()).unwrap();
    let before = rules(&a);
    // Open MPI's broadcasts that libngcoll also runs (binomial, pipeline,
    // the scatter-allgathers): its trials measured those, and only those
    // can a trial veto; Open MPI's others (linear, binary, k-nomial) it
    // never ran.
    let ours = |alg: i64| [3, 6, 8, 9].contains(&alg);
    // A broadcast size m (a power of two) where the model names one of
    // those over the whole octave [m, 2m): its two classes.
    let (m, alg) = (2..22)
        .map(|k| 1i64 << k)
        .map(|m| (m, alg_at(&before, 7, 4, m)))
        .find(|&(m, a)| {
            ours(a)
                && alg_at(&before, 7, 4, m + m / 2) == a
                && alg_at(&before, 7, 4, 2 * m - 1) == a
        })
        .expect("the model names a broadcast libngcoll runs over an octave at 4 ranks");
    let (lower, upper) = (
        (m as u64, (m + m / 2 - 1) as u64),
        ((m + m / 2) as u64, (2 * m - 1) as u64),
    );
    // The upper class alone: the lower keeps its algorithm, the upper
    // names none libngcoll runs (the library's own, or another of Open
    // MPI's), the next octave is as before.
    a.trials = vec![log("upper.log", &kept_library(4, 1, "bcast", upper))];
    let after = rules(&a);
    assert_eq!(alg_at(&after, 7, 4, m), alg, "{after:?}");
    assert!(!ours(alg_at(&after, 7, 4, m + m / 2)), "{after:?}");
    assert!(!ours(alg_at(&after, 7, 4, 2 * m - 1)), "{after:?}");
    assert_eq!(
        alg_at(&after, 7, 4, 2 * m),
        alg_at(&before, 7, 4, 2 * m),
        "{after:?}"
    );
    // The same class given to the library's own by libngcoll's plan (no
    // trial): the same file.
    let plan_line = kept_library(4, 1, "bcast", upper);
    let plan_line = plan_line.replace(
        "ours binomial — predicted …; ",
        "Open MPI 4.1 binary_tree — predicted …",
    );
    let plan_line = &plan_line[..plan_line.find("predicted …").unwrap() + "predicted …".len()];
    a.trials = vec![log("plan.log", &format!("{plan_line}\n"))];
    assert_eq!(rules(&a), after);
    // Measured there (a trial): the fixed decision, nothing else.
    assert_eq!(alg_at(&after, 7, 4, m + m / 2), 0, "{after:?}");
    // Given to the library by the plan, a class may still name another of
    // Open MPI's algorithms; measured, never. Some reduce or broadcast
    // class of this fixture shows the difference (4 ranks alone here).
    let sizes = std::mem::replace(&mut a.comm_sizes, vec![4]);
    let differs = ["reduce", "bcast"].iter().any(|&coll| {
        let id = if coll == "bcast" { 7 } else { 11 };
        classes(1 << 20).into_iter().skip(4).any(|c| {
            let line = kept_library(4, 1, coll, c);
            a.trials = vec![log("one.log", &line)];
            let measured = alg_at(&rules(&a), id, 4, c.0 as i64);
            let plan = line.replace(
                "ours binomial — predicted …; ",
                "Open MPI 4.1 linear — predicted …",
            );
            let plan = &plan[..plan.find("predicted …").unwrap() + "predicted …".len()];
            a.trials = vec![log("one.log", &format!("{plan}\n"))];
            let planned = alg_at(&rules(&a), id, 4, c.0 as i64);
            assert_eq!(measured, 0, "{coll} {c:?}");
            assert!(id != 7 || !ours(planned), "{coll} {c:?}: {planned}");
            planned != 0
        })
    });
    assert!(
        differs,
        "no class where the plan's veto leaves another algorithm"
    );
    a.comm_sizes = sizes;
    // The lower class alone: the upper keeps its algorithm.
    a.trials = vec![log("lower.log", &kept_library(4, 1, "bcast", lower))];
    let after = rules(&a);
    assert!(!ours(alg_at(&after, 7, 4, m)), "{after:?}");
    assert!(!ours(alg_at(&after, 7, 4, m + m / 2 - 1)), "{after:?}");
    assert_eq!(alg_at(&after, 7, 4, m + m / 2), alg, "{after:?}");
    // A trial across two nodes says nothing of this one node's export.
    a.trials = vec![log("nodes.log", &kept_library(4, 2, "bcast", lower))];
    assert_eq!(rules(&a)[..], before[..]);
    // Every broadcast class on 4 ranks: no broadcast libngcoll runs is
    // left there, everything else is as before.
    let all: String = classes(8 << 20)
        .into_iter()
        .map(|c| kept_library(4, 1, "bcast", c))
        .collect();
    a.trials = vec![log("all.log", &all)];
    let after = rules(&a);
    assert!(after
        .iter()
        .find(|r| r.coll == 7 && r.comm_size == 4)
        .unwrap()
        .msgs
        .iter()
        .all(|x| !ours(x.1)));
    for (b, r) in before.iter().zip(&after) {
        if (r.coll, r.comm_size) != (7, 4) {
            assert_eq!(b.msgs, r.msgs, "{r:?}");
        }
    }
    // MPICH's tree alike: its 4-rank broadcasts become what a margin
    // nothing beats gives (MPICH's defaults), where without the log they
    // were not.
    a.format = Format::MpichJson;
    let bcast4 = |a: &ExportArgs| {
        let json: serde_json::Value =
            serde_json::from_str(&export::render(a, &entry(), &[], None).unwrap()).unwrap();
        json["collective=bcast"]["comm_type=intra"]["comm_size<=4"].clone()
    };
    let vetoed = bcast4(&a);
    let trials = std::mem::take(&mut a.trials);
    let modelled = bcast4(&a);
    a.margin = 0.99;
    let defaults = bcast4(&a);
    assert!(defaults.is_object(), "{defaults}");
    assert_ne!(
        modelled, defaults,
        "the model names a broadcast of ours for MPICH"
    );
    assert_eq!(vetoed, defaults);
    // A log that does not parse, and a good one given to another format:
    // refused, each saying why.
    a.format = Format::OmpiRules;
    a.trials = vec![log(
        "bad.log",
        "ngcoll: comm 0 (4 ranks, 1 node) bcast 4 XB: ours binomial — predicted …: kept the library's own\n",
    )];
    let e = export::render(&a, &entry(), &[], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.log") && e.contains("4 XB"), "{e}");
    a.format = Format::Loggopsim;
    a.trials = trials;
    let e = export::render(&a, &entry(), &[], None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--trials"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ompi_reader_grammar_rejects_malformed_files() {
    assert!(parse_ompi("1\n7\n1\n4\n1\n1024 6 0 0\n").is_err()); // first size not 0
    assert!(parse_ompi("1\n30\n1\n4\n1\n0 6 0 0\n").is_err()); // bad id
    assert!(parse_ompi("1\n7\n1\n4\n2\n0 6 0 0\n").is_err()); // truncated
    assert!(parse_ompi("# c\n1 # n\n7\n1\n4\n1\n0 6 0 0\n").is_ok());
}

#[test]
fn mpich_json_is_a_selection_tree() {
    let text = export::render(&args(Format::MpichJson), &entry(), &[], None).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let root = v.as_object().unwrap();
    // A leaf: exactly one "algorithm=MPIR_…" key with an empty object.
    fn leaf(v: &serde_json::Value) {
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 1, "{v}");
        let (alg, params) = o.iter().next().unwrap();
        assert!(alg.starts_with("algorithm=MPIR_"), "{alg}");
        assert!(params.as_object().unwrap().is_empty());
    }
    // The message-size level: "<key><=N" / "<key>=any", each a leaf.
    fn by_msg(v: &serde_json::Value) {
        let o = v.as_object().unwrap();
        if o.keys().any(|k| k.starts_with("algorithm=")) {
            return leaf(v);
        }
        let mut bounds = Vec::new();
        for (k, sub) in o {
            let k = k
                .strip_prefix("avg_msg_size")
                .or_else(|| k.strip_prefix("total_msg_size"))
                .unwrap_or_else(|| panic!("{k}"));
            assert!(k == "=any" || k["<=".len()..].parse::<u64>().is_ok(), "{k}");
            bounds.push(
                k.strip_prefix("<=")
                    .map_or(u64::MAX, |n| n.parse().unwrap()),
            );
            leaf(sub);
        }
        ascending(&bounds);
    }
    // MPICH takes the first sibling that matches: the bounds of a level
    // must stand in the file in increasing order, "any" last.
    fn ascending(bounds: &[u64]) {
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "{bounds:?}");
        assert_eq!(bounds.last(), Some(&u64::MAX), "{bounds:?}");
    }
    for coll in [
        "collective=bcast",
        "collective=allreduce",
        "collective=barrier",
        "collective=reduce",
        "collective=allgather",
        "collective=alltoall",
    ] {
        leaf(&root[coll]["comm_type=inter"]);
        let intra = root[coll]["comm_type=intra"].as_object().unwrap();
        let keys: Vec<&String> = intra.keys().collect();
        assert_eq!(keys.last().unwrap().as_str(), "comm_size=any");
        let sizes: Vec<u64> = keys
            .iter()
            .map(|k| {
                k.strip_prefix("comm_size<=")
                    .map_or(u64::MAX, |n| n.parse().unwrap())
            })
            .collect();
        ascending(&sizes);
        for (k, sub) in intra {
            assert!(k == "comm_size=any" || k.starts_with("comm_size<="));
            let sub = sub.as_object().unwrap();
            // Reductions split on commutativity, alltoall on MPI_IN_PLACE.
            let guard = ["is_commutative=", "is_sendbuf_inplace="];
            if sub.keys().all(|k| guard.iter().any(|g| k.starts_with(g))) {
                for v in sub.values() {
                    by_msg(v);
                }
            } else {
                by_msg(&serde_json::Value::Object(sub.clone()));
            }
        }
    }
}

#[test]
fn loggopsim_flags_are_integer_sets_one_per_piece_in_ps() {
    let text = export::render(&args(Format::Loggopsim), &entry(), &[], None).unwrap();
    // G = 0.08 and 0.055 ns/B: ns would round them away, ps carries them.
    assert!(text.starts_with("# LogGOPSim flags"), "{text}");
    assert!(text.contains("times in ps"), "{text}");
    let sets: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    // Eager range, and the range above S (the handshake in L).
    assert_eq!(sets.len(), 2, "{text}");
    for set in &sets {
        let toks: Vec<&str> = set.split_whitespace().collect();
        let flags: Vec<&str> = toks.iter().step_by(2).copied().collect();
        assert_eq!(flags, ["-L", "-o", "-g", "-G", "-O", "-S"]);
        for v in toks.iter().skip(1).step_by(2) {
            assert!(v.parse::<i32>().is_ok_and(|x| x >= 0), "{set}");
        }
    }
    // L = EEL − 2o = 590 − 440 ns; o = (330 + 110)/2; O = max(O_s, O_r) ≤ G.
    assert_eq!(sets[0], "-L 150000 -o 220000 -g 400000 -G 80 -O 20 -S 4096");
    assert!(sets[1].contains(" -G 55 -O 55 -S 4096"), "{}", sets[1]);
    assert!(
        text.contains("# sizes 4097..4194304 B; rendezvous"),
        "{text}"
    );
}

#[test]
fn netgauge_columns_give_back_o_and_g_with_its_own_formulas() {
    let text = export::render(&args(Format::Netgauge), &entry(), &[], None).unwrap();
    assert!(text.starts_with(
        "# size n PRTT(1,0,s) PRTT(n,0,s) PRTT(n,PRTT(1,0,s),s) L o_s o_r g G lsqu(g,G)"
    ));
    let mut rows = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let c: Vec<f64> = line
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(c.len(), 11);
        let (s, n, p1, pn, pd) = (c[0], c[1], c[2], c[3], c[4]);
        // Netgauge's plot hints: o = ($5-$3)/($2-1)-$3, g+(s-1)G = ($4-$3)/($2-1).
        let o = (pd - p1) / (n - 1.0) - p1;
        assert!((o - c[6]).abs() < 1e-4, "{line}");
        let gap = (pn - p1) / (n - 1.0);
        assert!((gap - (c[8] + (s - 1.0) * c[9])).abs() < 1e-3, "{line}");
        rows += 1;
    }
    assert!(rows > 10);
}

/// The `<prop id=… value=…/>` pairs of a SimGrid platform file, and the
/// cluster tag.
fn smpi_props(xml: &str) -> (Vec<(String, String)>, String) {
    let attr = |line: &str, name: &str| {
        let at = line.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        line[at..at + line[at..].find('"').unwrap()].to_string()
    };
    let props = xml
        .lines()
        .filter(|l| l.trim_start().starts_with("<prop "))
        .map(|l| (attr(l, "id"), attr(l, "value")))
        .collect();
    let cluster = xml
        .lines()
        .find(|l| l.starts_with("<cluster "))
        .unwrap()
        .to_string();
    (props, cluster)
}

#[test]
fn smpi_platform_from_a_segment_with_its_contention_record() {
    use netgauge::{Estimate, Scheme, Status, TransportExt};
    let dir = std::env::temp_dir().join(format!("ng-smpi-seg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let path = dir.join("segment");
    let mut w = netgauge::SegmentWriter::create_or_open(&path, 4, "n0", "test").unwrap();
    w.upsert(&entry()).unwrap();
    let mut a = args(Format::Smpi);
    a.shm = Some(path.clone());
    a.hosts = Some(16);
    // No record: fair sharing, independent directions.
    let xml = export::run(&a).unwrap();
    assert!(xml.contains("no record for this transport"), "{xml}");
    let (props, cluster) = smpi_props(&xml);
    let prop = |k: &str| props.iter().find(|(id, _)| id == k).unwrap().1.clone();
    // Rendezvous above S = 4096: detached and eager below 4097.
    assert_eq!(prop("smpi/send-is-detached-thresh"), "4097");
    assert_eq!(prop("smpi/async-small-thresh"), "4097");
    assert_eq!(prop("network/crosstraffic"), "0");
    // The sleeps: o_s and o_r of the first range below S, none above
    // (a rendezvous send sleeps neither); keys are sizes the piece exceeds.
    let os: Vec<Vec<f64>> = prop("smpi/os")
        .split(';')
        .map(|p| p.split(':').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(os.len(), 2);
    assert_eq!((os[0][0], os[1][0]), (0.0, 4096.0));
    assert!((os[0][1] + os[0][2] - 330e-9).abs() < 1e-12, "{os:?}");
    assert_eq!((os[1][1], os[1][2]), (0.0, 0.0));
    // Factors are keyed by the payload SMPI sends (16 bytes more).
    assert!(prop("smpi/lat-factor").contains(";4112:"), "{xml}");
    assert!(cluster.contains("radical=\"0-15\""), "{cluster}");
    assert!(
        cluster.contains("sharing_policy=\"SPLITDUPLEX\""),
        "{cluster}"
    );
    let bw = |c: &str, name: &str| -> f64 {
        let at = c.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        c[at..at + c[at..].find("Bps").unwrap()].parse().unwrap()
    };
    // The links run at the largest messages' rate, 1/0.055 bytes per ns.
    assert!((bw(&cluster, "bb_bw") * 0.055e-9 - 1.0).abs() < 1e-9);
    assert_eq!(bw(&cluster, "bw"), bw(&cluster, "bb_bw"));
    // With a record: β = 0.8 makes the host links 1/β as fast as one flow;
    // a mixed penalty of 1.9 at k = 1 makes the directions share them.
    let est = |v: f64| Estimate {
        value: v,
        lo: v - 0.05,
        hi: v + 0.05,
    };
    let mut t = TransportExt::default();
    t.set_penalties(Scheme::Mixed, &[est(1.9)], Status::Identified)
        .unwrap();
    t.set_sharing(
        (est(0.8), Status::Identified),
        (est(0.1), Status::Identified),
        (est(0.0), Status::NotAssessed),
    );
    w.set_transport_ext("mpi", &t).unwrap();
    let xml = export::run(&a).unwrap();
    let (_, cluster) = smpi_props(&xml);
    assert!(cluster.contains("sharing_policy=\"SHARED\""), "{cluster}");
    assert!((bw(&cluster, "bw") / bw(&cluster, "bb_bw") - 1.25).abs() < 1e-9);
    assert!(xml.contains("gamma_o 0.100 (not modelled)"), "{xml}");
    // --hosts belongs to this format alone; a cluster needs two hosts.
    let mut other = args(Format::Netgauge);
    other.hosts = Some(4);
    assert!(export::render(&other, &entry(), &[], None)
        .unwrap_err()
        .to_string()
        .contains("--hosts"));
    a.hosts = Some(1);
    assert!(export::run(&a)
        .unwrap_err()
        .to_string()
        .contains("at least 2"));
    // A platform of many hosts is cheap; rule tables for a communicator
    // beyond MAX_RULE_RANKS are refused before anything is simulated.
    a.hosts = None;
    a.comm_sizes = vec![2, 4096];
    assert!(export::run(&a).is_ok());
    for format in [Format::OmpiRules, Format::MpichJson] {
        let mut rules = args(format);
        rules.comm_sizes = vec![2, export::MAX_RULE_RANKS + 1];
        let e = export::render(&rules, &entry(), &[], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--comm-sizes 1025") && e.contains("at most 1024"),
            "{e}"
        );
    }
    w.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A range whose line has a negative constant (its G steeper than the sizes
/// below it averaged) is written as pieces of latency 0 that keep SMPI's
/// time within the chord tolerance of T(s) (SMPI itself runs it in
/// tests/export_consumers.rs); one SMPI cannot carry closely enough is an
/// error that names the sizes.
#[test]
fn smpi_splits_a_line_with_a_negative_constant_and_refuses_one_it_cannot_hold() {
    use netgauged::export::{model, smpi};
    let mut e = entry();
    let big = RangeData {
        from_bytes: (4 << 20) + 1,
        to_bytes: 8 << 20,
        g_ns: 9000.0,
        G_ns_per_byte: 0.2,
        ..e.ranges[1].clone()
    };
    e.ranges.push(big.clone());
    let pieces = model::pieces(&e);
    let last = pieces.last().unwrap();
    assert!(last.message_ns(1) - last.G_ns_per_byte < 0.0, "{last:?}");
    let written = smpi::smpi_pieces(&e).unwrap();
    assert!(written.len() > pieces.len() + 10, "{}", written.len());
    let mut worst = 0.0f64;
    for s in (1..=160u64).map(|i| i * (1 << 17)).chain([1, 4096, 4097]) {
        let err = smpi::smpi_message_s(&written, s) * 1e9 / model::message_ns(&pieces, s) - 1.0;
        worst = worst.max(err.abs());
    }
    assert!(worst <= smpi::CHORD_TOLERANCE + 1e-9, "{worst}");
    assert!(worst >= smpi::CHORD_TOLERANCE * 0.5, "{worst}");
    let xml = export::render(&args(Format::Smpi), &e, &[], None).unwrap();
    assert!(xml.contains("constant is below the envelope time"), "{xml}");
    // A G a thousand times the one below: hundreds of pieces would not do.
    e.ranges[2].G_ns_per_byte = 55.0;
    let err = export::render(&args(Format::Smpi), &e, &[], None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sizes from 4194305 B") && err.contains("256 pieces"),
        "{err}"
    );
}

/// Eager pieces whose T(1) is below o_s + o_r (the sleeps give way until
/// the envelope is exactly covered) stay one piece each and exact, also
/// where G is 0.
#[test]
fn smpi_keeps_pieces_whose_sleeps_give_way_exact() {
    use netgauged::export::{model, smpi};
    let r = |from, to, big_g, o_s| RangeData {
        from_bytes: from,
        to_bytes: to,
        g_ns: 2000.0,
        G_ns_per_byte: big_g,
        o_s_ns: o_s,
        o_r_ns: 110.0,
        O_s_ns_per_byte: 0.0,
        O_r_ns_per_byte: 0.02,
    };
    // Many o_s: the envelope's residue after the cut rounds either way.
    for (g, k) in [0.055, 0.0]
        .into_iter()
        .flat_map(|g| (0..40).map(move |k| (g, k)))
    {
        let o_s = 900.0 + 0.37 * f64::from(k);
        let e = EntryData {
            ranges: vec![
                r(1, 4096, 0.073, 330.0),
                r(4097, 262_144, g, o_s),
                r(262_145, 4 << 20, g, o_s + 50.0),
            ],
            eel_ns: 590.0,
            L_ns: 150.0,
            S_bytes: None,
            ..entry()
        };
        let pieces = model::pieces(&e);
        // The sleeps do give way: T(1) on the second piece's line is below
        // its o_s + o_r.
        assert!(pieces[1].message_ns(1) < 1010.0, "{:?}", pieces[1]);
        let written = smpi::smpi_pieces(&e).unwrap();
        assert_eq!(written.len(), pieces.len(), "G {g}: {written:?}");
        for s in [1, 4096, 4097, 100_000, 262_144, 262_145, 4 << 20] {
            let want = model::message_ns(&pieces, s);
            let got = smpi::smpi_message_s(&written, s) * 1e9;
            assert!(
                (got / want - 1.0).abs() < 1e-9,
                "G {g}, {s} B: {got} vs {want}"
            );
        }
        for p in &written {
            assert!(
                p.os.0 >= 0.0 && p.or.0 >= 0.0 && p.latency_s >= 0.0,
                "{p:?}"
            );
        }
    }
}
