#!/usr/bin/env bash
# Issue 24 item 5: logs on a full file system. Each log that stops (stdout.log, stderr.log, timed.log and the run
# record events.jsonl) is said on the console once, with the bytes it kept (the file's real size); summary.json
# (its room taken at the start) lists them in logs_stopped; the console summary lists them and still shows the
# worker's last stderr line (a FATAL error) from memory although stderr.log is empty.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs"
mkdir "$TMP/full"
mount -t tmpfs -o size=200k tmpfs "$TMP/full" || skip "cannot mount tmpfs"
trap 'umount "$TMP/full"; rm -rf "$TMP"' EXIT

cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
head -c 3000000 /dev/zero | tr '\0' 'x' | fold -w 100
echo "FATAL: the last words" >&2
exit 3
EOS
chmod +x "$TMP/w.sh"
# a 6000-byte argument: attempt 1's attempt_start event needs a new page of the full file system
arg=$(head -c 6000 /dev/zero | tr '\0' a)
"$DDP" --no-python --nproc-per-node 1 --max-restarts 1 --log-dir "$TMP/full/logs" "$TMP/w.sh" "$arg" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 3
expect_eq "stdout bytes on the console (2 attempts)" "$(tr -cd x <"$TMP/out" | wc -c)" 6000000
D=$(sed -n 's/^ddplaunch: logs in //p' "$TMP/err")
[ -d "$D/attempt_1/0" ] || fail "no attempt_1 directory under '$D'"
[ "$(stat -c %s "$D/attempt_0/0/stdout.log")" -lt 3000000 ] || fail "precondition: the file system did not fill"

# the console: each log once, with the bytes it kept
expect_eq "one warning per log" "$(grep -c ': log stopped at ' "$TMP/err")" 6
for a in 0 1; do
    for f in stdout.log stderr.log timed.log; do
        b=$(sed -nE "s|^ddplaunch: warning: rank 0 attempt_$a/0/$f: log stopped at ([0-9]+) bytes: No space left on device.*|\\1|p" "$TMP/err")
        [ -n "$b" ] || fail "no line for attempt_$a/0/$f"
        expect_eq "attempt_$a/0/$f: bytes said = its size" "$b" "$(stat -c %s "$D/attempt_$a/0/$f")"
    done
done
expect_grep '^ddplaunch: warning: rank 0 attempt_0/0/stderr.log: log stopped at 0 bytes: No space left on device; its last 20 lines are kept for the summary$' "$TMP/err"
expect_eq "stderr.log is empty" "$(stat -c %s "$D/attempt_0/0/stderr.log")" 0
ev=$(grep -c 'events.jsonl: record stopped at' "$TMP/err")
expect_eq "events.jsonl said once" "$ev" 1
eb=$(sed -nE 's|.*events.jsonl: record stopped at ([0-9]+) bytes: No space left on device; later events are left out$|\1|p' "$TMP/err")
expect_eq "events.jsonl: bytes said = its size" "$eb" "$(stat -c %s "$D/events.jsonl")"
jq -e . "$D/events.jsonl" >/dev/null || fail "events.jsonl is not whole JSON lines"
expect_eq "events kept" "$(jq -r .event "$D/events.jsonl" | head -2 | tr '\n' ' ')" "job_start attempt_start "

# the console summary: the FATAL line from memory, and the logs that stopped
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep '^    FATAL: the last words$' "$TMP/root"
sed -n '/^Logs that stopped/,$p' "$TMP/err" >"$TMP/stops"
expect_eq "logs listed in the console summary" "$(grep -c 'stopped at [0-9]* bytes: No space left on device$' "$TMP/stops")" 7
expect_grep "^  rank 0 attempt_0/0/stdout.log: stopped at $(stat -c %s "$D/attempt_0/0/stdout.log") bytes" "$TMP/stops"
expect_grep "^  events.jsonl: stopped at $eb bytes" "$TMP/stops"

# summary.json was written on the full disk, and marks each log
S="$D/summary.json"
[ -f "$S" ] || fail "no summary.json on the full disk"
expect_eq "result" "$(jq -r .result "$S")" failed
expect_eq "logs_stopped" "$(jq '.logs_stopped | length' "$S")" 7
for f in attempt_0/0/stdout.log attempt_0/0/stderr.log attempt_0/0/timed.log attempt_1/0/stdout.log; do
    expect_eq "$f in summary.json" \
        "$(jq -r --arg f "$f" '.logs_stopped[] | select(.file == $f) | "\(.rank) \(.bytes) \(.error)"' "$S")" \
        "0 $(stat -c %s "$D/$f") No space left on device"
done
expect_eq "events.jsonl in summary.json" \
    "$(jq -r '.logs_stopped[] | select(.file == "events.jsonl") | "\(.rank) \(.bytes)"' "$S")" "null $eb"
expect_eq "stderr tail in summary.json" "$(jq -r '.root_cause.stderr_tail[-1]' "$S")" "FATAL: the last words"
ls -A "$D" | grep -q '^\.summary' && fail "the summary's temporary file was left"
$PY "$DDP_SRCDIR/tests/integration/records_check.py" "$DDP_SRCDIR/man/ddplaunch.1" "$D" >/dev/null ||
    fail "the records do not follow ddplaunch(1), RUN RECORDS"

# a job that succeeds on the full disk also ends with the list (its logs lack their ends too)
rm -rf "$TMP/full/logs"
printf '#!/bin/sh\nhead -c 3000000 /dev/zero | tr "\\0" x | fold -w 100\n' >"$TMP/ok.sh"
chmod +x "$TMP/ok.sh"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/full/logs" "$TMP/ok.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status of the job that succeeded" "$?" 0
D=$(sed -n 's/^ddplaunch: logs in //p' "$TMP/err")
tail -3 "$TMP/err" >"$TMP/last"
expect_grep '^Logs that stopped \(a write failed; what came after is not in them\):$' "$TMP/last"
expect_grep "^  rank 0 attempt_0/0/stdout.log: stopped at $(stat -c %s "$D/attempt_0/0/stdout.log") bytes" "$TMP/last"
expect_eq "result" "$(jq -r .result "$D/summary.json")" succeeded
expect_eq "logs_stopped of the job that succeeded" "$(jq -r '[.logs_stopped[].file] | sort | join(" ")' "$D/summary.json")" \
    "attempt_0/0/stdout.log attempt_0/0/timed.log"

# a hang's attempt_0/stacks.txt on the full disk: said once, listed (rank null), the verdict still on the console
rm -rf "$TMP/full/logs"
cat >"$TMP/hang.py" <<'EOS'
import sys, time
sys.stdout.write(("x" * 99 + "\n") * 30000)
sys.stdout.flush()
time.sleep(60)
EOS
"$DDP" --nproc-per-node 2 --log-dir "$TMP/full/logs" --set timeout.stall=3s --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$TMP/hang.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "status of the hung job" "$?" 124
D=$(sed -n 's/^ddplaunch: logs in //p' "$TMP/err")
grep -q 'capturing the stacks of 2 ranks' "$TMP/err" || fail "precondition: no stack capture"
expect_eq "stacks.txt said once" "$(grep -c 'attempt_0/stacks.txt: log stopped at' "$TMP/err")" 1
sb=$(sed -nE 's|^ddplaunch: warning: .*/attempt_0/stacks.txt: log stopped at ([0-9]+) bytes: No space left on device; the verdict is in the summary$|\1|p' "$TMP/err")
expect_eq "stacks.txt: bytes said = its size" "$sb" "$(stat -c %s "$D/attempt_0/stacks.txt")"
expect_grep '^  stacks: below \(stacks.txt could not be written\)$' "$TMP/err"
expect_grep "^  attempt_0/stacks.txt: stopped at $sb bytes: No space left on device$" "$TMP/err"
expect_eq "stacks.txt in summary.json" \
    "$(jq -r '.logs_stopped[] | select(.file == "attempt_0/stacks.txt") | "\(.rank) \(.bytes) \(.error)"' "$D/summary.json")" \
    "null $sb No space left on device"
exit 0
