#!/usr/bin/env bash
# netgauged at cluster scale with real daemons: N namespace hosts on one
# bridge (scripts/cluster_hosts.sh), every node's peers the hostlist
# "${TAG}[01-NN]", sweeps to 4 KiB. Checks, in order:
#   1. full mesh: every directed pair has a valid udp entry in the segment
#      of its source within MESH_LIMIT_S, with at most one refused session
#      per pair on average (busy refusals given, summed over the nodes);
#   2. quiet: node 2 held quiet (`ngctl quiet`) sends zero probe bytes
#      (eth0 tx bytes of its namespace, less control traffic bounded by
#      QUIET_CTRL_BYTES) and runs no busy-polling thread (CPU time of all
#      its threads over QUIET_S), and its peers count no failure against it;
#      after `ngctl resume` it drives or serves again within two rounds;
#   3. kill -9 of node 3: its peers skip it (backoff, no hang), and after a
#      restart it is measured again by a peer;
#   4. with FANOUT_S set: every daemon restarted (entries restored from the
#      state files) with raw Ethernet beside udp and a fan-out round every
#      FANOUT_S seconds: the LogfP o(P) curve over P = 1 … N−1 peers of one
#      switch group, printed per transport as published.
# Usage (root, release binaries built):
#   flock /tmp/netns.lock flock /tmp/measure.lock bash scripts/cluster_rig.sh [N]
# Environment: BIN (default target/release), TAG (h12n), NET (98),
# MESH_LIMIT_S (600), ROUND_S (10), MESH_PAIRS (the schedule's
# mesh_pairs_per_round, 0: no cap), PIN (1: each host's busy threads on
# core (i−1) mod cores; 0: where the kernel puts them), BUDGET (each node's
# probe budget, bytes/s, 5000000), FANOUT_S (unset: no o(P) phase),
# FANOUT_ROUND_S (the o(P) phase's round, ROUND_S), FANOUT_LIMIT_S.
set -euo pipefail
N=${1:-16}
BIN=${BIN:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
TAG=${TAG:-h12n}
NET=${NET:-98}
MESH_LIMIT_S=${MESH_LIMIT_S:-600}
ROUND_S=${ROUND_S:-10}
QUIET_S=${QUIET_S:-30}
QUIET_CTRL_BYTES=${QUIET_CTRL_BYTES:-65536}
FANOUT_S=${FANOUT_S:-}
# The o(P) phase waits this long for each transport's curve (raw needs its
# own entries first: two mesh cycles, then the chunk's turn to drive).
FANOUT_LIMIT_S=${FANOUT_LIMIT_S:-$(( ${FANOUT_S:-0} * 10 + 300 ))}
# The o(P) phase's round: a meeting there sweeps raw and udp (and a fan-out
# round claims every peer), which takes longer than a mesh session to 4 KiB.
FANOUT_ROUND_S=${FANOUT_ROUND_S:-$ROUND_S}
MESH_PAIRS=${MESH_PAIRS:-0}
BUDGET=${BUDGET:-5000000}
PIN=${PIN:-1}
TRANSPORTS='["udp"]'
IFACE=
FANOUT_CFG=0.0
WORK=$(mktemp -d /tmp/h12rig.XXXXXX)
# shellcheck source=scripts/cluster_hosts.sh
source "$(dirname "$0")/cluster_hosts.sh"
CORES=$(nproc)
KEEP=${KEEP:-/tmp/${TAG}-rig-logs}
# On failure the logs and status files are kept in $KEEP.
fail() {
    echo "FAIL: $*" >&2
    rm -rf "$KEEP"; mkdir -p "$KEEP"
    cp "$WORK"/*.log "$WORK"/*.toml "$WORK"/*.status "$KEEP"/ 2>/dev/null || true
    echo "logs in $KEEP" >&2
    exit 1
}

cluster_up "$TAG" "$NET" "$N"
hostlist=$(printf '%s[01-%02d]' "$TAG" "$N")

config() { # host index (1-based)
    local i=$1 name
    name=$(cluster_name "$i")
    cat > "$WORK/$name.toml" <<EOF
node = "$name"
listen = "10.$NET.0.$i:7470"
udp_port = 7471
shm = "$WORK/$name.seg"
key_file = "$WORK/key"
state_file = "$WORK/$name.state.json"
lock_memory = false
peers = "$hostlist"
transports = $TRANSPORTS
$IFACE
max_size_bytes = 4096
max_reps = 6
budget_bytes_per_s = $BUDGET
$( [ "$PIN" = 1 ] && echo "probe_cpu = $(( (i - 1) % CORES ))" )
fanout_interval_s = $FANOUT_CFG
recheck_interval_s = 0.001
[schedule]
round_s = $ROUND_S
mesh_pairs_per_round = $MESH_PAIRS
# The hosts share one clock.
skew_s = 0.2
backoff_min_s = $(( ROUND_S * 2 ))
backoff_max_s = $(( ROUND_S * 8 ))
EOF
}
declare -A PID
start() { # host index
    local name
    name=$(cluster_name "$1")
    ip netns exec "$name" env RUST_LOG=${LOG:-netgauged=info} "$BIN/netgauged" --config "$WORK/$name.toml" \
        >/dev/null 2>>"$WORK/$name.log" &
    PID[$1]=$!
    PIDS+=("$!")
}
seg() { echo "$WORK/$(cluster_name "$1").seg"; }
ngctl() { "$BIN/ngctl" "$@"; }
# Valid udp entries of node i toward other members.
valid_of() {
    ngctl dump --json --shm "$(seg "$1")" 2>/dev/null |
        jq --arg tag "$TAG" --arg me "$(cluster_name "$1")" \
            '[.entries[] | select(.transport == "udp" and (.peer | startswith($tag)) and .peer != $me and (.flags | index("valid")))] | length' \
            2>/dev/null || echo 0
}
stat_of() { # host index, jq path under .daemon
    ngctl status --json --shm "$(seg "$1")" 2>/dev/null | jq -r ".daemon$2 // 0" 2>/dev/null || echo 0
}

for i in $(seq 1 "$N"); do config "$i"; start "$i"; done
t0=$(date +%s)
want=$(( N * (N - 1) ))
echo "== $N daemons, hostlist $hostlist, round ${ROUND_S} s, mesh pairs per round ${MESH_PAIRS} (0: no cap), pinned $PIN, sweeps to 4 KiB; want $want directed pairs"
have=0
while :; do
    sleep 10
    have=0
    for i in $(seq 1 "$N"); do have=$(( have + $(valid_of "$i") )); done
    el=$(( $(date +%s) - t0 ))
    echo "  t=${el}s: $have / $want directed pairs published"
    [ "$have" -ge "$want" ] && break
    [ "$el" -ge "$MESH_LIMIT_S" ] && break
done
mesh_s=$(( $(date +%s) - t0 ))
busy=0; refused=0; drives=0; sweeps=0; rechecks=0; dis=0; disturbed=0; deferred=0
for i in $(seq 1 "$N"); do
    busy=$(( busy + $(stat_of "$i" .schedule.stats.refused_busy) ))
    refused=$(( refused + $(stat_of "$i" .schedule.stats.refused_busy) + $(stat_of "$i" .schedule.stats.refused_other) + $(stat_of "$i" .schedule.stats.refused_budget) ))
    drives=$(( drives + $(stat_of "$i" .schedule.stats.drives) ))
    sweeps=$(( sweeps + $(stat_of "$i" .schedule.stats.full_sweeps) ))
    rechecks=$(( rechecks + $(stat_of "$i" .schedule.stats.rechecks) ))
    dis=$(( dis + $(stat_of "$i" .schedule.stats.disagreements) ))
    disturbed=$(( disturbed + $(stat_of "$i" .schedule.stats.disturbed) ))
    deferred=$(( deferred + $(stat_of "$i" .schedule.stats.pair_sweeps_deferred) + $(stat_of "$i" .schedule.stats.class_sweeps_deferred) ))
done
pairs=$(( N * (N - 1) / 2 ))
echo "mesh: $have / $want directed pairs in ${mesh_s} s; sessions driven $drives, full sweeps $sweeps, re-checks $rechecks (disagreeing $dis), disturbed $disturbed, deferred $deferred"
echo "refused sessions: $refused ($busy busy) over $pairs pairs = $(awk -v r="$refused" -v p="$pairs" 'BEGIN{printf "%.3f", r/p}') per pair"
# A mesh not complete in time is reported; the other checks still run.
MISSED=
[ "$have" -ge "$want" ] || MISSED="mesh incomplete after ${mesh_s} s ($have / $want)"
[ "$refused" -le "$pairs" ] || fail "more than one refused session per pair"

# --- quiet ---
q=2; qn=$(cluster_name $q)
ngctl quiet --shm "$(seg $q)" --name rig --for 10m
sleep $(( ROUND_S + 1 ))
tx0=$(ip netns exec "$qn" cat /sys/class/net/eth0/statistics/tx_bytes)
cpu_of() { # total utime+stime ticks of every thread of pid $1
    local s=0 t
    for t in /proc/"$1"/task/*/stat; do
        s=$(( s + $(awk '{print $14 + $15}' "$t" 2>/dev/null || echo 0) ))
    done
    echo "$s"
}
c0=$(cpu_of "${PID[$q]}")
pb0=$(stat_of $q .schedule.stats.bytes)
fails0=$(stat_of 1 '.peers | map(select(.name == "'"$qn"'") | .failures) | add')
sleep "$QUIET_S"
tx1=$(ip netns exec "$qn" cat /sys/class/net/eth0/statistics/tx_bytes)
c1=$(cpu_of "${PID[$q]}")
pb1=$(stat_of $q .schedule.stats.bytes)
fails1=$(stat_of 1 '.peers | map(select(.name == "'"$qn"'") | .failures) | add')
probe_tx=$(( tx1 - tx0 ))
hz=$(getconf CLK_TCK)
cpu_pct=$(awk -v c=$(( c1 - c0 )) -v hz="$hz" -v s="$QUIET_S" 'BEGIN{printf "%.2f", 100*c/hz/s}')
pq=$(stat_of 1 .schedule.stats.partner_quiet)
echo "quiet: $qn settled $(( pb1 - pb0 )) probe payload bytes and sent $probe_tx B in all on eth0 in ${QUIET_S} s (control answers), its threads used ${cpu_pct} % of a core; peers met its quiet declines ($pq at $(cluster_name 1)), failures counted against it at $(cluster_name 1): $fails0 -> $fails1"
[ "$pb1" = "$pb0" ] || fail "quiet node probed: $(( pb1 - pb0 )) B"
[ "$probe_tx" -le "$QUIET_CTRL_BYTES" ] || fail "quiet node sent $probe_tx B"
awk -v p="$cpu_pct" 'BEGIN{exit !(p < 5)}' || fail "quiet node busy: ${cpu_pct} % CPU"
[ "$fails1" = "$fails0" ] || fail "peers counted failures against the quiet node"
# With a cap on concurrent mesh sessions a node meets a partner in one
# mesh round of every PARTS (up to 2·PARTS − 1 rounds apart): "within one
# round" means its next meeting, so the bounds below scale with PARTS.
if [ "$MESH_PAIRS" -gt 0 ]; then PARTS=$(( (N / 2 + N % 2 + MESH_PAIRS - 1) / MESH_PAIRS )); else PARTS=1; fi
d0=$(( $(stat_of $q .schedule.stats.drives) + $(stat_of $q .schedule.stats.serves) ))
ngctl resume --shm "$(seg $q)" --name rig
tr=$(date +%s)
while :; do
    sleep 1
    d1=$(( $(stat_of $q .schedule.stats.drives) + $(stat_of $q .schedule.stats.serves) ))
    [ "$d1" -gt "$d0" ] && break
    [ $(( $(date +%s) - tr )) -gt $(( ROUND_S * (2 * PARTS + 2) )) ] && fail "no session within $(( 2 * PARTS + 2 )) rounds of resume"
done
echo "resume: first session $(( $(date +%s) - tr )) s after ngctl resume (round ${ROUND_S} s, a meeting every $PARTS mesh rounds)"

# --- kill -9 and restart ---
k=3; kn=$(cluster_name $k)
kill -9 "${PID[$k]}"
sleep $(( ROUND_S * 3 ))
alive=0
for i in $(seq 1 "$N"); do [ "$i" = "$k" ] && continue; kill -0 "${PID[$i]}" && alive=$(( alive + 1 )); done
down=0
for i in $(seq 1 "$N"); do [ "$i" = "$k" ] && continue; down=$(( down + $(stat_of "$i" .schedule.stats.unreachable) )); done
echo "kill -9 $kn: $alive of $(( N - 1 )) other daemons alive, $down unreachable partners met (backing off)"
[ "$alive" -eq $(( N - 1 )) ] || fail "a daemon died"
start "$k"
tk=$(date +%s)
# Picked up again: the restarted node takes part in sessions (driven or
# served) with its partners of the schedule.
while :; do
    sleep 2
    [ $(( $(stat_of "$k" .schedule.stats.drives) + $(stat_of "$k" .schedule.stats.serves) )) -ge 2 ] && break
    [ $(( $(date +%s) - tk )) -gt $(( ROUND_S * 20 * PARTS )) ] && fail "$kn in no session within $(( 20 * PARTS )) rounds of its restart"
done
echo "restart: $kn in its second session $(( $(date +%s) - tk )) s after its restart (drives $(stat_of "$k" .schedule.stats.drives), serves $(stat_of "$k" .schedule.stats.serves))"

# --- o(P) from a fan-out round ---
if [ -n "$FANOUT_S" ]; then
    for i in $(seq 1 "$N"); do kill "${PID[$i]}"; done
    wait "${PID[@]}" 2>/dev/null || true
    TRANSPORTS='["raw", "udp"]'; IFACE='interface = "eth0"'; FANOUT_CFG=$FANOUT_S; ROUND_S=$FANOUT_ROUND_S
    for i in $(seq 1 "$N"); do config "$i"; start "$i"; done
    tf=$(date +%s)
    for t in udp raw; do
        while :; do
            c=$(for i in $(seq 1 "$N"); do
                ngctl dump --json --shm "$(seg "$i")" 2>/dev/null |
                    jq -c --arg t "$t" '[.entries[] | select(.transport == $t and .logfp != null) | .logfp + {not_identified: [.not_identified[] | select(.parameter | startswith("logfp.")) | "\(.parameter | ltrimstr("logfp.")) \(.reason)"]}] | max_by(.curve | length) // empty' 2>/dev/null
            done | jq -s -c 'max_by(.curve | length) // empty')
            if [ -n "$c" ] && [ "$(jq '.curve | length' <<<"$c")" -ge $(( N - 1 )) ]; then break; fi
            [ $(( $(date +%s) - tf )) -gt "$FANOUT_LIMIT_S" ] && { echo "o(P) over $t: no curve over $(( N - 1 )) peers (longest: ${c:-none})"; c=; break; }
            sleep 5
        done
        [ -n "$c" ] && jq -r --arg t "$t" '"o(P) over \($t), P = 1…\(.curve | length): f \(.f // "not identified"), o_min \(.o_min_ns | floor) ns, o_max \(.o_max_ns | floor) ns; not identified: \(.not_identified | join(", ") | if . == "" then "none" else . end)\n" + ([.curve[] | "  P \(.peers): o \(.o_ns | floor) ns, RTT \(.rtt_ns | floor) ns"] | join("\n"))' <<<"$c"
    done
fi
[ -z "$MISSED" ] || fail "$MISSED"
echo "PASS"
