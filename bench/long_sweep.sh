#!/usr/bin/env bash
# A full sweep that outlasts the 120 s session TTL: two netgauged on two
# namespace hosts behind a slow `tc tbf` rate, until node-a has published
# node-b (or TIMEOUT_S). Reports the sweep's duration, the keep-alives the
# responder saw, and every failed attempt. Needs root.
#   bash bench/long_sweep.sh [RATE] [MAX_SIZE_BYTES] [TIMEOUT_S]
#   NETGAUGED=… NGCTL=… to measure other builds (default: this tree's).
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-40mbit}
MAX=${2:-1048576}
TIMEOUT=${3:-600}
if [ -z "${NETGAUGED:-}" ] || [ -z "${NGCTL:-}" ]; then
    cargo build --release --bin ngctl --bin netgauged >/dev/null 2>&1
fi
NGCTL=${NGCTL:-${CARGO_TARGET_DIR:-$PWD/target}/release/ngctl}
NETGAUGED=${NETGAUGED:-${CARGO_TARGET_DIR:-$PWD/target}/release/netgauged}
WORK=$(mktemp -d /tmp/netgauged-long.XXXXXX)
source scripts/two_hosts.sh
# The queue holds 10 s of traffic: a sweep's bursts (8 × the largest size
# in the warm-up) must fit, or tbf drops them as a switch would (at
# 20 Mbit/s with 2 s, 8 × 724 KiB was lost every time).
two_hosts_up nglong$$ 92 1500 rate "$RATE" burst 32kb latency 10s
two_hosts_settings() {
    cat <<EOT
budget_bytes_per_s = 1000000000
recheck_interval_s = 600.0
max_size_bytes = $MAX
lock_memory = false
fanout_interval_s = 0
EOT
}
two_hosts_configs seg
# node-b starts first and serves only while node-a drives: node-a's sweep
# is the one timed (node-b's own sweep toward node-a waits for it).
for n in b a; do
    RUST_LOG=netgauged=debug ip netns exec ${TAG}$n "$NETGAUGED" --config "$WORK/$n.toml" \
        2> "$WORK/$n.log" &
    PIDS+=($!)
    sleep 0.5
done
t0=$(date +%s)
published=no
while [ $(( $(date +%s) - t0 )) -lt "$TIMEOUT" ]; do
    if "$NGCTL" dump --json --shm "$WORK/seg-a" 2>/dev/null \
        | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["entries"] else 1)' 2>/dev/null; then
        published=yes; break
    fi
    sleep 2
done
strip() { sed -e 's/\x1b\[[0-9;]*m//g' "$1"; }
echo "# long sweep: tbf $RATE, max size $MAX B; $NETGAUGED"
echo "published by node-a after $(( $(date +%s) - t0 )) s: $published"
strip "$WORK/a.log" | grep -E "node-b over udp \(.*\): large-message" | sed 's/^.*INFO [^ ]* //' || true
if [ "$published" = yes ]; then
    echo "node-a's entry for node-b (1/R = $(python3 -c "import re,sys; r='$RATE'; m=re.match(r'([0-9.]+)(k|m|g)bit',r); print('%.1f' % (8e9/(float(m.group(1))*{'k':1e3,'m':1e6,'g':1e9}[m.group(2)]))) if m else print('?')") ns/B):"
    "$NGCTL" dump --shm "$WORK/seg-a" | sed -n '1,40p'
fi
echo "failed attempts of node-a:"
strip "$WORK/a.log" | grep -E "WARN|failed" | sed 's/^.*\(WARN\|INFO\|DEBUG\) [^ ]* //' | head -5 || true
echo "keep-alives node-b answered for a session it serves: $(strip "$WORK/b.log" | grep -c "extended by its keep-alive" || true)"
strip "$WORK/b.log" | grep -E "session|expired" | sed 's/^.*\(WARN\|INFO\|DEBUG\) [^ ]* //' | head -8 || true
[ "$published" = yes ]
