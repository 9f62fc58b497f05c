#!/usr/bin/env bash
# netgauged's unit under a real systemd: boots a Debian 12 tree as a
# container (systemd-nspawn, systemd as PID 1, private network) with the
# unit, sysusers and tmpfiles files of systemd/ installed as shipped, and
# checks, from a unit inside the container:
#   1. Type=notify readiness: `systemctl start` returns once the daemon said
#      READY=1, the unit is active/running and the segment reads back;
#   2. the watchdog: a daemon whose publisher stalls (hidden flag
#      --test-stall-publisher-after-s, in a drop-in with WatchdogSec=4s) is
#      killed by systemd for a watchdog timeout and restarted;
#   3. a clean stop: `systemctl stop` ends it with Result=success well within
#      TimeoutStopSec (SIGTERM, not SIGKILL), and the runtime directory goes;
#   4. `systemd-analyze security netgauged.service`: exposure ≤ 2.0.
# Results go to OUT/result.txt (one "ok"/"FAIL" line per check); the
# script exits non-zero if any check failed. Needs root, debootstrap and
# systemd-container (apt-get install -y debootstrap systemd-container); the
# tree is made once (about 40 s, from the Debian mirror) and reused.
#   bash tests/systemd/nspawn.sh [ROOT_DIR] [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=${1:-/var/tmp/netgauged-nspawn/root}
OUT=${2:-$(mktemp -d /tmp/netgauged-nspawn.XXXXXX)}
mkdir -p "$OUT"
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 2; }
command -v systemd-nspawn >/dev/null || { echo "needs systemd-container" >&2; exit 2; }

if [ ! -x "$ROOT/lib/systemd/systemd" ]; then
    command -v debootstrap >/dev/null || { echo "needs debootstrap" >&2; exit 2; }
    mkdir -p "$(dirname "$ROOT")"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libibverbs1 bookworm \
        "$ROOT" http://deb.debian.org/debian >"$OUT/debootstrap.log" 2>&1
fi
# The binary links libibverbs (the verbs transports).
if ! ls "$ROOT"/usr/lib/x86_64-linux-gnu/libibverbs.so.1 >/dev/null 2>&1; then
    chroot "$ROOT" apt-get install -y --no-install-recommends libibverbs1 >"$OUT/apt.log" 2>&1
fi

cargo build --release --bin netgauged --bin ngctl >/dev/null 2>&1
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release

# Install as a package would.
install -m 0755 "$BIN/netgauged" "$BIN/ngctl" "$ROOT/usr/local/bin/"
install -m 0644 systemd/netgauged.service "$ROOT/etc/systemd/system/netgauged.service"
install -D -m 0644 systemd/netgauged.sysusers "$ROOT/usr/lib/sysusers.d/netgauged.conf"
install -D -m 0644 systemd/netgauged.tmpfiles "$ROOT/usr/lib/tmpfiles.d/netgauged.conf"
mkdir -p "$ROOT/etc/netgauged"
# One node whose only peer does not answer: the daemon starts, publishes
# its heartbeat and retries the peer; nothing here needs a second host.
cat >"$ROOT/etc/netgauged/netgauged.toml" <<'EOT'
node = "nspawn01"
listen = "127.0.0.1:7470"
udp_port = 7471
key_file = "/etc/netgauged/cluster.key"
probe_cpu = 0
[[peer]]
name = "nspawn02"
address = "127.0.0.1:7480"
EOT
(umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$ROOT/etc/netgauged/cluster.key")
rm -f "$ROOT/etc/systemd/system/multi-user.target.wants/netgauged.service"

# The checks, run once the container has booted.
cat >"$ROOT/usr/local/bin/netgauged-checks" <<'EOS'
#!/bin/bash
exec >/out/checks.log 2>&1
set -x
R=/out/result.txt; : >"$R"
ok() { echo "ok   $*" >>"$R"; }
fail() { echo "FAIL $*" >>"$R"; }
show() { systemctl show -p "$1" --value netgauged; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# 1. Readiness.
t0=$(now_ms)
if systemctl start netgauged; then
    t1=$(now_ms)
    st="$(show ActiveState)/$(show SubState)"
    if [ "$st" = active/running ] && ngctl status --shm /run/netgauged/segment >/out/status.txt 2>&1; then
        ok "readiness: systemctl start returned after READY=1 in $((t1 - t0)) ms, $st, segment read back"
    else
        fail "readiness: $st, ngctl status: $(tail -1 /out/status.txt)"
    fi
else
    fail "readiness: systemctl start failed ($(show Result))"
fi
stat -c '%n %U %a %F' /run/netgauged /run/netgauged/* >/out/files.txt 2>&1

# 2. Watchdog: the publisher stalls 3 s after the start; WatchdogSec=4s.
mkdir -p /run/systemd/system/netgauged.service.d
cat >/run/systemd/system/netgauged.service.d/stall.conf <<'EOT'
[Service]
WatchdogSec=4s
ExecStart=
ExecStart=/usr/local/bin/netgauged --config /etc/netgauged/netgauged.toml --test-stall-publisher-after-s 3
EOT
systemctl daemon-reload
systemctl restart netgauged
n0=$(show NRestarts); t0=$(now_ms); restarted=
for _ in $(seq 1 300); do
    if [ "$(show NRestarts)" -gt "$n0" ]; then restarted=1; break; fi
    sleep 0.1
done
t1=$(now_ms)
if [ -n "$restarted" ] && journalctl -b -u netgauged --no-pager | grep -q "Watchdog timeout"; then
    ok "watchdog: stuck publisher, killed for a watchdog timeout and restarted $((t1 - t0)) ms after the restart (NRestarts $n0 -> $(show NRestarts))"
else
    fail "watchdog: no watchdog restart within 30 s (NRestarts $(show NRestarts), Result $(show Result))"
fi
rm -rf /run/systemd/system/netgauged.service.d
systemctl daemon-reload
systemctl restart netgauged
sleep 2

# 3. Clean stop.
pid=$(show MainPID)
t0=$(now_ms)
systemctl stop netgauged
t1=$(now_ms)
res=$(show Result); status=$(show ExecMainStatus)
stopped=$(journalctl -b -u netgauged --no-pager _PID="$pid" | grep -c "netgauged stopped" || true)
killed=$(journalctl -b -u netgauged --no-pager | grep -c "stop-sigterm timed out" || true)
if [ "$res" = success ] && [ "$status" = 0 ] && [ "$stopped" -ge 1 ] && [ "$killed" = 0 ] \
    && [ $((t1 - t0)) -lt 2000 ] && [ ! -e /run/netgauged ]; then
    ok "clean stop: pid $pid stopped and exited 0 $((t1 - t0)) ms after systemctl stop (SIGTERM; no stop timeout), Result=$res, /run/netgauged removed"
else
    fail "clean stop: $((t1 - t0)) ms, Result=$res ExecMainStatus=$status, 'stopped' lines $stopped, stop timeouts $killed, /run/netgauged $(ls -d /run/netgauged 2>&1)"
fi

# 4. Exposure.
systemd-analyze security --no-pager netgauged.service >/out/security.txt 2>&1
exp=$(sed -n 's/.*Overall exposure level for netgauged.service: \([0-9.]*\).*/\1/p' /out/security.txt)
if [ -n "$exp" ] && awk -v e="$exp" 'BEGIN { exit !(e <= 2.0) }'; then
    ok "systemd-analyze security: exposure $exp"
else
    fail "systemd-analyze security: exposure ${exp:-unknown}"
fi

journalctl -b -u netgauged --no-pager >/out/journal.txt 2>&1
echo done >>/out/checks.done
systemctl poweroff
EOS
chmod 0755 "$ROOT/usr/local/bin/netgauged-checks"
cat >"$ROOT/etc/systemd/system/netgauged-checks.service" <<'EOT'
[Unit]
Description=netgauged unit checks
After=systemd-sysusers.service systemd-tmpfiles-setup.service

[Service]
Type=simple
ExecStart=/usr/local/bin/netgauged-checks

[Install]
WantedBy=multi-user.target
EOT
mkdir -p "$ROOT/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/netgauged-checks.service \
    "$ROOT/etc/systemd/system/multi-user.target.wants/netgauged-checks.service"

# nspawn wants /run/systemd/nspawn on a tmpfs.
if ! mountpoint -q /run/systemd/nspawn 2>/dev/null; then
    mkdir -p /run/systemd/nspawn
    mount -t tmpfs tmpfs /run/systemd/nspawn
fi
rm -f "$OUT/result.txt" "$OUT/checks.done"
timeout 180 systemd-nspawn -q --register=no --keep-unit --private-network \
    --capability=CAP_IPC_LOCK -D "$ROOT" --bind="$OUT:/out" -b >"$OUT/boot.log" 2>&1 || true
echo "results in $OUT"
if [ ! -s "$OUT/result.txt" ]; then
    echo "FAIL no result (see $OUT/boot.log, $OUT/checks.log)"
    exit 1
fi
cat "$OUT/result.txt"
! grep -q '^FAIL' "$OUT/result.txt" && [ -e "$OUT/checks.done" ]
