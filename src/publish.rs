//! From a probe's result to a segment entry (`netgauge::EntryData`, the one
//! schema of a published entry): the conversions, written once.

use std::time::{SystemTime, UNIX_EPOCH};

use std::collections::BTreeMap;

use netgauge::ext::{Bandwidth, EntryExtData, Estimate, Field, Regime, Status};
use netgauge::{flags, EntryData, RangeData, Reason, Scheme, TransportExt};

use crate::model::bandwidth::{BandwidthFit, BurstKind};
use crate::model::contention::{Conflict, ContentionFit, Est};
use crate::model::exchange::ExchangeFit;
use crate::model::{Interval, LogfpFit};
use crate::probe::ProbeResult;

/// The segment holds at most this many named intervals per entry.
const MAX_CI: usize = 16;

/// Wall-clock now, ns since the Unix epoch (what the segment records).
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The segment entry for (`peer`, `transport`) from one probe.
pub fn entry_from_probe(peer: &str, transport: &str, r: &ProbeResult) -> EntryData {
    let ranges = r
        .fit
        .ranges
        .iter()
        .take(netgauge::layout::MAX_RANGES)
        .cloned()
        .collect();
    // The first range's and LogfP's intervals first: what consumers use most.
    let mut ci95: Vec<(String, f64, f64)> = Vec::with_capacity(MAX_CI);
    let first: Vec<&str> = crate::model::fit::FIRST_RANGE_KEYS
        .into_iter()
        .chain(["logfp.f", "logfp.o_min_ns", "logfp.o_max_ns", "logfp.g_ns"])
        .collect();
    for &k in &first {
        if let Some(&(lo, hi)) = r.ci95.get(k) {
            ci95.push((k.to_string(), lo, hi));
        }
    }
    for (k, &(lo, hi)) in &r.ci95 {
        if ci95.len() >= MAX_CI {
            break;
        }
        if k.len() <= netgauge::layout::CI_NAME_MAX_BYTES && !first.contains(&k.as_str()) {
            ci95.push((k.clone(), lo, hi));
        }
    }
    let mut f = flags::VALID;
    if r.fit.L_negative {
        f |= flags::L_NEGATIVE;
    }
    if r.lost_rounds > 0 {
        f |= flags::DEGRADED;
    }
    let n_ranges = r.fit.ranges.len().min(netgauge::layout::MAX_RANGES);
    let mut ext = EntryExtData {
        ident: r.ident,
        instability: r.stability.cause,
        bandwidth: bandwidth_block(&r.bandwidth, n_ranges),
        latency: r
            .latency
            .iter()
            .take(netgauge::layout::MAX_LATENCY)
            .copied()
            .collect(),
        ..EntryExtData::default()
    };
    if ext.bandwidth.is_none() {
        ext.ident.set(Field::SustainedG, Status::NotAssessed);
        ext.ident.set(Field::BurstG, Status::NotAssessed);
    }
    let mut e = EntryData {
        peer: peer.to_string(),
        transport: transport.to_string(),
        ranges,
        eel_ns: r.fit.eel_ns,
        L_ns: r.fit.L_ns,
        S_bytes: r.fit.S_bytes,
        f: None,
        o_min_ns: f64::NAN,
        o_max_ns: f64::NAN,
        g_f_ns: f64::NAN,
        curve: Vec::new(),
        ci95,
        samples: r.samples.iter().map(|s| s.prtt1_ns.len() as u64).sum(),
        probe_bytes: r.probe_bytes,
        measured_unix_ns: unix_now_ns(),
        flags: f,
        ext,
    };
    if let Some(l) = &r.logfp {
        attach_logfp(&mut e, l, &r.ci95);
    }
    e
}

/// The segment's bandwidth block of a fit, None when there is no sustained
/// G to state (or its range is not among the published ones).
fn bandwidth_block(b: &BandwidthFit, n_ranges: usize) -> Option<Bandwidth> {
    if !b.sustained_G_ns_per_byte.is_finite() {
        return None;
    }
    let est = |v: f64, (lo, hi): Interval| Estimate::new(v, lo, hi);
    let range = b.range_index.filter(|&i| i < n_ranges);
    let mut out = Bandwidth::sustained(est(b.sustained_G_ns_per_byte, b.ci95), range);
    if let Some(burst) = &b.burst {
        let regime = match burst.kind {
            BurstKind::TokenBucket => Regime::TokenBucket,
            BurstKind::Credit => Regime::Credit,
        };
        out = out.with_burst(
            regime,
            est(burst.G_ns_per_byte, burst.ci95),
            burst.bytes.max(1),
        );
    }
    Some(out)
}

/// The segment entry of an exchange sweep ([`crate::model::exchange`]),
/// published beside the pair entry (`peer`, `transport`) under the transport
/// name [`netgauge::select::exchange_transport`] gives (e.g. "mpi-x4"). Each
/// range's line is g + (s − 1)·G: the time of one all-ranks exchange step
/// of s bytes (the gap of that pattern). EEL is the step of the smallest
/// size; no S (a rendezvous step is a range boundary of its own); no LogfP.
/// None if the name would not fit or there are no ranges.
pub fn entry_from_exchange(peer: &str, transport: &str, x: &ExchangeFit) -> Option<EntryData> {
    let mut buf = [0u8; netgauge::layout::TRANSPORT_MAX_BYTES];
    let name = netgauge::select::exchange_transport(transport, x.ranks, &mut buf)?;
    if x.ranges.is_empty() {
        return None;
    }
    let ranges = x
        .ranges
        .iter()
        .take(netgauge::layout::MAX_RANGES)
        .map(|r| RangeData {
            from_bytes: r.from_bytes,
            to_bytes: r.to_bytes,
            g_ns: r.step_ns,
            G_ns_per_byte: r.G_ns_per_byte,
            o_s_ns: 0.0,
            o_r_ns: 0.0,
            O_s_ns_per_byte: 0.0,
            O_r_ns_per_byte: 0.0,
        })
        .collect();
    let eel = x.points.first().map_or(f64::NAN, |p| p.step_ns);
    Some(EntryData {
        peer: peer.to_string(),
        transport: name.to_string(),
        ranges,
        eel_ns: eel,
        L_ns: f64::NAN,
        S_bytes: None,
        f: None,
        o_min_ns: f64::NAN,
        o_max_ns: f64::NAN,
        g_f_ns: f64::NAN,
        curve: Vec::new(),
        ci95: Vec::new(),
        samples: x.points.len() as u64,
        probe_bytes: 0,
        measured_unix_ns: unix_now_ns(),
        flags: flags::VALID,
        ext: Default::default(),
    })
}

/// Attach a LogfP fit to an entry (its f, o(P), gap and measured curve)
/// with its verdicts (`ci95`: its `logfp.*` intervals, if any).
pub fn attach_logfp(e: &mut EntryData, fit: &LogfpFit, ci95: &BTreeMap<String, Interval>) {
    crate::model::ident::identify_logfp(&mut e.ext.ident, fit, ci95);
    e.f = fit.f;
    e.o_min_ns = fit.o_min_ns;
    e.o_max_ns = fit.o_max_ns;
    e.g_f_ns = fit.g_ns;
    e.curve = fit
        .points
        .iter()
        .take(netgauge::layout::MAX_CURVE)
        .map(|p| (p.peers, p.o_ns, p.rtt_ns))
        .collect();
}

/// Write a conflict probe's fit into a transport's record (penalties per
/// scheme and k with their intervals, β; γ_o and γ_i need conflicts with
/// flows between other nodes, which a probe from one node does not run,
/// so they are stated as not measured). The bisection part is left as it
/// is.
pub fn set_contention(t: &mut TransportExt, fit: &ContentionFit, measured_unix_ns: u64) {
    let est = |e: &Est| Estimate::new(e.value, e.lo, e.hi);
    for (scheme, conflict) in Scheme::ALL.iter().zip(Conflict::ALL) {
        let rows: Vec<Estimate> = fit
            .scheme(conflict)
            .iter()
            .take(netgauge::layout::MAX_K)
            .map(|p| est(&p.penalty))
            .collect();
        let status = rows
            .iter()
            .map(|e| Status::of_nonnegative(e.value, e.lo, e.hi))
            .find(|s| *s != Status::Identified)
            .unwrap_or(if rows.is_empty() {
                Status::NotIdentified(Reason::NotMeasured)
            } else {
                Status::Identified
            });
        // At most MAX_K rows: set_penalties cannot fail.
        let _ = t.set_penalties(*scheme, &rows, status);
    }
    let b = est(&fit.beta);
    let not_measured = (Estimate::NONE, Status::NotIdentified(Reason::NotMeasured));
    t.set_sharing(
        (b, Status::of_nonnegative(b.value, b.lo, b.hi)),
        not_measured,
        not_measured,
    );
    t.contention_unix_ns = measured_unix_ns;
}

/// Write an effective bisection bandwidth into a transport's record (its
/// contention part is left as it is).
pub fn set_bisection(t: &mut TransportExt, b: &netgauge::Bisection) {
    let status = Status::of_nonnegative(b.median_bytes_per_s, b.min_bytes_per_s, b.max_bytes_per_s);
    t.set_bisection(*b, status);
}
