//! The thread's datatype cache, over the in-process MPI.

use std::sync::atomic::Ordering;

use super::*;
use crate::fake::Fake;

fn lookups(m: &Fake) -> usize {
    m.type_lookups.load(Ordering::Relaxed)
}

#[test]
fn types_whose_handles_share_low_bits_do_not_evict_each_other() {
    // Open MPI's handles are the addresses of its predefined types, 512 B
    // apart, so their low bits repeat (e.g. 0x…060 and 0x…c60): each type
    // is still asked of MPI once, however the program alternates them.
    let m = Fake::new(Default::default(), 0, 1);
    let types: Vec<Raw> = (0..TYPE_SLOTS)
        .map(|k| 0x5600_0000_0060 + 0xc00 * k)
        .collect();
    for _ in 0..50 {
        for &t in &types {
            assert_eq!(type_info(&m, t).unwrap().size, 8);
        }
    }
    assert_eq!(lookups(&m), TYPE_SLOTS, "each type asked of MPI once");
}

#[test]
fn a_ninth_type_takes_the_oldest_slot_and_empty_slots_never_match() {
    let m = Fake::new(Default::default(), 0, 1);
    for t in 1..=TYPE_SLOTS + 1 {
        type_info(&m, 0x1000 * t).unwrap();
    }
    assert_eq!(lookups(&m), TYPE_SLOTS + 1);
    // The ninth replaced the first; the others are still held.
    type_info(&m, 0x1000 * (TYPE_SLOTS + 1)).unwrap();
    type_info(&m, 0x2000).unwrap();
    assert_eq!(lookups(&m), TYPE_SLOTS + 1);
    type_info(&m, 0x1000).unwrap();
    assert_eq!(lookups(&m), TYPE_SLOTS + 2);
    // Handle 0 (an empty slot's) is always asked of MPI, never a cached layout.
    type_info(&m, 0).unwrap();
    type_info(&m, 0).unwrap();
    assert_eq!(lookups(&m), TYPE_SLOTS + 4);
}
