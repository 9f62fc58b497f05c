#!/usr/bin/env bash
# libngcoll under Open MPI 4.1 and MPICH 4.0 (one machine). Called by
# .ci/run. Exits non-zero on any failure. A few minutes on 2 cores.
#   - both ABI builds export the interposed entry points;
#   - correctness: tests/ngcoll/check.c, thousands of random cases over
#     2-8 ranks, every one of our algorithms in turn (NETGAUGE_COLL_FORCE=
#     cycle) against the library's own, under both MPIs;
#   - Fortran programs (use mpi, use mpi_f08; tests/ngcoll/fcheck.F90) are
#     set up and get exact results, and their communicator releases free
#     the shadows, under both MPIs;
#   - a Python program (mpi4py; tests/ngcoll/pycheck.py) likewise, under
#     Open MPI (Debian's mpi4py is built against it);
#   - the choice alone costs ≤ 100 ns and makes no system call
#     (tests/ngcoll/decide.c: timing reported, the seccomp proof asserted);
#   - a missing or stale segment: one warning, everything passes through;
#     so does a communicator above NETGAUGE_COLL_MAX_RANKS;
#   - a rejected setting or NETGAUGE_COLL=off on one rank: no hang, every
#     rank passes through; collectives from an atexit handler;
#   - NETGAUGE_COLL=log prints the choices at MPI_Finalize;
#   - where ours is chosen, the class's trial finishes on every rank alike;
#   - Open MPI's other algorithms, forced on a duplicate through MPI_T: they
#     run (tests/ngcoll/forced.c tells them apart by a floating-point sum),
#     the library is left as found, none where turned off, results exact;
#   - the project's MPI program (ngctl probe --transport mpi) runs with the
#     library preloaded;
#   - the mpi / mpirun alternatives are left as they were.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export PATH="$HOME/.cargo/bin:$PATH"
for c in mpicc.openmpi mpirun.openmpi mpif90.openmpi mpicc.mpich mpirun.mpich mpif90.mpich; do
    command -v "$c" >/dev/null || { echo "tests/ngcoll: $c missing (scripts/install-deps.sh)" >&2; exit 1; }
done
alt() { update-alternatives --query "$1" 2>/dev/null | grep '^Value:' || true; }
alt_mpi=$(alt mpi); alt_mpirun=$(alt mpirun)

# ngctl with MPI first, built as tests/mpi/run.sh builds it (the same
# command, examples too): after that script nothing is rebuilt. The
# ngcoll libraries after it: their build unifies the shared crates'
# features otherwise and would leave them to be compiled again for ngctl.
cargo build --release --features mpi --bin ngctl --example mpi_collectives --example bcast_rule
cargo build --release -p ngcoll-openmpi -p ngcoll-mpich
T="$(realpath "${CARGO_TARGET_DIR:-target}/release")"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
for lib in libngcoll_ompi.so libngcoll_mpich.so; do
    syms=$(nm -D --defined-only "$T/$lib")
    for s in MPI_Init MPI_Init_thread MPI_Finalize MPI_Comm_free MPI_Comm_disconnect MPI_Bcast MPI_Reduce MPI_Allreduce MPI_Allgather MPI_Alltoall MPI_Barrier ngcoll_decide; do
        grep -q " T $s\$" <<<"$syms" || { echo "$lib does not export $s" >&2; exit 1; }
    done
done
# The Fortran names whose bindings call PMPI_ (ngcoll::fortran): Open MPI's
# every one, MPICH's `use mpi_f08` lifecycle and barrier.
ompi_f=$(for f in init init_thread finalize comm_free comm_disconnect bcast reduce allreduce allgather alltoall barrier; do
    echo "mpi_${f}_ mpi_${f}_f08_"; done)
for s in $ompi_f; do
    grep -q " T $s\$" <<<"$(nm -D --defined-only "$T/libngcoll_ompi.so")" || { echo "libngcoll_ompi.so does not export $s" >&2; exit 1; }
done
for f in init init_thread finalize comm_free comm_disconnect barrier; do
    grep -q " T mpi_${f}_f08_\$" <<<"$(nm -D --defined-only "$T/libngcoll_mpich.so")" \
        || { echo "libngcoll_mpich.so does not export mpi_${f}_f08_" >&2; exit 1; }
done
echo "== both ABI builds export the interposed entry points"

for mpi in openmpi mpich; do
    "mpicc.$mpi" -O2 -Wall -Werror tests/ngcoll/check.c -o "$W/check_$mpi" -lm
    "mpicc.$mpi" -O2 -Wall -Werror tests/ngcoll/decide.c -o "$W/decide_$mpi" -ldl
    "mpicc.$mpi" -O2 -Wall -Werror tests/ngcoll/atexit.c -o "$W/atexit_$mpi"
    "mpicc.$mpi" -O2 -Wall -Werror tests/ngcoll/disconnect.c -o "$W/disconnect_$mpi"
    "mpif90.$mpi" -O2 -Wall -Werror -DF08 tests/ngcoll/fcheck.F90 -o "$W/fcheck08_$mpi"
done
# MPICH's `use mpi` module declares no interface for choice buffers, so
# gfortran checks the calls' buffer types against each other (an INTEGER
# and a DOUBLE PRECISION buffer of one MPI function are an error): allowed,
# and quiet, for that build alone.
mpif90.openmpi -O2 -Wall -Werror tests/ngcoll/fcheck.F90 -o "$W/fcheck_openmpi"
mpicc.openmpi -O2 -Wall -Werror tests/ngcoll/forced.c -o "$W/forced_openmpi" -ldl
mpif90.mpich -O2 -fallow-argument-mismatch -w tests/ngcoll/fcheck.F90 -o "$W/fcheck_mpich"

echo "== a segment: the MPI probe, 4 ranks oversubscribed"
SEG="$W/seg"
mpirun.openmpi --oversubscribe -np 4 "$T/ngctl" probe --transport mpi --max-size 4194304 --resamples 0 \
    --publish --shm "$SEG" > /dev/null
export NETGAUGE_SHM="$SEG" NETGAUGE_COLL_STALE_S=0

run() { # mpi ranks command...
    local mpi=$1 np=$2; shift 2
    local lib="$T/libngcoll_ompi.so"
    if [ "$mpi" = openmpi ]; then
        timeout "${RUN_TIMEOUT:-900}" env LD_PRELOAD="$lib" mpirun.openmpi --oversubscribe -np "$np" "$@"
    else
        timeout "${RUN_TIMEOUT:-900}" env LD_PRELOAD="$T/libngcoll_mpich.so" mpirun.mpich -np "$np" "$@"
    fi
}

echo "== correctness: every algorithm in turn against the library's own"
total=0
for np in 2 3 4 5 8; do
    out=$(NETGAUGE_COLL_FORCE=cycle run openmpi "$np" "$W/check_openmpi" 1000 "$np" 2>&1) || { echo "$out" >&2; exit 1; }
    echo "openmpi: $(grep '^check:' <<<"$out")"
    total=$((total + 1000))
done
# MPICH's own collectives spin when ranks outnumber cores: fewer cases.
for np in 2 3 4 8; do
    out=$(NETGAUGE_COLL_FORCE=cycle run mpich "$np" "$W/check_mpich" 300 "$np" 2>&1) || { echo "$out" >&2; exit 1; }
    echo "mpich: $(grep '^check:' <<<"$out")"
    total=$((total + 300))
done
echo "correctness: $total cases (per rank 0), 0 mismatches"

echo "== the model's own choices (NETGAUGE_COLL=on) are correct too"
for mpi in openmpi mpich; do
    out=$(run "$mpi" 4 "$W/check_$mpi" 300 7 2>&1) || { echo "$out" >&2; exit 1; }
    echo "$mpi: $(grep '^check:' <<<"$out")"
done

# Open MPI's other algorithms run by the library on a duplicate made with
# one forced through MPI_T: the duplicate must really run it (told apart by
# the value of a floating-point sum, which depends on the order of the
# combination: tests/ngcoll/forced.c), the control variable must be back
# afterwards (a duplicate the program makes later runs the fixed rules),
# and none is used where it is turned off, by NETGAUGE_COLL_LIBRARY_ALGS=0
# or by the program's own coll_tuned_use_dynamic_rules=0. Then every
# collective forced to another of Open MPI's algorithms, results exact.
echo "== Open MPI's other algorithms: forced on a duplicate, they run, the library is left as found"
for np in 4 8; do
    out=$(NETGAUGE_COLL_FORCE=reduce=library:1 run openmpi "$np" "$W/forced_openmpi" expect-linear 2>&1) \
        || { echo "$out" >&2; exit 1; }
    grep '^forced:' <<<"$out"
done
# (Any coll/tuned setting of the program's own keeps libngcoll from
# turning the dynamic rules on, not only that one.)
for setting in NETGAUGE_COLL_LIBRARY_ALGS=0 OMPI_MCA_coll_tuned_use_dynamic_rules=0 \
    OMPI_MCA_coll_tuned_bcast_algorithm_segmentsize=0; do
    out=$(export "${setting?}"; NETGAUGE_COLL_FORCE=reduce=library:1 run openmpi 4 "$W/forced_openmpi" expect-library 2>&1) \
        || { echo "$setting: $out" >&2; exit 1; }
    echo "$setting: $(grep '^forced:' <<<"$out")"
done
forced=bcast=library:3/1/1024,reduce=library:2/1/1024,allreduce=library:4,allgather=library:2,alltoall=library:2,barrier=library:4
for np in 2 3 4 8; do
    out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=$forced run openmpi "$np" "$W/check_openmpi" 500 "$((np + 50))" 2>"$W/log") \
        || { echo "$out $(cat "$W/log")" >&2; exit 1; }
    grep -q '^check: .* 0 mismatches' <<<"$out" || { echo "$out" >&2; exit 1; }
    for c in bcast reduce allreduce allgather alltoall barrier; do
        grep -qE "ngcoll: comm [0-9]+ \($np ranks, 1 node\) $c( [^:]*)?: Open MPI 4.1 .*\(#[0-9]+.*\) \(forced\)" "$W/log" \
            || { echo "openmpi $np ranks: $c not run as Open MPI's forced algorithm: $(grep " $c" "$W/log" | head -3)" >&2; exit 1; }
    done
    grep -qE "duplicates running another of the library's algorithms made, 0 still open" "$W/log" \
        || { echo "openmpi $np ranks: $(grep 'world rank 0' "$W/log")" >&2; exit 1; }
    echo "openmpi, another of its algorithms for every collective: $(grep '^check:' <<<"$out")"
done
# Their duplicates go with the program's communicators, disconnected too:
# more of them than may be open at once (1024), so one left behind by a
# release would stop the count short.
out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=allreduce=library:3 RUN_TIMEOUT=300 run openmpi 2 "$W/disconnect_openmpi" 1100 300 2>&1) \
    || { echo "$out" >&2; exit 1; }
made=$(grep -oE "[0-9]+ duplicates running another of the library's algorithms made, 0 still open" <<<"$out" | cut -d' ' -f1)
grep -q '^disconnect: .*: ok$' <<<"$out" && [ "${made:-0}" -ge 1100 ] \
    || { echo "disconnect with Open MPI's other algorithms: $(grep -E '^disconnect|world rank 0' <<<"$out")" >&2; exit 1; }
echo "openmpi: $(grep '^disconnect' <<<"$out") ($made duplicates with a forced algorithm made, none left open)"

echo "== the choice: cost (reported) and no system call (asserted)"
for mpi in openmpi mpich; do
    run "$mpi" 2 "$W/decide_$mpi" time
    run "$mpi" 2 "$W/decide_$mpi" seccomp
done

echo "== NETGAUGE_COLL=log: one line per (collective, size class, communicator)"
log=$(NETGAUGE_COLL=log run openmpi 4 "$W/check_openmpi" 100 3 2>&1 >/dev/null)
grep -Eq '^ngcoll: comm [0-9]+ \(4 ranks, 1 node\) (bcast|reduce|allreduce|allgather|alltoall) .*: .* — predicted .*; [0-9]+ calls?$' <<<"$log" \
    || { echo "no log line for the 4-rank communicator: $log" >&2; exit 1; }
grep -c '^ngcoll: comm' <<<"$log" | sed 's/^/log lines: /'

echo "== the plan: decided in shares by the communicator's ranks, then cached"
# Rank 0 sends what it read from the segment, every rank decides a share
# and all assemble one plan (the unit tests compare it bit for bit with
# one built in one process); a rank holding a different plan would run
# another algorithm than its peers: a mismatch or a hang. A second
# communicator of the same shape takes rank 0's cached plan whole.
for mpi in openmpi mpich; do
    out=$(NETGAUGE_COLL=log run "$mpi" 4 "$W/check_$mpi" 200 17 2>"$W/log") || { echo "$out $(cat "$W/log")" >&2; exit 1; }
    grep -q '^check: .* 0 mismatches' <<<"$out" || { echo "$mpi: $out" >&2; exit 1; }
    grep -Eq '^ngcoll: comm [0-9]+ \(4 ranks\): parameters from .*, decided by 4 ranks$' "$W/log" \
        && grep -Eq '^ngcoll: comm [0-9]+ \(3 ranks\): parameters from .*, decided by 3 ranks$' "$W/log" \
        && grep -Eq '^ngcoll: comm [0-9]+ \(2 ranks\): parameters from .*, decided by 2 ranks$' "$W/log" \
        && grep -Eq '^ngcoll: comm [0-9]+ \(4 ranks\): parameters from .*, decided by 4 ranks \(cached plan\)$' "$W/log" \
        || { echo "$mpi: no plan decided in shares: $(grep 'parameters from' "$W/log")" >&2; exit 1; }
    echo "$mpi: $(grep '^check:' <<<"$out" | sed 's/ (.*)//'); $(grep -c 'decided by' "$W/log") plans decided in shares or cached"
done
# 40 ranks (above 32): every algorithm in turn, then the model's own
# choices, with the plans of the 40-, 39- and 20-rank communicators
# decided in shares. (Open MPI only: MPICH's waits spin, and 40 of its
# ranks on two cores take minutes.)
out=$(NETGAUGE_COLL_FORCE=cycle run openmpi 40 "$W/check_openmpi" 200 40 2>&1) || { echo "$out" >&2; exit 1; }
echo "openmpi, every algorithm in turn: $(grep '^check:' <<<"$out" | sed 's/ (.*)//')"
out=$(NETGAUGE_COLL=log run openmpi 40 "$W/check_openmpi" 200 41 2>"$W/log") || { echo "$out $(cat "$W/log")" >&2; exit 1; }
grep -q '^check: .* 0 mismatches' <<<"$out" \
    && grep -Eq '^ngcoll: comm [0-9]+ \(40 ranks\): parameters from .*, decided by 40 ranks$' "$W/log" \
    || { echo "40 ranks: $out $(grep 'parameters from' "$W/log")" >&2; exit 1; }
echo "openmpi, the model's choices: $(grep '^check:' <<<"$out" | sed 's/ (.*)//'); $(grep -c '^ngcoll: comm [0-9]* (40 ranks, 1 node) .*: ours ' "$W/log") classes of 40-rank communicators ran ours"

echo "== trials: where ours is chosen, a class's first calls time ours against the library's own"
# A program that calls each collective and size many times (the bench):
# every class where the plan chose ours finishes its trial, every rank
# takes the same verdict (a rank that did not would hang the run, which
# the timeout turns into a failure), and the log reports each verdict.
# MPICH's harness calls take milliseconds when ranks outnumber cores: its
# classes see fewer calls, so one timed call of each side there. At least
# 10 calls per repetition (--min-calls), however slow: a loaded machine
# must not leave a class too few calls to finish its trial.
for mpi in openmpi mpich; do
    "mpicc.$mpi" -O2 -Wall bench/ngcoll_bench.c -o "$W/bench_$mpi" -ldl -lm
    calls=4; [ "$mpi" = mpich ] && calls=1
    log=$(NETGAUGE_COLL=log NETGAUGE_COLL_TRIAL=$calls run "$mpi" 4 "$W/bench_$mpi" --modes sync,b2b --reps 2 \
        --target-ms 2 --min-calls 10 --sync-calls 11 --min 4 --max 1048576 --step 4 2>&1 >/dev/null)
    kept=$(grep -c '; trial (the ranks. median times, summed) .*, the last of [0-9]*: kept ours$' <<<"$log" || true)
    gave=$(grep -c '; trial (the ranks. median times, summed) .*, the last of [0-9]*: kept the library.s own$' <<<"$log" || true)
    again=$(grep -Ec ', the last of ([2-9]|[1-9][0-9]+): kept' <<<"$log" || true)
    open=$(grep -c '; trial not finished$' <<<"$log" || true)
    [ $((kept + gave)) -ge 1 ] || { echo "$mpi: no finished trial in the log: $log" >&2; exit 1; }
    echo "$mpi: trials ($calls timed calls a side): $kept kept ours, $gave kept the library's own, $open not finished; $again classes tried again"
done

echo "== a missing segment: one warning, every collective passes through"
for mpi in openmpi mpich; do
    err=$(NETGAUGE_SHM="$W/none" run "$mpi" 4 "$W/check_$mpi" 200 5 2>&1 >/dev/null) \
        || { echo "$err" >&2; exit 1; }
    n=$(grep -c '^ngcoll: ' <<<"$err" || true)
    [ "$n" = 1 ] || { echo "$mpi: expected one ngcoll warning, got $n: $err" >&2; exit 1; }
    echo "$mpi: $err"
done
echo "== a stale segment (no heartbeat for 5 s): the same"
err=$(NETGAUGE_COLL_STALE_S=5 run openmpi 2 "$W/check_openmpi" 50 5 2>&1 >/dev/null) || { echo "$err" >&2; exit 1; }
grep -q "stale" <<<"$err" || { echo "no stale warning: $err" >&2; exit 1; }
echo "$err"

echo "== a communicator above NETGAUGE_COLL_MAX_RANKS: one warning, it passes through, smaller ones are planned"
# World and its duplicate (4 ranks) pass through; the splits of 2 and 3
# ranks get plans, whose choices the log prints.
out=$(NETGAUGE_COLL=log NETGAUGE_COLL_MAX_RANKS=3 run openmpi 4 "$W/check_openmpi" 200 17 2>"$W/log") \
    || { echo "$out $(cat "$W/log")" >&2; exit 1; }
grep -q '^check: .* 0 mismatches' <<<"$out" || { echo "$out" >&2; exit 1; }
[ "$(grep -c '^ngcoll: no plan for 4 ranks (above NETGAUGE_COLL_MAX_RANKS, 3: ' "$W/log")" = 1 ] \
    || { echo "expected one warning for the 4-rank communicators: $(cat "$W/log")" >&2; exit 1; }
# Every class of a 4-rank communicator: the library's own, nothing priced;
# some class of a smaller one: ours.
four=$(grep -cE '^ngcoll: comm [0-9]+ \(4 ranks, 1 node\) ' "$W/log" || true)
[ "$four" -ge 1 ] && [ "$(grep -cE '^ngcoll: comm [0-9]+ \(4 ranks, 1 node\) [^:]*: Open MPI 4.1 \? — ' "$W/log")" = "$four" ] \
    || { echo "a 4-rank communicator was planned: $(grep '(4 ranks, 1 node)' "$W/log" | grep -v '?' | head -3)" >&2; exit 1; }
grep -qE '^ngcoll: comm [0-9]+ \((2|3) ranks, 1 node\) [^:]*: ours ' "$W/log" \
    || { echo "no plan for the 2- and 3-rank communicators: $(head -5 "$W/log")" >&2; exit 1; }
echo "openmpi: $(grep '^check:' <<<"$out"); $(grep '^ngcoll: no plan' "$W/log")"

# rank3_differs SEED VAR=VALUE WARNING: ranks 0-2 as set, rank 3 alone with
# VAR=VALUE; every rank must pass through with exactly one warning, which
# matches WARNING. A rank that turned itself off alone would leave the
# others waiting for it in MPI_Init's set-up: a hang, which the timeout
# turns into a failure.
rank3_differs() {
    local seed=$1 setting=$2 warning=$3 mpi err n
    for mpi in openmpi mpich; do
        err=$(RUN_TIMEOUT=300 run "$mpi" 3 "$W/check_$mpi" 200 "$seed" : -np 1 env "$setting" "$W/check_$mpi" 200 "$seed" \
            2>&1 >/dev/null) || { echo "$mpi: $err" >&2; exit 1; }
        n=$(grep -c '^ngcoll: ' <<<"$err" || true)
        [ "$n" = 1 ] && grep -q "$warning" <<<"$err" \
            || { echo "$mpi: expected one warning ($warning), got $n: $err" >&2; exit 1; }
        echo "$mpi: $err"
    done
}

echo "== a setting one rank rejects: that rank still takes part, every rank passes through"
rank3_differs 11 NETGAUGE_COLL_TRIAL=9 '^ngcoll: rank 3: NETGAUGE_COLL_TRIAL="9"'

echo "== NETGAUGE_COLL=off on one rank: it takes part in the set-up, every rank passes through"
rank3_differs 13 NETGAUGE_COLL=off '^ngcoll: NETGAUGE_COLL=off on some ranks'

echo "== NETGAUGE_COLL_FORCE on one rank only: ranks would run different algorithms, every rank passes through"
rank3_differs 17 NETGAUGE_COLL_FORCE=cycle '^ngcoll: NETGAUGE_COLL_FORCE differs between ranks'

echo "== collectives from an atexit handler (after the thread-local destructors)"
for mpi in openmpi mpich; do
    # Ours forced for allreduce: the callback's must not run on a freed shadow.
    out=$(NETGAUGE_COLL_FORCE=allreduce=recursive_doubling RUN_TIMEOUT=300 run "$mpi" 2 "$W/atexit_$mpi" 2>&1) \
        || { echo "$mpi: $out" >&2; exit 1; }
    [ "$(grep -c '^atexit: .*: ok$' <<<"$out")" = 2 ] || { echo "$mpi: $out" >&2; exit 1; }
    grep '^atexit' <<<"$out" | sed "s/^/$mpi: /"
done

# MPICH runs out of communicator contexts if each disconnect leaves a shadow
# behind; Open MPI has no such bound (there the test checks the results).
# The log shows that libngcoll set up every communicator (a shadow each).
echo "== MPI_Comm_disconnect releases the shadow as MPI_Comm_free does"
for mpi in openmpi mpich; do
    out=$(NETGAUGE_COLL=log RUN_TIMEOUT=300 run "$mpi" 2 "$W/disconnect_$mpi" 2500 1500 2>&1) || { echo "$mpi: $out" >&2; exit 1; }
    grep -q '^disconnect: .*: ok$' <<<"$out" || { echo "$mpi: $out" >&2; exit 1; }
    n=$(grep -cE '^ngcoll: comm [0-9]+ \(2 ranks\): parameters' <<<"$out" || true)
    [ "$n" -ge 2500 ] || { echo "$mpi: libngcoll set up $n communicators, not 2500" >&2; exit 1; }
    echo "$mpi: $(grep '^disconnect' <<<"$out") (libngcoll set up $n)"
done
# Communicators used and held: libngcoll shadows at most 256 at a time
# (agreed by their ranks), so a program that holds 1000 and then makes 600
# more still has its contexts under MPICH (1000 shadows would leave it 48).
echo "== held communicators: at most 256 shadows, the rest pass through"
for mpi in openmpi mpich; do
    out=$(NETGAUGE_COLL=log RUN_TIMEOUT=300 run "$mpi" 2 "$W/disconnect_$mpi" 0 600 1000 2>&1) || { echo "$mpi: $out" >&2; exit 1; }
    grep -q '^disconnect: .*: ok$' <<<"$out" || { echo "$mpi: $out" >&2; exit 1; }
    n=$(grep -cE '^ngcoll: comm [0-9]+ \(2 ranks\): parameters' <<<"$out" || true)
    [ "$n" -ge 256 ] && [ "$n" -le 257 ] || { echo "$mpi: libngcoll set up $n communicators, not 256 (+ world)" >&2; exit 1; }
    echo "$mpi: $(grep '^disconnect' <<<"$out") (libngcoll set up $n)"
done

# Open MPI's Fortran bindings call PMPI_ throughout and MPICH's `use
# mpi_f08` calls PMPI_Init, PMPI_Finalize, PMPI_Comm_free,
# PMPI_Comm_disconnect and PMPI_Barrier: without libngcoll's Fortran entry
# points such a program is not set up at all, or its collectives pass by
# libngcoll, or its releases leave the shadows open. So the log must show
# every collective served, at least 2 × LOOPS shadows released with their
# communicators, and none whose communicator was freed past libngcoll
# (MPICH's 2048 communicator contexts would not survive 2 × 2100 of
# those either). Every algorithm in turn; results checked exactly
# (tests/ngcoll/fcheck.F90).
echo "== Fortran callers (use mpi, use mpi_f08): set up, every algorithm in turn, exact results"
fortran() { # mpi ranks cases seed loops
    local mpi=$1 np=$2 cases=$3 seed=$4 loops=$5 flavour out log c shadows released
    for flavour in fcheck fcheck08; do
        # The program's summary (stdout) apart from the ranks' logs
        # (stderr): mpirun forwards each stream in chunks, which may split
        # another rank's line.
        out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=cycle RUN_TIMEOUT=300 run "$mpi" "$np" "$W/${flavour}_$mpi" \
            "$cases" "$seed" "$loops" 2>"$W/log") || { echo "$mpi $flavour: $out $(cat "$W/log")" >&2; exit 1; }
        log=$(cat "$W/log")
        grep -q '^fcheck: .* 0 mismatches;' <<<"$out" || { echo "$mpi $flavour: $out $log" >&2; exit 1; }
        for c in bcast reduce allreduce allgather alltoall barrier; do
            grep -qE "ngcoll: comm [0-9]+ \([0-9]+ ranks?, [0-9]+ nodes?\) $c[ :]" <<<"$log" \
                || { echo "$mpi $flavour: no $c call reached libngcoll" >&2; exit 1; }
        done
        shadows=$(grep -o 'ngcoll: world rank 0: shadow communicators: .* past libngcoll' <<<"$log") \
            || { echo "$mpi $flavour: no shadow count in the log" >&2; exit 1; }
        released=$(sed -E 's/.*: ([0-9]+) released .*/\1/' <<<"$shadows")
        [ "$released" -ge $((2 * loops)) ] && grep -q ', 0 of which after' <<<"$shadows" \
            || { echo "$mpi $flavour: $shadows (expected ≥ $((2 * loops)) released, 0 freed past libngcoll)" >&2; exit 1; }
        echo "$mpi: $(grep '^fcheck' <<<"$out") (${shadows#ngcoll: world rank 0: })"
    done
}
# MPI_Init and MPI_Init_thread from Fortran turn Open MPI's dynamic rules
# on too: a forced algorithm of the library's runs there as from C.
for flavour in fcheck fcheck08; do
    for seed in 20 21; do
        out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=reduce=library:1 RUN_TIMEOUT=300 run openmpi 3 "$W/${flavour}_openmpi" \
            100 "$seed" 1 2>"$W/log") || { echo "openmpi $flavour: $out $(cat "$W/log")" >&2; exit 1; }
        grep -q '^fcheck: .* 0 mismatches;' <<<"$out" \
            && grep -qE 'ngcoll: comm [0-9]+ \(3 ranks, 1 node\) reduce .*: Open MPI 4.1 linear \(#1\) \(forced\)' "$W/log" \
            || { echo "openmpi $flavour (seed $seed): Open MPI's linear reduce not run: $out $(grep reduce "$W/log" | head -3)" >&2; exit 1; }
    done
    echo "openmpi $flavour: Open MPI's linear reduce forced from Fortran's MPI_Init and MPI_Init_thread"
done
fortran openmpi 4 1000 18 200 # seeds: even MPI_Init, odd MPI_Init_thread
fortran openmpi 3 500 23 20
fortran mpich 4 200 28 10
fortran mpich 2 400 31 2100

# Another mangling (gfortran -fsecond-underscore: g77's, `mpi_bcast__`):
# MPICH's bindings of every mangling call the interposed MPI_ names, so
# such a program is served as well. (Debian's Open MPI crashes such a
# program by itself, and MPICH one built with -fno-underscoring, without
# libngcoll: bench/ngcoll.md.)
echo "== Fortran callers with another mangling (MPICH, -fsecond-underscore)"
mpif90.mpich -O2 -fallow-argument-mismatch -w -fsecond-underscore tests/ngcoll/fcheck.F90 -o "$W/fcheck__"
grep -q ' mpi_bcast__$' <<<"$(nm -u "$W/fcheck__")" \
    || { echo "fcheck__: not the mangling expected: $(nm -u "$W/fcheck__" | grep -i bcast)" >&2; exit 1; }
out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=cycle RUN_TIMEOUT=300 run mpich 3 "$W/fcheck__" 100 41 3 2>"$W/log") \
    || { echo "mpich fcheck__: $out $(cat "$W/log")" >&2; exit 1; }
grep -q '^fcheck: .* 0 mismatches;' <<<"$out" || { echo "mpich fcheck__: $out $(cat "$W/log")" >&2; exit 1; }
for c in bcast reduce allreduce allgather alltoall barrier; do
    grep -qE "ngcoll: comm [0-9]+ \([0-9]+ ranks?, [0-9]+ nodes?\) $c[ :]" "$W/log" \
        || { echo "mpich fcheck__: no $c call reached libngcoll" >&2; exit 1; }
done
echo "mpich (mpi_bcast__ …): $(grep '^fcheck' <<<"$out")"

# An unmodified Python program: mpi4py (Debian's, built against Open MPI)
# loads libmpi from its extension module; the preloaded libngcoll must
# still be set up and serve all six collectives, with exact results
# (tests/ngcoll/pycheck.py), with every algorithm in turn and with the
# model's own choices.
echo "== mpi4py (Open MPI): set up, served, exact results"
for force in cycle ""; do
    for np in 4 3; do
        out=$(NETGAUGE_COLL=log NETGAUGE_COLL_FORCE=$force RUN_TIMEOUT=300 run openmpi "$np" /usr/bin/python3 \
            tests/ngcoll/pycheck.py 300 "$np" 2>"$W/log") || { echo "mpi4py: $out $(cat "$W/log")" >&2; exit 1; }
        grep -q '^pycheck: .* 0 mismatches$' <<<"$out" || { echo "mpi4py: $out $(cat "$W/log")" >&2; exit 1; }
        for c in bcast reduce allreduce allgather alltoall barrier; do
            grep -qE "ngcoll: comm [0-9]+ \([0-9]+ ranks?, [0-9]+ nodes?\) $c[ :]" "$W/log" \
                || { echo "mpi4py: no $c call reached libngcoll" >&2; exit 1; }
        done
        echo "openmpi: $out (${force:-model})"
    done
done

# Linking libngcoll before the MPI library instead of preloading it: the
# program must record libngcoll's own soname (not that of libnetgauge,
# which Cargo used to pass on to it) and run it, C and Fortran alike.
echo "== linked rather than preloaded"
for mpi in openmpi mpich; do
    lib=ngcoll_ompi; [ "$mpi" = mpich ] && lib=ngcoll_mpich
    link=(-Wl,--no-as-needed -L"$T" -l"$lib" -Wl,-rpath,"$T")
    "mpicc.$mpi" -O2 tests/ngcoll/check.c -o "$W/check_linked_$mpi" "${link[@]}" -lm
    "mpif90.$mpi" -O2 -DF08 tests/ngcoll/fcheck.F90 -o "$W/fcheck08_linked_$mpi" "${link[@]}"
    for prog in check_linked fcheck08_linked; do
        grep -q "NEEDED.*\[lib$lib\.so\]" <<<"$(readelf -d "$W/${prog}_$mpi")" \
            || { echo "$prog ($mpi) does not record lib$lib.so: $(readelf -d "$W/${prog}_$mpi" | grep NEEDED)" >&2; exit 1; }
        args=(100 37); [ "$prog" = fcheck08_linked ] && args=(100 37 5)
        if [ "$mpi" = openmpi ]; then
            out=$(NETGAUGE_COLL=log timeout 300 mpirun.openmpi --oversubscribe -np 3 "$W/${prog}_$mpi" "${args[@]}" 2>"$W/log")
        else
            out=$(NETGAUGE_COLL=log timeout 300 mpirun.mpich -np 3 "$W/${prog}_$mpi" "${args[@]}" 2>"$W/log")
        fi || { echo "$mpi $prog: $out $(cat "$W/log")" >&2; exit 1; }
        n=$(grep -cE 'ngcoll: comm [0-9]+ \(3 ranks\): parameters' "$W/log" || true)
        [ "$n" -ge 1 ] || { echo "$mpi $prog: libngcoll did not run: $out $(cat "$W/log")" >&2; exit 1; }
        echo "$mpi: $(grep -E '^(f?check):' <<<"$out") (linked; libngcoll set up $n)"
    done
done

echo "== NETGAUGE_COLL=off: nothing of libngcoll's per call (no warning)"
err=$(NETGAUGE_COLL=off NETGAUGE_SHM="$W/none" run openmpi 4 "$W/check_openmpi" 100 9 2>&1 >/dev/null) \
    || { echo "$err" >&2; exit 1; }
! grep -q '^ngcoll:' <<<"$err" || { echo "off printed: $err" >&2; exit 1; }

echo "== the project's MPI program runs with the library preloaded"
run openmpi 4 "$T/ngctl" probe --transport mpi --max-size 65536 --resamples 0 --json > "$W/probe.json"
python3 -c "import json,sys; p = json.load(open(sys.argv[1])); assert p['eel_ns'] > 0, p" "$W/probe.json"
echo "ngctl probe --transport mpi under LD_PRELOAD: EEL $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['eel_ns']))" "$W/probe.json") ns"

[ "$(alt mpi)" = "$alt_mpi" ] && [ "$(alt mpirun)" = "$alt_mpirun" ] \
    || { echo "the mpi/mpirun alternatives changed" >&2; exit 1; }
echo "tests/ngcoll: all passed"
