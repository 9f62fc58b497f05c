use super::*;

#[test]
fn layout_formula() {
    // ABI 1.0 formula (what a 1.0 reader computes).
    let l = Layout::from_params(4, 8, 256, 256, 2304).unwrap();
    assert_eq!(l.hash_slots, 8);
    assert_eq!(l.slots_offset, 256);
    assert_eq!(l.entries_offset, 256 + 64);
    assert_eq!(l.copy_bytes, 320 + 4 * 2304);
    assert_eq!(l.copy_offset, [256, 256 + l.copy_bytes]);
    assert_eq!(l.total_bytes, 256 + 2 * l.copy_bytes);
    assert!(Layout::new(0).is_none());
    assert!(Layout::new(MAX_CAPACITY + 1).is_none());
    assert!(Layout::from_params(4, 6, 256, 256, 2304).is_none());
    assert!(Layout::from_params(4, 8, 255, 256, 2304).is_none());
    assert!(Layout::from_params(4, 8, 256, 256, 2240).is_none());

    // ABI 1.1: 4 classes, 4 mapped peers in 8 slots.
    let l = Layout::new(4).unwrap();
    let x = l.ext.unwrap();
    assert_eq!((x.class_capacity, x.map_capacity, x.map_slots), (4, 4, 8));
    assert_eq!(x.meta_ext_offset, 256);
    assert_eq!(x.classes_offset, 256 + 64 + 8 * 832);
    assert_eq!(x.map_slots_offset, x.classes_offset + 4 * 72);
    assert_eq!(x.map_records_offset, x.map_slots_offset + 8 * 8);
    assert_eq!(x.meta_ext_end, x.map_records_offset + 4 * 80);
    assert_eq!(x.entry_ext_offset, 2304);
    assert_eq!(l.header_bytes, 320);
    assert_eq!(l.meta_bytes, x.meta_ext_end.div_ceil(64) * 64);
    assert_eq!(l.entry_bytes, 3392);
    assert_eq!(l.slots_offset, l.meta_bytes);
    assert_eq!(l.copy_offset[0], 320);
    // The 1.0 formula over the same sizes gives the same offsets: a 1.0
    // reader finds every 1.0 field where it always was.
    let old = Layout::from_params(4, 8, l.header_bytes, l.meta_bytes, l.entry_bytes).unwrap();
    assert_eq!(
        Layout {
            ext: l.ext,
            hot: l.hot,
            file_bytes: l.file_bytes,
            ..old
        },
        l
    );
    // ABI 1.2: the hot table after total_bytes, page-aligned, two copies.
    let h = l.hot.unwrap();
    assert_eq!(h.record_bytes, 768);
    assert_eq!(h.offset, l.total_bytes.div_ceil(4096) * 4096);
    assert_eq!(h.copy_bytes, 4 * 768);
    assert_eq!(h.record_offset(1, 3), h.offset + 4 * 768 + 3 * 768);
    assert_eq!(l.file_bytes, h.offset + 2 * 4 * 768);
    assert!(old.hot.is_none() && old.file_bytes == old.total_bytes);
    assert!(
        old.with_hot(768).is_none(),
        "the hot table needs the 1.1 header extension"
    );
    assert!(HotLayout::new(l.total_bytes, 4, 704).is_none());
    assert!(HotLayout::new(l.total_bytes, 4, 800).is_none());
    assert!(HotLayout::new(l.total_bytes, 4, 8192).is_none());
    assert!(HotLayout::new(usize::MAX - 10, 4, 768).is_none());
    // The largest extension stays within the limit every reader checks.
    let big = Layout::new(MAX_CAPACITY).unwrap();
    let bx = big.ext.unwrap();
    assert_eq!(
        (bx.class_capacity, bx.map_capacity),
        (MAX_CLASSES, MAX_MAP_PEERS)
    );
    assert!(big.meta_bytes <= LIMIT_STRUCT_BYTES);
    assert!(ExtLayout::new(MAX_CLASSES + 1, 4, 8).is_none());
    assert!(ExtLayout::new(4, MAX_MAP_PEERS + 1, 1 << 15).is_none());
    assert!(ExtLayout::new(4, 4, 4).is_none());
    assert!(ExtLayout::new(4, 4, 12).is_none());
    // Sizes too small for the extension are refused.
    assert!(Layout::from_params_ext(4, 8, 256, l.meta_bytes, 3392, l.ext).is_none());
    assert!(Layout::from_params_ext(4, 8, 320, 256, 3392, l.ext).is_none());
    assert!(Layout::from_params_ext(4, 8, 320, l.meta_bytes, 2304, l.ext).is_none());
}

#[test]
fn names_pack_and_hash() {
    let p: [u64; 8] = pack_name(b"node017").unwrap();
    let t: [u64; 2] = pack_name(b"rdma").unwrap();
    assert_eq!(unpack_name(&p, 7), b"node017");
    assert!(pack_name::<2>(b"0123456789abcdef").is_none());
    assert!(pack_name::<2>(b"0123456789abcde").is_some());
    assert!(pack_name::<2>(b"a\0b").is_none());
    let h = key_hash(&p, 7, &t, 4);
    let t2: [u64; 2] = pack_name(b"udp").unwrap();
    assert_ne!(h, key_hash(&p, 7, &t2, 3));
    // Moving a byte from peer to transport changes the hash.
    let p2: [u64; 8] = pack_name(b"node01").unwrap();
    let t3: [u64; 2] = pack_name(b"7rdma").unwrap();
    assert_ne!(h, key_hash(&p2, 6, &t3, 5));
}
