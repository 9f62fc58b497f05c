//! LogGOPSim's flags `-L -o -g -G -O -S`: integers (C `int`) in one time
//! unit of the simulator's choice (G and O per byte, S in bytes).
//!
//! LogGOPSim prices one message of s bytes 2o + L + (s−1)·max(G, O) end to
//! end (o at each end, the receiver's CPU busy until the last byte is in)
//! and lets the sender send again after g + (s−1)·G. Its rendezvous above
//! S only holds the sender until the receive is posted; it adds no time
//! to the message. It takes one parameter set, so the export gives one per
//! piece of the model's T(s) (see [`super::model`]): L = T(1) − 2o of the
//! piece's line (above S the handshake 2·EEL is in it), o = (o_s + o_r)/2,
//! g and G of the range, O = max(O_s, O_r) at most G (more would slow the
//! single message beyond T). A simulated message and ping-pong then take
//! T(s) and 2·T(s) (checked against LogGOPSim itself by
//! tests/export_consumers.rs and bench/exports.sh).
//!
//! The unit is the first of ns, ps, 100 fs, 10 fs, fs, 100 ps, 10 ps in
//! which T(s), the gap and the CPU time at each piece's ends stay within
//! [`UNIT_TOLERANCE`] of the model once rounded (so no parameter that
//! matters rounds to zero), every value fitting an `int`; a unit asked for
//! that fails this, or no unit at all, is an error saying why.

use std::fmt::Write as _;

use netgauge::EntryData;

use super::model::{pieces, Piece};
use super::{bad, Result};

/// Largest relative difference rounding may make to T(s), the gap or the
/// CPU time (half of the 1 % the simulation is to reproduce the model in).
pub const UNIT_TOLERANCE: f64 = 0.005;

/// LogGOPSim's time unit: a decimal fraction of a ns (LogGOPSim's
/// numbers have no unit of their own; a finer one keeps a fast network's G,
/// a coarser one fits a slow network's L in an `int`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Auto,
    Ns,
    Ps100,
    Ps10,
    Ps,
    Fs100,
    Fs10,
    Fs,
}

impl Unit {
    pub const ALL: [Unit; 8] = [
        Unit::Auto,
        Unit::Ns,
        Unit::Ps100,
        Unit::Ps10,
        Unit::Ps,
        Unit::Fs100,
        Unit::Fs10,
        Unit::Fs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Unit::Auto => "auto",
            Unit::Ns => "ns",
            Unit::Ps100 => "100ps",
            Unit::Ps10 => "10ps",
            Unit::Ps => "ps",
            Unit::Fs100 => "100fs",
            Unit::Fs10 => "10fs",
            Unit::Fs => "fs",
        }
    }

    /// Units per ns.
    pub fn per_ns(self) -> f64 {
        match self {
            Unit::Auto | Unit::Ns => 1.0,
            Unit::Ps100 => 10.0,
            Unit::Ps10 => 100.0,
            Unit::Ps => 1e3,
            Unit::Fs100 => 1e4,
            Unit::Fs10 => 1e5,
            Unit::Fs => 1e6,
        }
    }
}

impl std::str::FromStr for Unit {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Unit, String> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Unit::ALL.iter().map(|u| u.name()).collect();
                format!("unknown unit {s:?} ({})", names.join(", "))
            })
    }
}

/// One parameter set, in ns (per byte for G and O).
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq)]
pub struct FlagSet {
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub L_ns: f64,
    pub o_ns: f64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    pub O_ns_per_byte: f64,
    pub S_bytes: u64,
    /// What the set had to give up to reproduce T(s), for the comment.
    pub notes: Vec<String>,
    /// Why LogGOPSim cannot take these sizes at all, if it cannot: the set
    /// is then written as that comment alone.
    pub unusable: Option<String>,
    piece: Piece,
}

/// The parameter sets of an entry, one per piece of T(s).
pub fn flag_sets(e: &EntryData) -> Result<Vec<FlagSet>> {
    let ps = pieces(e);
    if ps.is_empty() {
        return Err(bad("the entry has no protocol ranges".into()));
    }
    let last_bytes = ps.last().map_or(1, |p| p.to_bytes);
    let s_bytes = e.S_bytes.unwrap_or(last_bytes);
    ps.into_iter()
        .map(|p| {
            let r = &p.range;
            let mut notes = Vec::new();
            if p.rendezvous {
                notes.push(format!(
                    "rendezvous: L holds the handshake 2·EEL = {:.1} ns",
                    2.0 * e.eel_ns
                ));
            }
            let mut o = (0.5 * (r.o_s_ns + r.o_r_ns)).max(0.0);
            // A LogGOPSim message costs 2o + L ≥ 0 plus its bytes: a line
            // steeper than the one below it can reach s = 1 below zero.
            let unusable = (p.at1_ns < 0.0 || !p.at1_ns.is_finite()).then(|| {
                format!(
                    "LogGOPSim cannot take these sizes: T(s) = {:.1} ns + (s-1)·{:.4} ns/B \
                     is below zero at s = 1, and LogGOPSim's 2o + L is not",
                    p.at1_ns, p.G_ns_per_byte
                )
            });
            if unusable.is_some() {
                o = 0.0;
            } else if 2.0 * o > p.at1_ns {
                o = 0.5 * p.at1_ns;
                notes.push(format!("o lowered to {o:.1} ns so that L is not negative"));
            }
            let o_max = r.O_s_ns_per_byte.max(r.O_r_ns_per_byte).max(0.0);
            let big_o = o_max.min(p.G_ns_per_byte);
            if big_o < o_max {
                notes.push(format!("O = max(O_s, O_r) = {o_max:.4} ns/B capped at G"));
            }
            Ok(FlagSet {
                from_bytes: p.from_bytes,
                to_bytes: p.to_bytes,
                L_ns: p.at1_ns - 2.0 * o,
                o_ns: o,
                g_ns: r.g_ns.max(0.0),
                G_ns_per_byte: p.G_ns_per_byte,
                O_ns_per_byte: big_o,
                S_bytes: s_bytes,
                notes,
                unusable,
                piece: p,
            })
        })
        .collect()
}

/// LogGOPSim's integers of a set in `unit`: L, o, g, G, O.
fn integers(f: &FlagSet, unit: Unit) -> [f64; 5] {
    let k = unit.per_ns();
    [f.L_ns, f.o_ns, f.g_ns, f.G_ns_per_byte, f.O_ns_per_byte].map(|x| (x * k).round())
}

/// Why `unit` cannot carry the sets, or None when it can: a value beyond
/// an `int`, or T(s), the gap or the sender's CPU time o + (s−1)·O at a
/// set's ends off the model by more than [`UNIT_TOLERANCE`] once rounded.
fn unit_problem(sets: &[FlagSet], unit: Unit) -> Option<String> {
    const NAMES: [&str; 5] = ["L", "o", "g", "G", "O"];
    let k = unit.per_ns();
    for f in sets.iter().filter(|f| f.unusable.is_none()) {
        let v = integers(f, unit);
        let exact = [f.L_ns, f.o_ns, f.g_ns, f.G_ns_per_byte, f.O_ns_per_byte];
        if let Some(i) = (0..5).find(|&i| v[i] > f64::from(i32::MAX)) {
            return Some(format!(
                "{} = {:.3} ns is beyond an int",
                NAMES[i], exact[i]
            ));
        }
        let [l, o, g, big_g, big_o] = v.map(|x| x / k);
        for s in [f.from_bytes, f.to_bytes] {
            let n = s.saturating_sub(1) as f64;
            // The parameter whose rounding moves the times at s most.
            let weight = [1.0, 2.0, 1.0, n, n];
            let moved = |i: usize| (v[i] / k - exact[i]).abs() * weight[i];
            let worst = (0..5)
                .max_by(|&a, &b| moved(a).total_cmp(&moved(b)))
                .unwrap_or(0);
            let checks = [
                (
                    "T",
                    2.0 * o + l + n * big_g.max(big_o),
                    f.piece.message_ns(s),
                ),
                ("gap", g + n * big_g, f.g_ns + n * f.G_ns_per_byte),
                ("o + (s-1)O", o + n * big_o, f.o_ns + n * f.O_ns_per_byte),
            ];
            for (what, sim, model) in checks {
                if (sim - model).abs() > UNIT_TOLERANCE * model.abs() {
                    return Some(format!(
                        "{what} at {s} B would be {sim:.3} ns against the model's {model:.3} ns \
                         ({} = {:.4} ns becomes {} {})",
                        NAMES[worst],
                        exact[worst],
                        v[worst],
                        unit.name()
                    ));
                }
            }
        }
    }
    None
}

/// The unit the sets are written in (those LogGOPSim can take): `asked`, or for [`Unit::Auto`] the
/// first unit (in the order of the module documentation) that carries them.
pub fn choose_unit(sets: &[FlagSet], asked: Unit) -> Result<Unit> {
    let candidates: &[Unit] = match asked {
        // The familiar units first, then the finer ones between ps and fs
        // (a fast network's G), then the coarser ones between ns and ps (a
        // long L with a small G).
        Unit::Auto => &[
            Unit::Ns,
            Unit::Ps,
            Unit::Fs100,
            Unit::Fs10,
            Unit::Fs,
            Unit::Ps100,
            Unit::Ps10,
        ],
        one => std::slice::from_ref(match Unit::ALL.iter().find(|u| **u == one) {
            Some(u) => u,
            None => &Unit::ALL[1],
        }),
    };
    let mut why = String::new();
    for &u in candidates {
        match unit_problem(sets, u) {
            None => return Ok(u),
            Some(w) => why = format!("in {}: {w}", u.name()),
        }
    }
    let hint = if asked == Unit::Auto {
        "no LogGOPSim unit carries this model"
    } else {
        "choose a finer --loggopsim-unit (or auto)"
    };
    Err(bad(format!("LogGOPSim export {why}; {hint}")))
}

/// One set's flags in `unit`.
pub fn flags(f: &FlagSet, unit: Unit) -> String {
    let [l, o, g, big_g, big_o] = integers(f, unit);
    format!(
        "-L {l} -o {o} -g {g} -G {big_g} -O {big_o} -S {}",
        f.S_bytes
    )
}

/// The export: every set with its sizes in comments, or with `bytes` the
/// flags of the set for that message size alone (one line, for `$(…)`).
pub fn render(e: &EntryData, asked: Unit, bytes: Option<u64>) -> Result<String> {
    let sets = flag_sets(e)?;
    let unit = choose_unit(&sets, asked)?;
    if let Some(b) = bytes {
        let f = sets
            .iter()
            .find(|f| b.max(1) <= f.to_bytes)
            .or(sets.last())
            .ok_or_else(|| bad("the entry has no protocol ranges".into()))?;
        if let Some(why) = &f.unusable {
            return Err(bad(format!("{} B: {why}", b)));
        }
        return Ok(format!("{}\n", flags(f, unit)));
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# LogGOPSim flags from netgauged: {} over {}; times in {} (the schedule's too)",
        e.peer,
        e.transport,
        unit.name()
    );
    let _ = writeln!(
        s,
        "# one set per size range (LogGOPSim takes one): the set of the sizes simulated"
    );
    if e.S_bytes.is_none() {
        let _ = writeln!(
            s,
            "# no rendezvous measured: -S is the largest measured size, {} B",
            sets[0].S_bytes
        );
    }
    for f in &sets {
        let _ = write!(s, "# sizes {}..{} B", f.from_bytes, f.to_bytes);
        if let Some(why) = &f.unusable {
            let _ = writeln!(s, ": {why}");
            continue;
        }
        for n in &f.notes {
            let _ = write!(s, "; {n}");
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "{}", flags(f, unit));
    }
    Ok(s)
}
