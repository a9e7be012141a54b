#!/usr/bin/env bash
# What a worker process sees (issue 3): its own process group and session (the exec shim leads it), the
# torchrun variables, stdin inherited, the working directory; and the launcher keeps no fd open in it
# other than 0-2. Issue 39: the exec shim above it is named ddplaunch (ps, top, pgrep, the OOM killer), not
# "11" after the /proc/self/fd/11 it was started from; issue 40: forked, its command line still says what it is.
. "$DDP_SRCDIR/tests/integration/lib.sh"

mkdir -p "$TMP/d"
"$DDP" --no-python --nproc-per-node 3 "$HELPERS/dumpenv" "$TMP/d" >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
pgids=""
for r in 0 1 2; do
    st="$TMP/d/status.$r"
    [ -s "$st" ] || fail "rank $r wrote no status"
    pid=$(awk '/^Pid:/{print $2}' "$st")
    ppid=$(awk '/^PPid:/{print $2}' "$st")
    pgid=$(awk '/^Pgid:/{print $2}' "$st")
    sid=$(awk '/^Sid:/{print $2}' "$st")
    # The worker's parent is the shim, which leads the worker's session; the worker leads a group of its own
    # (so that `kill -9 0` in it cannot end the shim: issue 24).
    expect_eq "rank $r pgid = itself" "$pgid" "$pid"
    expect_eq "rank $r session = its shim" "$sid" "$ppid"
    [ "$pgid" != "$$" ] || fail "rank $r is in the test's process group"
    pgids="$pgids $pgid"
    env="$TMP/d/env.$r"
    expect_grep "^RANK=$r$" "$env"
    expect_grep "^LOCAL_RANK=$r$" "$env"
    expect_grep '^WORLD_SIZE=3$' "$env"
    expect_grep '^LOCAL_WORLD_SIZE=3$' "$env"
    expect_grep '^TORCHELASTIC_RESTART_COUNT=0$' "$env"
    expect_grep '^MASTER_ADDR=' "$env"
    expect_grep '^MASTER_PORT=[0-9]+$' "$env"
    expect_grep '^DDPLAUNCH_HEARTBEAT_FILE=' "$env"
done
expect_eq "distinct groups" "$(echo $pgids | tr ' ' '\n' | sort -u | wc -l)" 3

# Open fds of a worker: the same as the program run directly (nothing of the launcher's leaks: the report
# pipe is close-on-exec; fds the test harness itself leaks are inherited either way).
cat >"$TMP/fds.sh" <<'EOS'
#!/bin/sh
ls /proc/self/fd | sort -n | tr '\n' ' '
EOS
chmod +x "$TMP/fds.sh"
"$DDP" --no-python --nproc-per-node 1 "$TMP/fds.sh" >"$TMP/out" 2>"$TMP/err" </dev/null
expect_eq "status" "$?" 0
expect_eq "worker fds" "$(cat "$TMP/out")" "$("$TMP/fds.sh" </dev/null)" # one worker: raw console

# stdin is the launcher's.
echo "from-stdin" | "$DDP" --no-python --nproc-per-node 1 head -n 1 >"$TMP/out" 2>"$TMP/err"
expect_eq "stdin passed" "$(cat "$TMP/out")" "from-stdin"

# the exec shim (the worker's parent) is named ddplaunch
"$DDP" --no-python --nproc-per-node 1 /bin/sh -c 'cat /proc/$PPID/comm' >"$TMP/out" 2>"$TMP/err"
expect_eq "the shim's name" "$(cat "$TMP/out")" "ddplaunch"
# and ps shows it as the shim of its rank running the program, though it is forked from the launcher, not
# executed: the command line the launcher had is rewritten (more of it than fits is cut)
"$DDP" --no-python --nproc-per-node 2 --console raw /bin/sh -c 'ps -o args= -p $PPID' 2>"$TMP/err" | sort >"$TMP/out"
expect_eq "the shims in ps" "$(cat "$TMP/out")" "$DDP --exec-shim --rank=0 -- /bin/sh -c ps -o args= -p \$PPID
$DDP --exec-shim --rank=1 -- /bin/sh -c ps -o args= -p \$PPID"
echo ok
