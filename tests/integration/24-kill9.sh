#!/usr/bin/env bash
# kill -9 of the launcher (issue 3): no worker and no grandchild in a worker's process group is alive 1 s later.
. "$DDP_SRCDIR/tests/integration/lib.sh"

gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' '); [ -z "$st" ] || [ "$st" = Z ]; }

mkdir -p "$TMP/g"
"$DDP" --no-python --nproc-per-node 4 "$HELPERS/grandchild" "$TMP/g" 3600 >"$TMP/out" 2>"$TMP/err" &
L=$!
for r in 0 1 2 3; do
    for _ in $(seq 100); do [ -s "$TMP/g/pids.$r" ] && break; sleep 0.05; done
    [ -s "$TMP/g/pids.$r" ] || fail "rank $r never started"
done
pids=$(cat "$TMP"/g/pids.*)
for p in $pids; do gone "$p" && fail "process $p is not running before the kill"; done
kill -9 $L
wait $L 2>/dev/null
sleep 1
for p in $pids; do gone "$p" || { ps -o pid,ppid,pgid,stat,args -p "$p"; fail "process $p survived kill -9 of the launcher"; }; done

# Also when the worker itself already exited and only its grandchild is left in the group.
mkdir -p "$TMP/h"
"$DDP" --no-python --nproc-per-node 2 "$HELPERS/grandchild" "$TMP/h" 0 >"$TMP/out" 2>"$TMP/err" &
L=$!
for r in 0 1; do
    for _ in $(seq 100); do [ -s "$TMP/h/pids.$r" ] && break; sleep 0.05; done
done
sleep 0.2
kill -9 $L
wait $L 2>/dev/null
sleep 1
for p in $(awk '{print $2}' "$TMP"/h/pids.*); do gone "$p" || fail "grandchild $p survived"; done
echo ok
