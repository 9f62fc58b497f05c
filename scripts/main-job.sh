#!/usr/bin/env bash
# The main job on an embedded default: no cluster and no RDMA hardware needed.
# Builds netgauged, shows the probe clock, measures the simulated Open MPI/openib
# network of Hoefler/Lichei/Rehm's Table 2 (ground truth known), then measures
# a real UDP path on loopback against `ngctl serve`, publishes both into a
# shared-memory segment and dumps it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --workspace
NGCTL=target/release/ngctl
SHM=${NETGAUGE_SEGMENT:-/dev/shm/netgauged-demo}

echo "== the probe clock"
$NGCTL clock

echo "== sim: Open MPI/openib of Table 2 (L=5.96 µs, o=4.72 µs, g=5.14 µs, G=0.73 ns/B, S=12288 B), 2 % jitter"
$NGCTL probe --transport sim --model L=5960,o=4720,g=5140,G=0.73,S=12288,jitter=0.02,seed=7 \
    --publish --shm "$SHM"

echo "== udp over loopback against ngctl serve"
$NGCTL serve --transport udp --listen 127.0.0.1:7470 --idle-exit-s 5 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
sleep 0.3
$NGCTL probe --transport udp --peer 127.0.0.1:7470 --max-size 65536 --publish --shm "$SHM"

echo "== the segment, as MPI libraries and schedulers read it"
$NGCTL dump --shm "$SHM"
