#!/usr/bin/env bash
# Issue 34 item 13: a stopped rank (SIGSTOP, /proc state T) that is the only one left (rank 0 ended with 0) is the
# culprit of the stall with high confidence (rule 0 of HANG FORENSICS), not "no rank wrote any output" and
# root cause null.
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.py" <<'EOF'
import os, signal, time
print("rank", os.environ["RANK"], "up", flush=True)
if os.environ["RANK"] == "1":
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(60)
EOF
"$DDP" --nproc-per-node 2 --log-dir "$TMP/logs" --set timeout.stall=2s --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$TMP/w.py" >"$TMP/out" 2>"$TMP/err"
rc=$?
expect_eq "status" "$rc" 124
expect_grep 'attempt 0: rank 1 is stopped or a zombie and the others ended: no progress for 2s \(output\)' "$TMP/err"
S=$(find "$TMP/logs" -name summary.json | head -1)
[ -f "$S" ] || fail "no summary.json under $TMP/logs"
expect_eq "root cause rank" "$(jq -r .root_cause.rank "$S")" 1
expect_eq "root cause class" "$(jq -r .root_cause.class "$S")" hang
expect_eq "confidence" "$(jq -r .hang.confidence "$S")" high
expect_eq "culprits" "$(jq -c '[.hang.culprits[].rank]' "$S")" "[1]"
exit 0
