#!/usr/bin/env bash
# Issue 42: schedulers behind one seam. LSF and PBS are rows of nodes/scheduler.c's table, as Slurm is: their real
# variables (LSB_JOBID, LSB_MCPU_HOSTS; PBS_JOBID, PBS_NODEFILE, PBS_NODENUM) give the node count, this host's
# rank, node 0's address, the run id and node 0's derived master port, as the workers see them. A host that is not
# in the job's list is refused before anything starts. Nothing outside launcher/nodes/ reads SLURM_ variables.
. "$DDP_SRCDIR/tests/integration/lib.sh"
host=$(hostname)

# LSF, one host: a real job; the workers see the run id lsf-ID
env LSB_JOBID=7731 LSB_MCPU_HOSTS="$host 2" LSB_DJOB_NUMPROC=2 \
    "$DDP" --nproc-per-node 2 --no-python sh -c 'echo "r=$RANK w=$WORLD_SIZE id=$TORCHELASTIC_RUN_ID"' \
    >"$TMP/lsf" 2>"$TMP/lsf.err" || { cat "$TMP/lsf.err"; fail "LSF job exited $?"; }
expect_grep '^r=0 w=2 id=lsf-7731$' "$TMP/lsf"
expect_grep '^r=1 w=2 id=lsf-7731$' "$TMP/lsf"

# LSF, this host second of three: node rank 1, node 0 is the first host, 3 nodes
env LSB_JOBID=7732 LSB_MCPU_HOSTS="lsf-head 4 $host 4 lsf-c 4" \
    "$DDP" plan --json --nproc-per-node 1 --no-python true >"$TMP/lsf.json" || fail "LSF plan exited $?"
got=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["nnodes"], d["node_rank"], d["master_addr"], d["run_id"])' "$TMP/lsf.json")
expect_eq "LSF plan" "$got" "3 1 lsf-head lsf-7732"

# PBS: the node file (one line per slot), and pbsdsh's PBS_NODENUM
printf 'pbs-head\npbs-head\n%s\n%s\n' "$host" "$host" >"$TMP/nodefile"
env PBS_JOBID=4567.pbs01 PBS_NODEFILE="$TMP/nodefile" \
    "$DDP" plan --json --nproc-per-node 1 --no-python true >"$TMP/pbs.json" || fail "PBS plan exited $?"
got=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["nnodes"], d["node_rank"], d["master_addr"], d["run_id"], d["master_port"] > 0)' "$TMP/pbs.json")
expect_eq "PBS plan" "$got" "2 1 pbs-head pbs-4567.pbs01 True"
# node 0's port is derived from the job id: the same on every node (node 1 computes it; node 0 reserves it)
port1=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["master_port"])' "$TMP/pbs.json")
printf '%s\n%s\nother\n' "$host" "$host" >"$TMP/nodefile0"
env PBS_JOBID=4567.pbs01 PBS_NODEFILE="$TMP/nodefile0" \
    "$DDP" plan --json --nproc-per-node 1 --no-python true >"$TMP/pbs0.json" || fail "PBS plan (node 0) exited $?"
got=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["node_rank"], d["master_port"])' "$TMP/pbs0.json")
expect_eq "PBS node 0: the same derived port" "$got" "0 $port1"

# a host not in the list: one line, exit 2, nothing started
rc=0
env LSB_JOBID=7733 LSB_MCPU_HOSTS="elsewhere 4" "$DDP" --nproc-per-node 1 --no-python touch "$TMP/started" \
    >"$TMP/no.out" 2>"$TMP/no.err" || rc=$?
expect_eq "host not in the LSF list: exit status" "$rc" 2
expect_grep "LSB_MCPU_HOSTS: this host \(.*\) is not in the job's host list; give --node-rank" "$TMP/no.err"
[ ! -e "$TMP/started" ] || fail "a worker started although the host is not in the job's list"
# the command line wins
env LSB_JOBID=7734 LSB_MCPU_HOSTS="elsewhere 4" "$DDP" plan --node-rank 0 --nnodes 1 --nproc-per-node 1 \
    --no-python true >/dev/null 2>"$TMP/cli.err" || { cat "$TMP/cli.err"; fail "--node-rank did not win"; }

# the seam: no SLURM_ variable is read outside launcher/nodes/
out=$(grep -rn "SLURM_" "$DDP_SRCDIR"/launcher --include='*.[ch]' | grep -v "^$DDP_SRCDIR/launcher/nodes/" || true)
[ -z "$out" ] || fail "SLURM_ read outside launcher/nodes/:"$'\n'"$out"
echo ok
