#!/usr/bin/env bash
# libngcoll against the MPI library's own collectives, end to end, as
# bench/ngcoll.md reports it. For each MPI (Open MPI, MPICH) and rank count:
#   1. probe the MPI library in the job's placement and publish (ngctl is
#      built against Open MPI: its probe measures Open MPI's point to point);
#   2. preloaded: bench/ngcoll_bench.c with libngcoll preloaded times
#      MPI_X (ours) and PMPI_X (the library's own) interleaved;
#   3. exported rules (Open MPI rules file, MPICH JSON, exported with the
#      preloaded run's log as --trials): the same bench, MPI_X only, with
#      and without the export, runs in the order own, rules, rules, own;
#      for Open MPI also in one process (bench --rules: every rule of the
#      file forced on a communicator of its own, against the fixed
#      decision on MPI_COMM_WORLD, interleaved), free of the drift
#      between runs. The Open MPI file measured is the verified one: the
#      export's file run once so (<mpi>-P-verify.txt) and exported again
#      with that run as --trials, which drops the sizes whose rule lost;
#      the runs that measure it are new runs.
# Usage: bench/ngcoll_run.sh OUT_DIR
#   RANKS="4 8"  MPIS="openmpi mpich"  EXPORT=1  BENCH_ARGS="--reps 7"
#   MPICH_BENCH_ARGS (default "--reps 3 --target-ms 100 --sync-calls 11 --step 4":
#   MPICH's own waits spin when ranks outnumber cores, and its calls, the
#   harness's barriers included, take milliseconds: every 4th power of two)
# Binaries: cargo build --release -p ngcoll-openmpi -p ngcoll-mpich;
#           cargo build --release --features mpi --bin ngctl
# Waits (up to IDLE_WAIT_S, default 1800 s) for the machine to be ≥ IDLE_PCT
# (default 85) % idle before each measurement, then measures anyway, and
# holds /tmp/measure.lock while it measures; repeats a run the sampler saw
# disturbed (at most ATTEMPTS, default 3). The load average at the start
# and end of every run goes to OUT_DIR/loads.txt. Leaves the mpi/mpirun
# alternatives as it found them.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bench/ngcoll_run.sh OUT_DIR}
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
T="${CARGO_TARGET_DIR:-target}/release"
RANKS=${RANKS:-"4 8"}
MPIS=${MPIS:-"openmpi mpich"}
EXPORT=${EXPORT:-1}
BENCH_ARGS=${BENCH_ARGS:-}
MPICH_BENCH_ARGS=${MPICH_BENCH_ARGS:-"--reps 3 --target-ms 100 --sync-calls 11 --step 4"}
IDLE_PCT=${IDLE_PCT:-85}
IDLE_WAIT_S=${IDLE_WAIT_S:-1800}
ATTEMPTS=${ATTEMPTS:-3}
alt_before=$(update-alternatives --query mpi | grep '^Value:')

mpicc.openmpi -O2 bench/ngcoll_bench.c -o "$OUT/bench_openmpi" -ldl -lm
mpicc.mpich -O2 bench/ngcoll_bench.c -o "$OUT/bench_mpich" -ldl -lm

# idle_pct: the whole machine's idle share over 2 s.
source bench/idle.sh
wait_idle() {
    local t0=$SECONDS
    until [ "$(idle_pct)" -ge "$IDLE_PCT" ]; do
        [ $((SECONDS - t0)) -lt "$IDLE_WAIT_S" ] || { echo "machine busy for $IDLE_WAIT_S s; measuring anyway" >&2; return; }
    done
}
# Runs "$@" under the measure lock with a runnable-process sampler; repeats
# (at most ATTEMPTS) if the mean runnable count exceeded ranks + 1.5.
measured() {
    local ranks=$1 tag=$2; shift 2
    for attempt in $(seq "$ATTEMPTS"); do
        wait_idle
        ( while :; do awk '/^procs_running/ {print $2}' /proc/stat; sleep 0.1; done ) > "$OUT/$tag.runnable" &
        local sampler=$!
        flock /tmp/measure.lock bash -c 'echo "$(date -u +%T) start load $(cut -d" " -f1-3 /proc/loadavg)"; "$@"; rc=$?; echo "$(date -u +%T) end load $(cut -d" " -f1-3 /proc/loadavg)"; exit $rc' _ "$@" \
            > "$OUT/$tag.txt" 2> "$OUT/$tag.log"
        grep -hE "^[0-9:]+ (start|end) load" "$OUT/$tag.txt" | sed "s/^/$tag /" >> "$OUT/loads.txt"
        kill "$sampler"; wait "$sampler" 2>/dev/null || true
        local mean
        mean=$(awk '{ s += $1; n++ } END { printf "%.1f", (n ? s / n : 0) }' "$OUT/$tag.runnable")
        if awk -v r="$ranks" -v m="$mean" 'BEGIN { exit !(m <= r + 1.5) }'; then
            echo "$tag: attempt $attempt undisturbed (mean runnable $mean)"; rm -f "$OUT/$tag.DISTURBED"; return
        fi
        echo "$tag: attempt $attempt disturbed (mean runnable $mean)" | tee "$OUT/$tag.DISTURBED"
    done
}

for P in $RANKS; do
    SEG="$OUT/seg-$P"
    if [ ! -s "$SEG" ]; then
        wait_idle
        flock /tmp/measure.lock mpirun.openmpi --oversubscribe -np "$P" "$T/ngctl" probe --transport mpi \
            --max-size 4194304 --min-reps 20 --resamples 0 --publish --shm "$SEG" --json > "$OUT/probe-$P.json"
    fi
    # The model's export alone, for reference; the runs below use the one
    # that also reads the preloaded run's trials (--trials).
    "$T/ngctl" export --format ompi-rules --shm "$SEG" --comm-sizes "$P" --cores "$(nproc)" > "$OUT/rules-$P-model.txt"
    "$T/ngctl" export --format mpich-json --shm "$SEG" --comm-sizes "$P" --cores "$(nproc)" > "$OUT/mpich-$P-model.json"
    for mpi in $MPIS; do
        if [ "$mpi" = openmpi ]; then
            lib="$T/libngcoll_ompi.so"
            launch=(mpirun.openmpi --oversubscribe -np "$P")
            export_args=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename "$OUT/rules-$P.txt")
            export_env=()
        else
            lib="$T/libngcoll_mpich.so"
            launch=(mpirun.mpich -np "$P")
            export_args=()
            export_env=(MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE="$(realpath "$OUT/mpich-$P.json")")
        fi
        args=$BENCH_ARGS; [ "$mpi" = mpich ] && args=$MPICH_BENCH_ARGS
        # shellcheck disable=SC2086
        measured "$P" "$mpi-$P-preload" env NETGAUGE_SHM="$SEG" NETGAUGE_COLL_STALE_S=0 NETGAUGE_COLL=log \
            LD_PRELOAD="$(realpath "$lib")" "${launch[@]}" "$OUT/bench_$mpi" $args
        # The export, told what that run's trials measured: the classes
        # whose trials kept the library's own stay the library's.
        if [ "$mpi" = openmpi ]; then fmt=ompi-rules file=rules-$P.txt; else fmt=mpich-json file=mpich-$P.json; fi
        "$T/ngctl" export --format "$fmt" --shm "$SEG" --comm-sizes "$P" --cores "$(nproc)" \
            --trials "$OUT/$mpi-$P-preload.log" > "$OUT/$file"
        if [ "$mpi" = openmpi ] && [ "$EXPORT" = 1 ]; then
            # Verified: every rule of the file forced against the fixed
            # decision in one process; exported again without the sizes
            # whose rule lost (the first file kept as rules-P-unverified).
            mv "$OUT/$file" "$OUT/rules-$P-unverified.txt"
            # shellcheck disable=SC2086
            measured "$P" "$mpi-$P-verify" "${launch[@]}" --mca coll_tuned_use_dynamic_rules 1 \
                "$OUT/bench_$mpi" --rules "$OUT/rules-$P-unverified.txt" --rule-sizes $args
            "$T/ngctl" export --format "$fmt" --shm "$SEG" --comm-sizes "$P" --cores "$(nproc)" \
                --trials "$OUT/$mpi-$P-preload.log" --trials "$OUT/$mpi-$P-verify.txt" > "$OUT/$file"
        fi
        if [ "$EXPORT" = 1 ]; then
            # Runs in the order own, rules, rules, own: the machine drifts
            # from run to run (bench/ngcoll.md), and the mirrored order
            # gives both sides the same mean position, so a steady drift
            # cancels.
            for run in own-a rules-a rules-b own-b; do
                if [ "${run%-*}" = own ]; then
                    # shellcheck disable=SC2086
                    measured "$P" "$mpi-$P-$run" "${launch[@]}" "$OUT/bench_$mpi" --no-pmpi $args
                else
                    # shellcheck disable=SC2086
                    measured "$P" "$mpi-$P-$run" env "${export_env[@]}" "${launch[@]}" "${export_args[@]}" \
                        "$OUT/bench_$mpi" --no-pmpi $args
                fi
            done
            if [ "$mpi" = openmpi ]; then
                # shellcheck disable=SC2086
                measured "$P" "$mpi-$P-forced-rules" "${launch[@]}" --mca coll_tuned_use_dynamic_rules 1 \
                    "$OUT/bench_$mpi" --rules "$OUT/rules-$P.txt" $args
            fi
        fi
    done
done
alt_after=$(update-alternatives --query mpi | grep '^Value:')
[ "$alt_before" = "$alt_after" ] || echo "WARNING: the mpi alternative changed: $alt_before -> $alt_after" >&2
python3 bench/ngcoll_summary.py "$OUT" | tee "$OUT/summary.md"
