#!/usr/bin/env bash
# Real PyTorch (issue 3): examples/train_ddp.py on 2 and 4 CPU workers with gloo through ddplaunch; the
# all-reduced values are right, training finishes with the same result at both sizes; a failing rank's exit
# code comes back with a summary naming it.
. "$DDP_SRCDIR/tests/integration/lib.sh"
have_torch || skip "python3-torch is not installed"
TRAIN=$DDP_SRCDIR/examples/train_ddp.py
[ -f "$TRAIN" ] || skip "examples/train_ddp.py is missing"

for n in 2 4; do
    "$DDP" --nproc-per-node $n --console lines "$TRAIN" --steps 5 --backend gloo >"$TMP/out.$n" 2>"$TMP/err.$n"
    rc=$?
    [ $rc = 0 ] || { cat "$TMP/out.$n" "$TMP/err.$n"; fail "train_ddp.py on $n workers: exit $rc"; }
    sum=$((n * (n + 1) / 2))
    expect_grep "^\[rank0\]: allreduce sum=$sum expected=$sum world_size=$n orig_world_size=$n backend=gloo attempt=0 " "$TMP/out.$n"
    expect_grep "^\[rank0\]: step 4 loss [0-9.]+$" "$TMP/out.$n"
    expect_grep "^\[rank0\]: done steps=5 world_size=$n checksum=" "$TMP/out.$n"
done
# Same global batch, same data: the trained weights agree between 2 and 4 workers.
c2=$(sed -n 's/.*checksum=//p' "$TMP/out.2")
c4=$(sed -n 's/.*checksum=//p' "$TMP/out.4")
$PY -c "import sys; a, b = float('$c2'), float('$c4'); sys.exit(0 if abs(a - b) < 1e-3 else 1)" ||
    fail "checksums differ between 2 ($c2) and 4 ($c4) workers"

# Rank 1 fails with exit code 3 after step 1: ddplaunch exits 3, the summary names rank 1.
"$DDP" --nproc-per-node 2 "$TRAIN" --steps 5 --backend gloo --fail-rank 1 --fail-step 1 --exit-code 3 \
    >"$TMP/out" 2>"$TMP/err"
expect_eq "status of a failing rank" "$?" 3
sed -n '/^Root Cause/,$p' "$TMP/err" >"$TMP/root"
expect_grep 'rank +: 1 \(local_rank: 1\)' "$TMP/root"
expect_grep 'exitcode +: 3 ' "$TMP/root"
echo ok
