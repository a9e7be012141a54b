#!/usr/bin/env bash
# Run records (issue 18): log_dir gets events.jsonl (job start with the plan, attempts, worker exits with their
# class, decisions, job end) and summary.json (what the console summary says), both valid against the schema
# documented in man/ddplaunch.1 (records_check.py reads it from the page).
. "$DDP_SRCDIR/tests/integration/lib.sh"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"

# A failure, one restart, the same failure: exit 3.
EXITN_RANK=1 EXITN_DELAY_MS=5000 "$DDP" --no-python --nproc-per-node 2 --max-restarts 1 --log-dir "$TMP/l1" \
    "$HELPERS/exitn" 3 "boom on rank 1" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 3
R1=$(echo "$TMP"/l1/*/)
$CHECK "$R1" >"$TMP/ev" || fail "records of the failed run do not match the documented schema"
expect_eq "events" "$(tr '\n' ' ' <"$TMP/ev")" \
    "job_start attempt_start worker_exit worker_exit decision attempt_start worker_exit worker_exit decision job_end "
S=$R1/summary.json
expect_eq "exit_status" "$(jq -r .exit_status "$S")" 3
expect_eq "result" "$(jq -r .result "$S")" failed
expect_eq "attempts" "$(jq -r .attempts "$S")" 2
expect_eq "root cause rank" "$(jq -r .root_cause.rank "$S")" 1
expect_eq "root cause class" "$(jq -r .root_cause.class "$S")" exit-3
expect_eq "root cause tail" "$(jq -r '.root_cause.stderr_tail[-1]' "$S")" "boom on rank 1"
expect_eq "decisions" "$(jq -r 'select(.event=="decision") | .action' "$R1/events.jsonl" | tr '\n' ' ')" \
    "restart exit "
expect_eq "rank 1 exits" "$(jq -r 'select(.event=="worker_exit" and .rank==1) | .class' "$R1/events.jsonl" |
    tr '\n' ' ')" "exit-3 exit-3 "
expect_eq "log_dir in the summary" "$(jq -r .log_dir "$S")/" "$R1"
# Issue 23 item 13: each worker has one pid, its program's, in attempt_start and in worker_exit
started=$(jq -r 'select(.event=="attempt_start") | .attempt as $a | .workers[] | "\($a) \(.rank) \(.pid)"' \
    "$R1/events.jsonl" | sort)
exited=$(jq -r 'select(.event=="worker_exit") | "\(.attempt) \(.rank) \(.pid)"' "$R1/events.jsonl" | sort)
[ "$(echo "$started" | wc -l)" = 4 ] || fail "attempt_start workers: $started"
expect_eq "pids in attempt_start and worker_exit" "$started" "$exited"
# Each rank's timed.log: both streams, each line after its arrival time.
expect_grep '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z err boom on rank 1$' "$R1/attempt_0/1/timed.log"
# The console said the same root cause.
expect_grep '^  rank      : 1 \(local_rank: 1\)' "$TMP/err"
# Issue 23 item 13: no pointer that leads nowhere. exitn writes no error.json: summary.json names none; the
# console's hint names no literal LOG_DIR path, its stderr_log line names a file that is there.
expect_eq "error_file without an error.json" "$(jq -r .root_cause.error_file "$S")" null
grep -q 'LOG_DIR/attempt_N' "$TMP/err" && fail "a hint names a literal LOG_DIR/attempt_N path"
log=$(sed -n '/^Root Cause/,$s/^  stderr_log: //p' "$TMP/err")
[ -n "$log" ] && [ -f "$log" ] || { cat "$TMP/err"; fail "the root cause's stderr_log '$log' is not a file"; }

# A success: summary.json too, no root cause.
"$DDP" --no-python --nproc-per-node 2 --log-dir "$TMP/l2" "$HELPERS/exitn" 0 >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
R2=$(echo "$TMP"/l2/*/)
$CHECK "$R2" >"$TMP/ev" || fail "records of the good run do not match the documented schema"
expect_eq "result" "$(jq -r .result "$R2/summary.json")" succeeded
expect_eq "root cause" "$(jq -r .root_cause "$R2/summary.json")" null
expect_eq "ok exits" "$(jq -r 'select(.event=="worker_exit") | .class' "$R2/events.jsonl" | tr '\n' ' ')" "ok ok "

# Issue 23 item 13: torch's @record error file. With --log-dir it is named and there; without, the message and
# traceback are shown but not a path into the run directory that is removed at exit.
if $PY -c 'import torch.distributed.elastic.multiprocessing.errors' 2>/dev/null; then
    cat >"$TMP/rec.py" <<'EOS'
import os
from torch.distributed.elastic.multiprocessing.errors import record
@record
def main():
    if os.environ["RANK"] == "1":
        raise RuntimeError("boom from record")
main()
EOS
    "$DDP" --nproc-per-node 2 --log-dir "$TMP/l3" "$TMP/rec.py" >"$TMP/out" 2>"$TMP/err"
    expect_eq "status of @record" "$?" 1
    R3=$(echo "$TMP"/l3/*/)
    ef=$(jq -r .root_cause.error_file "$R3/summary.json")
    [ -f "$ef" ] || fail "summary.json's error_file '$ef' is not a file"
    expect_grep "^  error_file: $ef$" "$TMP/err"
    "$DDP" --nproc-per-node 2 "$TMP/rec.py" >"$TMP/out" 2>"$TMP/err"
    expect_eq "status of @record without --log-dir" "$?" 1
    expect_grep '^  error_file: <N/A> \(not kept without --log-dir\)$' "$TMP/err"
    expect_grep '^  message   : RuntimeError: boom from record' "$TMP/err"
    for p in $(grep -oE '/[^ ]*error\.json' "$TMP/err"); do
        [ -e "$p" ] || fail "the console names $p, which is gone"
    done
    echo "@record: error_file named with --log-dir, contents only without"
else
    fail "python3-torch (torch.distributed.elastic) is needed for the @record check"
fi
echo ok
