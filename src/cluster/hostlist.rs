//! Slurm hostlist expressions: `node[001-128,130]`, `rack[1-2]-node[01-04]`,
//! `login1,node[1-4]`.
//!
//! Grammar (what Slurm's own parser accepts for host names, minus steps):
//! - an expression is one or more host patterns separated by commas at the
//!   top level (commas inside brackets separate ranges);
//! - a pattern is literal text (letters, digits, `-`, `.`, `_`) and bracket
//!   groups; several groups expand as a cartesian product, the first group
//!   outermost (`rack[1-2]-node[01-02]` gives rack1-node01, rack1-node02,
//!   rack2-node01, rack2-node02);
//! - a bracket group holds comma-separated numbers `N` and ranges `N-M`;
//!   a lower bound with a leading zero fixes the width (`[08-10]` gives 08,
//!   09, 10), and its upper bound must be written with the same width;
//!   without a leading zero numbers are printed as they are (`[8-10]`).
//!
//! Steps (`[1-9:2]`, `[1-9/2]`) are not Slurm syntax and are refused, as
//! are reversed ranges, bounds of more than 18 digits and expansions
//! beyond a configurable number of hosts (default [`DEFAULT_MAX_HOSTS`]):
//! the count is computed before anything is expanded.
//!
//! [`compress`] is the inverse, for display: it groups names by the text
//! around their last run of digits and writes consecutive numbers as
//! ranges. `expand(compress(h))` is `h` without duplicates, in the
//! canonical order (by prefix, suffix, then number).

use std::collections::BTreeMap;
use std::fmt;

/// Default bound on the hosts one expression may expand to.
pub const DEFAULT_MAX_HOSTS: usize = 65_536;

/// Digits of a range bound: 18 keeps every bound, and every count of
/// hosts, inside a u64.
const MAX_DIGITS: usize = 18;

/// Why a bracket range was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeProblem {
    /// `[]` or `[1,,2]`.
    Empty,
    /// Not `N` or `N-M` with decimal digits.
    NotANumber,
    /// `[9-1]`.
    Reversed,
    /// `[1-9:2]` or `[1-9/2]`.
    Step,
    /// A bound of more than 18 digits.
    TooLong,
    /// `[001-1000]` or `[1-010]`: the bounds are written with different
    /// widths, so the names they stand for are ambiguous.
    Width,
}

impl fmt::Display for RangeProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RangeProblem::Empty => "empty range",
            RangeProblem::NotANumber => "expected N or N-M with decimal digits",
            RangeProblem::Reversed => "the lower bound is above the upper bound",
            RangeProblem::Step => "ranges with steps are not Slurm hostlist syntax",
            RangeProblem::TooLong => "a bound has more than 18 digits",
            RangeProblem::Width => {
                "the bounds differ in width (a zero-padded lower bound fixes the width of every name; \
                 write e.g. [001-999,1000])"
            }
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostlistError {
    #[error("empty hostlist")]
    Empty,
    #[error("empty host name at byte {at} of {expr:?}")]
    EmptyHost { expr: String, at: usize },
    #[error("unbalanced bracket at byte {at} of {expr:?}")]
    Unbalanced { expr: String, at: usize },
    #[error("nested bracket at byte {at} of {expr:?}")]
    Nested { expr: String, at: usize },
    #[error("{ch:?} at byte {at} of {expr:?} is not allowed in a host name (letters, digits, '-', '.', '_')")]
    BadChar { expr: String, ch: char, at: usize },
    #[error("range {range:?} in {expr:?}: {problem}")]
    BadRange {
        expr: String,
        range: String,
        problem: RangeProblem,
    },
    #[error("{expr:?} expands to more than {max} hosts")]
    TooMany { expr: String, max: usize },
}

/// One range of a bracket group; `width` 0 prints numbers as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Range {
    fn len(&self) -> u64 {
        self.hi - self.lo + 1
    }
}

#[derive(Debug)]
enum Piece<'a> {
    Text(&'a str),
    Group(Vec<Range>),
}

/// Expand `expr` into host names, at most [`DEFAULT_MAX_HOSTS`] of them.
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    expand_max(expr, DEFAULT_MAX_HOSTS)
}

/// Expand `expr` into host names, in the order written; at most
/// `max_hosts` names (duplicates included) or an error.
pub fn expand_max(expr: &str, max_hosts: usize) -> Result<Vec<String>, HostlistError> {
    if expr.trim().is_empty() {
        return Err(HostlistError::Empty);
    }
    let mut patterns = Vec::new();
    let mut total: u64 = 0;
    for (at, item) in split_top(expr)? {
        let pieces = parse_pattern(expr, item, at)?;
        let count = pieces.iter().try_fold(1u64, |acc, p| match p {
            Piece::Text(_) => Some(acc),
            Piece::Group(ranges) => acc.checked_mul(ranges.iter().map(Range::len).sum()),
        });
        total = count
            .and_then(|c| total.checked_add(c))
            .filter(|&t| t <= max_hosts as u64)
            .ok_or_else(|| HostlistError::TooMany {
                expr: expr.to_string(),
                max: max_hosts,
            })?;
        patterns.push(pieces);
    }
    let mut out = Vec::with_capacity(total as usize);
    for pieces in &patterns {
        expand_pattern(pieces, &mut out);
    }
    Ok(out)
}

/// The top-level items of `expr` (split at commas outside brackets), each
/// trimmed, with its byte offset; brackets are checked for balance here.
fn split_top(expr: &str) -> Result<Vec<(usize, &str)>, HostlistError> {
    let mut items = Vec::new();
    let mut open: Option<usize> = None;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' if open.is_some() => {
                return Err(HostlistError::Nested {
                    expr: expr.to_string(),
                    at: i,
                })
            }
            '[' => open = Some(i),
            ']' if open.is_none() => {
                return Err(HostlistError::Unbalanced {
                    expr: expr.to_string(),
                    at: i,
                })
            }
            ']' => open = None,
            ',' if open.is_none() => {
                items.push((start, &expr[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if let Some(at) = open {
        return Err(HostlistError::Unbalanced {
            expr: expr.to_string(),
            at,
        });
    }
    items.push((start, &expr[start..]));
    items
        .into_iter()
        .map(|(at, item)| {
            let lead = item.len() - item.trim_start().len();
            let trimmed = item.trim();
            if trimmed.is_empty() {
                Err(HostlistError::EmptyHost {
                    expr: expr.to_string(),
                    at,
                })
            } else {
                Ok((at + lead, trimmed))
            }
        })
        .collect()
}

fn is_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')
}

/// Literal text and bracket groups of one pattern (brackets are balanced
/// and not nested: `split_top` checked).
fn parse_pattern<'a>(
    expr: &str,
    item: &'a str,
    offset: usize,
) -> Result<Vec<Piece<'a>>, HostlistError> {
    let mut pieces = Vec::new();
    let mut rest = item;
    let mut at = offset;
    while !rest.is_empty() {
        if let Some(body) = rest.strip_prefix('[') {
            // split_top checked the brackets; an unclosed one cannot reach here.
            let close = body.find(']').ok_or_else(|| HostlistError::Unbalanced {
                expr: expr.to_string(),
                at,
            })?;
            pieces.push(Piece::Group(parse_group(expr, &body[..close])?));
            rest = &body[close + 1..];
            at += close + 2;
        } else {
            let end = rest.find('[').unwrap_or(rest.len());
            let text = &rest[..end];
            if let Some((i, ch)) = text.char_indices().find(|&(_, c)| !is_host_char(c)) {
                return Err(HostlistError::BadChar {
                    expr: expr.to_string(),
                    ch,
                    at: at + i,
                });
            }
            pieces.push(Piece::Text(text));
            rest = &rest[end..];
            at += end;
        }
    }
    Ok(pieces)
}

fn parse_group(expr: &str, body: &str) -> Result<Vec<Range>, HostlistError> {
    body.split(',')
        .map(|r| {
            parse_range(r.trim()).map_err(|problem| HostlistError::BadRange {
                expr: expr.to_string(),
                range: r.trim().to_string(),
                problem,
            })
        })
        .collect()
}

fn parse_range(text: &str) -> Result<Range, RangeProblem> {
    if text.is_empty() {
        return Err(RangeProblem::Empty);
    }
    if text.contains([':', '/']) {
        return Err(RangeProblem::Step);
    }
    let (lo_text, hi_text) = text.split_once('-').unwrap_or((text, text));
    let number = |t: &str| -> Result<u64, RangeProblem> {
        if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RangeProblem::NotANumber);
        }
        if t.len() > MAX_DIGITS {
            return Err(RangeProblem::TooLong);
        }
        t.parse().map_err(|_| RangeProblem::NotANumber)
    };
    let (lo, hi) = (number(lo_text)?, number(hi_text)?);
    let padded = |t: &str| t.len() > 1 && t.starts_with('0');
    let width = if padded(lo_text) {
        if hi_text.len() != lo_text.len() {
            return Err(RangeProblem::Width);
        }
        lo_text.len()
    } else {
        if padded(hi_text) {
            return Err(RangeProblem::Width);
        }
        0
    };
    if lo > hi {
        return Err(RangeProblem::Reversed);
    }
    Ok(Range { lo, hi, width })
}

/// Append the names of one pattern, first bracket group outermost.
fn expand_pattern(pieces: &[Piece<'_>], out: &mut Vec<String>) {
    // An odometer over the groups: (range index, value) per group.
    let groups: Vec<&Vec<Range>> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Group(g) => Some(g),
            Piece::Text(_) => None,
        })
        .collect();
    let mut digits: Vec<(usize, u64)> = groups.iter().map(|g| (0, g[0].lo)).collect();
    loop {
        let mut name = String::new();
        let mut k = 0;
        for p in pieces {
            match p {
                Piece::Text(t) => name.push_str(t),
                Piece::Group(g) => {
                    let (r, v) = digits[k];
                    push_number(&mut name, v, g[r].width);
                    k += 1;
                }
            }
        }
        out.push(name);
        // Advance the innermost (last) group first.
        let mut level = groups.len();
        loop {
            if level == 0 {
                return;
            }
            level -= 1;
            let g = groups[level];
            let (r, v) = digits[level];
            if v < g[r].hi {
                digits[level] = (r, v + 1);
                break;
            }
            if r + 1 < g.len() {
                digits[level] = (r + 1, g[r + 1].lo);
                break;
            }
            digits[level] = (0, g[0].lo);
        }
    }
}

fn push_number(name: &mut String, v: u64, width: usize) {
    use std::fmt::Write;
    // Writing to a String cannot fail.
    let _ = write!(name, "{v:0width$}");
}

/// A name split around its last run of digits (at most 18 of them).
struct Split<'a> {
    prefix: &'a str,
    digits: &'a str,
    suffix: &'a str,
}

fn split_name(name: &str) -> Option<Split<'_>> {
    let bytes = name.as_bytes();
    let end = bytes.iter().rposition(u8::is_ascii_digit)? + 1;
    let start = bytes[..end]
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    (end - start <= MAX_DIGITS).then(|| Split {
        prefix: &name[..start],
        digits: &name[start..end],
        suffix: &name[end..],
    })
}

/// (prefix, suffix, numbered): the names that may share a bracket group,
/// each as (value, digits).
type GroupKey<'a> = (&'a str, &'a str, bool);

/// Compress host names into one expression (for display). Duplicates are
/// dropped; names are grouped by the text around their last run of digits
/// and consecutive numbers become ranges, a zero-padded run keeping its
/// width. Names that are not valid host names are written as they are.
pub fn compress<S: AsRef<str>>(hosts: &[S]) -> String {
    let mut groups: BTreeMap<GroupKey<'_>, Vec<(u64, &str)>> = BTreeMap::new();
    for h in hosts {
        let h = h.as_ref();
        match split_name(h) {
            Some(s) => groups
                .entry((s.prefix, s.suffix, true))
                .or_default()
                .push((s.digits.parse().unwrap_or(0), s.digits)),
            None => {
                groups.entry((h, "", false)).or_default();
            }
        }
    }
    let mut parts: Vec<String> = Vec::with_capacity(groups.len());
    for ((prefix, suffix, numbered), mut members) in groups {
        if !numbered {
            parts.push(prefix.to_string());
            continue;
        }
        members.sort_unstable();
        members.dedup();
        let runs = runs(&members);
        let mut s = String::from(prefix);
        if let [(a, b)] = runs[..] {
            if a == b {
                s.push_str(members[a].1);
                s.push_str(suffix);
                parts.push(s);
                continue;
            }
        }
        s.push('[');
        for (k, &(a, b)) in runs.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            s.push_str(members[a].1);
            if b > a {
                s.push('-');
                s.push_str(members[b].1);
            }
        }
        s.push(']');
        s.push_str(suffix);
        parts.push(s);
    }
    parts.join(",")
}

/// Maximal runs (first, last index) of sorted, distinct (value, digits):
/// consecutive values written alike. A run that starts with a leading
/// zero has that width and takes only numbers of that many digits; one
/// that starts without takes only numbers without leading zeros.
fn runs(members: &[(u64, &str)]) -> Vec<(usize, usize)> {
    let padded = |d: &str| d.len() > 1 && d.starts_with('0');
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (i, &(v, d)) in members.iter().enumerate() {
        if let Some(last) = out.last_mut() {
            let (first, prev) = (members[last.0].1, members[last.1].0);
            let fits = if padded(first) {
                d.len() == first.len()
            } else {
                !padded(d)
            };
            if fits && v == prev + 1 && last.1 + 1 == i {
                last.1 = i;
                continue;
            }
        }
        out.push((i, i));
    }
    out
}
