#!/usr/bin/env bash
# The daemon's footprint: two netgauged on two namespace hosts (veth, tbf
# 1 Gbit/s), measured over WINDOW seconds after both have published:
# CPU % (utime+stime from /proc), RSS, probe payload bytes/s against the
# budget (from the status file). Needs root.
#   bash bench/daemon_footprint.sh [WINDOW_S] [BUDGET_BYTES_PER_S]
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOW=${1:-60}
BUDGET=${2:-2000000}
cargo build --release --bin ngctl --bin netgauged >/dev/null 2>&1
NGCTL=${CARGO_TARGET_DIR:-$PWD/target}/release/ngctl
NETGAUGED=${CARGO_TARGET_DIR:-$PWD/target}/release/netgauged
WORK=$(mktemp -d /tmp/netgauged-fp.XXXXXX)
source scripts/two_hosts.sh
two_hosts_up ngfp$$ 90 9000 rate 1gbit burst 64kb latency 200ms
two_hosts_settings() {
    cat <<EOT
budget_bytes_per_s = $BUDGET
recheck_interval_s = 10.0
lock_memory = false
fanout_interval_s = 0
EOT
}
two_hosts_configs seg 'interface = "eth0"'
for n in a b; do
    ip netns exec ${TAG}$n "$NETGAUGED" --config "$WORK/$n.toml" 2> "$WORK/$n.log" &
    PIDS+=($!)
done
for _ in $(seq 1 300); do
    n=$($NGCTL dump --json --shm "$WORK/seg-a" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["entries"]))' 2>/dev/null || echo 0)
    [ "$n" -ge 2 ] && break
    sleep 1
done
PID=$(pgrep -f "netgauged --config $WORK/a.toml" | head -1)
ticks() { awk '{print $14+$15}' /proc/$PID/stat; }
spent() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spent_bytes"])' "$WORK/seg-a.status"; }
HZ=$(getconf CLK_TCK)
t0=$(ticks); b0=$(spent); s0=$(date +%s.%N)
sleep "$WINDOW"
t1=$(ticks); b1=$(spent); s1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' /proc/$PID/status)
python3 - "$t0" "$t1" "$HZ" "$s0" "$s1" "$b0" "$b1" "$rss" "$BUDGET" <<'PY'
import sys
t0,t1,hz,s0,s1,b0,b1,rss,budget = map(float, sys.argv[1:])
dt = s1 - s0
print(f"window {dt:.1f} s after convergence (node-a, peers over raw and udp)")
print(f"CPU      {100*(t1-t0)/hz/dt:.2f} % of one core")
print(f"RSS      {rss/1024:.1f} MiB")
print(f"probes   {(b1-b0)/dt:,.0f} payload B/s against a budget of {budget:,.0f} B/s ({100*(b1-b0)/dt/budget:.1f} %)")
PY
