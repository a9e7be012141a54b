#!/usr/bin/env bash
# Issue 24 item 8: a rank that is stopped (SIGSTOP, /proc state T) while the others wait is the first suspect:
# the stall names it, and summary.json's root cause is that rank, not a healthy one (or none).
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
echo "rank $RANK up"
[ "$RANK" = 1 ] && kill -STOP $$
sleep 60
EOS
chmod +x "$TMP/w.sh"

start=$(date +%s%N)
"$DDP" --no-python --nproc-per-node 3 --log-dir "$TMP/logs" --set timeout.stall=1s --set timeout.heartbeat=output \
    --set restart.on_timeout=fail "$TMP/w.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status" "$rc" 124
expect_eq "ranks up" "$(grep -c 'rank [0-2] up' "$TMP/out")" 3
expect_grep 'attempt 0: rank 1 is stopped or a zombie while the others wait: no progress for 1s \(output\)' "$TMP/err"
S=$(find "$TMP/logs" -name summary.json | head -1)
[ -f "$S" ] || fail "no summary.json under $TMP/logs"
expect_eq "root cause rank" "$(jq -r .root_cause.rank "$S")" 1
expect_eq "root cause class" "$(jq -r .root_cause.class "$S")" hang
[ "$ms" -lt 15000 ] || fail "took ${ms} ms"
exit 0
