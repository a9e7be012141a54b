#!/usr/bin/env bash
# Issue 54, the records: exit codes a requeue script can trust and records that say what happened.
#   item 2: a refused launch (busy port, bad spec value, GPUs that are not there) with --log-dir still writes
#           summary.json (result refused, exit.source launcher); a worker's own 75 is exit.source worker with
#           its rank; examples/requeue.sh retries a launcher's verdict (a SIGTERM stop) but not a worker's 75.
#   item 4: a launcher killed by SIGKILL: report says launcher-killed and when its last record was written.
#   item 5: Ctrl-C during a suspected hang: no "progress again", and report names no root cause (summary.json
#           has none either); the stopped ranks are grey in the SVG, not amber.
#   item 6: two nodes sharing one log_dir: run directories named _node0_/_node1_, summary.json's node_rank.
#   item 7: the console names the job as report does (the spec's name), not the script.
. "$DDP_SRCDIR/tests/integration/lib.sh"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
sumval() { $PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"; }
only_run() { local d=("$1"/*/); [ ${#d[@]} = 1 ] && [ -e "${d[0]}summary.json" ] || fail "no one run with summary.json in $1: ${d[*]}"; echo "${d[0]%/}"; }

# --- item 2: refusals are recorded
# a listener on a port of its own (a busy explicit port), until the test's shell ends
$PY -c 'import os, socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1])); os.rename(sys.argv[1] + ".tmp", sys.argv[1])  # port held
while os.path.exists("/proc/" + sys.argv[2]): time.sleep(0.5)' "$TMP/busy" $$ </dev/null >/dev/null 2>&1 &
for _ in $(seq 200); do [ -s "$TMP/busy" ] && break; sleep 0.05; done
busy=$(cat "$TMP/busy")
refused() { # NAME ARGS...: refused with 2, its summary.json says so
    local name=$1
    shift
    "$DDP" --log-dir "$TMP/$name" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    [ $rc = 2 ] || { cat "$TMP/$name.err"; fail "$name: exit $rc, want 2"; }
    local run
    run=$(only_run "$TMP/$name") || exit 1
    expect_eq "$name: result" "$(sumval "$run/summary.json" 'd["result"]')" refused
    expect_eq "$name: exit" "$(sumval "$run/summary.json" '(d["exit"]["code"], d["exit"]["source"], d["attempts"])')" \
        "(2, 'launcher', 0)"
    expect_grep "the refusal is recorded in $run/summary.json" "$TMP/$name.err"
    $CHECK "$run" >/dev/null || fail "$name: the refusal's records do not match ddplaunch(1)"
}
refused port --master-port "$busy" --nproc-per-node 2 --no-python true
refused spec --set job.max_restarts=many --nproc-per-node 2 --no-python true
refused gpus --set gpus.select=7 --nproc-per-node 1 --no-python true

# a worker's own 75 is the worker's, not "retry later"
"$DDP" --log-dir "$TMP/w75" --nproc-per-node 2 --no-python sh -c '[ "$RANK" = 1 ] && exit 75; exit 0' \
    >"$TMP/w75.out" 2>&1
expect_eq "worker's 75: status" "$?" 75
run=$(only_run "$TMP/w75") || exit 1
expect_eq "worker's 75: exit" "$(sumval "$run/summary.json" '(d["exit"]["code"], d["exit"]["source"], d["exit"]["rank"])')" \
    "(75, 'worker', 1)"

# examples/requeue.sh: the first run is stopped by SIGTERM (the launcher's verdict 143): retried; then the
# worker's own 75: not retried.
cat >"$TMP/w.sh" <<'SHEOF'
#!/bin/sh
[ "$RANK" = 0 ] || exit 0 # rank 0 alone counts the tries
n=$(cat "$STATE/runs" 2>/dev/null || echo 0)
echo $((n + 1)) >"$STATE/runs"
if [ "$n" = 0 ]; then
    kill -TERM "$(ps -o ppid= -p "$PPID" | tr -d ' ')" # the launcher (the exec shim's parent): as a preemption
    sleep 30
fi
[ "$n" -ge 1 ] && exit 75
exit 0
SHEOF
chmod +x "$TMP/w.sh"
mkdir -p "$TMP/state"
STATE=$TMP/state DDPLAUNCH="$DDP" LOG_DIR="$TMP/rq" bash "$DDP_SRCDIR/examples/requeue.sh" \
    --nproc-per-node 2 --no-python "$TMP/w.sh" >"$TMP/rq.out" 2>&1
rc=$?
[ $rc = 75 ] || { cat "$TMP/rq.out"; fail "examples/requeue.sh exited $rc, want the worker's 75"; }
expect_eq "runs of requeue.sh" "$(cat "$TMP/state/runs")" 2
expect_grep "requeue.sh: ddplaunch stopped the job \(143\): running it again" "$TMP/rq.out"
expect_grep "requeue.sh: the job's rank 0 failed with its own exit code 75: not retried" "$TMP/rq.out"

# --- item 4: SIGKILL of the launcher
mkdir -p "$TMP/k"
# as Slurm does: SIGTERM, workers that outlive it (they ignore it), SIGKILL of the launcher after KillWait
"$DDP" --log-dir "$TMP/kill" --nproc-per-node 2 --shutdown-timeout 60 --no-python \
    sh -c 'trap "" TERM; : >"$0/up.$RANK"; while :; do sleep 0.2; done' "$TMP/k" >"$TMP/kill.out" 2>&1 &
L=$!
for _ in $(seq 200); do [ -e "$TMP/k/up.0" ] && [ -e "$TMP/k/up.1" ] && break; sleep 0.05; done
sleep 0.3
kill -TERM $L
sleep 1
kill -KILL $L
wait $L 2>/dev/null
sleep 0.5
"$DDP" report "$TMP/kill" >"$TMP/kill.report" 2>&1
expect_grep '^job sh on .*: launcher-killed, no exit status, 1 attempt' "$TMP/kill.report"
expect_grep "^the launcher \(pid $L\) is gone without a summary: killed .* after its last record, 20[0-9-]+T" "$TMP/kill.report"
grep -q ' running$' "$TMP/kill.report" && { cat "$TMP/kill.report"; fail "a rank of a killed launcher is 'running'"; }
expect_grep '^  \+[0-9.]+s signal: got SIGTERM: stop$' "$TMP/kill.report"

# --- item 6: two nodes on one file system
hold_port port 2
"$DDP" --log-dir "$TMP/nodes" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 1 --no-python true >"$TMP/n0.out" 2>&1 &
N0=$!
"$DDP" --log-dir "$TMP/nodes" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 1 --no-python true >"$TMP/n1.out" 2>&1 || { cat "$TMP/n0.out" "$TMP/n1.out"; fail "node 1 failed"; }
wait $N0 || { cat "$TMP/n0.out"; fail "node 0 failed"; }
for n in 0 1; do
    d=("$TMP"/nodes/*_node${n}_*)
    [ -e "${d[0]}/summary.json" ] || { ls "$TMP/nodes"; fail "no run directory named _node${n}_"; }
    expect_eq "node $n: summary's node_rank, nnodes, ranks" \
        "$(sumval "${d[0]}/summary.json" '(d["node_rank"], d["nnodes"], d["ranks"])')" "($n, 2, [$n, $n])"
done

# --- item 7: one name for the job
"$DDP" --set job.name=my-job --nproc-per-node 1 --no-python sh -c 'exit 3' >"$TMP/name.out" 2>"$TMP/name.err"
expect_grep '^my-job FAILED \(exit status 3\)' "$TMP/name.err"

# --- item 5: Ctrl-C while a hang is suspected
if have_torch; then
    W=$DDP_SRCDIR/tests/integration/watch_worker.py
    WATCH_KIND=stuck WATCH_RANK=1 PATH=/usr/bin:$PATH "$DDP" --nproc-per-node 3 --log-dir "$TMP/cc" \
        --set timeout.suspect_setup=15s --set timeout.suspect_floor=5s "$W" >"$TMP/cc.out" 2>"$TMP/cc.err" &
    L=$!
    for _ in $(seq 600); do grep -q "suspected hang" "$TMP/cc.err" && break; kill -0 $L || break; sleep 0.2; done
    grep -q "suspected hang" "$TMP/cc.err" || { kill -TERM $L; cat "$TMP/cc.err"; fail "no suspected hang"; }
    sleep 1
    kill -INT $L
    wait $L
    expect_eq "Ctrl-C: status" "$?" 130
    grep -q "progress again" "$TMP/cc.err" && { cat "$TMP/cc.err"; fail "Ctrl-C was taken for progress"; }
    run=$(only_run "$TMP/cc") || exit 1
    expect_eq "Ctrl-C: root_cause" "$(sumval "$run/summary.json" 'd["root_cause"]')" None
    "$DDP" report --svg "$TMP/cc.svg" "$TMP/cc" >"$TMP/cc.report" 2>&1 || fail "report failed"
    grep -q "ROOT CAUSE" "$TMP/cc.report" && { cat "$TMP/cc.report"; fail "report names a root cause of a Ctrl-C"; }
    expect_eq "grey lanes (stopped by ddplaunch)" "$(grep -c '<rect class="rank" .*fill="#9e9e9e"' "$TMP/cc.svg")" 3
fi
echo "refusals recorded; worker's 75 told from the launcher's; requeue.sh; launcher-killed; nodes; one name; Ctrl-C"
exit 0
