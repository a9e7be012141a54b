#!/usr/bin/env bash
# Output forwarding (issue 3): every line arrives exactly once, whole, in order per rank, prefixed; a last
# line without newline is flushed; 1 MiB lines pass intact; --log-dir files; --redirects; --local-ranks-filter.
# Issue 23 items 3 and 4: on a file or pipe, several workers' lines come without prefix but whole (never two
# ranks in one line), --console lines prefixes them, --tee copies get torchrun's "[default0]:" / "[rank0]:",
# and on a terminal (under script(1)) the default prefixes them.
. "$DDP_SRCDIR/tests/integration/lib.sh"

N=20000
"$DDP" --no-python --nproc-per-node 4 --console lines "$HELPERS/printlines" $N both 40 >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
for r in 0 1 2 3; do
    # stdout got the even lines, stderr the odd ones, each exactly once, in order, unspliced.
    grep "^\[rank$r\]: r$r " "$TMP/out" | awk '{print $3}' >"$TMP/o$r"
    grep "^\[rank$r\]: r$r " "$TMP/err" | awk '{print $3}' >"$TMP/e$r"
    seq 0 2 $((N - 1)) >"$TMP/wo"
    seq 1 2 $((N - 1)) >"$TMP/we"
    cmp -s "$TMP/o$r" "$TMP/wo" || fail "rank $r stdout lines missing, duplicated or out of order"
    cmp -s "$TMP/e$r" "$TMP/we" || fail "rank $r stderr lines missing, duplicated or out of order"
done
# No line is spliced: every line is exactly prefix + "rK i " + 40 x.
bad=$(cat "$TMP/out" "$TMP/err" | grep -cvE '^\[rank[0-3]\]: r[0-3] [0-9]+ x{40}$')
expect_eq "malformed lines" "$bad" 0

# The default on a file: the workers' bytes, no prefix, every line whole, all of them.
"$DDP" --no-python --nproc-per-node 4 "$HELPERS/printlines" $N both 40 >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
bad=$(cat "$TMP/out" "$TMP/err" | grep -cvE '^r[0-3] [0-9]+ x{40}$')
expect_eq "malformed lines without prefix" "$bad" 0
expect_eq "lines without prefix" "$(cat "$TMP/out" "$TMP/err" | wc -l)" $((4 * N))
for r in 0 3; do
    grep "^r$r " "$TMP/out" | awk '{print $2}' >"$TMP/o$r"
    cmp -s "$TMP/o$r" "$TMP/wo" || fail "rank $r stdout lines (no prefix) missing, duplicated or out of order"
done

# Two ranks that write each line in two pieces, a while apart: on a pipe each line still arrives whole (a
# shared pipe, torchrun's, gives "r0 r1 b" lines).
cat >"$TMP/halves.py" <<'EOS'
import os, time
r = os.environ["RANK"]
for i in range(5):
    os.write(1, ("r%s %d " % (r, i)).encode())
    time.sleep(0.05)
    os.write(1, b"end\n")
EOS
"$DDP" --nproc-per-node 2 "$TMP/halves.py" 2>"$TMP/err" | cat >"$TMP/out"
expect_eq "status" "${PIPESTATUS[0]}" 0
expect_eq "whole lines on a pipe" "$(grep -cE '^r[01] [0-4] end$' "$TMP/out")/$(wc -l <"$TMP/out")" 10/10

# A last line without newline is flushed at exit, on both streams.
"$DDP" --no-python --nproc-per-node 2 --console lines "$HELPERS/nonewline" "tail-out" "tail-err" >"$TMP/out" \
    2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "stdout partial lines" "$(sort "$TMP/out" | tr '\n' '|')" "[rank0]: tail-out|[rank1]: tail-out|"
expect_grep '^\[rank1\]: tail-err$' "$TMP/err"

# 1 MiB lines arrive intact.
"$DDP" --no-python --nproc-per-node 2 "$HELPERS/printlines" 3 out 1048576 >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "long lines" "$(awk '{print length($0)}' "$TMP/out" | sort -u)" "$((1048576 + 5))"
expect_eq "long line count" "$(wc -l <"$TMP/out")" 6

# --log-dir: per attempt and local rank, stdout.log and stderr.log, without prefix.
"$DDP" --no-python --nproc-per-node 2 --log-dir "$TMP/logs" "$HELPERS/printlines" 4 both >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
for r in 0 1; do
    f=$(find "$TMP/logs" -path "*attempt_0/$r/stdout.log" | head -n 1)
    [ -n "$f" ] || { find "$TMP/logs"; fail "no attempt_0/$r/stdout.log"; }
    expect_eq "rank $r stdout.log" "$(tr '\n' '|' <"$f")" "r$r 0 |r$r 2 |"
    expect_eq "rank $r stderr.log" "$(tr '\n' '|' <"${f%stdout.log}stderr.log")" "r$r 1 |r$r 3 |"
done

# --redirects 1: stdout only to the files, stderr still on the console.
rm -rf "$TMP/logs"
"$DDP" --no-python --nproc-per-node 2 --log-dir "$TMP/logs" --redirects 1 "$HELPERS/printlines" 4 both \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
[ -s "$TMP/out" ] && { cat "$TMP/out"; fail "--redirects 1 still printed stdout on the console"; }
expect_grep '^r1 3 $' "$TMP/err"
f=$(find "$TMP/logs" -path "*attempt_0/1/stdout.log" | head -n 1)
expect_eq "redirected stdout.log" "$(tr '\n' '|' <"$f")" "r1 0 |r1 2 |"

# --local-ranks-filter 1: only local rank 1 on the console, raw (one worker reaches it); lines with --console.
"$DDP" --no-python --nproc-per-node 3 --local-ranks-filter 1 "$HELPERS/printlines" 2 >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "filtered console" "$(tr '\n' '|' <"$TMP/out")" "r1 0 |r1 1 |"
"$DDP" --no-python --nproc-per-node 3 --local-ranks-filter 1 --console lines "$HELPERS/printlines" 2 \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "filtered console, lines" "$(tr '\n' '|' <"$TMP/out")" "[rank1]: r1 0 |[rank1]: r1 1 |"

# --tee: torchrun's prefix on the copies, on any console; torchtitan's --local-ranks-filter 0 --role rank --tee 3
"$DDP" --no-python --nproc-per-node 2 --tee 3 "$HELPERS/printlines" 2 both >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "--tee 3 stdout" "$(sort "$TMP/out" | tr '\n' '|')" "[default0]:r0 0 |[default1]:r1 0 |"
expect_eq "--tee 3 stderr" "$(sort "$TMP/err" | tr '\n' '|')" "[default0]:r0 1 |[default1]:r1 1 |"
"$DDP" --no-python --nproc-per-node 3 --local-ranks-filter 0 --role rank --tee 3 "$HELPERS/printlines" 2 both \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "filtered --tee 3 stdout" "$(cat "$TMP/out")" "[rank0]:r0 0 "
expect_eq "filtered --tee 3 stderr" "$(cat "$TMP/err")" "[rank0]:r0 1 "

# On a terminal (script(1) gives the launcher one), several workers' lines get the default prefix.
command -v script >/dev/null || fail "script(1) (bsdutils) is needed to give the launcher a terminal"
printf '%s\0' "$DDP" --no-python --nproc-per-node 2 "$HELPERS/printlines" 2 >"$TMP/argv"
script -qec "xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\" 2>/dev/null' sh" /dev/null </dev/null | tr -d '\r' >"$TMP/out"
expect_eq "terminal: prefixed lines" "$(sort "$TMP/out" | tr '\n' '|')" "[rank0]: r0 0 |[rank0]: r0 1 |[rank1]: r1 0 |[rank1]: r1 1 |"
echo ok
