#!/usr/bin/env bash
# Two configurations of libngcoll side by side: Open MPI preloaded, runs of
# the two alternated (a, b, a, b, …) on one segment per rank count, each
# run as in bench/ngcoll_run.sh (EXPORT=0), then the table of
# bench/ngcoll.md.
# Usage: bench/ngcoll_ab.sh OUT_DIR RUNS A_DIR B_DIR   RANKS_LIST="4 8"
# A_DIR and B_DIR each hold release/libngcoll_ompi.so and release/ngctl
# (the two builds' target directories, or copies of them; the same one
# twice to compare settings). A_NAME/B_NAME name the runs' directories
# (default a, b); A_ENV/B_ENV are VAR=VALUE words for that side's runs.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && readlink -f "$1")
RUNS=${2:?usage: bench/ngcoll_ab.sh OUT_DIR RUNS A_DIR B_DIR}
A=$(readlink -f "${3:?A_DIR}")
B=$(readlink -f "${4:?B_DIR}")
A_NAME=${A_NAME:-a} B_NAME=${B_NAME:-b}
for P in ${RANKS_LIST:-4 8}; do
    for r in $(seq "$RUNS"); do
        for side in A B; do
            dir=$A name=$A_NAME vars=${A_ENV:-}
            [ $side = B ] && dir=$B name=$B_NAME vars=${B_ENV:-}
            d="$OUT/nb$P-$name-$r"; mkdir -p "$d"
            [ -s "$OUT/seg-$P" ] && cp "$OUT/seg-$P" "$d/seg-$P"
            # shellcheck disable=SC2086
            env $vars CARGO_TARGET_DIR="$dir" IDLE_WAIT_S=30 MPIS=openmpi RANKS=$P EXPORT=0 \
                bash bench/ngcoll_run.sh "$d" > "$d.out" 2>&1
            cp "$d.out" "$d/summary.out"
            [ -s "$OUT/seg-$P" ] || cp "$d/seg-$P" "$OUT/seg-$P"
        done
    done
done
python3 bench/ngcoll_trial_table.py "$OUT" "$A_NAME" "$B_NAME"
