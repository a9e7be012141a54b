# Several "nodes" on one host for integration tests 71-73: network namespaces joined by a bridge that lives in a
# private "hub" namespace (the host's own network is not touched). Source it after lib.sh, then:
#   netns_setup PREFIX SUBNET IFNAME NODES
# e.g. `netns_setup ddpit 10.231.0 ddpit0 3`: namespaces PREFIX-n0-$$ .. PREFIX-n(NODES-1)-$$, node I with IFNAME at
# SUBNET.(I+1)/24 and lo up. It sets HUB and NODES, defines `ns I` (node I's namespace name), and replaces lib.sh's
# EXIT trap with one that kills what still runs in the nodes' namespaces (ours: the test started it), deletes the
# namespaces and $TMP (with DDP_TEST_VERBOSE set, it first shows the end of $TMP/n*.err). Skips the test (77) when
# not root, without iproute2, or where namespaces or bridges cannot be made.
netns_cleanup() {
    [ -n "${DDP_TEST_VERBOSE:-}" ] && tail -n 20 "$TMP"/n*.err
    for i in $(seq 0 $((NODES - 1))); do
        # Processes still in a node's namespace are ours (started by the test): end them before deleting it.
        for pid in $(ip netns pids "$(ns "$i")" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        ip netns del "$(ns "$i")" 2>/dev/null
    done
    ip netns del "$HUB" 2>/dev/null
    rm -rf "$TMP"
}

netns_setup() {
    NETNS_PREFIX=$1
    local subnet=$2 ifname=$3
    NODES=$4
    [ "$(id -u)" = 0 ] || skip "needs root (ip netns)"
    command -v ip >/dev/null || skip "ip (iproute2) not installed"
    HUB=$NETNS_PREFIX-hub-$$
    trap netns_cleanup EXIT
    ip netns add "$HUB" || skip "cannot create network namespaces here"
    ip -n "$HUB" link add br0 type bridge || skip "no bridge support in this kernel"
    ip -n "$HUB" link set br0 up
    for i in $(seq 0 $((NODES - 1))); do
        ip netns add "$(ns "$i")"
        ip -n "$HUB" link add "v$i" type veth peer name "$ifname" netns "$(ns "$i")"
        ip -n "$HUB" link set "v$i" master br0 up
        ip -n "$(ns "$i")" addr add "$subnet.$((i + 1))/24" dev "$ifname"
        ip -n "$(ns "$i")" link set "$ifname" up
        ip -n "$(ns "$i")" link set lo up
    done
}

ns() { echo "$NETNS_PREFIX-n$1-$$"; }
