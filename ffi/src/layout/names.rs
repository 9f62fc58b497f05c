//! Names packed into words, and the name-table hash.

/// Packs `s` into NUL-padded little-endian words; None if it does not fit
/// with a terminating NUL or contains a NUL.
#[inline]
pub fn pack_name<const W: usize>(s: &[u8]) -> Option<[u64; W]> {
    if s.len() >= W * 8 || s.contains(&0) {
        return None;
    }
    let mut bytes = [0u8; 128];
    bytes[..s.len()].copy_from_slice(s);
    let mut words = [0u64; W];
    for (i, w) in words.iter_mut().enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        *w = u64::from_le_bytes(b);
    }
    Some(words)
}

/// Unpacks `len` bytes from words (caller bounds-checked `len < 8·W`).
pub fn unpack_name(words: &[u64], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(len);
    out
}

#[inline]
fn mix(mut h: u64) -> u64 {
    // murmur3 fmix64
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The name-table hash of a (peer, transport) pair, over the packed words.
/// Only the words that hold bytes are hashed (padding is zero anyway).
#[inline]
pub fn key_hash(
    peer: &[u64; 8],
    peer_len: usize,
    transport: &[u64; 2],
    transport_len: usize,
) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (peer_len as u64) | ((transport_len as u64) << 8);
    let pw = peer_len.div_ceil(8).min(8);
    for w in &peer[..pw] {
        h = (h ^ *w).wrapping_mul(K).rotate_left(29);
    }
    let tw = transport_len.div_ceil(8).min(2);
    for w in &transport[..tw] {
        h = (h ^ *w).wrapping_mul(K).rotate_left(29);
    }
    mix(h)
}

/// Slot word: `tag << 32 | (index + 1)`, 0 = empty.
#[inline]
pub fn slot_word(hash: u64, index: usize) -> u64 {
    (hash & 0xFFFF_FFFF_0000_0000) | (index as u64 + 1)
}
