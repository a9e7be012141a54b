#!/usr/bin/env bash
# Signals to the launcher (issue 3): SIGTERM ends every worker and exits 143; SIGINT twice kills at once
# (130); --signals-to-handle SIGUSR1 is forwarded to the workers; a signal that arrives while the workers are
# still starting is not lost.
. "$DDP_SRCDIR/tests/integration/lib.sh"

wait_file() { for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.05; done; fail "timed out waiting for $1"; }
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' '); [ -z "$st" ] || [ "$st" = Z ]; }

# SIGTERM -> 143, all workers gone.
mkdir -p "$TMP/a"
"$DDP" --no-python --nproc-per-node 3 "$HELPERS/hang" 3600 "$TMP/a" >"$TMP/out" 2>"$TMP/err" &
L=$!
for r in 0 1 2; do wait_file "$TMP/a/pid.$r"; done
kill -TERM $L
wait $L
expect_eq "status after SIGTERM" "$?" 143
for f in "$TMP"/a/pid.*; do gone "$(cat "$f")" || fail "worker $(cat "$f") survived SIGTERM to the launcher"; done
expect_grep 'got SIGTERM: forwarding it to 3 workers' "$TMP/err"

# SIGINT once: forwarded (ignored by the workers); SIGINT twice: SIGKILL at once, 130.
mkdir -p "$TMP/b"
IGNORE_INT=1 "$DDP" --no-python --nproc-per-node 2 --shutdown-timeout 60 "$HELPERS/ignoreterm" 3600 \
    >"$TMP/out" 2>"$TMP/err" &
L=$!
for _ in $(seq 100); do [ "$(grep -c ready "$TMP/out")" = 2 ] && break; sleep 0.05; done
kill -INT $L
sleep 0.3
kill -0 $L 2>/dev/null || fail "the launcher exited after one SIGINT although the workers ignore it"
start=$(date +%s%N)
kill -INT $L
wait $L
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status after two SIGINTs" "$rc" 130
# at once: well before the 60 s grace (a bound a loaded machine cannot break, and the grace cannot meet)
[ "$ms" -lt 15000 ] || fail "second SIGINT did not kill at once (${ms} ms; the grace is 60 s)"

# issue 43 item 11: one SIGINT that the workers ignore: after shutdown_timeout the escalation is said, naming them.
IGNORE_INT=1 "$DDP" --no-python --nproc-per-node 2 --shutdown-timeout 1 "$HELPERS/ignoreterm" 3600 \
    >"$TMP/out" 2>"$TMP/err" &
L=$!
for _ in $(seq 100); do [ "$(grep -c ready "$TMP/out")" = 2 ] && break; sleep 0.05; done
kill -INT $L
wait $L
expect_eq "status after one SIGINT and the grace" "$?" 130
expect_grep '^ddplaunch: warning: attempt 0: ranks 0, 1 still running 1s after SIGINT \(shutdown_timeout\): SIGKILL$' "$TMP/err"

# SIGUSR1 forwarded with --signals-to-handle; the workers die of it -> 128+10.
mkdir -p "$TMP/c"
"$DDP" --no-python --nproc-per-node 2 --signals-to-handle SIGTERM,SIGINT,SIGUSR1 "$HELPERS/hang" 3600 "$TMP/c" \
    >"$TMP/out" 2>"$TMP/err" &
L=$!
for r in 0 1; do wait_file "$TMP/c/pid.$r"; done
kill -USR1 $L
wait $L
expect_eq "status after SIGUSR1 forwarded" "$?" 138
expect_grep 'got SIGUSR1: forwarding it to 2 workers' "$TMP/err"

# A signal during the start: 48 workers, SIGTERM as soon as the first one runs (most are still starting, some
# not yet exec'd by their shim): every worker ends at once (not after the 90 s grace), status 143.
mkdir -p "$TMP/d"
"$DDP" --no-python --nproc-per-node 48 --shutdown-timeout 90 "$HELPERS/hang" 3600 "$TMP/d" >"$TMP/out" 2>"$TMP/err" &
L=$!
for _ in $(seq 400); do ls "$TMP"/d/pid.* >/dev/null 2>&1 && break; sleep 0.005; done
start=$(date +%s%N)
kill -TERM $L
wait $L
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "status after a SIGTERM during the start" "$rc" 143
[ "$ms" -lt 45000 ] || fail "workers were not stopped at once after a SIGTERM during the start (${ms} ms; grace 90 s)"
sleep 0.2
left=$(pgrep -f "$HELPERS/hang 3600 $TMP/d" | wc -l)
expect_eq "workers left after an early SIGTERM" "$left" 0
echo ok
