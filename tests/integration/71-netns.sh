#!/usr/bin/env bash
# Issue 7, several nodes without Slurm: three network namespaces joined by a bridge (10.231.0.0/24, in a
# private "hub" namespace: the host's own network is not touched) play three nodes. Each runs ddplaunch with
# static rendezvous (--nnodes 3 --node-rank i --master-addr 10.231.0.1 --master-port P) and one gloo worker:
#  1. ranks 0-2 come up in their own namespaces, GROUP_RANK = node rank, all_reduce sums are right;
#  2. killing node 2's agent (SIGKILL) takes its worker with it, and nodes 0 and 1 notice within seconds through
#     the agents' control channel (launcher/nodes/coord.c; the workers make no collective call after their first one,
#     so gloo cannot tell them): node 0 says "node 2 lost", stops every node, and both agents exit non-zero;
#  3. killing node 1's worker (SIGKILL) with max_restarts = 1: node 0 stops every node and decides the restart
#     once; all three nodes run attempt 1 (TORCHELASTIC_RESTART_COUNT=1 on every node) to the end;
#  4. nnodes 2:3: node 2's agent dies in attempt 0; nodes 0 and 1 go on as a 2-node job (world size 2);
#  5. on_timeout = downsize, 2 workers per node: node 1's workers hang silently (stall, heartbeat = output); node 0
#     decides to downsize and every node runs attempt 1 with 1 worker, world size 6 -> 3.
# The workers of 2-4 idle after their first all_reduce: only the agents' coordination can stop them.
# Root only (ip netns); skipped otherwise.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_netns.sh"
have_torch || skip "no torch in $PY"
netns_setup ddpit 10.231.0 ddpit0 3

cat >"$TMP/worker.py" <<'PYEOF'
import os, sys, time
import torch
import torch.distributed as dist
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
steps = int(sys.argv[1] if attempt == 0 or len(sys.argv) < 3 else sys.argv[2])
idle = len(sys.argv) > 3 and sys.argv[3] == "idle" and attempt == 0  # no collective after the first
dist.init_process_group("gloo")
rank, w = dist.get_rank(), dist.get_world_size()
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_RESTART_COUNT"]
netns = os.readlink("/proc/self/ns/net")
for step in range(steps):
    if idle and step > 0:
        time.sleep(0.1)
        continue
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    if step == 0:
        os.write(1, ("RANKINFO " + " ".join(f"{k}={os.environ.get(k, '-')}" for k in keys) +
                     f" NETNS={netns} sum={t.item():g} want={w * (w + 1) / 2:g} pid={os.getpid()}\n").encode())
    time.sleep(0.1)
os.write(1, f"rank {rank} finished {steps} steps in attempt {attempt} sum={t.item():g}\n".encode())
PYEOF

port=29400
NNODES=$NODES
run_node() { # run_node I [ddplaunch options] -- worker args: ddplaunch on node I in the background -> $TMP/nI.*
    local i=$1 opts=()
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    ip netns exec "$(ns "$i")" env ${DDPLAUNCH_JOB_SECRET:+DDPLAUNCH_JOB_SECRET=$DDPLAUNCH_JOB_SECRET} GLOO_SOCKET_IFNAME=ddpit0 PYTHONUNBUFFERED=1 \
        "$DDP" --nnodes $NNODES --node-rank "$i" --master-addr 10.231.0.1 --master-port $port --nproc-per-node 1 \
        "${opts[@]}" "$TMP/worker.py" "$@" >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
}

# 1. Three nodes, one job. Before the real node 1, an agent with another job secret tries to join as node 1:
#    node 0 refuses it, it exits 1 saying why, and the job goes on waiting for the real one.
run_node 0 -- 5
DDPLAUNCH_JOB_SECRET=not-this-jobs-secret-at-all run_node 1 -- 5
wait "${pids[1]}"
rc=$?
[ $rc = 1 ] || { cat "$TMP/n1.err"; fail "an agent with the wrong secret exited with $rc, want 1"; }
expect_grep "node 1 cannot join node 0: .*authentication failed" "$TMP/n1.err"
expect_grep "refused a node from 10.231.0.2" "$TMP/n0.err"
for i in 1 2; do run_node $i -- 5; done
for i in 0 1 2; do
    wait "${pids[$i]}"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP"/n*.out "$TMP"/n*.err; fail "node $i: ddplaunch exited with $rc"; }
done
for i in 0 1 2; do
    line=$(grep -o 'RANKINFO.*' "$TMP/n$i.out") || { cat "$TMP/n$i.out" "$TMP/n$i.err"; fail "node $i: no worker output"; }
    want_ns=$(ip netns exec "$(ns "$i")" readlink /proc/self/ns/net)
    for kv in "RANK=$i" "LOCAL_RANK=0" "GROUP_RANK=$i" "WORLD_SIZE=3" "GROUP_WORLD_SIZE=3" \
        "MASTER_ADDR=10.231.0.1" "MASTER_PORT=$port" "NETNS=$want_ns" "sum=6 want=6"; do
        [[ " $line " == *" $kv "* ]] || fail "node $i: expected $kv in: $line"
    done
    expect_grep "rank $i finished 5 steps in attempt 0 sum=6" "$TMP/n$i.out"
done
expect_grep "node 1 joined" "$TMP/n0.err"
expect_grep "node 2 joined" "$TMP/n0.err"
expect_grep "node 1: joined node 0" "$TMP/n1.err"
echo "3 nodes in 3 network namespaces: ranks 0-2, sums right"

# 2. Kill node 2's agent in the middle of the job: the other nodes must notice, not hang.
port=29401
for i in 0 1 2; do run_node $i -- 600 600 idle; done
for _ in $(seq 1 240); do
    [ "$(cat "$TMP"/n*.out 2>/dev/null | grep -c RANKINFO)" = 3 ] && break
    sleep 0.25
done
expect_eq "workers running" "$(cat "$TMP"/n*.out | grep -c RANKINFO)" 3
wpid=$(sed -n 's/.*RANKINFO RANK=2 .* pid=\([0-9]*\)$/\1/p' "$TMP/n2.out")
agent=$(ip netns pids "$(ns 2)" | while read -r p; do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = ddplaunch ] && [ "$(awk '{print $4}' /proc/$p/stat)" != 1 ] && echo "$p"; done | head -n 1)
[ -n "$agent" ] || fail "cannot find node 2's ddplaunch"
kill -KILL "$agent"
killed_at=$(date +%s%N)
for i in 0 1; do
    wait "${pids[$i]}"
    rc=$?
    [ $rc != 0 ] || fail "node $i: ddplaunch exited 0 although node 2 died"
done
secs=$((($(date +%s%N) - killed_at) / 1000000))
wait "${pids[2]}" 2>/dev/null
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# the worker's shim sees its agent die (a loaded machine may take a moment): it must be gone within 5 s
for _ in $(seq 1 50); do [ -n "$wpid" ] && alive "$wpid" || break; sleep 0.1; done
[ -n "$wpid" ] && alive "$wpid" && { ps -o pid,ppid,stat,cmd -p "$wpid"; cat "$TMP/n2.err"; fail "node 2's worker $wpid outlived its agent"; }
grep -q 'finished' "$TMP"/n*.out && fail "a worker finished although node 2 was gone"
[ "$secs" -lt 15000 ] || fail "nodes 0 and 1 took ${secs} ms to notice"
expect_grep "node 2 lost" "$TMP/n0.err"
expect_grep "node 0 says stop .*node 2 lost|node 0 says stop" "$TMP/n1.err"
echo "node 2's agent killed: nodes 0 and 1 stopped in ${secs} ms"

# 3. Kill node 1's worker (SIGKILL) in attempt 0: every node stops its workers and starts attempt 1, which
#    completes everywhere with the full world size.
port=29402
rm -f "$TMP"/n*.out "$TMP"/n*.err
for i in 0 1 2; do run_node $i --max-restarts 1 -- 600 5 idle; done
for _ in $(seq 1 240); do
    [ "$(cat "$TMP"/n*.out 2>/dev/null | grep -c RANKINFO)" = 3 ] && break
    sleep 0.25
done
expect_eq "workers running" "$(cat "$TMP"/n*.out | grep -c RANKINFO)" 3
wpid=$(sed -n 's/.*RANKINFO RANK=1 .* pid=\([0-9]*\)$/\1/p' "$TMP/n1.out")
[ -n "$wpid" ] || fail "no pid for rank 1"
kill -KILL "$wpid"
for i in 0 1 2; do
    wait "${pids[$i]}"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP/n$i.out" "$TMP/n$i.err"; fail "node $i: ddplaunch exited with $rc after the restart"; }
    expect_grep "attempt 0: restarting" "$TMP/n$i.err"
    expect_grep "rank $i finished 5 steps in attempt 1 sum=6" "$TMP/n$i.out"
    # the same attempt numbers on every node: 0 then 1, nothing else
    expect_eq "node $i: restart counts" "$(grep -o 'TORCHELASTIC_RESTART_COUNT=[0-9]*' "$TMP/n$i.out" | tr '\n' ' ')" \
        "TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_RESTART_COUNT=1 "
done
expect_grep "rank 1 .*killed by SIGKILL|rank 1 .*signal 9|rank 1 .*SIGKILL" "$TMP/n1.err"
expect_grep "node 1 failed" "$TMP/n0.err"
expect_grep "node 0 says stop" "$TMP/n2.err"
expect_grep "node 0's decision" "$TMP/n2.err"
[ "$(grep -c 'restarting' "$TMP/n0.err")" = 1 ] || fail "node 0 decided more than one restart"
echo "rank 1 killed: all 3 nodes restarted together (TORCHELASTIC_RESTART_COUNT 0 then 1 on each) and attempt 1 completed"

# 4. nnodes 2:3: node 2's agent dies; nodes 0 and 1 go on without it as attempt 1 with world size 2.
port=29403
NNODES=2:3
rm -f "$TMP"/n*.out "$TMP"/n*.err
for i in 0 1 2; do run_node $i --max-restarts 1 -- 600 5 idle; done
for _ in $(seq 1 240); do
    [ "$(cat "$TMP"/n*.out 2>/dev/null | grep -c RANKINFO)" = 3 ] && break
    sleep 0.25
done
expect_eq "workers running" "$(cat "$TMP"/n*.out | grep -c RANKINFO)" 3
agent=$(ip netns pids "$(ns 2)" | while read -r p; do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = ddplaunch ] && [ "$(awk '{print $4}' /proc/$p/stat)" != 1 ] && echo "$p"; done | head -n 1)
[ -n "$agent" ] || fail "cannot find node 2's ddplaunch"
kill -KILL "$agent"
for i in 0 1; do
    wait "${pids[$i]}"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP/n$i.out" "$TMP/n$i.err"; fail "node $i: ddplaunch exited with $rc after losing node 2"; }
    expect_grep "rank $i finished 5 steps in attempt 1 sum=3" "$TMP/n$i.out"
    expect_grep "RANKINFO RANK=$i .*WORLD_SIZE=2 GROUP_WORLD_SIZE=2 .*TORCHELASTIC_RESTART_COUNT=1 " "$TMP/n$i.out"
done
wait "${pids[2]}" 2>/dev/null
expect_grep "node 2 lost" "$TMP/n0.err"
expect_grep "attempt 1: on 2 of 3 nodes, world size 2" "$TMP/n0.err"
echo "nnodes 2:3: node 2 lost, nodes 0 and 1 finished attempt 1 as a 2-node job"

# 5. Downsizing decided once, applied everywhere.
port=29405
NNODES=$NODES
rm -f "$TMP"/n*.out "$TMP"/n*.err
# The healthy ranks of attempt 0 tick for 20 s, well past the 5 s stall (a busy machine may hold a tick back
# for seconds: only node 1, silent for good, is a hang).
W='echo "DS RANK=$RANK WORLD_SIZE=$WORLD_SIZE RC=$TORCHELASTIC_RESTART_COUNT"
if [ "$GROUP_RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exec sleep 90; fi
n=8; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && n=40
i=0; while [ $i -lt $n ]; do echo tick; sleep 0.5; i=$((i + 1)); done'
for i in 0 1 2; do
    ip netns exec "$(ns "$i")" env DDPLAUNCH_TIMEOUT_STALL=5s DDPLAUNCH_TIMEOUT_HEARTBEAT=output \
        DDPLAUNCH_RESTART_ON_TIMEOUT=downsize "$DDP" --nnodes $NODES --node-rank "$i" --master-addr 10.231.0.1 \
        --master-port $port --nproc-per-node 2 --max-restarts 1 --no-python /bin/sh -c "$W" \
        >"$TMP/n$i.out" 2>"$TMP/n$i.err" &
    pids[$i]=$!
done
for i in 0 1 2; do
    wait "${pids[$i]}"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP/n$i.out" "$TMP/n$i.err"; fail "node $i: ddplaunch exited with $rc after downsizing"; }
    expect_eq "node $i: attempt 0" "$(grep -c "DS RANK=.* WORLD_SIZE=6 RC=0" "$TMP/n$i.out")" 2
    expect_eq "node $i: attempt 1" "$(grep -c "DS RANK=$i WORLD_SIZE=3 RC=1" "$TMP/n$i.out")" 1
done
expect_grep "node 1 failed \(status 124\).*no rank wrote any output" "$TMP/n0.err"
expect_grep "downsizing 2 -> 1 workers" "$TMP/n0.err"
expect_grep "restarting as attempt 1 with 1 worker here, world size 3 \(node 0's decision\)" "$TMP/n2.err"
echo "downsize: node 1 hung, every node went from 2 workers (world 6) to 1 (world 3) in attempt 1"
exit 0
