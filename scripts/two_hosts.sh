# Two hosts for netgauged on one machine: network namespaces ${TAG}a
# (10.NET.0.1) and ${TAG}b (10.NET.0.2) joined by a veth pair (eth0 in
# each), a tbf qdisc on both sides, and a cluster key in $WORK/key.
# Sourced by scripts/main-job.sh and bench/*.sh; needs root.
#   WORK=$(mktemp -d …); source scripts/two_hosts.sh
#   two_hosts_up TAG NET MTU TBF_ARGS…     e.g. two_hosts_up ngx$$ 90 9000 rate 1gbit burst 64kb latency 200ms
# On exit every pid in PIDS is killed, the namespaces are deleted and WORK
# is removed.
#   two_hosts_configs SEG [PEER_LINES]   writes $WORK/a.toml and $WORK/b.toml
PIDS=()
TAG=
NET=
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
    NET=$2
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
# The two daemons' configurations, $WORK/a.toml and $WORK/b.toml: host n
# is node-n on 10.NET.0.1 (a) or .2 (b), port 7470, with its segment at
# $WORK/SEG-n, its state at $WORK/state-n.json, the key $WORK/key, and the
# other host as its one [[peer]], to which PEER_LINES are added. Between
# the two the caller's function two_hosts_settings ME prints the host's
# own settings (ME: 1 for a, 2 for b).
two_hosts_configs() {
    local seg=$1 peer_lines=${2:-} n me other on
    for n in a b; do
        if [ $n = a ]; then me=1; other=2; on=b; else me=2; other=1; on=a; fi
        {
            cat <<EOT
node = "node-$n"
listen = "10.$NET.0.$me:7470"
shm = "$WORK/$seg-$n"
key_file = "$WORK/key"
state_file = "$WORK/state-$n.json"
EOT
            two_hosts_settings "$me"
            cat <<EOT

[[peer]]
name = "node-$on"
address = "10.$NET.0.$other:7470"
EOT
            if [ -n "$peer_lines" ]; then echo "$peer_lines"; fi
        } > "$WORK/$n.toml"
    done
}
