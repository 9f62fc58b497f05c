#!/usr/bin/env bash
# A/B of two ngctl builds' udp probes between two namespaces through a
# tbf shaper, the builds alternated ROUNDS times (bench/verbs.md, session 12).
# Usage (root): bench/burst_cap_ab.sh OLD_NGCTL NEW_NGCTL OUT_DIR RATE BURST MAX_SIZE [ROUNDS]
#   RATE none: no shaper; LOAD=1 adds two busy loops (a loaded host).
set -euo pipefail
OLD=$1 NEW=$2 OUT=$3 RATE=$4 BURST=$5 MAX=$6 ROUNDS=${7:-3}
mkdir -p $OUT
A=ngbc$$a B=ngbc$$b
cleanup() { kill ${SP:-} ${L1:-} ${L2:-} 2>/dev/null || true; ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; }
trap cleanup EXIT
ip netns add $A; ip netns add $B
ip link add ${A}v type veth peer name ${B}v
ip link set ${A}v netns $A name eth0; ip link set ${B}v netns $B name eth0
i=1; for n in $A $B; do ip -n $n link set lo up; ip -n $n addr add 10.79.0.$i/24 dev eth0; ip -n $n link set eth0 mtu 9000 up
  [ "$RATE" != none ] && ip netns exec $n tc qdisc add dev eth0 root tbf rate $RATE burst $BURST latency 400ms; i=$((i+1)); done
if [ "${LOAD:-0}" = 1 ]; then (while :; do :; done) & L1=$!; (while :; do :; done) & L2=$!; fi
for r in $(seq $ROUNDS); do for v in old new; do
  bin=$OLD; [ $v = new ] && bin=$NEW
  ip netns exec $B $bin serve --transport udp --listen 10.79.0.2:7600 --idle-exit-s 5 2>$OUT/$v.$r.serve.log & SP=$!
  sleep 0.5
  ip netns exec $A timeout 300 $bin probe --transport udp --peer 10.79.0.2:7600 --max-size $MAX --json --raw >$OUT/$v.$r.json 2>$OUT/$v.$r.err || echo "probe $v $r failed"
  kill $SP 2>/dev/null; wait $SP 2>/dev/null || true; SP=
done; done
python3 - $OUT $ROUNDS <<'EOP'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for v in ("old", "new"):
    for r in range(1, rounds + 1):
        try: d = json.load(open(f"{out}/{v}.{r}.json"))
        except Exception as e: print(v, r, "no result", e); continue
        b = d["raw"].get("bursts") or {}
        L = [x["n"] for x in b.get("lengths", [])]
        bw = d.get("bandwidth") or {}
        s = (bw.get("sustained") or {})
        print(f"{v} {r}: {d['elapsed_ns']/1e9:6.2f} s {d['probe_messages']:8d} msgs {d['probe_bytes']/1e6:7.1f} MB  bursts to n={L[-1] if L else None} ({len(L)} lengths)  sustained G {s.get('G_ns_per_byte')}  verdict {bw.get('verdict', bw.get('status'))} G {d['G_ns_per_byte']:.3f}")
EOP
