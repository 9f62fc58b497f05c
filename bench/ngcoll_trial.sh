#!/usr/bin/env bash
# libngcoll's trials on and off (NETGAUGE_COLL_TRIAL=4 and 0), Open MPI
# preloaded, runs alternated on one segment per rank count, then the table
# of bench/ngcoll.md ("Trials"): bench/ngcoll_ab.sh with this build twice.
# Usage: bench/ngcoll_trial.sh OUT_DIR [RUNS]   RANKS_LIST="4 8"
# Binaries as for bench/ngcoll_run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
T="${CARGO_TARGET_DIR:-target}"
A_NAME=trial B_NAME=notrial A_ENV=NETGAUGE_COLL_TRIAL=4 B_ENV=NETGAUGE_COLL_TRIAL=0 \
    exec bash bench/ngcoll_ab.sh "$1" "${2:-3}" "$T" "$T"
