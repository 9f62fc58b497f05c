# Two hosts for netgauged on one machine: network namespaces ${TAG}a
# (10.NET.0.1) and ${TAG}b (10.NET.0.2) joined by a veth pair (eth0 in
# each), a tbf qdisc on both sides, and a cluster key in $WORK/key.
# Sourced by scripts/main-job.sh and bench/*.sh; needs root.
#   WORK=$(mktemp -d …); source scripts/two_hosts.sh
#   two_hosts_up TAG NET MTU TBF_ARGS…     e.g. two_hosts_up ngx$$ 90 9000 rate 1gbit burst 64kb latency 200ms
# On exit every pid in PIDS is killed, the namespaces are deleted and WORK
# is removed.
PIDS=()
TAG=
two_hosts_down() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$TAG" ]; then
        ip netns del "${TAG}a" 2>/dev/null || true
        ip netns del "${TAG}b" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
two_hosts_up() {
    TAG=$1
    local net=$2 mtu=$3 n
    shift 3
    trap two_hosts_down EXIT
    ip netns add "${TAG}a"
    ip netns add "${TAG}b"
    ip link add "${TAG}x" type veth peer name "${TAG}y"
    ip link set "${TAG}x" netns "${TAG}a" name eth0
    ip link set "${TAG}y" netns "${TAG}b" name eth0
    ip -n "${TAG}a" addr add "10.$net.0.1/24" dev eth0
    ip -n "${TAG}b" addr add "10.$net.0.2/24" dev eth0
    for n in a b; do
        ip -n "${TAG}$n" link set lo up
        ip -n "${TAG}$n" link set eth0 mtu "$mtu" up
        ip netns exec "${TAG}$n" tc qdisc add dev eth0 root tbf "$@"
    done
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/key"
    chmod 600 "$WORK/key"
}
