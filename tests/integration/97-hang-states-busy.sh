#!/usr/bin/env bash
# Stuck, busy or waiting (issue 51), a rank busy forever: rank 0 computes alone (torch matmuls) and never comes back
# while ranks 1-2 wait in all_reduce. At default settings (setup allowance and floor scaled down, [timeout]
# busy_limit = 20s instead of 30 minutes) it gets one "works alone" line, no action before busy_limit, then the
# job ends (exit 124) with the evidence: no restart although --max-restarts 1 allows one; rank 0 is the root cause.
# Also [timeout] on_suspect = warn keeps the old behaviour for a stuck rank: warned about, never stopped. And with a
# flight recorder (fake_recorder.py imitates torch 2.x's on this torch 1.13) a stuck rank is named 15 s after the
# hang began instead of the 30 s floor, and with max_restarts at its default 0 the job ends with the verdict
# (exit 124) once the 15 s confirmation passed. A shape mismatch the recorder sees is stuck too: it never ends.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
W=$DDP_SRCDIR/tests/integration/states_worker.py
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"

mkdir -p "$TMP/busy"
start=$(date +%s)
(cd "$TMP/busy" && HS_KIND=eval HS_ALONE_S=inf PATH=/usr/bin:$PATH timeout 150 "$DDP" --nproc-per-node 3 \
    --max-restarts 1 --log-dir "$TMP/busy/log" --set timeout.suspect_setup=5s --set timeout.suspect_floor=4s \
    --set timeout.busy_limit=20s "$W" >"$TMP/busy.out" 2>"$TMP/busy.err")
rc=$?
took=$(($(date +%s) - start))
[ $rc = 124 ] || { cat "$TMP/busy.err"; fail "busy: exit $rc, want 124"; }
expect_eq "busy: works-alone lines" "$(grep -c 'works alone (.*no action before' "$TMP/busy.err")" 1
expect_grep "attempt 0: rank 0 works alone \(CPU [0-9]+%[^)]*\) for [0-9]+ s while ranks 1-2 wait in all_reduce: no action before \[timeout\] busy_limit \(20s\)" "$TMP/busy.err"
expect_grep "attempt 0: rank 0 works alone \(CPU [0-9]+%[^)]*\) for [0-9]+ s while ranks 1-2 wait in all_reduce, past \[timeout\] busy_limit \(20s\); stopping the workers" "$TMP/busy.err"
expect_grep "a rank worked alone past \[timeout\] busy_limit: not restarting" "$TMP/busy.err"
grep -q "suspected hang" "$TMP/busy.err" && fail "busy: a rank working alone was called a suspected hang"
R=$(echo "$TMP/busy/log"/*/)
$CHECK "$R" >/dev/null || fail "busy: records do not match the documented schema"
expect_eq "busy: attempts" "$(jq -r .attempts "$R/summary.json")" 1
expect_eq "busy: root cause" "$(jq -r .root_cause.rank "$R/summary.json")" 0
expect_eq "busy: hang.state" "$(jq -r .hang.state "$R/summary.json")" busy
echo "busy: exit 124 after ${took}s; $(grep -m1 'past \[timeout\] busy_limit' "$TMP/busy.err" | cut -c1-200)"

# on_suspect = warn: the stuck rank is warned about and the job runs on (stopped here by timeout(1))
mkdir -p "$TMP/warn"
(cd "$TMP/warn" && HS_KIND=sleep PATH=/usr/bin:$PATH timeout 30 "$DDP" --nproc-per-node 3 \
    --set timeout.suspect_setup=5s --set timeout.suspect_floor=4s --set timeout.on_suspect=warn "$W" \
    >"$TMP/warn.out" 2>"$TMP/warn.err")
rc=$?
[ $rc = 124 ] || { cat "$TMP/warn.err"; fail "warn: exit $rc, want 124 from timeout(1)"; }
expect_grep "rank 0 is stuck \(no CPU, no I/O for [0-9]+ s.*the job runs on \(\[timeout\] on_suspect = warn\)" "$TMP/warn.err"
grep -q "stopping the workers" "$TMP/warn.err" && fail "warn: the job was stopped"
# early, with a recorder: every setting at its default but the setup allowance (10 s)
mkdir -p "$TMP/early"
(cd "$TMP/early" && FR_KIND=stuck FR_RANK=1 PATH=/usr/bin:$PATH timeout 120 "$DDP" --nproc-per-node 3 \
    --set gpus.select=none --log-dir "$TMP/early/log" --set timeout.suspect_setup=10s \
    "$DDP_SRCDIR/tests/integration/fake_recorder.py" "$DDP_SRCDIR/bench/gpu/fr_worker.py" >"$TMP/early.out" \
    2>"$TMP/early.err")
rc=$?
[ $rc = 124 ] || { cat "$TMP/early.err"; fail "early: exit $rc, want 124"; }
expect_grep "attempt 0: suspected hang: rank 1 .*no progress for 1[0-9]s \(limit 30s\): flight recorder: rank 1 never entered gloo:all_reduce.*rank 1 is stuck \(no CPU, no I/O" "$TMP/early.err"
R=$(echo "$TMP/early/log"/*/)
jq -e '.recovery.named_after_ms <= 17000 and .recovery.stopped_after_ms <= 40000 and .hang.state == "stuck"' \
    "$R/summary.json" >/dev/null || fail "early: $(jq -c '[.recovery, .hang.state]' "$R/summary.json")"
echo "early: $(jq -c '.recovery | [.named_after_ms, .stopped_after_ms]' "$R/summary.json") ms after the hang began"

# a shape mismatch (rank 1 all_reduces 2 elements, the others 1): stuck, stopped at the defaults
(cd "$TMP/early" && FR_KIND=shape FR_RANK=1 PATH=/usr/bin:$PATH timeout 120 "$DDP" --nproc-per-node 3 \
    --set gpus.select=none --set timeout.suspect_setup=15s --set timeout.suspect_floor=14s \
    "$DDP_SRCDIR/tests/integration/fake_recorder.py" "$DDP_SRCDIR/bench/gpu/fr_worker.py" >"$TMP/shape.out" \
    2>"$TMP/shape.err")
rc=$?
[ $rc = 124 ] || { cat "$TMP/shape.err"; fail "shape: exit $rc, want 124"; }
expect_grep "suspected hang for [0-9]+s \(\[timeout\] on_suspect = auto\): rank 1 is stuck \(in a collective the others never match" "$TMP/shape.err"
echo ok
