//! What libngcoll reads of the host at MPI_Init: its name, its online
//! cores, the scheduler's time slice, and γ (the cost of combining bytes).

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return String::from("localhost");
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

pub fn online_cores() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// The scheduler's time slice (EEVDF's base slice, else CFS's minimum
/// granularity), ns; 3 ms if neither is readable.
pub fn sched_slice_ns() -> f64 {
    for f in [
        "/sys/kernel/debug/sched/base_slice_ns",
        "/proc/sys/kernel/sched_base_slice_ns",
        "/proc/sys/kernel/sched_min_granularity_ns",
        "/sys/kernel/debug/sched/min_granularity_ns",
    ] {
        if let Some(v) = std::fs::read_to_string(f)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            if v > 0.0 {
                return v;
            }
        }
    }
    3e6
}

/// γ: ns per byte to combine two arrays of doubles (what a reduction's
/// combining costs here).
pub fn measure_gamma() -> f64 {
    let n = 1 << 16;
    let mut a = vec![1.0f64; n];
    let b = vec![2.0f64; n];
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        for (x, y) in a.iter_mut().zip(b.iter()) {
            *x += *y;
        }
        std::hint::black_box(&a);
        best = best.min(t0.elapsed().as_nanos() as f64 / (8 * n) as f64);
    }
    best
}
