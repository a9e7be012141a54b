#!/usr/bin/env bash
# Containment (issue 15): text that other processes control reaches the terminal escaped and in bounded
# amounts: a job name with terminal escapes in another job's lease is shown with '?' for each control
# character; a worker flooding the timer FIFO with bad requests gets a few warnings a minute, not thousands.
. "$DDP_SRCDIR/tests/integration/lib.sh"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || skip "fixture $TOPO not found"
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh

# 1. Job a, named with an OSC title and a clear-screen sequence, holds all 8 GPUs; job b is refused and names it.
mkdir -p "$TMP/a" "$TMP/b"
"$DDP" --topology "$TOPO" --nproc-per-node 8 --numa-binding none --set "job.name=$(printf 'x\033]0;owned\a\033[2Jy')" \
    --no-python "$WORKER" "$TMP/a" >"$TMP/a/out" 2>&1 &
echo $! >"$TMP/a/pid"
for _ in $(seq 200); do [ -s "$TMP/a/gpu.7" ] && break; sleep 0.05; done
[ -s "$TMP/a/gpu.7" ] || { cat "$TMP/a/out"; fail "job a did not start"; }
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --no-python "$WORKER" "$TMP/b" >"$TMP/b/out" 2>&1
rc=$?
touch "$TMP/a/stop"
wait "$(cat "$TMP/a/pid")"
cat -v "$TMP/b/out"
[ "$rc" != 0 ] || fail "job b ran on leased GPUs"
grep -q $'\033' "$TMP/b/out" && fail "an escape sequence from job a's name reached job b's terminal"
grep -q $'\a' "$TMP/b/out" && fail "a BEL from job a's name reached job b's terminal"
expect_grep "job 'x\?\]0;owned\?\?\[2Jy'" "$TMP/b/out"

# 2. A worker writes 3000 over-long requests and 3000 malformed ones to the timer FIFO.
"$DDP" --nproc-per-node 1 --set timeout.timer_file=yes --no-python /bin/sh -c '
long=$(head -c 9000 /dev/zero | tr "\0" x)
i=0; while [ $i -lt 3000 ]; do echo "$long"; echo "{bad $i"; i=$((i+1)); done >"$TORCHELASTIC_TIMER_FILE"' \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status of the flooding job" "$?" 0
n=$(grep -c 'timer request' "$TMP/err")
echo "$n timer warnings"
[ "$n" -ge 1 ] && [ "$n" -le 10 ] || { head -20 "$TMP/err"; fail "$n warnings about bad timer requests (want 1..10)"; }
echo ok
