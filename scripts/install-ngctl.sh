#!/usr/bin/env bash
# Install ngctl and netgauged with ngctl's man pages and shell completions,
# generated from the CLI definition by the binary itself (`ngctl man`,
# `ngctl completions`). Run after `cargo build --release`, as root for the
# default PREFIX.
# usage: [PREFIX=/usr/local] bash scripts/install-ngctl.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${PREFIX:-/usr/local}"
T="${CARGO_TARGET_DIR:-target}/release"
for b in ngctl netgauged; do
    [ -x "$T/$b" ] || { echo "install-ngctl: $T/$b missing (cargo build --release)" >&2; exit 1; }
done
install -d "$PREFIX/bin" "$PREFIX/share/man/man1" \
    "$PREFIX/share/bash-completion/completions" "$PREFIX/share/zsh/site-functions" \
    "$PREFIX/share/fish/vendor_completions.d"
install -m 0755 "$T/ngctl" "$T/netgauged" "$PREFIX/bin/"
"$T/ngctl" man -q "$PREFIX/share/man/man1"
"$T/ngctl" completions bash > "$PREFIX/share/bash-completion/completions/ngctl"
"$T/ngctl" completions zsh > "$PREFIX/share/zsh/site-functions/_ngctl"
"$T/ngctl" completions fish > "$PREFIX/share/fish/vendor_completions.d/ngctl.fish"
echo "installed ngctl, netgauged, $(ls "$PREFIX/share/man/man1"/ngctl*.1 | wc -l) man pages and bash/zsh/fish completions under $PREFIX"
