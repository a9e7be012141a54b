#!/usr/bin/env bash
# The first hour with a job spec (issue 54): every mistake of a file reported at once, in line order, each
# "FILE:LINE: ...", exit 2 and nothing started; booleans in any case (True, YES, Off as ddplaunch.ini(5) says);
# a misspelt script caught by `plan` and `doctor` too (the `ddplaunch doctor job.ini || exit 1` gate), with the
# file and line that set it.
. "$DDP_SRCDIR/tests/integration/lib.sh"
MARK=$TMP/marker

# 1. Three mistakes, one of them a section below two key errors: one run names all of them, in line order.
printf '[job]\ncommand = /usr/bin/touch %s\nnproc_per_nod = 2\njust words\n[restrt]\nmax_restarts = 1\n[numa]\nbind = sockets\n' \
    "$MARK" >"$TMP/bad.ini"
for mode in run plan doctor; do
    if [ $mode = run ]; then "$DDP" "$TMP/bad.ini" >"$TMP/out" 2>"$TMP/err"; else
        "$DDP" $mode "$TMP/bad.ini" >"$TMP/out" 2>"$TMP/err"; fi
    expect_eq "$mode: exit status" "$?" 2
    cat "$TMP/err"
    expect_eq "$mode: lines on stderr" "$(grep -c . "$TMP/err")" 4
    expect_eq "$mode: the lines, in line order" "$(sed -E 's/^ddplaunch: error: [^:]*:([0-9]+): .*/\1/' "$TMP/err" |
        paste -sd' ')" "3 4 5 8"
    expect_grep "^ddplaunch: error: $TMP/bad.ini:3: unknown key 'nproc_per_nod'" "$TMP/err"
    expect_grep "^ddplaunch: error: $TMP/bad.ini:4: expected 'key = value'" "$TMP/err"
    expect_grep "^ddplaunch: error: $TMP/bad.ini:5: unknown section \[restrt\] \(did you mean \[restart\]\?\)" "$TMP/err"
    expect_grep "^ddplaunch: error: $TMP/bad.ini:8: numa.bind: expected .*got 'sockets'" "$TMP/err"
    [ ! -e "$MARK" ] || fail "$mode: a worker was started"
done

# 2. Booleans in any case, as ddplaunch.ini(5) documents true/false, yes/no, on/off.
for v in True TRUE Yes On; do
    printf '[job]\nprogram = /bin/true\n[numa]\nstrict = %s\n[timeout]\ntimer_file = %s\n' "$v" "$v" >"$TMP/b.ini"
    "$DDP" plan --json "$TMP/b.ini" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "strict = $v refused"; }
done
printf '[job]\nprogram = /bin/true\n[numa]\nstrict = Off\n' >"$TMP/b.ini"
"$DDP" plan "$TMP/b.ini" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "strict = Off refused"; }
printf '[job]\nprogram = /bin/true\n[numa]\nstrict = maybe\n' >"$TMP/b.ini"
"$DDP" plan "$TMP/b.ini" >"$TMP/out" 2>"$TMP/err"
expect_eq "strict = maybe" "$?" 2
expect_grep "b.ini:4: numa.strict: expected yes or no, got 'maybe'" "$TMP/err"

# 3. A misspelt script: plan and doctor say "no such file" with the file and line, and fail (doctor's gate).
mkdir "$TMP/proj"
touch "$TMP/proj/train.py"
printf '[job]\nnproc_per_node = 1\nscript = trian.py\n' >"$TMP/proj/job.ini"
for mode in plan doctor; do
    (cd "$TMP" && "$DDP" $mode proj/job.ini) >"$TMP/out" 2>"$TMP/err"
    rc=$?
    cat "$TMP/err"
    [ "$rc" != 0 ] || fail "$mode passed a job spec whose script is not there"
    expect_eq "$mode: exit status" "$rc" 2
    expect_grep "proj/job.ini:3: script: no such file: '.*trian.py'" "$TMP/err"
done
# ... and a misspelt script on the command line, too.
"$DDP" plan --nproc-per-node 1 "$TMP/proj/trian.py" >"$TMP/out" 2>"$TMP/err"
expect_eq "plan with a missing script argument" "$?" 2
expect_grep "no such file: '$TMP/proj/trian.py'" "$TMP/err"
# The right name passes.
printf '[job]\nnproc_per_node = 1\nscript = train.py\n' >"$TMP/proj/job.ini"
(cd "$TMP" && "$DDP" plan proj/job.ini) >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "plan of a good spec"; }

# 4. One rule for a spec's paths, stated by plan: script, log_dir and the workers' directory are the spec's.
expect_grep "^Directory: $TMP/proj \(the job spec's: its relative script, program, log_dir and workdir are taken" "$TMP/out"
printf 'import os\nprint("ran in", os.getcwd())\n' >"$TMP/proj/train.py"
printf '[job]\nnproc_per_node = 1\nscript = train.py\nlog_dir = logs\n' >"$TMP/proj/job.ini"
mkdir "$TMP/elsewhere"
(cd "$TMP/elsewhere" && "$DDP" ../proj/job.ini) >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "the job from elsewhere"; }
expect_grep "^ran in $TMP/proj$" "$TMP/out"
[ -d "$TMP/proj/logs" ] || fail "log_dir not in the spec's directory"
# ... a workdir in the spec is the spec's too, and the command line's is the current directory's.
mkdir "$TMP/proj/wd" "$TMP/elsewhere/wd"
printf 'workdir = wd\n' >>"$TMP/proj/job.ini"
(cd "$TMP/elsewhere" && "$DDP" ../proj/job.ini) >"$TMP/out" 2>&1 || { cat "$TMP/out"; fail "the job with workdir"; }
expect_grep "^ran in $TMP/proj/wd$" "$TMP/out"
echo ok
