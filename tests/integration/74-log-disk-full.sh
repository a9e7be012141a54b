#!/usr/bin/env bash
# Issue 24 item 5: a log write that fails (disk full) is said on the console once per log, with which log stopped
# and at how many bytes; the worker's last stderr lines stay in memory for the summary.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to mount a small tmpfs"
mkdir "$TMP/full"
mount -t tmpfs -o size=200k tmpfs "$TMP/full" || skip "cannot mount tmpfs"
trap 'umount "$TMP/full"; rm -rf "$TMP"' EXIT

cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
head -c 3000000 /dev/zero | tr '\0' 'x' | fold -w 100
echo "FATAL: the last words" >&2
exit 3
EOS
chmod +x "$TMP/w.sh"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/full/logs" "$TMP/w.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 3
expect_eq "stdout lines on the console" "$(grep -c '^x' "$TMP/out")" 30000
expect_grep '^ddplaunch: (warning: )?rank 0 attempt_0/0/stdout.log: log stopped at [0-9]+ bytes: No space left on device; its last lines are kept for the summary$' "$TMP/err"
expect_grep '^ddplaunch: (warning: )?rank 0 attempt_0/0/stderr.log: log stopped at 0 bytes: No space left on device' "$TMP/err"
expect_eq "one warning per log" "$(grep -c 'log stopped at' "$TMP/err")" 2
b=$(sed -nE 's/.*stdout.log: log stopped at ([0-9]+) bytes.*/\1/p' "$TMP/err")
[ "$b" -gt 0 ] && [ "$b" -lt 3030000 ] || fail "stopped at $b bytes"
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'FATAL: the last words' "$TMP/root"
exit 0
