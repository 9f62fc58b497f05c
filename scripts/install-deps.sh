#!/usr/bin/env bash
# Install what netgauged's build, tests and demo need on a fresh Debian 12
# machine (run as root). Idempotent: installs only what is missing.
set -euo pipefail

need_pkgs=()
# libibverbs-dev, librdmacm-dev, libclang-dev: the `verbs` feature (rdma-sys
# runs bindgen against the system rdma-core headers).
# MPI (the `mpi` feature, tests/mpi/run.sh): libopenmpi-dev openmpi-bin
# MPICH beside it (libngcoll's second ABI, tests/ngcoll/run.sh): mpich libmpich-dev
# gfortran: tests/ngcoll/fcheck.F90, libngcoll under Fortran programs (both
# MPI dev packages pull it in; named so the test's need is written down).
# SimGrid's SMPI (smpicc, smpirun: the SMPI export's consumer,
# tests/export_consumers.rs): libsimgrid-dev
# prometheus (server and promtool): tests/prometheus_netns.rs scrapes two
# daemons with it (its service is not started: the test runs its own).
# librsvg2-bin (rsvg-convert) and fonts-dejavu-core: tests/plot_cli.rs
# rasterises `ngctl plot`'s SVG with an independent renderer, which needs a
# sans-serif font for the labels.
# python3-mpi4py: tests/ngcoll/pycheck.py, libngcoll under a Python MPI
# program (Debian's build is against Open MPI).
# jq: scripts/cluster_rig.sh (run by tests/cluster_rig.rs) reads the
# daemons' JSON with it.
for p in pkg-config gcc libc6-dev iproute2 libibverbs-dev librdmacm-dev libclang-dev libopenmpi-dev openmpi-bin mpich libmpich-dev gfortran libsimgrid-dev python3 prometheus librsvg2-bin fonts-dejavu-core jq python3-mpi4py; do
    dpkg -s "$p" >/dev/null 2>&1 || need_pkgs+=("$p")
done
# Installing MPICH re-points the mpi/mpirun alternatives (mpicc, mpirun, …)
# at it when they are in automatic mode: record them and put Open MPI's back
# (manual mode), so `mpicc`/`mpirun` and the `mpi` crate keep building and
# running against Open MPI. Both MPIs are always called by their own names
# (mpicc.openmpi, mpirun.mpich, …) by the tests.
if ((${#need_pkgs[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need_pkgs[@]}"
fi
for a in mpi mpirun; do
    target=$(update-alternatives --list "$a" 2>/dev/null | grep -m1 openmpi || true)
    if [ -n "$target" ]; then
        update-alternatives --set "$a" "$target" >/dev/null
    fi
done

if ! command -v cargo >/dev/null 2>&1; then
    for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
        [ -x "$d/cargo" ] && export PATH="$d:$PATH"
    done
fi
command -v cargo >/dev/null 2>&1 || {
    echo "install-deps: no Rust toolchain (cargo) on PATH; install stable Rust first" >&2
    exit 1
}
rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt 2>/dev/null || true
