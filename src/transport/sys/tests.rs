//! Tests of the kernel-facing helpers that need no privilege.

use super::packet::filter_program;
use super::socket::RawAddr;
use std::net::SocketAddr;

#[test]
fn raw_addr_round_trips() {
    for a in ["127.0.0.1:4242", "[::1]:9", "[fe80::1%2]:1"] {
        let a: SocketAddr = a.parse().unwrap();
        assert_eq!(RawAddr::new(&a).socket_addr(), Some(a));
    }
    assert_eq!(RawAddr::empty().socket_addr(), None);
}

/// Run the classic BPF program the way the kernel does, for the few
/// opcodes it uses.
fn run_filter(prog: &[libc::sock_filter], pkt: &[u8]) -> u32 {
    let (mut pc, mut a) = (0usize, 0u32);
    loop {
        let i = prog[pc];
        match i.code {
            0x28 => {
                let k = i.k as usize;
                let Some(b) = pkt.get(k..k + 2) else { return 0 };
                a = u32::from(u16::from_be_bytes([b[0], b[1]]));
            }
            0x20 => {
                let k = i.k as usize;
                let Some(b) = pkt.get(k..k + 4) else { return 0 };
                a = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            }
            0x15 => {
                pc += usize::from(if a == i.k { i.jt } else { i.jf });
            }
            0x06 => return i.k,
            c => panic!("opcode {c:#x}"),
        }
        pc += 1;
    }
}

#[test]
fn filter_passes_only_our_ethertype_to_our_mac() {
    const ETHERTYPE: u16 = 0x88B5;
    let me = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let prog = filter_program(&me, ETHERTYPE);
    let frame = |dst: [u8; 6], et: u16| {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        f[12..14].copy_from_slice(&et.to_be_bytes());
        f
    };
    assert!(run_filter(&prog, &frame(me, ETHERTYPE)) > 0);
    assert_eq!(run_filter(&prog, &frame(me, 0x0800)), 0);
    assert_eq!(run_filter(&prog, &frame(me, 0x88B6)), 0);
    let mut other = me;
    other[5] ^= 1;
    assert_eq!(run_filter(&prog, &frame(other, ETHERTYPE)), 0);
    other = me;
    other[0] ^= 0x80;
    assert_eq!(run_filter(&prog, &frame(other, ETHERTYPE)), 0);
    assert_eq!(run_filter(&prog, &frame([0xff; 6], ETHERTYPE)), 0);
    assert_eq!(run_filter(&prog, &[0u8; 10]), 0);
}
