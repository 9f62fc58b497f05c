#!/bin/bash
# Repeats the points of ours worse than 1.25x in OUT/MPI-P-preload.txt (a
# bench/ngcoll_run.sh output directory):
# each (collective, size) alone once more (Open MPI 5 repetitions, MPICH 3),
# same segment and library, under /tmp/measure.lock, into
# OUT/repeat-MPI-P.txt (the load average before each).
# Usage: bench/ngcoll_repeat.sh OUT_DIR RANKS [openmpi|mpich]
OUT=$(realpath "${1:?usage: bench/ngcoll_repeat.sh OUT_DIR RANKS [openmpi|mpich]}"); P=${2:?ranks}; MPI=${3:-openmpi}
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 - "$OUT" "$P" "$MPI" > $OUT/repeat-$MPI-$P.list <<'PY'
import sys, importlib.util
spec = importlib.util.spec_from_file_location("s", "bench/ngcoll_summary.py"); s = importlib.util.module_from_spec(spec); spec.loader.exec_module(s)
out, p, mpi = sys.argv[1], sys.argv[2], sys.argv[3]
pts = s.points("%s/%s-%s-preload.txt" % (out, mpi, p))
ch = s.choices("%s/%s-%s-preload.log" % (out, mpi, p))
seen = set()
for (c, m, b), (o, l) in sorted(pts.items()):
    if l > 0 and o / l > 1.25 and s.chosen_ours(ch, c, b) and (c, b) not in seen:
        seen.add((c, b)); print(c, b)
PY
if [ "$MPI" = openmpi ]; then launch=(mpirun.openmpi --oversubscribe -np $P); lib=target/release/libngcoll_ompi.so; args="--reps 5"
else launch=(mpirun.mpich -np $P); lib=target/release/libngcoll_mpich.so; args="--reps 3 --target-ms 50 --sync-calls 7"; fi
: > $OUT/repeat-$MPI-$P.txt
while read c b; do
  flock /tmp/measure.lock bash -c 'echo "# load $(cut -d" " -f1-3 /proc/loadavg)"; "$@"' _ env NETGAUGE_SHM=$OUT/seg-$P NETGAUGE_COLL_STALE_S=0 LD_PRELOAD=$(realpath $lib) "${launch[@]}" $OUT/bench_$MPI --colls $c --min $b --max $b --block-max $b $args < /dev/null >> $OUT/repeat-$MPI-$P.txt 2>/dev/null
done < $OUT/repeat-$MPI-$P.list
