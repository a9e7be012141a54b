#!/bin/bash
# One GPU judge, every caller (issue 53 item 1, issue 52 items 11 and 14; topo/fitness.c): a GPU that NVML
# reports lost (the fake NVML's "lost", tests/helpers/fake_nvml.c) is one reason in one place, and plan, a
# launch (busy = warn, skip and fail), doctor and a restart's spare all act on it: plan and the pick leave it out
# naming why, a launch never starts on it (busy = fail included), a launch that started on it unknowing (busy =
# warn checks beside the spawn, unit-tested in test_nvml.c) says so, doctor does not call it usable, and a restart does not lease it as a
# spare in place of a GPU that faulted.
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_LOCK_DIR=$TMP/locks DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
lost 1
C
say='echo "ran on $DDPLAUNCH_GPU_BUSID"'

# plan: the pick leaves the lost GPU out; asked for both, plan refuses, saying why
"$DDP" plan --topology "$topo" --nproc-per-node 1 --no-python /bin/true >"$TMP/out" 2>&1
expect_eq "plan, 1 GPU: exit status" "$?" 0
expect_grep "^0 +0 +0000:00:06.0 " "$TMP/out"
"$DDP" plan --topology "$topo" --nproc-per-node 2 --no-python /bin/true >"$TMP/out" 2>&1
[ "$?" -ne 0 ] || fail "plan of 2 GPUs with one lost succeeded"
expect_grep "left out: GPU 1 unfit \(GPU 1: NVML says the GPU is lost" "$TMP/out"

# a launch never starts on it, whatever [gpus] busy says (before: busy = fail ran on it)
for busy in warn skip fail; do
    "$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.select=0000:00:07.0 --set gpus.busy=$busy \
        --no-python /bin/sh -c "$say" >"$TMP/out" 2>"$TMP/err"
    [ "$?" -ne 0 ] || fail "busy = $busy: a launch on the lost GPU succeeded"
    [ -s "$TMP/out" ] && fail "busy = $busy: a worker ran: $(cat "$TMP/out")"
    expect_grep "GPU 1 unfit \(GPU 1: NVML says the GPU is lost" "$TMP/err"
done
"$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.busy=fail --no-python /bin/sh -c "$say" >"$TMP/out" 2>"$TMP/err"
expect_eq "busy = fail, automatic pick: exit status" "$?" 0
expect_eq "busy = fail, automatic pick: GPU" "$(cat "$TMP/out")" "ran on 0000:00:06.0"

# doctor: not usable, not picked, and the reason named (before: usable, idle, "skip gpu-health")
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_eq "doctor, 2 GPUs: exit status" "$?" 2
expect_grep "^fail +gpus .*left out: GPU 1 unfit \(GPU 1: NVML says the GPU is lost" "$TMP/doc"
"$DDP" doctor --topology "$topo" --nproc-per-node 1 >"$TMP/doc" 2>&1
expect_eq "doctor, 1 GPU: exit status" "$?" 1
expect_grep "^warn +gpus +2 GPUs visible \(1 usable; unfit: GPU 1 \(0000:00:07.0\): NVML says the GPU is lost" "$TMP/doc"
expect_grep "^ok +gpu-busy +picked GPU is idle" "$TMP/doc"
expect_grep "^ok +gpu-health +1 GPU: " "$TMP/doc"

# a restart's spare: GPU 0 faults (Xid 79) during a 1-worker job; the only other GPU is lost, so it is not
# leased in its place and the job ends naming the fault (before: the restart ran on the lost GPU)
cat >>"$TMP/nvml.conf" <<C
event 0 0.2 xid 79
C
one=(/bin/sh -c 'echo "attempt=$DDPLAUNCH_ATTEMPT busid=$DDPLAUNCH_GPU_BUSID"; [ "$DDPLAUNCH_ATTEMPT" = 0 ] || exit 0; sleep 0.6; exit 3')
"$DDP" -v --topology "$topo" --nproc-per-node 1 --max-restarts 2 --set restart.backoff=0 --no-python "${one[@]}" \
    >"$TMP/out" 2>"$TMP/err"
rc=$?
grep -q "is leased for the restart" "$TMP/err" && fail "the lost GPU was leased as a spare: $(cat "$TMP/err")"
expect_eq "spare: attempts" "$(grep -c attempt= "$TMP/out")" 1
expect_eq "spare: exit status" "$rc" 3
expect_grep "GPU 1 \(0000:00:07.0\): not leased for the restart: NVML says the GPU is lost" "$TMP/err"
expect_grep "no usable GPU left.*: GPU 0 \(0000:00:06.0\): Xid 79" "$TMP/err"
echo ok
