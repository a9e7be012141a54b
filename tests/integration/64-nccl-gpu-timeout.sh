#!/usr/bin/env bash
# Issue 6 on GPUs (run on nvidia-h200-x2): a real NCCL job where rank 1 sleeps before an all_reduce with a 10 s
# process-group timeout -> torch's NCCL watchdog line -> ddplaunch reports collective-timeout, downsizes 2 -> 1 GPU and
# completes. Prints the time from the hang to the restart. With DDP_ARTIFACTS set, keeps the real logs there.
. "$DDP_SRCDIR/tests/integration/lib.sh"
# On the GPU machine the python3 on PATH holds torch (not /usr/bin/python3).
if ! have_torch && command -v python3 >/dev/null; then PY=$(command -v python3); export PYTHON_EXEC=$PY; fi
have_torch || skip "no torch in $PY"
ngpu=$($PY -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null)
[ "${ngpu:-0}" -ge 2 ] || skip "needs 2 CUDA GPUs (found ${ngpu:-0})"
TRAIN=$DDP_SRCDIR/examples/train_ddp.py

stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }
start=$(date +%s%N)
"$DDP" --nproc-per-node 2 --max-restarts 1 --set restart.on_timeout=downsize --log-dir "$TMP/logs" \
    "$TRAIN" --backend nccl --steps 5 --pg-timeout 10 --hang-rank 1 --hang-step 2 2>&1 | stamp >"$TMP/all"
rc=${PIPESTATUS[0]}
ms=$((($(date +%s%N) - start) / 1000000))
if [ -n "${DDP_ARTIFACTS:-}" ]; then
    mkdir -p "$DDP_ARTIFACTS" && cp "$TMP/all" "$DDP_ARTIFACTS/nccl-gpu-timeout.log"
fi
expect_eq "status after downsizing" "$rc" 0
expect_grep 'rank 1: hanging before step 2' "$TMP/all"
expect_grep 'Watchdog caught collective operation timeout|Timeout at NCCL work' "$TMP/all"
expect_grep 'nccl collective timeout \(collective-timeout\); downsizing 2 -> 1 workers?' "$TMP/all"
expect_grep 'allreduce sum=1 expected=1 world_size=1 orig_world_size=2 backend=nccl attempt=1' "$TMP/all"
expect_grep 'done steps=5 world_size=1' "$TMP/all"
t_hang=$(grep -m1 'hanging before step 2' "$TMP/all" | cut -d' ' -f1)
t_class=$(grep -m1 'collective-timeout' "$TMP/all" | cut -d' ' -f1)
t_start=$(grep -m1 'attempt 1: starting' "$TMP/all" | cut -d' ' -f1)
echo "hang -> collective-timeout detected: $(echo "$t_class - $t_hang" | bc) s (process-group timeout 10 s)"
echo "hang -> attempt 1 started:     $(echo "$t_start - $t_hang" | bc) s; whole run ${ms} ms"
echo ok
