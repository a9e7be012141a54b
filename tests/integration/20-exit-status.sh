#!/usr/bin/env bash
# Exit status rules (issue 3): 0 when all succeed; the root cause's own code; 128+N for death by signal N;
# 127/126 for a program that cannot be executed, with a message naming the rank and the path. The summary
# names the root cause first.
. "$DDP_SRCDIR/tests/integration/lib.sh"

"$DDP" --no-python --nproc-per-node 4 /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "all succeed" "$?" 0
[ -s "$TMP/err" ] && { cat "$TMP/err"; fail "a successful run printed on stderr"; }

# Only rank 2 fails (code 3); the others finish later with 0.
EXITN_RANK=2 EXITN_DELAY_MS=200 "$DDP" --no-python --nproc-per-node 4 --console lines "$HELPERS/exitn" 3 \
    "rank two says boom" >"$TMP/out" 2>"$TMP/err"
expect_eq "root cause code" "$?" 3
expect_grep '^Root Cause \(first observed failure\):' "$TMP/err"
# The root cause block names rank 2, code 3 and its last stderr line.
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 2 \(local_rank: 2\)' "$TMP/root"
expect_grep 'exitcode +: 3 \(pid: [0-9]+\)' "$TMP/root"
expect_grep 'rank two says boom' "$TMP/root"
expect_grep 'class +: exit-3' "$TMP/root"
expect_grep '^\[rank2\]: rank two says boom$' "$TMP/err"

# Death by signal: 128+11, SIGSEGV named.
DIESIG_RANK=1 DIESIG_OTHERS_MS=2000 "$DDP" --no-python --nproc-per-node 2 "$HELPERS/diesig" 11 >"$TMP/out" 2>"$TMP/err"
expect_eq "segfault status" "$?" 139
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 1 ' "$TMP/root"
expect_grep 'SIGSEGV' "$TMP/root"
expect_grep 'class +: segfault' "$TMP/root"

# Not found: 127 and a clear message, from the exec shim (a job spec's command is not looked for before the start;
# --no-python PROGRAM is, and ends with exit 2 before anything starts: issue 43 item 9, test 11).
printf '[job]\nnproc_per_node = 2\ncommand = /nonexistent/prog-xyz\n' >"$TMP/notfound.ini"
"$DDP" "$TMP/notfound.ini" >"$TMP/out" 2>"$TMP/err"
expect_eq "not found" "$?" 127
expect_grep "^ddplaunch: (error: )?rank [01]: cannot execute '/nonexistent/prog-xyz': No such file or directory" "$TMP/err"

# Not executable: 126.
printf 'echo hi\n' >"$TMP/noexec"
chmod 0644 "$TMP/noexec"
"$DDP" --no-python --nproc-per-node 1 "$TMP/noexec" >"$TMP/out" 2>"$TMP/err"
expect_eq "not executable" "$?" 126
expect_grep "rank 0: cannot execute '$TMP/noexec': Permission denied" "$TMP/err"

# A bare name is looked up in PATH.
"$DDP" --no-python --nproc-per-node 1 true >"$TMP/out" 2>"$TMP/err"
expect_eq "PATH lookup" "$?" 0

# issue 43 item 10: ranks that fail alike (an argparse error on every rank) print their stderr lines once.
cat >"$TMP/usage.sh" <<'EOS'
#!/bin/sh
trap '' TERM # every rank prints and fails, however soon the first failure stops the others
echo "usage: train.py [-h] --steps STEPS" >&2
echo "train.py: error: the following arguments are required: --steps" >&2
sleep 0.3 # the first exit stops the others: by then they have set the trap
exit 2
EOS
chmod +x "$TMP/usage.sh"
"$DDP" --no-python --nproc-per-node 2 "$TMP/usage.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "alike failures: status" "$?" 2
sed -n '/^=====/,$p' "$TMP/err" >"$TMP/summary"
expect_eq "usage lines in the summary" "$(grep -c 'error: the following arguments are required' "$TMP/summary")" 1
expect_eq "'the same' lines" "$(grep -cE "^  stderr +: last 2 lines of stderr: the same as rank [01]'s$" "$TMP/summary")" 1

# issue 43 item 4: a Python rank that segfaults under ddplaunch already printed its Python stack (PYTHONFAULTHANDLER
# is set for it): the hint says where it is, not to rerun with PYTHONFAULTHANDLER=1. The hint follows the stack
# printed ("Fatal Python error: Segmentation fault"), not the launcher's guess of whether the program is Python.
printf 'import ctypes\nctypes.string_at(0)\n' >"$TMP/segv.py"
"$DDP" --nproc-per-node 1 "$TMP/segv.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "python segfault: status" "$?" 139
expect_grep 'File ".*segv.py", line 2' "$TMP/err"
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep '^  class +: segfault$' "$TMP/root"
expect_grep '^  hint +: .*its Python stack \(PYTHONFAULTHANDLER\) is in its stderr above$' "$TMP/root"
grep -q 'rerun with PYTHONFAULTHANDLER' "$TMP/root" && fail "the hint asks for a stack that is printed above"
# The same Python behind a wrapper ddplaunch does not see as Python: the stack it printed is what counts.
printf '#!/bin/sh\nexec %s -X faulthandler "$@"\n' "$PY" >"$TMP/wrap.sh"
chmod +x "$TMP/wrap.sh"
"$DDP" --nproc-per-node 1 --no-python "$TMP/wrap.sh" "$TMP/segv.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "wrapped python segfault: status" "$?" 139
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep '^  class +: segfault$' "$TMP/root"
expect_grep '^  hint +: .*its Python stack \(PYTHONFAULTHANDLER\) is in its stderr above$' "$TMP/root"
grep -q 'rerun with PYTHONFAULTHANDLER' "$TMP/root" && fail "wrapped: the hint asks for a stack that is printed above"
# No fault handler (PYTHONFAULTHANDLER set empty): no stack printed, so the hint asks for one.
PYTHONFAULTHANDLER= "$DDP" --nproc-per-node 1 "$TMP/segv.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "python segfault without fault handler: status" "$?" 139
grep -q 'Fatal Python error' "$TMP/err" && fail "precondition: PYTHONFAULTHANDLER= still printed a stack"
expect_grep '^  hint +: .*rerun with PYTHONFAULTHANDLER=1' "$TMP/err"
echo ok
