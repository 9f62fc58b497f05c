#!/usr/bin/env bash
# raw_eth vs udp vs sockperf ping-pong on one veth pair, in one run.
#
# Two network namespaces joined by a veth pair; every server runs in one,
# pinned to CPU 1, every client in the other, pinned to CPU 0 (a
# busy-polling client and server each want a core). Reports the median half
# round trip of each:
#   - ngctl raw (PACKET_MMAP ring and plain recvfrom) and udp: EEL =
#     median PRTT(1,0,1)/2 from `ngctl probe --json` (sizes 1..64 B);
#   - sockperf ping-pong, 16 B: its "percentile 50.000" latency (= RTT/2),
#     once with its defaults (epoll) and once busy-polling
#     (-F r --nonblocked: a non-blocking recvfrom loop).
# ROUNDS rounds (default 3) interleave the five, so a load change hits all.
#
# Needs root. Usage: bench/raw_eth.sh [ROUNDS]   (NGCTL=path overrides the
# binary; NS_PREFIX=name the prefix of the two namespaces, default
# ngbench<pid>)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${SECS:-4}
. bench/ngctl.sh
if ! command -v sockperf >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sockperf >&2
fi
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, CAP_NET_RAW)" >&2; exit 1; }

A=${NS_PREFIX:-ngbench$$}-a
B=${NS_PREFIX:-ngbench$$}-b
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    wait 2>/dev/null || true
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
    rm -f "${FEED:-}" "${ROWS:-}"
}
trap cleanup EXIT
ip netns add "$A"
ip netns add "$B"
ip link add va netns "$A" type veth peer name vb netns "$B"
ip -n "$A" addr add 10.211.0.1/24 dev va
ip -n "$B" addr add 10.211.0.2/24 dev vb
ip -n "$A" link set va up
ip -n "$B" link set vb up
ip -n "$A" link set lo up
ip -n "$B" link set lo up
MAC=$(ip netns exec "$B" cat /sys/class/net/vb/address)
inA() { ip netns exec "$A" taskset -c 0 "$@"; }
inB() { ip netns exec "$B" taskset -c 1 "$@"; }
# In the background, without a subshell: $! is then the server itself
# (ip netns exec and taskset exec it), so killing $! ends it.
bgB() { ip netns exec "$B" taskset -c 1 "$@" & }

eel_us() { # JSON on stdin → EEL in µs
    python3 -c '
import json, sys
try:
    print("%.3f" % (json.load(sys.stdin)["eel_ns"] / 1000))
except Exception:
    print("failed")'
}

run_ngctl() { # transport-args…  (server args after --)
    local -a srv=() cli=()
    while [ "$1" != -- ]; do srv+=("$1"); shift; done
    shift
    cli=("$@")
    bgB "$NGCTL" serve "${srv[@]}" --idle-exit-s 1 2>/dev/null
    local pid=$!
    sleep 0.3
    inA "$NGCTL" probe "${cli[@]}" --min-size 1 --max-size 64 --json --resamples 0 2>/dev/null | eel_us
    wait "$pid" || true
}

FEED=$(mktemp)
ROWS=$(mktemp)
echo "U:10.211.0.2:11111" >"$FEED"
run_sockperf() { # extra args (both sides)
    bgB sockperf server -f "$FEED" "$@" >/dev/null 2>&1
    local pid=$!
    sleep 0.3
    inA sockperf ping-pong -f "$FEED" -m 16 -t "$SECS" "$@" 2>&1 |
        awk '/percentile 50.000/ { print $NF }'
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# ngctl: $NGCTL; sockperf: $(sockperf --version 2>&1 | head -1)"
printf "%-6s %12s %12s %12s %14s %14s\n" round raw_ring_us raw_recv_us udp_us sockperf_us sockperf_busy
for r in $(seq 1 "$ROUNDS"); do
    ring=$(run_ngctl --transport raw --interface vb -- --transport raw --interface va --peer-mac "$MAC")
    recv=$(run_ngctl --transport raw --raw-rx recv --interface vb -- \
        --transport raw --raw-rx recv --interface va --peer-mac "$MAC")
    udp=$(run_ngctl --transport udp --listen 10.211.0.2:7470 -- --transport udp --peer 10.211.0.2:7470)
    sp=$(run_sockperf)
    spb=$(run_sockperf --nonblocked -F r)
    printf "%-6s %12s %12s %12s %14s %14s\n" "$r" "$ring" "$recv" "$udp" "$sp" "$spb" | tee -a "$ROWS"
done
python3 - "$ROWS" <<'PY'
import statistics, sys
rows = [l.split()[1:] for l in open(sys.argv[1])]
med = []
for col in zip(*rows):
    v = [float(x) for x in col if x.replace(".", "", 1).isdigit()]
    med.append("%.3f" % statistics.median(v) if v else "-")
print("%-6s %12s %12s %12s %14s %14s" % ("median", *med))
PY
