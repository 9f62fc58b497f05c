//! The `NETGAUGE_COLL=log` summary printed at MPI_Finalize: one line per
//! (collective, size class, communicator) with the choice and its
//! prediction.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use netgauge::select::{Algorithm, Collective, Library};

use crate::plan::{self, class_bounds, CLASSES};
use crate::runtime::CommState;

fn fmt_bytes(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn fmt_ns(ns: f32) -> String {
    let ns = f64::from(ns);
    if !ns.is_finite() {
        "-".into()
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The log lines of one communicator (one per collective and size class
/// it was called with).
pub fn lines(st: &CommState, lib: Library) -> String {
    let mut out = String::new();
    for coll in Collective::ALL {
        for c in 0..CLASSES {
            let n = st
                .calls
                .get(coll as usize * CLASSES + c)
                .map_or(0, |x| x.load(Ordering::Relaxed));
            if n == 0 {
                continue;
            }
            let s = st.plan.slot(coll, c);
            let (lo, hi) = class_bounds(c);
            let size = if coll == Collective::Barrier {
                String::new()
            } else if lo == hi {
                format!(" {}", fmt_bytes(lo))
            } else {
                format!(" {}–{}", fmt_bytes(lo), fmt_bytes(hi))
            };
            let libname = plan::lib_sched_name(s.lib_sched);
            let alt = s
                .alt()
                .and_then(|k| Some((st.plan.alts().get(k)?, st.alt_made(k))));
            // The slot's "ours" prices are the alternative's where it names one.
            let ours = match alt {
                Some((a, _)) => a.name(),
                None => Algorithm::from_u32(s.best_ours)
                    .map_or("-", |a| a.name())
                    .to_string(),
            };
            let choice = match s.algorithm() {
                Some(a) if a == Algorithm::BcastChain && s.seg_bytes == 0 => {
                    format!("ours {} (unsegmented)", a.name())
                }
                Some(a) if a == Algorithm::BcastChain => {
                    format!("ours {} ({} B segments)", a.name(), s.seg_bytes)
                }
                Some(a) => format!("ours {}", a.name()),
                // Another of the library's algorithms: run on a duplicate
                // made with it forced, or (the duplicate refused on some
                // rank) the library's own choice, or never run.
                None => match alt {
                    Some((a, Some(true))) => format!("{} {} (forced)", lib.name(), a.name()),
                    Some((a, Some(false))) => format!(
                        "{} {} (could not be forced: the library's own)",
                        lib.name(),
                        a.name()
                    ),
                    Some((a, None)) => format!("{} {} (forced, not run)", lib.name(), a.name()),
                    None => format!("{} {libname}", lib.name()),
                },
            };
            // Where ours was chosen: what its last trial against the
            // library's own measured, and which it kept.
            let trial = match (s.replaces_library(), st.trial_of(coll, c)) {
                (false, _) | (_, None) => String::new(),
                (true, Some(t)) => match t.outcome() {
                    None => "; trial not finished".into(),
                    Some(o) => format!(
                        "; trial (the ranks' median times, summed) ours {} vs {} {}, the last of {}: {}",
                        fmt_ns(o.ours_ns as f32),
                        lib.name(),
                        fmt_ns(o.library_ns as f32),
                        o.rounds,
                        if o.kept_ours {
                            "kept ours"
                        } else {
                            "kept the library's own"
                        }
                    ),
                },
            };
            let _ = writeln!(
                out,
                "ngcoll: comm {} ({} ranks, {} node{}) {}{}: {} — predicted back to back ours {} {} vs {} {} {}, synchronized {} vs {}; {} call{}{}",
                st.id,
                st.size,
                st.nodes,
                if st.nodes == 1 { "" } else { "s" },
                coll.name(),
                size,
                choice,
                ours,
                fmt_ns(s.ours_b2b_ns),
                lib.name(),
                libname,
                fmt_ns(s.lib_b2b_ns),
                fmt_ns(s.ours_sync_ns),
                fmt_ns(s.lib_sync_ns),
                n,
                if n == 1 { "" } else { "s" },
                trial
            );
        }
    }
    out
}
