#!/usr/bin/env bash
# An explicit master_port that another program listens on: ddplaunch refuses before starting anything, exit 2,
# one line naming the port, the address and the holder (pid and command, as `ss -ltnp` would), suggesting
# master_port = auto. A port reserved by another ddplaunch job is refused naming that job; kill -9 of that
# launcher frees the reservation at once.
. "$DDP_SRCDIR/tests/integration/lib.sh"
LOCKS=$DDPLAUNCH_LOCK_DIR
# PORT..PORT+5 held for the test (lib.sh hold_port), below the ephemeral range; DDP_TEST_PORT picks the first.
if [ -n "${DDP_TEST_PORT:-}" ]; then
    hold_port PORT 6 "$DDP_TEST_PORT-$((DDP_TEST_PORT + 5))"
else
    hold_port PORT 6 20000-28999
fi

# 1. a python3 program listening on PORT (as another user's TCPStore or a notebook would)
$PY -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").write("ready\n"); time.sleep(60)' "$PORT" "$TMP/ready" &
holder=$!
for _ in $(seq 100); do [ -s "$TMP/ready" ] && break; sleep 0.05; done
[ -s "$TMP/ready" ] || fail "the listening helper did not start"

"$DDP" --nproc-per-node 2 --master-port "$PORT" --no-python /usr/bin/touch "$TMP/started" >"$TMP/out" 2>"$TMP/err"
rc=$?
kill "$holder"; wait "$holder" 2>/dev/null
cat "$TMP/err"
expect_eq "exit status for a busy explicit port" "$rc" 2
[ ! -e "$TMP/started" ] || fail "a worker was started although the port was busy"
expect_eq "lines on stderr" "$(grep -c . "$TMP/err")" 1
expect_grep "master_port $PORT on 127\.0\.0\.1 is in use: pid $holder \(python3\)" "$TMP/err"
expect_grep "listens on 127\.0\.0\.1:$PORT" "$TMP/err"
expect_grep "master_port = auto" "$TMP/err"

# 2. the same port reserved by a running ddplaunch job: refused, naming that job's launcher
"$DDP" --nproc-per-node 1 --master-port "$PORT" --no-python /bin/sleep 30 >"$TMP/a.out" 2>&1 &
jobA=$!
for _ in $(seq 100); do klock_held "port-$PORT" && break; sleep 0.05; done
"$DDP" --nproc-per-node 1 --master-port "$PORT" --no-python /usr/bin/touch "$TMP/started2" >/dev/null 2>"$TMP/err2"
rc=$?
cat "$TMP/err2"
expect_eq "exit status for a port reserved by another job" "$rc" 2
[ ! -e "$TMP/started2" ] || fail "a worker was started although the port was reserved"
expect_grep "master_port $PORT on 127\.0\.0\.1 is reserved by another process \(pid $jobA, user [^,]*, command ddplaunch\)" "$TMP/err2"

# 3. kill -9 the launcher: its reservation dies with it (its worker dies by PDEATHSIG), the port is usable
kill -9 "$jobA"; wait "$jobA" 2>/dev/null
for _ in $(seq 100); do "$DDP" --nproc-per-node 1 --master-port "$PORT" --no-python /usr/bin/touch "$TMP/started3" \
    >/dev/null 2>"$TMP/err3" && break; sleep 0.05; done
[ -e "$TMP/started3" ] || { cat "$TMP/err3"; fail "the port stayed reserved after kill -9 of its launcher"; }

# 4. master_port = auto next to the busy port: picks another one and says nothing alarming
$PY -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").write("ready\n"); time.sleep(60)' "$PORT" "$TMP/ready2" &
holder=$!
for _ in $(seq 100); do [ -s "$TMP/ready2" ] && break; sleep 0.05; done
"$DDP" --nproc-per-node 1 --master-port "auto:$PORT-$((PORT + 5))" --no-python /bin/sh -c 'echo "port=$MASTER_PORT"' \
    >"$TMP/out4" 2>&1
rc=$?
kill "$holder"; wait "$holder" 2>/dev/null
cat "$TMP/out4"
expect_eq "exit status with auto" "$rc" 0
expect_grep "port=$((PORT + 1))\$" "$TMP/out4"
echo ok
