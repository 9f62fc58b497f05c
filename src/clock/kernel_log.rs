//! The TSC rate the kernel logged at boot (`tsc: Refined TSC clocksource
//! calibration: …`, else `tsc: Detected … MHz processor`), read from
//! /dev/kmsg, else from `journalctl -k`, else from `dmesg`; the yardstick
//! `ngctl clock` compares the calibrated rate with.

use std::time::Duration;

/// A TSC rate the kernel logged at boot.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KernelTscLine {
    /// "tsc: Refined TSC clocksource calibration: X MHz", in Hz.
    Refined(f64),
    /// "tsc: Detected X MHz processor", in Hz.
    Detected(f64),
}

impl KernelTscLine {
    pub fn hz(self) -> f64 {
        match self {
            KernelTscLine::Refined(h) | KernelTscLine::Detected(h) => h,
        }
    }
    pub fn kind(self) -> &'static str {
        match self {
            KernelTscLine::Refined(_) => "refined",
            KernelTscLine::Detected(_) => "detected",
        }
    }
}

/// Parse one kernel log line (dmesg, journalctl or /dev/kmsg record form).
pub fn parse_kernel_tsc_line(line: &str) -> Option<KernelTscLine> {
    const REFINED: &str = "tsc: Refined TSC clocksource calibration: ";
    const DETECTED: &str = "tsc: Detected ";
    if let Some(i) = line.find(REFINED) {
        return parse_mhz(&line[i + REFINED.len()..]).map(KernelTscLine::Refined);
    }
    if let Some(i) = line.find(DETECTED) {
        return parse_mhz(&line[i + DETECTED.len()..]).map(KernelTscLine::Detected);
    }
    None
}

/// "2596.144 MHz..." → 2.596144e9 Hz.
fn parse_mhz(s: &str) -> Option<f64> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, rest) = s.split_at(end);
    if !rest.starts_with(" MHz") || num.is_empty() {
        return None;
    }
    // Exact decimal to Hz: integer MHz and up to six fraction digits.
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() || frac.len() > 6 || frac.contains('.') {
        return None;
    }
    let mhz: u64 = int.parse().ok()?;
    let frac_hz: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u64>().ok()? * 10u64.pow(6 - frac.len() as u32)
    };
    if mhz >= 100_000 {
        return None;
    }
    let hz = mhz * 1_000_000 + frac_hz;
    (hz > 0).then_some(hz as f64)
}

/// Fold log lines into the best TSC line: the last refined one, else the
/// last detected one.
pub fn best_kernel_tsc_line<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<KernelTscLine> {
    let mut best = None;
    for l in lines {
        best = prefer(best, parse_kernel_tsc_line(l));
    }
    best
}

fn prefer(old: Option<KernelTscLine>, new: Option<KernelTscLine>) -> Option<KernelTscLine> {
    match (old, new) {
        (Some(KernelTscLine::Refined(_)), Some(KernelTscLine::Detected(_))) => old,
        (_, Some(n)) => Some(n),
        (o, None) => o,
    }
}

/// The kernel's TSC rate from /dev/kmsg, else journalctl -k, else dmesg.
pub(super) fn kernel_tsc_from_logs(notes: &mut Vec<String>) -> Option<(f64, String)> {
    match read_kmsg_tsc() {
        Ok(Some(l)) => return Some((l.hz(), format!("kmsg:{}", l.kind()))),
        Ok(None) => notes.push("/dev/kmsg has no tsc line (ring buffer wrapped?)".into()),
        Err(e) => notes.push(format!("cannot read /dev/kmsg: {e}")),
    }
    for (name, args) in [
        ("journalctl", &["-k", "-b", "--no-pager", "-q"][..]),
        ("dmesg", &[][..]),
    ] {
        match run_with_timeout(name, args, Duration::from_secs(5)) {
            Ok(out) => {
                if let Some(l) = best_kernel_tsc_line(out.lines()) {
                    return Some((l.hz(), format!("{name}:{}", l.kind())));
                }
                notes.push(format!("{name} output has no tsc line"));
            }
            Err(e) => notes.push(format!("cannot run {name}: {e}")),
        }
    }
    None
}

/// Read every record of /dev/kmsg without blocking and keep the best tsc line.
fn read_kmsg_tsc() -> std::io::Result<Option<KernelTscLine>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut best = None;
    // Each read returns one record; bound the loop in case the log is busy.
    for _ in 0..1_000_000 {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let rec = String::from_utf8_lossy(&buf[..n]);
                // Record: "prio,seq,usec,flags;message\n continuation..."
                let msg = rec.split_once(';').map_or(&*rec, |(_, m)| m);
                let first = msg.lines().next().unwrap_or("");
                best = prefer(best, parse_kernel_tsc_line(first));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EPIPE: records were overwritten under us; the next read resumes.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(best)
}

/// Run a command, capture stdout, and kill it if it outlives `timeout`.
pub(super) fn run_with_timeout(
    program: &str,
    args: &[&str],
    timeout: Duration,
) -> std::io::Result<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout pipe"))?;
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = reader.join().unwrap_or_default();
    match status {
        None => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{program} timed out"),
        )),
        Some(st) if !st.success() && out.is_empty() => {
            Err(std::io::Error::other(format!("{program} exited with {st}")))
        }
        Some(_) => Ok(String::from_utf8_lossy(&out).into_owned()),
    }
}
