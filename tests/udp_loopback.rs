//! `ngctl probe --transport udp` against `ngctl serve` on loopback.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::probe::{one_at_a_time, sane_probe, Killed};
use common::NGCTL;

fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

fn serve(port: u16) -> Killed {
    let child = Command::new(NGCTL)
        .args(["serve", "--transport", "udp", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--idle-exit-s", "60"])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ngctl serve");
    std::thread::sleep(Duration::from_millis(300));
    Killed(child)
}

#[test]
fn sweep_1b_to_64kib_is_sane() {
    let _serial = one_at_a_time();
    let port = free_port();
    let _server = serve(port);
    let out = Command::new(NGCTL)
        .args(["probe", "--transport", "udp", "--peer"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--max-size", "65536", "--json", "--resamples", "50"])
        .output()
        .expect("run ngctl probe");
    sane_probe(&out);
}

#[test]
fn dead_peer_ends_with_a_clear_error() {
    let _serial = one_at_a_time();
    let port = free_port();
    let mut server = serve(port);
    let child = Command::new(NGCTL)
        .args(["probe", "--transport", "udp", "--peer"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["--max-size", "4194304", "--timeout-ms", "200"])
        // 40 repetitions a size keep the sweep busy for over a second on
        // an idle loopback (a default sweep ends in about 0.7 s), so the
        // kill below lands in the middle of it.
        .args(["--min-reps", "40"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn probe");
    std::thread::sleep(Duration::from_millis(700));
    server.0.kill().expect("kill server");
    let started = Instant::now();
    let out = child.wait_with_output().expect("probe exits");
    assert!(!out.status.success(), "a probe whose peer died must fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("probe of 127.0.0.1")
            && (err.contains("stopped answering") || err.contains("closed")),
        "unclear error: {err}"
    );
    // Not a timing assertion: a hang would never get here at all; this only
    // guards against retrying for ever.
    assert!(started.elapsed() < Duration::from_secs(60));
}
