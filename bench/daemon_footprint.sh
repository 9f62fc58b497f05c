#!/usr/bin/env bash
# The daemon's footprint: two netgauged on two namespace hosts (veth, tbf
# 1 Gbit/s), measured over WINDOW seconds after both have published:
# CPU % (run time of all its threads, /proc/…/task/*/schedstat), wake-ups (context switches of all its
# threads), RSS, probe payload bytes/s against the budget (from the status
# file). MODE "busy" re-checks every 10 s; MODE "idle" measures a daemon
# with no probe due (re-checks a day apart, no fan-out; give it a budget
# large enough that the first sweeps are not spaced out into the window,
# e.g. 100000000): what it costs a node between measurements. Needs root.
#   bash bench/daemon_footprint.sh [WINDOW_S] [BUDGET_BYTES_PER_S] [busy|idle]
#   e.g. bash bench/daemon_footprint.sh 60 100000000 idle
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOW=${1:-60}
BUDGET=${2:-2000000}
MODE=${3:-busy}
case $MODE in
    busy) RECHECK=10.0 ;;
    idle) RECHECK=86400.0 ;;
    *) echo "MODE is busy or idle" >&2; exit 2 ;;
esac
cargo build --release --bin ngctl --bin netgauged >/dev/null 2>&1
NGCTL=${CARGO_TARGET_DIR:-$PWD/target}/release/ngctl
NETGAUGED=${CARGO_TARGET_DIR:-$PWD/target}/release/netgauged
WORK=$(mktemp -d /tmp/netgauged-fp.XXXXXX)
source scripts/two_hosts.sh
two_hosts_up ngfp$$ 90 9000 rate 1gbit burst 64kb latency 200ms
two_hosts_settings() {
    cat <<EOT
budget_bytes_per_s = $BUDGET
recheck_interval_s = $RECHECK
lock_memory = false
fanout_interval_s = 0
EOT
}
two_hosts_configs seg 'interface = "eth0"'
for n in a b; do
    ip netns exec ${TAG}$n "$NETGAUGED" --config "$WORK/$n.toml" 2> "$WORK/$n.log" &
    PIDS+=($!)
done
# Converged: both nodes have published both transports (a sweep can take
# minutes on a loaded machine; the budget spaces sweeps out).
entries() { $NGCTL dump --json --shm "$WORK/seg-$1" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["entries"]))' 2>/dev/null || echo 0; }
end=$(( $(date +%s) + 900 ))
while [ "$(date +%s)" -lt "$end" ]; do
    [ "$(entries a)" -ge 2 ] && [ "$(entries b)" -ge 2 ] && break
    sleep 2
done
# Both daemons, after convergence (each has driven its sweeps and served
# the other's).
sleep 5
PID_A=$(pgrep -f "netgauged --config $WORK/a.toml" | head -1)
PID_B=$(pgrep -f "netgauged --config $WORK/b.toml" | head -1)
# CPU time in ns: the sum over its threads of /proc/…/schedstat (finer
# than the 10 ms ticks of /proc/…/stat, which 0.1 % of 60 s is 6 of).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{n += $1} END {printf "%.0f\n", n}'; }
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {n += $2} END {print n}'; }
spent() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["spent_bytes"])' "$WORK/seg-a.status"; }
NS_PER_S=1000000000
ta0=$(cpu_ns $PID_A); tb0=$(cpu_ns $PID_B); wa0=$(switches $PID_A); wb0=$(switches $PID_B)
b0=$(spent); s0=$(date +%s.%N)
sleep "$WINDOW"
ta1=$(cpu_ns $PID_A); tb1=$(cpu_ns $PID_B); wa1=$(switches $PID_A); wb1=$(switches $PID_B)
b1=$(spent); s1=$(date +%s.%N)
rss=$(awk '/VmRSS/ {print $2}' /proc/$PID_A/status)
threads=$(awk '/Threads/ {print $2}' /proc/$PID_A/status)
python3 - "$ta0" "$ta1" "$tb0" "$tb1" "$wa0" "$wa1" "$wb0" "$wb1" "$NS_PER_S" "$s0" "$s1" "$b0" "$b1" "$rss" "$threads" "$BUDGET" "$MODE" <<'PY'
import sys
ta0,ta1,tb0,tb1,wa0,wa1,wb0,wb1,ns_per_s,s0,s1,b0,b1,rss,threads,budget = map(float, sys.argv[1:17])
mode = sys.argv[17]
dt = s1 - s0
print(f"window {dt:.1f} s after convergence, mode {mode} (peers over raw and udp)")
print(f"CPU      node-a {100*(ta1-ta0)/ns_per_s/dt:.3f} %, node-b {100*(tb1-tb0)/ns_per_s/dt:.3f} % of one core")
print(f"wake-ups node-a {(wa1-wa0)/dt:.1f}/s, node-b {(wb1-wb0)/dt:.1f}/s (context switches, all threads)")
print(f"RSS      {rss/1024:.1f} MiB, {threads:.0f} threads (node-a)")
print(f"probes   {(b1-b0)/dt:,.0f} payload B/s against a budget of {budget:,.0f} B/s ({100*(b1-b0)/dt/budget:.1f} %)")
PY
