#!/bin/bash
# Times chosen (collective, size) points with two builds of libngcoll
# preloaded, alternated (A B A B …), each run alone under /tmp/measure.lock
# with the load average before it: what a model change did at the points it
# moved, on one segment. Each line of OUT/ab-P.txt is the bench's own
# ("point COLL METHOD BYTES OURS OWN N"), after a "# run A|B COLL BYTES load …"
# line.
# Usage: bench/ngcoll_ab.sh OUT_DIR RANKS LIB_A LIB_B "coll:bytes …" [ROUNDS]
#   OUT_DIR: a bench/ngcoll_run.sh output directory (its seg-P and bench_openmpi)
set -euo pipefail
OUT=$(realpath "${1:?usage: bench/ngcoll_ab.sh OUT_DIR RANKS LIB_A LIB_B POINTS [ROUNDS]}")
P=${2:?ranks}; A=$(realpath "${3:?lib A}"); B=$(realpath "${4:?lib B}"); PTS=${5:?points}; ROUNDS=${6:-2}
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for round in $(seq "$ROUNDS"); do
    for pt in $PTS; do
        c=${pt%%:*}; b=${pt##*:}
        for side in A B; do
            lib=$A; [ "$side" = B ] && lib=$B
            flock /tmp/measure.lock bash -c 'echo "# run $0 $1 $2 round $3 load $(cut -d" " -f1-3 /proc/loadavg)"; shift 4; "$@"' \
                "$side" "$c" "$b" "$round" env NETGAUGE_SHM="$OUT/seg-$P" NETGAUGE_COLL_STALE_S=0 LD_PRELOAD="$lib" \
                mpirun.openmpi --oversubscribe -np "$P" "$OUT/bench_openmpi" --colls "$c" --min "$b" --max "$b" \
                --block-max "$b" --reps 5 < /dev/null >> "$OUT/ab-$P.txt" 2>/dev/null
        done
    done
done
# Per point and side: ours / the library's own of every run, and their
# geometric mean.
python3 - "$OUT/ab-$P.txt" <<'PY' | tee "$OUT/ab-$P.md"
import math, sys
side, r = None, {}
for line in open(sys.argv[1]):
    f = line.split()
    if line.startswith("# run"):
        side = f[2]
    elif f and f[0] == "point" and float(f[5]) > 0:
        r.setdefault((f[1], int(f[3]), f[2]), {}).setdefault(side, []).append(float(f[4]) / float(f[5]))
gm = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print("| point | A: ours / own (runs) | A gm | B: ours / own (runs) | B gm |")
print("|---|---|---:|---|---:|")
for (c, b, m), s in sorted(r.items()):
    a, bb = s.get("A", []), s.get("B", [])
    fmt = lambda v: " ".join("%.2f" % x for x in v)
    print("| %s %s %d | %s | %s | %s | %s |" % (c, m, b, fmt(a), "%.2f" % gm(a) if a else "", fmt(bb), "%.2f" % gm(bb) if bb else ""))
PY
