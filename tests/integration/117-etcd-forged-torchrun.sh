#!/usr/bin/env bash
# etcd-v3 rendezvous (issue 55): a decision key that another etcd client writes without the job's secret is
# refused, with one line on each agent, and the job goes on as decided; torchrun's line
# "--rdzv-backend etcd --rdzv-endpoint HOST:PORT --rdzv-id X" works as written (one line says it goes to
# etcd-v3). On today's main the etcd line becomes ddplaunch's own c10d server on HOST:PORT and never talks to
# etcd: the job's keys would not appear in etcd.
. "$DDP_SRCDIR/tests/integration/lib.sh"
. "$DDP_SRCDIR/tests/integration/lib_etcd.sh"
all=()
trap 'kill -KILL "${all[@]}" 2>/dev/null; etcd_stop_all; rm -rf "$TMP"' EXIT
etcd_cluster
one=${ETCD_EPS%%,*}
pids=()
for i in 0 1; do
    "$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend etcd --rdzv-endpoint "$one" --rdzv-id forge \
        --max-restarts 0 --no-python /bin/sh -c "
            echo \$\$ >\"$TMP/w.\$RANK\"
            while [ ! -e \"$TMP/done\" ]; do sleep 0.1; done
            echo \"rank \$RANK of \$WORLD_SIZE\"" \
        >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
    pids+=($!) all+=($!)
done
for _ in $(seq 300); do [ "$(ls "$TMP" | grep -c '^w\.')" = 2 ] && break; sleep 0.1; done
expect_eq "workers" "$(ls "$TMP" | grep -c '^w\.')" 2
expect_grep "^ddplaunch: rdzv_backend etcd: torchrun's etcd backend speaks etcd's v2 API; ddplaunch meets in the same cluster through its v3 API \(etcd-v3\)$" "$TMP/a0.err"
expect_eq "the job's decision key in etcd" "$(etcdctl3 get /ddplaunch/forge/decision --keys-only | grep -c .)" 1

# Another client writes "exit 0" over the decision, with a made-up MAC: refused, the workers run on.
etcdctl3 put /ddplaunch/forge/decision "$(printf '%064d' 0) attempt=0 state=exit status=0" >/dev/null ||
    fail "etcdctl put failed"
for _ in $(seq 100); do [ "$(cat "$TMP"/a*.err | grep -c 'not signed')" = 2 ] && break; sleep 0.1; done
sleep 2 # more reads of the job's keys: still one line each
for i in 0 1; do
    expect_eq "agent $i's lines about the forged key" "$(grep -c 'not signed' "$TMP/a$i.err")" 1
    expect_grep "^ddplaunch: warning: etcd: 1 value under /ddplaunch/forge/ not signed with this job's secret \(first: /ddplaunch/forge/decision\): refused$" "$TMP/a$i.err"
done
for r in 0 1; do kill -0 "$(cat "$TMP/w.$r")" || fail "worker $r stopped after a forged decision"; done

# The job ends as its own decision-maker says.
touch "$TMP/done"
for i in 0 1; do wait "${pids[$i]}" || { cat "$TMP/a$i.err"; fail "agent $i exited $?"; }; done
expect_eq "ranks" "$(cat "$TMP"/a*.out | sort | tr '\n' ' ')" "rank 0 of 2 rank 1 of 2 "

# An endpoint list with no member: one line, exit 1 (not an abort while closing what never started).
"$DDP" --nnodes 2 --nproc-per-node 1 --rdzv-backend etcd-v3 --rdzv-endpoint , --no-python /bin/true >"$TMP/c.out" 2>&1
expect_eq "status with no etcd member" "$?" 1
expect_eq "lines with no etcd member" "$(grep -c . "$TMP/c.out")" 1
expect_grep "^ddplaunch: error: rdzv_endpoint ',': expected HOST:PORT\[,HOST:PORT...\] of etcd members$" "$TMP/c.out"
echo ok
