#!/usr/bin/env bash
# etcd trouble is not job trouble (issue 55). Two agents of one worker each meet through a three-member etcd
# cluster on loopback. One member SIGKILLed mid-attempt: nothing happens (no line, the workers run on). A second
# one killed (no quorum): the attempt still runs on; then a worker fails: its agent says in one line that it
# waits for quorum, and once the first member is back the job goes on: attempt 1 runs on both nodes and the job
# exits 0. doctor: one member answers, no quorum. On today's main, --rdzv-backend etcd-v3 is refused (exit 2).
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_etcd.sh"
all=()
trap 'kill -KILL "${all[@]}" 2>/dev/null; etcd_stop_all; rm -rf "$TMP"' EXIT
etcd_cluster
export DDPLAUNCH_JOB_LOST_AFTER=6s
pids=()
for i in 0 1; do
    "$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" --rdzv-id outage \
        --max-restarts 1 --no-python /bin/sh -c "
            if [ \"\$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then
                echo \$\$ >\"$TMP/w.\$RANK\"
                while [ ! -e \"$TMP/fail.\$RANK\" ]; do sleep 0.1; done
                exit 3
            fi
            echo \"attempt \$TORCHELASTIC_RESTART_COUNT rank \$RANK of \$WORLD_SIZE\"" \
        >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
    pids+=($!) all+=($!)
done
for _ in $(seq 300); do [ "$(ls "$TMP" | grep -c '^w\.')" = 2 ] && break; sleep 0.1; done
expect_eq "workers of attempt 0" "$(ls "$TMP" | grep -c '^w\.')" 2
lines() { cat "$TMP"/a*.err | grep -c .; }
before=$(lines)

# One member lost: nothing happens, not even a line.
etcd_kill 0
sleep 4
expect_eq "lines after one etcd member was killed" "$(lines)" "$before"
for r in 0 1; do kill -0 "$(cat "$TMP/w.$r")" || fail "worker $r stopped after one etcd member was killed"; done

# Quorum lost: the attempt runs on; doctor says so.
etcd_kill 1
"$DDP" doctor --nnodes 2 --rdzv-backend etcd-v3 --rdzv-endpoint "$ETCD_EPS" >"$TMP/doctor" 2>&1
expect_grep "^warn  etcd +etcd member 127.0.0.1:[0-9]+: .*connect" "$TMP/doctor"
expect_grep "^ok    etcd +member 127.0.0.1:[0-9]+: etcd 3\.[0-9.]+" "$TMP/doctor"
expect_grep "^fail  etcd +no read of /ddplaunch/ through 3 members: .*; a job would wait for quorum" "$TMP/doctor"
sleep 1
for r in 0 1; do kill -0 "$(cat "$TMP/w.$r")" || fail "worker $r stopped when etcd lost quorum"; done
for i in 0 1; do kill -0 "${pids[$i]}" || fail "agent $i exited when etcd lost quorum"; done

# A worker fails during the outage: one line, then the job waits.
touch "$TMP/fail.1"
for _ in $(seq 200); do grep -q "no quorum" "$TMP"/a*.err && break; sleep 0.1; done
expect_eq "agents saying they wait for quorum" "$(grep -l 'etcd has no quorum .*: waiting up to 600s' "$TMP"/a*.err | wc -l)" 1
expect_eq "lines about quorum" "$(cat "$TMP"/a*.err | grep -c 'no quorum')" 1
kill -0 "$(cat "$TMP/w.0")" || fail "worker 0 stopped before quorum returned"

# Quorum back: the decision is made, attempt 1 runs on both nodes.
etcd_start 0
for i in 0 1; do
    wait "${pids[$i]}" || { cat "$TMP/a$i.err"; fail "agent $i exited $? after quorum returned"; }
done
expect_eq "attempt 1" "$(cat "$TMP"/a*.out | sort | tr '\n' ' ')" "attempt 1 rank 0 of 2 attempt 1 rank 1 of 2 "
cat "$TMP"/a*.err >"$TMP/all.err"
expect_grep "quorum is back" "$TMP/all.err"
echo ok
