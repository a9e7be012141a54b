#!/usr/bin/env bash
# NVML only where a GPU is used (issue 40 item 1): on a host with NVIDIA GPUs (the 2-GPU H200 fixture paired with
# the fake NVML, which appends "loaded PID" to $FAKE_NVML_LOADED when a process maps it), a job with no GPU
# selected never loads libnvidia-ml: [gpus] select = none, --nproc-per-node cpu, plan of such a job, and each
# agent of a multi-node CPU job. A GPU job on the same host does load it (the check can see a load).
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf FAKE_NVML_LOADED=$TMP/loaded
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C
no_load() { # WHAT
    if [ -s "$TMP/loaded" ]; then cat "$TMP/loaded"; fail "$1: NVML was loaded"; fi
}

"$DDP" --topology "$topo" --nproc-per-node 2 --set gpus.select=none --no-python /bin/sh -c "sleep 0.3" \
    >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err"; fail "select = none: job failed"; }
no_load "select = none"
"$DDP" --topology "$topo" --nproc-per-node cpu --no-python /bin/true >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "--nproc-per-node cpu: job failed"; }
no_load "--nproc-per-node cpu"
"$DDP" plan --topology "$topo" --nproc-per-node 2 --set gpus.select=none --no-python /bin/true >"$TMP/out" 2>&1 ||
    { cat "$TMP/out"; fail "plan, select = none"; }
no_load "plan, select = none"
# a failing CPU job restarts: the check before the restart reads no NVML either
"$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.select=none --max-restarts 1 --no-python /bin/false \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "restarted CPU job: exit status" "$?" 1
expect_grep "attempt 1" "$TMP/err"
no_load "a CPU job's restart"

# every agent of a two-node CPU job on this host
hold_port port 2
for i in 1 2; do
    "$DDP" --topology "$topo" --nnodes 2 --nproc-per-node 1 --set gpus.select=none --rdzv-backend c10d \
        --rdzv-endpoint "127.0.0.1:$port" --rdzv-id cpu --max-restarts 0 --no-python /bin/true \
        >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
    eval "agent$i=\$!"
done
wait "$agent1" || { cat "$TMP/a1.err"; fail "agent 1 failed"; }
wait "$agent2" || { cat "$TMP/a2.err"; fail "agent 2 failed"; }
no_load "agents of a two-node CPU job"

# a GPU job on the same host loads it (in the launcher, not only its workers)
"$DDP" --topology "$topo" --nproc-per-node 1 --no-python /bin/sh -c "sleep 0.5" >"$TMP/out" 2>"$TMP/err" ||
    { cat "$TMP/err"; fail "GPU job failed"; }
[ -s "$TMP/loaded" ] || fail "a GPU job did not load NVML: the check cannot see a load"
echo "ok"
