//! Slurm `topology.conf` (topology/tree plugin): which leaf switch every
//! node hangs off, and the tree of switches above the leaves.
//!
//! ```text
//! # two leaves under one top switch
//! SwitchName=s0 Nodes=node[01-32]
//! SwitchName=s1 Nodes=node[33-64] LinkSpeed=100
//! SwitchName=top Switches=s[0-1]
//! ```
//!
//! The syntax is Slurm's (slurm.conf(5), topology.conf(5)):
//! - one switch per line: `SwitchName=` and its children, either `Nodes=`
//!   (a leaf switch) or `Switches=` (a switch above others), both hostlist
//!   expressions; `LinkSpeed=` is accepted and ignored; parameter names are
//!   case-insensitive; a value may be quoted (`Nodes="a,b"`);
//! - text after an unescaped `#` is a comment;
//! - a line that ends with an odd number of backslashes (trailing blanks
//!   aside) continues on the next one, joined where the backslash was;
//! - `\x` stands for `x` (so `\#` is a literal `#` and `\\` a backslash).
//!
//! Refused, with the line the logical line starts on: unknown parameters,
//! a switch without a name or defined twice, a switch with both nodes and
//! switches (Slurm refuses it too), a child switch that is not defined, a
//! node on two leaves, and cycles among switches. A switch may have several
//! parents (fat trees are often written with every leaf under each spine),
//! and several roots are allowed.

use std::collections::HashMap;

use super::hostlist::{self, HostlistError};

/// A switch of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    pub name: String,
    /// Line of `topology.conf` the switch is defined on (1-based).
    pub line: usize,
    /// Nodes attached (a leaf switch); empty above the leaves.
    pub nodes: Vec<String>,
    /// Child switches (indices into [`Topology::switches`]).
    pub children: Vec<usize>,
    /// Parent switches (indices), empty for a root.
    pub parents: Vec<usize>,
}

impl Switch {
    /// A leaf switch: nodes attached, no child switches.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
}

/// A parsed `topology.conf`.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    switches: Vec<Switch>,
    by_name: HashMap<String, usize>,
    leaf_of: HashMap<String, usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyProblem {
    #[error("no switch is defined")]
    NoSwitches,
    #[error("SwitchName= is missing")]
    NoSwitchName,
    #[error("SwitchName takes one name, not {0:?}")]
    SwitchNameList(String),
    #[error("unknown parameter {0:?} (known: SwitchName, Nodes, Switches, LinkSpeed)")]
    UnknownKey(String),
    #[error("{0} is given twice")]
    DuplicateKey(String),
    #[error("cannot parse {0:?} (expected Key=Value)")]
    Syntax(String),
    #[error("unterminated quote")]
    Quote,
    #[error("{key}: {source}")]
    Hostlist {
        key: &'static str,
        source: HostlistError,
    },
    #[error("switch {name} is already defined on line {first_line}")]
    DuplicateSwitch { name: String, first_line: usize },
    #[error("switch {0} has both Nodes= and Switches=")]
    NodesAndSwitches(String),
    #[error("switch {name} lists switch {child}, which is not defined")]
    UnknownSwitch { name: String, child: String },
    #[error("node {node} is on leaf {first} (line {first_line}) and on leaf {second}")]
    NodeOnTwoLeaves {
        node: String,
        first: String,
        first_line: usize,
        second: String,
    },
    #[error("the switches form a cycle: {}", .0.join(" → "))]
    Cycle(Vec<String>),
    #[error("more than {0} nodes in the topology")]
    TooManyNodes(usize),
}

/// A `topology.conf` error and the line it was found on (1-based; 0 for
/// the file as a whole).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("topology.conf line {line}: {problem}")]
pub struct TopologyError {
    pub line: usize,
    pub problem: TopologyProblem,
}

fn err<T>(line: usize, problem: TopologyProblem) -> Result<T, TopologyError> {
    Err(TopologyError { line, problem })
}

/// The logical lines of Slurm-style configuration text: comments removed,
/// continuations joined, escapes resolved; each with the number of the
/// physical line it starts on.
pub fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        let (body, continues) = strip_continuation(line);
        let entry = pending.get_or_insert_with(|| (i + 1, String::new()));
        entry.1.push_str(body);
        if !continues {
            out.extend(pending.take());
        }
    }
    out.extend(pending);
    out.into_iter()
        .map(|(n, l)| (n, unescape(&l)))
        .filter(|(_, l)| !l.trim().is_empty())
        .collect()
}

/// The text before the first `#` preceded by an even number of backslashes.
fn strip_comment(line: &str) -> &str {
    let mut backslashes = 0;
    for (i, c) in line.char_indices() {
        match c {
            '#' if backslashes % 2 == 0 => return &line[..i],
            '\\' => backslashes += 1,
            _ => backslashes = 0,
        }
    }
    line
}

/// A line ending (trailing blanks aside) in an odd number of backslashes
/// continues: the last backslash and what follows it are removed.
fn strip_continuation(line: &str) -> (&str, bool) {
    let trimmed = line.trim_end();
    let backslashes = trimmed.len() - trimmed.trim_end_matches('\\').len();
    if backslashes % 2 == 1 {
        (&trimmed[..trimmed.len() - 1], true)
    } else {
        (line, false)
    }
}

fn unescape(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// `Key=Value` pairs of a logical line (a value may be in double quotes).
fn pairs(line: &str) -> Result<Vec<(String, String)>, TopologyProblem> {
    let mut out = Vec::new();
    let mut rest = line.trim_start();
    while !rest.is_empty() {
        let key_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        let after = rest[key_end..].trim_start();
        let Some(value_part) = after.strip_prefix('=').filter(|_| !key.is_empty()) else {
            let word = rest.split_whitespace().next().unwrap_or(rest);
            return Err(TopologyProblem::Syntax(word.to_string()));
        };
        let value_part = value_part.trim_start();
        let (value, next) = if let Some(q) = value_part.strip_prefix('"') {
            let end = q.find('"').ok_or(TopologyProblem::Quote)?;
            (&q[..end], &q[end + 1..])
        } else {
            let end = value_part
                .find(char::is_whitespace)
                .unwrap_or(value_part.len());
            (&value_part[..end], &value_part[end..])
        };
        if value.is_empty() {
            return Err(TopologyProblem::Syntax(format!("{key}=")));
        }
        out.push((key.to_string(), value.to_string()));
        rest = next.trim_start();
    }
    Ok(out)
}

/// One `SwitchName=` line before the children are resolved.
struct RawSwitch {
    name: String,
    line: usize,
    nodes: Vec<String>,
    switches: Vec<String>,
}

fn parse_line(line_no: usize, line: &str, max_hosts: usize) -> Result<RawSwitch, TopologyError> {
    let fail = |problem| TopologyError {
        line: line_no,
        problem,
    };
    let (mut name, mut nodes, mut switches, mut speed) = (None, None, None, None);
    for (key, value) in pairs(line).map_err(fail)? {
        let slot = match key.to_ascii_lowercase().as_str() {
            "switchname" => &mut name,
            "nodes" => &mut nodes,
            "switches" => &mut switches,
            "linkspeed" => &mut speed,
            _ => return err(line_no, TopologyProblem::UnknownKey(key)),
        };
        if slot.replace(value).is_some() {
            return err(line_no, TopologyProblem::DuplicateKey(key));
        }
    }
    let Some(name) = name else {
        return err(line_no, TopologyProblem::NoSwitchName);
    };
    if name.contains([',', '[', ']']) || hostlist::expand_max(&name, 1).is_err() {
        return err(line_no, TopologyProblem::SwitchNameList(name));
    }
    if nodes.is_some() && switches.is_some() {
        return err(line_no, TopologyProblem::NodesAndSwitches(name));
    }
    let list = |key: &'static str, v: Option<String>| -> Result<Vec<String>, TopologyError> {
        v.map_or(Ok(Vec::new()), |v| {
            hostlist::expand_max(&v, max_hosts).map_err(|source| TopologyError {
                line: line_no,
                problem: TopologyProblem::Hostlist { key, source },
            })
        })
    };
    Ok(RawSwitch {
        nodes: list("Nodes", nodes)?,
        switches: list("Switches", switches)?,
        name,
        line: line_no,
    })
}

impl Topology {
    /// Parse `topology.conf` text, at most [`hostlist::DEFAULT_MAX_HOSTS`]
    /// nodes.
    pub fn parse(text: &str) -> Result<Topology, TopologyError> {
        Self::parse_max(text, hostlist::DEFAULT_MAX_HOSTS)
    }

    /// Parse `topology.conf` text with at most `max_hosts` nodes in all.
    pub fn parse_max(text: &str, max_hosts: usize) -> Result<Topology, TopologyError> {
        let mut raw = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let mut node_count = 0usize;
        for (line_no, line) in logical_lines(text) {
            let s = parse_line(line_no, &line, max_hosts)?;
            node_count += s.nodes.len();
            if node_count > max_hosts {
                return err(line_no, TopologyProblem::TooManyNodes(max_hosts));
            }
            if let Some(&first) = by_name.get(&s.name) {
                let first_line = raw.get(first).map_or(0, |r: &RawSwitch| r.line);
                return err(
                    line_no,
                    TopologyProblem::DuplicateSwitch {
                        name: s.name,
                        first_line,
                    },
                );
            }
            by_name.insert(s.name.clone(), raw.len());
            raw.push(s);
        }
        if raw.is_empty() {
            return err(0, TopologyProblem::NoSwitches);
        }
        let mut switches: Vec<Switch> = raw
            .iter()
            .map(|r| Switch {
                name: r.name.clone(),
                line: r.line,
                nodes: Vec::new(),
                children: Vec::new(),
                parents: Vec::new(),
            })
            .collect();
        let mut leaf_of: HashMap<String, usize> = HashMap::new();
        for (i, r) in raw.into_iter().enumerate() {
            for child in &r.switches {
                let Some(&c) = by_name.get(child) else {
                    return err(
                        r.line,
                        TopologyProblem::UnknownSwitch {
                            name: r.name,
                            child: child.clone(),
                        },
                    );
                };
                if !switches[i].children.contains(&c) {
                    switches[i].children.push(c);
                    switches[c].parents.push(i);
                }
            }
            let mut nodes = Vec::with_capacity(r.nodes.len());
            for node in r.nodes {
                if let Some(&first) = leaf_of.get(&node) {
                    if first == i {
                        continue;
                    }
                    return err(
                        r.line,
                        TopologyProblem::NodeOnTwoLeaves {
                            node,
                            first: switches[first].name.clone(),
                            first_line: switches[first].line,
                            second: r.name.clone(),
                        },
                    );
                }
                leaf_of.insert(node.clone(), i);
                nodes.push(node);
            }
            switches[i].nodes = nodes;
        }
        if let Some(cycle) = find_cycle(&switches) {
            let line = switches[cycle[0]].line;
            let names = cycle.iter().map(|&i| switches[i].name.clone()).collect();
            return err(line, TopologyProblem::Cycle(names));
        }
        Ok(Topology {
            switches,
            by_name,
            leaf_of,
        })
    }

    /// Every switch, in the order of the file.
    pub fn switches(&self) -> &[Switch] {
        &self.switches
    }

    pub fn switch(&self, name: &str) -> Option<&Switch> {
        self.by_name.get(name).map(|&i| &self.switches[i])
    }

    /// The leaf switch `node` is attached to.
    pub fn leaf_of(&self, node: &str) -> Option<&Switch> {
        self.leaf_of.get(node).map(|&i| &self.switches[i])
    }

    /// The switch groups: leaf switches with nodes attached, in file order.
    pub fn leaves(&self) -> impl Iterator<Item = &Switch> {
        self.switches
            .iter()
            .filter(|s| s.is_leaf() && !s.nodes.is_empty())
    }

    /// Switches without a parent.
    pub fn roots(&self) -> impl Iterator<Item = &Switch> {
        self.switches.iter().filter(|s| s.parents.is_empty())
    }

    /// Every node of the topology.
    pub fn node_count(&self) -> usize {
        self.leaf_of.len()
    }
}

/// A cycle among the child links, as switch indices from its first switch
/// back to the one before it, or None.
fn find_cycle(switches: &[Switch]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark = vec![Mark::New; switches.len()];
    for root in 0..switches.len() {
        if mark[root] != Mark::New {
            continue;
        }
        // Iterative depth-first search: (switch, next child to visit).
        let mut stack = vec![(root, 0usize)];
        mark[root] = Mark::Open;
        while let Some(&(s, next)) = stack.last() {
            if let Some(&c) = switches[s].children.get(next) {
                let top = stack.len() - 1;
                stack[top].1 += 1;
                match mark[c] {
                    Mark::Open => {
                        let from = stack.iter().position(|&(x, _)| x == c).unwrap_or(0);
                        return Some(stack[from..].iter().map(|&(x, _)| x).collect());
                    }
                    Mark::New => {
                        mark[c] = Mark::Open;
                        stack.push((c, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                mark[s] = Mark::Done;
                stack.pop();
            }
        }
    }
    None
}
