//! SimGrid SMPI: a platform file that carries the model, for
//! `smpirun -platform FILE`.
//!
//! What SMPI (SimGrid 3.32) charges for one MPI message of s bytes between
//! two hosts, read from its source and checked against it by
//! tests/export_consumers.rs:
//! - the network moves s + 16 bytes (SMPI adds a 16-byte envelope) in
//!   R·lf(s+16) + (s+16)/(B·bf(s+16)): R the route's latency, B the
//!   slowest link's bandwidth, lf and bf the piecewise `smpi/lat-factor`
//!   and `smpi/bw-factor` (a `size:value` entry holds for sizes above
//!   `size`);
//! - a send smaller than `smpi/send-is-detached-thresh` is detached: the
//!   sender first sleeps `smpi/os`(s), the receiver afterwards
//!   `smpi/or`(s) (piecewise `size:offset:per_byte`, seconds); a larger
//!   one waits for the receive and sleeps neither. `smpi/async-small-thresh`
//!   lets the small ones go before the receive is posted (eager).
//!
//! The export makes that equal the model's T(s) (see [`super::model`]) on
//! every piece: the detached (eager) pieces below S keep the measured o_s
//! and o_r as the sleeps (their per-byte parts O_s, O_r scaled down when
//! together they exceed half of G, so the network keeps a per-byte time),
//! the network takes the rest; above S (rendezvous, the handshake already
//! in T) the network takes all of T. A simulated one-way message then takes
//! T(s) and a ping-pong 2·T(s). Where a piece's line has a constant
//! below the 16-byte envelope's time (T grows faster there than
//! below it), SMPI's latency cannot carry it: that piece is written as
//! several of latency 0 whose per-byte times stay within
//! [`CHORD_TOLERANCE`] of T(s).
//!
//! Contention, where the transport's record has it (`ngctl contention`):
//! k flows out of or into one host share its link, each at k·β of its time
//! alone (Vienne et al.'s sharing model without the γ terms, which max-min
//! sharing cannot carry): the host links run at B/β and a fat-pipe backbone
//! bounds each flow at B. Flows in and out of one host share its link
//! (`SHARED`) when the mixed scheme's penalty at k = 1 is nearer 2 than 1,
//! and are independent (`SPLITDUPLEX`) otherwise. Without the record: β = 1,
//! `SPLITDUPLEX`. The backbone never limits the bisection (a measured
//! bisection is noted, not modelled).

use std::fmt::Write as _;

use netgauge::{EntryData, Scheme, Status, TransportExt, TransportField};

use super::model::{pieces, Piece};
use super::{bad, Result};

/// Bytes SMPI adds to every message's payload (its envelope).
pub const SMPI_ENVELOPE_BYTES: u64 = 16;

/// Largest per-byte CPU time (O_s + O_r) the detached sends keep, as a
/// fraction of G: the rest of G must remain the network's.
const CPU_SHARE_OF_G: f64 = 0.5;

/// One piece of T(s) as SMPI's factors and sleeps.
#[derive(Clone, Debug, PartialEq)]
pub struct SmpiPiece {
    pub from_bytes: u64,
    pub rendezvous: bool,
    /// Network time at s = 0 (seconds): R·lf + 16·G_net.
    pub latency_s: f64,
    /// Network seconds per byte.
    pub net_s_per_byte: f64,
    /// Detached sends: the sender's and the receiver's sleep at s = 0 and
    /// per byte (seconds).
    pub os: (f64, f64),
    pub or: (f64, f64),
}

/// How the hosts share their links.
#[derive(Clone, Debug, PartialEq)]
pub struct SmpiSharing {
    /// β of the sharing model, at most 1 (see [`sharing_of`]).
    pub beta: f64,
    /// Flows in and out of a host share one link.
    pub half_duplex: bool,
    /// What the record said, for the file's comments.
    pub note: String,
}

/// The pieces of `e`'s T(s) as SMPI's terms (a piece whose line SMPI's
/// latency cannot carry becomes several: see [`network_terms`]).
pub fn smpi_pieces(e: &EntryData) -> Result<Vec<SmpiPiece>> {
    let ps = pieces(e);
    if ps.is_empty() {
        return Err(bad("the entry has no protocol ranges".into()));
    }
    let mut out = Vec::new();
    for (i, p) in ps.iter().enumerate() {
        out.extend(smpi_piece(p, i + 1 == ps.len())?);
    }
    Ok(out)
}

/// One piece of T(s) (`last`: its line holds beyond its range) as SMPI's
/// terms.
fn smpi_piece(p: &Piece, last: bool) -> Result<Vec<SmpiPiece>> {
    let ns = 1e-9;
    let g = p.G_ns_per_byte;
    // T(s) = at1 + (s − 1)·G = (at1 − G) + s·G.
    let at0 = p.message_ns(1) - g;
    let to = (!last).then_some(p.to_bytes);
    let piece = |(from_bytes, lat, net): (u64, f64, f64), os, or| SmpiPiece {
        from_bytes,
        rendezvous: p.rendezvous,
        latency_s: lat * ns,
        net_s_per_byte: net * ns,
        os,
        or,
    };
    if p.rendezvous {
        // The network takes all of T.
        let terms = network_terms(p.from_bytes, to, at0, g.max(f64::MIN_POSITIVE))?;
        return Ok(terms
            .into_iter()
            .map(|t| piece(t, (0.0, 0.0), (0.0, 0.0)))
            .collect());
    }
    let r = &p.range;
    let (big_os, big_or) = (r.O_s_ns_per_byte.max(0.0), r.O_r_ns_per_byte.max(0.0));
    let scale = if big_os + big_or > CPU_SHARE_OF_G * g {
        if big_os + big_or > 0.0 {
            CPU_SHARE_OF_G * g / (big_os + big_or)
        } else {
            0.0
        }
    } else {
        1.0
    };
    let (b_s, b_r) = (big_os * scale, big_or * scale);
    let net_g = (g - b_s - b_r).max(f64::MIN_POSITIVE);
    // Sleeps that give o_s and o_r at s = 1.
    let (mut a_s, mut a_r) = ((r.o_s_ns - b_s).max(0.0), (r.o_r_ns - b_r).max(0.0));
    // The network's constant: what T leaves after the sleeps and the envelope.
    let lat = at0 - a_s - a_r - SMPI_ENVELOPE_BYTES as f64 * net_g;
    if lat < 0.0 {
        // T(1) below o_s + o_r (a negative L): the sleeps give way first,
        // which keeps T exact.
        let cut = (-lat).min(a_s + a_r);
        let share = if a_s + a_r > 0.0 {
            a_s / (a_s + a_r)
        } else {
            0.5
        };
        a_s = (a_s - cut * share).max(0.0);
        a_r = (a_r - cut * (1.0 - share)).max(0.0);
    }
    let terms = network_terms(p.from_bytes, to, at0 - a_s - a_r, net_g)?;
    Ok(terms
        .into_iter()
        .map(|t| piece(t, (a_s * ns, b_s * ns), (a_r * ns, b_r * ns)))
        .collect())
}

/// Largest relative difference between SMPI's time and the network's part
/// of T(s) that splitting a piece into chords may leave, either way.
pub const CHORD_TOLERANCE: f64 = 0.004;

/// Most SMPI pieces one piece of T(s) may become.
const MAX_CHORDS: usize = 256;

/// The network's part of one piece, N(s) = c0 + slope·s (ns) on sizes
/// `from` to `to` (None: without end), as SMPI's terms (first size,
/// latency, per byte; ns), which give latency + (s + 16)·per byte.
///
/// One term when c0 covers the envelope (to rounding: sleeps cut to the
/// envelope leave it exactly covered). Otherwise (a fitted line whose
/// constant is below the envelope's time, as a steeper G on a range of
/// large sizes gives: T(s) grows faster there than below) no latency SMPI
/// accepts carries the line, so the sizes are split into chords of
/// latency 0, each with the per-byte time that keeps N(s) / (s + 16)
/// within [`CHORD_TOLERANCE`] of it. That ratio rises with s towards the
/// slope, so the chords are found in closed form, from the first size up.
fn network_terms(from: u64, to: Option<u64>, c0: f64, slope: f64) -> Result<Vec<(u64, f64, f64)>> {
    let env = SMPI_ENVELOPE_BYTES as f64;
    let range = || match to {
        Some(to) => format!("sizes {from}..{to} B"),
        None => format!("sizes from {from} B"),
    };
    if !(c0.is_finite() && slope.is_finite()) {
        return Err(bad(format!(
            "{}: the model's T(s) is not finite ({c0} ns + s·{slope} ns/B for the network)",
            range()
        )));
    }
    let lat = c0 - env * slope;
    // Rounding's share of c0 and 16·slope, not a constant below the envelope.
    let rounding = 1e-9 * c0.abs().max(env * slope.abs()).max(1.0);
    if lat >= -rounding {
        return Ok(vec![(from, lat.max(0.0), slope)]);
    }
    let first = c0 + slope * from as f64;
    if first <= 0.0 {
        return Err(bad(format!(
            "{}: the network's part of T(s), {:.1} ns + s·{:.4} ns/B, is no time at all at {} B",
            range(),
            c0,
            slope,
            from
        )));
    }
    // N(s) / (s + 16) = slope + lat / (s + 16).
    let ratio = |s: u64| slope + lat / (s as f64 + env);
    let eps = CHORD_TOLERANCE;
    let q = (1.0 + eps) / (1.0 - eps);
    let mut out = Vec::new();
    let mut s1 = from;
    loop {
        if out.len() == MAX_CHORDS {
            return Err(bad(format!(
                "{}: the network's part of T(s), {:.1} ns + s·{:.4} ns/B, is below SMPI's envelope time at \
                 s = 0, which its latency cannot carry, and {MAX_CHORDS} pieces do not hold it within {:.1} %",
                range(),
                c0,
                slope,
                eps * 100.0
            )));
        }
        let r1 = ratio(s1);
        // r1·(1 + ε) is within ε of every ratio from r1 to r1·q.
        out.push((s1, 0.0, r1 * (1.0 + eps)));
        if q * r1 >= slope {
            break; // every larger size's ratio is below r1·q
        }
        // The last size whose ratio is at most r1·q (beyond 2^53 B: every
        // size a message has).
        let s2 = (lat / (q * r1 - slope) - env).floor();
        if s2.is_nan() || s2 >= 9.007_199_254_740_992e15 {
            break;
        }
        let s2 = s2 as u64;
        match to {
            Some(to) if s2 >= to => break,
            _ => s1 = s2.max(s1) + 1,
        }
    }
    Ok(out)
}

/// T(s) in seconds as SMPI computes it from the pieces (for the tests and
/// the file's comments): one message, sender's sleep to receiver's sleep.
pub fn smpi_message_s(ps: &[SmpiPiece], s: u64) -> f64 {
    let Some(p) = ps.iter().rev().find(|p| p.from_bytes <= s.max(1)) else {
        return f64::NAN;
    };
    let x = s as f64;
    let sleeps = if p.rendezvous {
        0.0
    } else {
        p.os.0 + x * p.os.1 + p.or.0 + x * p.or.1
    };
    sleeps + p.latency_s + (x + SMPI_ENVELOPE_BYTES as f64) * p.net_s_per_byte
}

/// The sharing the transport's contention record implies (None: no record).
pub fn sharing_of(t: &TransportExt) -> Option<SmpiSharing> {
    let identified = |f: TransportField| t.status(f) == Status::Identified;
    let fit = t.sharing();
    let beta = fit
        .filter(|_| identified(TransportField::Beta))
        .map(|f| f[0].value);
    let mixed = t
        .penalty(Scheme::Mixed, 1)
        .filter(|_| identified(TransportField::penalty(Scheme::Mixed)))
        .map(|e| e.value);
    if beta.is_none() && mixed.is_none() {
        return None;
    }
    let mut note = String::new();
    let beta = match beta {
        Some(b) => {
            let _ = write!(note, "beta {b:.3}");
            if b > 1.0 {
                note.push_str(
                    " (above 1: flows share worse than fairly, which max-min sharing cannot carry; 1 written)",
                );
            }
            b.clamp(f64::MIN_POSITIVE, 1.0)
        }
        None => {
            note.push_str("beta not measured (1 written)");
            1.0
        }
    };
    let half_duplex = match mixed {
        Some(m) => {
            let _ = write!(note, ", mixed penalty at k = 1: {m:.3}");
            m >= 1.5
        }
        None => {
            note.push_str(", mixed scheme not measured (independent directions written)");
            false
        }
    };
    if let Some(f) = fit {
        for (i, field, name) in [
            (1, TransportField::GammaO, "gamma_o"),
            (2, TransportField::GammaI, "gamma_i"),
        ] {
            if identified(field) {
                let _ = write!(note, ", {name} {:.3} (not modelled)", f[i].value);
            }
        }
    }
    Some(SmpiSharing {
        beta,
        half_duplex,
        note,
    })
}

/// The platform file: `hosts` hosts `<prefix>0 …` of one cluster, the SMPI
/// options in its `<config>`.
pub fn smpi_platform(
    e: &EntryData,
    hosts: u32,
    eager_up_to: u64,
    sharing: Option<&SmpiSharing>,
) -> Result<String> {
    if hosts < 2 {
        return Err(bad("--hosts must be at least 2".into()));
    }
    let ps = smpi_pieces(e)?;
    let model = pieces(e);
    let Some(last) = ps.last() else {
        return Err(bad("the entry has no protocol ranges".into()));
    };
    // The links run at the largest messages' rate; every other piece is a
    // bandwidth factor of it.
    let net_s_per_byte = last.net_s_per_byte;
    let b_bytes_per_s = 1.0 / net_s_per_byte;
    // The route's latency is the first piece's constant (its factor 1);
    // with none, 1 ns, and each piece a latency factor of it.
    let route_s = if ps[0].latency_s > 0.0 {
        ps[0].latency_s
    } else {
        1e-9
    };
    let key = |from: u64, envelope: bool| {
        let k = from.saturating_sub(1);
        if envelope && from > 1 {
            k + SMPI_ENVELOPE_BYTES
        } else {
            k
        }
    };
    let join = |f: &dyn Fn(&SmpiPiece) -> String| ps.iter().map(f).collect::<Vec<_>>().join(";");
    let lat_factor = join(&|p| format!("{}:{:e}", key(p.from_bytes, true), p.latency_s / route_s));
    let bw_factor = join(&|p| {
        format!(
            "{}:{:e}",
            key(p.from_bytes, true),
            net_s_per_byte / p.net_s_per_byte
        )
    });
    let sleeps = |f: &dyn Fn(&SmpiPiece) -> (f64, f64)| {
        join(&|p| {
            let (a, b) = f(p);
            format!("{}:{:e}:{:e}", key(p.from_bytes, false), a, b)
        })
    };
    let os = sleeps(&|p| p.os);
    let or = sleeps(&|p| p.or);
    // Sizes up to S are eager (detached); without S every size the model
    // covers is.
    let thresh = match e.S_bytes {
        Some(s) => s.saturating_add(1),
        None => eager_up_to.saturating_add(1),
    }
    .min(i32::MAX as u64);
    let (beta, half_duplex) = sharing.map_or((1.0, false), |s| (s.beta, s.half_duplex));
    // TCP's window must never bound a flow: SMPI caps a flow at
    // gamma / (2·R).
    let tcp_gamma = (20.0 * route_s * b_bytes_per_s / beta)
        .max(4_194_304.0)
        .ceil();
    let mut x = String::new();
    let _ = writeln!(x, "<?xml version='1.0'?>");
    let _ = writeln!(
        x,
        "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">"
    );
    let _ = writeln!(x, "<platform version=\"4.1\">");
    let _ = writeln!(
        x,
        "<!-- netgauged: the fitted model of {} over {}; one message, T at each piece's first size: {} -->",
        xml_text(&e.peer),
        xml_text(&e.transport),
        model
            .iter()
            .map(|p| format!(
                "{} from {} B: {:.1} ns",
                if p.rendezvous { "rendezvous" } else { "eager" },
                p.from_bytes,
                smpi_message_s(&ps, p.from_bytes) * 1e9
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if ps.len() > model.len() {
        let _ = writeln!(
            x,
            "<!-- {} pieces for the model's {}: a line whose constant is below the envelope time is written as pieces of latency 0, within {:.1} % of T(s) -->",
            ps.len(),
            model.len(),
            CHORD_TOLERANCE * 100.0
        );
    }
    match sharing {
        Some(s) => {
            let _ = writeln!(x, "<!-- contention: {} -->", xml_text(&s.note));
        }
        None => {
            let _ = writeln!(
                x,
                "<!-- contention: no record for this transport (ngctl contention): beta 1, independent directions -->"
            );
        }
    }
    let _ = writeln!(x, "<config>");
    for (id, v) in [
        ("smpi/os", os.clone()),
        ("smpi/ois", os),
        ("smpi/or", or),
        ("smpi/lat-factor", lat_factor),
        ("smpi/bw-factor", bw_factor),
        ("smpi/async-small-thresh", thresh.to_string()),
        ("smpi/send-is-detached-thresh", thresh.to_string()),
        ("network/TCP-gamma", format!("{tcp_gamma:.0}")),
        ("network/crosstraffic", "0".to_string()),
    ] {
        let _ = writeln!(x, "  <prop id=\"{id}\" value=\"{v}\"/>");
    }
    let _ = writeln!(x, "</config>");
    let _ = writeln!(
        x,
        "<cluster id=\"netgauged\" prefix=\"node-\" radical=\"0-{}\" suffix=\"\" speed=\"1Gf\" \
         bw=\"{:e}Bps\" lat=\"{:e}s\" sharing_policy=\"{}\" \
         bb_bw=\"{:e}Bps\" bb_lat=\"0s\" bb_sharing_policy=\"FATPIPE\"/>",
        hosts - 1,
        b_bytes_per_s / beta,
        route_s / 2.0,
        if half_duplex { "SHARED" } else { "SPLITDUPLEX" },
        b_bytes_per_s,
    );
    let _ = writeln!(x, "</platform>");
    Ok(x)
}

/// Text safe inside an XML comment or attribute.
fn xml_text(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '<' | '>' | '&' | '"' | '\'' => '_',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect::<String>()
        .replace("--", "- -")
}
