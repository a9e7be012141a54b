#!/usr/bin/env bash
# More workers than GPUs (issue 23 item 9): `--nproc-per-node 3` on a host with one GPU. torchrun (Debian's
# 1.13, through bench/torchrun.py) starts 3 workers that all see every GPU; ddplaunch refuses (exit 2) with a
# message that names the setting, and with it (--share-gpus, [gpus] share = yes) starts 3 workers sharing the
# GPUs round-robin. The GPU hosts are hwloc XML fixtures: our 1-GPU workstation (1s-1gpu.xml) and the 2-GPU
# device VM (vm-2gpu-h200-nonuma.xml). Each worker reports what it saw; rank 0 also counts the GPU leases the
# job holds while it runs.
. "$DDP_SRCDIR/tests/integration/lib.sh"
one=$TOPO_DIR/1s-1gpu.xml
two=$TOPO_DIR/vm-2gpu-h200-nonuma.xml
[ -r "$one" ] && [ -r "$two" ] || fail "fixtures $one and $two are part of the repository"
cat >"$TMP/worker.sh" <<'W'
leases=-
if [ "$LOCAL_RANK" = 0 ] && [ -n "${DDPLAUNCH_LOCK_DIR-}" ]; then
    leases=$(grep -F " @ddplaunch$DDPLAUNCH_LOCK_DIR/gpu-" /proc/net/unix | awk '{print $NF}' | sort -u | grep -c .)
fi
echo "lr=$LOCAL_RANK lws=$LOCAL_WORLD_SIZE ws=$WORLD_SIZE cvd=${CUDA_VISIBLE_DEVICES-unset} bus=${DDPLAUNCH_GPU_BUSID-none} leases=$leases"
W
# field NAME FILE: the values of NAME=, one per worker, sorted
field() { sed -n "s/.*\<$1=\([^ ]*\).*/\1/p" "$2" | sort | tr '\n' ' '; }

# ---- torchrun: 3 workers whatever the GPUs, no CUDA_VISIBLE_DEVICES
have_torch || skip "python3-torch is not installed (torchrun 1.13 is the reference)"
# --master_port 0: torchrun's store binds a port the kernel picks (worker.sh needs no MASTER_PORT).
env -u OMP_NUM_THREADS -u CUDA_VISIBLE_DEVICES -u DDPLAUNCH_LOCK_DIR $PY "$DDP_SRCDIR/bench/torchrun.py" \
    --monitor_interval 0.1 --master_port 0 --nproc_per_node 3 --no_python /bin/sh "$TMP/worker.sh" \
    >"$TMP/tr.out" 2>"$TMP/tr.err" || { cat "$TMP/tr.err"; fail "torchrun failed"; }
expect_eq "torchrun: workers started" "$(grep -c '^lr=' "$TMP/tr.out")" 3
expect_eq "torchrun: LOCAL_RANK" "$(field lr "$TMP/tr.out")" "0 1 2 "
expect_eq "torchrun: LOCAL_WORLD_SIZE" "$(field lws "$TMP/tr.out")" "3 3 3 "
expect_eq "torchrun: CUDA_VISIBLE_DEVICES" "$(field cvd "$TMP/tr.out")" "unset unset unset "

# ---- ddplaunch without the setting: exit 2 before anything starts, and the message names the setting
unset CUDA_VISIBLE_DEVICES
"$DDP" --topology "$one" --nproc-per-node 3 --no-python /bin/sh "$TMP/worker.sh" >"$TMP/no.out" 2>"$TMP/no.err"
expect_eq "1 GPU, 3 workers, no setting: exit status" "$?" 2
expect_eq "1 GPU, 3 workers, no setting: workers started" "$(grep -c '^lr=' "$TMP/no.out")" 0
expect_grep '^ddplaunch: error: asked for 3 GPUs, but only 1 of the 1 GPUs here is usable; .*--share-gpus \(\[gpus\] share = yes\)$' \
    "$TMP/no.err"
"$DDP" --topology "$two" --nproc-per-node 3 --no-python /bin/sh "$TMP/worker.sh" >"$TMP/no2.out" 2>"$TMP/no2.err"
expect_eq "2 GPUs, 3 workers, no setting: exit status" "$?" 2
expect_grep 'only 2 of the 2 GPUs here are usable; .*--share-gpus \(\[gpus\] share = yes\)' "$TMP/no2.err"
# doctor's gpus check says the same, and its todo names the setting
"$DDP" doctor --topology "$one" --nproc-per-node 3 --no-python /bin/true >"$TMP/doc.out" 2>&1
expect_grep '^fail +gpus +1 GPU visible, 1 usable, 3 wanted: .*use nproc_per_node = 1, or --share-gpus \(\[gpus\] share = yes\)' \
    "$TMP/doc.out"

# ---- ddplaunch --share-gpus on 1 GPU: torchrun's 3 workers, each seeing the one GPU
"$DDP" --topology "$one" --nproc-per-node 3 --share-gpus --numa-binding none \
    --no-python /bin/sh "$TMP/worker.sh" >"$TMP/one.out" 2>"$TMP/one.err" || { cat "$TMP/one.err"; fail "--share-gpus on 1 GPU failed"; }
cat "$TMP/one.out"
expect_eq "1 GPU shared: workers started" "$(grep -c '^lr=' "$TMP/one.out")" 3
expect_eq "1 GPU shared: LOCAL_RANK as torchrun" "$(field lr "$TMP/one.out")" "$(field lr "$TMP/tr.out")"
expect_eq "1 GPU shared: LOCAL_WORLD_SIZE as torchrun" "$(field lws "$TMP/one.out")" "$(field lws "$TMP/tr.out")"
expect_eq "1 GPU shared: CUDA_VISIBLE_DEVICES" "$(field cvd "$TMP/one.out")" "0 0 0 "
expect_eq "1 GPU shared: GPU of each worker" "$(field bus "$TMP/one.out")" "0000:3b:00.0 0000:3b:00.0 0000:3b:00.0 "
expect_eq "1 GPU shared: leased once" "$(grep '^lr=0 ' "$TMP/one.out" | sed 's/.*leases=//')" 1
# the same from a job spec key
cat >"$TMP/job.ini" <<EOF
[job]
program = /bin/sh
args = $TMP/worker.sh
nproc_per_node = 3
[gpus]
share = yes
[numa]
bind = none
EOF
"$DDP" --topology "$one" "$TMP/job.ini" >"$TMP/ini.out" 2>"$TMP/ini.err" || { cat "$TMP/ini.err"; fail "[gpus] share = yes failed"; }
expect_eq "[gpus] share = yes: workers started" "$(grep -c '^lr=' "$TMP/ini.out")" 3
"$DDP" doctor --topology "$one" "$TMP/job.ini" >"$TMP/doc2.out" 2>&1
expect_grep '^ok +gpus +1 GPU visible \(1 usable\); would pick 0000:3b:00.0 \(.*3 workers share it, round-robin' "$TMP/doc2.out"

# ---- 2 GPUs, 3 workers: round-robin 0,1,0; per-job every worker sees both, per-rank only its own
"$DDP" --topology "$two" --nproc-per-node 3 --share-gpus --numa-binding none \
    --no-python /bin/sh "$TMP/worker.sh" >"$TMP/two.out" 2>"$TMP/two.err" || { cat "$TMP/two.err"; fail "--share-gpus on 2 GPUs failed"; }
cat "$TMP/two.out"
expect_eq "2 GPUs shared: workers started" "$(grep -c '^lr=' "$TMP/two.out")" 3
expect_eq "2 GPUs shared: CUDA_VISIBLE_DEVICES" "$(field cvd "$TMP/two.out")" "0,1 0,1 0,1 "
expect_eq "2 GPUs shared: rank 2 on GPU 0" "$(grep '^lr=2 ' "$TMP/two.out" | sed 's/.*bus=\([^ ]*\).*/\1/')" 0000:00:06.0
expect_eq "2 GPUs shared: rank 1 on GPU 1" "$(grep '^lr=1 ' "$TMP/two.out" | sed 's/.*bus=\([^ ]*\).*/\1/')" 0000:00:07.0
expect_eq "2 GPUs shared: each leased once" "$(grep '^lr=0 ' "$TMP/two.out" | sed 's/.*leases=//')" 2
"$DDP" --topology "$two" --nproc-per-node 3 --share-gpus --set gpus.visible=per-rank --numa-binding none \
    --no-python /bin/sh "$TMP/worker.sh" >"$TMP/pr.out" 2>"$TMP/pr.err" || { cat "$TMP/pr.err"; fail "per-rank failed"; }
expect_eq "2 GPUs shared, per-rank: CUDA_VISIBLE_DEVICES of ranks 0,1,2" \
    "$(sort "$TMP/pr.out" | sed 's/.*cvd=\([^ ]*\).*/\1/' | tr '\n' ' ')" "0 1 0 "
echo "3 workers: torchrun starts 3 (no CUDA_VISIBLE_DEVICES); ddplaunch refuses naming --share-gpus, and with it" \
    "starts 3 on 1 GPU (cvd 0) and on 2 GPUs (round-robin, each GPU leased once): ok"
