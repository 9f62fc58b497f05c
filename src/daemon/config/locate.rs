//! Where the daemon's files live and which address its control plane
//! listens on, from the configuration, systemd's directory variables and
//! the routes toward the peers.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{
    Config, ConfigError, DEFAULT_CONTROL_PORT, DEFAULT_RUNTIME_DIR, DEFAULT_STATE_DIR, SEGMENT_NAME,
};

impl Config {
    /// The runtime directory: `runtime_dir`, the segment's directory when
    /// only `shm` is given, `$RUNTIME_DIRECTORY`, or /run/netgauged.
    pub fn runtime_dir(&self) -> PathBuf {
        if let Some(d) = &self.runtime_dir {
            return d.clone();
        }
        if let Some(parent) = self.shm.as_ref().and_then(|s| s.parent()) {
            return parent.to_path_buf();
        }
        systemd_dir("RUNTIME_DIRECTORY").unwrap_or_else(|| PathBuf::from(DEFAULT_RUNTIME_DIR))
    }

    /// The segment path: `shm`, else `<runtime_dir>/segment`.
    pub fn shm_path(&self) -> PathBuf {
        self.shm
            .clone()
            .unwrap_or_else(|| self.runtime_dir().join(SEGMENT_NAME))
    }

    /// The state file: `state_file`, else `<state_dir>/<node>.json`.
    pub fn state_path(&self, node: &str) -> PathBuf {
        if let Some(f) = &self.state_file {
            return f.clone();
        }
        let dir = self.state_dir.clone().unwrap_or_else(|| {
            systemd_dir("STATE_DIRECTORY").unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR))
        });
        let safe: String = node
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        dir.join(format!("{}.json", safe.trim_start_matches('.')))
    }

    /// The control plane's address: `listen`, else this node's address
    /// toward its first peer (the route the kernel picks) at port 7470.
    /// Logs a warning when the peers are reached from several addresses
    /// or `listen` is every interface.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        if let Some(a) = self.listen {
            if a.ip().is_unspecified() {
                tracing::warn!(
                    "listen = {a}: the control plane answers on every interface; \
                     name the cluster address to keep it off other networks"
                );
            }
            return Ok(a);
        }
        let Some(first) = self.peers.first() else {
            return Err(ConfigError::Invalid(
                "listen is not set and there is no peer to find the cluster address by: \
                 set listen = \"ADDR:PORT\""
                    .into(),
            ));
        };
        let local = |to: SocketAddr| -> Result<std::net::IpAddr, ConfigError> {
            route_source(to).map_err(|e| {
                ConfigError::Invalid(format!(
                    "listen is not set and no local address routes to peer address {to} ({e}): \
                     set listen = \"ADDR:PORT\""
                ))
            })
        };
        let ip = local(first.address)?;
        let others: Vec<String> = self
            .peers
            .iter()
            .filter_map(|p| {
                local(p.address)
                    .ok()
                    .filter(|&l| l != ip)
                    .map(|l| format!("{} via {l}", p.name))
            })
            .collect();
        if !others.is_empty() {
            tracing::warn!(
                "the control plane listens on {ip} (the route to {}); peers reached from other \
                 addresses: {} — set listen to choose",
                first.name,
                others.join(", ")
            );
        }
        Ok(SocketAddr::new(ip, DEFAULT_CONTROL_PORT))
    }
}

/// The local address the kernel would send from to reach `to` (a UDP
/// socket's connect makes no traffic).
fn route_source(to: SocketAddr) -> std::io::Result<std::net::IpAddr> {
    let bind: SocketAddr = if to.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = std::net::UdpSocket::bind(bind)?;
    s.connect(to)?;
    Ok(s.local_addr()?.ip())
}

/// The first directory of a systemd `*_DIRECTORY` variable, if set.
fn systemd_dir(var: &str) -> Option<PathBuf> {
    let v = std::env::var_os(var)?;
    let first = std::path::Path::new(&v)
        .to_str()
        .map(|s| s.split(':').next().unwrap_or("").to_string())?;
    (!first.is_empty()).then(|| PathBuf::from(first))
}
