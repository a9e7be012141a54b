#!/usr/bin/env bash
# Failure handling (issue 3): the first failure SIGTERMs every other worker group at once (not after a poll);
# a worker that ignores SIGTERM is SIGKILLed after --shutdown-timeout; restarts run fresh attempts with
# TORCHELASTIC_RESTART_COUNT counting up and a fresh attempt directory.
. "$DDP_SRCDIR/tests/integration/lib.sh"

# Rank 0 fails after 300 ms; ranks 1-3 hang (an hour). They must be gone right after.
mkdir -p "$TMP/p"
cat >"$TMP/job.sh" <<EOS
#!/bin/sh
if [ "\$RANK" = 0 ]; then sleep 0.3; exit 5; fi
exec "$HELPERS/hang" 3600 "$TMP/p"
EOS
chmod +x "$TMP/job.sh"
start=$(date +%s%N)
"$DDP" --no-python --nproc-per-node 4 "$TMP/job.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status" "$rc" 5
[ "$ms" -lt 2000 ] || fail "the peers were not stopped promptly: the launcher took ${ms} ms"
for f in "$TMP"/p/pid.*; do
    pid=$(cat "$f")
    st=$(ps -o stat= -p "$pid" 2>/dev/null | tr -d ' ')
    [ -z "$st" ] || [ "$st" = Z ] || fail "worker $pid ($f) still alive after the launcher exited"
done
expect_eq "hanging peers seen" "$(ls "$TMP"/p/pid.* | wc -l)" 3

# A peer that ignores SIGTERM is killed after the grace time (1 s), not before, not much after.
cat >"$TMP/job2.sh" <<EOS
#!/bin/sh
if [ "\$RANK" = 0 ]; then sleep 0.3; exit 7; fi
exec "$HELPERS/ignoreterm" 3600
EOS
chmod +x "$TMP/job2.sh"
start=$(date +%s%N)
"$DDP" --no-python --nproc-per-node 2 --shutdown-timeout 1 "$TMP/job2.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status" "$rc" 7
[ "$ms" -ge 1250 ] && [ "$ms" -lt 3000 ] || fail "SIGKILL after the grace time: took ${ms} ms (want ~1300)"
expect_grep '^ddplaunch: warning: attempt 0: rank 1 still running 1s after SIGTERM \(shutdown_timeout\): SIGKILL$' "$TMP/err"

# Restarts: attempts 0..2, each a fresh attempt dir, TORCHELASTIC_RESTART_COUNT = attempt; the last succeeds.
cat >"$TMP/job3.sh" <<EOS
#!/bin/sh
echo "attempt \$TORCHELASTIC_RESTART_COUNT max \$TORCHELASTIC_MAX_RESTARTS" >>"$TMP/attempts.\$LOCAL_RANK"
[ "\$TORCHELASTIC_RESTART_COUNT" -ge 2 ] && exit 0
[ "\$RANK" = 1 ] && { sleep 0.3; exit 9; }
sleep 30
EOS
chmod +x "$TMP/job3.sh"
"$DDP" --no-python --nproc-per-node 2 --max-restarts 3 --log-dir "$TMP/logs" "$TMP/job3.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status after restarts" "$?" 0
expect_eq "rank 0 attempts" "$(tr '\n' '|' <"$TMP/attempts.0")" "attempt 0 max 3|attempt 1 max 3|attempt 2 max 3|"
expect_grep 'restarting with 2 workers \(restart 1 of 3\)' "$TMP/err"
expect_grep 'restarting with 2 workers \(restart 2 of 3\)' "$TMP/err"
for a in 0 1 2; do
    [ -n "$(find "$TMP/logs" -type d -name "attempt_$a")" ] || { find "$TMP/logs"; fail "no attempt_$a dir"; }
done

# Restarts run out: the root cause's code comes back.
rm -f "$TMP"/attempts.*
cat >"$TMP/job4.sh" <<EOS
#!/bin/sh
echo x >>"$TMP/attempts.\$LOCAL_RANK"
[ "\$RANK" = 1 ] && { sleep 0.3; exit 9; }
sleep 30
EOS
chmod +x "$TMP/job4.sh"
"$DDP" --no-python --nproc-per-node 2 --max-restarts 1 "$TMP/job4.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status when restarts run out" "$?" 9
expect_eq "attempts made" "$(wc -l <"$TMP/attempts.0")" 2
echo ok
