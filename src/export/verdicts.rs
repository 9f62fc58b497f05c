//! What libngcoll decided and measured, and what a verification run of an
//! Open MPI rules file measured, read back into the rule exports.
//!
//! libngcoll chooses per (communicator, collective, size class) from the
//! model, priced as it runs our algorithms; where it chose one of ours,
//! the class's first calls try it against the library's own, in the
//! program's own calls, and keep the faster (`ngcoll::trial`). Its
//! `NETGAUGE_COLL=log` lines say both. A rules file has no trial: the
//! library runs what the file names on every call, and a model error
//! there costs every call. So `ngctl export --trials LOG` reads, per
//! (communicator size, collective, size class), what libngcoll did in that
//! run ([`VetoKind`]):
//!
//! - a class its *trial* gave back to the library's own (measured) stays
//!   the library's own in both files, whatever the export's model predicts;
//! - a class its *plan* gave to the library's own (predicted, pricing ours
//!   as libngcoll runs them) names none of libngcoll's algorithms: MPICH's
//!   default, or Open MPI's fixed decision or another of coll/tuned's
//!   algorithms, which that plan did not price above the library's own;
//! - classes the program did not call, and those whose trials kept ours,
//!   stay the model's.
//!
//! Where libngcoll ran another of Open MPI's algorithms (its log names it
//! `Open MPI 4.1 linear (#1) (forced)`), the class counts as one of ours:
//! no veto from the plan, a measured one where its trial kept the library's
//! own.
//!
//! A line of ranks on one node vetoes exports of one node's parameters (an
//! MPI probe's), one across nodes the others. A choice line that does not
//! parse (another version's log, or lines of two ranks interleaved by
//! mpirun) is an error naming it.
//!
//! `--trials` also reads a verification run of an exported Open MPI rules
//! file, `bench/ngcoll_bench.c --rules FILE --rule-sizes`: each rule forced
//! on a communicator of its own against the fixed decision, in one process,
//! at every power of two and every rule's first size. Its header line
//! `# forced rules: P ranks, N node(s)` (the bench refuses a file without a
//! block for exactly P ranks), then `point COLL MODE BYTES T_RULE T_FIXED
//! N` lines. Every measured size whose rule lost, in the geometric mean
//! over the methodologies or by more than [`VERIFY_WORST`] in one, is a
//! measured veto of the Open MPI file ([`VetoKind::Verified`]) from that
//! size up to the next size measured (the last one: its octave; the
//! barrier: its one class). So a file is exported, measured, and exported
//! again without what lost. It says nothing of MPICH's file.
//!
//! The lines read (one per collective, size class and communicator; any
//! other line is passed over):
//!
//! ```text
//! ngcoll: comm 0 (8 ranks, 1 node) bcast 128 KiB–196607 B: Open MPI 4.1 linear — predicted …
//! ngcoll: comm 0 (8 ranks, 1 node) bcast 32 KiB–49151 B: ours binomial — predicted …; trial (…) …: kept the library's own
//! ```

use netgauge::select::Collective;

use super::{bad, Result};

/// One class given back to the library's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Veto {
    pub ranks: u32,
    /// The communicator's ranks were all on one node.
    pub one_node: bool,
    pub coll: Collective,
    /// The class's bounds, bytes (of one rank's block for allgather and
    /// alltoall, as libngcoll classes them and the exports' grid counts).
    pub lo: u64,
    pub hi: u64,
    pub kind: VetoKind,
}

/// Where a veto comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VetoKind {
    /// libngcoll's plan gave the class to the library's own (predicted).
    Plan,
    /// libngcoll's trial measured the library's own faster.
    Trial,
    /// A verification run of an Open MPI rules file measured its rule
    /// slower than the fixed decision (says nothing of MPICH).
    Verified,
}

/// A verified rule that is slower than the fixed decision by more than
/// this in any one methodology is vetoed (the worst point libngcoll's
/// issue allows).
pub const VERIFY_WORST: f64 = 1.25;

/// The header line of a verification run (`bench/ngcoll_bench.c --rules`).
const VERIFY_HEADER: &str = "# forced rules: ";

/// The vetoes of one or more logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts(pub Vec<Veto>);

const KEPT_LIBRARY: &str = ": kept the library's own";
/// Where a choice line's choice ends and its prediction begins.
const CHOICE_END: &str = " — predicted ";

impl Verdicts {
    /// The vetoes in a log's text: the classes libngcoll gave to the
    /// library's own, by its plan or by a trial. A choice line that does
    /// not parse is an error (a log of another version), naming the line.
    pub fn parse(text: &str) -> Result<Verdicts> {
        if text.lines().any(|l| l.starts_with(VERIFY_HEADER)) {
            return parse_verification(text);
        }
        let mut v = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if !line.starts_with("ngcoll: comm ") || !line.contains(CHOICE_END) {
                continue;
            }
            let (mut veto, library) = parse_line(line).ok_or_else(|| {
                bad(format!(
                    "line {}: not a libngcoll choice line: {line}",
                    n + 1
                ))
            })?;
            if library {
                v.push(veto);
            } else if line.ends_with(KEPT_LIBRARY) {
                veto.kind = VetoKind::Trial;
                v.push(veto);
            }
        }
        Ok(Verdicts(v))
    }

    /// The vetoes of the logs at `paths`.
    pub fn read(paths: &[std::path::PathBuf]) -> Result<Verdicts> {
        let mut all = Verdicts::default();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| bad(format!("--trials {}: {e}", path.display())))?;
            let v = Verdicts::parse(&text)
                .map_err(|e| bad(format!("--trials {}: {e}", path.display())))?;
            all.0.extend(v.0);
        }
        Ok(all)
    }

    /// libngcoll, over `ranks` (on one node or not), gave `coll` at `m`
    /// bytes to the library's own, by its plan or by a trial.
    pub fn vetoes(&self, coll: Collective, ranks: usize, one_node: bool, m: u64) -> bool {
        self.of(coll, ranks, one_node)
            .any(|v| v.kind != VetoKind::Verified && (v.lo..=v.hi).contains(&m))
    }

    /// The library's own was measured faster for `coll` at `m` bytes over
    /// `ranks`: a libngcoll trial, or a verification run of an Open MPI
    /// file.
    pub fn measured(&self, coll: Collective, ranks: usize, one_node: bool, m: u64) -> bool {
        self.of(coll, ranks, one_node)
            .any(|v| v.kind != VetoKind::Plan && (v.lo..=v.hi).contains(&m))
    }

    /// Where the vetoed classes of `coll` over `ranks` begin and end: each
    /// class's first size and the size after its last; `verified`: those of
    /// verification runs too (the Open MPI file's alone).
    pub fn bounds(
        &self,
        coll: Collective,
        ranks: usize,
        one_node: bool,
        verified: bool,
    ) -> impl Iterator<Item = u64> + '_ {
        self.of(coll, ranks, one_node)
            .filter(move |v| verified || v.kind != VetoKind::Verified)
            .flat_map(|v| [v.lo, v.hi.saturating_add(1)])
    }

    fn of(
        &self,
        coll: Collective,
        ranks: usize,
        one_node: bool,
    ) -> impl Iterator<Item = &Veto> + '_ {
        self.0
            .iter()
            .filter(move |v| v.coll == coll && v.ranks as usize == ranks && v.one_node == one_node)
    }
}

/// The measured vetoes of a verification run (see the module
/// documentation).
fn parse_verification(text: &str) -> Result<Verdicts> {
    let header = text
        .lines()
        .find_map(|l| l.strip_prefix(VERIFY_HEADER))
        .unwrap_or_default();
    let (ranks, nodes) = header
        .split_once(" ranks, ")
        .and_then(|(p, n)| {
            Some((
                p.parse::<u32>().ok()?,
                n.split_once(' ')?.0.parse::<u32>().ok()?,
            ))
        })
        .ok_or_else(|| {
            bad(format!(
                "not a verification header: {VERIFY_HEADER}{header}"
            ))
        })?;
    // (collective, bytes) → the rule's time over the fixed decision's, per
    // methodology, in the order measured.
    let mut points: Vec<(Collective, u64, Vec<f64>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if !line.starts_with("point ") {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let parsed = (f.len() >= 7)
            .then(|| {
                let coll = Collective::ALL.into_iter().find(|c| c.name() == f[1])?;
                let bytes: u64 = f[3].parse().ok()?;
                let (t, own): (f64, f64) = (f[4].parse().ok()?, f[5].parse().ok()?);
                (t > 0.0 && own > 0.0).then_some((coll, bytes, t / own))
            })
            .flatten()
            .ok_or_else(|| bad(format!("line {}: not a bench point: {line}", n + 1)))?;
        let (coll, bytes, ratio) = parsed;
        match points
            .iter_mut()
            .find(|(c, b, _)| *c == coll && *b == bytes)
        {
            Some((_, _, r)) => r.push(ratio),
            None => points.push((coll, bytes, vec![ratio])),
        }
    }
    let mut v = Vec::new();
    for (i, (coll, bytes, ratios)) in points.iter().enumerate() {
        let gmean = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
        let worst = ratios.iter().cloned().fold(0.0, f64::max);
        if gmean <= 1.0 && worst <= VERIFY_WORST {
            continue;
        }
        // Up to the next size measured of this collective (the barrier: its
        // one class).
        let next = points[i + 1..]
            .iter()
            .find(|(c, ..)| c == coll)
            .map(|(_, b, _)| *b);
        let (lo, hi) = match (coll, next) {
            (Collective::Barrier, _) => (0, u64::MAX),
            (_, Some(n)) if n > *bytes => (*bytes, n - 1),
            _ => (
                *bytes,
                bytes.saturating_mul(2).saturating_sub(1).max(*bytes),
            ),
        };
        v.push(Veto {
            ranks,
            one_node: nodes == 1,
            coll: *coll,
            lo,
            hi,
            kind: VetoKind::Verified,
        });
    }
    Ok(Verdicts(v))
}

/// `ngcoll: comm ID (P ranks, N node[s]) COLL LO[–HI]: CHOICE — predicted …`:
/// the class, and whether the choice was the library's own.
fn parse_line(line: &str) -> Option<(Veto, bool)> {
    let rest = line.strip_prefix("ngcoll: comm ")?;
    let (_id, rest) = rest.split_once(" (")?;
    let (ranks, rest) = rest.split_once(" ranks, ")?;
    let ranks: u32 = ranks.parse().ok()?;
    let (nodes, rest) = rest.split_once(") ")?;
    let nodes: u32 = nodes.split_once(' ')?.0.parse().ok()?;
    let (head, rest) = rest.split_once(": ")?;
    let (choice, _) = rest.split_once(CHOICE_END)?;
    // Ours, or another of the library's algorithms run by libngcoll (a
    // plan's choice against the library's own, tried as ours are).
    let library = !(choice.starts_with("ours ") || choice.ends_with(" (forced)"));
    let (coll, size) = match head.split_once(' ') {
        Some((c, s)) => (c, Some(s)),
        None => (head, None),
    };
    let coll = Collective::ALL.into_iter().find(|c| c.name() == coll)?;
    let (lo, hi) = match size {
        // The barrier has one class.
        None => (0, u64::MAX),
        Some(s) => match s.split_once('–') {
            Some((lo, hi)) => (bytes(lo)?, bytes(hi)?),
            None => (bytes(s)?, bytes(s)?),
        },
    };
    (lo <= hi).then_some((
        Veto {
            ranks,
            one_node: nodes == 1,
            coll,
            lo,
            hi,
            kind: VetoKind::Plan,
        },
        library,
    ))
}

/// "48 B", "32 KiB", "1 MiB" as libngcoll's log writes sizes.
fn bytes(s: &str) -> Option<u64> {
    let (n, unit) = s.trim().split_once(' ')?;
    let n: u64 = n.parse().ok()?;
    let k = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
ngcoll: comm 0 (8 ranks): parameters from vm/mpi and its all-ranks exchange
ngcoll: comm 0 (8 ranks, 1 node) bcast 16 KiB–24575 B: Open MPI 4.1 binomial — predicted back to back ours binomial 16.5 µs vs Open MPI 4.1 binomial 16.5 µs, synchronized 22.9 µs vs 22.9 µs; 3426 calls
ngcoll: comm 0 (8 ranks, 1 node) bcast 32 KiB–49151 B: ours binomial — predicted back to back ours binomial 23.1 µs vs Open MPI 4.1 linear 49.3 µs, synchronized 31.0 µs vs 49.3 µs; 4924 calls; trial (the ranks' median times, summed) ours 336.6 µs vs Open MPI 4.1 227.9 µs, the last of 4: kept the library's own
ngcoll: comm 0 (8 ranks, 1 node) allreduce 8 KiB–12287 B: ours recursive_doubling — predicted back to back ours recursive_doubling 25.1 µs vs Open MPI 4.1 rabenseifner 36.7 µs, synchronized 25.1 µs vs 36.7 µs; 3475 calls; trial (the ranks' median times, summed) ours 85.3 µs vs Open MPI 4.1 115.7 µs, the last of 4: kept ours
ngcoll: comm 3 (4 ranks, 2 nodes) alltoall 1 MiB–1572863 B: ours pairwise — predicted …; trial (…) ours 3.40 ms vs Open MPI 4.1 3.1 ms, the last of 2: kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) reduce 2 B: ours binomial — predicted …; trial (…): kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) reduce 6 B–7 B: ours binomial — predicted …; trial (…): kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) bcast 4 KiB–6143 B: ours pipelined_chain (2048 B segments) — predicted …; trial (…): kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) barrier: ours dissemination — predicted …; trial (…): kept the library's own
ngcoll: comm 4 (4 ranks, 1 node) reduce 256 B–383 B: Open MPI 4.1 linear (#1) (forced) — predicted …; trial (…): kept ours
ngcoll: comm 4 (4 ranks, 1 node) reduce 4 KiB–6143 B: Open MPI 4.1 chain (#2, 2048 B segments) (forced) — predicted …; trial (…): kept the library's own
ngcoll: world rank 0: shadow communicators: 7 released with their communicators
";

    #[test]
    fn only_classes_given_back_to_the_library_are_vetoed() {
        let v = Verdicts::parse(LOG).unwrap();
        assert_eq!(v.0.len(), 8, "{v:?}");
        // Another of Open MPI's algorithms run by libngcoll: as ours, no
        // veto where its trial kept it, a measured one where it lost.
        assert!(!v.vetoes(Collective::Reduce, 4, true, 300));
        assert!(v.vetoes(Collective::Reduce, 4, true, 5000));
        assert!(v.measured(Collective::Reduce, 4, true, 5000));
        let on_one = |c, p, m| v.vetoes(c, p, true, m);
        // Inside the class, at both bounds, and only there.
        assert!(on_one(Collective::Bcast, 8, 32 << 10));
        assert!(on_one(Collective::Bcast, 8, 49151));
        assert!(!on_one(Collective::Bcast, 8, 49152));
        assert!(!on_one(Collective::Bcast, 8, 24576));
        assert!(!on_one(Collective::Bcast, 8, (32 << 10) - 1));
        assert_eq!(
            v.bounds(Collective::Bcast, 8, true, false)
                .collect::<Vec<_>>(),
            vec![16 << 10, 24576, 32 << 10, 49152]
        );
        // Another communicator size, another collective.
        assert!(!on_one(Collective::Bcast, 4, 32 << 10));
        assert!(!on_one(Collective::Reduce, 8, 32 << 10));
        // A trial that kept ours: no veto; the plan's choice of the
        // library's own (no trial): a veto.
        assert!(!on_one(Collective::Allreduce, 8, 8 << 10));
        assert!(on_one(Collective::Bcast, 8, 16 << 10));
        assert!(!on_one(Collective::Bcast, 8, (16 << 10) - 1));
        // Two nodes veto exports across nodes only; MiB.
        assert!(v.vetoes(Collective::Alltoall, 4, false, 1 << 20));
        assert!(!on_one(Collective::Alltoall, 4, 1 << 20));
        assert!(!v.vetoes(Collective::Bcast, 8, false, 32 << 10));
        // A one-size class, an upper half-octave class, the barrier's one.
        assert!(on_one(Collective::Reduce, 3, 2));
        assert!(!on_one(Collective::Reduce, 3, 3));
        assert!(on_one(Collective::Reduce, 3, 6) && on_one(Collective::Reduce, 3, 7));
        assert!(!on_one(Collective::Reduce, 3, 5) && !on_one(Collective::Reduce, 3, 8));
        assert!(on_one(Collective::Barrier, 3, 0));
        // A chain's segment note after the class.
        assert!(on_one(Collective::Bcast, 3, 6143) && !on_one(Collective::Bcast, 3, 6144));
        // Measured: the trials that kept the library's own, not the plan's
        // choices.
        assert!(v.measured(Collective::Bcast, 8, true, 32 << 10));
        assert!(!v.measured(Collective::Bcast, 8, true, 16 << 10));
        assert!(v.measured(Collective::Reduce, 3, true, 2));
    }

    #[test]
    fn a_verification_run_vetoes_the_sizes_whose_rule_lost() {
        let run = "\
# forced rules: 8 ranks, 1 node
# ranks 8; Open MPI v4.1.4; libngcoll not loaded; common start 73 us ahead
point bcast sync 16384 50.0 50.0 100
point bcast b2b 16384 40.0 40.0 100
point bcast sync 32768 65.0 50.0 100
point bcast b2b 32768 35.0 50.0 100
point bcast sync 65536 110.0 100.0 100
point bcast b2b 65536 105.0 100.0 100
point bcast sync 131072 59.0 60.0 100
point bcast b2b 131072 100.0 101.0 100
point reduce sync 4 1.0 2.0 100
point reduce b2b 4 1.0 2.0 100
point barrier sync 0 3.0 2.0 100
";
        let v = Verdicts::parse(run).unwrap();
        let m = |c, b| v.measured(c, 8, true, b);
        // 32 KiB lost one methodology by more than 1.25x, its geometric
        // mean is below 1: vetoed up to the next size measured.
        assert!(m(Collective::Bcast, 32768) && m(Collective::Bcast, 65535));
        assert!(!m(Collective::Bcast, 32767));
        // 64 KiB lost in the geometric mean, no methodology by 1.25x.
        assert!(m(Collective::Bcast, 65536) && m(Collective::Bcast, 131071));
        // Equal: not a loss. 128 KiB: won in both.
        assert!(!m(Collective::Bcast, 16384) && !m(Collective::Bcast, 131072));
        // Verified vetoes are the Open MPI file's: not libngcoll's (which
        // the MPICH file and the plan's rule read).
        assert!(!v.vetoes(Collective::Bcast, 8, true, 32768));
        assert_eq!(v.bounds(Collective::Bcast, 8, true, false).count(), 0);
        assert_eq!(
            v.bounds(Collective::Bcast, 8, true, true)
                .collect::<Vec<_>>(),
            vec![32768, 65536, 65536, 131072]
        );
        assert!(!m(Collective::Reduce, 4));
        assert!(m(Collective::Barrier, 0));
        // Another rank count or a run across nodes says nothing of these.
        assert!(!v.measured(Collective::Bcast, 4, true, 32768));
        assert!(!v.measured(Collective::Bcast, 8, false, 32768));
        // The last size measured, lost: its octave.
        let v =
            Verdicts::parse("# forced rules: 4 ranks, 2 nodes\npoint reduce sync 1024 2.0 1.0 9\n")
                .unwrap();
        assert!(
            v.measured(Collective::Reduce, 4, false, 2047)
                && !v.measured(Collective::Reduce, 4, false, 2048)
        );
        // A point line that does not parse, or a header without its counts.
        let e = Verdicts::parse("# forced rules: 4 ranks, 1 node\npoint reduce sync x 2.0 1.0 9\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(Verdicts::parse("# forced rules: four\n").is_err());
    }

    #[test]
    fn a_choice_line_that_does_not_parse_is_an_error_naming_it() {
        let e = Verdicts::parse(
            "x\nngcoll: comm 0 (8 ranks, 1 node) bcast 32 XB: ours binomial — predicted …: kept the library's own\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2") && e.contains("32 XB"), "{e}");
        let e = Verdicts::parse(
            "ngcoll: comm 0 (8 ranks, 1 node) gather 4 B–5 B: Open MPI 4.1 linear — predicted …",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("gather"), "{e}");
    }
}
