#!/usr/bin/env bash
# Issue 18 on the GPU machine with 2 GPUs (nvidia-h200-x2): a real NCCL hang of each kind, and the verdict
# ddplaunch gives before stopping it. Unpacks nothing: uses the static executable (make static) carried as
# .devrt/ddplaunch, or $DDPLAUNCH. Results (console, run records, stacks, report SVG) go to $OUT (or ./hang-out).
# Usage: bash bench/gpu/hang.sh [pg-timeout-seconds]
set -u
ddp=${DDPLAUNCH:-$(pwd)/.devrt/ddplaunch}
out=${OUT:-hang-out}
pgt=${1:-15}
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
for k in outside:1 other:1 slow:0; do
    kind=${k%:*} culprit=${k#*:}
    start=$(date +%s.%N)
    HANG_BACKEND=nccl HANG_RANK=$culprit HANG_KIND=$kind HANG_PG_TIMEOUT_S=$pgt HANG_SLOW_S=$((pgt * 3)) \
        timeout 300 "$ddp" --nproc-per-node 2 --log-dir "$out/$kind" tests/integration/hang_worker.py \
        >"$out/$kind.out" 2>"$out/$kind.err"
    rc=$?
    secs=$(python3 -c "import time; print(round(time.time() - $start, 1))")
    run=$(ls -d "$out/$kind"/*/ | head -n 1)
    got=$(python3 -c "import json,sys; h=json.load(open(sys.argv[1]+'/summary.json')).get('hang') or {}; print(','.join(str(c['rank']) for c in h.get('culprits', [])), h.get('confidence'), len(h.get('flight_recorder', [])))" "$run")
    echo "$kind: exit $rc after ${secs}s; culprit,confidence,flight-recorder files: $got (expected culprit $culprit)"
    grep -A2 '^Hang verdict' "$out/$kind.err" | head -3
    "$ddp" report --svg "$out/$kind.svg" "$run" >"$out/$kind.report" 2>&1
done
