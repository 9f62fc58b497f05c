//! What libngcoll measured, read back into the rule exports.
//!
//! libngcoll tries each class where the model chose one of our algorithms
//! against the library's own, in the program's own calls, and keeps the
//! faster (`ngcoll::trial`); its `NETGAUGE_COLL=log` lines say how each
//! trial ended. A rules file has no such trial: the library runs what the
//! file names on every call. So where a preloaded run of the program
//! measured the library's own faster than the algorithm the model chose,
//! `ngctl export --trials LOG` leaves that collective and size class to the
//! library's own decision for that communicator size, whatever the model
//! predicts.
//!
//! The lines read (one per collective, size class and communicator; any
//! other line is passed over):
//!
//! ```text
//! ngcoll: comm 0 (8 ranks, 1 node) bcast 32 KiB–49151 B: ours binomial — …; trial (…) …: kept the library's own
//! ```

use netgauge::select::Collective;

use super::{bad, Result};

/// One class that a trial gave back to the library's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Veto {
    pub ranks: u32,
    pub coll: Collective,
    /// The class's bounds, bytes (of one rank's block for allgather and
    /// alltoall, as libngcoll classes them and the exports' grid counts).
    pub lo: u64,
    pub hi: u64,
}

/// The vetoes of one or more logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdicts(pub Vec<Veto>);

const KEPT_LIBRARY: &str = ": kept the library's own";

impl Verdicts {
    /// The vetoes in a log's text. A line that is libngcoll's trial line
    /// but does not parse is an error (a log of another version), naming
    /// the line.
    pub fn parse(text: &str) -> Result<Verdicts> {
        let mut v = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if !line.starts_with("ngcoll: comm ") || !line.ends_with(KEPT_LIBRARY) {
                continue;
            }
            let veto = parse_line(line).ok_or_else(|| {
                bad(format!(
                    "line {}: not a libngcoll trial line: {line}",
                    n + 1
                ))
            })?;
            v.push(veto);
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

    /// A trial over `ranks` gave `coll` at `m` bytes to the library's own.
    pub fn vetoes(&self, coll: Collective, ranks: usize, m: u64) -> bool {
        self.0
            .iter()
            .any(|v| v.coll == coll && v.ranks as usize == ranks && (v.lo..=v.hi).contains(&m))
    }
}

/// `ngcoll: comm ID (P ranks, N node[s]) COLL LO[–HI]: …`
fn parse_line(line: &str) -> Option<Veto> {
    let rest = line.strip_prefix("ngcoll: comm ")?;
    let (_id, rest) = rest.split_once(" (")?;
    let (ranks, rest) = rest.split_once(" ranks, ")?;
    let ranks: u32 = ranks.parse().ok()?;
    let (_nodes, rest) = rest.split_once(") ")?;
    let (head, _) = rest.split_once(": ")?;
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
    (lo <= hi).then_some(Veto {
        ranks,
        coll,
        lo,
        hi,
    })
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
ngcoll: comm 0 (8 ranks, 1 node): parameters from vm/mpi and its all-ranks exchange
ngcoll: comm 0 (8 ranks, 1 node) bcast 16 KiB–24575 B: Open MPI 4.1 binomial — predicted back to back ours binomial 16.5 µs vs Open MPI 4.1 binomial 16.5 µs, synchronized 22.9 µs vs 22.9 µs; 3426 calls
ngcoll: comm 0 (8 ranks, 1 node) bcast 32 KiB–49151 B: ours binomial — predicted back to back ours binomial 23.1 µs vs Open MPI 4.1 linear 49.3 µs, synchronized 31.0 µs vs 49.3 µs; 4924 calls; trial (the ranks' median times, summed) ours 336.6 µs vs Open MPI 4.1 227.9 µs, the last of 4: kept the library's own
ngcoll: comm 0 (8 ranks, 1 node) allreduce 8 KiB–12287 B: ours recursive_doubling — predicted back to back ours recursive_doubling 25.1 µs vs Open MPI 4.1 rabenseifner 36.7 µs, synchronized 25.1 µs vs 36.7 µs; 3475 calls; trial (the ranks' median times, summed) ours 85.3 µs vs Open MPI 4.1 115.7 µs, the last of 4: kept ours
ngcoll: comm 3 (4 ranks, 2 nodes) alltoall 1 MiB–1572863 B: ours pairwise — predicted …; trial (…) ours 3.40 ms vs Open MPI 4.1 3.1 ms, the last of 2: kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) reduce 4 B: ours binomial — predicted …; trial (…): kept the library's own
ngcoll: comm 2 (3 ranks, 1 node) barrier: ours dissemination — predicted …; trial (…): kept the library's own
ngcoll: world rank 0: shadow communicators: 7 released with their communicators
";

    #[test]
    fn only_classes_given_back_to_the_library_are_vetoed() {
        let v = Verdicts::parse(LOG).unwrap();
        assert_eq!(v.0.len(), 4, "{v:?}");
        // Inside the class, at both bounds, and only there.
        assert!(v.vetoes(Collective::Bcast, 8, 32 << 10));
        assert!(v.vetoes(Collective::Bcast, 8, 49151));
        assert!(!v.vetoes(Collective::Bcast, 8, 49152));
        assert!(!v.vetoes(Collective::Bcast, 8, (32 << 10) - 1));
        // Another communicator size, another collective.
        assert!(!v.vetoes(Collective::Bcast, 4, 32 << 10));
        assert!(!v.vetoes(Collective::Reduce, 8, 32 << 10));
        // A trial that kept ours, and a line without a trial: no veto.
        assert!(!v.vetoes(Collective::Allreduce, 8, 8 << 10));
        assert!(!v.vetoes(Collective::Bcast, 8, 16 << 10));
        // MiB, a one-size class, the barrier's single class.
        assert!(v.vetoes(Collective::Alltoall, 4, 1 << 20));
        assert!(v.vetoes(Collective::Reduce, 3, 4));
        assert!(!v.vetoes(Collective::Reduce, 3, 5));
        assert!(v.vetoes(Collective::Barrier, 3, 0));
    }

    #[test]
    fn a_trial_line_that_does_not_parse_is_an_error_naming_it() {
        let e = Verdicts::parse(
            "x\nngcoll: comm 0 (8 ranks, 1 node) bcast 32 XB: …: kept the library's own\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 2") && e.contains("32 XB"), "{e}");
        let e = Verdicts::parse(
            "ngcoll: comm 0 (8 ranks, 1 node) gather 4 B: …: kept the library's own",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("gather"), "{e}");
    }
}
