#!/usr/bin/env bash
# The live hang watch (issue 22), the cases that must end normally, with every [timeout] key at its default (gloo,
# 3 CPU ranks, torch's default process-group timeout): a rank whose data loading is 40% slower is named a
# straggler (console, a stragglers event, summary.json's stragglers with its share, `ddplaunch report` and its
# SVG); rank 0 writing a checkpoint for 40 s while the others wait in a barrier ends with exit 0 (a suspicion
# may be warned about, and then "progress again").
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "no torch"
CHECK="$PY $DDP_SRCDIR/tests/integration/records_check.py $DDP_SRCDIR/man/ddplaunch.1"
W=$DDP_SRCDIR/tests/integration/watch_worker.py

WATCH_KIND=slow WATCH_RANK=1 WATCH_STEPS=110 PATH=/usr/bin:$PATH "$DDP" --nproc-per-node 3 --log-dir "$TMP/slow" \
    "$W" >"$TMP/slow.out" 2>"$TMP/slow.err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/slow.err"; fail "slow: exit $rc, want 0"; }
R=$(echo "$TMP/slow"/*/)
$CHECK "$R" >"$TMP/slow.ev" || fail "slow: records do not match the documented schema"
grep -qx stragglers "$TMP/slow.ev" || { cat "$TMP/slow.err"; fail "slow: no stragglers event"; }
expect_eq "slow: stragglers" "$(jq -r '[.stragglers[].rank] | join(",")' "$R/summary.json")" 1
expect_eq "slow: its frame" "$(jq -r '.stragglers[0].frame' "$R/summary.json" | sed 's/:[0-9]*//')" \
    "watch_worker.py in load_batch"
$PY -c "import json,sys; s=json.load(open(sys.argv[1]))['stragglers'][0]; sys.exit(not (s['share'] >= 0.6 and s['waited'] >= 0.15 and s['samples'] >= 8))" \
    "$R/summary.json" || fail "slow: share/waited/samples: $(jq -c '.stragglers[0]' "$R/summary.json")"
expect_grep "straggler: rank 1 \(local 1, host [^,]+, GPU none\) makes the others wait" "$TMP/slow.err"
grep -q "suspected hang" "$TMP/slow.err" && fail "slow: a slow rank is not a hang"
"$DDP" report --svg "$TMP/slow.svg" "$R" >"$TMP/slow.report" || fail "slow: report failed"
expect_grep "straggler: [0-9]+% of the waiting" "$TMP/slow.report"
expect_grep 'class="straggler" data-rank="1"' "$TMP/slow.svg"
echo "slow: $(grep -m1 'straggler:' "$TMP/slow.err" | cut -c1-250)"

start=$(date +%s)
WATCH_KIND=ckpt WATCH_STEPS=12 PATH=/usr/bin:$PATH "$DDP" --nproc-per-node 3 --log-dir "$TMP/ckpt" "$W" \
    >"$TMP/ckpt.out" 2>"$TMP/ckpt.err"
rc=$?
[ $rc = 0 ] || { cat "$TMP/ckpt.err"; fail "ckpt: exit $rc, want 0"; }
took=$(($(date +%s) - start))
[ $took -ge 40 ] || fail "ckpt: took ${took}s: the checkpoint did not last 40 s"
R=$(echo "$TMP/ckpt"/*/)
$CHECK "$R" >"$TMP/ckpt.ev" || fail "ckpt: records do not match the documented schema"
if grep -q "suspected hang" "$TMP/ckpt.err"; then
    expect_grep "suspected hang: rank 0 \(local 0, host [^,]+, GPU none\) at watch_worker.py:[0-9]+ in save_checkpoint" "$TMP/ckpt.err"
    expect_grep "progress again" "$TMP/ckpt.err"
    grep -qx suspect_end "$TMP/ckpt.ev" || fail "ckpt: no suspect_end event"
fi
expect_eq "ckpt: all done" "$(grep -c 'done$' "$TMP/ckpt.out")" 3
echo "ckpt: exit 0 after ${took}s; $(grep -m1 'suspected hang' "$TMP/ckpt.err" | cut -c1-200)"
echo ok
