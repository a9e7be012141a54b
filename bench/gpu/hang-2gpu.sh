#!/usr/bin/env bash
# Issue 26, one command on the 2-GPU machine (nvidia-h200-x2): the live hang watch with NCCL, one GPU per rank,
# torch's default process-group timeout, an unmodified DDP loop of each kind (tests/integration/watch_worker.py):
# stuck, other (mismatch), slow, ckpt (rank 0 checkpoints 60 s); then the verdict when torch's own timeout fires
# (60 s); then the same loops under torch's torchrun, side by side (what it prints and when, capped at 150 s).
# Needs the static executable: make static && mkdir -p .devrt && cp build/static/ddplaunch .devrt/
# Usage: bash bench/gpu/hang-2gpu.sh      (results and SVGs in $OUT, or ./hang-2gpu-out)
# Keep the machine's NCCL_NVLS_ENABLE=0 and TORCH_SYMM_MEM_DISABLE_MULTICAST=1 (inherited).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-hang-2gpu-out}
w=${WORKER:-$here/../../tests/integration/watch_worker.py}
mkdir -p "$out/ddplaunch" "$out/torchrun"
nvidia-smi -L
OUT=$out/ddplaunch WATCH_CKPT_S=60 PG_TIMEOUT_S=60 WORKER=$w bash "$here/hang-watch.sh" nccl 2

echo "--- torchrun (torch's own launcher), same loops, default timeout, 150 s at most each"
for k in stuck:1 other:1 slow:1 ckpt:0; do
    kind=${k%:*}
    start=$(date +%s.%N)
    WATCH_BACKEND=nccl WATCH_KIND=$kind WATCH_RANK=${k#*:} WATCH_CKPT_S=60 WATCH_STEPS=$([ "$kind" = slow ] && echo 110 || echo 40) \
        timeout 150 torchrun --nproc-per-node 2 "$w" >"$out/torchrun/$kind.out" 2>"$out/torchrun/$kind.err"
    rc=$?
    echo "torchrun $kind: exit $rc after $(python3 -c "import time; print(round(time.time() - $start, 1))") s" \
        "($([ $rc = 124 ] && echo 'still hung, stopped by timeout(1)' || echo ended)); its last lines:"
    tail -n 3 "$out/torchrun/$kind.err" | cut -c1-200
done
start=$(date +%s.%N)
WATCH_BACKEND=nccl WATCH_KIND=other WATCH_RANK=1 WATCH_PG_TIMEOUT_S=60 timeout 300 torchrun --nproc-per-node 2 "$w" \
    >"$out/torchrun/timeout2.out" 2>"$out/torchrun/timeout2.err"
echo "torchrun mismatch at torch's 60s timeout: exit $? after $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
grep -m3 -E "Watchdog caught|Root Cause|exitcode" "$out/torchrun/timeout2.err" | cut -c1-200
echo "SVGs: $(ls "$out"/ddplaunch/*.svg | tr '\n' ' ')"
