#!/usr/bin/env bash
# False disagreement of the daemon's cheap re-checks on a quiet link: two
# netgauged daemons (namespace hosts on one bridge, scripts/cluster_hosts.sh)
# meet every round (round_s), re-check at every meeting once the pair is
# measured (recheck_interval_s = 0.001, in effect none: 0 is refused),
# until WANT re-checks have run in all.
# Prints re-checks, disagreements (a first re-check that disagreed) and
# confirmed ones, full sweeps in the window, and the payload bytes per
# re-check (the drivers' re-check bytes, both directions, over the window).
# RUST_LOG=netgauged=info,netgauged::daemon::probe_thread::pair=debug logs
# every re-check's comparisons.
# Usage (root, release binaries built):
#   flock /tmp/netns.lock flock /tmp/measure.lock bash bench/recheck_rig.sh [WANT] [MAX_SIZE]
set -euo pipefail
WANT=${1:-100}
MAX_SIZE=${2:-131072}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
TAG=${TAG:-h12r}
NET=${NET:-96}
ROUND_S=${ROUND_S:-2}
WORK=$(mktemp -d /tmp/h12rc.XXXXXX)
# shellcheck source=scripts/cluster_hosts.sh
source "$(dirname "$0")/../scripts/cluster_hosts.sh"
cluster_up "$TAG" "$NET" 2
for i in 1 2; do
    name=$(cluster_name $i)
    cat > "$WORK/$name.toml" <<CFG
node = "$name"
listen = "10.$NET.0.$i:7470"
shm = "$WORK/$name.seg"
key_file = "$WORK/key"
state_file = "$WORK/$name.state.json"
lock_memory = false
peers = "${TAG}[01-02]"
transports = ["udp"]
max_size_bytes = $MAX_SIZE
budget_bytes_per_s = 50000000
recheck_interval_s = 0.001
fanout_interval_s = 0.0
probe_cpu = $(( i - 1 ))
[schedule]
round_s = $ROUND_S
# The hosts share one clock.
skew_s = 0.2
CFG
    ip netns exec "$name" env RUST_LOG="${RUST_LOG:-netgauged=info}" "$BIN/netgauged" --config "$WORK/$name.toml" \
        >/dev/null 2>"$WORK/$name.log" &
    PIDS+=("$!")
done
sum() { # jq path under .daemon.schedule.stats, summed over both nodes
    local s=0 i v
    for i in 1 2; do
        v=$("$BIN/ngctl" status --json --shm "$WORK/$(cluster_name $i).seg" 2>/dev/null |
            jq -r ".daemon.schedule.stats.$1 // 0" 2>/dev/null || echo 0)
        s=$(( s + v ))
    done
    echo "$s"
}
# The window starts at the first re-check (the full sweeps are done).
ts=$(date +%s)
while [ "$(sum rechecks)" -lt 1 ]; do
    sleep 1
    for p in "${PIDS[@]}"; do
        kill -0 "$p" 2>/dev/null || { cat "$WORK"/*.log >&2; echo "a daemon exited" >&2; exit 1; }
    done
    [ $(( $(date +%s) - ts )) -gt 300 ] && { cat "$WORK"/*.log >&2; echo "no re-check within 300 s" >&2; exit 1; }
done
r0=$(sum rechecks); d0=$(sum disagreements); c0=$(sum confirmed_disagreements)
f0=$(sum full_sweeps); b0=$(sum recheck_bytes)
t0=$(date +%s)
while [ $(( $(sum rechecks) - r0 )) -lt "$WANT" ]; do
    sleep 2
    [ $(( $(date +%s) - t0 )) -gt $(( WANT * ROUND_S * 4 )) ] && { echo "too slow" >&2; break; }
done
r=$(( $(sum rechecks) - r0 )); d=$(( $(sum disagreements) - d0 ))
c=$(( $(sum confirmed_disagreements) - c0 )); f=$(( $(sum full_sweeps) - f0 ))
b=$(( $(sum recheck_bytes) - b0 ))
echo "re-checks $r, disagreeing $d ($(awk -v d="$d" -v r="$r" 'BEGIN{printf "%.1f", 100*d/r}') %), confirmed $c, full sweeps in the window $f, payload per re-check $(( b / (r > 0 ? r : 1) )) B (full sweeps to $MAX_SIZE B, round ${ROUND_S} s)"
grep -h 'disagrees' "$WORK"/*.log | head -5 || true
# KEEP=DIR keeps the daemons' logs and configurations.
[ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$WORK"/*.log "$WORK"/*.toml "$KEEP"/
