#!/usr/bin/env bash
# Stuck, busy or waiting (issue 51), the stuck ranks: at default settings (setup allowance and floor scaled down)
# with --max-restarts 1, rank 0 stops at step 3 while ranks 1-2 wait in all_reduce: in a sleep, on a lock it
# already holds, reading a FIFO nobody writes, or spinning in a GPU wait that never ends (a stand-in for
# torch.cuda.synchronize). Each is named stuck on the console ("rank 0 is stuck (...)"), stopped by [timeout]
# on_suspect = auto, restarted, and the restart resumes from the checkpoint and finishes (exit 0); summary.json's
# hang.state is stuck and its recovery has each step, and `ddplaunch report` prints "hang -> training again in N
# s". A rank stuck at the same place on every attempt ends the job with the verdict once the restart is used.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
W=$DDP_SRCDIR/tests/integration/states_worker.py
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"

# stuck NAME KIND WANT [STUCK_ATTEMPTS]: run it, check the line that names rank 0 stuck (WANT: how) and the records
stuck() {
    local kind=$1 how=$2 want=$3 attempts=${4:-1}
    mkdir -p "$TMP/$kind"
    (cd "$TMP/$kind" && HS_KIND=$how HS_STUCK_ATTEMPTS=$attempts PATH=/usr/bin:$PATH timeout 150 "$DDP" \
        --nproc-per-node 3 --max-restarts 1 --log-dir "$TMP/$kind/log" --set timeout.suspect_setup=5s \
        --set timeout.suspect_floor=4s "$W" >"$TMP/$kind.out" 2>"$TMP/$kind.err")
    rc=$?
    R=$(echo "$TMP/$kind/log"/*/)
    expect_grep "attempt 0: suspected hang: rank 0 .*; rank 0 is stuck \($want.*\); ranks 1-2 wait in all_reduce for it; stopping it in [0-9]+s unless it moves \(\[timeout\] on_suspect = auto\)" "$TMP/$kind.err"
    expect_grep "attempt 0: suspected hang for [0-9]+s \(\[timeout\] on_suspect = auto\): rank 0 is stuck" "$TMP/$kind.err"
    expect_eq "$kind: hang.state" "$(jq -r .hang.state "$R/summary.json")" stuck
    $CHECK "$R" >"$TMP/$kind.ev" || fail "$kind: records do not match the documented schema"
    echo "$kind: exit $rc; $(grep -m1 'is stuck' "$TMP/$kind.err" | sed 's/.*; rank 0 is stuck/rank 0 is stuck/' | cut -c1-160)"
}

for kind in sleep lock fifo gpu; do
    case $kind in
    sleep) want="no CPU, no I/O for [0-9]+ s, sleeping in [a-z_]*sleep" ;;
    lock) want="no CPU, no I/O for [0-9]+ s, sleeping in futex" ;;
    fifo) want="no CPU, no I/O for [0-9]+ s, sleeping in [a-z_]*pipe" ;;
    gpu) want="spins in a GPU wait that does not end, at states_worker.py:[0-9]+ in synchronize" ;;
    esac
    stuck $kind $kind "$want"
    [ $rc = 0 ] || { cat "$TMP/$kind.err"; fail "$kind: exit $rc, want 0 (restarted, then finished)"; }
    expect_eq "$kind: attempts" "$(jq -r .attempts "$R/summary.json")" 2
    expect_grep "rank 0 resumed at step 3" "$TMP/$kind.out"
    expect_eq "$kind: all done" "$(grep -c 'done$' "$TMP/$kind.out")" 3
    jq -e '.recovery | .attempt == 0 and .state == "stuck" and .named_after_ms > 0 and .stopped_after_ms >= .named_after_ms and .restarted_after_ms >= .stopped_after_ms and .training_after_ms >= .restarted_after_ms' \
        "$R/summary.json" >/dev/null || fail "$kind: recovery $(jq -c .recovery "$R/summary.json")"
    "$DDP" report "$R" >"$TMP/$kind.report" || fail "$kind: report failed"
    expect_grep "recovery: hang -> training again in [0-9]+ s \(named after [0-9]+ s, stopped after [0-9]+ s\)" "$TMP/$kind.report"
done
# named at most 15 s after the hang began (the floor here is 4 s, the cadence learned from 0.3 s steps)
jq -e '.recovery.named_after_ms <= 15000' "$TMP/sleep/log"/*/summary.json >/dev/null || fail "sleep: named late"

# the same place on every attempt: the job ends with the verdict once the restart is used
stuck sleep2 sleep "no CPU, no I/O" 2
[ $rc = 124 ] || { cat "$TMP/sleep2.err"; fail "sleep2: exit $rc, want 124"; }
expect_grep "attempt 1: suspected hang for [0-9]+s \(\[timeout\] on_suspect = auto\): rank 0 is stuck.*no restarts left: exiting" "$TMP/sleep2.err"
expect_eq "sleep2: root cause" "$(jq -r .root_cause.class "$R/summary.json")" hang
echo ok
