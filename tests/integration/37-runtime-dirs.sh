#!/usr/bin/env bash
# Containment (issue 15): the launch's run directory (heartbeat files, timer FIFO) cannot be squatted by another
# user when XDG_RUNTIME_DIR is unset (su, cron, Slurm): it is a fresh mkdtemp name, not /tmp/ddplaunch-UID, so
# hang detection stays on; a job that needs it and cannot get it exits 2 before starting anything; run
# directories left by a SIGKILLed launcher are swept by the next launch of the same user, live ones never.
. "$DDP_SRCDIR/tests/integration/lib.sh"
me=$(id -u)

# 1. Without XDG_RUNTIME_DIR, with /tmp/ddplaunch-UID of the job's user taken by another user (as root: two
# real users, the victim running the job), hang detection stays on.
run_hang() { env -u XDG_RUNTIME_DIR "$@" "${BIN:-$DDP}" --no-python --nproc-per-node 2 --set timeout.stall=1s \
    --set timeout.heartbeat=file --set restart.on_timeout=fail "${HB:-$HELPERS/heartbeat}" 100 50 1; }
if [ "$me" = 0 ] && command -v runuser >/dev/null; then
    M=ddptest-mallory V=ddptest-victim
    for u in $M $V; do id -u "$u" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$u"; done
    vu=$(id -u $V)
    rm -rf "/tmp/ddplaunch-$vu"
    runuser -u "$M" -- mkdir -m 777 "/tmp/ddplaunch-$vu"
    chmod 711 "$TMP"
    mkdir -m 777 "$TMP/v"
    # the victim runs copies: the build directory may be private to root (CI's checkout is under a 0700 dir)
    cp "$DDP" "$HELPERS/heartbeat" "$TMP/v/"
    chmod 755 "$TMP/v/ddplaunch" "$TMP/v/heartbeat"
    BIN=$TMP/v/ddplaunch HB=$TMP/v/heartbeat
    (cd "$TMP/v" && run_hang runuser -u "$V" --) >"$TMP/out" 2>"$TMP/err"
    rc=$?
    rm -rf "/tmp/ddplaunch-$vu"
else
    echo "not root: the squatted directory is not tried (no second user)"
    run_hang >"$TMP/out" 2>"$TMP/err"
    rc=$?
fi
cat "$TMP/err"
expect_eq "status with hang detection on (no XDG_RUNTIME_DIR)" "$rc" 124
expect_grep 'rank 1 made no progress for 1s \(heartbeat\)' "$TMP/err"

# The heartbeat file lives in a fresh private directory of this user.
env -u XDG_RUNTIME_DIR "$DDP" --no-python --nproc-per-node 1 /bin/sh -c \
    'd=$(dirname "$DDPLAUNCH_HEARTBEAT_FILE"); echo "$d" >"$0"; stat -c "%u %a" "$d" >>"$0"' "$TMP/rd" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
dir=$(sed -n 1p "$TMP/rd")
case $dir in /tmp/ddplaunch-$me-??????) ;; *) fail "run directory $dir is not a fresh /tmp/ddplaunch-$me-XXXXXX" ;; esac
expect_eq "run directory owner and mode" "$(sed -n 2p "$TMP/rd")" "$me 700"
[ ! -e "$dir" ] || fail "run directory $dir left behind after a normal exit"

# 2. A job that needs heartbeat files but cannot have a run directory: one line, exit 2, nothing started.
XDG_RUNTIME_DIR=/nonexistent/ddp "$DDP" --no-python --nproc-per-node 1 --set timeout.stall=1s \
    /usr/bin/touch "$TMP/started" >"$TMP/out" 2>"$TMP/err"
expect_eq "status without a run directory for heartbeat files" "$?" 2
expect_eq "lines on stderr" "$(grep -c . "$TMP/err")" 1
expect_grep 'heartbeat = file' "$TMP/err"
[ ! -e "$TMP/started" ] || fail "a worker was started"
# ...while a job without hang detection runs, with a warning.
XDG_RUNTIME_DIR=/nonexistent/ddp "$DDP" --no-python --nproc-per-node 1 /usr/bin/touch "$TMP/started" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status without a run directory, no hang detection" "$?" 0
expect_grep 'warning: no runtime directory' "$TMP/err"

# 3. SIGKILL of the launcher leaves its run directory; the next launch removes it once it is a minute old,
# but never the run directory of a launch that still runs.
mkdir -p "$TMP/g"
"$DDP" --no-python --nproc-per-node 1 /bin/sh -c 'echo "$DDPLAUNCH_HEARTBEAT_FILE" >"$0/hb.$1"; exec sleep 60' \
    "$TMP/g" a >/dev/null 2>&1 &
A=$!
"$DDP" --no-python --nproc-per-node 1 /bin/sh -c 'echo "$DDPLAUNCH_HEARTBEAT_FILE" >"$0/hb.$1"; exec sleep 60' \
    "$TMP/g" b >/dev/null 2>&1 &
B=$!
for _ in $(seq 100); do [ -s "$TMP/g/hb.a" ] && [ -s "$TMP/g/hb.b" ] && break; sleep 0.05; done
da=$(dirname "$(cat "$TMP/g/hb.a")")
db=$(dirname "$(cat "$TMP/g/hb.b")")
kill -9 $A
wait $A 2>/dev/null
[ -d "$da" ] || fail "expected the SIGKILLed launch's run directory $da to remain"
touch -d '2 minutes ago' "$da" "$db"
"$DDP" --no-python --nproc-per-node 1 /bin/true >/dev/null 2>&1
[ ! -e "$da" ] || fail "stale run directory $da was not swept"
[ -d "$db" ] || fail "the run directory $db of a running launch was swept"
kill $B
wait $B 2>/dev/null
echo ok
