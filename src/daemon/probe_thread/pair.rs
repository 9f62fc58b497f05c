//! The jobs of a pair meeting, each over every transport of the pair:
//! a full sweep (published unless disturbed; a class sweep also as the
//! class's entry) and a re-check or confirmation (compared with the
//! pair's or the class's entry), and what a failed session leaves.

use std::time::Instant;

use netgauge::{flags, EntryData};

use super::{failed, State};
use crate::cluster::recheck::{
    compare, disturbed, recheck_disturbed, Check, DisturbancePolicy, RecheckPolicy,
};
use crate::cluster::schedule::{Decline, Job, Outcome, Purpose, Reference};
use crate::control::SizePlan;
use crate::daemon::history::{Deviation, Event};
use crate::daemon::job::{full_sweep, recheck, recheck_sizes, JobCtx, JobError, Meeting};
use crate::daemon::publisher::Outcome as Publish;
use crate::daemon::sched::PeerPhase;
use crate::daemon::state::Provenance;
use crate::link::Kind;
use crate::model::fit::size_points;
use crate::transport::kind::PeerEndpoint;

/// What a job did: its outcome, and whether it ran over every transport
/// of the pair (a sweep that left out parts published at an earlier
/// meeting did not: its cost is not a full sweep's).
pub(super) struct Ran {
    pub outcome: Outcome,
    pub whole: bool,
}

/// Run one admitted job of a pair over each of its transports.
pub(super) fn run_job(ctx: &JobCtx<'_>, st: &mut State<'_>, m: &mut Meeting, job: Job) -> Ran {
    let whole = |outcome| Ran {
        outcome,
        whole: true,
    };
    match job {
        Job::FullSweep(purpose) => sweep_job(ctx, st, m, purpose),
        Job::Recheck(r) | Job::Confirm(r) => whole(recheck_job(ctx, st, m, r)),
        Job::Fanout => whole(Outcome::Declined(Decline::NotExpected)),
    }
}

fn sweep_job(ctx: &JobCtx<'_>, st: &mut State<'_>, m: &mut Meeting, purpose: Purpose) -> Ran {
    let peer = m.peer;
    let name = ctx.shared.peers[peer].name.clone();
    let class = st.classes[peer].clone();
    let (mut swept, mut kept, mut disturbed_any) = (0, 0, false);
    let max_age_s = ctx.cfg.schedule.full_sweep_max_age_s;
    for (i, kind) in st.kinds_of(peer) {
        // A part this sweep already published at an earlier meeting (and
        // still published) is not measured again: each transport's entry
        // stands alone, and needing every transport undisturbed in one
        // meeting re-sweeps the clean ones while a noisy one holds the
        // pair back.
        let held = st.per_target[i]
            .held
            .map(|(p, at)| (p, at.elapsed().as_secs_f64()));
        let published = st.known.contains_key(&(name.clone(), kind));
        if let Some(age_s) = part_kept(held, purpose, published, max_age_s) {
            tracing::debug!(
                "{name} over {kind}: swept {age_s:.0} s ago by this unfinished {}; left out",
                Job::FullSweep(purpose).name()
            );
            kept += 1;
            continue;
        }
        let started = Instant::now();
        let r = m.session(ctx, kind, SizePlan::Full, |l| {
            full_sweep(l, ctx.cfg, kind, ctx.clock)
        });
        match r {
            Ok(r) => {
                m.bytes += r.probe_bytes;
                if let Some(d) = disturbed(&r, &DisturbancePolicy::default()) {
                    tracing::info!(
                        "{name} over {kind}: sweep disturbed ({d}); not published, tried again at the next meeting"
                    );
                    disturbed_any = true;
                    st.per_target[i].last_error = Some(format!("sweep disturbed: {d}"));
                    continue;
                }
                let now_ns = crate::publish::unix_now_ns();
                let mut e = crate::publish::entry_from_probe(&name, kind.name(), &r);
                if purpose == Purpose::Repair {
                    e.flags |= flags::CHANGED;
                    e.ext.changed_unix_ns = now_ns;
                }
                tracing::info!(
                    "{name} over {kind} ({}): large-message bandwidth {}; EEL {:.0} ns, g {:.0} ns, G {:.4} ns/B, S {:?} ({} B of probes in {:.1} s)",
                    Job::FullSweep(purpose).name(),
                    crate::report::bandwidth_line(&r.bandwidth),
                    r.fit.eel_ns,
                    e.ranges.first().map_or(f64::NAN, |x| x.g_ns),
                    e.ranges.last().map_or(f64::NAN, |x| x.G_ns_per_byte),
                    r.fit.S_bytes,
                    r.probe_bytes,
                    started.elapsed().as_secs_f64()
                );
                let raw = kind.descriptor().endpoint == PeerEndpoint::MacOnLink;
                let provenance = Provenance {
                    local: ctx.shared.local_ip,
                    peer_address: m.address(),
                    interface: ctx.shared.peers[peer].interface.clone().filter(|_| raw),
                    peer_mac: m.announced_mac().filter(|_| raw),
                };
                let event = if purpose == Purpose::Repair {
                    if let Some(old) = st.known.get(&(name.clone(), kind)) {
                        tracing::info!("{name} over {kind}: changed: {}", drift_line(old, &e));
                    }
                    Event::Repair
                } else {
                    Event::Sweep
                };
                if purpose == Purpose::Class {
                    let mut c = e.clone();
                    c.peer = class.name.clone();
                    c.flags &= !flags::CHANGED;
                    st.publish(c, kind, provenance.clone(), Event::Sweep);
                }
                st.publish(e, kind, provenance, event);
                let t = &mut st.per_target[i];
                t.phase = PeerPhase::Known;
                t.failures = 0;
                t.last_probe_unix_ns = Some(now_ns);
                t.last_error = None;
                t.held = Some((purpose, Instant::now()));
                swept += 1;
            }
            Err(e) if e.refused_transport() => {
                tracing::debug!("{name}: {kind} refused: {e}");
                st.per_target[i].last_error = Some(e.to_string());
            }
            Err(e) => {
                let outcome = match e.declined() {
                    Some(d) => {
                        tracing::debug!("{name}: {kind} session declined: {e}");
                        Outcome::Declined(d)
                    }
                    None => job_failed(ctx, st, m, kind, &e),
                };
                return Ran {
                    outcome,
                    whole: kept == 0,
                };
            }
        }
    }
    let outcome = if disturbed_any || swept + kept == 0 {
        Outcome::Disturbed { bytes: m.bytes }
    } else {
        for (i, _) in st.kinds_of(peer) {
            st.per_target[i].held = None;
        }
        Outcome::Swept { bytes: m.bytes }
    };
    Ran {
        outcome,
        whole: kept == 0,
    }
}

/// Whether a transport's part of a pair's full sweep for `purpose` stands
/// from an earlier meeting (its age, s): `held` is the purpose and age of
/// the part it published while the rest of that sweep was not, if any;
/// `published`, whether its entry still is (a dropped entry is measured
/// again).
fn part_kept(
    held: Option<(Purpose, f64)>,
    purpose: Purpose,
    published: bool,
    max_age_s: f64,
) -> Option<f64> {
    held.filter(|&(p, age_s)| p == purpose && published && age_s < max_age_s)
        .map(|(_, age_s)| age_s)
}

fn recheck_job(
    ctx: &JobCtx<'_>,
    st: &mut State<'_>,
    m: &mut Meeting,
    reference: Reference,
) -> Outcome {
    let peer = m.peer;
    let name = ctx.shared.peers[peer].name.clone();
    let class = st.classes[peer].name.clone();
    let start_bytes = m.bytes;
    let (mut agrees, mut disturbed_any) = (true, false);
    for (i, kind) in st.kinds_of(peer) {
        let r = m.session(ctx, kind, recheck_sizes(), |l| {
            recheck(l, ctx.cfg, ctx.clock)
        });
        let (samples, bytes) = match r {
            Ok(x) => x,
            Err(e) if e.refused_transport() => {
                st.per_target[i].last_error = Some(e.to_string());
                continue;
            }
            Err(e) => {
                if let Some(d) = e.declined() {
                    tracing::debug!("{name}: {kind} session declined: {e}");
                    return Outcome::Declined(d);
                }
                return job_failed(ctx, st, m, kind, &e);
            }
        };
        m.bytes += bytes;
        let key = match reference {
            Reference::Pair => (name.clone(), kind),
            Reference::Class => (class.clone(), kind),
            Reference::Nothing => continue,
        };
        let Some(entry) = st.known.get(&key) else {
            continue;
        };
        let points = size_points(&samples);
        if let Some(d) = recheck_disturbed(&samples, &points, &DisturbancePolicy::default()) {
            tracing::info!(
                "{name} over {kind}: re-check disturbed ({d}); neither agrees nor disagrees, re-checked at the next meeting"
            );
            st.per_target[i].last_error = Some(format!("re-check disturbed: {d}"));
            disturbed_any = true;
            continue;
        }
        let spread = st.spread.entry(key).or_default();
        let v = compare(&points, entry, &recheck_policy(entry), spread);
        if v.agrees {
            spread.record_points(&points);
        }
        tracing::debug!(
            "{name} over {kind}: re-check {}: {}",
            if v.agrees { "agrees" } else { "disagrees" },
            checks_line(v.checks.iter())
        );
        let deviation = Deviation::of(&v);
        let now_ns = crate::publish::unix_now_ns();
        let t = &mut st.per_target[i];
        t.last_probe_unix_ns = Some(now_ns);
        t.failures = 0;
        t.last_error = None;
        if v.agrees {
            if t.phase != PeerPhase::New {
                t.phase = PeerPhase::Known;
            }
            if reference == Reference::Pair {
                let _ = st.tx.send(Publish::Confirmed {
                    peer: name.clone(),
                    transport: kind.name().to_string(),
                    at_unix_ns: now_ns,
                    deviation,
                });
            }
        } else {
            agrees = false;
            if t.phase != PeerPhase::New {
                t.phase = PeerPhase::Suspect;
            }
            tracing::info!(
                "{name} over {kind}: re-check disagrees with the {} entry ({})",
                if reference == Reference::Pair {
                    "pair's"
                } else {
                    "class's"
                },
                checks_line(v.checks.iter().filter(|c| !c.agrees))
            );
            let _ = st.tx.send(Publish::Disagreed {
                peer: if reference == Reference::Pair {
                    name.clone()
                } else {
                    class.clone()
                },
                transport: kind.name().to_string(),
                at_unix_ns: now_ns,
                deviation,
            });
        }
    }
    let bytes = m.bytes - start_bytes;
    if disturbed_any && agrees {
        Outcome::Disturbed { bytes }
    } else {
        Outcome::Rechecked { agrees, bytes }
    }
}

/// A re-check's comparisons as the log states them.
fn checks_line<'a>(checks: impl Iterator<Item = &'a Check>) -> String {
    checks
        .map(|c| {
            format!(
                "{:?} at {} B: {:.0} ns against {:.0} ± {:.0}",
                c.quantity, c.size_bytes, c.measured_ns, c.reference_ns, c.tolerance_ns
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What changed from `old` to `new` as the drift log states it: EEL and
/// the large-message bandwidth, old → new.
pub(super) fn drift_line(old: &EntryData, new: &EntryData) -> String {
    let sustained = |e: &EntryData| {
        e.ext
            .bandwidth
            .as_ref()
            .map_or(f64::NAN, |b| b.sustained_G_ns_per_byte.value)
    };
    let (g0, g1) = (sustained(old), sustained(new));
    let change = |a: f64, b: f64| {
        if a.is_finite() && b.is_finite() && a != 0.0 {
            format!(" ({:+.0} %)", (b / a - 1.0) * 100.0)
        } else {
            String::new()
        }
    };
    format!(
        "EEL {:.0} → {:.0} ns{}, large-message bandwidth {} → {}{} (G {:.3} → {:.3} ns/B)",
        old.eel_ns,
        new.eel_ns,
        change(old.eel_ns, new.eel_ns),
        crate::report::fmt_rate(g0),
        crate::report::fmt_rate(g1),
        change(1.0 / g0, 1.0 / g1),
        g0,
        g1
    )
}

/// How a re-check is compared with `entry`. A restored entry is held to
/// the plain tolerance: a re-check too noisy to tell does not make it
/// current.
pub(in crate::daemon) fn recheck_policy(entry: &EntryData) -> RecheckPolicy {
    if entry.flags & flags::RESTORED != 0 {
        RecheckPolicy {
            k_hw: 0.0,
            k_spread: 0.0,
            ..RecheckPolicy::default()
        }
    } else {
        RecheckPolicy::default()
    }
}

/// A session of a job failed mid-way: the partner stopped answering.
fn job_failed(
    ctx: &JobCtx<'_>,
    st: &mut State<'_>,
    m: &Meeting,
    kind: Kind,
    e: &JobError,
) -> Outcome {
    let name = &ctx.shared.peers[m.peer].name;
    tracing::warn!("{name} over {kind}: probe failed: {e}");
    failed(st, name, m.peer, &format!("{kind}: {e}"));
    Outcome::Failed { bytes: m.bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_part_of_an_unfinished_sweep_is_kept_for_that_purpose_only() {
        let day = 86_400.0;
        // Published 30 s ago by this purpose's sweep, entry still there.
        assert_eq!(
            part_kept(Some((Purpose::Pair, 30.0)), Purpose::Pair, true, day),
            Some(30.0)
        );
        // Nothing held: measured.
        assert_eq!(part_kept(None, Purpose::Pair, true, day), None);
        // Held for another purpose (a class sweep's part does not stand for
        // a repair, which re-measures the whole pair).
        assert_eq!(
            part_kept(Some((Purpose::Class, 30.0)), Purpose::Repair, true, day),
            None
        );
        // The entry was dropped since (the peer moved): measured again.
        assert_eq!(
            part_kept(Some((Purpose::Pair, 30.0)), Purpose::Pair, false, day),
            None
        );
        // Older than a sweep may be: measured again.
        assert_eq!(
            part_kept(Some((Purpose::Pair, day + 1.0)), Purpose::Pair, true, day),
            None
        );
        // A maximum age that is not a number keeps nothing.
        assert_eq!(
            part_kept(Some((Purpose::Pair, 1.0)), Purpose::Pair, true, f64::NAN),
            None
        );
    }
}
