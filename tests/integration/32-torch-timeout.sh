#!/usr/bin/env bash
# Real PyTorch hang (issues 3 and 6): rank 1 stops before an all_reduce while the others wait, with a short
# process-group timeout (gloo). ddplaunch sees the collective timeout, and with on_timeout = downsize runs the
# job at 2 workers instead of 4 to completion with the right sums. Then the same hang caught by the heartbeat
# file instead (no process-group timeout).
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "python3-torch is not installed"
TRAIN=$DDP_SRCDIR/examples/train_ddp.py
[ -f "$TRAIN" ] || skip "examples/train_ddp.py is missing"

"$DDP" --nproc-per-node 4 --console lines --set restart.on_timeout=downsize --shutdown-timeout 5s "$TRAIN" --steps 4 \
    --backend gloo --pg-timeout 6 --hang-rank 1 --hang-step 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/out" "$TMP/err"; fail "exit $rc"; }
expect_grep 'attempt 0: rank [0-9]+ reported a gloo collective timeout \(collective-timeout\); downsizing 4 -> 2 workers' "$TMP/err"
expect_grep '^\[rank0\]: allreduce sum=3 expected=3 world_size=2 orig_world_size=4 backend=gloo attempt=1 ' "$TMP/out"
expect_grep '^\[rank0\]: done steps=4 world_size=2 ' "$TMP/out"

# Heartbeat: rank 1 hangs (no pg timeout to speak of), stall 3s -> downsize -> done at 2 workers. init covers
# the start (importing torch can take longer than 3 s on a loaded machine), stall the steps after it.
"$DDP" --nproc-per-node 4 --console lines --set timeout.stall=3s --set timeout.init=120s --set timeout.heartbeat=file \
    --set restart.on_timeout=downsize \
    --shutdown-timeout 2s "$TRAIN" --steps 4 --backend gloo --pg-timeout 600 --hang-rank 1 --hang-step 1 \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/out" "$TMP/err"; fail "heartbeat run: exit $rc"; }
expect_grep 'attempt 0: rank [0-9]+( and [0-9]+ others?)? made no progress for 3s \(heartbeat\); downsizing 4 -> 2 workers' "$TMP/err"
expect_grep '^\[rank0\]: done steps=4 world_size=2 ' "$TMP/out"
echo ok
