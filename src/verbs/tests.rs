//! Tests of the verbs wrapper that need no RDMA device.

use super::*;

#[test]
fn mtu_enum_to_bytes() {
    assert_eq!(mtu_bytes(1), 256);
    assert_eq!(mtu_bytes(3), 1024);
    assert_eq!(mtu_bytes(5), 4096);
    assert_eq!(mtu_bytes(9), 4096);
}

#[test]
fn pinned_buffer_is_zeroed_and_aligned() {
    // Three pages fit every default RLIMIT_MEMLOCK (64 KiB and up); a host
    // set below that fails here with the limit named, never silently.
    let b = PinnedBuf::new(10_000, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.len(), 10_000);
    assert_eq!(b.as_ptr() as usize % 4096, 0);
    // SAFETY: the mapping is at least 10 000 bytes long.
    let s = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
    assert!(s.iter().all(|&x| x == 0));
}

#[test]
fn memlock_error_names_limit_and_bytes() {
    let e = VerbsError::MemlockLimit {
        what: "ibv_reg_mr",
        bytes: 139_264,
        limit_bytes: Some(65_536),
        source: io::Error::from_raw_os_error(libc::ENOMEM),
    };
    let m = e.to_string();
    assert!(m.contains("RLIMIT_MEMLOCK is 65536 bytes (64 KiB)"), "{m}");
    assert!(m.contains("139264 bytes"), "{m}");
}

#[test]
fn pinning_refusals_name_the_memlock_limit_only_when_it_is_the_cause() {
    for errno in [libc::ENOMEM, libc::EPERM, libc::EAGAIN] {
        match pin_error("mlock", 8192, io::Error::from_raw_os_error(errno)) {
            VerbsError::MemlockLimit { what, bytes, .. } => {
                assert_eq!((what, bytes), ("mlock", 8192));
            }
            e => panic!("errno {errno}: {e}"),
        }
    }
    match pin_error(
        "ibv_reg_mr",
        8192,
        io::Error::from_raw_os_error(libc::EINVAL),
    ) {
        VerbsError::Os { what, source } => {
            assert_eq!(what, "ibv_reg_mr");
            assert_eq!(source.raw_os_error(), Some(libc::EINVAL));
        }
        e => panic!("EINVAL: {e}"),
    }
}

#[test]
fn missing_device_is_a_clear_error() {
    match Context::open("nosuch-device-xyz") {
        Err(VerbsError::NoDevice { name, .. }) => assert_eq!(name, "nosuch-device-xyz"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a device called nosuch-device-xyz exists?"),
    }
}
