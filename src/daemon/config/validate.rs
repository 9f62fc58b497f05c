//! Validation of a parsed configuration: every setting within its bounds
//! (`limits`), names a peer or a node can carry, known transports.

use super::limits::*;
use super::{Config, ConfigError, OPERATOR_NAME};
use crate::transport::kind::known;
use crate::transport::Kind;

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        one_to(
            "budget_bytes_per_s",
            self.budget_bytes_per_s,
            MAX_BUDGET_BYTES_PER_S,
        )?;
        positive_at_most(
            "recheck_interval_s",
            self.recheck_interval_s,
            MAX_RECHECK_INTERVAL_S,
        )?;
        one_to(
            "history_max_records",
            self.history_max_records as u64,
            MAX_HISTORY_RECORDS as u64,
        )?;
        positive_at_most(
            "history_max_age_s",
            self.history_max_age_s,
            MAX_HISTORY_AGE_S,
        )?;
        if !(MIN_HISTORY_BYTES..=MAX_HISTORY_BYTES).contains(&self.history_max_bytes) {
            return bad(format!(
                "history_max_bytes must be {MIN_HISTORY_BYTES} to {MAX_HISTORY_BYTES}"
            ));
        }
        if !(self.resolve_timeout_s.is_finite()
            && self.resolve_timeout_s > 0.0
            && self.resolve_retry_s.is_finite()
            && self.resolve_retry_s > 0.0)
        {
            return bad("resolve_timeout_s and resolve_retry_s must be positive".into());
        }
        if self.hostlist.is_none() && self.peers_file.is_none() && self.peers.is_empty() {
            return bad(
                "no peers: set peers = \"HOSTLIST\", peers_file or [[peer]] entries".into(),
            );
        }
        for t in self.transports.iter().flatten() {
            if !t.parse::<Kind>().is_ok_and(|k| k.descriptor().daemon) {
                return bad(format!(
                    "transports: unknown transport {t:?} (known: {})",
                    known(|k| k.descriptor().daemon)
                ));
            }
        }
        if self.node.as_deref() == Some(OPERATOR_NAME) {
            return bad(format!("node: {OPERATOR_NAME:?} is the operator's name"));
        }
        if !(self.fanout_interval_s.is_finite()
            && self.fanout_interval_s >= 0.0
            && self.fanout_interval_s <= MAX_FANOUT_INTERVAL_S)
        {
            return bad(format!(
                "fanout_interval_s must be 0 (never) to {MAX_FANOUT_INTERVAL_S}"
            ));
        }
        one_to("max_size_bytes", self.max_size_bytes, MAX_SIZE_BYTES)?;
        if let Some(r) = self.max_reps {
            one_to("max_reps", r.into(), MAX_REPS.into())?;
        }
        if self.latency_samples > MAX_LATENCY_SAMPLES {
            return bad(format!(
                "latency_samples must be 0 (none) to {MAX_LATENCY_SAMPLES}"
            ));
        }
        if self.udp_port == 0 {
            return bad("udp_port must not be 0 (peers are told this port)".into());
        }
        if self.listen.is_some_and(|a| a.port() == 0) {
            return bad("listen needs a port (peers connect to it)".into());
        }
        if self
            .sched_fifo_priority
            .is_some_and(|p| !(1..=99).contains(&p))
        {
            return bad("sched_fifo_priority must be 1 to 99".into());
        }
        if self
            .probe_cpu
            .is_some_and(|c| c >= libc::CPU_SETSIZE as usize)
        {
            return bad(format!("probe_cpu must be below {}", libc::CPU_SETSIZE));
        }
        if let Some(n) = &self.node {
            if !name_ok(n) {
                return bad(format!(
                    "node {n:?}: 1 to {} bytes without control characters",
                    netgauge::layout::PEER_MAX_BYTES
                ));
            }
        }
        for (what, p) in [
            ("runtime_dir", &self.runtime_dir),
            ("shm", &self.shm),
            ("state_dir", &self.state_dir),
            ("state_file", &self.state_file),
        ] {
            if p.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                return bad(format!("{what} must not be empty"));
            }
        }
        if self.metrics_listen.is_some_and(|a| a.port() == 0) {
            return bad("metrics_listen needs a port (Prometheus scrapes it)".into());
        }
        if let Some(p) = &self.metrics_textfile {
            if p.extension() != Some(std::ffi::OsStr::new("prom")) || p.file_stem().is_none() {
                return bad(format!(
                    "metrics_textfile {}: the file name must end in .prom (node_exporter's \
                     textfile collector reads only those)",
                    p.display()
                ));
            }
        }
        // After the scalar bounds above, which name their own setting.
        self.schedule_config()
            .validate()
            .or_else(|e| bad(e.to_string()))?;
        if let Some(v) = &self.verbs {
            if v.device.is_empty() || v.device.len() > 64 || v.port == 0 {
                return bad(
                    "[verbs]: device must be named (≤ 64 bytes) and port is 1-based".into(),
                );
            }
            one_to(
                "[verbs]: eager_max_bytes",
                v.eager_max_bytes,
                MAX_EAGER_BYTES,
            )?;
            if v.inline_max_bytes.is_some_and(|b| b > MAX_INLINE_BYTES) {
                return bad(format!(
                    "[verbs]: inline_max_bytes must be at most {MAX_INLINE_BYTES}"
                ));
            }
            if v.gid_index.is_some_and(|g| g > 255) {
                return bad("[verbs]: gid_index must be at most 255".into());
            }
        }
        if self.peers.len() > MAX_PEERS {
            return bad(format!(
                "{} peers: at most {MAX_PEERS} per daemon",
                self.peers.len()
            ));
        }
        let c = &self.contention;
        if !(c.interval_s >= 0.0 && c.interval_s.is_finite()) {
            return bad("[contention] interval_s must be 0 (never) or positive".into());
        }
        if c.size_bytes == 0 || !(2..=crate::transport::Meta::MAX_ANSWERS).contains(&c.burst) {
            return bad("[contention] size_bytes must be positive and burst 2..=4096".into());
        }
        if c.rounds == 0 || !(1..=8).contains(&c.max_k) {
            return bad("[contention] rounds must be positive and max_k 1..=8".into());
        }
        let mut names = std::collections::HashSet::new();
        for p in &self.peers {
            if !name_ok(&p.name) {
                return bad(format!(
                    "peer name {:?}: 1 to 63 bytes without control characters",
                    p.name
                ));
            }
            if !names.insert(&p.name) {
                return bad(format!("peer {:?} is listed twice", p.name));
            }
            if p.address.port() == 0 || p.address.ip().is_unspecified() {
                return bad(format!(
                    "peer {}: address {} is not one a connection can reach",
                    p.name, p.address
                ));
            }
            if p.interface
                .as_ref()
                .is_some_and(|i| i.is_empty() || i.len() > 15)
            {
                return bad(format!(
                    "peer {}: interface names are 1 to 15 bytes",
                    p.name
                ));
            }
            if p.transports
                .as_ref()
                .is_some_and(|t| t.is_empty() || t.len() > 16)
            {
                return bad(format!("peer {}: transports lists 1 to 16 names", p.name));
            }
            for t in p.transports.iter().flatten() {
                if !t.parse::<Kind>().is_ok_and(|k| k.descriptor().daemon) {
                    return bad(format!(
                        "peer {}: unknown transport {t:?} (known: {})",
                        p.name,
                        known(|k| k.descriptor().daemon)
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Setting `name` = `v` is 1 to `max`.
fn one_to(name: &str, v: u64, max: u64) -> Result<(), ConfigError> {
    if v == 0 || v > max {
        return Err(ConfigError::Invalid(format!("{name} must be 1 to {max}")));
    }
    Ok(())
}

/// Setting `name` = `v` is finite, positive and at most `max`.
fn positive_at_most(name: &str, v: f64, max: f64) -> Result<(), ConfigError> {
    if !(v.is_finite() && v > 0.0 && v <= max) {
        return Err(ConfigError::Invalid(format!(
            "{name} must be positive and at most {max}"
        )));
    }
    Ok(())
}

fn name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= netgauge::layout::PEER_MAX_BYTES && !n.chars().any(char::is_control)
}
