#!/usr/bin/env bash
# Containment (issue 15): every descendant of every worker ends with its attempt, however the attempt ends
# (success, failure, timeout, downsize, SIGTERM/SIGINT to the launcher, SIGKILL of the launcher), including
# processes that called setsid, double-forked into a new session, or ignore SIGTERM. Survivors counted with ps.
. "$DDP_SRCDIR/tests/integration/lib.sh"

W=$DDP_SRCDIR/tests/integration/escaper.sh
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' '); [ -n "$st" ] && [ "$st" != Z ]; }

# survivors DIR WAIT_S: pids from DIR/esc.* still alive after up to WAIT_S seconds; prints them with ps.
survivors() {
    local d=$1 n p f i
    for ((i = 0; ; i++)); do
        n=0
        for f in "$d"/esc.*; do [ -f "$f" ] && alive "$(cat "$f")" && n=$((n + 1)); done
        [ "$n" = 0 ] || [ "$i" -ge $(($2 * 10)) ] && break
        sleep 0.1
    done
    for f in "$d"/esc.*; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        alive "$p" && { ps -o pid=,ppid=,pgid=,sid=,stat=,args= -p "$p" >&2; kill -KILL "$p"; }
    done
    echo "$n"
}

# wait_ready DIR COUNT: COUNT ranks wrote their ready file
wait_ready() {
    local i
    for ((i = 0; i < 600; i++)); do
        [ "$(ls "$1" | grep -c '^ready\.')" -ge "$2" ] && return 0
        sleep 0.05
    done
    fail "$1: fewer than $2 ranks got ready"
}

# expect_escapees DIR N: the workers really left N processes (so that 0 survivors means something)
expect_escapees() { expect_eq "escapees started in $1" "$(ls "$1" | grep -c '^esc\..*[a-z]$')" "$2"; }

common=(--no-python --shutdown-timeout 1s)

# 1. success: exit 0 leaves nothing behind, and the status stays 0.
mkdir "$TMP/ok"
"$DDP" "${common[@]}" --nproc-per-node 2 "$W" "$TMP/ok" ok >"$TMP/out" 2>"$TMP/err"
expect_eq "status ok" "$?" 0
expect_escapees "$TMP/ok" 6
expect_eq "survivors after success" "$(survivors "$TMP/ok" 0)" 0

# 2. failure: rank 1 exits 3; every other rank and every escapee ends.
mkdir "$TMP/fail"
"$DDP" "${common[@]}" --nproc-per-node 3 "$W" "$TMP/fail" fail >"$TMP/out" 2>"$TMP/err"
expect_eq "status fail" "$?" 3
expect_escapees "$TMP/fail" 9
expect_eq "survivors after failure" "$(survivors "$TMP/fail" 0)" 0

# 3. timeout (wall, on_timeout = fail).
mkdir "$TMP/wall"
"$DDP" "${common[@]}" --nproc-per-node 2 --set timeout.wall=3s --set restart.on_timeout=fail "$W" "$TMP/wall" hang \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status wall timeout" "$?" 124
expect_escapees "$TMP/wall" 6
expect_eq "survivors after timeout" "$(survivors "$TMP/wall" 0)" 0

# 4. downsize: attempt 0's escapees end before attempt 1 (world 1) finishes.
mkdir "$TMP/down"
"$DDP" "${common[@]}" --nproc-per-node 2 --set timeout.wall=3s --set restart.on_timeout=downsize \
    "$W" "$TMP/down" downsize >"$TMP/out" 2>"$TMP/err"
expect_eq "status downsize" "$?" 0
expect_grep 'downsizing 2 -> 1' "$TMP/err"
expect_escapees "$TMP/down" 9
expect_eq "survivors after downsize" "$(survivors "$TMP/down" 0)" 0

# 5./6. SIGTERM and SIGINT to the launcher.
for sig in TERM INT; do
    mkdir "$TMP/$sig"
    "$DDP" "${common[@]}" --nproc-per-node 2 "$W" "$TMP/$sig" hang >"$TMP/out" 2>"$TMP/err" &
    L=$!
    wait_ready "$TMP/$sig" 2
    kill -$sig $L
    wait $L
    rc=$?
    [ "$sig" = TERM ] && expect_eq "status SIGTERM" "$rc" 143
    [ "$sig" = INT ] && expect_eq "status SIGINT" "$rc" 130
    expect_escapees "$TMP/$sig" 6
    expect_eq "survivors after SIG$sig" "$(survivors "$TMP/$sig" 0)" 0
done

# 7. SIGKILL of the launcher: the shims end the trees (a moment later, not when the launcher exits).
mkdir "$TMP/kill"
"$DDP" "${common[@]}" --nproc-per-node 2 "$W" "$TMP/kill" hang >"$TMP/out" 2>"$TMP/err" &
L=$!
wait_ready "$TMP/kill" 2
kill -KILL $L
wait $L 2>/dev/null
expect_escapees "$TMP/kill" 6
expect_eq "survivors after SIGKILL of the launcher" "$(survivors "$TMP/kill" 5)" 0

# 8. Python's subprocess.Popen(start_new_session=True) in a worker that exits 0.
mkdir "$TMP/py"
cat >"$TMP/py.py" <<'EOS'
import os, subprocess, sys
p = subprocess.Popen(["sleep", "3604"], start_new_session=True)
open(os.path.join(sys.argv[1], "esc.%s.py" % os.environ["RANK"]), "w").write(str(p.pid))
EOS
"$DDP" --shutdown-timeout 1s --nproc-per-node 2 "$TMP/py.py" "$TMP/py" >"$TMP/out" 2>"$TMP/err"
expect_eq "status python" "$?" 0
expect_escapees "$TMP/py" 2
expect_eq "survivors after python start_new_session" "$(survivors "$TMP/py" 0)" 0
# 8b. A failure is acted on at once although the failed rank left a TERM-ignoring process (which its shim
# ends only after shutdown_timeout): rank 1 gets SIGTERM well before the 6 s grace.
mkdir "$TMP/fast"
cat >"$TMP/fast.sh" <<'EOS'
#!/bin/bash
d=$1
if [ "$RANK" = 0 ]; then
    (trap '' TERM; exec sh -c 'echo $$ >"$0"; exec sleep 3605' "$d/esc.0.noterm") </dev/null >/dev/null 2>&1 &
    while [ ! -s "$d/esc.0.noterm" ] || [ ! -e "$d/ready.1" ]; do sleep 0.02; done
    echo "${EPOCHREALTIME/[.,]/}" >"$d/failed_at"
    exit 3
fi
trap 'echo "${EPOCHREALTIME/[.,]/}" >"$d/term_at"; exit 0' TERM
: >"$d/ready.1"
while :; do sleep 0.05; done
EOS
chmod +x "$TMP/fast.sh"
"$DDP" --no-python --nproc-per-node 2 --shutdown-timeout 6s "$TMP/fast.sh" "$TMP/fast" >"$TMP/out" 2>"$TMP/err"
expect_eq "status failure with a leftover" "$?" 3
[ -s "$TMP/fast/term_at" ] || fail "rank 1 never got SIGTERM"
lag=$((($(cat "$TMP/fast/term_at") - $(cat "$TMP/fast/failed_at")) / 1000))
echo "rank 1 got SIGTERM $lag ms after rank 0 failed"
[ "$lag" -lt 3000 ] || fail "rank 1 was stopped $lag ms after rank 0 failed (waited for the leftover's grace)"
expect_eq "survivors after a failure with a leftover" "$(survivors "$TMP/fast" 0)" 0

# 9. Where this process may make cgroup v2 children (root, a delegated slice): each attempt runs in its own
# cgroup, which is gone after the attempt; with -v the attempt's CPU time is said. The worker starts in it
# (clone3 into the cgroup, Linux 5.7+): its shim stays in the launcher's cgroup, so no process is migrated (a
# migration waits for the whole system's forks and exits, and the first of a burst for an RCU grace period).
mkdir "$TMP/cg"
"$DDP" -v --no-python --nproc-per-node 2 /bin/sh -c 'grep "^0::" /proc/self/cgroup >"$0/cg.$RANK"
    grep "^0::" /proc/$PPID/cgroup >"$0/shim.$RANK"' "$TMP/cg" >"$TMP/out" 2>"$TMP/err"
expect_eq "status cgroup job" "$?" 0
cg=$(sed 's/^0:://' "$TMP/cg/cg.0")
case $cg in
*/ddplaunch-*-attempt-0)
    expect_eq "both ranks in one cgroup" "$(cat "$TMP/cg/cg.1")" "0::$cg"
    expect_eq "rank 0's shim where the launcher is" "$(cat "$TMP/cg/shim.0")" "$(grep "^0::" /proc/self/cgroup)"
    expect_grep 'attempt 0: CPU time [0-9.]+ s' "$TMP/err"
    mnt=$(awk '$9 == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
    [ ! -e "$mnt$cg" ] || fail "the attempt's cgroup $mnt$cg is left behind"
    ;;
*) echo "no cgroup v2 of our own here (worker in '$cg'): the per-attempt cgroup is not tried" ;;
esac
echo ok
