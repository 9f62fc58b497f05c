//! Tests of the raw Ethernet device that need no privilege. The tests on a
//! veth pair (root, network namespaces) are in `tests/raw_eth.rs`.

use super::*;
use crate::transport::dgram::wire::{Header, Kind};
use crate::transport::sys::packet::eperm_message;
use std::str::FromStr;

#[test]
fn macs_parse_and_format() {
    let m = parse_mac("AA:bb:0c:d:ee:ff").unwrap();
    assert_eq!(m, [0xaa, 0xbb, 0x0c, 0x0d, 0xee, 0xff]);
    assert_eq!(format_mac(&m), "aa:bb:0c:0d:ee:ff");
    assert_eq!(parse_mac("02-00-00-00-00-01").unwrap()[5], 1);
    for bad in [
        "",
        "aa:bb:cc:dd:ee",
        "aa:bb:cc:dd:ee:ff:00",
        "aa:bb:cc:dd:ee:fg",
        "aaa:bb:cc:dd:ee:f",
    ] {
        assert!(parse_mac(bad).is_err(), "{bad}");
    }
    assert!(RxMode::from_str("ring").is_ok() && "recv".parse::<RxMode>().is_ok());
    assert!("xdp".parse::<RxMode>().is_err());
}

fn data(nonce: u64, bytes: u32) -> Header {
    Header {
        kind: Kind::Data,
        answer: true,
        nonce,
        seq: 1,
        frag_offset: 0,
        msg_len: bytes,
        report_ns: 0,
        frag_index: 0,
        frag_count: 1,
        frag_len: bytes as u16,
    }
}

#[test]
fn the_prefix_is_the_ethernet_header_then_the_frame_header() {
    let mut hdr = [0u8; HEADER_LEN];
    data(5, 2).encode(&mut hdr).unwrap();
    let p = frame_prefix(&[1, 2, 3, 4, 5, 6], &[7, 8, 9, 10, 11, 12], &hdr);
    assert_eq!(
        &p[..14],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x88, 0xB5]
    );
    assert_eq!(&p[14..], &hdr);
}

#[test]
fn padded_and_truncated_frames() {
    let mut f = [0u8; ETH_HDR_LEN + ETH_MIN_PAYLOAD + 10];
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 7]);
    let h = data(5, 2);
    h.encode(&mut f[ETH_HDR_LEN..]).unwrap();
    let exact = ETH_HDR_LEN + HEADER_LEN + 2;
    let s = inspect(&f[..exact]);
    assert_eq!((s.header, s.src.map(|m| m[5])), (Some(h), Some(7)));
    // Padded to the Ethernet minimum: fine; beyond it: not ours.
    assert_eq!(inspect(&f[..ETH_HDR_LEN + ETH_MIN_PAYLOAD]).header, Some(h));
    assert_eq!(
        inspect(&f[..ETH_HDR_LEN + ETH_MIN_PAYLOAD + 1]).header,
        None
    );
    assert_eq!(inspect(&f[..exact - 1]).header, None);
    assert_eq!(inspect(&f[..5]).header, None);
}

#[test]
fn random_frames_never_panic() {
    use rand::{Rng, RngCore, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(0x7261_775f_6574_6831);
    let mut good = [0u8; ETH_HDR_LEN + HEADER_LEN + 100];
    let h = Header {
        answer: false,
        nonce: 9,
        seq: 3,
        report_ns: 1,
        ..data(9, 100)
    };
    h.encode(&mut good[ETH_HDR_LEN..]).unwrap();
    let mut buf = vec![0u8; 256];
    let mut accepted = 0;
    for i in 0..50_000 {
        let len = rng.gen_range(0..buf.len());
        if i & 1 == 0 {
            rng.fill_bytes(&mut buf[..len]);
        } else {
            let n = len.min(good.len());
            buf[..n].copy_from_slice(&good[..n]);
            for _ in 0..rng.gen_range(0..3) {
                if n > 0 {
                    buf[rng.gen_range(0..n)] = rng.gen();
                }
            }
        }
        let s = inspect(&buf[..len]);
        if let Some(h) = s.header {
            accepted += 1;
            assert!(ETH_HDR_LEN + h.frame_len() <= len);
        }
    }
    assert!(accepted > 0);
}

#[test]
fn unknown_interface_is_a_clear_error() {
    match interface_info("ng-no-such0") {
        Err(TransportError::Io(e)) => {
            assert_eq!(e.kind(), io::ErrorKind::NotFound);
            assert!(e.to_string().contains("ng-no-such0"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(interface_info("").is_err());
    assert!(interface_info("a-name-far-too-long").is_err());
    let lo = interface_info("lo");
    assert!(matches!(lo, Err(TransportError::Protocol(_))), "{lo:?}");
    let e = eperm_message(io::Error::from_raw_os_error(libc::EPERM));
    assert!(
        needs_cap_net_raw(&e) && e.to_string().contains("CAP_NET_RAW"),
        "{e}"
    );
    assert!(!needs_cap_net_raw(&TransportError::Io(
        io::Error::from_raw_os_error(libc::ENODEV)
    )));
}
