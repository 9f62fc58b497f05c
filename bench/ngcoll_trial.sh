#!/usr/bin/env bash
# libngcoll's trials on and off (NETGAUGE_COLL_TRIAL=4 and 0), Open MPI
# preloaded, runs alternated on one segment per rank count, then the table
# of bench/ngcoll.md ("Trials").
# Usage: bench/ngcoll_trial.sh OUT_DIR [RUNS]   RANKS_LIST="4 8"
# Binaries as for bench/ngcoll_run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && readlink -f "$1")
RUNS=${2:-3}
for P in ${RANKS_LIST:-4 8}; do
    for r in $(seq "$RUNS"); do
        for v in trial notrial; do
            d="$OUT/nb$P-$v-$r"; mkdir -p "$d"
            [ -s "$OUT/seg-$P" ] && cp "$OUT/seg-$P" "$d/seg-$P"
            calls=4; [ $v = notrial ] && calls=0
            NETGAUGE_COLL_TRIAL=$calls IDLE_WAIT_S=30 MPIS=openmpi RANKS=$P EXPORT=0 \
                bash bench/ngcoll_run.sh "$d" > "$d.out" 2>&1
            cp "$d.out" "$d/summary.out"
            [ -s "$OUT/seg-$P" ] || cp "$d/seg-$P" "$OUT/seg-$P"
        done
    done
done
python3 bench/ngcoll_trial_table.py "$OUT"
