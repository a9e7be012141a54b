#!/usr/bin/env bash
# Issue 24 item 7: the launcher paused (SIGSTOP then SIGCONT, as Ctrl-Z/fg, a debugger or a VM pause) longer than
# [timeout] stall with heartbeat = output: the time it did not run is not silence of the workers, so a healthy
# job that printed all along is not stopped as hung on resume.
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
i=0; while [ $i -lt 30 ]; do echo "tick $RANK $i"; sleep 0.2; i=$((i+1)); done
EOS
chmod +x "$TMP/w.sh"

"$DDP" --no-python --nproc-per-node 2 --log-dir "$TMP/logs" --set timeout.stall=2s --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$TMP/w.sh" >"$TMP/out" 2>"$TMP/err" &
pid=$!
sleep 1
kill -STOP "$pid"
sleep 0.3
[ "$(awk '{print $3}' "/proc/$pid/stat")" = T ] || fail "the launcher is not stopped"
sleep 3.7
kill -CONT "$pid"
wait "$pid"
rc=$?
expect_eq "status after a 4 s pause of the launcher" "$rc" 0
expect_eq "ticks" "$(grep -c '^tick [01] ' "$TMP/out")" 60
expect_grep 'attempt 0: the launcher did not run for [0-9.]+m?s \(stopped or suspended\): not counted as silence of the workers' "$TMP/err"
grep -E 'no rank wrote any output|stopping the workers' "$TMP/err" && fail "a healthy job was stopped as hung"
E=$(find "$TMP/logs" -name events.jsonl | head -1)
[ -f "$E" ] || fail "no events.jsonl"
jq -e 'select(.event == "timeout" or .event == "hang")' "$E" && fail "a timeout event was recorded"
exit 0
