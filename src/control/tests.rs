//! The server's connection lifecycle, over loopback TCP.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::*;

/// Records which connection every message came on and every close.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(ConnId, String)>>,
    closed: Mutex<Vec<(ConnId, String)>>,
}

impl Handler for Arc<Recorder> {
    fn handle(&self, _peer: &str, _msg: Msg) -> Option<Msg> {
        panic!("the server calls handle_on");
    }
    fn handle_on(&self, conn: ConnId, peer: &str, msg: Msg) -> Option<Msg> {
        self.seen.lock().unwrap().push((conn, peer.to_owned()));
        // Echo everything but keep-alives, which (as in the daemon) need no
        // answer.
        (!matches!(msg, Msg::ProbeAlive(_))).then_some(msg)
    }
    fn closed(&self, conn: ConnId, peer: &str) {
        self.closed.lock().unwrap().push((conn, peer.to_owned()));
    }
}

fn key() -> ClusterKey {
    ClusterKey::from_bytes(crate::control::key::TEST_KEY).unwrap()
}

fn hello(node: &str) -> Msg {
    Msg::Hello(Hello {
        node: node.into(),
        generation: 1,
        nonce: 2,
        time_unix_ns: 3,
    })
}

/// Wait (bounded) until `n` closes are recorded.
fn closes(r: &Recorder, n: usize) -> Vec<(ConnId, String)> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let c = r.closed.lock().unwrap().clone();
        if c.len() >= n || Instant::now() > end {
            return c;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_connection_has_an_id_and_its_end_is_reported_once() {
    let rec = Arc::new(Recorder::default());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server =
        ControlServer::spawn(listener, ServerConfig::new("srv", key()), rec.clone()).unwrap();
    let addr = server.local_addr();
    let cc = ConnConfig::new("cli", key());
    let deadline = || Instant::now() + Duration::from_secs(5);

    // Two connections at once: distinct ids, each message tagged with its own.
    let mut a = Connection::connect(addr, "srv", &cc).unwrap();
    let mut b = Connection::connect(addr, "srv", &cc).unwrap();
    a.request(&hello("cli"), deadline()).unwrap();
    b.request(&hello("cli"), deadline()).unwrap();
    a.request(&hello("cli"), deadline()).unwrap();
    let seen = rec.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    let (ida, idb) = (seen[0].0, seen[1].0);
    assert_ne!(ida, idb);
    assert_eq!(seen[2].0, ida);
    assert!(seen.iter().all(|(_, p)| p == "cli"));
    assert!(rec.closed.lock().unwrap().is_empty());

    // A clean close, then a reset (what a killed client's kernel sends at
    // the latest): each reported once, with its id.
    a.close();
    assert_eq!(closes(&rec, 1), vec![(ida, "cli".to_string())]);
    b.abort();
    assert_eq!(
        closes(&rec, 2),
        vec![(ida, "cli".to_string()), (idb, "cli".to_string())]
    );
    server.shutdown();
    assert_eq!(rec.closed.lock().unwrap().len(), 2);
}

#[test]
fn keep_alive_holds_a_connection_open_past_the_idle_limit() {
    let rec = Arc::new(Recorder::default());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut scfg = ServerConfig::new("srv", key());
    scfg.idle = Duration::from_millis(400);
    let server = ControlServer::spawn(listener, scfg, rec.clone()).unwrap();
    let addr = server.local_addr();
    let cc = ConnConfig::new("cli", key());
    let deadline = || Instant::now() + Duration::from_secs(5);
    let alive = Msg::ProbeAlive(ProbeDone { session_nonce: 9 });

    // Two connections through three idle limits of work: `a` with a
    // keep-alive every quarter of one, `b` silent. The server ends `b`
    // only, and `a` still answers afterwards.
    let mut a = Connection::connect(addr, "srv", &cc).unwrap();
    let b = Connection::connect(addr, "srv", &cc).unwrap();
    let out = a.keep_alive_during(&alive, Duration::from_millis(100), || {
        std::thread::sleep(Duration::from_millis(1200));
        7
    });
    assert_eq!(out, 7);
    assert!(matches!(
        a.request(&hello("cli"), deadline()),
        Ok(Msg::Hello(_))
    ));
    let seen = rec.seen.lock().unwrap().clone();
    let ida = seen[0].0;
    assert!(seen.iter().all(|(id, _)| *id == ida), "{seen:?}");
    assert!(
        seen.len() > 3,
        "{} keep-alives in 3 idle limits",
        seen.len() - 1
    );
    let closed = closes(&rec, 1);
    assert_eq!(closed.len(), 1, "{closed:?}");
    assert_ne!(closed[0].0, ida);
    drop(b);
    a.close();
    server.shutdown();
}
