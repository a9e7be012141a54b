#!/usr/bin/env bash
# The command line end to end (issue 2): --help/--version/--help-keys on stdout with exit 0; usage errors are
# one line naming the flag plus "Try 'ddplaunch --help'." on stderr, exit 2, nothing started (marker file);
# a bad flag value names the flag; the script's own arguments reach the worker untouched.
. "$DDP_SRCDIR/tests/integration/lib.sh"

MARK=$TMP/marker

for h in --help -h; do
    "$DDP" $h >"$TMP/out" 2>"$TMP/err"
    expect_eq "$h status" "$?" 0
    [ -s "$TMP/err" ] && fail "$h printed on stderr"
    expect_grep '^Usage: ddplaunch ' "$TMP/out"
    expect_grep '--nproc-per-node' "$TMP/out"
done
"$DDP" --version >"$TMP/out" 2>"$TMP/err"
expect_eq "--version status" "$?" 0
expect_grep '^ddplaunch [0-9]+\.[0-9]+' "$TMP/out"
"$DDP" --help-keys >"$TMP/out" 2>"$TMP/err"
expect_eq "--help-keys status" "$?" 0
expect_grep '^\[job\]$' "$TMP/out"
expect_grep '^  nproc_per_node ' "$TMP/out"
[ -s "$TMP/err" ] && fail "--help-keys printed on stderr"

# usage NAME WANT_REGEX args...: exit 2, first stderr line matches, second is the hint, no marker.
usage() {
    local name=$1 want=$2
    shift 2
    rm -f "$MARK"
    "$DDP" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" = 2 ] || { cat "$TMP/err"; fail "$name: exit $rc, want 2"; }
    [ "$(wc -l <"$TMP/err")" -le 2 ] || { cat "$TMP/err"; fail "$name: more than two lines on stderr"; }
    [ "$(head -n 1 "$TMP/err" | grep -cE -- "$want")" = 1 ] || { cat "$TMP/err"; fail "$name: first line does not match '$want'"; }
    if [ "$(wc -l <"$TMP/err")" = 2 ]; then
        [ "$(tail -n 1 "$TMP/err")" = "Try 'ddplaunch --help'." ] || { cat "$TMP/err"; fail "$name: second line"; }
    fi
    [ -s "$TMP/out" ] && { cat "$TMP/out"; fail "$name: printed on stdout"; }
    [ -e "$MARK" ] && fail "$name: a worker was started"
    echo "ok: $name: $(head -n 1 "$TMP/err")"
}
T=(--no-python /usr/bin/touch "$MARK")
usage "unknown flag" "^ddplaunch: error: unknown option '--nproc-per-nodes' \(did you mean '--nproc-per-node'\?\)$" \
    --nproc-per-nodes 2 "${T[@]}"
usage "unknown underscore flag" "^ddplaunch: error: unknown option '--max-restart-s' \(did you mean '--max-restarts'\?\)$" \
    --max_restart_s 2 "${T[@]}"
usage "ambiguous prefix" "^ddplaunch: error: ambiguous option '--master' \(could be --master-addr, --master-port\)$" \
    --master 2 "${T[@]}"
usage "unknown short flag" "^ddplaunch: error: unknown option '-z'$" -z "${T[@]}"
usage "missing value" "^ddplaunch: error: --nnodes: expected a value \(N\|MIN:MAX\)$" --nnodes
usage "switch with a value" "^ddplaunch: error: --standalone takes no value, got 'yes'$" --standalone=yes "${T[@]}"
usage "bad --set" "^ddplaunch: error: --set: expected SECTION.KEY=VALUE, got 'policy=pack'$" --set policy=pack "${T[@]}"
usage "bad --set key" "^ddplaunch: error: --set: unknown key 'polcy' in \[gpus\] \(did you mean 'policy'\?\)$" \
    --set gpus.polcy=pack "${T[@]}"
usage "bad flag value" "^ddplaunch: error: --nnodes: job.nnodes: expected MIN:MAX with MIN <= MAX, got '3:1'$" \
    --nnodes 3:1 "${T[@]}"
usage "bad -r" "^ddplaunch: error: -r: job.redirects: expected 0-3" -r7 "${T[@]}"
usage "bad numa binding" "^ddplaunch: error: --numa-binding: numa.bind: expected node, socket, exclusive, core-complex or none, got 'nodes' \(did you mean 'node'\?\)$" \
    --numa_binding=nodes "${T[@]}"
usage "nothing to run" "^ddplaunch: error: expected a job spec \(JOB.ini\) or a training script$"
printf '[job]\ncommand = /usr/bin/touch %s\n' "$MARK" >"$TMP/job.ini"
usage "argument after a job spec" "^ddplaunch: error: unexpected argument 'extra' after $TMP/job.ini \(put the program's extra arguments after '--'\)$" \
    "$TMP/job.ini" extra

# The script's arguments reach the worker untouched, flags that look like ours included.
"$DDP" --no-python --nproc-per-node 1 /bin/echo --nnodes 5 -m --help -- -r3 x.ini >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "echo run failed"; }
expect_grep '(^|: )--nnodes 5 -m --help -- -r3 x.ini$' "$TMP/out"
# the same through `plan --json`: argv exact
"$DDP" plan --json --no-python --nproc-per-node 1 /bin/echo --nnodes 5 -m --help -- -r3 x.ini >"$TMP/plan.json" ||
    fail "plan failed"
got=$($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["workers"][0]["argv"]))' "$TMP/plan.json")
expect_eq "argv" "$got" '["/bin/echo", "--nnodes", "5", "-m", "--help", "--", "-r3", "x.ini"]'
# JOB.ini -- extra args are appended to the spec's args
printf '[job]\nprogram = /bin/echo\nargs = --from-spec\n' >"$TMP/echo.ini"
"$DDP" plan --json "$TMP/echo.ini" -- --epochs 3 >"$TMP/plan.json" || fail "plan JOB.ini -- args failed"
got=$($PY -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["workers"][0]["argv"]))' "$TMP/plan.json")
expect_eq "argv with extra args" "$got" '["/bin/echo", "--from-spec", "--epochs", "3"]'
"$DDP" "$TMP/echo.ini" -- --epochs 3 >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "run JOB.ini -- args failed"; }
expect_grep '--from-spec --epochs 3$' "$TMP/out"

# issue 43 items 8 and 9: usage errors with a way out, labelled "error:", exit 2, nothing started.
printf '[job]\nprogram = /usr/bin/touch\nargs = %s\n' "$MARK" >"$TMP/touch.ini"
usage "a program's option after a job spec" "^ddplaunch: error: unknown option '--steps' \(the program's own options go after '--': ddplaunch \[OPTIONS\] $TMP/touch.ini -- --steps \.\.\.\)$" \
    --nproc-per-node 1 "$TMP/touch.ini" --steps 3
usage "a program's option before the script" "^ddplaunch: error: unknown option '--steps' \(the program's own options go after the script" \
    --steps 3 "${T[@]}"
(cd "$TMP" && touch train.py && "$DDP" --nproc_per_node=2 plan train.py >"$TMP/out" 2>"$TMP/err")
expect_eq "command after an option: status" "$?" 2
expect_grep "^ddplaunch: error: no such file: 'plan'; the command comes first: ddplaunch plan \[OPTIONS\]" "$TMP/err"
usage "missing program on PATH" "^ddplaunch: error: program: 'nonexist_prog_43' is not on PATH \(" \
    --no-python nonexist_prog_43
usage "missing program by path" "^ddplaunch: error: program: no such file: '\./nonexist_prog_43'$" \
    --no-python ./nonexist_prog_43
printf '[job]\nprogram = nonexist_prog_43\n' >"$TMP/noprog.ini"
usage "missing program in a spec" "^ddplaunch: error: $TMP/noprog.ini:2: program: 'nonexist_prog_43' is not on PATH" "$TMP/noprog.ini"
# log_dir that cannot be made: file:line, and plan and doctor refuse it too
printf '[job]\nprogram = /usr/bin/touch\nargs = %s\nlog_dir = /proc/nope/logs\n' "$MARK" >"$TMP/badlog.ini"
for cmd in "" plan doctor; do
    "$DDP" $cmd "$TMP/badlog.ini" >"$TMP/out" 2>"$TMP/err"
    expect_eq "bad log_dir ($cmd): status" "$?" 2
    expect_grep "^ddplaunch: error: $TMP/badlog.ini:4: log_dir /proc/nope/logs: cannot create 'nope' in /proc" "$TMP/err"
    [ -e "$MARK" ] && fail "bad log_dir ($cmd): a worker was started"
done
# without GPUs: the ways out are named (on a host with GPUs these two cases do not apply)
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1 && ! ls /dev/dri/renderD* >/dev/null 2>&1; then
    "$DDP" --nproc-per-node gpu "${T[@]}" >"$TMP/out" 2>"$TMP/err"
    expect_eq "nproc gpu without GPUs: status" "$?" 2
    expect_grep "^ddplaunch: error: nproc_per_node = gpu, but no usable GPU was found.*cpu, auto or a number" "$TMP/err"
    "$DDP" --set gpus.select=0 "${T[@]}" >"$TMP/out" 2>"$TMP/err"
    expect_eq "gpus.select without GPUs: status" "$?" 2
    expect_grep "^ddplaunch: error: \[gpus\] select: '0' is not a GPU of this machine, which has none \(leave \[gpus\] select unset" "$TMP/err"
    grep -q -- "0--1\|0-" "$TMP/err" && fail "an index range on a host without GPUs"
    [ -e "$MARK" ] && fail "without GPUs: a worker was started"
fi

# issue 43 item 12: moving from torch.distributed.launch: no --local-rank in argv (LOCAL_RANK in the environment, as
# README and the man page say), and --use-env refused with the reason.
usage "torch.distributed.launch's --use_env" "^ddplaunch: error: unknown option '--use-env' \(torch.distributed.launch's: not needed, every worker gets LOCAL_RANK" \
    --use_env "${T[@]}"
"$DDP" plan --json --nproc_per_node=2 --no-python /bin/echo cfg.py >"$TMP/tdl.json" || fail "plan for the move"
$PY - "$TMP/tdl.json" <<'PYEOF' || fail "a worker's argv or LOCAL_RANK not as README says"
import json, sys
for lr, w in enumerate(json.load(open(sys.argv[1]))["workers"]):
    assert w["argv"] == ["/bin/echo", "cfg.py"], w["argv"]
    assert w["env"]["LOCAL_RANK"] == str(lr), w["env"]["LOCAL_RANK"]
PYEOF
grep -q '^Moving from `python -m torch.distributed.launch`' "$DDP_SRCDIR/README.md" || fail "README: no move section"
grep -q '^\.SH MOVING FROM TORCH.DISTRIBUTED.LAUNCH$' "$DDP_SRCDIR/man/ddplaunch.1" || fail "man: no move section"
echo "cli ok"
