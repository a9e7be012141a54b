#!/usr/bin/env bash
# etcd-v3 rendezvous across "hosts" (issue 55): three nodes, each in its own network and UTS namespace, and a
# three-member etcd cluster in a fourth, joined by a bridge (lib_netns.sh). Two workers a node, --nnodes 2:3,
# the same line on each node. The job forms with one MASTER_ADDR, a node's own address on the bridge; then node 0
# is lost whole (every process in its namespace SIGKILLed, its agent and workers): the two others stop, agree,
# and run attempt 1 as a two-node job of world size 4, and exit 0. Root only (ip netns); skipped otherwise.
# The etcd members bind fixed ports in their private namespace, where nothing else runs.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_etcd.sh"
. "$DDP_SRCDIR/tests/integration/lib_netns.sh"
netns_setup ddpet 10.233.0 ddpet0 4
HOSTS=(etcd-a etcd-b etcd-c)
E=10.233.0.4 # the etcd "host": namespace 3
CLUSTER="e0=http://$E:2380,e1=http://$E:2480,e2=http://$E:2580"
EPS="$E:2379,$E:2479,$E:2579"
for i in 0 1 2; do
    c=$((2379 + 100 * i))
    ip netns exec "$(ns 3)" etcd --name "e$i" --data-dir "$TMP/etcd$i" --listen-client-urls "http://$E:$c" \
        --advertise-client-urls "http://$E:$c" --listen-peer-urls "http://$E:$((c + 1))" \
        --initial-advertise-peer-urls "http://$E:$((c + 1))" --initial-cluster "$CLUSTER" \
        --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 >"$TMP/etcd$i.log" 2>&1 &
    disown "$!" # ended by lib_netns.sh's cleanup, with no "Killed" line from the shell
done
healthy=no
for _ in $(seq 200); do
    ip netns exec "$(ns 0)" env ETCDCTL_API=3 etcdctl --endpoints "$EPS" endpoint health >/dev/null 2>&1 &&
        { healthy=yes; break; }
    sleep 0.1
done
[ $healthy = yes ] || { tail -5 "$TMP"/etcd*.log; fail "the etcd cluster in namespace 3 did not become healthy"; }

# on_node I CMD...: CMD in node I's network namespace and a UTS namespace with its own host name, in the background
pids=()
on_node() {
    local i=$1
    shift
    ip netns exec "$(ns "$i")" unshare --uts sh -c 'hostname "$0"; exec "$@"' "${HOSTS[$i]}" "$@" \
        >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
}
for i in 0 1 2; do
    on_node "$i" "$DDP" --nnodes 2:3 --nproc-per-node 2 --rdzv-backend etcd-v3 --rdzv-endpoint "$EPS" \
        --rdzv-id hosts --max-restarts 1 --set job.lost_after=3s --no-python /bin/sh -c "
            echo \"attempt \$TORCHELASTIC_RESTART_COUNT rank \$RANK of \$WORLD_SIZE at \$MASTER_ADDR on \$(hostname)\"
            [ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ] && exec sleep 600; exit 0"
    sleep 0.2
done
for _ in $(seq 300); do [ "$(cat "$TMP"/n*.out | grep -c '^attempt 0')" = 6 ] && break; sleep 0.1; done
expect_eq "workers of attempt 0" "$(cat "$TMP"/n*.out | grep -c '^attempt 0')" 6
master=$(cat "$TMP"/n*.out | sed -n 's/^attempt 0 .* at \([^ ]*\) on .*/\1/p' | sort -u)
expect_eq "one MASTER_ADDR" "$(echo "$master" | wc -l)" 1
[[ $master == 10.233.0.[123] ]] || fail "MASTER_ADDR is '$master', not a node's address on the bridge"
for i in 0 1 2; do # each node's workers ran on that node
    expect_eq "node $i's workers on ${HOSTS[$i]}" "$(grep -c "on ${HOSTS[$i]}\$" "$TMP/n$i.out")" 2
done
victim=$(grep -l "joined as node 0 " "$TMP"/n*.err | sed 's/.*n\([0-9]\)\.err/\1/')
[ -n "$victim" ] || fail "no agent joined as node 0"
t0=$SECONDS
disown "${pids[$victim]}"
for pid in $(ip netns pids "$(ns "$victim")"); do kill -KILL "$pid" 2>/dev/null; done
for i in 0 1 2; do
    [ "$i" = "$victim" ] && continue
    wait "${pids[$i]}" || { cat "$TMP/n$i.err"; fail "node $i's agent exited $? after node 0 was lost"; }
    expect_grep "node 0 lost \(its etcd lease expired\)" "$TMP/n$i.err"
done
took=$((SECONDS - t0))
[ $took -le 15 ] || fail "the two nodes took ${took}s to finish after node 0 was lost (lost_after 3s)"
expect_eq "attempt 1" "$(cat "$TMP"/n*.out | sed -n 's/^attempt 1 rank [0-9]* \(of [0-9]*\) .*/\1/p' | sort -u)" "of 4"
expect_eq "attempt 1 ranks" "$(cat "$TMP"/n*.out | grep -c '^attempt 1')" 4
echo "ok: node 0 (${HOSTS[$victim]}) lost across network namespaces; the other two ran attempt 1 in ${took}s"
