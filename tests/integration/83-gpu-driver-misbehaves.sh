#!/usr/bin/env bash
# A driver that misbehaves (issue 39, through the fake NVML's knobs, tests/helpers/fake_nvml.c): a process count
# above what NVML filled in makes no phantom holder (only the entries given count); a device count of 2^32-1 is
# "NVML broken", not an abort, in doctor, plan and a launch; an Xid storm on the rank's GPU and on a GPU the job
# does not hold makes one line, a few records and little CPU; a faulted or lost GPU stays out of a restart (an
# Xid during the backoff counts, a 1-worker job with no GPU left ends saying why); the GPU's own verdict
# (NVML's recovery action) and its PCIe link in doctor, and a GPU asking for a reset or drain left out; the
# OOM's cause names the holder seen at launch as such once it has exited, with no kill hint; the driver's
# own text (a GPU name) is printable in topo and valid UTF-8 in its JSON; in a pid namespace of its own, a
# holder's host pid is not looked up here.
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_LOCK_DIR=$TMP/locks DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf
sleep 60 &
holder=$!
trap 'kill $holder 2>/dev/null' EXIT

# 1. the processes call says 60 on a GPU with one real holder, and 60 on a GPU with none: only the holder counts
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
proc 0 $holder 20G
proc_count 0 60
proc_count 1 60
C
"$DDP" --topology "$topo" --nproc-per-node 1 --set gpus.select=0000:00:07.0 --set gpus.busy=fail --no-python /bin/true \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "no holder on GPU 1 (busy = fail): exit status" "$?" 0
grep -q "held by" "$TMP/err" && { cat "$TMP/err"; fail "a phantom holder on GPU 1"; }
"$DDP" plan --topology "$topo" --nproc-per-node 2 --no-python /bin/true >"$TMP/plan" 2>&1
cat "$TMP/plan" | grep -i "held\|GiB in use"
n=$(grep -o "pid [0-9]*" "$TMP/plan" | sort -u | wc -l)
expect_eq "holders named in plan" "$n" 1
expect_grep "held by pid $holder \([^)]*20.0 GiB\)" "$TMP/plan"

# 2. a device count of 2^32-1: doctor says NVML is broken, plan and a launch go on without its facts
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
count 4294967295
C
timeout 20 "$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
rc=$?
cat "$TMP/doc" | grep -i nvml
[ $rc -lt 124 ] || fail "doctor: status $rc (killed or aborted)"
expect_grep "nvmlDeviceGetCount answered 4294967295 devices" "$TMP/doc"
timeout 20 "$DDP" plan --topology "$topo" --nproc-per-node 2 --no-python /bin/true >"$TMP/plan" 2>&1
expect_eq "plan with a garbage device count: exit status" "$?" 0
timeout 20 "$DDP" --topology "$topo" --nproc-per-node 2 --no-python /bin/sh -c 'echo ran' >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/err"
expect_eq "launch with a garbage device count: exit status" "$rc" 0
expect_eq "launch: workers" "$(grep -c ran "$TMP/out")" 2

# 3. an Xid storm: 100000 Xid 13 on GPU 1 (not the job's) and 100000 on GPU 0 (rank 0's) during a 2.5 s run
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
storm 1 0.2 xid 13 100000
storm 0 0.2 xid 13 100000
C
TIMEFORMAT=%U+%S
{ time "$DDP" --topology "$topo" --nproc-per-node 1 --log-dir "$TMP/storm" --no-python /bin/sleep 2.5 \
    >"$TMP/out" 2>"$TMP/err"; } 2>"$TMP/time"
expect_eq "storm: exit status" "$?" 0
cpu=$($PY -c "print(eval(open('$TMP/time').read()))")
lines=$(grep -c "Xid 13" "$TMP/err")
run=$(ls -d "$TMP"/storm/*/ | head -1)
records=$(grep -c '"event":"gpu_event"' "$run/events.jsonl")
size=$(stat -c %s "$run/events.jsonl")
echo "storm: $lines console lines, $records gpu_event records, events.jsonl $size bytes, launcher CPU ${cpu}s"
grep -q "GPU 1" "$TMP/err" && { head -5 "$TMP/err"; fail "storm: a console line for GPU 1, which the job does not hold"; }
expect_eq "storm: console lines" "$lines" 1
expect_grep "GPU 0 \(0000:00:06.0\) of rank 0: Xid 13" "$TMP/err"
[ "$records" -ge 1 ] && [ "$records" -le 3 ] || fail "storm: $records gpu_event records (want 1..3)"
[ "$size" -lt 20000 ] || fail "storm: events.jsonl is $size bytes"
$PY -c "import sys; sys.exit(0 if $cpu < 1.2 else 1)" || fail "storm: the launcher spent ${cpu}s of CPU in a 2.5 s run"

# 4a. an Xid 79 on GPU 1 during the restart backoff: rank 1 fails at 0.3 s in attempts 0 and 1 (the first restart
#     is at once, the second waits restart.backoff = 1.5 s), the Xid comes at 1.4 s: GPU 1 stays out of attempt 2
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
event 1 1.4 xid 79
C
cat >"$TMP/w.sh" <<'W'
echo "attempt=$DDPLAUNCH_ATTEMPT rank=$RANK world=$WORLD_SIZE busid=$DDPLAUNCH_GPU_BUSID"
[ "$DDPLAUNCH_ATTEMPT" -lt 2 ] && [ "$RANK" = 1 ] && { sleep 0.3; exit 3; }
[ "$DDPLAUNCH_ATTEMPT" -lt 2 ] && sleep 5
exit 0
W
"$DDP" --topology "$topo" --nproc-per-node 2 --max-restarts 2 --set restart.backoff=1.5 --no-python /bin/sh "$TMP/w.sh" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "xid in the backoff: exit status" "$?" 0
expect_grep "GPU 1 \(0000:00:07.0\) of this job, between attempts: Xid 79" "$TMP/err"
expect_grep "GPU 1 \(0000:00:07.0\) is left out of a restart: Xid 79" "$TMP/err"
expect_eq "xid in the backoff: attempt 2" "$(grep 'attempt=2' "$TMP/out")" "attempt=2 rank=0 world=1 busid=0000:00:06.0"

# 4b. a 1-worker job whose GPU fell off the bus: the restart leases the free GPU 1 instead of reusing GPU 0;
#     with GPU 0 the only one it may use ([gpus] select), the job ends naming the fault
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
event 0 0.2 xid 79
C
one=(/bin/sh -c 'echo "attempt=$DDPLAUNCH_ATTEMPT busid=$DDPLAUNCH_GPU_BUSID"; [ "$DDPLAUNCH_ATTEMPT" = 0 ] || exit 0; sleep 0.6; exit 3')
"$DDP" --topology "$topo" --nproc-per-node 1 --max-restarts 2 --set restart.backoff=0 --no-python "${one[@]}" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "spare GPU: exit status" "$?" 0
expect_grep "GPU 1 \(0000:00:07.0\) is leased for the restart" "$TMP/err"
expect_eq "spare GPU: attempt 1" "$(grep 'attempt=1' "$TMP/out")" "attempt=1 busid=0000:00:07.0"
grep -q "another ddplaunch job" "$TMP/err" && fail "spare GPU: blamed another ddplaunch job"
"$DDP" --topology "$topo" --nproc-per-node 1 --max-restarts 2 --set restart.backoff=0 --set gpus.select=0000:00:06.0 \
    --no-python "${one[@]}" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/out"
expect_eq "no GPU left: exit status" "$rc" 3
expect_eq "no GPU left: attempts" "$(grep -c attempt= "$TMP/out")" 1
expect_grep "no usable GPU left.*: GPU 0 \(0000:00:06.0\): Xid 79: GPU has fallen off the bus" "$TMP/err"
grep -q "another ddplaunch job" "$TMP/err" && fail "no GPU left: blamed another ddplaunch job"

# 4c. a GPU that NVML reports lost (GPU_IS_LOST) at the restart check is unfit: the restart leaves it out
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
lost 1 0.2
C
"$DDP" --topology "$topo" --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --no-python /bin/sh "$TMP/w.sh" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "lost GPU: exit status" "$?" 0
expect_grep "GPU 1 \(0000:00:07.0\) is left out of a restart: NVML says the GPU is lost" "$TMP/err"
expect_eq "lost GPU: attempt 1" "$(grep 'attempt=1' "$TMP/out")" "attempt=1 rank=0 world=1 busid=0000:00:06.0"

# 5. NVML's recovery action and the PCIe link: doctor reports both; a GPU that asks for a reset fails doctor,
#    a link at x8 of x16 warns; an older NVML reports neither, and fails nothing
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_grep "^ok +gpu-health +2 GPUs: .*, recovery action none, PCIe link gen 5 of 5, x16 of x16" "$TMP/doc"
echo "recovery 1 1" >>"$TMP/nvml.conf"
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_eq "doctor, recovery action: exit status" "$?" 2
expect_grep "^fail +gpus +.*GPU 1 unfit \(GPU 1: NVML's recovery action: GPU reset\)" "$TMP/doc"
printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\npcie 0 4 5 8 16\n' >"$TMP/nvml.conf"
"$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_grep "^warn +gpu-health +0000:00:06.0: PCIe link x8 of x16 \(gen 4 of 5\)" "$TMP/doc"
LD_LIBRARY_PATH=$DDP_BUILD/helpers/fake_nvml_old "$DDP" doctor --topology "$topo" --nproc-per-node 2 >"$TMP/doc" 2>&1
expect_grep "^ok +gpu-health .*recovery action not reported, PCIe link not reported" "$TMP/doc"
# before a restart: GPU 1 now asks for a drain and reset (the worker writes it): it is left out like an Xid 79
printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\n' >"$TMP/nvml.conf"
cat >"$TMP/w3.sh" <<W
echo "attempt=\$DDPLAUNCH_ATTEMPT rank=\$RANK world=\$WORLD_SIZE busid=\$DDPLAUNCH_GPU_BUSID"
if [ "\$DDPLAUNCH_ATTEMPT" = 0 ] && [ "\$RANK" = 1 ]; then echo "recovery 1 4" >>"$TMP/nvml.conf"; exit 5; fi
[ "\$DDPLAUNCH_ATTEMPT" = 0 ] && sleep 5
exit 0
W
"$DDP" --topology "$topo" --nproc-per-node 2 --max-restarts 1 --set restart.backoff=0 --no-python /bin/sh "$TMP/w3.sh" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "recovery action before a restart: exit status" "$?" 0
expect_grep "GPU 1 \(0000:00:07.0\) is left out of a restart: NVML's recovery action: drain and reset" "$TMP/err"
expect_eq "recovery action: attempt 1" "$(grep 'attempt=1' "$TMP/out")" "attempt=1 rank=0 world=1 busid=0000:00:06.0"

# 6. the holder seen at launch exits before the worker runs out of memory: its pid is no longer the holder's.
#    The worker kills it once the busy check beside the spawn has answered (-v says so)
sleep 60 &
gone=$!
printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\nproc 0 %s 139.5G\n' "$gone" >"$TMP/nvml.conf"
"$DDP" -v --topology "$topo" --nproc-per-node 1 --no-python /bin/sh -c "sh $DDP_SRCDIR/tests/integration/await_line.sh \
    $TMP/err 'busy check beside the spawn answered: 1 of'; kill $gone; sleep 0.3; \
    echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1" >"$TMP/out" 2>"$TMP/err"
expect_eq "holder gone: exit status" "$?" 1
expect_grep "cause +: GPU memory held at launch by pid $gone \([^)]*sleep, 139.5 GiB\), which has exited since" "$TMP/err"
grep -q "kill $gone" "$TMP/err" && fail "holder gone: a kill hint for a pid that is no longer the holder"

# 7. the driver's own text (a GPU name with an OSC sequence, a BEL and a byte that is not UTF-8): printable in
#    topo, valid UTF-8 in topo --json
printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\nname 0 H\033]0;x\a\377\n' >"$TMP/nvml.conf"
"$DDP" topo --topology "$topo" >"$TMP/topo" 2>&1
grep -q $'\033' "$TMP/topo" && fail "topo: an escape from the driver's GPU name reached the terminal"
expect_grep "GPU0 +0000:00:06.0 .* H\?\]0;x\?\?" "$TMP/topo"
"$DDP" topo --json --topology "$topo" >"$TMP/topo.json" 2>/dev/null
$PY -c "import json,sys; json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))" "$TMP/topo.json" ||
    fail "topo --json: not valid UTF-8 JSON"

# 8. a container with its own pid namespace on a host with NVIDIA devices (a private mount namespace gives
#    /dev a /dev/nvidiactl): NVML's pid 1 is the host's, not the container's init; no kill hint (root only)
if unshare -m true 2>/dev/null && unshare -pf --mount-proc true 2>/dev/null; then
    mkdir -p "$TMP/olddev"
    cat >"$TMP/ns.sh" <<N
set -e
mount --bind /dev "$TMP/olddev"
mount -t tmpfs tmpfs /dev
for f in null zero urandom random tty full; do touch /dev/\$f; mount --bind "$TMP/olddev/\$f" /dev/\$f; done
mkdir -p /dev/pts /dev/shm; mount --bind "$TMP/olddev/pts" /dev/pts; mount --bind "$TMP/olddev/shm" /dev/shm
ln -s /proc/self/fd /dev/fd; touch /dev/nvidiactl
exec unshare -pf --mount-proc "\$@"
N
    printf 'gpu 0000:00:06.0 140G 0.5G\ngpu 0000:00:07.0 140G 0.5G\nproc 0 1 139.5G\n' >"$TMP/nvml.conf"
    unshare -m bash "$TMP/ns.sh" "$DDP" --topology "$topo" --nproc-per-node 1 --no-python /bin/sh -c \
        "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2; exit 1" \
        >"$TMP/out" 2>"$TMP/err"
    expect_eq "pid namespace: exit status" "$?" 1
    expect_grep "is held by pid 1 in the host's pid namespace \(139.5 GiB\)" "$TMP/err"
    expect_grep "cause +: GPU memory held at launch by pid 1 in the host's pid namespace" "$TMP/err"
    grep -q "kill 1" "$TMP/err" && fail "pid namespace: a kill hint for the host's pid"
else
    echo "part 8 skipped: no unshare of mount and pid namespaces here"
fi
echo ok
