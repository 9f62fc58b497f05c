#!/usr/bin/env bash
# CPU overlap (Bell et al.) per transport against an `ngctl serve` on the
# same host, the server pinned to CPU 1 and the prober to CPU 0.
#
#   bench/contention_overlap.sh udp [ROUNDS]
#   bench/contention_overlap.sh rdma|msg DEVICE [ROUNDS]   (Soft-RoCE: rxe0)
#
# The rdma and msg runs need an RDMA device (the VM rig of tests/verbs/ has
# Soft-RoCE); udp runs anywhere. NGCTL: the binary (default target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
NGCTL=$(readlink -f "${NGCTL:-target/release/ngctl}")
KIND=$1
shift
DEV=()
if [ "$KIND" != udp ]; then DEV=(--device "$1"); shift; fi
ROUNDS=${1:-30}
PORT=${PORT:-17931}
ADDR=${ADDR:-127.0.0.1}
taskset -c 1 "$NGCTL" serve --transport "$KIND" "${DEV[@]}" --listen "$ADDR:$PORT" --idle-exit-s 20 &
SP=$!
trap 'kill $SP 2>/dev/null || true' EXIT
sleep 0.5
taskset -c 0 "$NGCTL" overlap --transport "$KIND" "${DEV[@]}" --peer "$ADDR:$PORT" \
    --rounds "$ROUNDS" --sizes 1,1024,4096,16384,65536
