#!/usr/bin/env bash
# Containment (issue 24, item 2): a worker that SIGKILLs its own process group (`kill -9 0`,
# os.killpg(os.getpgrp(), 9)) or its parent (`kill -9 $PPID`) cannot end containment. The exec shim is not in the
# worker's group, and the launcher is a child subreaper: what outlives a killed shim comes back to it and ends.
# Checked as a real non-root user without a delegated cgroup (the shims' and the launcher's subreaping alone):
# every setsid'd, double-forked and TERM-ignoring descendant is gone when the launcher has exited.
. "$DDP_SRCDIR/tests/integration/lib.sh"
W=$DDP_SRCDIR/tests/integration/escaper.sh
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' '); [ -n "$st" ] && [ "$st" != Z ]; }

if [ "$(id -u)" = 0 ]; then
    command -v runuser >/dev/null || fail "runuser not installed: no second user to run the job as"
    V=ddptest-victim
    id -u "$V" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$V" || fail "useradd failed"
    chmod 711 "$TMP"
    mkdir -m 755 "$TMP/v"
    # the victim runs copies: the build directory may be private to root
    cp "$DDP" "$W" "$TMP/v/"
    chmod 755 "$TMP/v/ddplaunch" "$TMP/v/escaper.sh"
    BIN=$TMP/v/ddplaunch W=$TMP/v/escaper.sh
    as_v() { runuser -u "$V" -- env XDG_RUNTIME_DIR= DDPLAUNCH_LOCK_DIR="$TMP/v/locks" "$@"; }
    chmod 1777 "$TMP/v"
else
    BIN=$DDP
    as_v() { "$@"; }
fi
as_v test "$(as_v id -u)" != 0 || fail "the job must run as a non-root user"
# Precondition: no delegated cgroup v2 directory for this user (else the cgroup, not the shim, would contain).
as_v sh -c 'd=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup); [ -w "$d" ]' &&
    echo "note: the job's user can write its cgroup; containment may come from the cgroup too"

for mode in killgroup killpg killparent; do
    d=$TMP/v/$mode
    mkdir -m 777 "$d"
    as_v "$BIN" --no-python --nproc-per-node 2 --shutdown-timeout 1s "$W" "$d" "$mode" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ "$rc" != 0 ] || { cat "$TMP/err"; fail "$mode: status 0 for a job whose workers were killed"; }
    n=$(ls "$d" | grep -c '^esc\.')
    expect_eq "$mode: escapees started" "$n" 6
    left=0
    for f in "$d"/esc.*; do
        p=$(cat "$f")
        if alive "$p"; then
            ps -o pid=,ppid=,pgid=,sid=,stat=,user=,args= -p "$p" >&2
            kill -KILL "$p"
            left=$((left + 1))
        fi
    done
    expect_eq "$mode: survivors when the launcher has exited" "$left" 0
    echo "$mode: status $rc, 6 escapees, 0 survivors"
done
echo ok
