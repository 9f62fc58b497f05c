# N namespace hosts on one Linux bridge, named by a hostlist, for netgauged
# at cluster scale on one machine. Sourced (needs root):
#   WORK=$(mktemp -d …); source scripts/cluster_hosts.sh
#   cluster_up TAG NET N          e.g. cluster_up h12n 98 16
# Host i (1-based) is the namespace ${TAG}NN (NN = i on two digits) with
# address 10.NET.0.i on eth0 (MTU 9000), its busy threads meant for core
# (i-1) mod cores; the bridge lives in namespace ${TAG}br. Every host
# resolves every host's name through /etc/netns/${TAG}NN/hosts (which `ip
# netns exec` mounts over /etc/hosts), so a hostlist "${TAG}[01-NN]" is the
# peers of every node. A cluster key is written to $WORK/key.
# On exit every pid in PIDS is killed, the namespaces and their /etc/netns
# directories are deleted and WORK is removed.
PIDS=()
CLUSTER_TAG=
CLUSTER_N=0
cluster_name() { printf '%s%02d' "$CLUSTER_TAG" "$1"; }
cluster_down() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "$CLUSTER_TAG" ]; then
        local i
        for i in $(seq 1 "$CLUSTER_N"); do
            ip netns del "$(cluster_name "$i")" 2>/dev/null || true
            rm -rf "/etc/netns/$(cluster_name "$i")"
        done
        ip netns del "${CLUSTER_TAG}br" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
cluster_up() {
    CLUSTER_TAG=$1
    local net=$2 i name hosts
    CLUSTER_N=$3
    trap cluster_down EXIT
    ip netns add "${CLUSTER_TAG}br"
    ip -n "${CLUSTER_TAG}br" link add br0 type bridge
    ip -n "${CLUSTER_TAG}br" link set br0 mtu 9000 up
    hosts="127.0.0.1 localhost"$'\n'
    for i in $(seq 1 "$CLUSTER_N"); do
        hosts+="10.$net.0.$i $(cluster_name "$i")"$'\n'
    done
    for i in $(seq 1 "$CLUSTER_N"); do
        name=$(cluster_name "$i")
        ip netns add "$name"
        ip link add "${CLUSTER_TAG}x$i" type veth peer name "${CLUSTER_TAG}y$i"
        ip link set "${CLUSTER_TAG}x$i" netns "$name" name eth0
        ip link set "${CLUSTER_TAG}y$i" netns "${CLUSTER_TAG}br"
        ip -n "${CLUSTER_TAG}br" link set "${CLUSTER_TAG}y$i" mtu 9000 master br0 up
        ip -n "$name" addr add "10.$net.0.$i/24" dev eth0
        ip -n "$name" link set lo up
        ip -n "$name" link set eth0 mtu 9000 up
        mkdir -p "/etc/netns/$name"
        printf '%s' "$hosts" > "/etc/netns/$name/hosts"
    done
    head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$WORK/key"
    chmod 600 "$WORK/key"
}
