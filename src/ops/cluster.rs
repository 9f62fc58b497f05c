//! The cluster operations: `ngctl quiet` / `ngctl resume` (hold the local
//! node quiet through the file its daemon watches, see `daemon::quiet`)
//! and `ngctl matrix` (the cluster-wide view assembled from many nodes'
//! views, asked of their daemons over the control plane or read from
//! segment files the operator gathered).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::OpsError;
use crate::cluster::matrix::{group_matrix, node_matrix, summarize, transports, Matrix, NodeView};
use crate::cluster::{hostlist, topology::Topology};
use crate::control::{self, ConnConfig, Connection, EntriesRequest, Msg};
use crate::daemon::config::OPERATOR_NAME;
use crate::daemon::quiet::{self, QuietFile};
use crate::publish::unix_now_ns;

/// Nodes asked at once by `matrix` over the control plane.
const PARALLEL_NODES: usize = 32;
/// How long `matrix` waits for one daemon's view.
pub const MATRIX_TIMEOUT: Duration = Duration::from_secs(10);
/// Most nodes `matrix` takes from a hostlist.
const MAX_NODES: usize = 16_384;

/// A duration as the operator writes it: seconds, or a number with `s`,
/// `m`, `h` or `d` ("90", "90s", "15m", "2h", "1d").
pub fn parse_duration(s: &str) -> Result<Duration, OpsError> {
    let t = s.trim();
    let (num, unit_s) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86_400.0),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * unit_s < 1e9 => {
            Ok(Duration::from_secs_f64(v * unit_s))
        }
        _ => Err(OpsError::Usage(format!(
            "bad duration {s:?} (e.g. 90s, 15m, 2h, 1d)"
        ))),
    }
}

fn root_only(what: &str) -> Result<(), OpsError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(OpsError::Usage(format!(
            "ngctl {what} is for root (the daemon trusts a quiet file owned by root or by its own user)"
        )));
    }
    Ok(())
}

/// Hold the node whose segment is `shm` quiet as `holder` (default "ngctl"),
/// for `for_` (None: until resumed). Root only. Returns the quiet file as written.
pub fn quiet(
    shm: &str,
    holder: Option<&str>,
    for_: Option<Duration>,
) -> Result<QuietFile, OpsError> {
    root_only("quiet")?;
    let holder = holder.unwrap_or(OPERATOR_NAME);
    let now = unix_now_ns();
    let until = for_.map(|d| now.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64));
    Ok(quiet::hold(Path::new(shm), holder, now, until)?)
}

/// Let go of the quiet state as `holder` (None: every holder). Root only.
pub fn resume(shm: &str, holder: Option<&str>) -> Result<QuietFile, OpsError> {
    root_only("resume")?;
    Ok(quiet::release(Path::new(shm), holder, unix_now_ns())?)
}

/// `ngctl matrix`: where the nodes' views come from (the daemons of
/// `nodes`, else the `segments` files) and which matrices to make.
#[derive(Clone, Debug)]
pub struct MatrixArgs {
    /// Ask the daemons of these nodes (a hostlist) on `port`, as the
    /// operator, with the cluster key in `key_file`, each within `timeout`.
    pub nodes: Option<String>,
    pub port: u16,
    pub key_file: PathBuf,
    pub timeout: Duration,
    /// Else read these segment files.
    pub segments: Vec<PathBuf>,
    /// Slurm topology.conf: also the group×group matrices (by leaf switch).
    pub topology: Option<PathBuf>,
    /// Only this transport (None: every transport the views hold).
    pub transport: Option<String>,
}

/// What `ngctl matrix` prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MatrixData {
    /// Node matrices, one per transport, then the group matrices.
    pub matrices: Vec<Matrix>,
    /// Nodes whose view could not be had, and why.
    pub missing: Vec<(String, String)>,
}

/// Gather the views and assemble the matrices.
pub fn matrix(a: &MatrixArgs) -> Result<MatrixData, OpsError> {
    let topology = match &a.topology {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| OpsError::Read {
                what: p.display().to_string(),
                source,
            })?;
            Some(
                Topology::parse(&text)
                    .map_err(|e| OpsError::Usage(format!("{}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let (views, missing) = match &a.nodes {
        None if a.segments.is_empty() => {
            return Err(OpsError::Usage(
                "give --nodes HOSTLIST or --segments FILE…".into(),
            ))
        }
        None => views_from_segments(&a.segments),
        Some(nodes) => {
            let names = hostlist::expand_max(nodes, MAX_NODES)
                .map_err(|e| OpsError::Usage(format!("--nodes: {e}")))?;
            let key = control::load_key(&a.key_file)
                .map_err(|e| OpsError::Usage(format!("{}: {e}", a.key_file.display())))?;
            views_from_daemons(&names, a.port, &key, a.timeout)
        }
    };
    if views.is_empty() {
        let why: Vec<String> = missing.iter().map(|(n, w)| format!("{n}: {w}")).collect();
        return Err(OpsError::Usage(format!(
            "no node's view could be had ({})",
            why.join("; ")
        )));
    }
    let kinds = match &a.transport {
        Some(t) => vec![t.clone()],
        None => transports(&views),
    };
    let mut matrices: Vec<Matrix> = kinds.iter().map(|t| node_matrix(&views, t)).collect();
    if let Some(topo) = &topology {
        let group_of = |n: &str| {
            topo.leaf_of(n)
                .map_or("(unplaced)".into(), |s| s.name.clone())
        };
        let groups: Vec<Matrix> = matrices.iter().map(|m| group_matrix(m, group_of)).collect();
        matrices.extend(groups);
    }
    Ok(MatrixData { matrices, missing })
}

/// A node's view from its segment file.
fn view_of_segment(path: &Path) -> Result<NodeView, String> {
    let r = netgauge::Reader::open(path).map_err(|e| e.to_string())?;
    let info = r.info().map_err(|e| e.to_string())?;
    let entries = r.snapshot().map_err(|e| e.to_string())?;
    let classes = r.class_map().map_err(|e| e.to_string())?;
    Ok(NodeView {
        node: info.node_name,
        entries: summarize(&entries, &classes),
    })
}

type Gathered = (Vec<NodeView>, Vec<(String, String)>);

fn views_from_segments(files: &[PathBuf]) -> Gathered {
    let mut views = Vec::new();
    let mut missing = Vec::new();
    for f in files {
        match view_of_segment(f) {
            Ok(v) => views.push(v),
            Err(e) => missing.push((f.display().to_string(), e)),
        }
    }
    (views, missing)
}

/// A node's view from its daemon, page by page, all within `timeout`.
fn view_of_daemon(
    name: &str,
    port: u16,
    key: &control::ClusterKey,
    timeout: Duration,
) -> Result<NodeView, String> {
    use std::net::ToSocketAddrs;
    let deadline = Instant::now() + timeout;
    let addr = (name, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve: {e}"))?
        .next()
        .ok_or("resolves to no address")?;
    let mut conn = Connection::connect(addr, name, &ConnConfig::new(OPERATOR_NAME, key.clone()))
        .map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    let node = loop {
        let ask = Msg::Entries(EntriesRequest {
            offset: entries.len() as u32,
            max: control::msg::MAX_ENTRIES_PER_REPLY as u32,
        });
        match conn.request(&ask, deadline).map_err(|e| e.to_string())? {
            Msg::EntriesReply(r) => {
                let got = r.entries.len();
                entries.extend(r.entries);
                if got == 0 || entries.len() >= r.total as usize {
                    break r.node;
                }
            }
            other => return Err(format!("answered {} to entries", other.kind())),
        }
    };
    Ok(NodeView { node, entries })
}

fn views_from_daemons(
    names: &[String],
    port: u16,
    key: &control::ClusterKey,
    timeout: Duration,
) -> Gathered {
    let mut views = Vec::new();
    let mut missing = Vec::new();
    for chunk in names.chunks(PARALLEL_NODES) {
        let got: Vec<Result<NodeView, String>> = std::thread::scope(|s| {
            let hs: Vec<_> = chunk
                .iter()
                .map(|n| s.spawn(move || view_of_daemon(n, port, key, timeout)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())))
                .collect()
        });
        for (n, r) in chunk.iter().zip(got) {
            match r {
                Ok(v) => views.push(v),
                Err(e) => missing.push((n.clone(), e)),
            }
        }
    }
    (views, missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("2d").unwrap(), Duration::from_secs(172_800));
        for bad in ["", "m", "-5m", "0", "x", "1y", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }
}
