#!/usr/bin/env bash
# Runs INSIDE the Soft-RoCE VM (as root): rxe on a dummy netdev, perftest,
# qperf, our probes and the error paths. Results go to $1 (the rwdir).
# Usage: inside.sh OUT NGCTL NETGAUGED   (env VM_PARTS: a comma list of
# ref, probe, errors, overlap, fanout, daemon; default all)
set -u
OUT=$1
NGCTL=$2
NETGAUGED=${3:-}
PARTS=${VM_PARTS:-all}
part() { [ "$PARTS" = all ] || [[ ",$PARTS," == *",$1,"* ]]; }
IP=10.77.0.1
exec >"$OUT/inside.log" 2>&1
# Every traced command with its wall-clock time (where a run's time goes).
PS4='+ $EPOCHREALTIME '
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

# Until `ngctl serve` says it answers (in its log $1), at most $2 seconds.
answering() { # serve-log limit_s
    local t0=$(date +%s)
    until grep -q answering "$1" 2>/dev/null; do
        [ $(( $(date +%s) - t0 )) -lt $2 ] || return 1
        sleep 0.1
    done
}
# A perftest server and its client; the client retries while the server is
# not listening yet (an emulated CPU can take seconds), and every wait has a
# deadline. A fixed pause rather than a wait for the server's port: the
# client's own start-up (seconds on the emulated CPU) then overlaps the
# server's.
perftest_pair() { # out-file tool args...
    local out=$1; shift
    timeout 90 "$@" >/dev/null 2>&1 &
    local srv=$!
    for _ in 1 2 3 4 5; do
        sleep 1.5
        timeout 60 "$@" $IP >"$OUT/$out" 2>&1 && break
    done
    kill $srv 2>/dev/null; wait $srv 2>/dev/null
}
run_probe() { # name port extra-serve-args -- probe args
    local name=$1 port=$2; shift 2
    local sargs=()
    while [ "$1" != "--" ]; do sargs+=("$1"); shift; done; shift
    "$NGCTL" --clock tsc serve --listen $IP:$port --idle-exit-s 10 "${sargs[@]}" 2>"$OUT/$name.serve.log" &
    local srv=$!
    # Until it listens (it calibrates the TSC and opens the device first).
    for _ in $(seq 300); do grep -q answering "$OUT/$name.serve.log" && break; sleep 0.1; done
    timeout 300 "$NGCTL" --clock tsc probe --peer $IP:$port --json --raw --resamples 50 "$@" \
        >"$OUT/$name.json" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
    kill $srv 2>/dev/null; wait $srv 2>/dev/null
}

if part ref; then
# Latency: seven rounds, each ib_write_lat at 2 and 8 B then our probe of
# 1-64 B; the checks compare each tool's best round (the emulated guest
# switches between an 11 us and a 20 us mode from one run to the next, for
# both tools). Round 0 warms the freshly booted emulator (the first round of
# either tool ran up to 1.8x slower) and is not compared.
for r in 0 1 2 3 4 5 6 7; do
    for s in 2 8; do
        perftest_pair ib_write_lat_${s}_r$r.txt ib_write_lat -d rxe0 -x 1 -n 1000 -s $s
    done
    run_probe lat_r$r 745$r --transport rdma --device rxe0 --gid-index 1 -- \
        --transport rdma --device rxe0 --gid-index 1 --max-size 64
done
# Bandwidth: seven paired rounds, ib_write_bw at 64 KiB then our sweep of the
# bandwidth-bound sizes (the guest's bandwidth has modes too; each pair is
# compared, then the median ratio).
for r in 1 2 3 4 5 6 7; do
    perftest_pair ib_write_bw_r$r.txt ib_write_bw -d rxe0 -x 1 -n 300 -s 65536
    run_probe bw_r$r 746$r --transport rdma --device rxe0 --gid-index 1 -- \
        --transport rdma --device rxe0 --gid-index 1 --min-size 8192 --max-size 65536
done
qperf >/dev/null 2>&1 &
QP=$!
sleep 1.5
timeout 60 qperf -v -t 5 -cm1 $IP rc_rdma_write_lat >"$OUT/qperf.txt" 2>&1 \
  || timeout 60 qperf -v -t 5 $IP rc_rdma_write_lat >>"$OUT/qperf.txt" 2>&1
kill $QP; wait
fi

if part probe; then
run_probe rdma 7471 --transport rdma --device rxe0 --gid-index 1 -- \
    --transport rdma --device rxe0 --gid-index 1 --max-size 65536
# The two-sided probe in three rounds (msg, msg_r2, msg_r3): a round the
# guest spends in its slow mode can bury the eager/rendezvous step (one
# such round: 13 us at 2 B, 27 us at 1 B, 38 us at 512 B); the checks take
# the majority.
run_probe msg 7472 --transport msg --device rxe0 --gid-index 1 -- \
    --transport msg --device rxe0 --gid-index 1 --eager-max 512 --max-size 8192
for r in 2 3; do
    run_probe msg_r$r 749$r --transport msg --device rxe0 --gid-index 1 -- \
        --transport msg --device rxe0 --gid-index 1 --eager-max 512 --max-size 8192
done
fi

# --- error paths ----------------------------------------------------------
if part errors; then
# 1. a dead peer: the server is killed mid-probe.
"$NGCTL" serve --transport rdma --device rxe0 --gid-index 1 --listen $IP:7473 2>"$OUT/dead.serve.log" &
SRV=$!
answering "$OUT/dead.serve.log" 30
# Killed as soon as the session starts: a sweep to 64 KiB takes only
# seconds, and the probe must meet a dead peer, not finish first.
( for _ in $(seq 400); do grep -q 'session with' "$OUT/dead.serve.log" 2>/dev/null && break; sleep 0.05; done
  kill -9 $SRV ) &
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
"$NGCTL" serve --transport udp --listen $IP:7477 --idle-exit-s 3 2>"$OUT/udp.serve.log" &
SRV=$!
answering "$OUT/udp.serve.log" 30
"$NGCTL" probe --transport udp --peer $IP:7477 --max-size 256 --max-reps 6 --resamples 0 --json \
    >"$OUT/udp.json" 2>"$OUT/udp.err"
echo $? >"$OUT/udp.rc"
kill $SRV 2>/dev/null; wait
fi

# --- CPU overlap (Bell et al.) per transport: RDMA write, verbs messages, UDP
# on the same device; bench/contention.md reads overlap_<kind>.json.
if part overlap; then
port=7480
for kind in rdma msg udp; do
    dev=()
    [ "$kind" = udp ] || dev=(--device rxe0 --gid-index 1)
    "$NGCTL" --clock tsc serve --transport $kind "${dev[@]}" --listen $IP:$port --idle-exit-s 10 \
        2>"$OUT/overlap_$kind.serve.log" &
    SRV=$!
    answering "$OUT/overlap_$kind.serve.log" 30
    timeout 300 "$NGCTL" --clock tsc overlap --transport $kind "${dev[@]}" --peer $IP:$port \
        --rounds 30 --sizes 1,1024,4096,16384,65536 --json >"$OUT/overlap_$kind.json" \
        2>"$OUT/overlap_$kind.err"
    echo $? >"$OUT/overlap_$kind.rc"
    kill $SRV 2>/dev/null; wait
    port=$((port + 1))
done
fi

# --- LogfP fan-out over three RDMA-write QPs to one server ------------------
# One `ngctl serve` answers the three sessions from one thread; published
# into a segment and read back with `ngctl dump`.
if part fanout; then
"$NGCTL" serve --transport rdma --device rxe0 --gid-index 1 --listen $IP:7478 --idle-exit-s 10 \
    2>"$OUT/fanout.serve.log" &
SRV=$!
# Until it listens (it opens the device first), at most 30 s.
for _ in $(seq 60); do grep -q answering "$OUT/fanout.serve.log" && break; sleep 0.5; done
t0=$(date +%s)
"$NGCTL" probe --transport rdma --device rxe0 --gid-index 1 --peer $IP:7478 --fanout-peers 3 \
    --max-size 64 --max-reps 12 --resamples 50 --json --raw --publish --shm /tmp/ng-fanout-seg \
    >"$OUT/fanout.json" 2>"$OUT/fanout.err"
echo $? >"$OUT/fanout.rc"
echo $(( $(date +%s) - t0 )) >"$OUT/fanout.seconds"
"$NGCTL" dump --json --shm /tmp/ng-fanout-seg >"$OUT/fanout.dump.json" 2>>"$OUT/fanout.err"
kill $SRV 2>/dev/null; wait $SRV 2>/dev/null
fi

# --- the daemon over rdma and msg -------------------------------------------
# Daemons on the one rxe0 (distinct names, ports and segments). Phase 1:
# vma <-> vmb over rdma and msg, alone (two busy-polling ends at a time is
# what a 2-CPU emulated guest can time). Phase 2: vma restarts (its entries
# come back from the state file) with two more peers: vmc over rdma, so vma
# fans out over two QPs, and vmd, whose [verbs] device does not exist: one
# log line, it still measures vma over udp, and it refuses vma's rdma.
# A node drives or serves, never both, so phase 1 is four sweeps one after
# the other; their duration on an emulated guest varies by a factor of ten
# with the host's load (bench/verbs.md). PHASE_S bounds each phase's wait: a
# guard against a hang, not a timing criterion. The rounds are 4 s (a pair
# meets once a cycle and the direction alternates by cycle, so both
# directions take two cycles: 64 s with a fan-out round every other round,
# not 160 s at the default 10 s), and a member found absent (vmc and vmd
# in phase 1, a daemon not yet listening) is tried again after 2 to 8 s,
# not 60 s to 15 min. The daemons keep the clock
# they pick themselves (CLOCK_MONOTONIC_RAW here): daemons started at once
# on the guest calibrate the TSC too far apart to accept it (bench/verbs.md).
PHASE_S=${PHASE_S:-600}
if part daemon && [ -n "$NETGAUGED" ]; then
# What else runs on the guest's two CPUs as the daemons start, and when
# phase 1 ends: a process left over from an earlier part that polls would
# disturb every sweep of the phase.
ps -eo pid,ppid,stat,pcpu,time,args --sort=-pcpu | head -25 >"$OUT/ps_daemon0.txt" 2>&1
D=$(mktemp -d /tmp/ngvd.XXXXXX)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >$D/key
chmod 600 $D/key
daemon_cfg() { # name port device max_size peers...
    local name=$1 port=$2 dev=$3 max=$4; shift 4
    cat <<EOC
node = "$name"
listen = "$IP:$port"
udp_port = $((port + 1))
shm = "$D/seg_$name"
key_file = "$D/key"
state_file = "$D/state_$name.json"
lock_memory = false
max_size_bytes = $max
max_reps = 16
recheck_interval_s = 3600.0
budget_bytes_per_s = 100000000
fanout_interval_s = 8.0
[schedule]
round_s = 4.0
backoff_min_s = 2.0
backoff_max_s = 8.0
EOC
    [ "$dev" != none ] && printf '[verbs]\ndevice = "%s"\ngid_index = 1\neager_max_bytes = 1024\n' "$dev"
    for p in "$@"; do # name:port:transports
        IFS=: read -r pn pp pt <<<"$p"
        printf '[[peer]]\nname = "%s"\naddress = "%s:%s"\ntransports = [%s]\n' "$pn" $IP "$pp" "$pt"
    done
}
# One cluster of four: every node lists the other three (the cluster
# schedule's rounds follow from the member list, which all must share);
# phase 1 runs vma and vmb alone, the others' absence is backed off.
daemon_cfg vma 7480 rxe0 16384 'vmb:7482:"rdma", "msg"' 'vmc:7484:"rdma"' 'vmd:7486:"rdma"' >$D/vma.toml
daemon_cfg vmb 7482 rxe0 16384 'vma:7480:"rdma", "msg"' 'vmc:7484:"rdma"' 'vmd:7486:"udp"' >$D/vmb.toml
daemon_cfg vmc 7484 rxe0 16384 'vma:7480:"rdma"' 'vmb:7482:"rdma"' 'vmd:7486:"udp"' >$D/vmc.toml
daemon_cfg vmd 7486 nosuch 256 'vma:7480:"udp", "rdma", "msg"' 'vmb:7482:"udp"' 'vmc:7484:"udp"' >$D/vmd.toml
cp $D/*.toml "$OUT/"
declare -A PID
start() { # name config log
    # The daemons' schedule at debug (a line or two per round: who drives,
    # what, why a round idles or a partner declines), so a phase that does
    # not converge shows why.
    RUST_LOG=netgauged=info,netgauged::daemon=debug "$NETGAUGED" --config $D/$2.toml \
        2>>"$OUT/daemon_$3.log" &
    PID[$1]=$!
}
# until WANT (python dict literal: node -> [(peer, transport)] published,
# "fanout": node, "tried": {node: [(peer, transport)]} whose status names
# the attempt's error) holds, or LIMIT seconds; the dumps stay in $OUT.
wait_for() { # limit want
    local t0=$(date +%s)
    while [ $(( $(date +%s) - t0 )) -lt $1 ]; do
        sleep 2
        python3 - "$OUT" "$NGCTL" "$D" "$2" <<'EOP' && return 0
import json, subprocess, sys
out, ngctl, d, want = sys.argv[1], sys.argv[2], sys.argv[3], eval(sys.argv[4])
fan = want.pop("fanout", None)
for node, pairs in want.pop("tried", {}).items():
    r = subprocess.run([ngctl, "status", "--json", "--shm", f"{d}/seg_{node}"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(1)
    peers = json.loads(r.stdout)["daemon"]["peers"]
    if not set(pairs) <= {(p["name"], p["transport"]) for p in peers if p.get("last_error")}:
        sys.exit(1)
for node, pairs in want.items():
    r = subprocess.run([ngctl, "dump", "--json", "--shm", f"{d}/seg_{node}"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(1)
    open(f"{out}/daemon_{node}.json", "w").write(r.stdout)
    es = json.loads(r.stdout)["entries"]
    if not set(pairs) <= {(e["peer"], e["transport"]) for e in es}:
        sys.exit(1)
    if node == fan and not any(e["transport"] == "rdma" and e.get("logfp") for e in es):
        sys.exit(1)
EOP
    done
    return 1
}
t0=$(date +%s)
start vma vma vma; start vmb vmb vmb
wait_for $PHASE_S '{"vma": [("vmb", "rdma"), ("vmb", "msg")], "vmb": [("vma", "rdma"), ("vma", "msg")]}'
echo $? >"$OUT/daemon1.rc"
echo $(( $(date +%s) - t0 )) >"$OUT/daemon1.seconds"
cp "$OUT/daemon_vma.json" "$OUT/daemon1_vma.json"; cp "$OUT/daemon_vmb.json" "$OUT/daemon1_vmb.json"
ps -eo pid,ppid,stat,pcpu,time,args --sort=-pcpu | head -25 >"$OUT/ps_daemon1.txt" 2>&1
# Phase 1's logs as they stand: phase 2 appends to the same files.
for n in vma vmb vmc vmd; do cp "$OUT/daemon_$n.log" "$OUT/daemon1_$n.log" 2>/dev/null || : >"$OUT/daemon1_$n.log"; done
if [ "$(cat "$OUT/daemon1.rc")" != 0 ]; then
    # Phase 2 builds on phase 1's entries: the run has failed already,
    # another PHASE_S would only delay the report.
    kill -TERM ${PID[vma]} ${PID[vmb]}; wait ${PID[vma]} ${PID[vmb]}
    echo 1 >"$OUT/daemon2.rc"
else
kill -TERM ${PID[vma]}; wait ${PID[vma]}
t1=$(date +%s)
start vma vma vma; start vmc vmc vmc; start vmd vmd vmd
wait_for $PHASE_S '{"vma": [("vmb", "rdma"), ("vmb", "msg"), ("vmc", "rdma")], "vmc": [("vma", "rdma")], "vmd": [("vma", "udp")], "fanout": "vma", "tried": {"vma": [("vmd", "rdma")]}}'
echo $? >"$OUT/daemon2.rc"
echo $(( $(date +%s) - t1 )) >"$OUT/daemon2.seconds"
for n in vma vmb vmc vmd; do "$NGCTL" status --json --shm $D/seg_$n >"$OUT/daemon_$n.status.json" 2>&1; done
kill -TERM ${PID[vma]} ${PID[vmb]} ${PID[vmc]} ${PID[vmd]}
wait ${PID[vma]} ${PID[vmb]} ${PID[vmc]} ${PID[vmd]}
fi
# Every session over and every daemon gone: no RC queue pair may be left.
rdma resource show qp >"$OUT/daemon_qps.txt" 2>&1
echo $(( $(date +%s) - t0 )) >"$OUT/daemon.seconds"
fi

date +%s >"$OUT/t_end"
echo ok >"$OUT/DONE"
