//! `ngctl overlap`: Bell et al.'s CPU-overlap test once, against an `ngctl
//! serve` responder (udp, rdma, msg) or in the simulator; with `publish`,
//! the fractions go into the entry of (peer, transport) of a segment, one
//! per protocol range of that entry.

use netgauge::{Estimate, Overlap, RangeField, Status};

use super::contention::{on_servers, Servers};
use super::{usage, OpsError};
use crate::model::overlap::OverlapPoint;
use crate::probe::overlap::{self, OverlapOptions, OverlapResult};
use crate::sweep::Progress;

/// What `ngctl overlap` is asked to do.
#[derive(Clone, Debug)]
pub struct OverlapArgs {
    pub servers: Servers,
    pub options: OverlapOptions,
    /// Write the fractions into the entry of this peer and the servers'
    /// transport in this segment: (path, peer).
    pub publish: Option<(String, String)>,
}

/// Measure; publish when asked.
pub fn overlap(
    a: &OverlapArgs,
    progress: &mut dyn Progress,
    note: &mut dyn FnMut(super::Note),
) -> Result<OverlapResult, OpsError> {
    let o = &a.options;
    let largest = o.sizes.iter().copied().max().unwrap_or(1);
    let result = on_servers(
        &a.servers,
        "overlap",
        largest,
        progress,
        |l, clock, p| overlap::run(l, clock, 0, o, p),
        |m, clock, p| overlap::run(m, clock, 0, o, p),
    )?;
    if let Some((path, peer)) = &a.publish {
        let transport = a.servers.kind.name();
        publish_overlap(path, peer, transport, &result.points)?;
        note(super::Note::Published {
            peer: peer.clone(),
            transport: transport.into(),
            path: path.clone(),
        });
    }
    Ok(result)
}

/// The measured point for a range of `from..=to` bytes: the largest size
/// inside it, else the one nearest to it.
pub fn point_for_range(points: &[OverlapPoint], from: u64, to: u64) -> Option<&OverlapPoint> {
    let inside = points
        .iter()
        .filter(|p| (from..=to).contains(&p.size_bytes))
        .max_by_key(|p| p.size_bytes);
    let dist = |p: &&OverlapPoint| {
        if p.size_bytes < from {
            from - p.size_bytes
        } else {
            p.size_bytes.saturating_sub(to)
        }
    };
    inside.or_else(|| points.iter().min_by_key(dist))
}

fn publish_overlap(
    path: &str,
    peer: &str,
    transport: &str,
    points: &[OverlapPoint],
) -> Result<(), OpsError> {
    let mut w = super::segment::writer(path, "ngctl overlap")?;
    let mut d = w
        .entries()
        .into_iter()
        .find(|e| e.peer == peer && e.transport == transport)
        .ok_or_else(|| OpsError::NoEntry {
            peer: peer.into(),
            transport: transport.into(),
            path: path.into(),
        })?;
    let est = |e: &crate::model::contention::Est| Estimate {
        value: e.value,
        lo: e.lo,
        hi: e.hi,
    };
    let mut overlap = Vec::with_capacity(d.ranges.len());
    for (i, r) in d.ranges.iter().enumerate() {
        let p = point_for_range(points, r.from_bytes, r.to_bytes)
            .ok_or_else(|| usage("no overlap measured"))?;
        overlap.push(Overlap {
            send: est(&p.send),
            recv: est(&p.recv),
        });
        let status =
            |e: &crate::model::contention::Est| Status::of_nonnegative(e.value, e.lo, e.hi);
        d.ext
            .ident
            .set_range(i, RangeField::OverlapSend, status(&p.send));
        d.ext
            .ident
            .set_range(i, RangeField::OverlapRecv, status(&p.recv));
    }
    d.ext.overlap = overlap;
    w.upsert(&d).map_err(|source| OpsError::Publish {
        path: path.into(),
        source,
    })?;
    Ok(())
}
