#!/usr/bin/env bash
# Hang detection (issues 3 and 6): heartbeat stall -> downsize 4 -> 2 and complete; on_timeout = fail -> 124;
# wall limit; init deadline; output silence. Every decision is one line with its reason.
. "$DDP_SRCDIR/tests/integration/lib.sh"

# Rank 1 stops touching its heartbeat file while WORLD_SIZE > 2; stall 1s; downsize -> 2 workers complete.
start=$(date +%s%N)
"$DDP" --no-python --nproc-per-node 4 --set timeout.stall=1s --set timeout.heartbeat=file \
    --set restart.on_timeout=downsize "$HELPERS/heartbeat" 40 50 1 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status after downsizing" "$rc" 0
expect_grep '^ddplaunch: (error: )?attempt 0: rank 1 made no progress for 1s \(heartbeat\); stopping the workers$' "$TMP/err"
expect_grep 'attempt 0: rank 1 made no progress for 1s \(heartbeat\); downsizing 4 -> 2 workers$' "$TMP/err"
expect_eq "ranks done at world 2" "$(grep -c 'done r[01] world 2' "$TMP/out")" 2
grep -q 'world 4' "$TMP/out" && fail "a rank finished at world 4 although rank 1 hung"
[ "$ms" -lt 10000 ] || fail "took ${ms} ms"

# on_timeout = fail: 124, with the reason, the summary naming rank 1 and class hang.
# (the healthy rank touches every 50 ms for 10 s; 2 s of silence is a stall even on a busy machine, 500 ms not)
"$DDP" --no-python --nproc-per-node 2 --set timeout.stall=2s --set restart.on_timeout=fail \
    "$HELPERS/heartbeat" 200 50 1 >"$TMP/out" 2>"$TMP/err"
expect_eq "status on_timeout=fail" "$?" 124
expect_grep 'rank 1 made no progress for 2s \(heartbeat\); on_timeout = fail: exiting' "$TMP/err"
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 1 ' "$TMP/root"
expect_grep 'class +: hang' "$TMP/root"

# on_timeout = restart with max_restarts 1: two attempts, then 124.
"$DDP" --no-python --nproc-per-node 2 --max-restarts 1 --set timeout.stall=2s "$HELPERS/heartbeat" 200 50 0 \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status on_timeout=restart" "$?" 124
expect_grep 'attempt 0: rank 0 made no progress for 2s \(heartbeat\); restarting with 2 workers \(restart 1 of 1\)' "$TMP/err"
expect_grep 'attempt 1: rank 0 made no progress for 2s \(heartbeat\); no restarts left: exiting' "$TMP/err"

# wall limit.
start=$(date +%s%N)
HANG_QUIET=1 "$DDP" --no-python --nproc-per-node 2 --set timeout.wall=700ms --set restart.on_timeout=fail \
    "$HELPERS/hang" 3600 >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status wall" "$rc" 124
expect_grep 'the attempt ran longer than 700ms \(wall\)' "$TMP/err"
[ "$ms" -ge 650 ] && [ "$ms" -lt 3000 ] || fail "wall limit took ${ms} ms"

# init: a rank silent from the start (no output, no heartbeat) within 600ms.
HANG_QUIET=1 "$DDP" --no-python --nproc-per-node 2 --set timeout.init=600ms --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$HELPERS/hang" 3600 >"$TMP/out" 2>"$TMP/err"
expect_eq "status init" "$?" 124
expect_grep 'showed no sign of life within 600ms \(init\)' "$TMP/err"

# Output silence: every rank prints once, then nothing for stall -> timeout.
"$DDP" --no-python --nproc-per-node 2 --set timeout.stall=600ms --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$HELPERS/hang" 3600 >"$TMP/out" 2>"$TMP/err"
expect_eq "status output silence" "$?" 124
expect_grep 'no rank wrote any output for 600ms \(output\)' "$TMP/err"

# ...but a job that keeps printing is not hung.
cat >"$TMP/chatty.sh" <<'EOS'
#!/bin/sh
i=0; while [ $i -lt 12 ]; do echo "tick $i"; sleep 0.1; i=$((i+1)); done
EOS
chmod +x "$TMP/chatty.sh"
"$DDP" --no-python --nproc-per-node 2 --set timeout.stall=600ms --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$TMP/chatty.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status chatty job" "$?" 0

# issue 43 trap 1: heartbeat = file (the default) and a script that never touches its heartbeat file: the stall is
# measured on output, and the console says so. The chatty job (1.2 s of ticks, stall 600ms) completes...
"$DDP" --no-python --nproc-per-node 2 --set timeout.stall=600ms --set restart.on_timeout=fail "$TMP/chatty.sh" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status chatty job, heartbeat = file never touched" "$?" 0
expect_grep '^ddplaunch: attempt 0: no rank touched its heartbeat file \(DDPLAUNCH_HEARTBEAT_FILE\) in 600ms: stall is measured on output' "$TMP/err"
# ...and a silent one is a stall on output, whose verdict says why and whose hint names no process to py-spy.
"$DDP" --no-python --nproc-per-node 2 --set timeout.stall=600ms --set restart.on_timeout=fail "$HELPERS/hang" 3600 \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status silent job, heartbeat = file never touched" "$?" 124
expect_grep '^ddplaunch: (error: )?attempt 0: no rank wrote any output for 600ms \(output: no rank ever touched the heartbeat file; set heartbeat = output\); stopping the workers$' "$TMP/err"
grep -n -- '--pid' "$TMP/err" && fail "the hang hint names a process that is stopped"

# issue 43 item 4: a rank the hang capture aborted is "stopped by ddplaunch for the stack capture" in the summary,
# whose stderr part leaves the capture's dump (ddplaunch's own sampler thread in it) to the console above.
cat >"$TMP/hb.py" <<'EOS'
import os, pathlib, time
hb = pathlib.Path(os.environ["DDPLAUNCH_HEARTBEAT_FILE"])
for i in range(300):
    if os.environ["RANK"] == "0" or i < 3:
        hb.touch()
    time.sleep(0.1)
EOS
"$DDP" --nproc-per-node 2 --set timeout.stall=1s --set restart.on_timeout=fail "$TMP/hb.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "captured hang: status" "$?" 124
sed -n '/^Root Cause/,/^=====/p' "$TMP/err" >"$TMP/root"
expect_grep '^  exitcode +: -6 \(pid: [0-9]+\) SIGABRT: stopped by ddplaunch for the stack capture$' "$TMP/root"
grep -q '_ddplaunch_wait\|Fatal Python error' "$TMP/root" && { cat "$TMP/root"; fail "the summary repeats the capture's dump"; }

# A recognised collective-timeout line in a worker's output is a timeout event (class collective-timeout).
cat >"$TMP/nccl.sh" <<'EOS'
#!/bin/sh
if [ "$RANK" = 1 ]; then
  echo "[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out." >&2
fi
sleep 30
EOS
chmod +x "$TMP/nccl.sh"
"$DDP" --no-python --nproc-per-node 2 --set restart.on_timeout=fail "$TMP/nccl.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status nccl timeout" "$?" 124
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'class +: collective-timeout' "$TMP/root"
expect_grep 'rank +: 1 ' "$TMP/root"
echo ok
