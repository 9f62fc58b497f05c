//! The point-to-point model the simulator exports reproduce: T(s), one
//! message end to end, as `netgauge::select` prices it (its module
//! documentation): EEL + (s−1)·G in the first range; a later range starts
//! where the range below ends and adds its own G per byte; above S the
//! rendezvous handshake 2·EEL. The per-byte overheads are CPU time, not
//! part of T (they are the same bytes moving, seen from each end).
//!
//! T is linear within a [`Piece`]: a protocol range, split at S + 1 when S
//! falls inside one.

use netgauge::{EntryData, RangeData};

/// Sizes over which T(s) = `at1_ns` + (s−1)·`G_ns_per_byte`.
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub from_bytes: u64,
    /// Inclusive; the last piece's line also holds beyond it.
    pub to_bytes: u64,
    /// The line's value at s = 1, rendezvous handshake included.
    pub at1_ns: f64,
    pub G_ns_per_byte: f64,
    /// The sizes are above S: a rendezvous handshake is in `at1_ns`.
    pub rendezvous: bool,
    /// The protocol range the sizes are in.
    pub range: RangeData,
}

impl Piece {
    /// T(s) on this piece's line.
    pub fn message_ns(&self, msg_bytes: u64) -> f64 {
        netgauge::line_ns(self.at1_ns, self.G_ns_per_byte, msg_bytes)
    }
}

/// The measured EEL, or without one (0 or not finite) L + o_s + o_r of the
/// first range, as the selector takes it.
fn eel_ns(e: &EntryData) -> f64 {
    if e.eel_ns.is_finite() && e.eel_ns > 0.0 {
        return e.eel_ns;
    }
    let r = e.ranges.first().cloned().unwrap_or_default();
    e.L_ns + r.o_s_ns + r.o_r_ns
}

/// T(s)'s pieces over the entry's ranges, in size order.
pub fn pieces(e: &EntryData) -> Vec<Piece> {
    let eel = eel_ns(e);
    let handshake_ns = 2.0 * eel;
    let mut out: Vec<Piece> = Vec::new();
    // The previous range's line (at s = 1, per byte), handshake left out.
    let mut below: Option<(f64, f64)> = None;
    for r in &e.ranges {
        let big_g = r.G_ns_per_byte.max(0.0);
        let at1 = match below {
            // Continue the line below: T(s) = T(from − 1) + (s − from + 1)·G
            // (sizes between two ranges count at the lower one's G).
            Some((at1, g)) if r.from_bytes > 1 => {
                netgauge::line_ns(at1, g, r.from_bytes - 1) - (r.from_bytes - 2) as f64 * big_g
            }
            _ => eel,
        };
        below = Some((at1, big_g));
        let to = r.to_bytes.max(r.from_bytes);
        let mut split = vec![(r.from_bytes.max(1), to)];
        if let Some(s) = e.S_bytes {
            if s >= r.from_bytes.max(1) && s < to {
                split = vec![(r.from_bytes.max(1), s), (s + 1, to)];
            }
        }
        for (from, to) in split {
            let rendezvous = e.S_bytes.is_some_and(|s| from > s);
            out.push(Piece {
                from_bytes: from,
                to_bytes: to,
                at1_ns: at1 + if rendezvous { handshake_ns } else { 0.0 },
                G_ns_per_byte: big_g,
                rendezvous,
                range: r.clone(),
            });
        }
    }
    out
}

/// T(s) of the entry (the piece that holds s; beyond the last, its line).
pub fn message_ns(pieces: &[Piece], msg_bytes: u64) -> f64 {
    let s = msg_bytes.max(1);
    pieces
        .iter()
        .find(|p| s <= p.to_bytes)
        .or(pieces.last())
        .map_or(f64::NAN, |p| p.message_ns(s))
}
