# Sourced by the bench scripts, from the repository root: sets NGCTL to the
# absolute path of the ngctl to run, $NGCTL when it is set, else this
# checkout's release build (built first).
NGCTL=${NGCTL:-}
if [ -z "$NGCTL" ]; then
    cargo build --release --bin ngctl >&2
    NGCTL="${CARGO_TARGET_DIR:-target}/release/ngctl"
fi
NGCTL=$(readlink -f "$NGCTL")
