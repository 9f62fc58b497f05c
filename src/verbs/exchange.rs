//! The endpoint exchange over a small TCP side channel (`ngctl serve` and
//! `ngctl probe` over rdma and msg; the daemon carries endpoints on its
//! control plane instead): each side sends one fixed-size little-endian
//! endpoint record, then both confirm with one byte once their queue pair
//! is ready to receive. [`SideChannel`] is the link layer's
//! [`Rendezvous`] for it.
//!
//! The record is fixed-layout and length-checked rather than serde+bincode:
//! 80 bytes, no dependency, and a decoder whose every rejection is a
//! sentence (wrong magic, wrong version, truncated, out-of-range field).
//!
//! Layout (all little-endian):
//! ```text
//!  0 magic "NGVE"   4 version u16   6 kind u8     7 mtu u8
//!  8 qpn u32       12 psn u32      16 gid [16]   32 lid u16   34 reserved u16
//! 36 rkey u32      40 addr u64     48 size u64   56 max_inline u32
//! 60 tokens u32    64 token_bytes u32   68 eager_max u32   72 max_msg u64
//! ```
//! The kind byte is the kind's `record` code in the transport list.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The endpoint of a queue pair (one shape for the side channel, the
/// control plane and the verbs wrapper).
pub use crate::transport::open::QpEndpoint as Endpoint;
use crate::transport::open::{OpenError, Rendezvous};
/// Which transport an endpoint belongs to: the transport kind.
pub use crate::transport::Kind as EndpointKind;

pub const MAGIC: [u8; 4] = *b"NGVE";
pub const VERSION: u16 = 1;
pub const RECORD_BYTES: usize = 80;
/// Deadline of each read and write of the exchange, unless set otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const READY: u8 = 0xA5;

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("endpoint exchange with {peer}: {source}")]
    Io {
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("endpoint record truncated: got {got} of {want} bytes")]
    Truncated { got: usize, want: usize },
    #[error("endpoint record has a bad magic {0:02x?} (not a netgauged verbs peer)")]
    BadMagic([u8; 4]),
    #[error("endpoint record version {0} is not supported (this side speaks {VERSION})")]
    BadVersion(u16),
    #[error("endpoint record of an unknown transport kind {0}")]
    BadKind(u8),
    #[error("endpoint record field {field} out of range: {value}")]
    BadField { field: &'static str, value: u64 },
    #[error("peer runs the {peer} transport, this side {local}")]
    KindMismatch {
        local: EndpointKind,
        peer: EndpointKind,
    },
    #[error("peer did not confirm readiness")]
    NotReady,
    #[error("no client connected within {0:?}")]
    AcceptTimeout(Duration),
}

fn rd_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn rd_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}
fn rd_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl Endpoint {
    pub fn encode(&self) -> [u8; RECORD_BYTES] {
        let mut b = [0u8; RECORD_BYTES];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6] = self.kind.record().unwrap_or(0);
        b[7] = self.mtu;
        b[8..12].copy_from_slice(&self.qpn.to_le_bytes());
        b[12..16].copy_from_slice(&self.psn.to_le_bytes());
        b[16..32].copy_from_slice(&self.gid);
        b[32..34].copy_from_slice(&self.lid.to_le_bytes());
        b[36..40].copy_from_slice(&self.rkey.to_le_bytes());
        b[40..48].copy_from_slice(&self.addr.to_le_bytes());
        b[48..56].copy_from_slice(&self.size_bytes.to_le_bytes());
        b[56..60].copy_from_slice(&self.max_inline_bytes.to_le_bytes());
        b[60..64].copy_from_slice(&self.tokens.to_le_bytes());
        b[64..68].copy_from_slice(&self.token_bytes.to_le_bytes());
        b[68..72].copy_from_slice(&self.eager_max_bytes.to_le_bytes());
        b[72..80].copy_from_slice(&self.max_msg_bytes.to_le_bytes());
        b
    }

    /// Decode and validate one record (exactly [`RECORD_BYTES`] bytes).
    pub fn decode(b: &[u8]) -> Result<Endpoint, ExchangeError> {
        if b.len() < RECORD_BYTES {
            return Err(ExchangeError::Truncated {
                got: b.len(),
                want: RECORD_BYTES,
            });
        }
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(ExchangeError::BadMagic(magic));
        }
        let version = rd_u16(b, 4);
        if version != VERSION {
            return Err(ExchangeError::BadVersion(version));
        }
        let kind = EndpointKind::of_record(b[6]).ok_or(ExchangeError::BadKind(b[6]))?;
        let mtu = b[7];
        if !(1..=5).contains(&mtu) {
            return Err(ExchangeError::BadField {
                field: "mtu",
                value: u64::from(mtu),
            });
        }
        let qpn = rd_u32(b, 8);
        if qpn >= 1 << 24 {
            return Err(ExchangeError::BadField {
                field: "qpn",
                value: u64::from(qpn),
            });
        }
        let psn = rd_u32(b, 12);
        if psn >= 1 << 24 {
            return Err(ExchangeError::BadField {
                field: "psn",
                value: u64::from(psn),
            });
        }
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[16..32]);
        let addr = rd_u64(b, 40);
        let size_bytes = rd_u64(b, 48);
        if addr.checked_add(size_bytes).is_none() {
            return Err(ExchangeError::BadField {
                field: "addr+size",
                value: addr,
            });
        }
        Ok(Endpoint {
            kind,
            mtu,
            qpn,
            psn,
            gid,
            lid: rd_u16(b, 32),
            rkey: rd_u32(b, 36),
            addr,
            size_bytes,
            max_inline_bytes: rd_u32(b, 56),
            tokens: rd_u32(b, 60),
            token_bytes: rd_u32(b, 64),
            eager_max_bytes: rd_u32(b, 68),
            max_msg_bytes: rd_u64(b, 72),
        })
    }
}

/// A random 24-bit packet sequence number.
pub fn random_psn() -> u32 {
    rand::random::<u32>() & 0x00ff_ffff
}

/// The TCP side channel of one session.
pub struct SideChannel {
    stream: TcpStream,
    peer: String,
}

impl SideChannel {
    /// Connect to an `ngctl serve` (within `timeout`).
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<SideChannel, ExchangeError> {
        let peer = addr.to_string();
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|source| ExchangeError::Io {
                peer: peer.clone(),
                source,
            })?;
        Self::from_stream(stream, timeout)
    }

    /// Wrap an accepted connection; every later read and write is bounded
    /// by `timeout`.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> Result<SideChannel, ExchangeError> {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let io = |source| ExchangeError::Io {
            peer: peer.clone(),
            source,
        };
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(Some(timeout)).map_err(io)?;
        stream.set_write_timeout(Some(timeout)).map_err(io)?;
        Ok(SideChannel { stream, peer })
    }

    /// A second handle on the same connection (to watch it while the
    /// transport owns the first).
    pub fn try_clone(&self) -> Result<SideChannel, ExchangeError> {
        let stream = self.stream.try_clone().map_err(|e| self.io(e))?;
        Ok(SideChannel {
            stream,
            peer: self.peer.clone(),
        })
    }

    pub fn peer(&self) -> &str {
        &self.peer
    }

    fn io(&self, source: std::io::Error) -> ExchangeError {
        ExchangeError::Io {
            peer: self.peer.clone(),
            source,
        }
    }

    pub fn send_endpoint(&mut self, ep: &Endpoint) -> Result<(), ExchangeError> {
        let rec = ep.encode();
        self.stream.write_all(&rec).map_err(|e| self.io(e))
    }

    /// Read one record; a short read (peer closed) is `Truncated`.
    pub fn recv_endpoint(&mut self, expect: EndpointKind) -> Result<Endpoint, ExchangeError> {
        let mut buf = [0u8; RECORD_BYTES];
        let mut got = 0;
        while got < RECORD_BYTES {
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(ExchangeError::Truncated {
                        got,
                        want: RECORD_BYTES,
                    })
                }
                Ok(k) => got += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io(e)),
            }
        }
        let ep = Endpoint::decode(&buf)?;
        if ep.kind != expect {
            return Err(ExchangeError::KindMismatch {
                local: expect,
                peer: ep.kind,
            });
        }
        Ok(ep)
    }

    /// Tell the peer our QP is ready and wait until it says the same.
    pub fn ready(&mut self) -> Result<(), ExchangeError> {
        self.stream.write_all(&[READY]).map_err(|e| self.io(e))?;
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(1) if b[0] == READY => Ok(()),
            Ok(_) => Err(ExchangeError::NotReady),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Has the peer closed the side channel? (Non-blocking; not for hot paths.)
    pub fn peer_closed(&self) -> bool {
        let mut b = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let closed = matches!(self.stream.peek(&mut b), Ok(0))
            || matches!(self.stream.peek(&mut b), Err(ref e) if e.kind() != std::io::ErrorKind::WouldBlock);
        let _ = self.stream.set_nonblocking(false);
        closed
    }
}

impl Rendezvous for SideChannel {
    fn exchange(&mut self, mine: &Endpoint) -> Result<Endpoint, OpenError> {
        self.send_endpoint(mine).map_err(rendezvous)?;
        self.recv_endpoint(mine.kind).map_err(rendezvous)
    }
    fn peer_endpoint(&mut self, kind: EndpointKind) -> Result<Endpoint, OpenError> {
        self.recv_endpoint(kind).map_err(rendezvous)
    }
    fn answer(&mut self, mine: &Endpoint) -> Result<(), OpenError> {
        self.send_endpoint(mine).map_err(rendezvous)
    }
    fn ready(&mut self) -> Result<(), OpenError> {
        SideChannel::ready(self).map_err(rendezvous)
    }
}

/// A driver's side channel, connected on first use: the driver sets up
/// its queue pair (device, pinned memory) before it dials, so a local
/// failure is reported as such rather than as a server that is not there.
pub struct Dial {
    addr: SocketAddr,
    timeout: Duration,
    side: Option<SideChannel>,
}

impl Dial {
    pub fn new(addr: SocketAddr, timeout: Duration) -> Dial {
        Dial {
            addr,
            timeout,
            side: None,
        }
    }

    fn side(&mut self) -> Result<&mut SideChannel, OpenError> {
        if self.side.is_none() {
            self.side = Some(SideChannel::connect(self.addr, self.timeout).map_err(rendezvous)?);
        }
        self.side
            .as_mut()
            .ok_or_else(|| OpenError::Rendezvous("no side channel".into()))
    }
}

impl Rendezvous for Dial {
    fn exchange(&mut self, mine: &Endpoint) -> Result<Endpoint, OpenError> {
        self.side()?.exchange(mine)
    }
    fn peer_endpoint(&mut self, kind: EndpointKind) -> Result<Endpoint, OpenError> {
        self.side()?.peer_endpoint(kind)
    }
    fn answer(&mut self, mine: &Endpoint) -> Result<(), OpenError> {
        self.side()?.answer(mine)
    }
    fn ready(&mut self) -> Result<(), OpenError> {
        Rendezvous::ready(self.side()?)
    }
}

fn rendezvous(e: ExchangeError) -> OpenError {
    OpenError::Rendezvous(e.to_string())
}

/// Accept one side-channel client, waiting at most `timeout` (None: forever).
pub fn accept(
    listener: &TcpListener,
    timeout: Option<Duration>,
    io_timeout: Duration,
) -> Result<SideChannel, ExchangeError> {
    let start = Instant::now();
    let local = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let io = |source| ExchangeError::Io {
        peer: local.clone(),
        source,
    };
    listener.set_nonblocking(true).map_err(io)?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).map_err(io)?;
                return SideChannel::from_stream(stream, io_timeout);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if let Some(t) = timeout {
                    if start.elapsed() >= t {
                        return Err(ExchangeError::AcceptTimeout(t));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Endpoint {
        Endpoint {
            kind: EndpointKind::Msg,
            mtu: 3,
            qpn: 0x12,
            psn: 0xabcdef,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1],
            lid: 7,
            rkey: 0x2b9,
            addr: 0x55ca_43df_8000,
            size_bytes: 1 << 20,
            max_inline_bytes: 220,
            tokens: 32,
            token_bytes: 16_400,
            eager_max_bytes: 16_384,
            max_msg_bytes: 1 << 20,
        }
    }

    #[test]
    fn round_trip() {
        let e = sample();
        let b = e.encode();
        assert_eq!(&b[0..4], b"NGVE");
        assert_eq!(b[8], 0x12);
        assert_eq!(Endpoint::decode(&b).unwrap(), e);
    }

    #[test]
    fn every_truncation_is_an_error() {
        let b = sample().encode();
        for n in 0..RECORD_BYTES {
            match Endpoint::decode(&b[..n]) {
                Err(ExchangeError::Truncated { got, want }) => {
                    assert_eq!((got, want), (n, RECORD_BYTES))
                }
                other => panic!("{n} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn malformed_fields_are_rejected() {
        let good = sample().encode();
        let mut b = good;
        b[0] = b'X';
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadMagic(_))
        ));
        let mut b = good;
        b[4] = 9;
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadVersion(9))
        ));
        let mut b = good;
        b[6] = 7;
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadKind(7))
        ));
        let mut b = good;
        b[7] = 0;
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadField { field: "mtu", .. })
        ));
        let mut b = good;
        b[11] = 1;
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadField { field: "qpn", .. })
        ));
        let mut b = good;
        b[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            Endpoint::decode(&b),
            Err(ExchangeError::BadField {
                field: "addr+size",
                ..
            })
        ));
    }

    #[test]
    fn random_bytes_never_panic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        let good = sample().encode();
        for _ in 0..20_000 {
            let mut b = good;
            let flips = rng.gen_range(1..6);
            for _ in 0..flips {
                let i = rng.gen_range(0..RECORD_BYTES);
                b[i] = rng.gen();
            }
            let n = rng.gen_range(0..=RECORD_BYTES);
            let _ = Endpoint::decode(&b[..n]);
        }
    }

    #[test]
    fn side_channel_exchange_and_truncated_peer() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = accept(&l, Some(Duration::from_secs(5)), Duration::from_secs(2)).unwrap();
            let got = s.recv_endpoint(EndpointKind::Msg).unwrap();
            let mut mine = sample();
            mine.qpn = 0x34;
            s.send_endpoint(&mine).unwrap();
            s.ready().unwrap();
            got
        });
        let mut c = SideChannel::connect(addr, Duration::from_secs(2)).unwrap();
        c.send_endpoint(&sample()).unwrap();
        let peer = c.recv_endpoint(EndpointKind::Msg).unwrap();
        assert_eq!(peer.qpn, 0x34);
        c.ready().unwrap();
        assert_eq!(t.join().unwrap(), sample());

        // A peer that sends half a record and hangs up.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = accept(&l, Some(Duration::from_secs(5)), Duration::from_secs(2)).unwrap();
            s.recv_endpoint(EndpointKind::Rdma)
        });
        let mut raw = TcpStream::connect(addr).unwrap();
        raw.write_all(&sample().encode()[..30]).unwrap();
        drop(raw);
        match t.join().unwrap() {
            Err(ExchangeError::Truncated { got: 30, want }) => assert_eq!(want, RECORD_BYTES),
            other => panic!("{other:?}"),
        }

        // Kind mismatch.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = accept(&l, Some(Duration::from_secs(5)), Duration::from_secs(2)).unwrap();
            s.recv_endpoint(EndpointKind::Rdma)
        });
        let mut c = SideChannel::connect(addr, Duration::from_secs(2)).unwrap();
        c.send_endpoint(&sample()).unwrap();
        assert!(matches!(
            t.join().unwrap(),
            Err(ExchangeError::KindMismatch { .. })
        ));
    }

    #[test]
    fn a_dial_connects_on_first_use() {
        // Nothing listens: making the dial is not an error, using it is.
        let closed = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = closed.local_addr().unwrap();
        drop(closed);
        let mut d = Dial::new(addr, Duration::from_secs(1));
        assert!(matches!(
            d.exchange(&sample()),
            Err(OpenError::Rendezvous(why)) if why.contains("endpoint exchange")
        ));
        // A server: the exchange and the readiness byte go through it.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut s = accept(&l, Some(Duration::from_secs(5)), Duration::from_secs(2)).unwrap();
            let got = s.peer_endpoint(EndpointKind::Msg).unwrap();
            s.answer(&Endpoint { qpn: 9, ..got }).unwrap();
            Rendezvous::ready(&mut s).unwrap();
        });
        let mut d = Dial::new(addr, Duration::from_secs(2));
        assert_eq!(d.exchange(&sample()).unwrap().qpn, 9);
        Rendezvous::ready(&mut d).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn accept_times_out() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let r = accept(&l, Some(Duration::from_millis(50)), Duration::from_secs(1));
        assert!(matches!(r, Err(ExchangeError::AcceptTimeout(_))));
    }
}
