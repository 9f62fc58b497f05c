#!/usr/bin/env bash
# Each export against its consumer (bench/exports.md has the figures):
#  1. a LogGPS link (the sim transport, S = 16 KiB) probed and published;
#     Netgauge's loggp.out from it against the probe's own round trips,
#     LogGOPSim with the exported flags against loggp.out's model, one
#     message and a ping-pong at sizes on both sides of S; SimGrid's SMPI
#     on the exported platform file, a ping-pong at the same sizes;
#  2. tests/export_consumers.rs: MPICH 4.0 starts with the exported JSON and
#     applies its small-communicator rule, Open MPI applies the rules file,
#     LogGOPSim and SMPI reproduce two models within 1 %, SMPI the measured
#     sharing (β, shared or independent directions).
# LogGOPSim is not part of the project: set LOGGOPSIM and TXT2BIN to its
# binaries (built from its public source); without them those parts say
# "not run" and the rest runs.
# usage: [LOGGOPSIM=… TXT2BIN=…] bash bench/exports.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

smpi=0
if command -v smpicc >/dev/null && command -v smpirun >/dev/null; then
    smpi=1
    smpicc -O2 -o "${TMPDIR:-/tmp}/ng-smpi-pingpong.$$" tests/exports/smpi_pingpong.c 2>/dev/null
else
    echo "not run: SimGrid's SMPI not available (scripts/install-deps.sh installs libsimgrid-dev)"
fi
sim=0
if [ -x "${LOGGOPSIM:-}" ] && [ -x "${TXT2BIN:-}" ]; then
    sim=1
else
    echo "not run: LogGOPSim not available (set LOGGOPSIM and TXT2BIN to its binaries)"
    unset LOGGOPSIM TXT2BIN
fi

cargo build --release --bin ngctl
N="${CARGO_TARGET_DIR:-target}/release/ngctl"
W=$(mktemp -d)
trap 'rm -rf "$W" "${TMPDIR:-/tmp}/ng-smpi-pingpong.$$"' EXIT

# One case: a probe (its arguments), published; its exports against the
# probe's own round trips and against LogGOPSim. $1: a name; $2: the
# largest difference loggp.out may have from the probe (the sim's model is
# exact; a real link's fit is not).
one_case() {
    local name=$1 tol=$2
    shift 2
    echo "== 1. $name: probe $*, published"
    rm -f "$W/seg"
    "$N" probe "$@" --json -q --publish --shm "$W/seg" > "$W/probe.json"
    "$N" export --format netgauge --shm "$W/seg" > "$W/loggp.out"
    "$N" export --format loggopsim --shm "$W/seg" > "$W/loggopsim.txt"
    "$N" export --format smpi --shm "$W/seg" --hosts 2 > "$W/platform.xml"
sed 's/^/    /' "$W/loggopsim.txt"

echo "-- loggp.out PRTT(1,0,s) against the probe's measured PRTT(1,0,s)"
python3 - "$W/probe.json" "$W/loggp.out" "$tol" <<'PY'
import json, sys
probe = json.load(open(sys.argv[1]))
measured = {p["size_bytes"]: 2 * p["half_rtt_ns"] / 1e3 for p in probe["points"]}
worst = 0.0
print("    size B   loggp.out us   measured us   diff %")
for line in open(sys.argv[2]):
    if line.startswith("#"):
        continue
    c = line.split()
    s, prtt = int(c[0]), float(c[2])
    if s in measured:
        d = (prtt / measured[s] - 1) * 100
        worst = max(worst, abs(d))
        print("    %6d %14.3f %13.3f %8.3f" % (s, prtt, measured[s], d))
print("    largest difference %.3f %%" % worst)
assert worst <= float(sys.argv[3]), worst
PY

if [ "$sim" = 1 ]; then
    echo "-- LogGOPSim with the exported flags against loggp.out's model"
    python3 - "$W" "$LOGGOPSIM" "$TXT2BIN" <<'PY'
import re, subprocess, sys
w, sim, txt2bin = sys.argv[1:]
model = {}
for line in open(w + "/loggp.out"):
    if not line.startswith("#"):
        c = line.split()
        model[int(c[0])] = float(c[2]) * 1e3 / 2  # T(s) = PRTT(1,0,s)/2, ns
text = open(w + "/loggopsim.txt").read()
u = re.search(r"times in (\d*)(\w+)", text)
unit = {"ns": 1.0, "ps": 1e3, "fs": 1e6}[u.group(2)] / float(u.group(1) or 1)
sets = re.findall(r"# sizes (\d+)\.\.(\d+) B.*\n(-L .*)", text)
def run(goal):
    open(w + "/s.goal", "w").write(goal)
    subprocess.run([txt2bin, "-i", w + "/s.goal", "-o", w + "/s.bin"], check=True,
                   capture_output=True)
    out = subprocess.run([sim, "-f", w + "/s.bin"] + flags.split(), check=True,
                         capture_output=True, text=True).stdout
    return [int(x) / unit for x in re.findall(r"Host \d+: (\d+)", out)]
worst = 0.0
print("    size B   model T ns  LogGOPSim ns  diff %   2T ns   ping-pong ns  diff %")
for lo, hi, flags in sets:
    for s in sorted({int(lo), int(hi)} & set(model)):
        one = max(run("num_ranks 2\n\nrank 0 {\nl1: send %db to 1 tag 0\n}\n\n"
                      "rank 1 {\nl1: recv %db from 0 tag 0\n}\n" % (s, s)))
        pp = run("num_ranks 2\n\nrank 0 {\nl1: send %db to 1 tag 0\nl2: recv %db from 1 tag 0\n"
                 "l2 requires l1\n}\n\nrank 1 {\nl1: recv %db from 0 tag 0\n"
                 "l2: send %db to 0 tag 0\nl2 requires l1\n}\n" % (s, s, s, s))[0]
        t = model[s]
        d1, d2 = (one / t - 1) * 100, (pp / (2 * t) - 1) * 100
        worst = max(worst, abs(d1), abs(d2))
        print("    %6d %12.1f %13.1f %7.3f %9.1f %13.1f %7.3f" % (s, t, one, d1, 2 * t, pp, d2))
print("    largest difference %.3f %%" % worst)
assert worst <= 1.0, worst
PY
fi

if [ "$smpi" = 1 ]; then
    echo "-- SMPI on the exported platform: half a ping-pong against loggp.out's model"
    sizes=$(grep -v '^#' "$W/loggp.out" | awk '{print $1}' | tr '\n' ' ')
    printf 'node-0\nnode-1\n' > "$W/hosts"
    # shellcheck disable=SC2086
    smpirun -platform "$W/platform.xml" -hostfile "$W/hosts" -np 2 \
        --cfg=smpi/simulate-computation:no --cfg=smpi/wtime:0 \
        "${TMPDIR:-/tmp}/ng-smpi-pingpong.$$" $sizes 2>/dev/null > "$W/smpi.txt"
    python3 - "$W/loggp.out" "$W/smpi.txt" <<'PY'
import sys
model = {}
for line in open(sys.argv[1]):
    if not line.startswith("#"):
        c = line.split()
        model[int(c[0])] = float(c[2]) * 1e3 / 2  # T(s) = PRTT(1,0,s)/2, ns
worst = 0.0
print("    size B   model T ns      SMPI ns   diff %")
for line in open(sys.argv[2]):
    s, t = line.split()
    s, t = int(s), float(t)
    d = (t / model[s] - 1) * 100
    worst = max(worst, abs(d))
    print("    %8d %12.1f %12.1f %8.3f" % (s, model[s], t, d))
print("    largest difference %.3f %%" % worst)
assert worst <= 1.0, worst
PY
fi
}

one_case "sim (LogGPS, S = 16 KiB)" 1.0 --transport sim --model L=1100,o=300,g=450,G=0.08,S=16384 --max-size 65536
# A real link: UDP over loopback, server and prober on their own CPUs.
"$N" serve --transport udp --listen 127.0.0.1:7489 --idle-exit-s 20 --cpu 0 -q &
server=$!
sleep 0.5
one_case "udp loopback" 100 --transport udp --peer 127.0.0.1:7489 --max-size 65536 --cpu 1
kill "$server" 2>/dev/null || true
wait "$server" 2>/dev/null || true

echo "== 2. tests/export_consumers.rs (MPICH, Open MPI, LogGOPSim, SMPI)"
ok=1
cargo test --release --test export_consumers -- --nocapture --test-threads 1 \
    > "$W/test.log" 2>&1 || ok=0
grep -E "^(test |MPICH|Open MPI|LogGOPSim|SMPI|node|  )" "$W/test.log" || true
[ "$ok" = 1 ] || { tail -40 "$W/test.log"; exit 1; }
echo "bench/exports.sh: done"
