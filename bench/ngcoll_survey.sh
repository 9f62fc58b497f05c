#!/usr/bin/env bash
# Every algorithm of libngcoll, forced (NETGAUGE_COLL_FORCE), against the
# library's own, with bench/ngcoll_bench.c: where could any of ours win,
# and how far is the model from the measurement. One run per algorithm,
# each under /tmp/measure.lock once the machine is ≥ 85 % idle.
# Usage: bench/ngcoll_survey.sh OUT_DIR   (MPI=openmpi|mpich, P=4, SEG=segment
#        of bench/ngcoll_run.sh, BENCH_ARGS)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/ngcoll_survey.sh OUT_DIR}
MPI=${MPI:-openmpi}; P=${P:-4}; SEG=${SEG:?SEG=segment file}
BENCH_ARGS=${BENCH_ARGS:-"--reps 5"}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="$(realpath "${CARGO_TARGET_DIR:-target}/release")"
"mpicc.$MPI" -O2 bench/ngcoll_bench.c -o "$OUT/bench" -ldl -lm
if [ "$MPI" = openmpi ]; then
    lib="$T/libngcoll_ompi.so"; launch=(mpirun.openmpi --oversubscribe -np "$P")
else
    lib="$T/libngcoll_mpich.so"; launch=(mpirun.mpich -np "$P")
fi
idle() { local a b c d e f g h i1 b1
    read -r _ a b c d e f g h _ < /proc/stat; b1=$((a+b+c+f+g+h)); i1=$((d+e)); sleep 2
    read -r _ a b c d e f g h _ < /proc/stat
    echo $(( 100 * (d+e-i1) / (d+e-i1 + a+b+c+f+g+h-b1 + 1) )); }
for force in bcast=binomial bcast=scatter_rd_allgather bcast=scatter_ring_allgather \
    bcast=pipelined_chain:8192 bcast=pipelined_chain:65536 bcast=pipelined_chain:262144 \
    reduce=binomial reduce=rabenseifner \
    allreduce=recursive_doubling allreduce=rabenseifner allreduce=ring \
    allgather=ring allgather=recursive_doubling alltoall=pairwise alltoall=linear \
    barrier=dissemination barrier=tree; do
    coll=${force%%=*}; tag=${force//[=:]/-}
    [ -s "$OUT/$tag.txt" ] && continue
    until [ "$(idle)" -ge 85 ]; do :; done
    # shellcheck disable=SC2086
    flock /tmp/measure.lock env NETGAUGE_SHM="$SEG" NETGAUGE_COLL_STALE_S=0 NETGAUGE_COLL_FORCE="$force" \
        LD_PRELOAD="$lib" "${launch[@]}" "$OUT/bench" --colls "$coll" $BENCH_ARGS > "$OUT/$tag.txt"
    echo "$tag done"
done
