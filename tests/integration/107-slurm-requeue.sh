#!/usr/bin/env bash
# Issue 54, Slurm items, on a real two-node Slurm cluster on this host (tests/slurm/start.sh, as test 70):
#   item 3: `scancel --signal=TERM` reaches each worker exactly once (slurmstepd signals every process of the
#           step; neither ddplaunch nor the exec shim passes its own copy on): each worker counts its SIGTERMs.
#   item 2: examples/slurm/requeue.sbatch, run as it is (binary, worker count, CPUs and log_dir overridden):
#           the SIGTERM stop is the launcher's verdict (exit.source launcher, 143) and the script requeues the
#           job; the second run succeeds (the worker's 0) and the script says done. examples/requeue.sh in a
#           batch job: a worker's own 75 is not retried, and the job exits 75.
#   item 6: the two nodes' run directories in one log_dir are RUN_ID_node0_*, RUN_ID_node1_*, and each
#           summary.json says its node_rank.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a throwaway Slurm cluster)"
for b in munged slurmctld slurmd srun sbatch scancel scontrol unshare; do
    command -v $b >/dev/null || skip "$b not installed (apt-get install slurmctld slurmd slurm-client munge)"
done

SL=$TMP/slurm
trap 'bash "$DDP_SRCDIR/tests/slurm/stop.sh" "$SL" >/dev/null 2>&1; rm -rf "$TMP"' EXIT
bash "$DDP_SRCDIR/tests/slurm/start.sh" "$SL" >"$TMP/start.log" 2>&1
rc=$?
[ $rc = 77 ] && skip "$(tail -n 1 "$TMP/start.log")"
[ $rc = 0 ] || { cat "$TMP/start.log"; fail "could not start the test cluster"; }
export SLURM_CONF=$SL/slurm.conf
cd "$DDP_SRCDIR"
chmod 0755 "$TMP"

cat >"$TMP/term.py" <<'PYEOF'
import os, signal, sys, time
rank, log = os.environ["RANK"], os.environ["TERMLOG"]
run = os.environ.get("SLURM_RESTART_COUNT", "0")
def say(msg):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"run {run} rank {rank} {msg}\n".encode())
    os.close(fd)
got = []
signal.signal(signal.SIGTERM, lambda s, f: (got.append(1), say("got SIGTERM")))
say("ready")
if run != "0":
    say("done")
    sys.exit(0)
while not got:
    time.sleep(0.1)
time.sleep(3)  # more copies of the signal would come now
say(f"SIGTERMs {len(got)}")
PYEOF
wait_gone() {
    for _ in $(seq 1 "$2"); do [ -z "$(squeue -h -j "$1" 2>/dev/null)" ] && return 0; sleep 1; done
    return 1
}

jid=$(sbatch --parsable -N2 --gres=gpu:2 --cpus-per-task=1 -o "$TMP/rq.out" \
    --export=ALL,DDPLAUNCH="$DDP",NPROC=2,LOGS="$TMP/logs",TERMLOG="$TMP/term.log",JOB=--no-python,PYTHONUNBUFFERED=1 \
    examples/slurm/requeue.sbatch "$PY" "$TMP/term.py") || fail "sbatch of examples/slurm/requeue.sbatch failed"
for _ in $(seq 1 240); do
    [ "$(grep -c 'run 0 .* ready' "$TMP/term.log" 2>/dev/null)" = 4 ] && break
    sleep 0.5
done
expect_eq "workers ready" "$(grep -c 'run 0 .* ready' "$TMP/term.log" 2>/dev/null)" 4
scancel --signal=TERM "$jid"
for _ in $(seq 1 60); do
    [ "$(grep -c 'SIGTERMs' "$TMP/term.log")" = 4 ] && break
    sleep 0.25
done
expect_eq "workers that counted" "$(grep -c 'SIGTERMs' "$TMP/term.log")" 4
[ "$(grep -o 'SIGTERMs [0-9]*' "$TMP/term.log" | sort -u | tr '\n' ' ')" = "SIGTERMs 1 " ] ||
    { sleep 3; cat "$TMP/term.log" "$TMP/rq.out"; fail "a worker got SIGTERM more than once"; }
expect_grep "got SIGTERM from Slurm, which signalled the 2 workers too: not forwarded" "$TMP/rq.out"
# the script requeues; Slurm holds a requeued job back 120 s, which CI does not wait for
for _ in $(seq 1 60); do
    grep -q "requeue.sbatch: requeueing job $jid" "$TMP/rq.out" && squeue -h -j "$jid" -o %T | grep -q PENDING && break
    sleep 0.5
done
expect_grep "requeue.sbatch: run 0: exit 143 from the launcher" "$TMP/rq.out"
expect_grep "requeue.sbatch: requeueing job $jid" "$TMP/rq.out"
for _ in $(seq 1 180); do
    grep -q "requeue.sbatch: done" "$TMP/rq.out" && break
    squeue -h -j "$jid" -o %T 2>/dev/null | grep -q PENDING && scontrol update jobid="$jid" StartTime=now 2>/dev/null
    sleep 1
done
wait_gone "$jid" 60 || { cat "$TMP/rq.out"; fail "the requeued job did not end"; }
# Seen once in a clean-clone CI run on a loaded 2-CPU host: Slurm dropped the requeued job without starting it
# again (no second run in its output, none of its workers started, gone from squeue). That is Slurm's, not the
# launcher's: said, and the test ends as skipped after the parts below it, which still run.
requeue_lost=
if ! grep -q "requeue.sbatch: run 1" "$TMP/rq.out" && [ "$(grep -c 'run 1 ' "$TMP/term.log")" = 0 ]; then
    requeue_lost="Slurm dropped requeued job $jid before it ran again ($(sacct -n -X -j "$jid" -o state 2>/dev/null |
        tr -s ' \n' ' '))"
    echo "$requeue_lost"
else
    [ "$(grep -c 'run 1 .* done' "$TMP/term.log")" = 4 ] ||
        { cat "$TMP/term.log" "$TMP/rq.out"; squeue; fail "the second run's workers did not all end"; }
    expect_grep "requeue.sbatch: run 1: exit 0 from the worker" "$TMP/rq.out"
    expect_grep "requeue.sbatch: done" "$TMP/rq.out"
fi
for n in 0 1; do
    d=("$TMP/logs/$jid/run-0/"*_node${n}_*)
    [ -e "${d[0]}/summary.json" ] || { ls -R "$TMP/logs"; fail "no run directory of node $n"; }
    got=$($PY -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["node_rank"], d["exit"]["source"], d["exit"]["code"])' \
        "${d[0]}/summary.json")
    expect_eq "node $n's summary" "$got" "$n launcher 143"
done
echo "scancel --signal=TERM: one SIGTERM per worker; requeued on the launcher's 143, done on the worker's 0"

# examples/requeue.sh as a batch job: a worker's own 75 is not "retry later"
sbatch -W -N1 --cpus-per-task=1 -o "$TMP/sh.out" --export=ALL,DDPLAUNCH="$DDP",LOG_DIR="$TMP/shlogs" \
    --wrap "bash examples/requeue.sh --nproc-per-node 2 --no-python sh -c 'exit 75'" >/dev/null 2>&1
rc=$?
[ $rc = 75 ] || { cat "$TMP/sh.out"; fail "examples/requeue.sh under sbatch: exit $rc, want 75"; }
expect_grep "requeue.sh: the job's rank [01] failed with its own exit code 75: not retried" "$TMP/sh.out"
[ -d "$TMP/shlogs/try-2" ] && fail "a worker's 75 was retried"
echo "examples/requeue.sh: the worker's 75 not retried"
[ -z "$requeue_lost" ] || skip "$requeue_lost"
exit 0
