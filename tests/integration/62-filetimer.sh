#!/usr/bin/env bash
# torch's file-based watchdog served by ddplaunch ([timeout] timer_file = yes): a worker using
# torch.distributed.elastic.timer.FileTimerClient (Debian python3-torch 1.13) overruns a timer.expires() block ->
# ddplaunch treats it as a hang (a timeout event): restart / downsize / fail -> 124.
# Issue 23 item 6: TORCHELASTIC_ENABLE_FILE_TIMER=1 (torchrun's switch) turns it on, under Debian's torchrun 1.13
# and under ddplaunch: the hung rank is stopped by both; without it no TORCHELASTIC_TIMER_FILE reaches workers.
. "$DDP_SRCDIR/tests/integration/lib.sh"
$PY -c 'import torch.distributed.elastic.timer' 2>/dev/null || skip "no torch.distributed.elastic.timer in $PY"
W=$DDP_SRCDIR/tests/integration/ft_worker.py

# The variable reaches the workers and names a FIFO.
"$DDP" --nproc-per-node 1 --set timeout.timer_file=yes --no-python "$PY" -c \
    'import os, stat; p = os.environ["TORCHELASTIC_TIMER_FILE"]; print("fifo" if stat.S_ISFIFO(os.stat(p).st_mode) else "other", p)' \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status of the env check" "$?" 0
expect_grep 'fifo /' "$TMP/out"

# A healthy run: every step's timer is acquired and released, nothing fires.
HANG_RANK=-1 "$DDP" --nproc-per-node 2 --set timeout.timer_file=yes "$W" 4 >"$TMP/out" 2>"$TMP/err"
expect_eq "healthy status" "$?" 0
expect_eq "healthy ranks done" "$(grep -c 'done r[01] world 2 attempt 0' "$TMP/out")" 2

# on_timeout = fail: exit 124, class hang, quickly (the timer is 1 s, the sleep is an hour).
start=$(date +%s%N)
"$DDP" --nproc-per-node 2 --set timeout.timer_file=yes --set restart.on_timeout=fail "$W" 6 >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status on_timeout=fail" "$rc" 124
expect_grep 'rank 1 stuck in step 2' "$TMP/out"
expect_grep 'step2' "$TMP/err"
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 1 ' "$TMP/root"
expect_grep 'class +: hang' "$TMP/root"
[ "$ms" -lt 20000 ] || fail "took ${ms} ms"

# on_timeout = downsize: 4 -> 2 and done.
MIN_WORLD=2 "$DDP" --nproc-per-node 4 --set timeout.timer_file=yes --set restart.on_timeout=downsize "$W" 5 \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status after downsizing" "$?" 0
expect_grep 'downsizing 4 -> 2 workers' "$TMP/err"
expect_eq "ranks done at world 2" "$(grep -c 'done r[01] world 2 attempt 1' "$TMP/out")" 2

# TORCHELASTIC_ENABLE_FILE_TIMER=1: the same line under torchrun and ddplaunch stops the stuck rank
envchk='import os; print(os.environ.get("TORCHELASTIC_TIMER_FILE", "none"))'
TORCHELASTIC_ENABLE_FILE_TIMER=0 "$DDP" --nproc-per-node 1 --no-python "$PY" -c "$envchk" >"$TMP/out" 2>"$TMP/err"
expect_eq "TORCHELASTIC_ENABLE_FILE_TIMER=0: no timer file" "$(cat "$TMP/out")" none
start=$(date +%s%N)
TORCHELASTIC_ENABLE_FILE_TIMER=1 timeout 120 env -u OMP_NUM_THREADS $PY "$DDP_SRCDIR/bench/torchrun.py" \
    --monitor_interval 0.1 --master_port 0 --nproc_per_node 2 "$W" 6 >"$TMP/tr.out" 2>"$TMP/tr.err"
trs=$?
trms=$((($(date +%s%N) - start) / 1000000))
expect_eq "torchrun's status with the timer" "$trs" 1
expect_grep 'rank 1 stuck in step 2' "$TMP/tr.out"
expect_grep 'Signal 9 \(SIGKILL\) received' "$TMP/tr.err"
start=$(date +%s%N)
TORCHELASTIC_ENABLE_FILE_TIMER=1 "$DDP" --nproc-per-node 2 --set restart.on_timeout=fail "$W" 6 >"$TMP/out" \
    2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status with TORCHELASTIC_ENABLE_FILE_TIMER=1" "$rc" 124
expect_grep 'rank 1 stuck in step 2' "$TMP/out"
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 1 ' "$TMP/root"
expect_grep 'class +: hang' "$TMP/root"
echo "TORCHELASTIC_ENABLE_FILE_TIMER=1: stuck rank stopped by torchrun in ${trms} ms (exit 1), ddplaunch ${ms} ms (124)"
echo ok
