#!/usr/bin/env bash
# Heartbeat file with the Python helper examples/heartbeat.py: one rank stops touching its file (while still
# printing) -> "made no progress" -> on_timeout = downsize -> the job finishes at 2 workers.
. "$DDP_SRCDIR/tests/integration/lib.sh"
export DDP_SRCDIR
W=$DDP_SRCDIR/tests/integration/hb_worker.py

# Without a stall: 4 workers finish, nobody is flagged.
"$DDP" --nproc-per-node 4 --set timeout.stall=1s --set timeout.init=60s --set timeout.heartbeat=file "$W" 10 >"$TMP/out" 2>"$TMP/err"
expect_eq "status, no stall" "$?" 0
expect_eq "ranks done at world 4" "$(grep -c 'done r[0-3] world 4 orig 4' "$TMP/out")" 4
grep -q 'no progress' "$TMP/err" && fail "a healthy job was flagged"

# Rank 2 stalls: detected within stall (+ check interval), downsized, completes.
start=$(date +%s%N)
STALL_RANK=2 "$DDP" --nproc-per-node 4 --set timeout.stall=1s --set timeout.init=60s --set timeout.heartbeat=file \
    --set restart.on_timeout=downsize "$W" 15 >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status after downsizing" "$rc" 0
expect_grep 'rank 2 stuck at step 3' "$TMP/out"
expect_grep 'attempt 0: rank 2 made no progress for 1s \(heartbeat\); downsizing 4 -> 2 workers' "$TMP/err"
expect_eq "ranks done at world 2" "$(grep -c 'done r[01] world 2 orig 4' "$TMP/out")" 2
[ "$ms" -lt 15000 ] || fail "took ${ms} ms"
echo "stall detected and job finished in ${ms} ms"
echo ok
