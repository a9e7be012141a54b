#!/usr/bin/env bash
# NVML never blocks the launcher (issue 39 item 2, issue 40): with the fake NVML's calls hung (a GPU that fell off
# the bus), every read has a deadline (DDPLAUNCH_NVML_TIMEOUT, 1 s here): doctor ends and says NVML did not answer;
# a busy = warn launch goes on and says its GPUs were not checked; busy = fail refuses; a check before a restart
# that hangs leaves SIGTERM answered at once, and when its deadline passes the restart goes on unchecked, saying so.
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
fake=$DDP_BUILD/helpers/fake_nvml
[ -r "$topo" ] || skip "fixture $topo not found"
[ -e "$fake/libnvidia-ml.so.1" ] || skip "fake NVML not built"
export DDPLAUNCH_TOPOLOGY_NVML=1 LD_LIBRARY_PATH=$fake FAKE_NVML_CONFIG=$TMP/nvml.conf DDPLAUNCH_NVML_TIMEOUT=1
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C

# doctor: nvmlInit hangs
s=$SECONDS
FAKE_NVML_SLEEP_MS=600000 timeout 30 "$DDP" doctor --topology "$topo" --nproc-per-node 1 --no-python /bin/true \
    >"$TMP/doctor" 2>&1
[ $((SECONDS - s)) -lt 15 ] || fail "doctor waited for a hung NVML ($((SECONDS - s)) s)"
expect_grep "NVML: did not answer in 1 s" "$TMP/doctor"

# a busy = warn launch: the holder check (compute processes) hangs; the worker runs, the line says so
FAKE_NVML_SLEEP_MS=600000 FAKE_NVML_SLEEP_CALL=procs timeout 30 "$DDP" --topology "$topo" --nproc-per-node 1 \
    --no-python /bin/sh -c 'echo ran; sleep 2' >"$TMP/out" 2>"$TMP/err"
expect_eq "warn: exit status" "$?" 0
expect_grep "^ran$" "$TMP/out"
expect_grep "warning: NVML: did not answer in 1 s: the job's GPUs were not checked for other processes" "$TMP/err"

# busy = fail: refuses, nothing started
FAKE_NVML_SLEEP_MS=600000 FAKE_NVML_SLEEP_CALL=procs timeout 30 "$DDP" --topology "$topo" --nproc-per-node 1 \
    --set gpus.busy=fail --no-python /bin/sh -c "touch $TMP/ran" >"$TMP/out" 2>"$TMP/err"
expect_eq "fail: exit status" "$?" 75
[ -e "$TMP/ran" ] && fail "busy = fail started a worker although NVML did not answer"
expect_grep "NVML: did not answer in 1 s, so the GPUs could not be checked .*busy = fail, so nothing was started" "$TMP/err"

# a restart's check hangs (the config is read again at every nvmlInit): SIGTERM is answered at once
cat >"$TMP/w.sh" <<W
if [ "\$DDPLAUNCH_ATTEMPT" = 0 ]; then sleep 0.5; echo "slow procs 600000" >>"$TMP/nvml.conf"; exit 1; fi
echo "attempt \$DDPLAUNCH_ATTEMPT started"; sleep 1
W
DDPLAUNCH_NVML_TIMEOUT=30 "$DDP" --topology "$topo" --nproc-per-node 1 --max-restarts 1 --no-python /bin/sh "$TMP/w.sh" \
    >"$TMP/out" 2>"$TMP/err" &
pid=$!
for _ in $(seq 100); do grep -q "exited with code 1" "$TMP/err" && break; sleep 0.05; done
sleep 0.5
s=$SECONDS
kill -TERM $pid
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.05; done
if kill -0 $pid 2>/dev/null; then kill -9 $pid; cat "$TMP/err"; fail "SIGTERM not answered during a hung check before a restart"; fi
wait $pid
grep -q "attempt 1 started" "$TMP/out" && fail "the restart started before NVML answered"

# ... and when its deadline passes, the restart goes on unchecked and says so
cat >"$TMP/nvml.conf" <<C
gpu 0000:00:06.0 140G 0.5G
gpu 0000:00:07.0 140G 0.5G
C
timeout 60 "$DDP" --topology "$topo" --nproc-per-node 1 --max-restarts 1 --no-python /bin/sh "$TMP/w.sh" \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "restart unchecked: exit status" "$?" 0
expect_grep "attempt 1 started" "$TMP/out"
expect_grep "NVML: did not answer in 1 s: the GPUs were not checked before the restart" "$TMP/err"
echo ok
