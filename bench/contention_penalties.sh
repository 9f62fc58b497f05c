#!/usr/bin/env bash
# Bandwidth-sharing penalties on the contention rig (tests/contention/rig.sh
# up star N RATE): `ngctl serve` in hosts 2..N, `ngctl contention` from host
# 1 with k = 1 .. N-1 flows out, in and both. The shaper's truth: k flows
# out of (or into) host 1 share its rate, penalty k; mixed k (k flows each
# way): the two directions are shaped apart, penalty k.
#
# Needs root. Usage: bench/contention_penalties.sh OUT.json [N] [RATE] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$1 N=${2:-6} RATE=${3:-100mbit} ROUNDS=${4:-10}
NGCTL=$(readlink -f "${NGCTL:-target/release/ngctl}")
export PREFIX=${PREFIX:-h11p} SUBNET=${SUBNET:-10.113.0}
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, tc)" >&2; exit 1; }
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    tests/contention/rig.sh down || true
}
trap cleanup EXIT
tests/contention/rig.sh up star "$N" "$RATE"
PEERS=
for i in $(seq 2 "$N"); do
    ip netns exec "${PREFIX}h$i" "$NGCTL" serve --transport udp --listen "$SUBNET.$i:7471" \
        --idle-exit-s 60 > /dev/null 2>&1 &
    PIDS+=($!)
    PEERS="${PEERS:+$PEERS,}$SUBNET.$i:7471"
done
sleep 0.5
ip netns exec "${PREFIX}h1" "$NGCTL" contention --transport udp --peer "$PEERS" \
    --size 65536 --burst 16 --rounds "$ROUNDS" --max-k $((N - 1)) --json > "$OUT"
python3 - "$OUT" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))["fit"]
print("scheme     k   penalty [95 %]          truth  off")
for name in ("outgoing", "incoming", "mixed"):
    for p in f[name]:
        e = p["penalty"]
        k = p["k"]
        if e["value"] is None:
            continue
        inside = e["lo"] is not None and e["lo"] <= k <= e["hi"]
        print("%-9s %2d   %.3f [%.3f, %.3f]   %5.1f  %+5.1f %%%s" % (
            name, k, e["value"], e["lo"] or float("nan"), e["hi"] or float("nan"), k,
            100 * (e["value"] / k - 1), "" if inside else "  (interval misses the truth)"))
b = f["beta"]
print("beta %.3f [%.3f, %.3f]" % (b["value"], b["lo"], b["hi"]))
PY
