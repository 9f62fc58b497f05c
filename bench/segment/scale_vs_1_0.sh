#!/usr/bin/env bash
# Index-path lookups at cluster scale, ABI 1.0 and 1.1 against this tree
# (ABI 1.2): the same program built against the ffi crate of BASE (the last
# ABI 1.0 commit), of BASE_1_1 (the last ABI 1.1 commit), both extracted
# with git archive, and against this tree's ffi crate.
# Per (peers, transports, working set): a segment of peers × transports
# entries written in (peer, transport) order, as a daemon publishes them;
# then ns per lookup_index (best of 9 × 10^6, thread CPU time) cycling in a
# scattered order over the first WS peers of the rdma transport (WS = all:
# every peer), message sizes cycling over 8 sizes in 4 ranges.
#
#   flock /tmp/measure.lock bash bench/segment/scale_vs_1_0.sh [OUT_DIR]
#
# With NG_SCALE_BUILD_ONLY=1 it only builds into OUT_DIR (outside the lock);
# a second run with the same OUT_DIR then only times.
#
# Needs the git history down to BASE and the crates in the local cargo cache
# (builds offline).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BASE=d6ba19db2666acca658a03e5f9267e433a2fbea0
BASE_1_1=d69c2e800137539a267a98a9ff4b768b5ef3631d
out=${1:-$(mktemp -d /tmp/ng-scale.XXXXXX)}
if [ ! -x "$out/target-v12/release/ng-scale-v12" ]; then
mkdir -p "$out/v10/src" "$out/v11/src" "$out/v12/src"
git -C "$root" archive --format=tar "$BASE" ffi | tar -x -C "$out/v10"
git -C "$root" archive --format=tar "$BASE_1_1" ffi | tar -x -C "$out/v11"

cat > "$out/main.rs" <<'EOF'
use netgauge::{flags, EntryData, RangeData, Reader, SegmentWriter};
use std::hint::black_box;

fn entry(peer: &str, transport: &str, k: u64) -> EntryData {
    let mut e = EntryData::default();
    e.peer = peer.into();
    e.transport = transport.into();
    e.ranges = (0..4u64)
        .map(|r| RangeData {
            from_bytes: if r == 0 { 1 } else { 1 << (4 * r + 2) },
            to_bytes: (1 << (4 * r + 6)) - 1,
            g_ns: 500.0 + k as f64,
            G_ns_per_byte: 0.1,
            o_s_ns: 300.0,
            o_r_ns: 250.0,
            O_s_ns_per_byte: 0.001,
            O_r_ns_per_byte: 0.001,
        })
        .collect();
    e.eel_ns = 1500.0;
    e.L_ns = 950.0;
    e.S_bytes = Some(8192);
    e.f = Some(6);
    e.samples = 4096;
    e.measured_unix_ns = 1_700_000_000_000_000_000;
    e.flags = flags::VALID;
    e
}

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|x| x.parse().unwrap()).collect();
    let (peers, transports, ws) = (a[0], a[1], a[2].min(a[0]));
    let path = format!("/dev/shm/ng-scale-{}", std::process::id());
    let mut w = SegmentWriter::create_or_open(&path, peers * transports, "n", "c").unwrap();
    let names = ["rdma", "udp", "raw", "msg"];
    for i in 0..peers {
        for t in &names[..transports] {
            w.upsert(&entry(&format!("node{i:04}.cluster"), t, i as u64)).unwrap();
        }
    }
    let mut r = Reader::open(&path).unwrap();
    r.set_stale_after_ns(3_600_000_000_000);
    // A scattered permutation of the first ws peers.
    let idx: Vec<usize> = (0..ws)
        .map(|i| r.index(&format!("node{:04}.cluster", (i * 2_654_435_761) % ws), "rdma").unwrap())
        .collect();
    let sizes = [8u64, 100, 1000, 5000, 70_000, 200_000, 1 << 20, 3];
    let mut best = f64::MAX;
    for _ in 0..9 {
        let t = cpu_ns();
        for i in 0..1_000_000u64 {
            black_box(r.lookup_index(idx[(i as usize) % ws], sizes[(i & 7) as usize]).unwrap());
        }
        best = best.min((cpu_ns() - t) as f64 / 1e6);
    }
    println!("{best:.1}");
    drop(w);
    std::fs::remove_file(&path).unwrap();
}
EOF

for v in v10 v11 v12; do
    if [ "$v" = v12 ]; then dep="$root/ffi"; else dep="$out/$v/ffi"; fi
    cat > "$out/$v/Cargo.toml" <<EOF
[package]
name = "ng-scale-$v"
version = "0.0.0"
edition = "2021"
[dependencies]
netgauge-ffi = { path = "$dep" }
libc = "0.2"
[workspace]
members = ["."]
EOF
    cp "$out/main.rs" "$out/$v/src/main.rs"
done
# The extracted crates take edition and license from a workspace root: give
# them to them directly.
for v in v10 v11; do
    sed -i -e 's/^edition.workspace = true/edition = "2021"/' -e 's/^license.workspace = true/license = "MIT OR Apache-2.0"/' "$out/$v/ffi/Cargo.toml"
done
for v in v10 v11 v12; do
    CARGO_TARGET_DIR="$out/target-$v" cargo build --release --offline --quiet --manifest-path "$out/$v/Cargo.toml"
done
fi
[ "${NG_SCALE_BUILD_ONLY:-0}" = 1 ] && exit 0

echo "| peers × transports | lookups over | ABI 1.0 ns | ABI 1.1 ns | ABI 1.2 ns |"
echo "|---|---|---:|---:|---:|"
for pt in "1024 2" "2048 2" "4096 1" "4096 2" "8192 1"; do
    set -- $pt
    for ws in 64 "$1"; do
        a=$("$out/target-v10/release/ng-scale-v10" "$1" "$2" "$ws")
        b=$("$out/target-v11/release/ng-scale-v11" "$1" "$2" "$ws")
        c=$("$out/target-v12/release/ng-scale-v12" "$1" "$2" "$ws")
        echo "| $1 × $2 | $ws peers | $a | $b | $c |"
    done
done
