#!/usr/bin/env bash
# Containment (issue 15): a second, unprivileged local user cannot break or block another user's GPU leases and
# port reservations. Mallory takes the lock directory first (mode 755, hers), plants mode-000 and symlinked lock
# files for every GPU and port, deletes whatever appears there, squats a GPU and a port with live processes and
# writes lease info files with terminal escapes and forged owners. Jobs of the first user still get disjoint
# GPUs and free ports, skip only what a live process really holds (named with the kernel's user), write nothing
# into her directory, follow none of her links, and print none of her escapes raw.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || skip "runuser not installed"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || skip "fixture $TOPO not found"
M=ddptest-mallory
id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M" || skip "useradd failed"
as_m() { runuser -u "$M" -- "$@"; }

# A shared, world-writable parent like /run/lock; the lock directory inside it is Mallory's.
chmod 711 "$TMP"
mkdir -m 1777 "$TMP/pub"
export DDPLAUNCH_LOCK_DIR=$TMP/pub/ddplaunch
as_m mkdir -m 755 "$DDPLAUNCH_LOCK_DIR" || fail "mallory cannot create the lock directory"
echo secret >"$TMP/pub/victim"
chmod 644 "$TMP/pub/victim"
busids=$("$DDP" topo --topology "$TOPO" --json | $PY -c 'import json,sys; print(" ".join(g["busid"] for g in json.load(sys.stdin)["gpus"]))')
[ "$(echo $busids | wc -w)" = 8 ] || fail "fixture GPUs: $busids"
for b in $busids; do
    as_m sh -c "umask 777; : >'$DDPLAUNCH_LOCK_DIR/gpu-$b.lock'; ln -s '$TMP/pub/victim' '$DDPLAUNCH_LOCK_DIR/gpu-$b.$(id -u).info'"
done
for p in $(seq 29400 29420); do as_m sh -c "umask 777; : >'$DDPLAUNCH_LOCK_DIR/port-$p.lock'"; done

# hold_gpu.sh: writes gpu.RANK and port.RANK, stays until DIR/stop
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh
start_job() { # start_job NAME [args]: a 2-GPU job in the background
    local name=$1
    shift
    mkdir -p "$TMP/$name"
    "$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --master-port auto:29400-29420 \
        --set "job.name=$name" "$@" --no-python "$WORKER" "$TMP/$name" >"$TMP/$name/out" 2>&1 &
    echo $! >"$TMP/$name/pid"
}

# Mallory squats GPU 0000:18:00.0 and port 29400 with live processes, and plants an info file for her squat
# with escapes in the job name.
sq=$(echo $busids | awk '{print $1}')
mkfifo "$TMP/pub/sqready"
chmod 666 "$TMP/pub/sqready"
as_m $PY -c '
import os, socket, sys, time
ns, busid, ready = sys.argv[1:]
socks = []
for what in ("gpu-" + busid, "port-29400"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0ddplaunch" + ns + "/" + what); s.listen(8); socks.append(s)
info = os.path.join(ns, "gpu-%s.%d.info" % (busid, os.getuid()))
try: os.unlink(info)
except OSError: pass
open(info, "w").write("pid=%d\njob=\x1b]0;owned\x07\x1b[2Jpwn\nuser=root\nstart=1\n" % os.getpid())
open(ready, "w").write("%d\n" % os.getpid())
time.sleep(120)' "$DDPLAUNCH_LOCK_DIR" "$sq" "$TMP/pub/sqready" &
sqjob=$!
read -r squatter <"$TMP/pub/sqready"
trap 'kill $squatter 2>/dev/null; rm -rf "$TMP"' EXIT

# Three jobs: each runs, on disjoint GPUs never including the squatted one, on distinct free ports.
for j in a b c; do start_job "$j"; done
for j in a b c; do wait_gpus "$j"; done
gpus=$(cat "$TMP"/[abc]/gpu.* | sort)
ports=$(cat "$TMP"/[abc]/port.0 | sort -u)
expect_eq "distinct GPUs of three jobs" "$(echo "$gpus" | sort -u | grep -c .)" 6
echo "$gpus" | grep -qx "$sq" && fail "a job got the GPU mallory holds"
expect_eq "distinct ports of three jobs" "$(echo "$ports" | grep -c .)" 3
echo "$ports" | grep -qx 29400 && fail "a job got the port mallory holds"
expect_eq "victim file" "$(cat "$TMP/pub/victim")" secret
expect_eq "files of root in mallory's directory" "$(find "$DDPLAUNCH_LOCK_DIR" -user root | grep -c .)" 0

# Mallory deletes everything in her directory: the leases hold (a fourth job finds one GPU free, not three).
as_m sh -c "rm -f '$DDPLAUNCH_LOCK_DIR'/*"
mkdir -p "$TMP/d"
"$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none --set job.name=d --no-python "$WORKER" \
    "$TMP/d" >"$TMP/d/out" 2>&1
rc=$?
cat "$TMP/d/out"
[ "$rc" != 0 ] || fail "a fourth job ran: the leases of jobs a, b, c were broken by deleting files"
[ ! -e "$TMP/d/gpu.0" ] || fail "the fourth job started a worker"
# (her directory holds no job names: those come from the kernel alone)
for j in a b c; do expect_grep "a ddplaunch job \(pid $(cat "$TMP/$j/pid"), user root, command ddplaunch\)" "$TMP/d/out"; done
expect_grep "\(pid $squatter, user $M" "$TMP/d/out"
grep -q $'\x1b' "$TMP/d/out" && fail "mallory's escape sequence was printed raw"
grep -q "owned" "$TMP/d/out" && fail "mallory's info file was believed after she deleted it"

# topo names the holders the kernel reports; mallory's own info file (rewritten) shows escaped.
as_m $PY -c '
import sys
open(sys.argv[1], "w").write("pid=%s\njob=\x1b[2Jpwn\nuser=root\n" % sys.argv[2])' \
    "$DDPLAUNCH_LOCK_DIR/gpu-$sq.$(id -u "$M").info" "$squatter"
as_m sh -c "echo 'pid=$(cat "$TMP/a/pid")
job=forged' >'$DDPLAUNCH_LOCK_DIR/gpu-$sq.0.info'"
"$DDP" topo --topology "$TOPO" >"$TMP/topo.out" 2>&1
cat "$TMP/topo.out"
grep -q $'\x1b' "$TMP/topo.out" && fail "topo printed an escape sequence raw"
expect_grep "job '\?\[2Jpwn' \(pid $squatter, user $M" "$TMP/topo.out"
grep -q forged "$TMP/topo.out" && fail "an info file mallory wrote in root's name was believed"

# Everything ends with the jobs and the squatter: the GPUs are free again.
for j in a b c; do touch "$TMP/$j/stop"; wait "$(cat "$TMP/$j/pid")"; done
kill $squatter; wait $sqjob 2>/dev/null
expect_eq "gpu locks left" "$(klock_count gpu-)" 0
expect_eq "port locks left" "$(klock_count port-)" 0
echo ok
