#!/usr/bin/env bash
# Hang forensics (issue 18) on CPU with gloo: before a timed-out attempt is stopped, every rank's Python stack is
# captured (PYTHONFAULTHANDLER + SIGABRT) and the rank that caused the hang is named, not the one that noticed it:
# a rank stuck outside the collective, a rank in a different collective, a rank that is slow (not stuck), and a
# silence (heartbeat = output) with no collective timeout at all. summary.json and events.jsonl carry the verdict
# (valid against the man page's schema); [timeout] stacks = no turns it off.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
W=$DDP_SRCDIR/tests/integration/hang_worker.py

# run NAME CULPRIT KIND [ddplaunch options...]: expects exit 124 and the verdict naming CULPRIT
run() {
    local name=$1 culprit=$2 kind=$3
    shift 3
    HANG_RANK=$culprit HANG_KIND=$kind HANG_PG_TIMEOUT_S=${PGT:-5} "$DDP" --nproc-per-node 3 --log-dir "$TMP/$name" \
        "$@" "$W" >"$TMP/$name.out" 2>"$TMP/$name.err"
    local rc=$?
    [ $rc = 124 ] || { cat "$TMP/$name.err"; fail "$name: exit $rc, want 124"; }
    R=$(echo "$TMP/$name"/*/)
    S=$R/summary.json
    $CHECK "$R" >"$TMP/$name.ev" || fail "$name: records do not match the documented schema"
    expect_eq "$name: culprit" "$(jq -r '[.hang.culprits[].rank] | join(",")' "$S")" "$culprit"
    expect_eq "$name: root cause" "$(jq -r .root_cause.rank "$S")" "$culprit"
    expect_eq "$name: root cause class" "$(jq -r .root_cause.class "$S")" hang
    expect_eq "$name: host" "$(jq -r '.hang.culprits[0].host' "$S")" "$(jq -r .host "$S")"
    expect_grep "^== rank $culprit .* CULPRIT" "$(jq -r .hang.stacks "$S")"
    # high when every rank gave a stack; medium when one was caught ending on its own timeout error (a race)
    expect_grep "^Hang verdict \((high|medium) confidence\): rank $culprit \(local $culprit, host " "$TMP/$name.err"
    expect_grep "^  stacks: $R" "$TMP/$name.err"
    grep -q '"event":"hang"' "$R/events.jsonl" || fail "$name: no hang event"
    echo "$name: $(jq -r '.hang.why + " [" + .hang.confidence + ", capture " + (.hang.capture_ms|tostring) + " ms]"' "$S")"
}

run outside 2 outside
expect_eq "outside: frame" "$(jq -r '.hang.culprits[0].frame' "$S")" "hang_worker.py:24 in load_batch"
expect_eq "outside: collective waited in" "$(jq -r .hang.collective "$S")" all_reduce
expect_eq "outside: the reporter is another failure" "$(jq -r '.failures[0].class' "$S")" collective-timeout

run other 1 other
expect_eq "other: its collective" "$(jq -r '.hang.culprits[0].collective' "$S")" broadcast

run slow 1 slow
expect_eq "slow: frame" "$(jq -r '.hang.culprits[0].frame' "$S")" "hang_worker.py:30 in slow_step"

# No collective timeout at all (gloo would wait a minute): the silence ends the attempt, the stacks decide (init
# given, so that the silence counts from the first output, not from torch's import on a loaded machine).
PGT=60 run silent 0 outside --set timeout.heartbeat=output --set timeout.init=120s --set timeout.stall=4s
expect_eq "silent: timeout class" "$(jq -r 'select(.event=="timeout") | .class' "$R/events.jsonl")" hang

# The off switch: no capture, the reporter stays the root cause, no verdict.
HANG_RANK=2 HANG_KIND=outside HANG_PG_TIMEOUT_S=5 "$DDP" --nproc-per-node 3 --log-dir "$TMP/off" \
    --set timeout.stacks=no "$W" >"$TMP/off.out" 2>"$TMP/off.err"
expect_eq "off: status" "$?" 124
R=$(echo "$TMP/off"/*/)
expect_eq "off: hang" "$(jq -r .hang "$R/summary.json")" null
grep -q "Hang verdict" "$TMP/off.err" && fail "stacks = no still captured stacks"
[ "$(jq -r .root_cause.rank "$R/summary.json")" != 2 ] || fail "off: the culprit cannot be known without stacks"
echo ok
