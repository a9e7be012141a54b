#!/usr/bin/env bash
# Issue 24 item 7: the launcher paused (SIGSTOP then SIGCONT, as Ctrl-Z/fg, a debugger or a VM pause) longer than
# [timeout] stall with heartbeat = output: the time it did not run is not silence of the workers, so a healthy
# job that printed all along is not stopped as hung on resume. [timeout] wall, a deadline, counts that time.
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
i=0; while [ $i -lt 30 ]; do echo "tick $RANK $i"; sleep 0.2; i=$((i+1)); done
EOS
chmod +x "$TMP/w.sh"

# Run the launcher with settings $1 and $2 (out, err: $3 $4), stopped from 1 s to 5 s after its start; sets rc
# and ms (from the resume to its end).
paused_run() {
    "$DDP" --no-python --nproc-per-node 2 --log-dir "$3.logs" --set "$1" --set "$2" --set restart.on_timeout=fail \
        "$TMP/w.sh" >"$3" 2>"$4" &
    local pid=$! t0
    sleep 1
    kill -STOP "$pid"
    sleep 0.3
    [ "$(awk '{print $3}' "/proc/$pid/stat")" = T ] || fail "the launcher is not stopped"
    sleep 3.7
    t0=$(date +%s%N)
    kill -CONT "$pid"
    wait "$pid"
    rc=$?
    ms=$((($(date +%s%N) - t0) / 1000000))
}

paused_run timeout.stall=2s timeout.heartbeat=output "$TMP/out" "$TMP/err"
expect_eq "status after a 4 s pause of the launcher" "$rc" 0
expect_eq "ticks" "$(grep -c '^tick [01] ' "$TMP/out")" 60
expect_grep 'attempt 0: the launcher did not run for [0-9.]+m?s \(stopped or suspended\): not counted as silence of the workers' "$TMP/err"
grep -E 'no rank wrote any output|stopping the workers' "$TMP/err" && fail "a healthy job was stopped as hung"
E=$(find "$TMP/out.logs" -name events.jsonl | head -1)
[ -f "$E" ] || fail "no events.jsonl"
jq -e 'select(.event == "timeout" or .event == "hang")' "$E" && fail "a timeout event was recorded"

# [timeout] wall is a deadline, wall-clock time: the time the launcher was stopped counts. Limit 3 s, the
# launcher stopped from 1 s to 5 s: the attempt ends as a wall-timeout at once on resume, before the workers'
# own end (about 6 s; not counting the pause, the limit would only come at 7 s, after it).
paused_run timeout.wall=3s timeout.stall=off "$TMP/out2" "$TMP/err2"
expect_eq "status after a 4 s pause past a 3 s wall limit" "$rc" 124
expect_grep 'the attempt ran longer than 3s \(wall\)' "$TMP/err2"
[ "$ms" -lt 2500 ] || fail "the wall limit ended the attempt ${ms} ms after the resume (want at once)"
ticks=$(grep -c '^tick [01] ' "$TMP/out2")
[ "$ticks" -lt 60 ] || fail "the workers ran to their end ($ticks ticks): the wall limit did not count the pause"
E=$(find "$TMP/out2.logs" -name events.jsonl | head -1)
[ -f "$E" ] || fail "no events.jsonl (wall)"
expect_eq "timeout event" "$(jq -r 'select(.event == "timeout") | .class' "$E")" wall-timeout
exit 0
