#!/bin/bash
# qperf tcp_bw through one shaped veth pair (MTU 9000, as bench/shaper_matrix.sh
# sets it up): a streaming peer for the shaper's delivered rate.
# Needs root. Usage: bench/shaper_qperf.sh htb1000mbit|tbf1000mbit|… [ARGS…]
#   ARGS: more qdisc (tbf) or class (htb) options, e.g. "burst 32k cburst 32k"
#   for htb (default: tc's burst, below one 9000 B frame at these rates).
set -u
q="$1"; shift; A=q8a; B=q8b
ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
ip netns add $A; ip netns add $B
ip link add ${A}v type veth peer name ${B}v
ip link set ${A}v netns $A name eth0; ip link set ${B}v netns $B name eth0
i=1
for n in $A $B; do
  ip -n $n link set lo up; ip -n $n addr add 10.208.0.$i/24 dev eth0; ip -n $n link set eth0 mtu 9000 up
  case $q in
   htb*) ip netns exec $n tc qdisc add dev eth0 root handle 1: htb default 10 2>/dev/null
         ip netns exec $n tc class add dev eth0 parent 1: classid 1:10 htb rate ${q#htb} ceil ${q#htb} "$@" 2>/dev/null;;
   tbf*) ip netns exec $n tc qdisc add dev eth0 root tbf rate ${q#tbf} burst 16kb latency 400ms "$@";;
  esac
  i=$((i+1))
done
ip netns exec $B qperf >/dev/null 2>&1 & S=$!
sleep 0.5
for k in 1 2 3 4 5; do
  ip netns exec $A qperf -t 3 -m 128K 10.208.0.2 tcp_bw 2>&1 | grep -E "bw" | tr -s ' ' | tr '\n' ' '; echo
done
kill $S; ip netns del $A; ip netns del $B
