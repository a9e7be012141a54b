#!/usr/bin/env bash
# `ddplaunch ps` (issue 18): two concurrent jobs listed with their job name, user, pid, port, attempt, world size
# and ranks alive, also when another user asks (the files are the jobs' own, the liveness the kernel's); a
# forged file and a SIGKILLed job's leftover are not listed; a job that ended is gone.
. "$DDP_SRCDIR/tests/integration/lib.sh"
"$DDP" --no-python --nproc-per-node 2 --set job.name=alpha --log-dir "$TMP/logs" "$HELPERS/hang" >/dev/null 2>&1 &
a=$!
"$DDP" --no-python --nproc-per-node 3 --set job.name=beta "$HELPERS/hang" >/dev/null 2>&1 &
b=$!
trap 'kill -KILL $a $b 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do
    [ "$("$DDP" ps --json | jq '[.[] | select(.ranks_alive == .nproc)] | length')" = 2 ] && break
    sleep 0.1
done
"$DDP" ps >"$TMP/ps"
cat "$TMP/ps"
expect_grep "^JOB +USER +PID +PORT +ATTEMPT +WORLD +ALIVE +AGE +GPUS +LOG_DIR$" "$TMP/ps"
expect_grep "^alpha +$(id -un) +$a +[0-9]+ +0 +2 +2/2 +0m0[0-9]s +- +$TMP/logs/" "$TMP/ps"
expect_grep "^beta +$(id -un) +$b +[0-9]+ +0 +3 +3/3 " "$TMP/ps"
"$DDP" ps --json >"$TMP/ps.json"
expect_eq "jobs" "$(jq -r 'sort_by(.job) | map(.job + ":" + (.pid|tostring) + ":" + (.world_size|tostring)) | join(" ")' \
    "$TMP/ps.json")" "alpha:$a:2 beta:$b:3"
ports=$(jq -r '[.[].master_port] | unique | length' "$TMP/ps.json")
expect_eq "distinct ports" "$ports" 2

# A forged entry (no live job holds its lock) is not believed.
LD=${DDPLAUNCH_LOCK_DIR:?}
echo '{"v":1,"job":"forged","nproc":1}' >"$LD/job-$$.json"
expect_eq "forged" "$("$DDP" ps --json | jq '[.[] | select(.job == "forged")] | length')" 0
rm -f "$LD/job-$$.json"

# Another user sees the same two jobs.
if [ "$(id -u)" = 0 ] && command -v runuser >/dev/null && id nobody >/dev/null 2>&1; then
    chmod o+rx "$TMP" 2>/dev/null
    # A copy nobody can run: the checkout may lie under a 0700 directory (CI's copy, /root).
    mkdir -m 755 "$TMP/pub" && cp "$DDP" "$TMP/pub/ddplaunch" && chmod 755 "$TMP/pub/ddplaunch"
    runuser -u nobody -- "$TMP/pub/ddplaunch" ps --json >"$TMP/other.json" 2>"$TMP/other.err" || { cat "$TMP/other.err"; fail "ps as nobody"; }
    expect_eq "as nobody" "$(jq -r 'sort_by(.job) | map(.job + ":" + .user) | join(" ")' "$TMP/other.json")" \
        "alpha:$(id -un) beta:$(id -un)"
else
    echo "not root: the other-user check is skipped"
fi

# A SIGKILLed launcher leaves its file; the kernel dropped its lock, so it is not listed. An ended job is gone.
kill -KILL "$a"
kill -INT "$b"
wait "$a" "$b" 2>/dev/null
[ -e "$LD/job-$a.json" ] || echo "(the killed job left no file)"
expect_eq "after the jobs" "$("$DDP" ps --json | jq length)" 0
# issue 43 item 12: no jobs is said, not a bare header
"$DDP" ps >"$TMP/ps0" || fail "ps with no jobs: exit $?"
expect_eq "ps with no jobs" "$(cat "$TMP/ps0")" "no ddplaunch jobs running on this host (none registered in $LD)"
[ -e "$LD/job-$b.json" ] && fail "the job that ended left its ps file"
echo ok
