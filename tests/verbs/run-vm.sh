#!/usr/bin/env bash
# Boot the Soft-RoCE VM (virtme-ng, TCG: a KVM guest hangs here), run the
# verbs integration tests inside it, then check the results on the host.
# Usage: tests/verbs/run-vm.sh [OUT_DIR]
# Env: NGCTL and NETGAUGED (built binaries; default: build them),
# VNG_TIMEOUT_S (default 2400: a run takes 6-7 min on an idle host;
# each of the two daemon phases may wait up to 600 s on a loaded one), VM_PARTS (inside.sh's parts, default all).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/target/verbs-vm}
rm -rf "$OUT"; mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

if [ -z "${NGCTL:-}" ] || [ -z "${NETGAUGED:-}" ]; then
    (cd "$ROOT" && cargo build --release --bin ngctl --bin netgauged)
    NGCTL=${NGCTL:-${CARGO_TARGET_DIR:-$ROOT/target}/release/ngctl}
    NETGAUGED=${NETGAUGED:-${CARGO_TARGET_DIR:-$ROOT/target}/release/netgauged}
fi
NGCTL=$(readlink -f "$NGCTL")
NETGAUGED=$(readlink -f "$NETGAUGED")
KVER=$(ls /lib/modules | grep -- -amd64 | sort -V | tail -1)
[ -n "$KVER" ] && [ -e "/boot/vmlinuz-$KVER" ] || { echo "run-vm: no Debian kernel (run tests/verbs/install.sh)" >&2; exit 1; }

echo "run-vm: booting $KVER under TCG; results in $OUT"
t0=$(date +%s)
timeout "${VNG_TIMEOUT_S:-2400}" vng --disable-kvm --run "/boot/vmlinuz-$KVER" --user root \
    --memory 2G --cpus 2 --rwdir "$OUT" \
    --exec "VM_PARTS=${VM_PARTS:-all} bash $ROOT/tests/verbs/inside.sh $OUT $NGCTL $NETGAUGED" </dev/null >"$OUT/vng.log" 2>&1 || {
    echo "run-vm: the VM failed (exit $?); last lines:" >&2; tail -20 "$OUT/vng.log" >&2
    [ -f "$OUT/inside.log" ] && tail -30 "$OUT/inside.log" >&2
    exit 1; }
echo "run-vm: VM run took $(( $(date +%s) - t0 )) s"
[ -f "$OUT/DONE" ] || { echo "run-vm: the test script did not finish" >&2; tail -30 "$OUT/inside.log" >&2; exit 1; }

# Host-side checks of the "Done when" criteria.
cd "$ROOT"
NETGAUGED_VERBS_RESULTS="$OUT" cargo test --release --test verbs_vm -- --include-ignored --nocapture
