//! The simulated network's parameters and their `--model` string
//! (`L=1100,o=300,g=450,G=0.08,…`).

use std::fmt;
use std::str::FromStr;

/// Parameters of the simulated network. Times in ns, `G` and `O` in ns per
/// byte, `S` in bytes.
///
/// Parsed from and displayed as `L=1100,o=300,g=450,G=0.08,S=16384,f=6,
/// omin=150,omax=900,O=0.01,jitter=0.02,seed=7` (every key optional).
#[allow(non_snake_case)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimParams {
    /// Latency: injection start to arrival of the last byte, minus `(s−1)·G`.
    pub L_ns: f64,
    /// CPU overhead per message (send and receive).
    pub o_ns: f64,
    /// Gap between successive injections of one NIC.
    pub g_ns: f64,
    /// Gap per byte (inverse bandwidth).
    pub G_ns_per_byte: f64,
    /// LogGPS rendezvous threshold: messages larger than this use a handshake.
    pub S_bytes: Option<u64>,
    /// LogfP: messages to distinct peers injected without paying `g`.
    pub f: Option<u32>,
    /// LogfP: `o(P) = o_min + o_max/P` for posts.
    pub o_min_ns: Option<f64>,
    pub o_max_ns: Option<f64>,
    /// LogGPS: CPU overhead per byte (send and receive).
    pub O_ns_per_byte: f64,
    /// Mean relative stretch of every span (0.02 = 2 %); 0 = deterministic.
    pub jitter: f64,
    /// Seed of the jitter generator.
    pub seed: u64,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            L_ns: 0.0,
            o_ns: 0.0,
            g_ns: 0.0,
            G_ns_per_byte: 0.0,
            S_bytes: None,
            f: None,
            o_min_ns: None,
            o_max_ns: None,
            O_ns_per_byte: 0.0,
            jitter: 0.0,
            seed: 1,
        }
    }
}

/// Why a `--model` string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimParamError {
    #[error("unknown sim parameter `{0}` (known: L, o, g, G, S, f, omin, omax, O, jitter, seed)")]
    UnknownKey(String),
    #[error("sim parameter `{0}` has no value (expected key=value)")]
    MissingValue(String),
    #[error("sim parameter `{key}` given twice")]
    Duplicate { key: String },
    #[error("sim parameter `{key}`: bad value `{value}`: {reason}")]
    BadValue {
        key: String,
        value: String,
        reason: &'static str,
    },
    /// A message of the model takes (almost) no time: virtual time would
    /// barely advance, and loops timed in it would run for ever.
    #[error("the sim model takes no time: L + 2o + g must be at least 1 ns (e.g. L=1100,o=300,g=450,G=0.08)")]
    NoTime,
}

/// Largest time parameter (L, o, g, omin, omax), ns: 1000 s. Beyond it
/// the picosecond virtual clock would overflow within a sweep.
pub const MAX_TIME_NS: f64 = 1e12;
/// Largest per-byte parameter (G, O), ns per byte.
pub const MAX_PER_BYTE_NS: f64 = 1e6;
/// Smallest L + 2o + g: a round trip of the model takes at least this
/// (ns), so loops timed in virtual time end in a bounded number of rounds.
pub const MIN_ROUND_NS: f64 = 1.0;

fn parse_bounded(key: &str, value: &str, max: f64) -> Result<f64, SimParamError> {
    let bad = |reason| SimParamError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let v: f64 = value.parse().map_err(|_| bad("not a number"))?;
    if !v.is_finite() {
        return Err(bad("must be finite"));
    }
    if v < 0.0 {
        return Err(bad("must not be negative"));
    }
    if v > max {
        return Err(bad(
            "too large (times ≤ 1e12 ns, per-byte costs ≤ 1e6 ns/B, jitter ≤ 10)",
        ));
    }
    Ok(v)
}

fn parse_int<T: FromStr>(key: &str, value: &str) -> Result<T, SimParamError> {
    value.parse().map_err(|_| SimParamError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: "not a non-negative integer",
    })
}

impl FromStr for SimParams {
    type Err = SimParamError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const KEYS: [&str; 11] = [
            "L", "o", "g", "G", "S", "f", "omin", "omax", "O", "jitter", "seed",
        ];
        let mut p = SimParams::default();
        let mut seen = [false; KEYS.len()];
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let Some((key, value)) = part.split_once('=') else {
                return Err(SimParamError::MissingValue(part.to_string()));
            };
            let (key, value) = (key.trim(), value.trim());
            let Some(index) = KEYS.iter().position(|k| *k == key) else {
                return Err(SimParamError::UnknownKey(key.to_string()));
            };
            if std::mem::replace(&mut seen[index], true) {
                return Err(SimParamError::Duplicate {
                    key: key.to_string(),
                });
            }
            match key {
                "L" => p.L_ns = parse_bounded(key, value, MAX_TIME_NS)?,
                "o" => p.o_ns = parse_bounded(key, value, MAX_TIME_NS)?,
                "g" => p.g_ns = parse_bounded(key, value, MAX_TIME_NS)?,
                "G" => p.G_ns_per_byte = parse_bounded(key, value, MAX_PER_BYTE_NS)?,
                "O" => p.O_ns_per_byte = parse_bounded(key, value, MAX_PER_BYTE_NS)?,
                "omin" => p.o_min_ns = Some(parse_bounded(key, value, MAX_TIME_NS)?),
                "omax" => p.o_max_ns = Some(parse_bounded(key, value, MAX_TIME_NS)?),
                "jitter" => p.jitter = parse_bounded(key, value, 10.0)?,
                "S" => p.S_bytes = Some(parse_int(key, value)?),
                "f" => {
                    let f: u32 = parse_int(key, value)?;
                    if f == 0 {
                        return Err(SimParamError::BadValue {
                            key: key.to_string(),
                            value: value.to_string(),
                            reason: "must be at least 1",
                        });
                    }
                    p.f = Some(f);
                }
                "seed" => p.seed = parse_int(key, value)?,
                _ => unreachable!("every key of KEYS is matched"),
            }
        }
        if p.L_ns + 2.0 * p.o_ns + p.g_ns < MIN_ROUND_NS {
            return Err(SimParamError::NoTime);
        }
        Ok(p)
    }
}

impl fmt::Display for SimParams {
    fn fmt(&self, out: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            out,
            "L={},o={},g={},G={}",
            self.L_ns, self.o_ns, self.g_ns, self.G_ns_per_byte
        )?;
        if let Some(s) = self.S_bytes {
            write!(out, ",S={s}")?;
        }
        if let Some(f) = self.f {
            write!(out, ",f={f}")?;
        }
        if let Some(v) = self.o_min_ns {
            write!(out, ",omin={v}")?;
        }
        if let Some(v) = self.o_max_ns {
            write!(out, ",omax={v}")?;
        }
        write!(
            out,
            ",O={},jitter={},seed={}",
            self.O_ns_per_byte, self.jitter, self.seed
        )
    }
}
