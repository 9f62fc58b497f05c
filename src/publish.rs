//! A probe result as a segment entry, and one-shot publishing
//! (`ngctl probe --publish`).

use std::path::Path;

use netgauge::{flags, EntryData, RangeData, SegmentWriter};

use crate::probe::ProbeResult;

/// Segment capacity used when `ngctl probe --publish` creates the segment.
pub const ONE_SHOT_CAPACITY: usize = 64;

/// The segment entry for `result`, measured against `peer` over `transport`.
pub fn entry_from_probe(result: &ProbeResult, peer: &str, transport: &str) -> EntryData {
    let ranges: Vec<RangeData> = result
        .fit
        .ranges
        .iter()
        .take(8)
        .map(|r| RangeData {
            from_bytes: r.from_bytes,
            to_bytes: r.to_bytes,
            g_ns: r.g_ns,
            G_ns_per_byte: r.G_ns_per_byte,
            o_s_ns: r.o_s_ns,
            o_r_ns: r.o_r_ns,
            O_s_ns_per_byte: r.O_s_ns_per_byte,
            O_r_ns_per_byte: r.O_r_ns_per_byte,
        })
        .collect();
    let mut f = flags::VALID;
    if result.fit.L_negative {
        f |= flags::L_NEGATIVE;
    }
    let (lf, o_min_ns, o_max_ns, g_f_ns, curve) = match &result.logfp {
        Some(l) => (
            l.f,
            l.o_min_ns,
            l.o_max_ns,
            l.g_ns,
            l.points
                .iter()
                .take(32)
                .map(|p| (p.peers, p.o_ns, p.rtt_ns))
                .collect(),
        ),
        None => (None, 0.0, 0.0, 0.0, Vec::new()),
    };
    let ci95 = result
        .ci95
        .iter()
        .filter(|(k, _)| k.len() <= 31)
        .take(16)
        .map(|(k, (lo, hi))| (k.clone(), *lo, *hi))
        .collect();
    let measured_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    EntryData {
        peer: peer.chars().take(63).collect(),
        transport: transport.chars().take(15).collect(),
        ranges,
        eel_ns: result.fit.eel_ns,
        L_ns: result.fit.L_ns,
        S_bytes: result.fit.S_bytes,
        f: lf,
        o_min_ns,
        o_max_ns,
        g_f_ns,
        curve,
        ci95,
        samples: result.samples.iter().map(|s| s.prtt1_ns.len() as u64).sum(),
        probe_bytes: result.probe_bytes,
        measured_unix_ns,
        flags: f,
    }
}

/// Write (insert or replace) `entry` into the segment at `path`, creating it
/// if needed. Returns the entry's index.
pub fn publish(path: &Path, entry: &EntryData) -> anyhow::Result<usize> {
    let node: String = hostname().chars().take(63).collect();
    let mut w = SegmentWriter::create_or_open(path, ONE_SHOT_CAPACITY, &node, "ngctl probe")
        .map_err(|e| anyhow::anyhow!("cannot open segment {}: {e}", path.display()))?;
    let idx = w
        .upsert(entry)
        .map_err(|e| anyhow::anyhow!("cannot publish into {}: {e}", path.display()))?;
    w.heartbeat();
    Ok(idx)
}

/// This host's name ("localhost" if the kernel does not say).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its full length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
