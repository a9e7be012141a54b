#!/usr/bin/env bash
# Leases (issue 24, item 4): one lock directory is one namespace however it is spelled. Four concurrent 2-GPU
# jobs on the 8-GPU fixture, their DDPLAUNCH_LOCK_DIR spelled /x/locks, /x/locks/, /x//locks and /x/./locks,
# get 8 distinct GPUs and 4 distinct ports (before: four namespaces, the same GPUs and port for all).
. "$DDP_SRCDIR/tests/integration/lib.sh"
TOPO=$TOPO_DIR/2s-8gpu-aws-g4dn-metal-t4.xml
[ -r "$TOPO" ] || fail "fixture $TOPO not found"
WORKER=$DDP_SRCDIR/tests/integration/hold_gpu.sh
L=$TMP/locks
spell=("$L" "$L/" "${L%/locks}//locks" "${L%/locks}/./locks")
i=0
for j in a b c d; do
    mkdir -p "$TMP/$j"
    DDPLAUNCH_LOCK_DIR=${spell[$i]} "$DDP" --topology "$TOPO" --nproc-per-node 2 --numa-binding none \
        --set "job.name=$j" --no-python "$WORKER" "$TMP/$j" >"$TMP/$j/out" 2>&1 &
    echo $! >"$TMP/$j/pid"
    i=$((i + 1))
done
for j in a b c d; do wait_gpus "$j"; done
gpus=$(cat "$TMP"/[abcd]/gpu.* | sort)
expect_eq "GPUs of four jobs" "$(echo "$gpus" | grep -c .)" 8
expect_eq "distinct GPUs of four jobs" "$(echo "$gpus" | sort -u | grep -c .)" 8
ports=$(cat "$TMP"/[abcd]/port.0 | sort -u)
expect_eq "distinct ports of four jobs" "$(echo "$ports" | grep -c .)" 4
# the kernel's locks are all in the one namespace
expect_eq "gpu locks in $L" "$(klock_count gpu-)" 8
# ps from any spelling lists the four jobs
for s in "${spell[@]}"; do
    expect_eq "jobs in ps with DDPLAUNCH_LOCK_DIR=$s" \
        "$(DDPLAUNCH_LOCK_DIR=$s "$DDP" ps --json | $PY -c 'import json,sys; print(len(json.load(sys.stdin)))')" 4
done
for j in a b c d; do touch "$TMP/$j/stop"; done
for j in a b c d; do wait "$(cat "$TMP/$j/pid")" || fail "job $j: status $?"; done
echo ok
