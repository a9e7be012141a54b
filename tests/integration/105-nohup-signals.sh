#!/usr/bin/env bash
# Issue 54 item 1: a signal ignored when ddplaunch starts stays ignored, as nohup and shells expect. Under
# `nohup`, SIGHUP (a closed SSH session) neither stops the job nor reaches a worker: the job runs to completion,
# exit 0. The same for a signal of --signals-to-handle ignored at start (`trap '' USR1` before exec). SIGINT
# stays handled although a shell without job control ignores it for `cmd &` (a script's `kill -INT` stops it).
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.sh" <<'SHEOF'
#!/bin/sh
trap 'echo "rank $RANK got HUP" >>"$D/sig"' HUP
trap 'echo "rank $RANK got USR1" >>"$D/sig"' USR1
: >"$D/ready.$RANK"
while [ ! -e "$D/go" ]; do sleep 0.05; done
echo "rank $RANK done"
SHEOF
chmod +x "$TMP/w.sh"
wait_ready() {
    for _ in $(seq 200); do
        [ -e "$1/ready.0" ] && [ -e "$1/ready.1" ] && return 0
        kill -0 "$2" 2>/dev/null || { cat "$1/err"; fail "the job ended before its workers were ready"; }
        sleep 0.05
    done
    fail "workers not ready"
}

# 1. nohup: SIGHUP to the launcher (as the terminal's hangup) changes nothing; the job completes.
D=$TMP/a && mkdir -p "$D"
D=$D nohup "$DDP" --no-python --nproc-per-node 2 "$TMP/w.sh" >"$D/out" 2>"$D/err" &
L=$!
wait_ready "$D" $L
kill -HUP $L
sleep 0.5
kill -0 $L 2>/dev/null || { cat "$D/err"; fail "nohup ddplaunch died of SIGHUP"; }
: >"$D/go"
wait $L
rc=$?
[ $rc = 0 ] || { cat "$D/err"; fail "nohup ddplaunch exited $rc after SIGHUP, want 0"; }
expect_eq "workers done" "$(grep -c 'done' "$D/out")" 2
[ -e "$D/sig" ] && { cat "$D/sig"; fail "a worker got SIGHUP although it was ignored"; }
expect_grep 'SIGHUP was ignored when ddplaunch started \(nohup\?\): it stays ignored' "$D/err"

# 2. A signal of --signals-to-handle ignored at start stays ignored too (not forwarded, not fatal).
D=$TMP/b && mkdir -p "$D"
(trap '' USR1 && D=$D exec "$DDP" --no-python --nproc-per-node 2 --signals-to-handle SIGTERM,SIGUSR1 \
    "$TMP/w.sh" >"$D/out" 2>"$D/err") &
L=$!
wait_ready "$D" $L
kill -USR1 $L
sleep 0.5
: >"$D/go"
wait $L
rc=$?
[ $rc = 0 ] || { cat "$D/err"; fail "ddplaunch exited $rc after an ignored SIGUSR1, want 0"; }
[ -e "$D/sig" ] && { cat "$D/sig"; fail "an ignored SIGUSR1 was forwarded"; }

# 3. Without nohup SIGHUP still stops the job (129), and SIGINT to a `cmd &` job still does (130).
for sig in HUP INT; do
    D=$TMP/c$sig && mkdir -p "$D"
    D=$D "$DDP" --no-python --nproc-per-node 2 "$TMP/w.sh" >"$D/out" 2>"$D/err" &
    L=$!
    wait_ready "$D" $L
    kill -$sig $L
    sleep 0.2
    : >"$D/go" # the workers trap SIGHUP: they end on the word
    wait $L
    rc=$?
    want=$((128 + $(kill -l $sig)))
    [ $rc = $want ] || { cat "$D/err"; fail "SIG$sig to ddplaunch: exit $rc, want $want"; }
done
echo "nohup: SIGHUP ignored, job completed; ignored SIGUSR1 not forwarded; SIGHUP/SIGINT still stop a plain job"
exit 0
