#!/usr/bin/env bash
# Hints for two common mistakes (issue 54): an old torch.distributed.launch script whose argparse requires
# --local_rank (or refuses torch 2.x launch's --local-rank) gets class local-rank-arg and a hint that says how to
# read LOCAL_RANK or pass it unchanged, and that way works; torch's CPU allocator failing ("DefaultCPUAllocator:
# can't allocate memory") gets its own class, cpu-oom, with a host-memory hint instead of the generic exit one.
. "$DDP_SRCDIR/tests/integration/lib.sh"
cd "$TMP" || fail "no TMP"
printf 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--local_rank", type=int, required=True)\np.add_argument("--lr")\nprint("args", vars(p.parse_args()))\n' \
    >old.py
"$DDP" --nproc-per-node 2 --log-dir logs old.py --lr 0.1 >out 2>err
expect_eq "status (argparse's)" "$?" 2
expect_grep '^  class +: local-rank-arg$' err
expect_grep "^  hint +: the script's argparse expects --local_rank, .*LOCAL_RANK.*--no-python sh -c 'exec python3 SCRIPT --local_rank=\\\$LOCAL_RANK \"\\\$@\"' sh ARGS" err
expect_eq "summary.json's class" "$(jq -r .root_cause.class logs/*/summary.json)" local-rank-arg
# ... and the way the hint gives works, the script unchanged.
"$DDP" --nproc-per-node 2 --no-python sh -c "exec $PY old.py --local_rank=\$LOCAL_RANK \"\$@\"" sh --lr 0.1 >out 2>err ||
    { cat err; fail "the hint's way failed"; }
expect_eq "ranks' own --local_rank" "$(grep -o "'local_rank': [0-9]" out | sort | paste -sd' ')" "'local_rank': 0 'local_rank': 1"
# torch 2.x's launch passes --local-rank: a script that defines only --local_rank refuses it.
printf 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--local_rank", type=int, default=0)\np.parse_args()\n' >new.py
"$DDP" --nproc-per-node 1 new.py --local-rank=0 >out 2>err
expect_eq "status (argparse's)" "$?" 2
expect_grep '^  class +: local-rank-arg$' err

$PY -c 'import torch' 2>/dev/null || skip "no torch for $PY: cpu-oom not tried"
printf 'import torch\ntorch.empty(10**15, dtype=torch.uint8)\n' >alloc.py
"$DDP" --nproc-per-node 1 --log-dir logs2 alloc.py >out 2>err
expect_eq "status" "$?" 1
expect_grep '^  class +: cpu-oom$' err
expect_grep "^  hint +: host memory ran out \(torch's CPU allocator\)" err
expect_eq "summary.json's class" "$(jq -r .root_cause.class logs2/*/summary.json)" cpu-oom
echo ok
