#!/usr/bin/env bash
# The hang capture's console (issue 43 item 4): the ranks' fault handler dumps go to the run's stacks file, not
# over the console; the console gets the verdict and each rank's top frames, never inside a dump, and never
# ddplaunch's own sampler thread (_ddplaunch_wait); the summary's stderr part does not repeat the dump, while
# the rank's stderr.log keeps every byte. Without log_dir the stacks are printed after the verdict, whole.
. "$DDP_SRCDIR/tests/integration/lib.sh"
W=$DDP_SRCDIR/tests/integration/hang_worker.py

# A faulthandler dump's lines (the ones ddplaunch holds back); a traceback's frames have "line N, in f".
DUMP='^(Fatal Python error: |Thread 0x|Current thread 0x|Extension modules: |  File ".*", line [0-9]+ in )'

# 1. One Python rank, no torch, no log_dir: its console is raw, and it left a line without newline before the
#    capture (the dump's first line follows it on the same line). The stall stops it; its dump is held back and
#    printed after the verdict (less the sampler thread).
cat >"$TMP/stuck.py" <<'EOF'
import sys, time
print("started", flush=True)
sys.stderr.write("no newline yet ")
sys.stderr.flush()
def stuck():
    time.sleep(3600)
stuck()
EOF
"$DDP" --nproc-per-node 1 --set timeout.heartbeat=output --set timeout.stall=2s "$TMP/stuck.py" \
    >"$TMP/one.out" 2>"$TMP/one.err" &
one=$!

# 2. Three gloo ranks with log_dir, rank 1 stuck outside the collective (as test 42's "outside").
if have_torch; then
    HANG_RANK=1 HANG_KIND=outside HANG_PG_TIMEOUT_S=5 "$DDP" --nproc-per-node 3 --log-dir "$TMP/logs" "$W" \
        >"$TMP/three.out" 2>"$TMP/three.err"
    rc=$?
fi
wait $one
expect_eq "one rank: status" "$?" 124

E=$TMP/one.err
grep -q _ddplaunch_wait "$E" && { cat "$E"; fail "one rank: ddplaunch's own thread is on the console"; }
# the verdict comes whole, then the stacks: nothing of the dump before it
v=$(grep -n 'Hang verdict' "$E" | cut -d: -f1)
[ -n "$v" ] || { cat "$E"; fail "one rank: no verdict"; }
head -n $((v - 1)) "$E" | grep -E "$DUMP|Fatal Python error" && { cat "$E"; fail "one rank: a dump line came before the verdict"; }
expect_eq "one rank: after the verdict" "$(sed -n "$((v + 1)),$((v + 3))p" "$E" | cut -c1-16)" "  why: no rank i
  rank 0: at stu
  stacks: below "
expect_grep '^  rank 0: at stuck.py:6 in stuck < stuck.py:7 in <module>$' "$E"
expect_grep '^  stacks: below \(no log_dir\)$' "$E"
expect_grep '^== rank 0 .*: at stuck.py:6 in stuck$' "$E"
expect_grep '^  File ".*stuck.py", line 6 in stuck$' "$E"

[ -n "${rc:-}" ] || skip "no torch (the one-rank case passed)"
expect_eq "three ranks: status" "$rc" 124
E=$TMP/three.err
R=$(echo "$TMP/logs"/*/)
S=$(jq -r .hang.stacks "$R/summary.json")
expect_eq "three ranks: stacks file" "$S" "${R}attempt_0/stacks.txt"
# no full dump on the console (stdout and stderr), and not ddplaunch's thread either
cat "$TMP/three.out" "$E" >"$TMP/console"
if grep -nE "$DUMP|_ddplaunch_wait" "$TMP/console"; then
    cat "$E"
    fail "three ranks: the console has a fault handler dump"
fi
# the verdict, then each rank's top frames, then where the stacks are: one block
v=$(grep -n '^ddplaunch: attempt 0: Hang verdict' "$E" | cut -d: -f1)
[ -n "$v" ] || { cat "$E"; fail "three ranks: no verdict"; }
sed -n "$v,$((v + 5))p" "$E" >"$TMP/verdict"
# (the why and a waiting rank's place vary when a rank is caught ending on its own timeout: test 42)
expect_eq "three ranks: verdict block" "$(sed -E 's/^(  why|  rank [0-9]+( \(culprit\))?|  stacks):.*/\1/' "$TMP/verdict" |
    cut -c1-24)" "ddplaunch: attempt 0: Ha
  why
  rank 0
  rank 1 (culprit)
  rank 2
  stacks"
expect_grep "^  stacks: $S\$" "$TMP/verdict"
expect_grep '^  rank 1 \(culprit\): at hang_worker.py:24 in load_batch < hang_worker.py:34 in <module>$' "$E"
expect_grep '^  rank [02]: in all_reduce.*at distributed_c10d.py:[0-9]+ in all_reduce < ' "$E"
# the whole dump is in the stacks file, sampler thread included (it is the rank's full stack)
expect_grep '^Fatal Python error: Aborted$' "$S"
expect_grep '^Current thread 0x[0-9a-f]+ \(most recent call first\):$' "$S"
expect_grep '^  File ".*hang_worker.py", line 24 in load_batch$' "$S"
expect_grep 'in _ddplaunch_wait$' "$S"
expect_grep '^Extension modules: ' "$S"
# the rank's own log keeps every byte it wrote
expect_grep '^Fatal Python error: Aborted$' "$R/attempt_0/1/stderr.log"
# the summary neither repeats the dump nor says it is above
sed -n '/^Root Cause/,/^=====/p' "$E" >"$TMP/root"
expect_grep "^  stderr +: only the stack capture's dump \(see the Hang verdict's stacks\)$" "$TMP/root"
expect_eq "three ranks: the culprit's summary tail" "$(jq -r '.root_cause.stderr_tail | length' "$R/summary.json")" 0
echo ok
