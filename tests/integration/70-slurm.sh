#!/usr/bin/env bash
# Issue 7, Slurm: a real two-node Slurm cluster on this host (tests/slurm/start.sh: munged, slurmctld, slurmd
# n1 and n2 with 2 fake GPUs each). `srun -N2 --ntasks-per-node=1 ddplaunch --nproc-per-node 2` runs one gloo
# job over both nodes: ranks 0-3 in blocks by node, one MASTER_ADDR (n1, the step's first host) and one port
# everywhere, right sums. examples/slurm/train.sbatch, run as it is, trains examples/train_ddp.py to the same
# model as a single-node 4-worker run. Several tasks per node are refused with the srun line to use instead.
# scancel --signal=USR1 reaches every worker and ddplaunch survives it; scancel stops everything. The two
# agents join over their control channel (node 1 joins node 0) before the workers start.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a throwaway Slurm cluster)"
for b in munged slurmctld slurmd srun sbatch scancel unshare; do
    command -v $b >/dev/null || skip "$b not installed (apt-get install slurmctld slurmd slurm-client munge)"
done
have_torch || skip "no torch in $PY"

SL=$TMP/slurm
trap 'bash "$DDP_SRCDIR/tests/slurm/stop.sh" "$SL" >/dev/null 2>&1; rm -rf "$TMP"' EXIT
bash "$DDP_SRCDIR/tests/slurm/start.sh" "$SL" >"$TMP/start.log" 2>&1
rc=$?
[ $rc = 77 ] && skip "$(tail -n 1 "$TMP/start.log")"
[ $rc = 0 ] || { cat "$TMP/start.log"; fail "could not start the test cluster"; }
export SLURM_CONF=$SL/slurm.conf
cd "$DDP_SRCDIR"

cat >"$TMP/ranks.py" <<'PYEOF'
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
w = dist.get_world_size()
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
keys = ["RANK", "LOCAL_RANK", "GROUP_RANK", "WORLD_SIZE", "GROUP_WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "SLURM_NODEID", "SLURMD_NODENAME"]
os.write(1, ("RANKINFO " + " ".join(f"{k}={os.environ.get(k, '-')}" for k in keys) +
             f" sum={t.item():g} want={w * (w + 1) / 2:g}\n").encode())
dist.destroy_process_group()
PYEOF

# 1. srun, one ddplaunch per node, two workers each.
timeout 180 srun -N2 --ntasks=2 --ntasks-per-node=1 --gres=gpu:2 "$DDP" --nproc-per-node 2 "$TMP/ranks.py" \
    >"$TMP/srun.out" 2>"$TMP/srun.err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/srun.out" "$TMP/srun.err"; fail "srun ddplaunch exited with $rc"; }
grep -o 'RANKINFO.*' "$TMP/srun.out" | sort >"$TMP/ranks"
expect_eq "ranks reporting" "$(wc -l <"$TMP/ranks")" 4
for r in 0 1 2 3; do
    node=$((r / 2))
    line=$(grep "RANKINFO RANK=$r " "$TMP/ranks") || fail "rank $r missing"
    for kv in "LOCAL_RANK=$((r % 2))" "GROUP_RANK=$node" "WORLD_SIZE=4" "GROUP_WORLD_SIZE=2" "LOCAL_WORLD_SIZE=2" \
        "MASTER_ADDR=n1" "SLURM_NODEID=$node" "SLURMD_NODENAME=n$((node + 1))" "sum=10 want=10"; do
        [[ " $line " == *" $kv "* ]] || fail "rank $r: expected $kv in: $line"
    done
done
ports=$(grep -o 'MASTER_PORT=[0-9]*' "$TMP/ranks" | sort -u)
expect_eq "one MASTER_PORT for all ranks" "$(echo "$ports" | wc -l)" 1
# the agents coordinate: node 1 joined node 0's control port (authenticated with the job's secret)
expect_grep "node 1 joined from .* with 2 workers \\(2 of 2 nodes up\\)" "$TMP/srun.err"
expect_grep "node 1: joined node 0" "$TMP/srun.err"
echo "srun: 4 ranks on n1,n2, MASTER_ADDR=n1 $ports"

# 1b. ddplaunch in the batch step of a two-node job (no srun): one node only, SLURM_PROCID/NODEID are not ranks,
#     and a warning says how to use both nodes.
timeout 180 sbatch -W -N2 -o "$TMP/batch.out" --wrap "'$DDP' --nproc-per-node 2 '$TMP/ranks.py'" >/dev/null 2>&1 ||
    { cat "$TMP/batch.out"; fail "ddplaunch in a batch step failed"; }
expect_grep 'warning: running in the batch step of Slurm job [0-9]+, on n1 only of its 2 nodes \(n\[1-2\]\).*srun --ntasks=2 --ntasks-per-node=1' "$TMP/batch.out"
expect_eq "ranks in the batch step" "$(grep -c 'RANKINFO.* WORLD_SIZE=2 GROUP_WORLD_SIZE=1 .*MASTER_ADDR=127.0.0.1 .*sum=3 want=3' "$TMP/batch.out")" 2

# 2. The example sbatch script as it is (only the binary, the worker count and the CPUs differ from a real
#    cluster): same model as one node with 4 workers.
PYTHONUNBUFFERED=1 "$DDP" --nproc-per-node 4 examples/train_ddp.py --steps 5 >"$TMP/ref.out" 2>&1 ||
    { cat "$TMP/ref.out"; fail "single-node reference run failed"; }
ref=$(grep -o 'done steps=5 world_size=4 checksum=[-0-9.]*' "$TMP/ref.out")
[ -n "$ref" ] || { cat "$TMP/ref.out"; fail "reference printed no checksum"; }
timeout 240 sbatch -W -N2 --gres=gpu:2 --cpus-per-task=1 -o "$TMP/sbatch.out" \
    --export=ALL,DDPLAUNCH="$DDP",NPROC=2 examples/slurm/train.sbatch --steps 5 >"$TMP/sbatch.log" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TMP/sbatch.log" "$TMP/sbatch.out"; fail "examples/slurm/train.sbatch failed ($rc)"; }
expect_grep 'allreduce sum=10 expected=10 world_size=4' "$TMP/sbatch.out"
got=$(grep -o 'done steps=5 world_size=4 checksum=[-0-9.]*' "$TMP/sbatch.out")
expect_eq "2 nodes x 2 workers train the same model as 1 node x 4" "$got" "$ref"
echo "sbatch: $got"

# 3. Several tasks per node: refused, with the srun line to use.
timeout 60 srun -N2 --ntasks-per-node=2 "$DDP" --nproc-per-node 2 "$TMP/ranks.py" >"$TMP/multi.out" 2>&1
rc=$?
[ $rc != 0 ] || fail "4 tasks on 2 nodes were accepted"
expect_grep 'runs 4 tasks on 2 nodes .*srun --ntasks=2 --ntasks-per-node=1' "$TMP/multi.out"
grep -q RANKINFO "$TMP/multi.out" && fail "workers started although the step was refused"

# 4. Signals: SIGUSR1 from `scancel --signal` reaches every worker and the job goes on; scancel ends it all.
cat >"$TMP/sig.py" <<'PYEOF'
import os, signal, sys, time
rank, log = os.environ["RANK"], os.environ["SIGLOG"]
def say(msg):
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"rank {rank} {msg}\n".encode())
    os.close(fd)
signal.signal(signal.SIGUSR1, lambda s, f: say("got SIGUSR1"))
def term(s, f):
    say("got SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
say(f"ready {os.getpid()}")
for _ in range(1200):
    time.sleep(0.1)
say("was never stopped")
PYEOF
cat >"$TMP/sig.sbatch" <<SBEOF
#!/bin/bash
srun --ntasks=2 --ntasks-per-node=1 "$DDP" --nproc-per-node 2 --no-python \
    --set job.signals_to_handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1 "$PY" "$TMP/sig.py"
SBEOF
jid=$(sbatch --parsable -N2 -o "$TMP/sig.out" --export=ALL,SIGLOG="$TMP/sig.log" "$TMP/sig.sbatch") ||
    fail "sbatch of the signal job failed"
for _ in $(seq 1 120); do
    [ "$(grep -c ' ready ' "$TMP/sig.log" 2>/dev/null)" = 4 ] && break
    sleep 0.5
done
expect_eq "workers ready" "$(grep -c ' ready ' "$TMP/sig.log" 2>/dev/null)" 4
scancel --signal=USR1 "$jid"
for _ in $(seq 1 40); do
    [ "$(grep 'got SIGUSR1' "$TMP/sig.log" | sort -u | wc -l)" = 4 ] && break
    sleep 0.25
done
expect_eq "ranks that got SIGUSR1" "$(grep 'got SIGUSR1' "$TMP/sig.log" | sort -u | wc -l)" 4
sleep 1
squeue -h -j "$jid" -o %T | grep -q RUNNING || { cat "$TMP/sig.out"; fail "the job did not survive SIGUSR1"; }
echo "SIGUSR1 deliveries per worker: $(grep -c 'got SIGUSR1' "$TMP/sig.log") for 4 workers"
scancel "$jid"
for _ in $(seq 1 60); do
    [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] && break
    sleep 0.5
done
[ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] || fail "job $jid still there 30 s after scancel"
expect_eq "ranks that got SIGTERM" "$(grep 'got SIGTERM' "$TMP/sig.log" | sort -u | wc -l)" 4
for pid in $(sed -n 's/.* ready \([0-9]*\)$/\1/p' "$TMP/sig.log"); do
    [ -d /proc/$pid ] && [ "$(cat /proc/$pid/stat 2>/dev/null | cut -d' ' -f3)" != Z ] && fail "worker $pid survived scancel"
done
grep -q 'was never stopped' "$TMP/sig.log" && fail "a worker was never stopped"
echo "scancel: every worker got SIGTERM and is gone"
exit 0
