#!/usr/bin/env bash
# LogGP's G through a token-bucket shaper: ROUNDS udp sweeps to 1 MiB
# between two network namespaces joined by a veth pair (MTU 9000), with
# `tc tbf rate 400mbit burst 16kb latency 400ms` on both ends, each saved
# with --raw in OUT_DIR. Prints, per sweep, the last range's G and the
# model's 1 MiB gap per byte against the wire rate (20 ns/B of payload,
# 20.18 ns/B with the headers of a 9000 B datagram), as fitted by NGCTL and,
# if OLD_NGCTL is set, re-fitted from the same raw samples by OLD_NGCTL.
#
# Needs root. Usage: bench/shaper.sh OUT_DIR [ROUNDS]
#   NGCTL=path / OLD_NGCTL=path override or add the binaries;
#   REFIT_ONLY=1 re-fits the sweeps already in OUT_DIR without measuring.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && readlink -f "$1")
ROUNDS=${2:-6}
. bench/ngctl.sh

if [ -z "${REFIT_ONLY:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, tc)" >&2; exit 1; }
    A=ngshp$$a B=ngshp$$b
    cleanup() {
        [ -n "${SP:-}" ] && kill "$SP" 2>/dev/null || true
        ip netns del $A 2>/dev/null || true
        ip netns del $B 2>/dev/null || true
    }
    trap cleanup EXIT
    ip netns add $A
    ip netns add $B
    ip link add ${A}v type veth peer name ${B}v
    ip link set ${A}v netns $A name eth0
    ip link set ${B}v netns $B name eth0
    i=1
    for n in $A $B; do
        ip -n $n link set lo up
        ip -n $n addr add 10.78.0.$i/24 dev eth0
        ip -n $n link set eth0 mtu 9000 up
        ip netns exec $n tc qdisc add dev eth0 root tbf rate 400mbit burst 16kb latency 400ms
        i=$((i + 1))
    done
    ip netns exec $B "$NGCTL" serve --transport udp --max-size 1048576 \
        --listen 10.78.0.2:9000 >"$OUT/serve.log" 2>&1 &
    SP=$!
    sleep 0.5
    for k in $(seq 1 "$ROUNDS"); do
        ip netns exec $A "$NGCTL" probe --transport udp --peer 10.78.0.2:9000 \
            --max-size 1048576 --json --raw >"$OUT/sweep$k.json" 2>"$OUT/sweep$k.err" ||
            echo "sweep $k failed: $(tail -1 "$OUT/sweep$k.err")" >&2
    done
fi

python3 - "$OUT" "$NGCTL" "${OLD_NGCTL:-}" <<'PY'
import glob, json, subprocess, sys
out, new, old = sys.argv[1], sys.argv[2], sys.argv[3]
wire = 20.0 * 9000 / 8918
def last_range(ngctl, f):
    r = subprocess.run([ngctl, "fit", "--json", f], capture_output=True, text=True)
    if r.returncode != 0:
        return None
    last = json.loads(r.stdout)["ranges"][-1]
    s = 1048576
    return last, (last["g_ns"] + (s - 1) * last["G_ns_per_byte"]) / s
bins = [("this", new)] + ([("old", old)] if old else [])
print(f"wire rate {wire:.3f} ns/B (20.000 of payload)")
head = " | ".join(f"{n}: last range, G, gap(1 MiB)/s" for n, _ in bins)
print(f"| sweep | {head} |")
print("|---|" + "---|" * len(bins))
worst = {n: 0.0 for n, _ in bins}
for f in sorted(glob.glob(f"{out}/sweep*.json"), key=lambda p: int(p.split("sweep")[-1][:-5])):
    cells = []
    for n, b in bins:
        got = last_range(b, f)
        if got is None:
            cells.append("fit failed")
            continue
        last, per_byte = got
        worst[n] = max(worst[n], abs(last["G_ns_per_byte"] / wire - 1))
        cells.append(f"{last['from_bytes']}.. B, {last['G_ns_per_byte']:.2f}, {per_byte:.2f}")
    print(f"| {f.split('/')[-1][:-5]} | " + " | ".join(cells) + " |")
print("largest |G/wire − 1|: " + ", ".join(f"{n} {100 * w:.1f} %" for n, w in worst.items()))
PY
