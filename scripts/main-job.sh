#!/usr/bin/env bash
# The main job on an embedded default: no cluster and no RDMA hardware needed.
#
# 1. Builds netgauged and shows the probe clock.
# 2. Probes the simulated Open MPI/openib network of Hoefler, Lichei and
#    Rehm's Table 2 (ground truth known) once, like Netgauge would.
# 3. Makes two hosts out of network namespaces joined by a veth pair shaped
#    to 1 Gbit/s, starts a netgauged on each, lets them probe each other over
#    raw Ethernet and UDP, shows `ngctl status` and `ngctl dump` of one node,
#    then stops the daemons and removes the namespaces.
# Needs root (namespaces, raw sockets).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --bin ngctl --bin netgauged
# The C ABI for consumers: libnetgauge.{so,a}, netgauge.h, netgauge.pc under
# /usr/local (an MPI library builds with `pkg-config --cflags --libs netgauge`).
bash ffi/install.sh
NGCTL=${CARGO_TARGET_DIR:-$PWD/target}/release/ngctl
NETGAUGED=${CARGO_TARGET_DIR:-$PWD/target}/release/netgauged

echo "== the probe clock"
$NGCTL clock

echo
echo "== sim: Open MPI/openib of Table 2 (L=5.96 µs, o=4.72 µs, g=5.14 µs, G=0.73 ns/B, S=12288 B), 2 % jitter"
$NGCTL probe --transport sim --model L=5960,o=4720,g=5140,G=0.73,S=12288,jitter=0.02,seed=7

echo
echo "== two hosts (network namespaces, veth, tbf 1 Gbit/s), a netgauged on each"
WORK=$(mktemp -d /tmp/netgauged-main.XXXXXX)
source scripts/two_hosts.sh
two_hosts_up ngmain$$ 91 9000 rate 1gbit burst 64kb latency 200ms
# A core of its own for each host's busy-polling threads, as on two
# machines: unpinned, one host's probe and the other's responder can share
# a core and measure the scheduler instead of the link.
two_hosts_settings() {
    cat <<EOT
budget_bytes_per_s = 50000000
recheck_interval_s = 30.0
max_size_bytes = 131072
lock_memory = false
fanout_interval_s = 0
probe_cpu = $(( ($1 - 1) % $(nproc) ))
EOT
}
two_hosts_configs segment 'interface = "eth0"
transports = ["raw", "udp"]'
for n in a b; do
    ip netns exec ${TAG}$n "$NETGAUGED" --config "$WORK/$n.toml" 2> "$WORK/$n.log" &
    PIDS+=($!)
done

# Wait (at most 3 minutes) until node-a has published node-b over both
# transports (the cluster's class entries, `@all`, come beside them).
for _ in $(seq 1 180); do
    n=$($NGCTL dump --json --shm "$WORK/segment-a" 2>/dev/null \
        | python3 -c 'import json,sys; print(sum(e["peer"] == "node-b" for e in json.load(sys.stdin)["entries"]))' 2>/dev/null || echo 0)
    [ "$n" -ge 2 ] && break
    sleep 1
done
echo
$NGCTL status --shm "$WORK/segment-a" || true
echo
$NGCTL dump --shm "$WORK/segment-a"
echo
echo "== daemon log of node-a"
sed -e 's/\x1b\[[0-9;]*m//g' "$WORK/a.log" | tail -n 8
