#!/usr/bin/env bash
# Downsizing 8 -> 4 -> 2 on an 8-GPU, 2-socket topology (the g4dn.metal hwloc export): a hung rank's GPU is left
# out, and each smaller set is re-picked on one NUMA node with the tightest links. The workers are shell
# scripts that report what they were given; the hang is a rank that stops touching its heartbeat file.
. "$DDP_SRCDIR/tests/integration/lib.sh"
topo=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$topo" ] || skip "fixture $topo not found"
export DDPLAUNCH_LOCK_DIR=$TMP/locks
cat > "$TMP/worker.sh" <<'W'
echo "attempt=$DDPLAUNCH_ATTEMPT rank=$RANK world=$WORLD_SIZE orig=$DDPLAUNCH_ORIG_WORLD_SIZE cvd=$CUDA_VISIBLE_DEVICES local=$LOCAL_RANK busid=$DDPLAUNCH_GPU_BUSID numa=$DDPLAUNCH_NUMA_NODE"
if [ "$DDPLAUNCH_ATTEMPT" = 0 ] && [ "$RANK" = 5 ]; then sleep 60; fi
if [ "$DDPLAUNCH_ATTEMPT" = 1 ] && [ "$RANK" = 1 ]; then sleep 60; fi
for i in 1 2 3 4 5 6 7 8; do touch "$DDPLAUNCH_HEARTBEAT_FILE"; sleep 0.25; done
W
"$DDP" --topology "$topo" --nproc-per-node 8 --max-restarts 3 \
    --set timeout.stall=1s --set timeout.heartbeat=file --set restart.on_timeout=downsize \
    --set restart.backoff=0 --set restart.shutdown_timeout=2s \
    --no-python /bin/sh "$TMP/worker.sh" >"$TMP/out" 2>"$TMP/err"
rc=$?
cat "$TMP/out" "$TMP/err"
expect_eq "exit status" "$rc" 0
# attempt 0: 8 ranks, every GPU
expect_eq "attempt 0 ranks" "$(grep -c 'attempt=0 ' "$TMP/out")" 8
# attempt 1: 4 ranks on NUMA node 0 without GPU 5 (0000:e8:00.0): GPUs 0-3
expect_eq "attempt 1 ranks" "$(grep -c 'attempt=1 ' "$TMP/out")" 4
grep 'attempt=1 ' "$TMP/out" | grep -q 'busid=0000:e8:00.0' && fail "attempt 1 used the hung rank's GPU"
expect_eq "attempt 1 numa" "$(grep 'attempt=1 ' "$TMP/out" | sed 's/.*numa=//' | sort -u | tr '\n' ' ')" "0 "
expect_eq "attempt 1 cvd" "$(grep 'attempt=1 rank=0 ' "$TMP/out" | sed 's/.*cvd=\([^ ]*\).*/\1/')" "0,1,2,3"
grep 'attempt=1 ' "$TMP/out" | grep -q 'world=4 orig=8' || fail "attempt 1: WORLD_SIZE 4 with DDPLAUNCH_ORIG_WORLD_SIZE 8 expected"
# attempt 2: 2 ranks without GPUs 5 and 1: the tightest same-node pair left is 2,3 (one host bridge)
expect_eq "attempt 2 ranks" "$(grep -c 'attempt=2 ' "$TMP/out")" 2
expect_eq "attempt 2 cvd" "$(grep 'attempt=2 rank=0 ' "$TMP/out" | sed 's/.*cvd=\([^ ]*\).*/\1/')" "2,3"
expect_grep 'downsizing 8 -> 4' "$TMP/err"
expect_grep 'downsizing 4 -> 2' "$TMP/err"
echo "8 -> 4 -> 2 downsizing on the 8-GPU fixture: ok"
