//! The cluster-wide view: what each node publishes, reduced to the values
//! a placement or an operator reads (EEL, small-message g, sustained G),
//! and assembled into the N×N matrix of nodes or the group×group matrix
//! of switch groups. Pure: `ngctl matrix` gathers the nodes' views (from
//! the daemons' control plane, or from segment files) and prints what
//! `report` makes of the matrices.
//!
//! A node's view holds, per peer and transport, what a reader of its
//! segment gets from `lookup_or_class`: the pair's own entry, or for a
//! peer without one the entry of the pair's coverage class, marked with
//! the class's name (and the CLASS flag).

use netgauge::{flags, EntryData};

/// One (peer, transport) of a node's view.
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EntrySummary {
    pub peer: String,
    pub transport: String,
    /// PRTT(1,0,1)/2.
    pub eel_ns: f64,
    /// g of the first protocol range (small messages).
    pub g_ns: f64,
    /// The sustained large-message G: the bandwidth block's when the entry
    /// has one, else the last range's.
    pub G_ns_per_byte: f64,
    /// The entry's flags (CLASS when it stands for the class).
    pub flags: u32,
    pub measured_unix_ns: u64,
    /// The coverage class whose entry answers for a peer without one.
    pub class: Option<String>,
}

impl EntrySummary {
    fn of(e: &EntryData, peer: &str, class: Option<&str>) -> EntrySummary {
        let sustained = e
            .ext
            .bandwidth
            .map(|b| b.sustained_G_ns_per_byte.value)
            .filter(|g| g.is_finite());
        EntrySummary {
            peer: peer.to_string(),
            transport: e.transport.clone(),
            eel_ns: e.eel_ns,
            g_ns: e.ranges.first().map_or(f64::NAN, |r| r.g_ns),
            G_ns_per_byte: sustained
                .or_else(|| e.ranges.last().map(|r| r.G_ns_per_byte))
                .unwrap_or(f64::NAN),
            flags: e.flags | if class.is_some() { flags::CLASS } else { 0 },
            measured_unix_ns: e.measured_unix_ns,
            class: class.map(str::to_string),
        }
    }

    /// Bytes per second at the sustained G (None when G is not positive).
    pub fn bandwidth_bytes_per_s(&self) -> Option<f64> {
        (self.G_ns_per_byte.is_finite() && self.G_ns_per_byte > 0.0)
            .then(|| 1e9 / self.G_ns_per_byte)
    }
}

/// A node's view from its entries and its peer → class map, sorted by
/// (peer, transport): each pair's own entry, and for a mapped peer without
/// one over a transport, its class's entry over that transport.
pub fn summarize(entries: &[EntryData], class_of: &[(String, String)]) -> Vec<EntrySummary> {
    use std::collections::{BTreeMap, HashSet};
    let own: HashSet<(&str, &str)> = entries
        .iter()
        .map(|e| (e.peer.as_str(), e.transport.as_str()))
        .collect();
    let mut by_class: BTreeMap<&str, Vec<&EntryData>> = BTreeMap::new();
    let mut out = Vec::new();
    for e in entries {
        if e.peer.starts_with('@') {
            by_class.entry(e.peer.as_str()).or_default().push(e);
        } else {
            out.push(EntrySummary::of(e, &e.peer, None));
        }
    }
    for (peer, class) in class_of {
        for e in by_class.get(class.as_str()).into_iter().flatten() {
            if !own.contains(&(peer.as_str(), e.transport.as_str())) {
                out.push(EntrySummary::of(e, peer, Some(class)));
            }
        }
    }
    out.sort_by(|a, b| (&a.peer, &a.transport).cmp(&(&b.peer, &b.transport)));
    out
}

/// What one node publishes.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeView {
    pub node: String,
    pub entries: Vec<EntrySummary>,
}

/// One cell: the row node's view of the column node (or, in a group
/// matrix, the median over the pairs of two groups).
#[allow(non_snake_case)]
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Cell {
    pub eel_ns: f64,
    pub g_ns: f64,
    pub G_ns_per_byte: f64,
    /// Bytes per second at G (absent when G is not positive).
    pub bandwidth_bytes_per_s: Option<f64>,
    pub flags: u32,
    /// The class whose entry answers (node matrix only).
    pub class: Option<String>,
    /// Pairs the cell stands for (1 in a node matrix).
    pub pairs: u32,
    /// Of those, answered by a class entry.
    pub from_class: u32,
}

/// A matrix over one transport: `cells[i * cols.len() + j]` is row i's
/// view of column j.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Matrix {
    pub transport: String,
    /// "node" or "group".
    pub over: &'static str,
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub cells: Vec<Option<Cell>>,
}

impl Matrix {
    pub fn cell(&self, row: usize, col: usize) -> Option<&Cell> {
        self.cells.get(row * self.cols.len() + col)?.as_ref()
    }

    /// Cells with a value (the diagonal has none).
    pub fn filled(&self) -> usize {
        self.cells.iter().filter(|c| c.is_some()).count()
    }
}

/// The transports the views hold, sorted.
pub fn transports(views: &[NodeView]) -> Vec<String> {
    let mut t: Vec<String> = views
        .iter()
        .flat_map(|v| v.entries.iter().map(|e| e.transport.clone()))
        .collect();
    t.sort();
    t.dedup();
    t
}

/// The N×N matrix over `transport`: rows are the nodes whose views were
/// gathered, columns every node named (as a row or as a peer), both
/// sorted; rows missing from `views` (a node that did not answer) stay
/// empty if named only as peers.
pub fn node_matrix(views: &[NodeView], transport: &str) -> Matrix {
    let mut names: Vec<String> = views
        .iter()
        .map(|v| v.node.clone())
        .chain(
            views
                .iter()
                .flat_map(|v| v.entries.iter().map(|e| e.peer.clone())),
        )
        .collect();
    names.sort();
    names.dedup();
    let index = |n: &str| names.binary_search_by(|x| x.as_str().cmp(n)).ok();
    let mut cells = vec![None; names.len() * names.len()];
    for v in views {
        let Some(i) = index(&v.node) else { continue };
        for e in v.entries.iter().filter(|e| e.transport == transport) {
            let Some(j) = index(&e.peer) else { continue };
            if i == j {
                continue;
            }
            cells[i * names.len() + j] = Some(Cell {
                eel_ns: e.eel_ns,
                g_ns: e.g_ns,
                G_ns_per_byte: e.G_ns_per_byte,
                bandwidth_bytes_per_s: e.bandwidth_bytes_per_s(),
                flags: e.flags,
                class: e.class.clone(),
                pairs: 1,
                from_class: u32::from(e.class.is_some()),
            });
        }
    }
    Matrix {
        transport: transport.to_string(),
        over: "node",
        rows: names.clone(),
        cols: names,
        cells,
    }
}

/// The median of the finite values (NaN when there are none).
fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    crate::model::stats::median_in_place(&mut v)
}

/// The group×group matrix of a node matrix: each cell the median over the
/// filled node cells whose row and column fall in the two groups, with the
/// number of pairs and how many of them a class entry answered. Groups are
/// sorted by name.
pub fn group_matrix(m: &Matrix, group_of: impl Fn(&str) -> String) -> Matrix {
    let row_g: Vec<String> = m.rows.iter().map(|n| group_of(n)).collect();
    let col_g: Vec<String> = m.cols.iter().map(|n| group_of(n)).collect();
    let mut groups: Vec<String> = row_g.iter().chain(&col_g).cloned().collect();
    groups.sort();
    groups.dedup();
    let gi = |g: &str| groups.binary_search_by(|x| x.as_str().cmp(g)).unwrap_or(0);
    let k = groups.len();
    let mut acc: Vec<Vec<&Cell>> = vec![Vec::new(); k * k];
    for (i, rg) in row_g.iter().enumerate() {
        for (j, cg) in col_g.iter().enumerate() {
            if let Some(c) = m.cell(i, j) {
                acc[gi(rg) * k + gi(cg)].push(c);
            }
        }
    }
    let cells = acc
        .into_iter()
        .map(|cs| {
            if cs.is_empty() {
                return None;
            }
            let g = median(cs.iter().map(|c| c.G_ns_per_byte).collect());
            Some(Cell {
                eel_ns: median(cs.iter().map(|c| c.eel_ns).collect()),
                g_ns: median(cs.iter().map(|c| c.g_ns).collect()),
                G_ns_per_byte: g,
                bandwidth_bytes_per_s: (g.is_finite() && g > 0.0).then(|| 1e9 / g),
                flags: cs.iter().fold(0, |f, c| f | c.flags),
                class: None,
                pairs: cs.len() as u32,
                from_class: cs.iter().map(|c| c.from_class).sum(),
            })
        })
        .collect();
    Matrix {
        transport: m.transport.clone(),
        over: "group",
        rows: groups.clone(),
        cols: groups,
        cells,
    }
}
