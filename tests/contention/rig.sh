#!/usr/bin/env bash
# A rig whose bandwidth sharing is known: namespace hosts, each with its own
# veth into a Linux bridge that lives in a switch namespace, shaped by tbf
# on the host's egress and on the bridge port towards the host, so k flows
# out of (or into) one host share its rate. The two-bridge variant puts the
# first half of the hosts on bridge A and the rest on bridge B, joined by a
# veth pair shaped both ways: a known bisection.
#
#   rig.sh up star N RATE            N hosts on one bridge; RATE a tc rate
#                                    (50mbit) or "none" (unshaped)
#   rig.sh up two N RATE CORE_RATE   N hosts over two bridges joined by a
#                                    link of CORE_RATE (hosts at RATE)
#   rig.sh hosts                     one line per host: namespace address bridge
#   rig.sh down                      delete every namespace of the rig
#
# PREFIX (environment, default h11c) names the namespaces: ${PREFIX}h1 …
# ${PREFIX}hN and ${PREFIX}sw; SUBNET (default 10.111.0) their addresses
# (host i is SUBNET.i/24). Needs root. tbf's queue limit is large (16 MB) so
# a burst of datagrams waits for the shaper instead of being dropped: what
# a host sends is limited by the shaper alone.
set -euo pipefail
PREFIX=${PREFIX:-h11c}
SUBNET=${SUBNET:-10.111.0}
SW=${PREFIX}sw
BURST=${BURST:-16kb}
LIMIT=${LIMIT:-16mb}

shape() { # NS DEV RATE
    [ "$3" = none ] && return 0
    ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$BURST" limit "$LIMIT"
}

host() { # I BRIDGE RATE
    local i=$1 br=$2 rate=$3 ns=${PREFIX}h$1
    ip netns add "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$SW"
    ip -n "$ns" addr add "$SUBNET.$i/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
    ip -n "$SW" link set "p$i" master "$br" up
    shape "$ns" eth0 "$rate"
    shape "$SW" "p$i" "$rate"
}

bridge() { # NAME
    ip -n "$SW" link add "$1" type bridge
    # No STP delay, no learning surprises: forward at once.
    ip -n "$SW" link set "$1" type bridge forward_delay 0 stp_state 0
    ip -n "$SW" link set "$1" up
}

up() {
    local kind=$1 n=$2 rate=$3 core=${4:-}
    ip netns add "$SW"
    ip -n "$SW" link set lo up
    bridge bra
    if [ "$kind" = two ]; then
        [ -n "$core" ] || { echo "rig.sh up two N RATE CORE_RATE" >&2; exit 2; }
        bridge brb
        ip -n "$SW" link add cora type veth peer name corb
        ip -n "$SW" link set cora master bra up
        ip -n "$SW" link set corb master brb up
        shape "$SW" cora "$core"
        shape "$SW" corb "$core"
    fi
    for i in $(seq 1 "$n"); do
        local br=bra
        if [ "$kind" = two ] && [ "$i" -gt $((n / 2)) ]; then br=brb; fi
        host "$i" "$br" "$rate"
    done
}

hosts() {
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}h[0-9]+$" | sort -V); do
        local i=${ns#"${PREFIX}h"} br
        br=$(ip -n "$SW" -o link show "p$i" 2>/dev/null | sed -n 's/.* master \([^ ]*\).*/\1/p')
        echo "$ns $SUBNET.$i ${br:-?}"
    done
}

down() {
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}(h[0-9]+|sw)$"); do
        ip netns del "$ns"
    done
}

case "${1:-}" in
up) shift; down; up "$@" ;;
hosts) hosts ;;
down) down ;;
*) sed -n '2,22p' "$0" >&2; exit 2 ;;
esac
