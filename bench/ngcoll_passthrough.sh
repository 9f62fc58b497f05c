#!/usr/bin/env bash
# What interposing costs where the library's own runs: configurations of
# libngcoll run alternately (a, b, c, a, b, c, …) with bench/ngcoll_bench.c
# under Open MPI, 4 ranks, each run summarized by bench/ngcoll_bias.py
# (MPI_X / PMPI_X over the bench's points: 1 where interposing costs
# nothing).
# Usage: bench/ngcoll_passthrough.sh OUT_DIR REPS NAME=LIB[:VAR=VALUE…] …
#   e.g. off=target/release/libngcoll_ompi.so:NETGAUGE_COLL=off
#        lib=target/release/libngcoll_ompi.so:NETGAUGE_COLL_FORCE=library
#   (NETGAUGE_COLL_FORCE=library expands to every collective forced to the
#   library's own; LIB "none" runs without a preload.)
# The segment: OUT_DIR/seg-4, probed once (ngctl built with --features mpi).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "$1" && readlink -f "$1")
REPS=${2:?usage: bench/ngcoll_passthrough.sh OUT_DIR REPS NAME=LIB[:VAR=VALUE…] …}
shift 2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="${CARGO_TARGET_DIR:-target}/release"
ALL=bcast=library,reduce=library,allreduce=library,allgather=library,alltoall=library,barrier=library
source bench/idle.sh
mpicc.openmpi -O2 bench/ngcoll_bench.c -o "$OUT/bench_openmpi" -ldl -lm
[ -s "$OUT/seg-4" ] || mpirun.openmpi --oversubscribe -np 4 "$T/ngctl" probe --transport mpi \
    --max-size 4194304 --min-reps 20 --resamples 0 --publish --shm "$OUT/seg-4" > /dev/null
for r in $(seq "$REPS"); do
    for cfg in "$@"; do
        name=${cfg%%=*} rest=${cfg#*=}
        lib=${rest%%:*} vars=()
        [ "$rest" != "$lib" ] && IFS=: read -ra vars <<< "${rest#*:}"
        vars=("${vars[@]/#NETGAUGE_COLL_FORCE=library/NETGAUGE_COLL_FORCE=$ALL}")
        [ "$lib" = none ] || vars+=("LD_PRELOAD=$(readlink -f "$lib")")
        t0=$SECONDS
        until [ "$(idle_pct)" -ge 85 ] || [ $((SECONDS - t0)) -gt 60 ]; do :; done
        env "${vars[@]}" NETGAUGE_SHM="$OUT/seg-4" NETGAUGE_COLL_STALE_S=0 \
            mpirun.openmpi --oversubscribe -np 4 "$OUT/bench_openmpi" > "$OUT/$name-$r.txt" 2> "$OUT/$name-$r.log"
        echo "$name-$r $(python3 bench/ngcoll_bias.py "$OUT/$name-$r.txt" | grep ' all:' | cut -d' ' -f2-)"
    done
done | tee "$OUT/summary.txt"
