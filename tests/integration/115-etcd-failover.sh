#!/usr/bin/env bash
# etcd-v3 rendezvous (issue 55): no node must survive. A three-member etcd cluster on loopback; three agents of
# two workers each, --nnodes 2:3, the same line on each. First a job that forms and ends (ranks 0-5, one
# MASTER_ADDR:PORT, the job's keys gone at the end). Then node N's agent and its workers are SIGKILLed (node 0,
# then in a second job node 2): the two others stop, agree, and run attempt 1 as a two-node job of world size 4
# within lost_after plus a restart, and exit 0. plan and doctor say which node can be lost. On today's main, --rdzv-backend etcd-v3 is refused (exit 2).
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_etcd.sh"
all=()
trap 'kill -KILL "${all[@]}" 2>/dev/null; etcd_stop_all; rm -rf "$TMP"' EXIT
etcd_cluster
export DDPLAUNCH_JOB_LOST_AFTER=3s

# plan and doctor say which node can be lost.
"$DDP" plan --nnodes 2:3 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" --no-python /bin/true >"$TMP/plan" 2>&1
expect_grep "^Nodes: 3, rendezvous: etcd-v3 at $ETCD_EPS \(node ranks are taken at join\)" "$TMP/plan"
expect_grep "^Can be lost: any node, node 0 included, and one etcd member" "$TMP/plan"
"$DDP" doctor --nnodes 2:3 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" >"$TMP/doctor" 2>&1
expect_eq "etcd members that answer" "$(grep -cE '^ok    etcd +member .*: etcd 3\.' "$TMP/doctor")" 3
expect_grep "^ok    etcd +quorum: a read of /ddplaunch/ succeeded \(3 of 3 members answer\)" "$TMP/doctor"
expect_grep "^ok    rendezvous +etcd-v3: any node can be lost, node 0 included" "$TMP/doctor"

# 1. A job that forms through etcd and ends.
pids=()
for i in 1 2 3; do
    "$DDP" --nnodes 2:3 --nproc-per-node 2 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" --rdzv-id one \
        --max-restarts 0 --no-python /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT"' \
        >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
    pids+=($!) all+=($!)
done
for i in 1 2 3; do wait "${pids[$((i - 1))]}" || { cat "$TMP/a$i.err"; fail "agent $i failed"; }; done
expect_eq "ranks" "$(cat "$TMP"/a*.out | sed 's/ at .*//' | sort | tr '\n' ' ')" \
    "rank 0 of 6 rank 1 of 6 rank 2 of 6 rank 3 of 6 rank 4 of 6 rank 5 of 6 "
expect_eq "one master" "$(cat "$TMP"/a*.out | sed 's/.* at //' | sort -u | wc -l)" 1
expect_eq "node ranks" "$(grep -ho 'joined as node [0-9]' "$TMP"/a*.err | sort | tr '\n' ' ')" \
    "joined as node 0 joined as node 1 joined as node 2 "
expect_eq "keys left in etcd" "$(etcdctl3 get --prefix /ddplaunch/one/ --keys-only | grep -c .)" 0

# 2. Node $1's agent and workers SIGKILLed during attempt 0: the others go on as two nodes.
failover() {
    local victim=$1 id=kill$1 i
    pids=()
    rm -f "$TMP"/w.* "$TMP"/b*.out
    for i in 0 1 2; do
        "$DDP" --nnodes 2:3 --nproc-per-node 2 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" --rdzv-id "$id" \
            --max-restarts 1 --no-python /bin/sh -c "
                if [ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then echo \$\$ >\"$TMP/w.\$RANK\"; exec sleep 600; fi
                echo \"attempt \$TORCHELASTIC_RESTART_COUNT rank \$RANK of \$WORLD_SIZE\"" \
            >"$TMP/b$i.out" 2>"$TMP/b$i.err" &
        pids+=($!) all+=($!)
        sleep 0.2
    done
    for _ in $(seq 300); do [ "$(ls "$TMP" | grep -c '^w\.')" = 6 ] && break; sleep 0.1; done
    expect_eq "workers of attempt 0" "$(ls "$TMP" | grep -c '^w\.')" 6
    local agent
    agent=$(grep -l "joined as node $victim " "$TMP"/b*.err | sed 's/.*b\([0-9]\)\.err/\1/')
    [ -n "$agent" ] || fail "no agent is node $victim"
    local t0=$SECONDS
    kill -KILL "${pids[$agent]}"
    kill -KILL "$(cat "$TMP/w.$((2 * victim))")" "$(cat "$TMP/w.$((2 * victim + 1))")"
    for i in 0 1 2; do
        [ "$i" = "$agent" ] && continue
        wait "${pids[$i]}" || { cat "$TMP/b$i.err"; fail "agent $i exited $? after node $victim was lost"; }
        expect_grep "node $victim lost \(its etcd lease expired\)" "$TMP/b$i.err"
    done
    local took=$((SECONDS - t0))
    [ $took -le 15 ] || fail "the two nodes took ${took}s to finish after node $victim was lost (lost_after 3s)"
    expect_eq "attempt 1" "$(cat "$TMP"/b*.out | sed 's/rank [0-9]* //' | sort -u | tr '\n' ' ')" "attempt 1 of 4 "
    expect_eq "attempt 1 ranks" "$(cat "$TMP"/b*.out | grep -c .)" 4
}
failover 0
failover 2
echo ok
