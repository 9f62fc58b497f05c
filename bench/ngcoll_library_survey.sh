#!/usr/bin/env bash
# Every algorithm of Open MPI's tuned component, forced, against its fixed
# decision, with bench/ngcoll_bench.c --cvar: the best any Open MPI rules
# file could do on this machine (a file chooses per communicator size and
# message size among exactly these algorithms and segment sizes). Each
# variant's MPI_X side runs on a communicator duplicated after its MPI_T
# control variables are written; PMPI_X on MPI_COMM_WORLD, the fixed
# decision; the two interleaved in one process, so the ratio carries no
# drift between runs. Every variant runs PASSES times (default 2: one pass
# to choose, one to check the choice); bench/ngcoll_library_ceiling.py reads
# the directory.
# Usage: bench/ngcoll_library_survey.sh OUT_DIR   (P=4, PASSES=2,
#        COLLS="bcast reduce allreduce allgather alltoall barrier",
#        BENCH_ARGS="--reps 5")
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/ngcoll_library_survey.sh OUT_DIR}
P=${P:-4}; PASSES=${PASSES:-2}
COLLS=${COLLS:-"bcast reduce allreduce allgather alltoall barrier"}
BENCH_ARGS=${BENCH_ARGS:-"--reps 5"}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpicc.openmpi -O2 bench/ngcoll_bench.c -o "$OUT/bench" -ldl -lm
source bench/idle.sh

# Algorithm numbers of Open MPI 4.1 (ompi_info --param coll tuned --level 9),
# without two_proc (two ranks only). Segment sizes only where the algorithm
# segments.
SEGS="0 1024 8192 65536"
variants() { # coll -> "alg:seg" ...
    case $1 in
    bcast) echo 1:0; for a in 2 3 4 5 6 7; do for s in $SEGS; do echo "$a:$s"; done; done; echo 8:0; echo 9:0 ;;
    reduce) echo 1:0; for a in 2 3 4 5 6; do for s in $SEGS; do echo "$a:$s"; done; done; echo 7:0 ;;
    allreduce) for a in 1 2 3 4 6; do echo "$a:0"; done; for s in $SEGS; do echo "5:$s"; done ;;
    allgather) for a in 1 2 3 4 5; do echo "$a:0"; done ;;
    alltoall) for a in 1 2 3 4; do echo "$a:0"; done ;;
    barrier) for a in 1 2 3 4 6; do echo "$a:0"; done ;;
    esac
}

for pass in $(seq "$PASSES"); do
    for coll in $COLLS; do
        for v in $(variants "$coll"); do
            alg=${v%%:*}; seg=${v##*:}
            f="$OUT/$P-$coll-$alg-$seg-$pass.txt"
            [ -s "$f" ] && continue
            until [ "$(idle_pct)" -ge 85 ]; do :; done
            args=(--cvar "coll_tuned_${coll}_algorithm=$alg")
            [ "$coll" = barrier ] || args+=(--cvar "coll_tuned_${coll}_algorithm_segmentsize=$seg")
            # shellcheck disable=SC2086
            flock /tmp/measure.lock timeout 900 mpirun.openmpi --oversubscribe -np "$P" \
                --mca coll_tuned_use_dynamic_rules 1 "$OUT/bench" --colls "$coll" $BENCH_ARGS \
                "${args[@]}" > "$f.part" && mv "$f.part" "$f"
            echo "$P ranks pass $pass $coll $alg seg $seg done"
        done
    done
done
