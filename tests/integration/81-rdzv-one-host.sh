#!/usr/bin/env bash
# Many agents of one c10d job on one host (issue 25): the first serves, the others find the endpoint's port held
# and join it without asking who holds it (no "reserved by another process" line, at start or at exit), every
# worker gets a distinct rank, and node 0's wait names the missing nodes as ranges ("missing 2-4, 7"), not one
# number each. Then a joined agent is SIGKILLed: every other agent stops, and no worker, shim or agent is left.
. "$DDP_SRCDIR/tests/integration/lib.sh"
N=6
all=() # every agent started: none outlives a failed check
trap 'kill "${all[@]}" 2>/dev/null; rm -rf "$TMP"' EXIT

# 1. A job that forms: N agents, the same command line each.
hold_port port 2 # agents of one host name one endpoint; static node 0 listens on port + 1 too
pids=()
for i in $(seq 1 $N); do
    "$DDP" --nnodes $N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id one \
        --max-restarts 0 --no-python /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
    pids+=($!) all+=($!)
done
for i in $(seq 1 $N); do wait "${pids[$((i - 1))]}" || { cat "$TMP/a$i.err"; fail "agent $i failed"; }; done
cat "$TMP"/a*.out | sort >"$TMP/ranks"
expect_eq "ranks" "$(tr '\n' ' ' <"$TMP/ranks")" "$(for r in $(seq 0 $((N - 1))); do printf 'rank %d of %d ' $r $N; done)"
expect_eq "agents serving" "$(grep -l 'waiting up to' "$TMP"/a*.err | wc -l)" 1
expect_eq "agents joining" "$(grep -l 'joining the rendezvous' "$TMP"/a*.err | wc -l)" $((N - 1))
if grep -l "reserved by another process" "$TMP"/a*.err; then fail "a joining agent reported the port's holder"; fi

# 2. node 0 waiting: nodes 1, 5 and 6 of 0-9 joined (static ranks); the others are named as ranges.
hold_port port 2
"$DDP" --nnodes 10 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" --rdzv-conf join_timeout=7 \
    --no-python --nproc-per-node 1 /bin/true >"$TMP/n0" 2>&1 &
n0=$!
all+=($n0)
for r in 1 5 6; do
    "$DDP" --nnodes 10 --node-rank $r --master-addr 127.0.0.1 --master-port "$port" --rdzv-conf join_timeout=7 \
        --no-python --nproc-per-node 1 /bin/true >"$TMP/n$r" 2>&1 &
    all+=($!)
done
wait $n0
expect_eq "node 0's status when nodes are missing" "$?" 75
wait
expect_grep '^ddplaunch: node 0: waiting for 6 more nodes to join \(4 of 10 up; missing 2-4, 7-9; 5s of 7s\)$' "$TMP/n0"

# 3. A joined agent SIGKILLed once every worker runs: the others stop, and nothing of the job is left.
hold_port port 2
pids=()
for i in $(seq 1 $N); do
    "$DDP" --nnodes $N --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id kill \
        --max-restarts 0 --no-python /bin/sh -c "echo \$\$ >\"$TMP/w.\$RANK\"; exec sleep 600" \
        >"$TMP/k$i.out" 2>"$TMP/k$i.err" &
    pids+=($!) all+=($!)
done
for _ in $(seq 600); do [ "$(ls "$TMP" | grep -c '^w\.')" = $N ] && break; sleep 0.05; done
expect_eq "workers running" "$(ls "$TMP" | grep -c '^w\.')" $N
srv=$(grep -l 'waiting up to' "$TMP"/k*.err | sed 's/.*k\([0-9]*\)\.err/\1/')
victim=$((srv == 1 ? 2 : 1))
kill -KILL "${pids[$((victim - 1))]}"
for i in $(seq 1 $N); do
    [ $i = $victim ] && continue
    wait "${pids[$((i - 1))]}" && fail "agent $i exited 0 after a node was killed"
done
wait "${pids[$((victim - 1))]}" 2>/dev/null
for _ in $(seq 100); do
    left=0
    for f in "$TMP"/w.*; do kill -0 "$(cat "$f")" 2>/dev/null && left=$((left + 1)); done
    [ $left = 0 ] && break
    sleep 0.1
done
expect_eq "workers left after the job stopped" "$left" 0
expect_grep "node [0-9]+ lost" "$TMP/k$srv.err"
if grep -l "reserved by another process" "$TMP"/k*.err; then fail "a stopped agent reported the port's holder"; fi
echo ok
