//! Tests of the wire layer: encoding, decoding, every rejection.

use super::*;
use rand::{Rng, RngCore, SeedableRng};

fn data(msg_len: u32, idx: u32, count: u32, frag: u32) -> Header {
    let off = idx * frag;
    let len = frag.min(msg_len - off);
    Header {
        kind: Kind::Data,
        answer: idx & 1 == 0,
        nonce: 0x0123_4567_89ab_cdef,
        seq: 0xfffffff0 + idx,
        frag_offset: off,
        msg_len,
        report_ns: 4242,
        frag_index: idx,
        frag_count: count,
        frag_len: len as u16,
    }
}

fn frame(h: &Header) -> Vec<u8> {
    let mut v = vec![0u8; h.frame_len()];
    assert_eq!(h.encode(&mut v).unwrap(), HEADER_LEN);
    for (i, b) in v[HEADER_LEN..].iter_mut().enumerate() {
        *b = i as u8;
    }
    v
}

fn samples() -> Vec<Header> {
    let mut v = vec![
        Header::control(Kind::Hello, 1),
        Header::control(Kind::HelloAck, u64::MAX),
        Header::control(Kind::Bye, 77),
        data(0, 0, 1, 1000),
        data(1, 0, 1, 1000),
        data(1432, 0, 1, 1432),
    ];
    // 3000 bytes in 1000-byte fragments; 2500 bytes (short last one).
    for i in 0..3 {
        v.push(data(2500, i, 3, 1000));
        v.push(data(3000, i, 3, 1000));
    }
    v
}

#[test]
fn round_trip() {
    let all = samples();
    assert!(all.len() >= 9);
    for h in all {
        let f = frame(&h);
        let d = Header::decode(&f).unwrap();
        assert_eq!(d, h);
        assert_eq!(d.payload(&f).len(), h.frag_len as usize);
        // Trailing padding is ignored.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0xAA; 20]);
        assert_eq!(Header::decode(&padded).unwrap(), h);
    }
}

#[test]
fn layout_is_little_endian_and_fixed() {
    let h = data(3000, 1, 3, 1000);
    let f = frame(&h);
    assert_eq!(&f[0..4], &[0x4E, 0x47, 1, 3]);
    assert_eq!(f[4], 0);
    assert_eq!(&f[6..8], &1000u16.to_le_bytes());
    assert_eq!(&f[8..16], &0x0123_4567_89ab_cdefu64.to_le_bytes());
    assert_eq!(&f[20..24], &1000u32.to_le_bytes());
    assert_eq!(&f[24..28], &3000u32.to_le_bytes());
    assert_eq!(&f[36..40], &3u32.to_le_bytes());
}

#[test]
fn every_truncation_is_rejected() {
    for h in samples() {
        let f = frame(&h);
        for cut in 0..f.len() {
            assert!(
                matches!(Header::decode(&f[..cut]), Err(FrameError::Truncated { .. })),
                "{h:?} cut at {cut}"
            );
        }
    }
}

#[test]
fn bad_fields_are_rejected() {
    let good = frame(&data(3000, 1, 3, 1000));
    let bad = |i: usize, v: u8| {
        let mut f = good.clone();
        f[i] = v;
        Header::decode(&f)
    };
    assert_eq!(bad(0, 0), Err(FrameError::BadMagic(0x4700)));
    assert_eq!(bad(2, 2), Err(FrameError::BadVersion(2)));
    assert_eq!(bad(3, 0), Err(FrameError::BadKind(0)));
    assert_eq!(bad(3, 5), Err(FrameError::BadKind(5)));
    assert_eq!(bad(4, 2), Err(FrameError::BadFlags(2)));
    assert_eq!(bad(5, 1), Err(FrameError::Reserved(1)));
    // frag_index 3 of 3.
    assert!(matches!(bad(32, 3), Err(FrameError::BadFragment(_))));
    // frag_count 0.
    assert!(matches!(bad(36, 0), Err(FrameError::BadFragment(_))));
    // Middle fragment claiming to be last.
    assert!(matches!(bad(36, 2), Err(FrameError::BadFragment(_))));
    // Fragment past the message end.
    assert!(matches!(bad(21, 0x10), Err(FrameError::BadFragment(_))));
    // A control frame with the answer flag or fragment fields.
    let hello = frame(&Header::control(Kind::Hello, 9));
    let mut f = hello.clone();
    f[4] = FLAG_ANSWER;
    assert!(Header::decode(&f).is_err());
    let mut f = hello.clone();
    f[24] = 1;
    assert!(Header::decode(&f).is_err());
    // Encoding refuses an inconsistent header and a short buffer.
    let mut h = data(3000, 1, 3, 1000);
    h.frag_count = 1;
    assert!(h.encode(&mut [0u8; 64]).is_err());
    assert_eq!(
        data(10, 0, 1, 10).encode(&mut [0u8; 39]),
        Err(FrameError::BufferTooSmall { need: 40, have: 39 })
    );
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = rand_pcg::Pcg64::seed_from_u64(0x6e67_6672_616d_6531);
    let mut buf = vec![0u8; 256];
    let valid: Vec<Vec<u8>> = samples().iter().map(frame).collect();
    let mut accepted = 0usize;
    for i in 0..100_000 {
        let len = rng.gen_range(0..buf.len());
        let b = &mut buf[..len];
        if i & 1 == 0 {
            rng.fill_bytes(b);
            // Give the decoder a fair chance past the first checks.
            if len >= 6 && i & 3 == 0 {
                b[0..6].copy_from_slice(&[0x4E, 0x47, 1, rng.gen_range(0..6), 0, 0]);
            }
        } else {
            // Mutate a valid frame in one to three bytes.
            let v = &valid[rng.gen_range(0..valid.len())];
            let n = v.len().min(len);
            b[..n].copy_from_slice(&v[..n]);
            for _ in 0..rng.gen_range(1..=3) {
                if n > 0 {
                    b[rng.gen_range(0..n)] = rng.gen();
                }
            }
        }
        if let Ok(h) = Header::decode(b) {
            accepted += 1;
            // Whatever is accepted is canonical: it re-encodes to the same
            // header bytes and its payload lies inside the buffer.
            let mut out = [0u8; HEADER_LEN];
            h.encode(&mut out).unwrap();
            assert_eq!(&out[..], &b[..HEADER_LEN]);
            assert!(h.frame_len() <= b.len());
        }
    }
    assert!(
        accepted > 0,
        "the mutation half should keep some frames valid"
    );
}

#[test]
fn fragment_counts() {
    assert_eq!(fragment_count(0, 1000), 1);
    assert_eq!(fragment_count(1, 1000), 1);
    assert_eq!(fragment_count(1000, 1000), 1);
    assert_eq!(fragment_count(1001, 1000), 2);
    assert_eq!(fragment_count(1 << 20, 65_467), 17);
}

#[test]
fn a_message_is_cut_into_fragments_the_decoder_accepts() {
    let meta = crate::transport::Meta {
        answer: true,
        report_ns: 3,
    };
    let h: Vec<Header> = (0..3)
        .map(|i| Header::fragment(9, 4, meta, 2500, 1000, i))
        .collect();
    assert_eq!(h[0], data(2500, 0, 3, 1000).with(9, 4, true, 3));
    assert_eq!(
        h.iter()
            .map(|h| (h.frag_offset, h.frag_len))
            .collect::<Vec<_>>(),
        [(0, 1000), (1000, 1000), (2000, 500)]
    );
    for f in &h {
        assert_eq!(Header::decode(&frame(f)).unwrap(), *f);
    }
    let empty = Header::fragment(9, 5, meta, 0, 1000, 0);
    assert_eq!((empty.frag_count, empty.frag_len, empty.msg_len), (1, 0, 0));
    assert!(Header::decode(&frame(&empty)).is_ok());
}

impl Header {
    fn with(self, nonce: u64, seq: u32, answer: bool, report_ns: u32) -> Header {
        Header {
            nonce,
            seq,
            answer,
            report_ns,
            ..self
        }
    }
}
