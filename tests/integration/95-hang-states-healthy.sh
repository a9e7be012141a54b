#!/usr/bin/env bash
# Stuck, busy or waiting (issue 51), the healthy jobs: at default settings (only the setup allowance and the floor
# scaled down), rank 0 works alone for 20 s while the others wait: it evaluates in C (torch matmuls; the others in
# a blocking all_reduce), writes a checkpoint with fsync (the others poll an async all_reduce), or prepares data
# in Python (the others in a barrier). Each job finishes (exit 0) with no restart, no "hang" word on the console,
# and at most one "works alone" line, naming rank 0; the works_alone event says busy for rank 0, waiting for the
# ones in a collective; `ddplaunch report` shows it.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
W=$DDP_SRCDIR/tests/integration/states_worker.py
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"

healthy() {
    local kind=$1 wait=$2
    mkdir -p "$TMP/$kind"
    (cd "$TMP/$kind" && HS_KIND=$kind HS_WAIT=$wait HS_ALONE_S=20 PATH=/usr/bin:$PATH timeout 150 "$DDP" \
        --nproc-per-node 3 --log-dir "$TMP/$kind/log" --set timeout.suspect_setup=5s --set timeout.suspect_floor=4s \
        "$W" >"$TMP/$kind.out" 2>"$TMP/$kind.err")
    local rc=$?
    [ $rc = 0 ] || { cat "$TMP/$kind.err"; fail "$kind: exit $rc, want 0"; }
    expect_eq "$kind: all done" "$(grep -c 'done$' "$TMP/$kind.out")" 3
    grep -qi "hang" "$TMP/$kind.err" && { cat "$TMP/$kind.err"; fail "$kind: the word hang on the console"; }
    grep -q "resumed" "$TMP/$kind.out" && fail "$kind: restarted"
    local n
    n=$(grep -c "works alone" "$TMP/$kind.err")
    [ "$n" -le 1 ] || fail "$kind: $n works-alone lines"
    R=$(echo "$TMP/$kind/log"/*/)
    $CHECK "$R" >"$TMP/$kind.ev" || fail "$kind: records do not match the documented schema"
    expect_eq "$kind: attempts" "$(jq -r .attempts "$R/summary.json")" 1
    expect_eq "$kind: recovery" "$(jq -r .recovery "$R/summary.json")" null
    if [ "$n" = 1 ]; then
        expect_grep "attempt 0: rank 0 works alone \(.*\) for [0-9]+ s.*: no action before \[timeout\] busy_limit" \
            "$TMP/$kind.err"
        E=$(grep -m1 '"event":"works_alone"' "$R/events.jsonl")
        expect_eq "$kind: rank 0's state" "$(echo "$E" | jq -r '.states["0"].state')" busy
        "$DDP" report "$R" >"$TMP/$kind.report" || fail "$kind: report failed"
        expect_grep "works alone: rank 0 works alone" "$TMP/$kind.report"
    fi
    echo "$kind/$wait: exit 0; $(grep -m1 'works alone' "$TMP/$kind.err" | cut -c1-200)"
}

healthy eval allreduce
expect_grep "rank 0 works alone \(CPU [0-9]+%, at states_worker.py:[0-9]+ in evaluate\) for [0-9]+ s while ranks 1-2 wait in all_reduce" "$TMP/eval.err"
expect_eq "eval: the waiting ranks" "$(echo "$E" | jq -r '[.states["1"].state, .states["2"].state] | join(",")')" waiting,waiting
healthy ckpt poll
healthy prep barrier
echo ok
