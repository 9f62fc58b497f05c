//! The authenticated frame: layout, sealing and opening.
//!
//! ```text
//! u32 LE   body length L            (checked against MAX_FRAME_BYTES before
//!                                    anything is allocated)
//! body (L bytes):
//!   u16 LE   protocol version       (PROTOCOL_VERSION)
//!   u8       frame kind             (1 client hello, 2 server hello, 3 data,
//!                                    4 client proof)
//!   u8       n = sender name length (1..=MAX_NODE_NAME_BYTES)
//!   n bytes  sender node name       (UTF-8)
//!   u64 LE   counter                (0 in hellos; 1, 2, 3, ... per direction)
//!   u64 LE   timestamp, ns since the Unix epoch (sender's wall clock)
//!   ...      payload                (bincode; L - 20 - n - 32 bytes)
//!   32 bytes HMAC-SHA256 tag over the length prefix and the body before it
//! ```
//!
//! Hellos are tagged with the handshake key, data frames with the key of
//! their direction in their connection (see the module documentation of
//! [`super`]). An [`Opener`] checks, in this order: version, structure, tag
//! (constant time), sender, counter, timestamp window (if configured),
//! payload decoding and bounds; its state (the expected counter) moves only
//! when all of them pass.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::msg::{decode, encode};
use super::{ClusterKey, ControlError, Msg, MAX_FRAME_BYTES, MAX_NODE_NAME_BYTES};

type HmacSha256 = Hmac<Sha256>;

/// Version written into (and required in) every frame.
/// 2: `Msg::ProbeAlive` (a node speaking 1 could not decode it).
/// 3: the client proves the key for the connection (`ClientProof`) before
/// the server admits it; `ProbeRequest` carries the driver's MAC; the
/// contention messages `Msg::StreamOrder` / `StreamResult` / `Bisection`,
/// `SizePlan::Flow`, the reject reasons `Quiet` and `Budget`.
/// 4: the cluster schedule's `Msg::RoundRequest` / `RoundReply` /
/// `RoundDone`, `Msg::Entries` / `EntriesReply`, the reject reason
/// `NotExpected`.
pub const PROTOCOL_VERSION: u16 = 4;
/// Bytes of the HMAC-SHA256 tag.
pub const TAG_BYTES: usize = 32;
/// Bytes of the length prefix.
pub const PREFIX_BYTES: usize = 4;
/// Fixed part of a body besides the name and the payload.
const FIXED_BYTES: usize = 2 + 1 + 1 + 8 + 8 + TAG_BYTES;
/// Shortest body that can be well formed (one-byte name, empty payload).
pub const MIN_BODY_BYTES: usize = FIXED_BYTES + 1;

/// Largest handshake frame body (hellos, proof): far below
/// `MAX_FRAME_BYTES`, so a stranger's first frame costs little memory.
pub const MAX_HANDSHAKE_BYTES: usize = 512;

/// Bytes of a per-connection nonce.
pub const NONCE_BYTES: usize = 32;

/// Kind byte of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    ClientHello = 1,
    ServerHello = 2,
    Data = 3,
    /// The client's first frame under its session key (empty payload): it
    /// holds the cluster key for this very connection.
    ClientProof = 4,
}

/// Payload of both hello frames: whom the sender means to talk to and the
/// sender's fresh random nonce for this connection.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HelloPayload {
    pub to: String,
    pub nonce: [u8; NONCE_BYTES],
}

fn mac_for(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; new_from_slice cannot fail for it.
    match HmacSha256::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    }
}

fn derive(key: &ClusterKey, label: &[u8], context: &[u8]) -> HmacSha256 {
    let mut m = mac_for(key.bytes());
    m.update(label);
    m.update(context);
    mac_for(&m.finalize().into_bytes())
}

/// The key that tags hello frames (derived from the cluster key).
pub fn handshake_mac(key: &ClusterKey) -> HmacSha256 {
    derive(key, b"netgauged v1 handshake", &[])
}

/// Per-connection, per-direction keys from the handshake transcript:
/// `(client→server, server→client)`.
pub fn session_macs(
    key: &ClusterKey,
    client: &str,
    server: &str,
    client_nonce: &[u8; NONCE_BYTES],
    server_nonce: &[u8; NONCE_BYTES],
) -> (HmacSha256, HmacSha256) {
    let mut t = Vec::with_capacity(2 + client.len() + server.len() + 2 * NONCE_BYTES);
    t.push(client.len() as u8);
    t.extend_from_slice(client.as_bytes());
    t.push(server.len() as u8);
    t.extend_from_slice(server.as_bytes());
    t.extend_from_slice(client_nonce);
    t.extend_from_slice(server_nonce);
    (
        derive(key, b"netgauged v1 client->server", &t),
        derive(key, b"netgauged v1 server->client", &t),
    )
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Writes frames of one kind for one direction.
pub struct Sealer {
    mac: HmacSha256,
    kind: FrameKind,
    sender: String,
    next_counter: u64,
}

impl Sealer {
    /// Data frames are numbered from 1; hellos carry counter 0.
    pub fn new(mac: HmacSha256, kind: FrameKind, sender: &str) -> Self {
        let next_counter = if kind == FrameKind::Data { 1 } else { 0 };
        Sealer {
            mac,
            kind,
            sender: sender.to_owned(),
            next_counter,
        }
    }

    /// A whole frame (prefix included) around `payload`.
    pub fn seal_payload(
        &mut self,
        payload: &[u8],
        timestamp_unix_ns: u64,
    ) -> Result<Vec<u8>, ControlError> {
        let n = self.sender.len();
        if n == 0 || n > MAX_NODE_NAME_BYTES {
            return Err(ControlError::Encode(format!(
                "node name must be 1..={MAX_NODE_NAME_BYTES} bytes"
            )));
        }
        let body_len = FIXED_BYTES + n + payload.len();
        if body_len > MAX_FRAME_BYTES {
            return Err(ControlError::Encode(format!(
                "message of {body_len} bytes exceeds the {MAX_FRAME_BYTES}-byte frame limit"
            )));
        }
        let mut f = Vec::with_capacity(PREFIX_BYTES + body_len);
        f.extend_from_slice(&(body_len as u32).to_le_bytes());
        f.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        f.push(self.kind as u8);
        f.push(n as u8);
        f.extend_from_slice(self.sender.as_bytes());
        f.extend_from_slice(&self.next_counter.to_le_bytes());
        f.extend_from_slice(&timestamp_unix_ns.to_le_bytes());
        f.extend_from_slice(payload);
        let tag = self.mac.clone().chain_update(&f).finalize().into_bytes();
        f.extend_from_slice(&tag);
        if self.kind == FrameKind::Data {
            self.next_counter += 1;
        }
        Ok(f)
    }

    /// A whole data frame carrying `msg`, stamped now.
    pub fn seal(&mut self, msg: &Msg) -> Result<Vec<u8>, ControlError> {
        let payload = encode(msg)?;
        self.seal_payload(&payload, unix_now_ns())
    }
}

/// A parsed, not yet authenticated frame.
struct Parsed<'a> {
    kind: u8,
    sender: &'a str,
    counter: u64,
    timestamp_unix_ns: u64,
    payload: &'a [u8],
    signed_len: usize,
    tag: &'a [u8],
}

/// Check the length prefix alone, before any body byte is read or stored.
pub fn check_prefix(prefix: [u8; PREFIX_BYTES]) -> Result<usize, ControlError> {
    check_prefix_max(prefix, MAX_FRAME_BYTES)
}

/// [`check_prefix`] against a smaller limit (handshake frames).
pub fn check_prefix_max(prefix: [u8; PREFIX_BYTES], max: usize) -> Result<usize, ControlError> {
    let len = u32::from_le_bytes(prefix) as usize;
    if len > max {
        return Err(ControlError::Oversize { len_bytes: len });
    }
    if len < MIN_BODY_BYTES {
        return Err(ControlError::Malformed(
            "frame shorter than its fixed fields",
        ));
    }
    Ok(len)
}

fn parse(body: &[u8]) -> Result<Parsed<'_>, ControlError> {
    if body.len() < MIN_BODY_BYTES || body.len() > MAX_FRAME_BYTES {
        return Err(ControlError::Malformed("frame length out of bounds"));
    }
    let version = u16::from_le_bytes([body[0], body[1]]);
    if version != PROTOCOL_VERSION {
        return Err(ControlError::WrongVersion { got: version });
    }
    let kind = body[2];
    let n = body[3] as usize;
    if n == 0 || n > MAX_NODE_NAME_BYTES || FIXED_BYTES + n > body.len() {
        return Err(ControlError::Malformed("bad sender name length"));
    }
    let sender = std::str::from_utf8(&body[4..4 + n])
        .map_err(|_| ControlError::Malformed("sender name is not UTF-8"))?;
    let at = 4 + n;
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&body[i..i + 8]);
        u64::from_le_bytes(w)
    };
    let signed_len = body.len() - TAG_BYTES;
    Ok(Parsed {
        kind,
        sender,
        counter: word(at),
        timestamp_unix_ns: word(at + 8),
        payload: &body[at + 16..signed_len],
        signed_len,
        tag: &body[signed_len..],
    })
}

/// Reads frames of one kind for one direction; holds the replay state.
pub struct Opener {
    mac: HmacSha256,
    kind: FrameKind,
    me: String,
    peer: Option<String>,
    next_counter: u64,
    max_skew_ns: Option<u64>,
}

/// What an opened hello says.
pub struct OpenedHello {
    pub sender: String,
    pub hello: HelloPayload,
}

impl Opener {
    /// `me` is this node (frames claiming to come from it are reflections);
    /// `peer`, when known, is the only sender accepted.
    pub fn new(mac: HmacSha256, kind: FrameKind, me: &str, peer: Option<&str>) -> Self {
        let next_counter = if kind == FrameKind::Data { 1 } else { 0 };
        Opener {
            mac,
            kind,
            me: me.to_owned(),
            peer: peer.map(str::to_owned),
            next_counter,
            max_skew_ns: None,
        }
    }

    /// Reject frames whose timestamp is further than `skew` from our clock.
    pub fn with_max_skew(mut self, skew: Option<std::time::Duration>) -> Self {
        self.max_skew_ns = skew.map(|d| d.as_nanos().min(u64::MAX as u128) as u64);
        self
    }

    fn check<'a>(
        &self,
        prefix: [u8; PREFIX_BYTES],
        body: &'a [u8],
    ) -> Result<Parsed<'a>, ControlError> {
        if check_prefix(prefix)? != body.len() {
            return Err(ControlError::Malformed("length prefix does not match body"));
        }
        let p = parse(body)?;
        if p.kind != self.kind as u8 {
            return Err(ControlError::Malformed("unexpected frame kind"));
        }
        self.mac
            .clone()
            .chain_update(prefix)
            .chain_update(&body[..p.signed_len])
            .verify_slice(p.tag)
            .map_err(|_| ControlError::BadTag)?;
        // Authentic from here on: a key holder sent exactly these bytes.
        if p.sender == self.me {
            return Err(ControlError::Reflected);
        }
        if let Some(peer) = &self.peer {
            if p.sender != peer {
                return Err(ControlError::UnknownPeer(p.sender.to_owned()));
            }
        }
        if p.counter != self.next_counter {
            return Err(ControlError::Replay {
                expected: self.next_counter,
                got: p.counter,
            });
        }
        if let Some(max) = self.max_skew_ns {
            if unix_now_ns().abs_diff(p.timestamp_unix_ns) > max {
                return Err(ControlError::Stale);
            }
        }
        Ok(p)
    }

    /// Open a data frame: the message, or why it is rejected. The expected
    /// counter advances only on success.
    pub fn open(&mut self, prefix: [u8; PREFIX_BYTES], body: &[u8]) -> Result<Msg, ControlError> {
        let p = self.check(prefix, body)?;
        let msg: Msg = decode(p.payload)?;
        msg.validate()?;
        self.next_counter += 1;
        Ok(msg)
    }

    /// Open a hello frame.
    pub fn open_hello(
        &mut self,
        prefix: [u8; PREFIX_BYTES],
        body: &[u8],
    ) -> Result<OpenedHello, ControlError> {
        let p = self.check(prefix, body)?;
        let hello: HelloPayload = decode(p.payload)?;
        if hello.to.is_empty() || hello.to.len() > MAX_NODE_NAME_BYTES {
            return Err(ControlError::Malformed("hello: bad receiver name"));
        }
        Ok(OpenedHello {
            sender: p.sender.to_owned(),
            hello,
        })
    }

    /// Open a client proof: authentic under this direction's session key,
    /// from the expected peer, counter 0, empty payload.
    pub fn open_proof(
        &mut self,
        prefix: [u8; PREFIX_BYTES],
        body: &[u8],
    ) -> Result<(), ControlError> {
        let p = self.check(prefix, body)?;
        if !p.payload.is_empty() {
            return Err(ControlError::Malformed("client proof with a payload"));
        }
        Ok(())
    }

    /// Open a whole frame held in one buffer (prefix included); for tests
    /// and tools.
    pub fn open_frame(&mut self, frame: &[u8]) -> Result<Msg, ControlError> {
        if frame.len() < PREFIX_BYTES {
            return Err(ControlError::Malformed("truncated length prefix"));
        }
        let mut prefix = [0u8; PREFIX_BYTES];
        prefix.copy_from_slice(&frame[..PREFIX_BYTES]);
        self.open(prefix, &frame[PREFIX_BYTES..])
    }
}
