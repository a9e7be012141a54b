#!/usr/bin/env bash
# 24 ddplaunch jobs started at the same instant, each with 2 workers whose rank 0 binds MASTER_PORT as torch's
# TCPStore does (tcpstore_bind.py: rank 1 must reach its own job's rank 0): every job gets a distinct port and
# succeeds, 5 rounds. Then one round of real 2-worker gloo jobs (DDP_GLOO_JOBS of them, default 6; 24 with
# DDP_STRESS_FULL=1). The jobs share the test's private lock directory (lib.sh), which ddplaunch creates as it
# would create the host's /run/lock/ddplaunch.
. "$DDP_SRCDIR/tests/integration/lib.sh"
JOBS=${DDP_STRESS_JOBS:-24}
ROUNDS=${DDP_STRESS_ROUNDS:-5}
LOCKS=$DDPLAUNCH_LOCK_DIR
WORKER=$DDP_SRCDIR/tests/integration/tcpstore_bind.py

# A trivial job first: without a working launcher there is nothing to measure.
"$DDP" --nproc-per-node 1 --no-python /bin/true >"$TMP/smoke" 2>&1 || { cat "$TMP/smoke"; fail "ddplaunch cannot run /bin/true"; }

# run_round DIR N SCRIPT [ARGS...]: start N jobs at one instant (all wait on a shared flock the test holds);
# job i runs SCRIPT DIR/port.i ARGS...
run_round() {
    local dir=$1 n=$2 script=$3
    shift 3
    mkdir -p "$dir"
    exec 9>"$dir/gate"
    flock -x 9
    local pids=()
    for i in $(seq 1 "$n"); do
        (
            exec 9>&-
            # the shared lock is granted to all waiters at once when the test drops its exclusive one
            JOB_TOKEN="job$i" flock -s "$dir/gate" \
                "$DDP" --nproc-per-node 2 --numa-binding none "$script" "$dir/port.$i" "$@" >"$dir/out.$i" 2>&1
            echo $? >"$dir/rc.$i"
        ) &
        pids+=($!)
    done
    sleep 0.5 # let every job reach the gate
    local t0=$(date +%s.%N)
    flock -u 9
    exec 9>&-
    wait "${pids[@]}"
    echo "$(echo "$(date +%s.%N) - $t0" | bc)" >"$dir/elapsed"
}

# check_round DIR N: all exit 0, N distinct ports.
check_round() {
    local dir=$1 n=$2 bad=0
    for i in $(seq 1 "$n"); do
        rc=$(cat "$dir/rc.$i" 2>/dev/null || echo missing)
        if [ "$rc" != 0 ]; then
            bad=$((bad + 1))
            echo "--- job $i exited $rc:"
            tail -n 8 "$dir/out.$i"
        fi
    done
    local ports
    ports=$(cat "$dir"/port.* 2>/dev/null | awk '{print $2}' | sort)
    local nports ndistinct
    nports=$(echo "$ports" | grep -c . || true)
    ndistinct=$(echo "$ports" | sort -u | grep -c . || true)
    [ "$bad" = 0 ] || fail "$(basename "$dir"): $bad of $n jobs failed"
    expect_eq "$(basename "$dir"): jobs that reported a port" "$nports" "$n"
    # A port may come back only to a job whose rank 0 listened after the earlier one had let it go (it holds it
    # HOLD = 1.0 s after listening): on a loaded host the last jobs of a round can start after the first ended.
    local reused
    reused=$(cat "$dir"/port.* | awk '{ print $2, $3 }' | sort -k1,1n -k2,2n |
        awk '$1 == p && $2 - t >= 1.0 { n++ } { p = $1; t = $2 } END { print n + 0 }')
    [ "$reused" = 0 ] || echo "$(basename "$dir"): $reused port(s) taken again after a job let them go"
    expect_eq "$(basename "$dir"): distinct ports" "$ndistinct" "$((n - reused))"
    echo "$(basename "$dir"): $n jobs ok, $ndistinct distinct ports ($(echo "$ports" | head -1)..$(echo "$ports" | tail -1)), $(cat "$dir/elapsed") s"
}

for r in $(seq 1 "$ROUNDS"); do
    run_round "$TMP/round$r" "$JOBS" "$WORKER" 1.0
    check_round "$TMP/round$r" "$JOBS"
done

# No job leaves its reservation behind (a worker that inherited the lock socket would keep it): the test's
# lock namespace holds no port lock once every job ended, and no lock file was written anywhere.
expect_eq "port locks still held after the jobs ended" "$(klock_count port-)" 0
[ ! -e "$LOCKS" ] || expect_eq "files in the lock directory" "$(ls -A "$LOCKS" | grep -c .)" 0

# Real gloo jobs: rank 0's TCPStore binds MASTER_PORT for real.
if have_torch; then
    GLOO_JOBS=${DDP_GLOO_JOBS:-6}
    [ "${DDP_STRESS_FULL:-0}" = 1 ] && GLOO_JOBS=24
    cat >"$TMP/gloo.py" <<'EOF'
import os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
assert t.item() == 3.0, t
if dist.get_rank() == 0:
    open(sys.argv[1], "w").write("PORT %s\n" % os.environ["MASTER_PORT"])
dist.barrier()
dist.destroy_process_group()
EOF
    run_round "$TMP/gloo" "$GLOO_JOBS" "$TMP/gloo.py"
    check_round "$TMP/gloo" "$GLOO_JOBS"
else
    echo "no torch: gloo round skipped"
fi

# NCCL's RAS thread (NCCL 2.24+) listens on localhost:28028 in every rank unless NCCL_RAS_ADDR says otherwise
# (issue 38): two jobs running at once get their own NCCL_RAS_ADDR ports, reserved as MASTER_PORT is; a port the
# user set is kept. Jobs with a GPU each (the XML export of a 2-GPU host): a job without GPUs gets no RAS port.
ras() {
    "$DDP" --topology "$TOPO_DIR/vm-2gpu-h200-nonuma.xml" --numa-binding none --nproc-per-node 1 --no-python \
        /bin/sh -c 'echo "$NCCL_RAS_ADDR" >"$0"; sleep 2' "$1"
}
ras "$TMP/ras.1" >"$TMP/ras.1.out" 2>&1 &
r1=$!
ras "$TMP/ras.2" >"$TMP/ras.2.out" 2>&1 || { cat "$TMP/ras.2.out"; fail "ras job 2"; }
wait $r1 || { cat "$TMP/ras.1.out"; fail "ras job 1"; }
a=$(cat "$TMP/ras.1") b=$(cat "$TMP/ras.2")
echo "NCCL_RAS_ADDR of two jobs at once: $a, $b"
[[ $a =~ ^localhost:28[0-4][0-9][0-9]$ && $b =~ ^localhost:28[0-4][0-9][0-9]$ ]] || fail "ras ports: '$a' '$b'"
[ "$a" != "$b" ] || fail "two jobs at once got the same NCCL_RAS_ADDR $a"
NCCL_RAS_ADDR=127.0.0.1:28100 ras "$TMP/ras.3" >/dev/null 2>&1 || fail "ras job 3"
expect_eq "a user's NCCL_RAS_ADDR" "$(cat "$TMP/ras.3")" 127.0.0.1:28100
echo "ok"
