//! The conflict probe on the contention rig (tests/contention/rig.sh): four
//! namespace hosts on one bridge, each shaped to 100 Mbit/s on its egress
//! and on the bridge port towards it, so k flows out of (or into) host 1
//! share its rate and the penalty is k. `ngctl serve` in hosts 2–4,
//! `ngctl contention` from host 1, k = 1 … 3. Root only; timing-sensitive:
//! run under `flock /tmp/netns.lock flock /tmp/measure.lock`.

#[macro_use]
mod common;

use std::process::{Child, Command};

use common::netns::require_root;
use common::{json_of, NGCTL};

const RIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/contention/rig.sh");

/// The rig, taken down on drop (also when the test fails).
struct Rig {
    prefix: String,
    servers: Vec<Child>,
}

impl Rig {
    fn up(hosts: usize) -> Rig {
        require_root();
        let prefix = format!("h11t{}", std::process::id() % 100_000);
        let st = Command::new("bash")
            .args([RIG, "up", "star", &hosts.to_string(), "100mbit"])
            .env("PREFIX", &prefix)
            .env("SUBNET", "10.114.0")
            .status()
            .expect("run rig.sh");
        let rig = Rig {
            prefix,
            servers: Vec::new(),
        };
        assert!(st.success(), "rig.sh up failed");
        rig
    }

    fn exec(&self, host: usize) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &format!("{}h{host}", self.prefix), NGCTL]);
        c
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for s in &mut self.servers {
            let _ = s.kill();
            let _ = s.wait();
        }
        let _ = Command::new("bash")
            .args([RIG, "down"])
            .env("PREFIX", &self.prefix)
            .status();
    }
}

root_test! {
    fn shaped_links_give_penalty_k_out_and_in() {
        penalties_on_the_star_rig();
    }
}

/// `ngctl contention` from host 1 of a 4-host star: outgoing and incoming
/// penalties within 10 % of k.
fn penalties_on_the_star_rig() {
    let hosts = 4;
    let mut rig = Rig::up(hosts);
    let mut peers = Vec::new();
    for h in 2..=hosts {
        let addr = format!("10.114.0.{h}:7471");
        let child = rig
            .exec(h)
            .args([
                "serve",
                "--transport",
                "udp",
                "--listen",
                &addr,
                "--idle-exit-s",
                "60",
            ])
            .spawn()
            .expect("start ngctl serve");
        rig.servers.push(child);
        peers.push(addr);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let v = json_of(rig.exec(1).args([
        "contention",
        "--transport",
        "udp",
        "--peer",
        &peers.join(","),
        "--schemes",
        "outgoing,incoming",
        "--rounds",
        "6",
        "--json",
    ]));
    for scheme in ["outgoing", "incoming"] {
        let rows = v["fit"][scheme].as_array().expect("penalties");
        assert_eq!(rows.len(), hosts - 1, "{scheme}: {rows:?}");
        for p in rows {
            let k = p["k"].as_f64().unwrap();
            let e = &p["penalty"];
            let value = e["value"].as_f64().unwrap();
            assert!(
                (value / k - 1.0).abs() < 0.10,
                "{scheme} k={k}: penalty {value} not within 10 % of the shaper's {k}"
            );
        }
    }
}
