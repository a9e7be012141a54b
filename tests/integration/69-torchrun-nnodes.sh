#!/usr/bin/env bash
# Elastic node counts on one host, the same lines under Debian's torchrun 1.13 (bench/torchrun.py) and ddplaunch
# (issue 23):
#   item 2: `--nnodes 1:2 --master_port P` without a node rank runs as node 0 (torchrun's --node-rank default);
#           a second agent with --node-rank 1 joins it; a second agent that is node 0 too is refused in one line.
#   item 1: `--nnodes=1:2` with c10d and one launcher: the minimum (1) is in at once, so both wait the last call
#           (--rdzv-conf last_call_timeout=3; torchrun's default is 30 s) and start, not the join_timeout (600 s).
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || fail "python3-torch is needed to compare with torchrun"

TORCHRUN=(env -u OMP_NUM_THREADS "$PY" "$DDP_SRCDIR/bench/torchrun.py" --monitor_interval 0.1)
cat >"$TMP/w.py" <<'EOS'
import os, sys
e = os.environ
line = "rank %s world %s group_rank %s local_world %s\n" % (e["RANK"], e["WORLD_SIZE"], e["GROUP_RANK"],
                                                          e["LOCAL_WORLD_SIZE"])
with open(os.path.join(sys.argv[1], "rank%s" % e["RANK"]), "w") as f:
    f.write(line)
EOS
# two_nodes OUTDIR LAUNCHER...: node 0 with the line as given, node 1 with --node-rank 1 and node 0's address
two_nodes() {
    local out=$1 port
    shift
    hold_port port 2 # node 1 needs node 0's port; ddplaunch's node 0 also listens on port + 1
    mkdir -p "$out"
    "$@" --nnodes 1:2 --master_port "$port" --nproc_per_node 1 "$TMP/w.py" "$out" >"$out/n0.out" 2>"$out/n0.err" &
    local n0=$!
    sleep 1
    "$@" --nnodes 1:2 --node_rank 1 --master_addr 127.0.0.1 --master_port "$port" --nproc_per_node 1 "$TMP/w.py" \
        "$out" >"$out/n1.out" 2>"$out/n1.err"
    local s1=$?
    wait $n0
    local s0=$?
    [ "$s0$s1" = 00 ] || { cat "$out"/n*.err; fail "$*: node 0 exit $s0, node 1 exit $s1"; }
    cat "$out"/rank* >"$out/ranks"
}
two_nodes "$TMP/tr" timeout 120 "${TORCHRUN[@]}"
two_nodes "$TMP/dd" timeout 120 "$DDP"
expect_eq "torchrun's ranks" "$(tr '\n' '|' <"$TMP/tr/ranks")" \
    "rank 0 world 2 group_rank 0 local_world 1|rank 1 world 2 group_rank 1 local_world 1|"
diff "$TMP/tr/ranks" "$TMP/dd/ranks" || fail "ranks differ (torchrun <, ddplaunch >)"

# A second node 0 of the same job (same port, no node rank): refused, one line, exit 2; the first runs on.
hold_port port 2
"$DDP" --nnodes 1:2 --master_port "$port" --nproc_per_node 1 "$TMP/w.py" "$TMP" >"$TMP/a.out" 2>"$TMP/a.err" &
first=$!
for _ in $(seq 100); do grep -q 'waiting up to' "$TMP/a.err" && break; sleep 0.1; done
"$DDP" --nnodes 1:2 --master_port "$port" --nproc_per_node 1 "$TMP/w.py" "$TMP" >"$TMP/b.out" 2>"$TMP/b.err"
expect_eq "second node 0's status" "$?" 2
expect_eq "second node 0's message" "$(wc -l <"$TMP/b.err")" 1
expect_grep '^ddplaunch: error: node rank 0 is taken \(.*\): start this node with --node-rank 1$' "$TMP/b.err"
kill -0 $first 2>/dev/null || { cat "$TMP/a.err"; fail "the first node 0 did not wait for node 1"; }
kill -TERM $first
wait $first
echo "item 2: --nnodes 1:2 without a node rank: node 0 as torchrun; same ranks; a second node 0 refused"

# item 1: --nnodes=1:2, c10d, one launcher: starts after the last call, as torchrun
# last_call NAME LAUNCHER...: $TMP/NAME.s gets the seconds from the launch to the worker's start
last_call() {
    local name=$1 port t0
    shift
    hold_port port
    t0=$(date +%s.%N)
    "$@" --nnodes=1:2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:$port \
        --rdzv_conf last_call_timeout=3 "$TMP/start.py" >"$TMP/$name.out" 2>"$TMP/$name.err" ||
        { cat "$TMP/$name.err"; fail "$name: --nnodes=1:2 alone did not run"; }
    expect_grep '^started rank 0 world 1 ' "$TMP/$name.out"
    $PY -c 'import sys; print("%.1f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" \
        "$(cut -d' ' -f7 "$TMP/$name.out")" >"$TMP/$name.s"
}
cat >"$TMP/start.py" <<'EOS'
import os, time
os.write(1, ("started rank %s world %s at %.3f\n" % (os.environ["RANK"], os.environ["WORLD_SIZE"], time.time())).encode())
EOS
last_call tr timeout 300 "${TORCHRUN[@]}"
last_call dd timeout 300 "$DDP"
tr_s=$(cat "$TMP/tr.s")
dd_s=$(cat "$TMP/dd.s")
echo "item 1: --nnodes=1:2 alone, last_call_timeout=3: worker started after torchrun ${tr_s} s, ddplaunch ${dd_s} s"
$PY -c 'import sys; s = float(sys.argv[1]); sys.exit(0 if 3 <= s < 30 else 1)' "$dd_s" ||
    fail "ddplaunch started after ${dd_s} s: not the 3 s last call (at least 3 s, well below join_timeout)"
$PY -c 'import sys; s = float(sys.argv[1]); sys.exit(0 if s < 60 else 1)' "$tr_s" || fail "torchrun took ${tr_s} s"
grep -q 'last call' "$TMP/dd.err" || { cat "$TMP/dd.err"; fail "ddplaunch did not say it waits the last call"; }
echo ok
