#!/usr/bin/env bash
# Inputs from issue 15 ("signals and inputs"): each is answered with one clear line and exit 2 before anything
# starts, or simply works. Plus SIGTERM while a timeout stops the attempt (143, "stopped by SIGTERM"), and fd
# exhaustion (the error said once).
. "$DDP_SRCDIR/tests/integration/lib.sh"

# refused WHAT PATTERN ARGS...: exit 2, the first stderr line matches PATTERN, at most a "Try" line besides,
# and no worker ran (each command would touch $TMP/started)
refused() {
    local what=$1 pat=$2
    shift 2
    rm -f "$TMP/started"
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    expect_eq "$what: status" "$rc" 2
    expect_grep "$pat" "$TMP/err"
    expect_eq "$what: lines on stderr" "$(grep -vc "^Try 'ddplaunch --help'" "$TMP/err")" 1
    [ ! -e "$TMP/started" ] || fail "$what: a worker was started"
}
T=(--no-python /usr/bin/touch "$TMP/started")

refused "100000 workers" "expected at most 65536 workers per node, got '100000'" "$DDP" --nproc-per-node 100000 "${T[@]}"
refused "0.0001s" "duration '0.0001s' is shorter than 1ms" "$DDP" --set timeout.stall=0.0001s "${T[@]}"
refused "0x10s" "expected a duration like 30s, 5m, 250ms or 1h, got '0x10s'" "$DDP" --set timeout.wall=0x10s "${T[@]}"
refused "1e3" "got '1e3'" "$DDP" --shutdown-timeout 1e3 "${T[@]}"
refused "unknown DDPLAUNCH_ variable" "unknown variable DDPLAUNCH_RESTART_MAX_RESTART \(did you mean DDPLAUNCH_RESTART_MAX_RESTARTS\?\)" \
    env DDPLAUNCH_RESTART_MAX_RESTART=3 "$DDP" "${T[@]}"
refused "empty program" "job.program is empty" "$DDP" --no-python ""
printf '[job]\nprogram = /usr/bin/touch\nargs = %s\nmaster_addr =\n' "$TMP/started" >"$TMP/ma.ini"
refused "empty master_addr" "job.master_addr is empty" "$DDP" "$TMP/ma.ini"
refused "log_dir is a file" "log_dir /etc/passwd: 'passwd' is not a directory" "$DDP" --log-dir /etc/passwd "${T[@]}"

# Known names still work: DDPLAUNCH_ENV_NAME sets an [env] entry, worker variables are accepted.
DDPLAUNCH_ENV_FOO=bar DDPLAUNCH_ATTEMPT=1 "$DDP" --no-python /bin/sh -c 'echo "FOO=$FOO"' >"$TMP/out" 2>"$TMP/err"
expect_eq "DDPLAUNCH_ENV_FOO: status" "$?" 0
expect_grep '^FOO=bar$' "$TMP/out"

# A 5000-character [env] value reaches the worker whole.
long=$(head -c 5000 /dev/zero | tr '\0' v)
printf '[job]\nprogram = /bin/sh\nargs = -c "echo ${#LONGV} ${LONGV%%%%v*}"\n[env]\nLONGV = %s   ; comment\n' "$long" >"$TMP/long.ini"
"$DDP" "$TMP/long.ini" >"$TMP/out" 2>"$TMP/err"
expect_eq "long [env] value: status" "$?" 0
expect_grep '^5000 ?$' "$TMP/out"

# 16000 [env] keys load in well under the seconds a quadratic parser took.
{ printf '[job]\nprogram = /bin/true\n[env]\n'; seq -f 'K%g = v' 1 16000; } >"$TMP/many.ini"
t0=${EPOCHREALTIME/[.,]/}
"$DDP" plan "$TMP/many.ini" >/dev/null 2>"$TMP/err"
rc=$?
ms=$(((${EPOCHREALTIME/[.,]/} - t0) / 1000))
echo "16000 [env] keys: plan in $ms ms"
expect_eq "16000 [env] keys: status" "$rc" 0
[ "$ms" -lt 4000 ] || fail "16000 [env] keys took $ms ms"

# SIGTERM while a timeout stops the attempt: 143 and "stopped by SIGTERM", not 124 and a failure summary.
"$DDP" --no-python --nproc-per-node 1 --shutdown-timeout 3s --set timeout.wall=1s --set restart.on_timeout=restart \
    --max-restarts 3 "$HELPERS/ignoreterm" >"$TMP/out" 2>"$TMP/err" &
L=$!
for _ in $(seq 100); do grep -q 'ran longer than 1s' "$TMP/err" && break; sleep 0.05; done
kill -TERM $L
wait $L
rc=$?
cat "$TMP/err"
expect_eq "SIGTERM during a timeout stop: status" "$rc" 143
expect_grep '^ddplaunch: (error: )?stopped by SIGTERM$' "$TMP/err"
grep -q 'restarting' "$TMP/err" && fail "restarted after SIGTERM"

# Too few file descriptors for the workers (issue 24 item 6): checked before anything starts, one line, exit 2.
(
    ulimit -n 48
    "$DDP" --no-python --nproc-per-node 24 /bin/true >"$TMP/out" 2>"$TMP/err"
    echo $? >"$TMP/rc"
)
cat "$TMP/err"
expect_eq "fd exhaustion: status" "$(cat "$TMP/rc")" 2
expect_eq "fd exhaustion: 'open files limit' lines" "$(grep -c '^ddplaunch: error: open files limit 48 ' "$TMP/err")" 1
echo ok
