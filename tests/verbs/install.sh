#!/usr/bin/env bash
# Install what the Soft-RoCE VM test needs on Debian 12 (run as root).
# Idempotent: installs only what is missing. Exits 0 with a message when the
# machine cannot host the VM (no apt), so callers can skip.
set -euo pipefail

pkgs=(qemu-system-x86 linux-image-amd64 kmod busybox-static rdma-core
      ibverbs-providers ibverbs-utils perftest qperf iproute2 util-linux
      libibverbs-dev librdmacm-dev pkg-config libclang-dev python3-pip)
need=()
for p in "${pkgs[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if ((${#need[@]})); then
    command -v apt-get >/dev/null || { echo "verbs/install: no apt-get; cannot install ${need[*]}" >&2; exit 1; }
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need[@]}"
fi
if ! command -v vng >/dev/null 2>&1; then
    pip install -q virtme-ng==1.42 2>/dev/null || pip install -q --break-system-packages virtme-ng==1.42
fi
vng --version
