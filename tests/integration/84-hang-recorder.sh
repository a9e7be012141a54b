#!/usr/bin/env bash
# The flight recorder in the hang watch (issue 31) on this VM's torch 1.13, which has none: fake_recorder.py
# imitates torch 2.x's in-process JSON (the format recorded on the GPU machine). 3 gloo ranks that enqueue their
# all_reduce and poll it (bench/gpu/fr_worker.py), rank 1 all_reduces 2 elements where the others send 1 (gloo
# lets the others through to #7): the sampler reads the recorder, the live line names rank 1 for a shape mismatch
# at #6 with both shapes, [timeout] on_suspect = restart stops the attempt, the post-mortem verdict says the same,
# and summary.json and events hold what each rank's recorder showed. A 40% slower rank is a straggler from the
# recorder (the stacks show no collective). Without the fake, the same job is judged on
# the stacks as before (48-hang-watch.sh covers those cases).
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
W=$DDP_SRCDIR/bench/gpu/fr_worker.py
FAKE=$DDP_SRCDIR/tests/integration/fake_recorder.py

FR_KIND=shape FR_RANK=1 PATH=/usr/bin:$PATH timeout 150 "$DDP" --nproc-per-node 3 --set gpus.select=none \
    --log-dir "$TMP/shape" --set timeout.on_suspect=restart --set timeout.on_suspect_after=1s \
    --set timeout.suspect_setup=15s --set timeout.suspect_floor=14s "$FAKE" "$W" >"$TMP/shape.out" 2>"$TMP/shape.err"
rc=$?
[ $rc = 124 ] || { cat "$TMP/shape.err"; fail "shape: exit $rc, want 124"; }
expect_grep "suspected hang: rank 1 \(local 1, host [^,]+, GPU none\) at fr_worker.py:[0-9]+ in wait_for; no progress for [0-9]+s \(limit [0-9]+s\): flight recorder: shape mismatch at gloo:all_reduce #6 of group 0 \(ranks 0-2\): rank 1 has \[\[2\]\] Float, ranks 0, 2 have \[\[1\]\] Float; ranks 0, 2 wait in group 0's #7 for rank 1; no progress in the recorders for [0-9]+ s; rank 1 is at fr_worker.py:[0-9]+ in wait_for" "$TMP/shape.err"
expect_grep "Hang verdict \(high confidence\): rank 1 \(local 1" "$TMP/shape.err"
expect_grep "why: flight recorder: shape mismatch at gloo:all_reduce #6" "$TMP/shape.err"
R=$(echo "$TMP/shape"/*/)
$CHECK "$R" >/dev/null || fail "shape: records do not match the documented schema"
expect_eq "shape: root cause" "$(jq -r .root_cause.rank "$R/summary.json")" 1
expect_eq "shape: verdict" "$(jq -r '.hang.recorder | "\(.verdict) #\(.seq) \(.other) vs \(.shape)"' "$R/summary.json")" \
    "shape_mismatch #6 [[2]] Float vs [[1]] Float"
expect_eq "shape: each rank's last collective" \
    "$(jq -r '[.flight_recorder.ranks | to_entries[] | "\(.key):\(.value[0].last_enqueued)"] | sort | join(" ")' "$R/summary.json")" \
    "0:7 1:6 2:7"
S=$(grep -m1 '"event":"suspect"' "$R/events.jsonl")
expect_eq "shape: suspect event" "$(echo "$S" | jq -r '"\(.recorder.verdict) \(.reached["1"][0].shape)"')" \
    "shape_mismatch [[2]] Float"
"$DDP" report "$R" >"$TMP/report.txt" 2>&1 || fail "report failed"
expect_grep "reached rank [0-9] #[67] \(pg 0\)" "$TMP/report.txt"

# issue 38: two pair groups [0,1], [2,3] and the world (4 ranks); rank 3 skips its pair all_reduce at step 3 while
# pair [0,1] runs two a step, so each rank's pg_status key "1" is another group. The live line names rank 3 and
# tells the chain; summary.json's hang.chain and the report carry it.
FR_KIND=pair FR_RANK=3 FR_PAIR01=2 PATH=/usr/bin:$PATH timeout 150 "$DDP" --nproc-per-node 4 --set gpus.select=none \
    --log-dir "$TMP/pair" --set timeout.on_suspect=restart --set timeout.on_suspect_after=1s \
    --set timeout.suspect_setup=15s --set timeout.suspect_floor=14s "$FAKE" "$W" >"$TMP/pair.out" 2>"$TMP/pair.err"
rc=$?
[ $rc = 124 ] || { cat "$TMP/pair.err"; fail "pair: exit $rc, want 124"; }
expect_grep "suspected hang: rank 3 \(local 3, host [^,]+, GPU none\) at fr_worker.py:[0-9]+ in wait_for; no progress for [0-9]+s \(limit [0-9]+s\): flight recorder: rank 3 never entered gloo:all_reduce #4 of group 2 \(ranks 2-3; its last there is #3\), where rank 2 waits; ranks 0, 1, 3 wait in group 0's #4 for rank 2" "$TMP/pair.err"
R=$(echo "$TMP/pair"/*/)
$CHECK "$R" >/dev/null || fail "pair: records do not match the documented schema"
expect_eq "pair: root cause" "$(jq -r .root_cause.rank "$R/summary.json")" 3
expect_eq "pair: chain" "$(jq -r '[.hang.chain[] | "\(.waiting) -> \(.group)#\(.seq) -> \(.on)"] | join("; ")' "$R/summary.json")" \
    "2 -> 2#4 -> 3; 0, 1, 3 -> 0#4 -> 2"
"$DDP" report "$R" >"$TMP/report-pair.txt" 2>&1 || fail "report failed"
expect_grep "chain \(waiting -> in -> for\): 2 -> group 2 #4 -> 3; 0, 1, 3 -> group 0 #4 -> 2" "$TMP/report-pair.txt"

# issue 38: a dtype mismatch that crashes a rank. Pair groups [0,1] and [2,3]; rank 1 comes 12 s late to a pair
# all_reduce and sends float64 where rank 0 sent float32: gloo aborts rank 0 (SIGABRT) the moment rank 1's data
# arrives. Before the others are stopped their recorders are asked (rank 0's was read while it waited): rank 1
# is the root cause (collective-mismatch), both sides named, rank 0 listed as where it showed.
FR_KIND=dtype FR_RANK=1 FR_LATE=12 FR_STEPS=8 PATH=/usr/bin:$PATH timeout 150 "$DDP" --nproc-per-node 4 \
    --set gpus.select=none --log-dir "$TMP/dtype" "$FAKE" "$W" >"$TMP/dtype.out" 2>"$TMP/dtype.err"
rc=$?
[ $rc = 134 ] || { cat "$TMP/dtype.err"; fail "dtype: exit $rc, want 134 (rank 0's SIGABRT)"; }
SAYS="rank 1 sent \[\[4\]\] Double where rank 0 sent \[\[4\]\] Float in gloo:all_reduce #7 of group 1 \(ranks 0-1\)"
expect_grep "attempt 0: flight recorder at the failure: $SAYS; rank 0 died by SIGABRT there with a collective error \(recorders read [0-9]+ ms after it\)" "$TMP/dtype.err"
expect_grep "Collective mismatch at the failure: $SAYS" "$TMP/dtype.err"
R=$(echo "$TMP/dtype"/*/)
$CHECK "$R" >/dev/null || fail "dtype: records do not match the documented schema"
expect_eq "dtype: root cause" "$(jq -r '"\(.root_cause.rank) \(.root_cause.class)"' "$R/summary.json")" \
    "1 collective-mismatch"
expect_eq "dtype: where it showed" "$(jq -r '[.failures[] | "\(.rank) \(.class)"] | join(",")' "$R/summary.json")" \
    "0 communication-error"
expect_eq "dtype: mismatch" "$(jq -r '.mismatch | "\(.failed_rank) \(.culprits) \(.culprit_shape) \(.others) \(.shape)"' "$R/summary.json")" \
    "0 1 [[4]] Double 0 [[4]] Float"
expect_eq "dtype: event" "$(grep -c '"event":"mismatch"' "$R/events.jsonl")" 1
[ "$(jq -r .mismatch.read_ms "$R/summary.json")" -le 1000 ] || fail "dtype: the recorders took over 1 s"
"$DDP" report "$R" >"$TMP/report-dtype.txt" 2>&1 || fail "report failed"
expect_grep "rank 1 sent \[\[4\]\] Double where rank 0 sent" "$TMP/report-dtype.txt"

# rank 1's data loading 40% slower: every stack shows wait_for (no collective), the recorder shows rank 1 behind
# the all_reduce the others enqueued: a straggler, and the job ends normally
FR_KIND=slow FR_RANK=1 FR_STEPS=110 PATH=/usr/bin:$PATH timeout 150 "$DDP" --nproc-per-node 3 --set gpus.select=none \
    --log-dir "$TMP/slow" "$FAKE" "$W" >"$TMP/slow.out" 2>"$TMP/slow.err" || { cat "$TMP/slow.err"; fail "slow: exit $?"; }
expect_grep "straggler: rank 1 \(local 1, host [^,]+, GPU none\) makes the others wait: it was behind the collective the others had enqueued \(flight recorder\)" "$TMP/slow.err"
R=$(echo "$TMP/slow"/*/)
expect_eq "slow: stragglers" "$(jq -r '[.stragglers[].rank] | join(",")' "$R/summary.json")" 1
echo ok
