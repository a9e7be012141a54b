#!/usr/bin/env bash
# The console on a terminal (issue 23 item 15): the launcher's own lines are coloured when stderr is a terminal
# (script(1) gives it one), never with NO_COLOR set or on a file; a job that succeeded after restarts ends with
# one line naming the attempts and the time, and a job without restarts prints nothing.
. "$DDP_SRCDIR/tests/integration/lib.sh"
command -v script >/dev/null || fail "script(1) (bsdutils) is needed to give the launcher a terminal"

# Rank 1 fails in attempt 0 and succeeds in attempt 1.
cat >"$TMP/flaky.sh" <<'EOS'
#!/bin/sh
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && { echo "boom" >&2; exit 3; }
echo "ok $RANK"
EOS
chmod +x "$TMP/flaky.sh"
# on_tty FILE ARGS...: run ddplaunch ARGS on a terminal (stdin from /dev/null), its terminal output to FILE
on_tty() {
    _out=$1
    shift
    printf '%s\0' "$DDP" "$@" >"$TMP/argv"
    script -qec "xargs -0 -a '$TMP/argv' sh -c 'exec \"\$@\"' sh" /dev/null </dev/null >"$_out"
}
ESC=$(printf '\033')

# A failure on a terminal: "error:" in red, the summary's title in red.
on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "ddplaunch: ${ESC}\[1;31merror: ${ESC}\[0mattempt 0: rank 1" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no red error:"; }
grep -q "${ESC}\[1;31m.*flaky.sh FAILED (exit status 3)${ESC}\[0m" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no red FAILED title"; }
grep -q '^\[rank1\]: boom' "$TMP/tty" || { cat -v "$TMP/tty"; fail "worker line changed on a terminal"; }
# NO_COLOR set: none; NO_COLOR empty: colours
NO_COLOR=1 on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "FAILED (exit status 3)" "$TMP/tty" || { cat -v "$TMP/tty"; fail "NO_COLOR: no summary"; }
grep -q "$ESC" "$TMP/tty" && { cat -v "$TMP/tty"; fail "NO_COLOR=1: colours on the terminal"; }
NO_COLOR= on_tty "$TMP/tty" --no-python --nproc-per-node 2 "$TMP/flaky.sh"
grep -q "$ESC" "$TMP/tty" || { cat -v "$TMP/tty"; fail "NO_COLOR empty: no colours"; }
# stderr on a file: none
"$DDP" --no-python --nproc-per-node 2 "$TMP/flaky.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 3
expect_grep "FAILED \(exit status 3\)" "$TMP/err"
grep -q "$ESC" "$TMP/err" && { cat -v "$TMP/err"; fail "colours on a file"; }

# Success after a restart: one line, also on a file; green on a terminal.
"$DDP" --no-python --nproc-per-node 2 --max-restarts 2 --set restart.backoff=0 "$TMP/flaky.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status after a restart" "$?" 0
expect_grep '^ddplaunch: .*flaky\.sh succeeded after 2 attempts \(1 restart\) in [0-9]+\.[0-9] s$' "$TMP/err"
on_tty "$TMP/tty" --no-python --nproc-per-node 2 --max-restarts 2 --set restart.backoff=0 "$TMP/flaky.sh"
grep -q "${ESC}\[32m.*flaky.sh succeeded${ESC}\[0m after 2 attempts" "$TMP/tty" || { cat -v "$TMP/tty"; fail "no green success line"; }
# Success without restarts: silent.
"$DDP" --no-python --nproc-per-node 2 /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
[ -s "$TMP/err" ] && { cat "$TMP/err"; fail "a success without restarts printed on stderr"; }
echo "ok: colours on a terminal only, NO_COLOR honoured, success after restart in one line"
