#!/usr/bin/env bash
# Effective bisection bandwidth on the contention rig (tests/contention/rig.sh),
# measured by the daemons: one netgauged per namespace host (every other
# host a peer, its pair sweeps first, no conflict probe: then the stream orders of
# `ngctl ebb`), `ngctl ebb` run from host 1, then every flow compared with
# the truth the rig implies.
#
# Truth: a host's link carries RATE each way; on the two-bridge rig the c
# pairs of a round that cross the core share its CORE each way, so each of
# their flows gets min(RATE, CORE / c), the others RATE. Payload rate: tbf
# counts whole Ethernet frames; a 64 KiB UDP datagram leaves as 45 IP
# fragments of at most 1514 B on the wire, 67 074 B for 65 536 B of payload.
#
# Needs root. Usage:
#   bench/contention_ebb.sh OUT.json two N RATE_MBIT CORE_MBIT [ROUNDS] [WINDOW_S]
#   bench/contention_ebb.sh OUT.json star N RATE_MBIT|none [ROUNDS] [WINDOW_S]
# NGCTL / NETGAUGED: the binaries (default: target/release). PREFIX, SUBNET:
# the rig's names and addresses (default h11e, 10.112.0).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$1 KIND=$2 N=$3 RATE=$4
if [ "$KIND" = two ]; then CORE=$5; shift 5; else CORE=none; shift 4; fi
ROUNDS=${1:-5} WINDOW=${2:-3}
NGCTL=$(readlink -f "${NGCTL:-target/release/ngctl}")
NETGAUGED=$(readlink -f "${NETGAUGED:-target/release/netgauged}")
export PREFIX=${PREFIX:-h11e} SUBNET=${SUBNET:-10.112.0}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, tc)" >&2; exit 1; }
tc_rate() { [ "$1" = none ] && echo none || echo "${1}mbit"; }

DIR=$(mktemp -d /tmp/h11ebb.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    tests/contention/rig.sh down || true
    mkdir -p "$OUT.logs" && cp "$DIR"/*.log "$OUT.logs/" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

if [ "$KIND" = two ]; then
    tests/contention/rig.sh up two "$N" "$(tc_rate "$RATE")" "$(tc_rate "$CORE")"
else
    tests/contention/rig.sh up star "$N" "$(tc_rate "$RATE")"
fi
head -c 48 /dev/urandom | base64 > "$DIR/key"
chmod 600 "$DIR/key"
for i in $(seq 1 "$N"); do
    {
        echo "node = \"h$i\""
        echo "listen = \"$SUBNET.$i:7470\""
        echo "udp_port = 7471"
        echo "shm = \"$DIR/seg$i\""
        echo "key_file = \"$DIR/key\""
        echo "state_file = \"$DIR/state$i.json\""
        echo "lock_memory = false"
        echo "budget_bytes_per_s = 100000000"
        # The conflict probe rides on fan-out rounds, which are part of the
        # schedule every node derives: the same on all of them.
        echo "fanout_interval_s = $([ -n "${CONFLICT:-}" ] && echo 20 || echo 0)"
        echo "recheck_interval_s = 86400"
        echo "max_reps = 3"
        echo "max_size_bytes = 65536"
        echo "[contention]"
        echo "interval_s = 0"
        for j in $(seq 1 "$N"); do
            [ "$j" = "$i" ] && continue
            echo "[[peer]]"
            echo "name = \"h$j\""
            echo "address = \"$SUBNET.$j:7470\""
            echo "transports = [\"udp\"]"
        done
    } > "$DIR/h$i.toml"
    RUST_LOG=${RUST_LOG:-info} ip netns exec "${PREFIX}h$i" "$NETGAUGED" --config "$DIR/h$i.toml" \
        > "$DIR/h$i.log" 2>&1 &
    PIDS+=($!)
done
# Each daemon sweeps its peers once at start (small and quick here): the
# rounds come after, so no pair probe shares the links with the streams.
for t in $(seq 1 900); do
    done_n=$(cat "$DIR"/h*.log | grep -c ' over udp (.*sweep).*EEL' || true)
    [ "$done_n" -ge $((N * (N - 1))) ] && break
    sleep 1
done
echo "pair sweeps done: $done_n of $((N * (N - 1)))" >&2
ip netns exec "${PREFIX}h1" "$NGCTL" ebb --config "$DIR/h1.toml" --rounds "$ROUNDS" \
    --window-s "$WINDOW" --publish --json > "$OUT"
ip netns exec "${PREFIX}h1" "$NGCTL" dump --shm "$DIR/seg1" | sed -n '/bisection/,+1p' >&2

# CONFLICT=1: then host 1's daemon again, now with a conflict probe due one
# second after start (its peers are known from its state file): it runs in
# host 1's next fan-out round, each peer consents through its admission,
# and the penalties land in its segment.
if [ -n "${CONFLICT:-}" ]; then
    kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true
    sed -i 's/^interval_s = 0$/interval_s = 1\nmax_k = 5\nrounds = '"${CONFLICT_ROUNDS:-8}"'\nburst = 16/' "$DIR/h1.toml"
    RUST_LOG=${RUST_LOG:-info} ip netns exec "${PREFIX}h1" "$NETGAUGED" --config "$DIR/h1.toml" \
        > "$DIR/h1b.log" 2>&1 &
    PIDS[0]=$!
    for t in $(seq 1 600); do
        grep -q 'conflict probe over' "$DIR/h1b.log" && break
        sleep 1
    done
    grep 'conflict probe' "$DIR/h1b.log" >&2 || true
    ip netns exec "${PREFIX}h1" "$NGCTL" dump --shm "$DIR/seg1" > "$OUT.dump.txt"
    ip netns exec "${PREFIX}h1" "$NGCTL" dump --json --shm "$DIR/seg1" > "$OUT.dump.json"
    grep -c 'flow session' "$DIR"/h[2-9].log >&2 || true
fi

python3 - "$OUT" "$KIND" "$N" "$RATE" "$CORE" <<'EOF'
import json, sys
out, kind, n, rate, core = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
r = json.load(open(out))
payload = 65536 / 67074
side = lambda h: 0 if kind != "two" or int(h[1:]) <= n // 2 else 1
def mb(x): return "%7.2f" % (x / 1e6) if x is not None else "      -"
meas, truth = [], []
print("round  crossing  flows  measured MB/s (min/mean/max)   truth MB/s (mean)  mean/truth")
for i, rd in enumerate(r["rounds"]):
    # The core is shared by the crossing pairs that streamed (a pair whose
    # order failed put nothing on it).
    streamed = lambda p: p["a_to_b_bytes_per_s"] is not None
    c = sum(1 for p in rd["pairs"] if side(p["a"]) != side(p["b"]) and streamed(p))
    m, t = [], []
    for p in rd["pairs"]:
        if rate == "none":
            want = None
        else:
            want = float(rate) * 1e6 / 8 * payload
            if kind == "two" and side(p["a"]) != side(p["b"]) and core != "none":
                want = min(want, float(core) * 1e6 / 8 * payload / c)
        for x in (p["a_to_b_bytes_per_s"], p["b_to_a_bytes_per_s"]):
            if x is not None:
                m.append(x)
                t.append(want)
    meas += m; truth += t
    tm = sum(t) / len(t) if t and None not in t else None
    mm = sum(m) / len(m) if m else None
    print("%5d  %8d  %5d  %s %s %s   %s   %s" % (i + 1, c, len(m), mb(min(m) if m else None), mb(mm),
          mb(max(m) if m else None), mb(tm), "%.3f" % (mm / tm) if mm and tm else "-"))
if meas:
    mm = sum(meas) / len(meas)
    if truth and None not in truth:
        tm = sum(truth) / len(truth)
        worst = max(abs(a / b - 1) for a, b in zip(meas, truth))
        print("overall: measured mean %.2f MB/s, truth %.2f MB/s, ratio %.3f; worst flow off by %.1f %%" % (mm / 1e6, tm / 1e6, mm / tm, 100 * worst))
    else:
        print("overall: measured mean %.2f MB/s (unshaped: no truth but the hosts' own limit)" % (mm / 1e6))
    lo, hi = min(meas), max(meas)
    print("spread: min/max %.3f" % (lo / hi))
errs = [p["error"] for rd in r["rounds"] for p in rd["pairs"] if p["error"]]
print("errors: %d %s" % (len(errs), errs[:3]))
EOF
