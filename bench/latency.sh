#!/usr/bin/env bash
# Half-round-trip distribution on UDP loopback: ngctl's latency run beside
# sockperf ping-pong, same CPU pinning (servers on CPU 1, clients on CPU 0).
#
#   - ngctl: `ngctl serve --transport udp --cpu 1` and `ngctl probe
#     --transport udp --cpu 0 --max-size 64 --latency-samples N`; its
#     percentiles of PRTT(1,0,s)/2 at 16 B (nearest rank over N samples);
#   - sockperf ping-pong, 16 B, for SECS seconds: its latency percentiles
#     (sockperf's latency is RTT/2), once with its defaults (epoll) and
#     once busy-polling (-F r --nonblocked).
# ROUNDS rounds (default 3) interleave the three, so a load change hits all.
#
# Usage: bench/latency.sh [ROUNDS]   (NGCTL=path overrides the binary;
# N=samples of ngctl's run, default 20000; SECS=sockperf's run, default 2;
# PORT=base UDP port, default 17470)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
N=${N:-20000}
SECS=${SECS:-2}
PORT=${PORT:-17470}
. bench/ngctl.sh
command -v sockperf >/dev/null || { echo "sockperf is not installed (Debian: apt-get install sockperf)" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || { echo "needs two CPUs (client and server pinned apart)" >&2; exit 1; }

FEED=$(mktemp)
echo "U:127.0.0.1:$((PORT + 1))" >"$FEED"
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
    rm -f "$FEED"
}
trap cleanup EXIT

# Percentiles in µs: min p50 p90 p99 p99.9 max.
ngctl_row() {
    taskset -c 1 "$NGCTL" serve --transport udp --listen "127.0.0.1:$PORT" --cpu 1 --idle-exit-s 2 2>/dev/null &
    local pid=$!
    sleep 0.3
    taskset -c 0 "$NGCTL" probe --transport udp --peer "127.0.0.1:$PORT" --cpu 0 \
        --max-size 64 --resamples 0 --latency-samples "$N" --json -q 2>/dev/null |
        python3 -c '
import json, sys
try:
    r = [x for x in json.load(sys.stdin)["latency"] if x["size_bytes"] == 16][0]
    print(" ".join("%.2f" % (r[k] / 1000) for k in
                   ("min_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")), r["samples"])
except Exception as e:
    print("failed", e, file=sys.stderr); print("- - - - - - -")'
    wait "$pid" || true
}

sockperf_row() { # extra args (both sides)
    taskset -c 1 sockperf server -f "$FEED" "$@" >/dev/null 2>&1 &
    local pid=$!
    sleep 0.3
    taskset -c 0 sockperf ping-pong -f "$FEED" -m 16 -t "$SECS" "$@" 2>&1 |
        python3 -c '
import re, sys
t = sys.stdin.read()
def pct(p):
    m = re.search(r"percentile %s\s*=\s*([0-9.]+)" % re.escape(p), t)
    return m.group(1) if m else "-"
mn = re.search(r"<MIN>\s*observation\s*=\s*([0-9.]+)", t)
mx = re.search(r"<MAX>\s*observation\s*=\s*([0-9.]+)", t)
n = re.search(r"ReceivedMessages=(\d+)", t)
print(mn.group(1) if mn else "-", pct("50.000"), pct("90.000"), pct("99.000"),
      pct("99.900"), mx.group(1) if mx else "-", n.group(1) if n else "-")'
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ngctl: $NGCTL ($("$NGCTL" --version)); sockperf: $(sockperf --version 2>&1 | head -1)"
echo "# half round trip at 16 B, µs; samples last"
printf "%-6s %-15s %8s %8s %8s %8s %8s %9s %8s\n" round tool min p50 p90 p99 p99.9 max samples
for r in $(seq 1 "$ROUNDS"); do
    printf "%-6s %-15s %8s %8s %8s %8s %8s %9s %8s\n" "$r" ngctl $(ngctl_row)
    printf "%-6s %-15s %8s %8s %8s %8s %8s %9s %8s\n" "$r" sockperf $(sockperf_row)
    printf "%-6s %-15s %8s %8s %8s %8s %8s %9s %8s\n" "$r" sockperf-busy $(sockperf_row --nonblocked -F r)
done
