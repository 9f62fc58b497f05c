#!/usr/bin/env bash
# The published large-message bandwidth behind shapers: for each cell (a
# qdisc on both ends of a veth pair, MTU 9000, between two network
# namespaces), ROUNDS sweeps of each transport with the default settings
# (`ngctl probe --json`, nothing but the peer given), one JSON line per
# sweep in OUT_DIR/<cell>.jsonl. Then a table per cell: runs whose
# sustained G is within 10 % of the shaper's rate, whose interval holds the
# rate, which regime was recognised, the sweep's time and bytes.
#
# Needs root. Usage: bench/shaper_matrix.sh OUT_DIR [ROUNDS] [CELL…]
#   CELL: name=qdisc-args, e.g. tbf100m16k="tbf rate 100mbit burst 16kb
#   latency 400ms"; none: no qdisc; loopback: udp over 127.0.0.1 within one
#   namespace. Without cells, the default matrix (below).
#   TRANSPORTS="udp raw" (default both); NGCTL=path overrides the binary;
#   TABLE_ONLY=1 prints the table of OUT_DIR without measuring.
#   NS_PREFIX (default h7m) names the namespaces. Each sweep's whole
#   `--json` output is kept as OUT_DIR/<cell>/<transport>-<run>.json.
# Run each chunk under `flock /tmp/netns.lock flock /tmp/measure.lock` (that
# order, as the other rigs take them) so others measure between chunks.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && readlink -f "$1")
ROUNDS=${2:-20}
shift $(($# >= 2 ? 2 : $#))
TRANSPORTS=${TRANSPORTS:-udp raw}
P=${NS_PREFIX:-h7m}
. bench/ngctl.sh

CELLS=("$@")
if [ ${#CELLS[@]} = 0 ]; then
    for r in 100 400 1000 2000; do
        for b in 16 256; do
            CELLS+=("tbf${r}m${b}k=tbf rate ${r}mbit burst ${b}kb latency 400ms")
        done
    done
    # htb with a 32 KiB burst: tc's default here (1375 B at 1 Gbit/s,
    # 1537 B at 300 Mbit/s, `tc -d class show`) is below one 9014 B frame,
    # and such a class is paced by the host's timer latency, not its rate
    # (bench/shaper.md).
    CELLS+=("htb300m32k=htb rate 300mbit burst 32k cburst 32k"
        "htb1000m32k=htb rate 1000mbit burst 32k cburst 32k")
fi

A=${P}a B=${P}b
cleanup() {
    for p in ${SERVERS:-}; do kill "$p" 2>/dev/null || true; done
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
}

# qdisc on eth0 of namespace $1: "tbf …" as is, "htb rate R" as one class
# with rate = ceil = R that takes all traffic.
shape() {
    local ns=$1
    shift
    case "$1" in
    htb)
        ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: htb default 10
        ip netns exec "$ns" tc class add dev eth0 parent 1: classid 1:10 htb "${@:2}" ceil "$3"
        ;;
    *) ip netns exec "$ns" tc qdisc add dev eth0 root "$@" ;;
    esac
}

measure_cell() { # name qdisc-args
    local name=$1 q=$2
    trap cleanup EXIT
    cleanup
    ip netns add $A
    ip netns add $B
    ip link add ${A}v type veth peer name ${B}v
    ip link set ${A}v netns $A name eth0
    ip link set ${B}v netns $B name eth0
    local i=1 n
    for n in $A $B; do
        ip -n $n link set lo up
        ip -n $n addr add 10.207.0.$i/24 dev eth0
        ip -n $n link set eth0 mtu 9000 up
        # shellcheck disable=SC2086
        [ "$q" = none ] || [ "$q" = loopback ] || shape $n $q
        i=$((i + 1))
    done
    local mac
    mac=$(ip -n $B link show eth0 | awk '/link\/ether/ {print $2}')
    # "loopback": udp over 127.0.0.1 inside one namespace, no veth.
    local probe_ns=$A udp_at=10.207.0.2:7471 transports=$TRANSPORTS
    if [ "$q" = loopback ]; then
        probe_ns=$B udp_at=127.0.0.1:7471 transports=udp
    fi
    SERVERS=""
    ip netns exec $B "$NGCTL" serve --transport udp --listen $udp_at 2>/dev/null &
    SERVERS="$SERVERS $!"
    ip netns exec $B "$NGCTL" serve --transport raw --interface eth0 2>/dev/null &
    SERVERS="$SERVERS $!"
    sleep 0.5
    local k t args
    for k in $(seq 1 "$ROUNDS"); do
        for t in $transports; do
            case $t in
            udp) args=(--transport udp --peer $udp_at) ;;
            raw) args=(--transport raw --interface eth0 --peer-mac "$mac") ;;
            esac
            local t0 t1 j
            t0=$(date +%s.%N)
            j=$(ip netns exec $probe_ns timeout 120 "$NGCTL" probe "${args[@]}" --json --raw 2>/dev/null |
                tr -d '\n') || j=""
            t1=$(date +%s.%N)
            # The whole probe with its raw samples (points and long-burst
            # rounds), for `ngctl fit`.
            mkdir -p "$OUT/$name"
            printf '%s\n' "$j" >"$OUT/$name/$t-$k.json"
            python3 -c 'import json,sys
j=open(sys.argv[4]).read().strip()
try: d=json.loads(j) if j else None
except ValueError: d=None
b=(d or {}).get("bandwidth") or {}
print(json.dumps({"cell":sys.argv[1],"transport":sys.argv[2],"run":int(sys.argv[3]),
 "wall_s":float(sys.argv[6])-float(sys.argv[5]),"ok":d is not None,"bandwidth":b,
 "probe_bytes":(d or {}).get("probe_bytes"),"elapsed_ns":(d or {}).get("elapsed_ns"),
 "first_range_G":(d or {}).get("G_ns_per_byte"),"stability":(d or {}).get("stability")}))' \
                "$name" "$t" "$k" "$OUT/$name/$t-$k.json" "$t0" "$t1" >>"$OUT/$name.jsonl"
        done
    done
    cleanup
    trap - EXIT
}

if [ -z "${TABLE_ONLY:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, tc)" >&2; exit 1; }
    for c in "${CELLS[@]}"; do
        measure_cell "${c%%=*}" "${c#*=}"
    done
fi

python3 - "$OUT" <<'PY'
import glob, json, re, sys
out = sys.argv[1]
# Payload ns/B at a shaper rate: a 9000 B MTU frame carries 8932 B of
# payload over udp (14 + 20 + 8 + 40 B of headers) and 8960 over raw
# (14 + 40); tbf and htb count the whole frame.
PAYLOAD = {"udp": (9014, 8932), "raw": (9014, 8960)}
def truth(cell, t):
    m = re.match(r"(tbf|htb)(\d+)m", cell)
    if not m:
        return None
    wire, pay = PAYLOAD[t]
    return 8e3 / float(m.group(2)) * wire / pay
print("| cell | transport | runs | entry | G within 10 % | interval holds rate | identified | regime (single/tb/credit) | median G ns/B (truth) | median sweep s | median MB |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for f in sorted(glob.glob(f"{out}/*.jsonl")):
    rows = [json.loads(l) for l in open(f) if l.strip()]
    cell = f.split("/")[-1][:-6]
    for t in ("udp", "raw"):
        rs = [r for r in rows if r["transport"] == t]
        if not rs:
            continue
        tr = truth(cell, t)
        ok = [r for r in rs if r["ok"] and r["bandwidth"]]
        gs = sorted(r["bandwidth"]["sustained"]["G_ns_per_byte"] for r in ok)
        within = holds = ident = 0
        regimes = {"single": 0, "token_bucket": 0, "credit": 0}
        for r in ok:
            s = r["bandwidth"]["sustained"]
            g, (lo, hi) = s["G_ns_per_byte"], s["ci95"]
            if tr and abs(g / tr - 1) <= 0.10:
                within += 1
            if tr and lo is not None and hi is not None and lo <= tr <= hi:
                holds += 1
            ident += s["status"] == "identified"
            regimes[r["bandwidth"]["regime"]] = regimes.get(r["bandwidth"]["regime"], 0) + 1
        entry = sum(1 for r in ok if r["wall_s"] <= 60)
        med = lambda xs: sorted(xs)[len(xs) // 2] if xs else float("nan")
        walls = [r["wall_s"] for r in rs]
        mb = [r["probe_bytes"] / 1e6 for r in ok if r["probe_bytes"]]
        g_med = med(gs)
        tt = f"{tr:.3f}" if tr else "—"
        w = f"{within}" if tr else "—"
        h = f"{holds}" if tr else "—"
        print(f"| {cell} | {t} | {len(rs)} | {entry} | {w} | {h} | {ident} | "
              f"{regimes['single']}/{regimes['token_bucket']}/{regimes['credit']} | "
              f"{g_med:.3f} ({tt}) | {med(walls):.1f} | {med(mb):.0f} |")
PY
