//! The cluster protocol with real daemons, as `scripts/cluster_rig.sh`
//! runs it (bench/cluster_rig.md has the 16-host runs): 4 namespace hosts
//! on one bridge, every node's peers the hostlist, one mesh session at a
//! time (`mesh_pairs_per_round = 1`, so the cap's rounds are exercised).
//! The script checks, and this test asserts from its report:
//! - every directed pair published from the hostlist, at most one refused
//!   session per pair;
//! - a node held quiet sends no probe bytes, runs no busy thread, costs
//!   its peers no failure, and takes part again after `ngctl resume`;
//! - kill -9 of a node leaves the others running, and after a restart
//!   the node is in sessions again.
//!
//! Needs root, as tests/daemon_netns.rs (cfg `netns_tests`, see build.rs);
//! in any other build the runner lists it as ignored, with the reason.

use std::path::Path;
use std::process::Command;

#[macro_use]
mod common;

/// The number after `key` in `line` (`"mesh: 12 / 12 …"` → 12 for "mesh:").
fn number_after(line: &str, key: &str) -> Option<u64> {
    line.split(key)
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

root_test! {
    fn four_daemons_mesh_from_a_hostlist_go_quiet_resume_and_survive_a_kill() {
        let bin = Path::new(env!("CARGO_BIN_EXE_netgauged"))
            .parent()
            .expect("the binaries' directory");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cluster_rig.sh");
        let out = Command::new("timeout")
            .args(["900", "bash", script, "4"])
            .env("BIN", bin)
            .env("TAG", "crig")
            .env("NET", "96")
            .env("ROUND_S", "2")
            .env("MESH_PAIRS", "1")
            .env("PIN", "0")
            // A budget that does not make the mesh wait: the protocol is
            // the point here, the budget has its own tests.
            .env("BUDGET", "50000000")
            .env("MESH_LIMIT_S", "300")
            .env("QUIET_S", "10")
            .env("KEEP", common::tmp_path("cluster-rig", "logs"))
            .output()
            .expect("bash runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{stdout}");
        assert!(out.status.success(), "cluster_rig.sh failed:\n{stdout}\n{stderr}");
        let line = |start: &str| {
            stdout
                .lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no {start:?} line in:\n{stdout}"))
                .to_string()
        };
        // 4 hosts: 12 directed pairs, 6 pairs.
        let mesh = line("mesh:");
        assert_eq!(number_after(&mesh, "mesh:"), Some(12), "{mesh}");
        assert!(mesh.contains("12 / 12 directed pairs"), "{mesh}");
        let refused = line("refused sessions:");
        let r = number_after(&refused, "refused sessions:").expect("a count");
        assert!(r <= 6, "{refused}");
        let quiet = line("quiet: ");
        assert!(quiet.contains("settled 0 probe payload bytes"), "{quiet}");
        assert!(line("resume: ").contains("first session"));
        let kill = line("kill -9 ");
        assert!(kill.contains("3 of 3 other daemons alive"), "{kill}");
        assert!(line("restart: ").contains("in its second session"));
        assert!(stdout.lines().any(|l| l == "PASS"));
    }
}
