#!/usr/bin/env bash
# Containment (issue 24, item 3): another local user who binds ddplaunch's abstract lock names (no listen: no
# SO_PEERCRED) blocks auto ports and GPU leases, as a live process may; she is named (pid, user, command) in
# the refusal, in doctor (a warning, not "ok") and a job whose lock backlog she filled still shows in `ps`.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || fail "runuser not installed"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || fail "fixture $TOPO not found"
M=ddptest-mallory
id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M" || fail "useradd failed"
as_m() { runuser -u "$M" -- "$@"; }
chmod 711 "$TMP"
mkdir -m 1777 "$TMP/pub"
busids=$("$DDP" topo --topology "$TOPO" --json | $PY -c 'import json,sys; print(" ".join(g["busid"] for g in json.load(sys.stdin)["gpus"]))')
[ "$(echo $busids | wc -w)" = 8 ] || fail "fixture GPUs: $busids"
lo=$((30000 + RANDOM % 20 * 100))
hi=$((lo + 9))

# Mallory binds every name (no listen) and stays.
mkfifo "$TMP/pub/ready"
chmod 666 "$TMP/pub/ready"
as_m $PY -c '
import socket, sys, time
ns, ready, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
socks = []
for what in ["gpu-" + b for b in sys.argv[5:]] + ["port-%d" % p for p in range(lo, hi + 1)]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0ddplaunch" + ns + "/" + what); socks.append(s)
open(ready, "w").write("ok\n")
time.sleep(120)' "$DDPLAUNCH_LOCK_DIR" "$TMP/pub/ready" $lo $hi $busids &
squat=$!
read -r _ <"$TMP/pub/ready"
sqpid=$(pgrep -u "$M" -f "time.sleep\(120\)" | head -1)
[ -n "$sqpid" ] || fail "mallory's squatter not found"
trap 'kill $sqpid 2>/dev/null; rm -rf "$TMP"' EXIT
who="pid $sqpid, user $M, command python3"

# 1. auto ports: refused, the holder named
"$DDP" --no-python --nproc-per-node 1 --master-port "auto:$lo-$hi" /bin/true >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
[ "$rc" != 0 ] || fail "a job got a port mallory holds"
expect_grep "no free port for master_port = auto in $lo-$hi .*10 reserved: reserved by $who" "$TMP/err"
grep -q "holder unknown" "$TMP/err" && fail "the holder was shown as unknown"

# 2. GPU leases: refused, the holder named
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --no-python /bin/true >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
[ "$rc" != 0 ] || fail "a job got GPUs mallory holds"
expect_grep "a process that is no ddplaunch job \($who\)" "$TMP/err"

# 3. doctor warns and names her (leases and port reservations)
"$DDP" doctor --topology "$TOPO" --nproc-per-node 2 --master-port "$lo" >"$TMP/doc" 2>&1
rc=$?
cat "$TMP/doc"
[ "$rc" != 0 ] || fail "doctor said ok while mallory holds every GPU and port"
expect_grep "no ddplaunch job.*$who" "$TMP/doc"
expect_grep "port-locks.*10 port reservations held by processes that are no ddplaunch job" "$TMP/doc"
kill $sqpid
wait $squat 2>/dev/null

# 4. A running job whose job lock's backlog mallory filled is still listed by ps, for root and for her.
cp "$DDP" "$TMP/pub/ddplaunch"
chmod 755 "$TMP/pub/ddplaunch"
"$DDP" --no-python --nproc-per-node 1 --set job.name=victimjob /bin/sh -c 'while [ ! -e "$0" ]; do sleep 0.1; done' \
    "$TMP/stop" >"$TMP/out" 2>&1 &
job=$!
for _ in $(seq 100); do klock_held "job-$job" && break; sleep 0.05; done
klock_held "job-$job" || fail "the job took no job lock"
expect_eq "jobs in ps before" "$("$DDP" ps --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1
mkfifo "$TMP/pub/ready2"
chmod 666 "$TMP/pub/ready2"
as_m $PY -c '
import socket, sys, time
name, ready = sys.argv[1], sys.argv[2]
socks, n = [], 0
for i in range(1000):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.setblocking(False)
    try: s.connect("\0" + name)
    except BlockingIOError: break
    except OSError: break
    socks.append(s); n += 1
open(ready, "w").write("%d\n" % n)
time.sleep(60)' "ddplaunch$DDPLAUNCH_LOCK_DIR/job-$job" "$TMP/pub/ready2" &
filler=$!
read -r nconn <"$TMP/pub/ready2"
[ "$nconn" -ge 2 ] && [ "$nconn" -lt 1000 ] || fail "mallory queued $nconn connections (expected a full backlog)"
expect_eq "jobs in ps (root) with a full backlog" \
    "$("$DDP" ps --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1
"$DDP" ps >"$TMP/ps"
expect_grep "victimjob" "$TMP/ps"
expect_eq "jobs in ps (mallory) with a full backlog" \
    "$(as_m env DDPLAUNCH_LOCK_DIR="$DDPLAUNCH_LOCK_DIR" "$TMP/pub/ddplaunch" ps --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" 1
pkill -P $filler 2>/dev/null
kill $filler 2>/dev/null
touch "$TMP/stop"
wait $job || fail "the job failed: $?"
echo ok
