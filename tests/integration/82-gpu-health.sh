#!/usr/bin/env bash
# The GPU's own state (issue 32) through the fake NVML (tests/helpers/fake_nvml.c) paired with the 2-GPU H200
# fixture (DDPLAUNCH_TOPOLOGY_NVML=1): the launch warning naming the holder, plan's GPU memory, busy = skip and
# fail, the CUDA OOM cause, a Xid during a run naming the rank's GPU and a restart leaving it out, a double-bit
# ECC event, a hardware clock slowdown, a new holder found before a restart, doctor's gpu-health, and an older
# NVML without the event set (feature off, no crash).
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_LOCK_DIR=$TMP/locks DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf
# the holder: a real process, so that its user and command are visible
sleep 120 &
holder=$!
trap 'kill $holder 2>/dev/null' EXIT
me=$(id -un)
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
proc 0 $holder 139.5G
C

# the warning naming GPU, holder and amount; the job starts (busy = warn, the default), and the check runs beside
# the spawn: the worker waits for it to answer (-v says when: a job that ends first is not told)
await=$DDP_SRCDIR/tests/integration/await_line.sh
"$DDP" -v --topology "$topo" --nproc-per-node 1 --no-python /bin/sh -c 'echo started on $DDPLAUNCH_GPU_BUSID; sh "$@"' \
    sh "$await" "$TMP/err" "busy check beside the spawn answered" >"$TMP/out" 2>"$TMP/err"
expect_eq "warn: exit status" "$?" 0
expect_grep "warning: GPU 0 \(0000:00:06.0\) is held by pid $holder \($me, sleep, 139.5 GiB\): 140.0 of 140.0 GiB in use" "$TMP/err"
expect_grep "started on 0000:00:06.0" "$TMP/out"

# plan: the GPU's memory in use and its holders, and the same warning
"$DDP" plan --topology "$topo" --nproc-per-node 1 --no-python /bin/true >"$TMP/plan" 2>"$TMP/perr"
expect_grep "GPU 0 \(0000:00:06.0\): 140.0 of 140.0 GiB in use; held by pid $holder \($me, sleep, 139.5 GiB\)" "$TMP/plan"
expect_grep "warning: GPU 0 \(0000:00:06.0\) is held by pid $holder" "$TMP/perr"
"$DDP" plan --json --topology "$topo" --nproc-per-node 1 --no-python /bin/true 2>/dev/null |
    $PY -c "import json,sys; w=json.load(sys.stdin)['workers'][0]; assert w['gpu_holders'][0]['pid']==$holder, w; assert w['gpu_holders'][0]['command']=='sleep'" ||
    fail "plan --json: gpu_holders"

# busy = skip: the other GPU; too few left: exit 2 naming the held one
"$DDP" --topology "$topo" --nproc-per-node gpu --set gpus.busy=skip --no-python /bin/sh -c 'echo on $DDPLAUNCH_GPU_BUSID' \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "skip: exit status" "$?" 0
expect_eq "skip: workers" "$(cat "$TMP/out")" "on 0000:00:07.0"
grep -q "is held by" "$TMP/err" && fail "skip: warned about a GPU it did not use"
"$DDP" --topology "$topo" --nproc-per-node 2 --set gpus.busy=skip --no-python /bin/true 2>"$TMP/err"
expect_eq "skip, too few: exit status" "$?" 2
expect_grep "GPU 0 held by another process \(\[gpus\] busy = skip\)" "$TMP/err"

# busy = fail: one line, exit 75, no worker started
"$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.busy=fail --no-python /bin/sh -c "touch $TMP/ran" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "fail: exit status" "$?" 75
[ -e "$TMP/ran" ] && fail "busy = fail started a worker"
expect_eq "fail: lines" "$(wc -l <"$TMP/err")" 1
expect_grep "GPU 0 \(0000:00:06.0\) is held by pid $holder .*busy = fail, so nothing was started" "$TMP/err"

# CUDA OOM on the held GPU: the holder is the cause, not the batch size (console, summary.json, report)
"$DDP" --topology "$topo" --nproc-per-node 1 --log-dir "$TMP/logs" --no-python /bin/sh -c \
    'echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2; exit 1' >"$TMP/out" 2>"$TMP/err"
expect_eq "oom: exit status" "$?" 1
expect_grep "cause +: GPU memory held by pid $holder \($me, sleep, 139.5 GiB\)" "$TMP/err"
expect_grep "hint +: another process held GPU 0's memory, not this job's batch size: stop it \(kill $holder\)" "$TMP/err"
grep -q "lower the per-GPU batch size" "$TMP/err" && fail "oom: the batch-size hint"
run=$(ls -d "$TMP"/logs/*/ | head -1)
$PY -c "import json,sys; r=json.load(open('$run/summary.json'))['root_cause']; assert r['class']=='cuda-oom' and r['cause'].startswith('GPU memory held by pid $holder'), r" ||
    fail "summary.json: cause"
$PY "$DDP_SRCDIR/tests/integration/records_check.py" "$DDP_SRCDIR/man/ddplaunch.1" "$run" >/dev/null ||
    fail "records of the OOM run do not match the documented schema"
"$DDP" report "$run" >"$TMP/report"
expect_grep "gpu: GPU memory held by pid $holder" "$TMP/report"

# a Xid 79 on GPU 1 during the run: a line naming rank 1's GPU, the root cause gpu-fault, and the restart
# leaves GPU 1 out (downsized 2 -> 1)
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
event 1 0.6 xid 79
C
cat >"$TMP/w.sh" <<'W'
echo "attempt=$DDPLAUNCH_ATTEMPT rank=$RANK world=$WORLD_SIZE busid=$DDPLAUNCH_GPU_BUSID"
if [ "$DDPLAUNCH_ATTEMPT" = 0 ] && [ "$DDPLAUNCH_GPU_BUSID" = 0000:00:07.0 ]; then sleep 1.5; exit 3; fi
[ "$DDPLAUNCH_ATTEMPT" = 0 ] && sleep 5
exit 0
W
"$DDP" --topology "$topo" --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --log-dir "$TMP/xid" \
    --no-python /bin/sh "$TMP/w.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "xid restart: exit status" "$?" 0
expect_grep "attempt 0: GPU 1 \(0000:00:07.0\) of rank 1: Xid 79: GPU has fallen off the bus" "$TMP/err"
expect_grep "GPU 1 \(0000:00:07.0\) is left out of a restart: Xid 79" "$TMP/err"
expect_grep "downsizing 2 -> 1 workers" "$TMP/err"
expect_eq "xid restart: attempt 1" "$(grep 'attempt=1' "$TMP/out")" "attempt=1 rank=0 world=1 busid=0000:00:06.0"
run=$(ls -d "$TMP"/xid/*/ | head -1)
grep -q '"event":"gpu_event".*"kind":"xid","data":79,"fault":true' "$run/events.jsonl" || fail "events.jsonl: gpu_event"
grep -q '"event":"gpu_left_out","attempt":0,"gpu":1' "$run/events.jsonl" || fail "events.jsonl: gpu_left_out"
grep -q '"event":"decision","attempt":0,"action":"downsize","next_attempt":1,"next_nproc":1' "$run/events.jsonl" ||
    fail "events.jsonl: downsize decision"
$PY -c "import json; l=json.load(open('$run/summary.json'))['gpus_left_out']; assert [(x['gpu'], x['busid']) for x in l]==[(1, '0000:00:07.0')] and 'Xid 79' in l[0]['reason'], l" ||
    fail "summary.json: gpus_left_out"
$PY "$DDP_SRCDIR/tests/integration/records_check.py" "$DDP_SRCDIR/man/ddplaunch.1" "$run" >/dev/null ||
    fail "records of the Xid run do not match the documented schema"
# without a restart the verdict names the GPU fault
"$DDP" --topology "$topo" --nproc-per-node 2 --log-dir "$TMP/xid0" --no-python /bin/sh "$TMP/w.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "xid: exit status" "$?" 3
expect_grep "cause +: GPU 1 \(0000:00:07.0\) fault: Xid 79: GPU has fallen off the bus" "$TMP/err"
expect_grep "class +: gpu-fault" "$TMP/err"
run=$(ls -d "$TMP"/xid0/*/ | head -1)
$PY -c "import json; r=json.load(open('$run/summary.json'))['root_cause']; assert r['class']=='gpu-fault' and r['rank']==1 and 'Xid 79' in r['cause'], r" ||
    fail "summary.json: gpu-fault"

# a double-bit ECC error and a hardware thermal slowdown during a run
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
throttle 0 0x40 0.4
event 1 0.4 ecc
C
"$DDP" --topology "$topo" --nproc-per-node 2 --log-dir "$TMP/ecc" --no-python /bin/sh -c 'sleep 1.5' >"$TMP/out" 2>"$TMP/err"
expect_eq "ecc: exit status" "$?" 0
expect_grep "GPU 1 \(0000:00:07.0\) of rank 1: double-bit \(uncorrectable\) ECC error" "$TMP/err"
expect_grep "GPU 0 \(0000:00:06.0\) of rank 0: clocks slowed down: HW thermal slowdown" "$TMP/err"
run=$(ls -d "$TMP"/ecc/*/ | head -1)
grep -q '"kind":"ecc-dbe"' "$run/events.jsonl" || fail "events.jsonl: ecc-dbe"
grep -q '"kind":"clocks","data":64' "$run/events.jsonl" || fail "events.jsonl: clocks"

# before a restart: a holder that appeared on GPU 1 during attempt 0 leaves GPU 1 out. The worker writes it into
# the fake's config once the launch's busy check, which runs beside the spawn, has answered (-v says so): before
# that it would be a holder at launch, on a fast machine too
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C
cat >"$TMP/w2.sh" <<W
echo "attempt=\$DDPLAUNCH_ATTEMPT rank=\$RANK busid=\$DDPLAUNCH_GPU_BUSID"
if [ "\$DDPLAUNCH_ATTEMPT" = 0 ] && [ "\$RANK" = 1 ]; then
    sh "$await" "$TMP/err" "busy check beside the spawn answered"
    echo "proc 1 $holder 20G" >>"$TMP/nvml.conf"; exit 5
fi
[ "\$DDPLAUNCH_ATTEMPT" = 0 ] && sleep 5
exit 0
W
"$DDP" -v --topology "$topo" --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --no-python /bin/sh \
    "$TMP/w2.sh" >"$TMP/out" 2>"$TMP/err"
expect_eq "new holder: exit status" "$?" 0
expect_grep "debug: the GPU busy check beside the spawn answered: 0 of the job's GPUs held by another process" "$TMP/err"
expect_grep "GPU 1 \(0000:00:07.0\) is left out of a restart: now held by pid $holder \($me, sleep, 20.0 GiB\), which was not there at launch" "$TMP/err"
expect_eq "new holder: attempt 1" "$(grep 'attempt=1' "$TMP/out")" "attempt=1 rank=0 busid=0000:00:06.0"

# doctor: healthy -> ok; a remapping failure and uncorrectable errors -> fail
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_grep "^ok +gpu-health +2 GPUs: ECC on 2 of 2, no uncorrectable errors, no row remapping failed or pending, MIG off" "$TMP/doc"
echo "remap 1 0 1 0 1" >>"$TMP/nvml.conf"
echo "ecc 1 0 2" >>"$TMP/nvml.conf"
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_eq "doctor, faulty GPU: exit status" "$?" 2
# the judge (fitness.h) leaves the GPU out of doctor's pick as out of a launch's (issue 53): "gpus" names why
expect_grep "^fail +gpus +.*GPU 1 unfit \(GPU 1: a row remapping failed \(retire the GPU\); 2 uncorrectable ECC errors" \
    "$TMP/doc"

# an older NVML (no nvmlEventSetWait_v2, nvmlDeviceGetRemappedRows, nvmlDeviceGetMigMode): those features are
# off, nothing crashes, the launch warning still works
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
proc 0 $holder 139.5G
event 1 0.2 xid 79
C
LD_LIBRARY_PATH=$DDP_BUILD/helpers/fake_nvml_old "$DDP" -v --topology "$topo" --nproc-per-node 2 --no-python \
    /bin/sh -c 'sh "$@"; sleep 0.6' sh "$await" "$TMP/err" "busy check beside the spawn answered" >"$TMP/out" 2>"$TMP/err"
expect_eq "old NVML: exit status" "$?" 0
expect_grep "GPU events off: this NVML has no event set" "$TMP/err"
expect_grep "warning: GPU 0 \(0000:00:06.0\) is held by pid $holder" "$TMP/err"
grep -q "Xid" "$TMP/err" && fail "old NVML: an event arrived without an event set"
LD_LIBRARY_PATH=$DDP_BUILD/helpers/fake_nvml_old "$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_grep "^ok +gpu-health .*row remapping not reported, MIG not reported" "$TMP/doc"
echo "GPU health through the fake NVML: ok"
