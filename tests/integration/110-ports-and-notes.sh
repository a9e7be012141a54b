#!/usr/bin/env bash
# Ports and settings the launcher replaces (issue 54): master_port = auto keeps torchrun's 29500 and c10d's 29400
# for last, so a torchrun job started beside it still gets its default port; an exported MASTER_PORT replaced by
# auto, and a CUDA_VISIBLE_DEVICES blanked for CPU workers, are each said in one line; under Slurm, doctor says
# the port comes from the job id instead of counting a range the job does not use.
. "$DDP_SRCDIR/tests/integration/lib.sh"
unset DDPLAUNCH_JOB_MASTER_PORT

# 1. auto over a range holding 29400 or 29500 takes another port while one is free, and them only at the end.
for range in 29400-29401 29499-29500; do
    "$DDP" plan --json --master-port "auto:$range" --no-python --nproc-per-node 1 /bin/true >"$TMP/p.json" 2>"$TMP/err" ||
        { cat "$TMP/err"; fail "plan with auto:$range"; }
    port=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["master_port"])' <"$TMP/p.json")
    case $port in 29400 | 29500) fail "auto:$range took torchrun's port $port while another was free" ;; esac
    echo "auto:$range -> $port"
done
"$DDP" plan --json --master-port auto:29500-29500 --no-python --nproc-per-node 1 /bin/true >"$TMP/p.json" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "plan with auto:29500-29500"; }
expect_eq "auto with nothing but 29500" "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["master_port"])' \
    <"$TMP/p.json")" 29500

# 2. An exported MASTER_PORT replaced by auto: one line saying so, and how to keep it; the worker sees the new one.
MASTER_PORT=12345 "$DDP" --no-python --nproc-per-node 1 --set gpus.select=none /bin/sh -c \
    'echo "$MASTER_PORT $CUDA_VISIBLE_DEVICES." >"$0"' "$TMP/env" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
cat "$TMP/err"
got=$(cut -d' ' -f1 "$TMP/env")
expect_grep "^ddplaunch: note: MASTER_PORT=12345 from the environment is replaced by $got .*--master-port 12345" "$TMP/err"
expect_eq "MASTER_PORT lines" "$(grep -c MASTER_PORT "$TMP/err")" 1
# ... not when they agree.
MASTER_PORT=$got "$DDP" plan --master-port "$got" --no-python --nproc-per-node 1 /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "MASTER_PORT lines when it is kept" "$(grep -c MASTER_PORT "$TMP/err")" 0

# 3. The user's CUDA_VISIBLE_DEVICES blanked for CPU workers: one line.
CUDA_VISIBLE_DEVICES=0 "$DDP" --no-python --nproc-per-node 1 --set gpus.select=none /bin/sh -c \
    'echo "[$CUDA_VISIBLE_DEVICES]" >"$0"' "$TMP/cvd" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "the worker's CUDA_VISIBLE_DEVICES" "$(cat "$TMP/cvd")" "[]"
expect_grep "^ddplaunch: note: CUDA_VISIBLE_DEVICES=0 from the environment is blanked for the workers" "$TMP/err"
expect_eq "CUDA_VISIBLE_DEVICES lines" "$(grep -c CUDA_VISIBLE_DEVICES "$TMP/err")" 1

# 4. Under Slurm, doctor's master-port line says the port comes from the job id, and which port that is.
SLURM=(SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_NNODES=1 SLURM_NODEID=0 SLURM_PROCID=0 SLURM_NTASKS=1
    SLURM_LOCALID=0 SLURM_JOB_NODELIST=n1 SLURM_STEP_NODELIST=n1 SLURMD_NODENAME=n1)
env "${SLURM[@]}" "$DDP" doctor --no-python --nproc-per-node 1 /bin/true >"$TMP/doc" 2>&1
grep master-port "$TMP/doc"
expect_grep "master-port.*auto: [0-9]+, derived from the slurm job 4242" "$TMP/doc"
grep -q "master-port.*of .* free" "$TMP/doc" && fail "doctor counts free ports of a range the Slurm job does not use"
port=$(sed -nE 's/.*auto: ([0-9]+), derived.*/\1/p' "$TMP/doc")
env "${SLURM[@]}" "$DDP" plan --json --no-python --nproc-per-node 1 /bin/true >"$TMP/p.json" 2>"$TMP/err"
expect_eq "doctor's port is the one the job takes" \
    "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["master_port"])' <"$TMP/p.json")" "$port"
echo ok
