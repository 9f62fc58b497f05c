#!/bin/sh
# Builds the netgauge reader library and installs it:
#   $LIBDIR/libnetgauge.so.1 (+ libnetgauge.so symlink), $LIBDIR/libnetgauge.a,
#   $INCLUDEDIR/netgauge.h, $LIBDIR/pkgconfig/netgauge.pc
# then runs ldconfig (as root).
#
# Environment:
#   PREFIX       install prefix (default /usr/local)
#   LIBDIR       default $PREFIX/lib;  INCLUDEDIR  default $PREFIX/include
#   NG_LIB_DIR   take prebuilt libnetgauge.{so,a} from there instead of running
#                `cargo build --release -p netgauge-ffi`
#   NG_NO_LDCONFIG=1  skip ldconfig
set -eu

PREFIX=${PREFIX:-/usr/local}
LIBDIR=${LIBDIR:-$PREFIX/lib}
INCLUDEDIR=${INCLUDEDIR:-$PREFIX/include}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
version=$(sed -n 's/^version *= *"\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)

if [ -z "${NG_LIB_DIR:-}" ]; then
    (cd "$root" && cargo build --release -p netgauge-ffi)
    NG_LIB_DIR=${CARGO_TARGET_DIR:-$root/target}/release
fi
for f in libnetgauge.so libnetgauge.a; do
    [ -f "$NG_LIB_DIR/$f" ] || { echo "install.sh: $NG_LIB_DIR/$f not found" >&2; exit 1; }
done

install -d "$LIBDIR" "$LIBDIR/pkgconfig" "$INCLUDEDIR"
install -m 0755 "$NG_LIB_DIR/libnetgauge.so" "$LIBDIR/libnetgauge.so.1"
ln -sf libnetgauge.so.1 "$LIBDIR/libnetgauge.so"
install -m 0644 "$NG_LIB_DIR/libnetgauge.a" "$LIBDIR/libnetgauge.a"
install -m 0644 "$here/include/netgauge.h" "$INCLUDEDIR/netgauge.h"
install -m 0644 "$here/include/netgauge_select.h" "$INCLUDEDIR/netgauge_select.h"
sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@LIBDIR@|$LIBDIR|g" \
    -e "s|@INCLUDEDIR@|$INCLUDEDIR|g" -e "s|@VERSION@|$version|g" \
    "$here/netgauge.pc.in" > "$LIBDIR/pkgconfig/netgauge.pc"
chmod 0644 "$LIBDIR/pkgconfig/netgauge.pc"

if [ "${NG_NO_LDCONFIG:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null 2>&1; then
    ldconfig
fi
echo "installed netgauge $version into $PREFIX (lib: $LIBDIR, include: $INCLUDEDIR)"
