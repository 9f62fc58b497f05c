#!/usr/bin/env bash
# Runs INSIDE the Soft-RoCE VM (as root): rxe on a dummy netdev, perftest,
# qperf, our probes and the error paths. Results go to $1 (the rwdir).
# Usage: inside.sh OUT NGCTL
set -u
OUT=$1
NGCTL=$2
IP=10.77.0.1
exec >"$OUT/inside.log" 2>&1
set -x
date +%s >"$OUT/t_start"

modprobe rdma_rxe || { echo "no rdma_rxe module" >"$OUT/FAILED"; exit 1; }
ip link add dummy0 type dummy
ip addr add $IP/24 dev dummy0
ip link set dummy0 up
ip link set lo up
rdma link add rxe0 type rxe netdev dummy0 || { echo "rxe set-up failed" >"$OUT/FAILED"; exit 1; }
sleep 1
ibv_devinfo -v -d rxe0 >"$OUT/devinfo.txt" 2>&1
grep -m1 -o -w constant_tsc /proc/cpuinfo >"$OUT/constant_tsc.txt" || echo "absent" >"$OUT/constant_tsc.txt"

# --- the reference tools and our probes ----------------------------------
# Every verbs probe times with the TSC (`--clock tsc`): the emulated CPU does
# not flag it invariant, and the fallback CLOCK_MONOTONIC_RAW is a system call
# on this guest (clocksource hpet, about 1 µs a reading); perftest reads the
# TSC unconditionally. The TSC is checked by two calibrations first.
cat /sys/devices/system/clocksource/clocksource0/current_clocksource >"$OUT/clocksource.txt"
"$NGCTL" --clock tsc clock >"$OUT/clock.txt" 2>&1
"$NGCTL" clock >"$OUT/clock_auto.txt" 2>&1

run_probe() { # name port extra-serve-args -- probe args
    local name=$1 port=$2; shift 2
    local sargs=()
    while [ "$1" != "--" ]; do sargs+=("$1"); shift; done; shift
    "$NGCTL" --clock tsc serve --listen $IP:$port --idle-exit-s 10 "${sargs[@]}" 2>"$OUT/$name.serve.log" &
    local srv=$!
    for _ in $(seq 100); do grep -q answering "$OUT/$name.serve.log" && break; sleep 0.1; done
    "$NGCTL" --clock tsc probe --peer $IP:$port --json --raw --resamples 50 "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
    kill $srv 2>/dev/null; wait $srv 2>/dev/null
}

# Latency: three rounds, each ib_write_lat at 2 and 8 B then our probe of
# 1-64 B; the checks compare medians over the rounds (the emulated guest's
# run-to-run spread is about 20 %). Round 0 warms the freshly booted
# emulator (the first round of either tool ran up to 1.8x slower) and is
# not compared.
for r in 0 1 2 3; do
    for s in 2 8; do
        ib_write_lat -d rxe0 -x 1 -n 1000 -s $s >/dev/null 2>&1 &
        sleep 1.5
        ib_write_lat -d rxe0 -x 1 -n 1000 -s $s $IP >"$OUT/ib_write_lat_${s}_r$r.txt" 2>&1
        wait
    done
    run_probe lat_r$r 745$r --transport rdma --device rxe0 --gid-index 1 -- \
        --transport rdma --device rxe0 --gid-index 1 --max-size 64
done
for r in 1 2 3; do
    ib_write_bw -d rxe0 -x 1 -n 300 -s 65536 >/dev/null 2>&1 &
    sleep 1.5
    ib_write_bw -d rxe0 -x 1 -n 300 -s 65536 $IP >"$OUT/ib_write_bw_r$r.txt" 2>&1
    wait
done
qperf >/dev/null 2>&1 &
QP=$!
sleep 1.5
timeout 60 qperf -v -t 5 -cm1 $IP rc_rdma_write_lat >"$OUT/qperf.txt" 2>&1 \
  || timeout 60 qperf -v -t 5 $IP rc_rdma_write_lat >>"$OUT/qperf.txt" 2>&1
kill $QP; wait

run_probe rdma 7471 --transport rdma --device rxe0 --gid-index 1 -- \
    --transport rdma --device rxe0 --gid-index 1 --max-size 65536
run_probe msg 7472 --transport msg --device rxe0 --gid-index 1 -- \
    --transport msg --device rxe0 --gid-index 1 --eager-max 512 --max-size 8192

# --- error paths ----------------------------------------------------------
# 1. a dead peer: the server is killed mid-probe.
"$NGCTL" serve --transport rdma --device rxe0 --gid-index 1 --listen $IP:7473 2>"$OUT/dead.serve.log" &
SRV=$!
sleep 1
( sleep 4; kill -9 $SRV ) &
t0=$(date +%s)
"$NGCTL" probe --transport rdma --device rxe0 --gid-index 1 --peer $IP:7473 \
    --max-size 65536 --timeout-ms 300 --resamples 0 >/dev/null 2>"$OUT/dead.err"
echo $? >"$OUT/dead.rc"
echo $(( $(date +%s) - t0 )) >"$OUT/dead.seconds"
wait

# 2. registration refused by RLIMIT_MEMLOCK (root has CAP_IPC_LOCK, which
#    ignores the limit: drop it).
( ulimit -l 64
  setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock \
    "$NGCTL" probe --transport rdma --device rxe0 --gid-index 1 --peer $IP:7474 \
    --max-size 65536 --resamples 0 >/dev/null 2>"$OUT/memlock.err"
  echo $? >"$OUT/memlock.rc" )

# 3. no such device; and the other transports still work.
"$NGCTL" probe --transport rdma --device nosuch --peer $IP:7475 >/dev/null 2>"$OUT/nodev.err"
echo $? >"$OUT/nodev.rc"
"$NGCTL" serve --transport msg --device nosuch --listen $IP:7476 >/dev/null 2>"$OUT/nodev_serve.err"
echo $? >"$OUT/nodev_serve.rc"
"$NGCTL" serve --transport udp --listen $IP:7477 --idle-exit-s 3 2>/dev/null &
sleep 2
"$NGCTL" probe --transport udp --peer $IP:7477 --max-size 256 --max-reps 6 --resamples 0 --json \
    >"$OUT/udp.json" 2>"$OUT/udp.err"
echo $? >"$OUT/udp.rc"
wait

date +%s >"$OUT/t_end"
echo ok >"$OUT/DONE"
