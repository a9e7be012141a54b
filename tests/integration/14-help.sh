#!/usr/bin/env bash
# Help as a user meets it: --help and each command's --help (plan, topo, doctor, report, ps) print that command's usage,
# exit 0, and every line (of --help-keys too) fits in 80 columns; `ddplaunch help` (a script named like a
# command that does not exist) is one "no such file" line pointing at --help, exit 2, nothing started; a
# script named help that does exist runs, as with torchrun.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$TMP"

check_help() { # NAME WANT-FIRST-LINE ARGS...
    local name=$1 want=$2
    shift 2
    "$DDP" "$@" >"$TMP/help.$name" 2>"$TMP/err.$name" || fail "ddplaunch $*: exit status $?"
    [ -s "$TMP/err.$name" ] && { cat "$TMP/err.$name"; fail "ddplaunch $*: wrote to stderr"; }
    expect_eq "ddplaunch $*: first line" "$(head -n 1 "$TMP/help.$name")" "$want"
    local wide
    wide=$(awk 'length > 80 { printf "%d: %s\n", length, $0 }' "$TMP/help.$name")
    [ -z "$wide" ] || { echo "$wide"; fail "ddplaunch $*: lines wider than 80 columns"; }
}
check_help main "Usage: ddplaunch [options] JOB.ini [-- extra args for the program]" --help
check_help main-h "Usage: ddplaunch [options] JOB.ini [-- extra args for the program]" -h
check_help plan "Usage: ddplaunch plan [options] JOB.ini [-- extra args for the program]" plan --help
check_help plan-late "Usage: ddplaunch plan [options] JOB.ini [-- extra args for the program]" plan --json -h
check_help topo "Usage: ddplaunch topo [--topology FILE.xml] [--json] [options]" topo --help
check_help doctor "Usage: ddplaunch doctor [options] [JOB.ini | SCRIPT.py ...]" doctor --help
check_help ps "Usage: ddplaunch ps [--json]" ps --help
check_help report "Usage: ddplaunch report [--svg FILE] LOG_DIR|RUN_DIR" report --help
check_help keys "[job]" --help-keys
# each section once: [nccl]'s own keys and its NCCL_*/TORCH_* line under one header, [env] once
for s in job gpus numa restart timeout nccl env slurm; do
    expect_eq "--help-keys: [$s] headers" "$(grep -cx "\[$s\]" "$TMP/help.keys")" 1
done
expect_grep "^  NCCL_\*, TORCH_\* +any NCCL or torch variable" "$TMP/help.keys"
expect_grep "^  -h, --help" "$TMP/help.plan"
expect_grep "^      --json" "$TMP/help.doctor"
expect_grep "^Exit status: 0 all ok; 1 a warning; 2 a failure" "$TMP/help.doctor"
# the global help lists every option (torchrun's and ddplaunch's), a command's help only its own
expect_grep "^      --nproc-per-node" "$TMP/help.main"
grep -q -- "--nproc-per-node" "$TMP/help.topo" || fail "topo --help lacks --nproc-per-node"
grep -q -- "--max-restarts" "$TMP/help.plan" && fail "plan --help lists launch-only options"

# README's job spec is examples/job.ini (its lines without comments and blank lines)
readme_ini=$(awk '/^A job spec \(`examples\/job.ini`/ { s = 1; next } s && /^```ini/ { b = 1; next }
                  b && /^```/ { exit } b && NF' "$DDP_SRCDIR/README.md")
[ -n "$readme_ini" ] || fail "README.md: no job spec block after 'A job spec (\`examples/job.ini\`'"
expect_eq "README's job.ini" "$readme_ini" "$(grep -vE '^[[:space:]]*(#|;|$)' "$DDP_SRCDIR/examples/job.ini")"

# `ddplaunch help` in a directory without a file called help
rc=0
"$DDP" help >"$TMP/out" 2>"$TMP/err" || rc=$?
expect_eq "ddplaunch help: exit status" "$rc" 2
expect_eq "ddplaunch help: stdout" "$(cat "$TMP/out")" ""
expect_grep "^ddplaunch: error: no such file: 'help' \(the training script to run; the commands are plan, topo, doctor, report and ps\)$" "$TMP/err"
expect_grep "^Try 'ddplaunch --help'\.$" "$TMP/err"
expect_eq "ddplaunch help: stderr lines" "$(wc -l <"$TMP/err")" 2
# a missing script.py is the same, before any worker starts (no rank-prefixed output, no summary)
rc=0
"$DDP" --nproc-per-node 2 nosuch.py --lr 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
expect_eq "missing script: exit status" "$rc" 2
expect_grep "^ddplaunch: error: no such file: 'nosuch.py'" "$TMP/err"
grep -q "rank" "$TMP/err" && { cat "$TMP/err"; fail "missing script: a worker was started"; }
# --set job.workdir: a relative script is looked for there
mkdir "$TMP/wd"
echo 'print("ran help in", __import__("os").getcwd())' >"$TMP/wd/help"
rc=0
"$DDP" --set job.workdir="$TMP/wd" help >"$TMP/out" 2>&1 || rc=$?
expect_eq "help in workdir: exit status" "$rc" 0
expect_grep "ran help in $TMP/wd" "$TMP/out"
# a script that exists and is named help runs (as with torchrun)
cp "$TMP/wd/help" "$TMP/help"
"$DDP" help >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "a script named help did not run"; }
expect_grep "ran help in $TMP$" "$TMP/out"
# --no-python help is a program looked up on PATH: missing, it is one line and exit 2 before anything starts
# (issue 43 item 9; it was a started job ending in 127)
rc=0
"$DDP" --no-python help-no-such-program >"$TMP/out" 2>&1 || rc=$?
expect_eq "--no-python missing program: exit status" "$rc" 2
expect_grep "^ddplaunch: error: program: 'help-no-such-program' is not on PATH" "$TMP/out"

# issue 43 item 12: -h and --json as documented. Every command takes -h (its help lists it); the commands that take
# --json are exactly those --help and the man page name.
takes_json=""
for cmd in run plan topo doctor report ps; do
    c=$cmd; [ $cmd = run ] && c=""
    "$DDP" $c -h >"$TMP/h.out" 2>"$TMP/h.err" || fail "$cmd -h: exit $?"
    expect_grep '^  -h, --help ' "$TMP/h.out"
    "$DDP" $c --json --help >"$TMP/j.out" 2>"$TMP/j.err"
    grep -q "'--json' is not an option" "$TMP/j.err" || takes_json="$takes_json $cmd"
done
expect_eq "commands taking --json" "$takes_json" " plan topo doctor ps"
expect_grep '^ +--json +machine-readable output \(plan, topo, doctor, ps\)$' <("$DDP" --help)
sed -n '/^\.B \\-\\-json$/{n;p}' "$DDP_SRCDIR/man/ddplaunch.1" >"$TMP/manjson"
expect_grep '^Machine\\-readable output for plan, topo, doctor and ps ' "$TMP/manjson"
for cmd in plan doctor ps topo; do
    grep -A1 "^\.B ddplaunch $cmd\$" "$DDP_SRCDIR/man/ddplaunch.1" | grep -q '\\-\\-json' ||
        sed -n "/^\.B ddplaunch $cmd\$/,/^\.br/p" "$DDP_SRCDIR/man/ddplaunch.1" | grep -q '\\-\\-json' ||
        fail "man SYNOPSIS: ddplaunch $cmd without [--json]"
done
# README and --help name the same site config for this build
site=$("$DDP" --help | sed -n 's/.*(\$DDPLAUNCH_CONFIG or \([^)]*\)).*/\1/p')
[ -n "$site" ] || fail "precondition: --help names no site config"
grep -qF "\`$site\`" "$DDP_SRCDIR/README.md" || fail "README does not name the site config this build reads ($site)"
# README's log layout names every file a run leaves in its log directory and a rank's directory
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/lay" /bin/true >/dev/null 2>&1 || fail "--log-dir run"
line=$(grep -F 'ls logs/*/ logs/*/attempt_0/0/' "$DDP_SRCDIR/README.md")
[ -n "$line" ] || fail "README has no log layout line"
for f in "$TMP"/lay/*/* "$TMP"/lay/*/attempt_0/0/*; do
    case " ${line#*#} " in *" $(basename "$f")"[" ;"]*) ;; *) fail "README's log layout leaves out $(basename "$f")" ;; esac
done
# README's first screen (issue 54): what it is, the two commands, the swap from torchrun and
# torch.distributed.launch, and where the rest is, before the long "What it does", in at most 50 lines
first=$(awk '/^## What it does/ { exit } { print }' "$DDP_SRCDIR/README.md")
[ "$(printf '%s\n' "$first" | wc -l)" -le 50 ] || fail "README's first screen (before 'What it does') is over 50 lines"
for want in '## Two commands' 'make demo' 'make test' 'torchrun --nproc-per-node' 'torch.distributed.launch' \
    'man ddplaunch' '## Where the rest is' 'restart'; do
    printf '%s\n' "$first" | grep -qF -- "$want" || fail "README's first screen lacks '$want'"
done
grep -q '^## What it does' "$DDP_SRCDIR/README.md" || fail "README has no 'What it does' after its first screen"
echo "help: ok"
