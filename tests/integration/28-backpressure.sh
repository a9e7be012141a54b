#!/usr/bin/env bash
# Back-pressure (issue 3): a worker that floods output while the console reads slowly does not grow the
# launcher's memory (it stops reading that pipe instead of buffering), loses nothing, and a quiet peer's lines
# still come through in order.
. "$DDP_SRCDIR/tests/integration/lib.sh"

# Rank 0: 1.5M lines of ~70 bytes (~100 MiB); rank 1: 20 lines.
cat >"$TMP/job.sh" <<EOS
#!/bin/sh
if [ "\$RANK" = 0 ]; then exec "$HELPERS/printlines" 1500000 out 60; fi
exec "$HELPERS/printlines" 20 out
EOS
chmod +x "$TMP/job.sh"
mkfifo "$TMP/fifo"
# A slow console: nothing read for 1.5 s, then everything.
( sleep 1.5; cat "$TMP/fifo" >"$TMP/out" ) &
reader=$!
"$DDP" --no-python --nproc-per-node 2 --console lines "$TMP/job.sh" >"$TMP/fifo" 2>"$TMP/err" &
L=$!
# The bound: 20 MB (buffering the flood would take over 100 MB); 64 MB for a sanitizer build, whose shadow
# memory and quarantine of freed blocks count in the launcher's RSS.
limit=20000
grep -q __asan_init "$DDP" && limit=64000
hwm=0
while kill -0 $L 2>/dev/null; do
    v=$(awk '/^VmHWM:/{print $2}' /proc/$L/status 2>/dev/null)
    [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
    sleep 0.05
done
wait $L
expect_eq "status" "$?" 0
wait $reader
echo "launcher peak RSS: ${hwm} kB for $(wc -c <"$TMP/out") bytes of output"
[ "$hwm" -lt "$limit" ] || fail "launcher peak RSS ${hwm} kB: output was buffered instead of back-pressured"
expect_eq "rank 0 lines" "$(grep -c '^\[rank0\]: r0 ' "$TMP/out")" 1500000
expect_eq "rank 1 lines in order" "$(grep '^\[rank1\]: ' "$TMP/out" | awk '{print $3}' | tr '\n' ' ')" \
    "$(seq 0 19 | tr '\n' ' ')"
bad=$(grep -cvE '^\[rank[01]\]: r[01] [0-9]+ x*$' "$TMP/out")
expect_eq "malformed lines" "$bad" 0

# A console that takes nothing at all does not make the launcher deaf: SIGTERM still stops the job. (The lines
# it could not write are dropped after 10 s without progress, so that it can exit.)
rm -f "$TMP/fifo2"
mkfifo "$TMP/fifo2"
exec 7<>"$TMP/fifo2"   # a reader that never reads
"$DDP" --no-python --nproc-per-node 2 "$HELPERS/printlines" 100000000 out 60 >"$TMP/fifo2" 2>"$TMP/err2" &
L=$!
sleep 1
hwm=$(awk '/^VmHWM:/{print $2}' /proc/$L/status)
start=$(date +%s%N)
kill -TERM $L
wait $L
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
exec 7<&-
expect_eq "status after SIGTERM with a blocked console" "$rc" 143
[ "$ms" -lt 15000 ] || fail "SIGTERM with a blocked console took ${ms} ms"
[ "$hwm" -lt "$limit" ] || fail "launcher RSS ${hwm} kB with a blocked console"
expect_grep 'got SIGTERM' "$TMP/err2"
echo ok
