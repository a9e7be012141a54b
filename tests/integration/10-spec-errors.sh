#!/usr/bin/env bash
# Bad job specs, site configs and DDPLAUNCH_*/PET_* values (issue 2): ONE line on stderr that starts with
# "ddplaunch: FILE:LINE:" (or names the variable / file), exit status 2, and nothing started: every spec's
# program would create a marker file, which must not appear. `plan` rejects the same inputs the same way.
. "$DDP_SRCDIR/tests/integration/lib.sh"

MARK=$TMP/marker
GOOD="command = /usr/bin/touch $MARK"

# Control: the same program does create the marker when the spec is good (so its absence means something).
printf '[job]\n%s\n' "$GOOD" >"$TMP/good.ini"
"$DDP" "$TMP/good.ini" >"$TMP/out" 2>"$TMP/err"
expect_eq "good spec runs" "$?" 0
[ -e "$MARK" ] || fail "control: the worker did not create $MARK"
rm -f "$MARK"

# check NAME WANT_REGEX [ddplaunch args...]: exit 2, one stderr line matching, no marker; also for `plan`.
check() {
    local name=$1 want=$2
    shift 2
    for mode in run plan; do
        rm -f "$MARK"
        if [ $mode = run ]; then "$DDP" "$@" >"$TMP/out" 2>"$TMP/err"; else "$DDP" plan "$@" >"$TMP/out" 2>"$TMP/err"; fi
        local rc=$?
        [ "$rc" = 2 ] || { cat "$TMP/err"; fail "$name ($mode): exit $rc, want 2"; }
        [ "$(wc -l <"$TMP/err")" = 1 ] || { cat "$TMP/err"; fail "$name ($mode): want exactly one line on stderr"; }
        expect_grep "$want" "$TMP/err"
        [ -s "$TMP/out" ] && { cat "$TMP/out"; fail "$name ($mode): printed on stdout"; }
        [ -e "$MARK" ] && fail "$name ($mode): a worker was started"
    done
    echo "ok: $name: $(cat "$TMP/err")"
}

# spec_case NAME LINE WANT_REGEX CONTENT: CONTENT (printf format, %s = the good command line) as a spec.
spec_case() {
    local name=$1 line=$2 want=$3 content=$4 f=$TMP/case.ini
    # shellcheck disable=SC2059
    printf "$content" "$GOOD" >"$f"
    check "$name" "^ddplaunch: error: $f:$line: $want" "$f"
}

spec_case "unknown section" 3 "unknown section \[jobz\] \(did you mean \[job\]\?\)" '[job]\n%s\n[jobz]\nx = 1\n'
spec_case "unknown key" 3 "unknown key 'nproc_per_nod' in \[job\] \(did you mean 'nproc_per_node'\?\)" \
    '[job]\n%s\nnproc_per_nod = 2\n'
spec_case "bad int" 4 "restart.max_restarts: expected an integer from 0 to 1000000, got 'many'" \
    '[job]\n%s\n[restart]\nmax_restarts = many\n'
spec_case "negative count" 3 "job.nproc_per_node: expected a positive number of workers" \
    '[job]\n%s\nnproc_per_node = -4\n'
spec_case "bad duration unit" 4 "restart.backoff: unknown duration unit 'sec' in '5sec' \(expected ms, s, m or h\)" \
    '[job]\n%s\n[restart]\nbackoff = 5sec\n'
spec_case "MIN>MAX" 3 "job.nnodes: expected MIN:MAX with MIN <= MAX, got '4:2'" '[job]\n%s\nnnodes = 4:2\n'
spec_case "duplicate key" 4 "duplicate key 'nproc_per_node' in \[job\] \(first set at line 3\)" \
    '[job]\n%s\nnproc_per_node = 2\nnproc_per_node = 3\n'
spec_case "bad enum" 4 "numa.bind: expected node, socket, exclusive, core-complex or none, got 'sockets' \(did you mean 'socket'\?\)" \
    '[job]\n%s\n[numa]\nbind = sockets\n'
spec_case "unterminated quote" 2 "job.command: unterminated quote" '[job]\ncommand = /usr/bin/touch "x\n'
spec_case "[nccl] non-NCCL key" 4 "\[nccl\] takes preset or NCCL_\*/TORCH_\* variables, got 'OMP_NUM_THREADS'" \
    '[job]\n%s\n[nccl]\nOMP_NUM_THREADS = 2\n'
spec_case "key before any section" 1 "key 'nproc_per_node' before any \[section\]" 'nproc_per_node = 2\n[job]\n%s\n'
spec_case "not key = value" 3 "expected 'key = value', '\[section\]' or a comment" '[job]\n%s\njust words\n'
spec_case "non-UTF-8" 3 "invalid UTF-8 byte 0xe9" '[job]\n%s\nname = caf\351\n'
long=$(printf 'x%.0s' $(seq 1 250))
spec_case "line too long" 3 "line too long \(only 'key = value' lines may be longer than 198 characters" "[job]\n%s\n; $long\n"
spec_case "continuation of a one-line key" 4 "indented line continues 'role'" '[job]\n%s\nrole = a\n  b\n'
spec_case "MIN:MAX with node_rank" 3 "job.node_rank: expected a non-negative integer, got '-1'" '[job]\n%s\nnode_rank = -1\n'

# Whole-file problems: no line to name, but the file.
printf '' >"$TMP/empty.ini"
check "empty file" "^ddplaunch: error: $TMP/empty.ini: empty job spec" "$TMP/empty.ini"
printf '; only a comment\n' >"$TMP/comments.ini"
check "comments only" "^ddplaunch: error: $TMP/comments.ini: empty job spec" "$TMP/comments.ini"
check "unreadable file" "^ddplaunch: error: $TMP/none.ini: cannot read: No such file or directory" "$TMP/none.ini"
mkdir "$TMP/dir.ini"
check "directory" "^ddplaunch: error: $TMP/dir.ini: cannot read: Is a directory" "$TMP/dir.ini"
printf '[job]\nname = x\n' >"$TMP/nocmd.ini"
check "missing command" "^ddplaunch: error: $TMP/nocmd.ini: missing command: set \[job\] command, script, module or program" \
    "$TMP/nocmd.ini"
printf '[job]\n%s\nnode_rank = 2\nnnodes = 2\n' "$GOOD" >"$TMP/rank.ini"
check "node_rank out of range" "^ddplaunch: error: $TMP/rank.ini: job.node_rank 2 is out of range for nnodes 2" "$TMP/rank.ini"

# A bad site config is reported the same way, naming the site file.
printf '[restart]\nbackoff = 1y\n' >"$TMP/site.ini"
DDPLAUNCH_CONFIG=$TMP/site.ini check "bad site config" "^ddplaunch: error: $TMP/site.ini:2: restart.backoff: unknown duration unit 'y'" \
    "$TMP/good.ini"
DDPLAUNCH_CONFIG=$TMP/site.ini check "bad site config (--config)" "^ddplaunch: error: $TMP/site.ini:2: restart.backoff" \
    --config "$TMP/site.ini" "$TMP/good.ini"
DDPLAUNCH_CONFIG=$TMP/missing-site.ini check "missing DDPLAUNCH_CONFIG" "^ddplaunch: error: $TMP/missing-site.ini: cannot read" \
    "$TMP/good.ini"

# Environment layers name the variable.
DDPLAUNCH_RESTART_BACKOFF=5x check "DDPLAUNCH_ variable" "^ddplaunch: error: DDPLAUNCH_RESTART_BACKOFF: restart.backoff: unknown duration unit 'x'" \
    "$TMP/good.ini"
PET_NNODES=two check "PET_ variable" "^ddplaunch: error: PET_NNODES: job.nnodes: expected N or MIN:MAX" "$TMP/good.ini"

# [env] ${VAR} without a default and not set: named by file:line before anything starts.
printf '[job]\n%s\n[env]\nDATA = ${DDP_TEST_UNSET_VAR}/x\n' "$GOOD" >"$TMP/expand.ini"
unset DDP_TEST_UNSET_VAR
check "unset \${VAR}" "^ddplaunch: error: $TMP/expand.ini:4: DATA: \\$\{DDP_TEST_UNSET_VAR\} is not set" "$TMP/expand.ini"
# issue 23 item 11: a spec's relative script and log_dir are its own directory's, from anywhere; a missing
# script is file:line, exit 2, before anything starts. Issue 54: one rule, so the workers start there too.
mkdir -p "$TMP/proj/sub" "$TMP/elsewhere"
printf 'import os\nprint("ran from", os.getcwd())\n' >"$TMP/proj/sub/train.py"
printf '[job]\nscript = sub/train.py\nlog_dir = logs\n' >"$TMP/proj/job.ini"
(cd "$TMP/elsewhere" && "$DDP" ../proj/job.ini >"$TMP/rel.out" 2>&1) || { cat "$TMP/rel.out"; fail "relative script: failed"; }
expect_grep "^ran from $TMP/proj$" "$TMP/rel.out"
[ -d "$TMP/proj/logs" ] || fail "relative log_dir: no $TMP/proj/logs"
[ ! -e "$TMP/elsewhere/logs" ] || fail "relative log_dir: logs made in the current directory"
printf '[job]\nscript = nosuch.py\n' >"$TMP/proj/missing.ini"
rc=0
(cd "$TMP/elsewhere" && "$DDP" ../proj/missing.ini >"$TMP/miss.out" 2>&1) || rc=$?
expect_eq "missing script: exit status" "$rc" 2
expect_grep "^ddplaunch: error: \.\./proj/missing\.ini:2: script: no such file: '$TMP/proj/nosuch\.py'" "$TMP/miss.out"
expect_eq "missing script: lines" "$(grep -vc "^Try 'ddplaunch --help'" "$TMP/miss.out")" 1

# issue 43 trap 3: one comment rule for ';' and '#': at the start of a line, or after a space or tab anywhere in a
# line; with no space before it, either is part of the value. The worker prints the argv it saw.
printf '[job]\ncommand = %s -c "import sys; print(repr(sys.argv[1:]))"\nargs = --steps 3 # three steps\n  --tag=a#b;c ; more\nnproc_per_node = 1 # one\n[env]\nDDP_T = x # y\n' \
    "$PY" >"$TMP/hash.ini"
"$DDP" "$TMP/hash.ini" >"$TMP/hash.out" 2>&1 || { cat "$TMP/hash.out"; fail "# comments: the job failed"; }
expect_grep "^\['--steps', '3', '--tag=a#b;c'\]$" "$TMP/hash.out"
"$DDP" plan "$TMP/hash.ini" >"$TMP/hash.plan" 2>&1 || { cat "$TMP/hash.plan"; fail "# comments: plan failed"; }
expect_grep "DDP_T=x$" "$TMP/hash.plan"
grep -q "three steps\|# one\|# y\|more" "$TMP/hash.plan" && { cat "$TMP/hash.plan"; fail "# comments: a comment reached the plan"; }
# a long [env] line (beyond inih's buffer) follows the same rule
long=$(printf 'v%.0s' $(seq 1 300))
printf '[job]\ncommand = %s -c "import os; print(len(os.environ[\x27DDP_LONG\x27]))"\n[env]\nDDP_LONG = %s # long\n' "$PY" "$long" >"$TMP/hashlong.ini"
"$DDP" "$TMP/hashlong.ini" >"$TMP/hashlong.out" 2>&1 || { cat "$TMP/hashlong.out"; fail "# comments: long line failed"; }
expect_grep "^300$" "$TMP/hashlong.out"
echo "all bad specs rejected with one line and exit 2; nothing started"
