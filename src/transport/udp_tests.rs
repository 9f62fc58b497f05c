//! Tests of the UDP device that look inside it. The transport's tests on
//! loopback sockets are in `tests/udp_socket.rs`.

use super::*;

#[test]
fn the_fragment_size_follows_the_mtu() {
    assert!(max_frag_bytes(100, false).is_err());
    assert_eq!(max_frag_bytes(1500, false).unwrap(), 1432);
    assert_eq!(max_frag_bytes(1500, true).unwrap(), 1412);
    assert_eq!(max_frag_bytes(65_536, false).unwrap(), 65_507 - HEADER_LEN);
    assert_eq!(
        max_frag_bytes(65_536, true).unwrap(),
        65_536 - 48 - HEADER_LEN
    );
}
