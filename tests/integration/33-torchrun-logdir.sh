#!/usr/bin/env bash
# --log-dir as torchrun lays it out (issue 16 item 4; issue 15, files): the same command line twice into one
# log directory under Debian's torchrun and under ddplaunch leaves the same files (LOG_DIR/<run_id>_XXXXXXXX/
# attempt_N/RANK/{stdout,stderr}.log, nothing overwritten) with the same bytes; ddplaunch says where they are.
# Then the attacks: a directory other users may write with a symlink planted by someone else, the old
# attempt_0/0 link, and a link planted inside the run directory before a restart: nothing is written through any.
. "$DDP_SRCDIR/tests/integration/lib.sh"

cat >"$TMP/w.py" <<'EOS'
import os
r = os.environ["RANK"]
os.write(1, ("out %s\n" % r).encode())
os.write(2, ("err %s\n" % r).encode())
os.write(1, b"no newline at the end")
EOS
layout() { # the files under $1, run directory shown as RUN (after checking its name); ddplaunch's own run
    # records (events.jsonl, summary.json, attempt_N/RANK/timed.log: issue 18) are listed apart, in records()
    (cd "$1" && find . -type f ! -name events.jsonl ! -name summary.json ! -name timed.log ! -name 'stacks.[0-9]*' | sort | while read -r f; do
        run=${f#./}; run=${run%%/*}
        [[ $run =~ ^myjob_[a-z0-9_]{8}$ ]] || echo "BAD RUN DIR $run"
        echo "RUN/${f#./$run/} $(md5sum <"$f" | cut -c1-8)"
    done | sort | uniq -c)
}
# --master_port 0: torchrun's store binds a port the kernel picks when it binds (w.py needs no MASTER_PORT).
if have_torch; then
    for i in 1 2; do
        env -u OMP_NUM_THREADS $PY "$DDP_SRCDIR/bench/torchrun.py" --nproc_per_node 2 --monitor_interval 0.1 \
            --master_port 0 \
            --rdzv_id myjob --redirects 3 --log_dir "$TMP/tr" "$TMP/w.py" >"$TMP/tr.out" 2>"$TMP/tr.err" ||
            { cat "$TMP/tr.err"; fail "torchrun failed"; }
    done
fi
for i in 1 2; do
    "$DDP" --nproc-per-node 2 --rdzv-id myjob --redirects 3 --log-dir "$TMP/dd" "$TMP/w.py" >"$TMP/dd.out" \
        2>"$TMP/dd.err" || { cat "$TMP/dd.err"; fail "ddplaunch failed"; }
    expect_grep "^ddplaunch: logs in $TMP/dd/myjob_[a-z0-9_]{8}$" "$TMP/dd.err"
    [ -d "$(sed -n 's/^ddplaunch: logs in //p' "$TMP/dd.err")" ] || fail "the printed log directory does not exist"
done
[ -s "$TMP/dd.out" ] && { cat "$TMP/dd.out"; fail "--redirects 3 printed worker output"; }
layout "$TMP/dd" >"$TMP/dd.layout"
expect_eq "ddplaunch's log files (2 runs x 2 ranks x 2 streams)" "$(awk '{s += $1} END {print s}' "$TMP/dd.layout")" 8
expect_eq "ddplaunch's run records (2 runs x (events, summary, 2 timed logs, 2 stacks files))" \
    "$(cd "$TMP/dd" && find . -name events.jsonl -o -name summary.json -o -name timed.log -o -name 'stacks.[0-9]*' | sed 's#^\./[^/]*/##' |
        sort | uniq -c | awk '{print $1, $2}' | tr '\n' ' ')" \
    "2 attempt_0/0/timed.log 2 attempt_0/1/timed.log 2 attempt_0/stacks.0 2 attempt_0/stacks.1 2 events.jsonl 2 summary.json "
expect_eq "rank 0 stdout.log" "$(cat "$TMP"/dd/myjob_*/attempt_0/0/stdout.log | head -c 200 | tr '\n' '|')" \
    "out 0|no newline at the endout 0|no newline at the end"
if have_torch; then
    layout "$TMP/tr" >"$TMP/tr.layout"
    diff "$TMP/tr.layout" "$TMP/dd.layout" || fail "the log directories differ (torchrun <, ddplaunch >)"
    # Megatron-LM's CI glob
    expect_eq "glob logs/*/attempt_0/*/std*.log" "$(ls "$TMP"/dd/*/attempt_0/*/std*.log | wc -l)" \
        "$(ls "$TMP"/tr/*/attempt_0/*/std*.log | wc -l)"
fi

# A directory everyone may write (not sticky) where someone else planted logs -> victim: refused before start.
mkdir -p "$TMP/shared" "$TMP/victim"
chmod 0777 "$TMP/shared"
echo precious >"$TMP/victim/stdout.log"
ln -s "$TMP/victim" "$TMP/shared/logs"
[ "$(id -u)" = 0 ] && chown -h 4242:4242 "$TMP/shared/logs"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/shared/logs" touch "$TMP/started" >"$TMP/out" 2>"$TMP/err"
expect_eq "status with a planted symlink" "$?" 2
expect_grep "log_dir $TMP/shared/logs: 'shared' has mode 0777" "$TMP/err"
[ -e "$TMP/started" ] && fail "a worker started"
# Sticky (as /tmp), the directory is fine, but a symlink there that is not root's or ours is not followed.
if [ "$(id -u)" = 0 ]; then
    chmod 1777 "$TMP/shared"
    "$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/shared/logs" touch "$TMP/started" >"$TMP/out" 2>"$TMP/err"
    expect_eq "status with a planted symlink in a sticky directory" "$?" 2
    expect_grep "log_dir $TMP/shared/logs: 'logs' is a symlink .*not followed" "$TMP/err"
    [ -e "$TMP/started" ] && fail "a worker started"
fi
expect_eq "victim directory" "$(ls "$TMP/victim" | tr '\n' ' ')" "stdout.log "
expect_eq "victim file" "$(cat "$TMP/victim/stdout.log")" "precious"

# The old attack: LOG_DIR/attempt_0/0 -> victim. The run level makes it harmless.
mkdir -p "$TMP/old/attempt_0"
ln -s "$TMP/victim" "$TMP/old/attempt_0/0"
"$DDP" --no-python --nproc-per-node 1 --log-dir "$TMP/old" echo hi >"$TMP/out" 2>"$TMP/err"
expect_eq "status" "$?" 0
expect_eq "victim file" "$(cat "$TMP/victim/stdout.log")" "precious"
expect_eq "victim directory" "$(ls "$TMP/victim" | tr '\n' ' ')" "stdout.log "

# A link planted inside the run directory before a restart (attempt_1 -> victim): attempt 1 is not started,
# nothing is written there, the launcher fails (1) naming the directory.
cat >"$TMP/plant.sh" <<'EOS'
#!/bin/sh
run=$(dirname "$(dirname "$(dirname "$TORCHELASTIC_ERROR_FILE")")")
ln -s "$1" "$run/attempt_1"
exit 3
EOS
chmod +x "$TMP/plant.sh"
"$DDP" --no-python --nproc-per-node 1 --max-restarts 1 --log-dir "$TMP/l3" "$TMP/plant.sh" "$TMP/victim" \
    >"$TMP/out" 2>"$TMP/err"
st=$?
[ "$st" = 0 ] && fail "a job whose attempt_1 was planted succeeded"
expect_grep "attempt_1: File exists \(this job did not make it" "$TMP/err"
expect_eq "victim directory" "$(ls "$TMP/victim" | tr '\n' ' ')" "stdout.log "
echo ok
