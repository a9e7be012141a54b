#!/usr/bin/env bash
# Containment (issue 24, item 1): directories another local user can change. Mallory pre-creates the log
# directory (mode 0777, hers, as a /tmp/logs would be): root's job refuses it (exit 2, nothing started), as it
# refuses a root-owned 0777 one; a sticky root directory (as /tmp) is used, and there Mallory cannot rename
# root's run directory to plant a symlink or a FIFO in its place. No root-owned file changes. A worker that
# leaves a FIFO as its error file, or a run whose timed.log is /dev/zero, blocks neither the launcher nor
# `ddplaunch report`. An XDG_RUNTIME_DIR of Mallory's (kept by a plain `su`) holds nothing of root's.
. "$DDP_SRCDIR/tests/integration/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user (useradd)"
command -v runuser >/dev/null || fail "runuser not installed"
M=ddptest-mallory
id -u "$M" >/dev/null 2>&1 || useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$M" || fail "useradd failed"
as_m() { runuser -u "$M" -- "$@"; }
chmod 711 "$TMP"
mkdir -m 1777 "$TMP/pub" # like /tmp
echo secret >"$TMP/victim"
chmod 600 "$TMP/victim"
victim_sum=$(sha256sum <"$TMP/victim")

# The worker: says where its error file goes, waits for DIR/go, then writes it as torch's @record does.
cat >"$TMP/w.sh" <<'EOS'
#!/bin/sh
echo "$TORCHELASTIC_ERROR_FILE" >"$1/errfile"
while [ ! -e "$1/go" ]; do sleep 0.05; done
printf '{"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "tb", "timestamp": "1"}}}' \
    >"$TORCHELASTIC_ERROR_FILE"
exit 1
EOS
chmod 755 "$TMP/w.sh"

# 1. Mallory's 0777 log directory: refused before anything starts, with one line naming it and its owner.
as_m mkdir -m 777 "$TMP/pub/logs" || fail "mallory cannot create her log directory"
mkdir "$TMP/a"
touch "$TMP/a/go"
timeout 60 "$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/pub/logs" "$TMP/w.sh" "$TMP/a" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with mallory's log directory" "$?" 2
cat "$TMP/err"
expect_grep "log_dir $TMP/pub/logs: 'logs' belongs to uid $(id -u "$M")" "$TMP/err"
[ ! -e "$TMP/a/errfile" ] || fail "a worker started with a log directory mallory can change"
expect_eq "files of root in mallory's directory" "$(find "$TMP/pub/logs" -user root | grep -c .)" 0

# 2. A root-owned directory writable by all without the sticky bit: refused too (anyone may rename in it).
mkdir -m 777 "$TMP/open"
chmod 777 "$TMP/open"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/open/x" /bin/true >"$TMP/out" 2>"$TMP/err"
expect_eq "status with a 0777 ancestor" "$?" 2
expect_grep "'open' has mode 0777" "$TMP/err"
# ... also when reached through a relative path (the working directory's ancestors count).
(cd "$TMP/open" && "$DDP" --no-python --nproc-per-node 1 --log-dir logs /bin/true) >"$TMP/out" 2>"$TMP/err"
expect_eq "status with a relative log_dir under a 0777 directory" "$?" 2

# 3. A sticky root directory (as /tmp) is fine; Mallory cannot move root's run directory away there, and the
# worker's error file lands where the launcher made it.
mkdir "$TMP/b"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/pub" "$TMP/w.sh" "$TMP/b" >"$TMP/out" 2>"$TMP/err" &
job=$!
for _ in $(seq 200); do [ -s "$TMP/b/errfile" ] && break; sleep 0.05; done
ef=$(cat "$TMP/b/errfile")
run=${ef%/attempt_0/0/error.json}
[ -d "$run" ] || fail "run directory $run not found (error file $ef)"
as_m mv "$run" "$TMP/pub/stolen" 2>/dev/null && fail "mallory renamed root's run directory in a sticky directory"
as_m ln -s "$TMP/victim" "$TMP/pub/$(basename "$run").x" 2>/dev/null # harmless: nothing uses that name
touch "$TMP/b/go"
wait $job
expect_eq "status of the failing worker" "$?" 1
expect_grep 'RuntimeError: boom' "$run/attempt_0/0/error.json"
expect_eq "victim file unchanged" "$(sha256sum <"$TMP/victim")" "$victim_sum"

# 4. A FIFO where the error file goes: the launcher neither blocks nor follows it, and SIGTERM is not needed.
cat >"$TMP/fifo.sh" <<'EOS'
#!/bin/sh
rm -f "$TORCHELASTIC_ERROR_FILE"
mkfifo "$TORCHELASTIC_ERROR_FILE"
exit 3
EOS
chmod 755 "$TMP/fifo.sh"
mkdir -m 700 "$TMP/logs"
start=$(date +%s)
timeout 30 "$DDP" --no-python --nproc-per-node 2 --log-dir "$TMP/logs" "$TMP/fifo.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
expect_eq "status with a FIFO as error file (124 = the launcher blocked)" "$rc" 3
[ $(($(date +%s) - start)) -lt 15 ] || fail "the launcher took $(($(date +%s) - start)) s"
fifo_run=$(ls -d "$TMP"/logs/*/ | head -1)
[ -p "${fifo_run}attempt_0/1/error.json" ] || [ -p "${fifo_run}attempt_0/0/error.json" ] ||
    fail "no worker left a FIFO (test precondition)"

# 5. `ddplaunch report` on a run whose timed.log is /dev/zero (a symlink, and a device node): it ends.
for r in 0 1; do ln -sf /dev/zero "${fifo_run}attempt_0/$r/timed.log"; done
timeout 30 "$DDP" report "$fifo_run" >"$TMP/rep" 2>&1
rc=$?
[ "$rc" != 124 ] || fail "report spun on a timed.log that is /dev/zero (symlink)"
for r in 0 1; do rm -f "${fifo_run}attempt_0/$r/timed.log"; mknod "${fifo_run}attempt_0/$r/timed.log" c 1 5; done
timeout 30 "$DDP" report "$fifo_run" >"$TMP/rep" 2>&1
rc=$?
[ "$rc" != 124 ] || fail "report spun on a timed.log that is /dev/zero (device node)"
expect_grep 'exit-3' "$TMP/rep"

# 6. XDG_RUNTIME_DIR of Mallory's (a plain `su` keeps it): root's run directory goes elsewhere.
as_m mkdir -m 700 "$TMP/pub/xdg-m"
XDG_RUNTIME_DIR=$TMP/pub/xdg-m "$DDP" --no-python --nproc-per-node 1 --set timeout.stall=30s /bin/sh -c \
    'echo "$DDPLAUNCH_HEARTBEAT_FILE" >"$0"' "$TMP/hb" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with mallory's XDG_RUNTIME_DIR" "$?" 0
hb=$(cat "$TMP/hb")
[ -n "$hb" ] || fail "no heartbeat file (hang detection off?)"
case $hb in "$TMP/pub/xdg-m"/*) fail "root's heartbeat file $hb is in mallory's directory" ;; esac
expect_eq "files of root in mallory's XDG_RUNTIME_DIR" "$(find "$TMP/pub/xdg-m" -user root | grep -c .)" 0
expect_eq "victim file unchanged" "$(sha256sum <"$TMP/victim")" "$victim_sum"
echo ok
