//! The metrics endpoint (`metrics_listen`): a small HTTP/1.x server that
//! answers `GET /metrics` and nothing else, built for a hostile network.
//!
//! One thread (`ng-metrics`) owns the listener and a table of at most
//! [`Limits::max_connections`] connections and sleeps in poll(2) on them,
//! the listener and a wake pipe: with no connection open it sleeps until
//! one arrives (no timer, no wake-up while idle). Every connection runs as
//! non-blocking steps under two deadlines counted from its accept: the
//! whole request head (at most [`Limits::max_request_bytes`], at most
//! [`Limits::max_headers`] headers, parsed by `httparse`) within
//! [`Limits::request`], the whole answer written within
//! [`Limits::total`]; a connection that misses one is reset and counted.
//! When the table is full, a new connection evicts the oldest that is still
//! reading its request (a scraper sends its request at once, so it is the
//! newest and survives a flood of idle connections; one being answered is
//! never evicted). Out of descriptors, the same eviction gives one back,
//! and with nothing to evict the listener rests for a moment. Answers: 200 with the exposition for `GET /metrics`
//! (a query string is ignored), 404 for another path, 405 for another
//! method, 400 for a malformed request, 431 for a request head too large;
//! every answer closes the connection.
//!
//! The exposition is rendered on this thread when a request is complete:
//! it reads the segment through a `netgauge::Reader` and takes the
//! status-file view of the daemon (locks the other threads hold only
//! briefly), so the probe thread never waits for a scrape.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::control::server::{accept_one, Accept, WakePipe};
use crate::control::Connection;
use crate::transport::sys::socket::walk_polled;

/// The server's bounds.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections open at once (reading or writing).
    pub max_connections: usize,
    /// Largest request head (request line and headers), bytes.
    pub max_request_bytes: usize,
    /// Most headers in a request.
    pub max_headers: usize,
    /// The whole request head must arrive within this of the accept.
    pub request: Duration,
    /// The answer must be written within this of the accept.
    pub total: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 16,
            max_request_bytes: 8 * 1024,
            max_headers: 32,
            request: Duration::from_secs(2),
            total: Duration::from_secs(10),
        }
    }
}

/// What the server counts (exposed as `netgauged_metrics_rejects_total`).
#[derive(Debug, Default)]
pub struct Counters {
    pub served: AtomicU64,
    /// Request head not complete within the request deadline, or answer
    /// not written within the total deadline.
    pub timeout: AtomicU64,
    /// Request head larger than the limit, or too many headers.
    pub oversize: AtomicU64,
    pub malformed: AtomicU64,
    pub not_found: AtomicU64,
    pub method: AtomicU64,
    /// Reset to make room for a newer connection.
    pub evicted: AtomicU64,
}

impl Counters {
    /// The rejections by kind.
    pub fn rejects(&self) -> [(&'static str, u64); 6] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("timeout", l(&self.timeout)),
            ("oversize", l(&self.oversize)),
            ("malformed", l(&self.malformed)),
            ("not_found", l(&self.not_found)),
            ("method", l(&self.method)),
            ("evicted", l(&self.evicted)),
        ]
    }
}

/// Renders the exposition for one request, with the server's counters.
pub type Render = dyn Fn(&Counters) -> String + Send + Sync;

/// A running metrics server. Dropping it stops it.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wake: Arc<WakePipe>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves on `listener` (made non-blocking here) until dropped.
    pub fn spawn(
        listener: TcpListener,
        limits: Limits,
        render: Box<Render>,
    ) -> std::io::Result<MetricsServer> {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let wake = Arc::new(WakePipe::new()?);
        let counters = Arc::new(Counters::default());
        let run = Run {
            listener,
            limits,
            render,
            stop: stop.clone(),
            wake: wake.clone(),
            counters: counters.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("ng-metrics".into())
            .spawn(move || run.run())?;
        Ok(MetricsServer {
            addr,
            stop,
            wake,
            counters,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.wake.wake();
        if let Some(t) = self.thread.take() {
            // The thread looks at the flag as soon as poll returns; its
            // steps never block.
            let _ = t.join();
        }
    }
}

struct Run {
    listener: TcpListener,
    limits: Limits,
    render: Box<Render>,
    stop: Arc<AtomicBool>,
    wake: Arc<WakePipe>,
    counters: Arc<Counters>,
}

/// One open connection.
struct Conn {
    stream: TcpStream,
    accepted: Instant,
    /// The request head read so far, then the answer being written.
    buf: Vec<u8>,
    /// Writing: bytes of `buf` sent.
    sent: usize,
    writing: bool,
}

/// What a step of a connection came to.
enum Step {
    Wait,
    /// Answered (or the client went away): close.
    Close,
    /// Reset it (already counted).
    Reset,
}

impl Run {
    fn run(self) {
        let cap = self.limits.max_connections.max(1);
        let mut table: Vec<Conn> = Vec::with_capacity(cap);
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(cap + 2);
        let mut paused_until: Option<Instant> = None;
        while !self.stop.load(Ordering::Acquire) {
            let now = Instant::now();
            paused_until = paused_until.filter(|&t| t > now);
            // Sleep until something happens or the nearest deadline; with
            // no connection, until one arrives or the stop.
            let timeout_ms = table
                .iter()
                .map(|c| self.deadline(c))
                .chain(paused_until)
                .min()
                .map_or(-1, |d| {
                    // Round up: waking before the deadline would spin.
                    let left = d.saturating_duration_since(now);
                    (left.as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
                });
            let listener = match paused_until {
                Some(_) => -1, // poll(2) skips a negative descriptor
                None => self.listener.as_raw_fd(),
            };
            if !self.wake.poll_server(
                &mut fds,
                listener,
                table.iter().map(|c| (c.stream.as_raw_fd(), c.writing)),
                timeout_ms,
            ) {
                continue;
            }
            // Open connections first, newest accepts after.
            walk_polled(
                &mut table,
                &mut fds,
                |c, ready| {
                    let step = if ready { self.step(c) } else { Step::Wait };
                    match step {
                        Step::Wait if Instant::now() >= self.deadline(c) => {
                            self.counters.timeout.fetch_add(1, Ordering::Relaxed);
                            Some(Step::Reset)
                        }
                        Step::Wait => None,
                        close_or_reset => Some(close_or_reset),
                    }
                },
                |c, step| {
                    if matches!(step, Step::Reset) {
                        Connection::abort_stream(c.stream);
                    } else {
                        let _ = c.stream.shutdown(std::net::Shutdown::Both);
                    }
                },
            );
            if fds[1].revents != 0 {
                paused_until = self.accept_some(&mut table, cap);
            }
        }
        for c in table {
            Connection::abort_stream(c.stream);
        }
    }

    /// The deadline of `c` in its current stage.
    fn deadline(&self, c: &Conn) -> Instant {
        c.accepted
            + if c.writing {
                self.limits.total
            } else {
                self.limits.request
            }
    }

    /// The oldest connection still reading its request: the one to evict
    /// (one that is writing an answer is a scraper being served).
    fn oldest_reading(table: &[Conn]) -> Option<usize> {
        (0..table.len())
            .filter(|&i| !table[i].writing)
            .min_by_key(|&i| table[i].accepted)
    }

    /// Accept what the listener holds, evicting the oldest connection that
    /// is still reading to make room (with every slot writing, the new
    /// connection is the one closed). Out of descriptors, the oldest
    /// reading connection is evicted to give one back; with none, the
    /// listener rests until the instant returned.
    fn accept_some(&self, table: &mut Vec<Conn>, cap: usize) -> Option<Instant> {
        let mut evicted = false;
        for _ in 0..cap {
            let evict = |table: &mut Vec<Conn>| match Self::oldest_reading(table) {
                Some(v) => {
                    self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                    Connection::abort_stream(table.swap_remove(v).stream);
                    true
                }
                None => false,
            };
            let stream = match accept_one(&self.listener, &mut evicted, || evict(table)) {
                Accept::Got(stream, _) => stream,
                Accept::Again => continue,
                Accept::Stop(rest) => return rest,
            };
            if table.len() >= cap {
                let Some(v) = Self::oldest_reading(table) else {
                    self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                    Connection::abort_stream(stream);
                    continue;
                };
                self.counters.evicted.fetch_add(1, Ordering::Relaxed);
                Connection::abort_stream(table.swap_remove(v).stream);
            }
            table.push(Conn {
                stream,
                accepted: Instant::now(),
                buf: Vec::new(),
                sent: 0,
                writing: false,
            });
        }
        None
    }

    /// Read what arrived, or write what the socket takes.
    fn step(&self, c: &mut Conn) -> Step {
        if c.writing {
            return write_some(c);
        }
        let mut chunk = [0u8; 2048];
        loop {
            let room = self.limits.max_request_bytes + 1 - c.buf.len();
            let want = room.min(chunk.len());
            match c.stream.read(&mut chunk[..want]) {
                Ok(0) => return Step::Close,
                Ok(n) => c.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Step::Reset,
            }
            match self.parse(&c.buf) {
                Parsed::Partial if c.buf.len() > self.limits.max_request_bytes => {
                    self.counters.oversize.fetch_add(1, Ordering::Relaxed);
                    return self.answer(c, 431, "Request Header Fields Too Large", None);
                }
                Parsed::Partial => {}
                Parsed::Bad(code, reason) => return self.answer(c, code, reason, None),
                Parsed::Metrics => {
                    self.counters.served.fetch_add(1, Ordering::Relaxed);
                    let body = (self.render)(&self.counters);
                    return self.answer(c, 200, "OK", Some(body));
                }
            }
        }
    }

    /// Judge a request head read so far.
    fn parse(&self, head: &[u8]) -> Parsed {
        let mut headers = vec![httparse::EMPTY_HEADER; self.limits.max_headers];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Partial) => Parsed::Partial,
            Ok(httparse::Status::Complete(_)) => {
                let path = req.path.unwrap_or("");
                let path = path.split_once('?').map_or(path, |(p, _)| p);
                if req.method != Some("GET") {
                    self.counters.method.fetch_add(1, Ordering::Relaxed);
                    Parsed::Bad(405, "Method Not Allowed")
                } else if path != "/metrics" {
                    self.counters.not_found.fetch_add(1, Ordering::Relaxed);
                    Parsed::Bad(404, "Not Found")
                } else {
                    Parsed::Metrics
                }
            }
            Err(httparse::Error::TooManyHeaders) => {
                self.counters.oversize.fetch_add(1, Ordering::Relaxed);
                Parsed::Bad(431, "Request Header Fields Too Large")
            }
            Err(_) => {
                self.counters.malformed.fetch_add(1, Ordering::Relaxed);
                Parsed::Bad(400, "Bad Request")
            }
        }
    }

    /// Start writing the answer.
    fn answer(&self, c: &mut Conn, code: u16, reason: &str, body: Option<String>) -> Step {
        let (ctype, body) = match body {
            Some(b) => (super::CONTENT_TYPE, b),
            None => (
                "text/plain; charset=utf-8",
                format!("{code} {reason}: only GET /metrics is served\n"),
            ),
        };
        let allow = if code == 405 { "Allow: GET\r\n" } else { "" };
        let mut out = format!(
            "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body.as_bytes());
        c.buf = out;
        c.sent = 0;
        c.writing = true;
        write_some(c)
    }
}

enum Parsed {
    Partial,
    Bad(u16, &'static str),
    Metrics,
}

/// Write what the socket takes of the answer.
fn write_some(c: &mut Conn) -> Step {
    while c.sent < c.buf.len() {
        match c.stream.write(&c.buf[c.sent..]) {
            Ok(0) => return Step::Reset,
            Ok(n) => c.sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Step::Reset,
        }
    }
    Step::Close
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn server(limits: Limits) -> MetricsServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        MetricsServer::spawn(
            l,
            limits,
            Box::new(|c: &Counters| {
                format!(
                    "# TYPE x gauge\nx 1\n# TYPE served gauge\nserved {}\n",
                    c.served.load(Ordering::Relaxed)
                )
            }),
        )
        .unwrap()
    }

    /// Send `req`, read the whole answer (the server closes), within 5 s.
    fn ask(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn answers_get_metrics_only() {
        let srv = server(Limits::default());
        let a = srv.local_addr();
        let ok = ask(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        let body = ok.split_once("\r\n\r\n").unwrap().1;
        assert_eq!(body, "# TYPE x gauge\nx 1\n# TYPE served gauge\nserved 1\n");
        let len: usize = ok
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(len, body.len());
        assert!(ask(a, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
        let nf = ask(a, b"GET / HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404 "), "{nf}");
        let m = ask(a, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert!(
            m.starts_with("HTTP/1.1 405 ") && m.contains("Allow: GET\r\n"),
            "{m}"
        );
        assert!(ask(a, b"HEAD /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405 "));
        assert!(ask(a, b"\x00\x01garbage\r\n\r\n").starts_with("HTTP/1.1 400 "));
        let c = srv.counters();
        assert_eq!(c.served.load(Ordering::Relaxed), 2);
        assert_eq!(c.not_found.load(Ordering::Relaxed), 1);
        assert_eq!(c.method.load(Ordering::Relaxed), 2);
        assert_eq!(c.malformed.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn oversize_requests_and_too_many_headers_are_refused() {
        let srv = server(Limits::default());
        let a = srv.local_addr();
        let mut big = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        big.extend_from_slice(&[b'a'; 64 * 1024]);
        big.extend_from_slice(b"\r\n\r\n");
        // The server answers after 8 KiB and closes; the rest of the
        // client's write may fail: only the answer matters.
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = s.write_all(&big);
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let out = String::from_utf8_lossy(&out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
        let mut many = b"GET /metrics HTTP/1.1\r\n".to_vec();
        for i in 0..40 {
            many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(ask(a, &many).starts_with("HTTP/1.1 431 "));
        assert_eq!(srv.counters().oversize.load(Ordering::Relaxed), 2);
        assert_eq!(srv.counters().served.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_slow_request_is_cut_at_its_deadline_and_others_are_served_meanwhile() {
        let limits = Limits {
            request: Duration::from_millis(300),
            ..Limits::default()
        };
        let srv = server(limits);
        let a = srv.local_addr();
        // Slowloris: a header line at a time, never the end of the head.
        let mut slow = TcpStream::connect(a).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        // A scraper is served while the slow one is open.
        assert!(ask(a, b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        slow.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut cut = false;
        for i in 0..50 {
            if slow.write_all(format!("X-{i}: y\r\n").as_bytes()).is_err() {
                cut = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            let mut b = [0u8; 16];
            slow.set_nonblocking(true).unwrap();
            match slow.read(&mut b) {
                Ok(0) => cut = true,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Ok(_) => panic!("the slow request got an answer"),
                Err(_) => cut = true,
            }
            slow.set_nonblocking(false).unwrap();
            if cut {
                break;
            }
        }
        assert!(cut, "the slow request was never cut (1 s of headers)");
        assert_eq!(srv.counters().timeout.load(Ordering::Relaxed), 1);
        assert_eq!(srv.counters().served.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_flood_of_idle_connections_evicts_the_oldest_and_a_scraper_still_gets_through() {
        let limits = Limits {
            max_connections: 4,
            ..Limits::default()
        };
        let srv = server(limits);
        let a = srv.local_addr();
        let idle: Vec<TcpStream> = (0..12).map(|_| TcpStream::connect(a).unwrap()).collect();
        assert!(ask(a, b"GET /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 200"));
        // 12 idle + 1 scraper through 4 slots: at least 9 evicted.
        assert!(srv.counters().evicted.load(Ordering::Relaxed) >= 9);
        drop(idle);
    }

    #[test]
    fn dropping_the_server_stops_its_thread() {
        let srv = server(Limits::default());
        let a = srv.local_addr();
        let _open = TcpStream::connect(a).unwrap();
        drop(srv);
        // The listener is closed with the thread.
        assert!(TcpStream::connect(a).is_err());
    }
}
