#!/usr/bin/env bash
# Run on the GPU machine (see ../shared/device/README.md): unpack the runtime libraries carried in .devrt/,
# capture the topology beside nvidia-smi's, then run bench.py. Results go to $OUT (or ./bench-out).
# Usage: bash bench/gpu/run.sh [reps] [cases]
set -u
reps=${1:-5}
cases=${2:-train,true,failfast,timeout,kill9}
out=${OUT:-bench-out}
mkdir -p "$out" /tmp/rt
for f in .devrt/*.deb; do dpkg -x "$f" /tmp/rt; done
export LD_LIBRARY_PATH=/tmp/rt/usr/lib/x86_64-linux-gnu:/tmp/rt/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/tmp/rt/usr/bin:$PATH
ddp=$(pwd)/.devrt/ddplaunch
{
    echo "== nvidia-smi topo -m"; nvidia-smi topo -m
    echo "== ddplaunch topo"; "$ddp" topo
    echo "== ddplaunch plan --nproc-per-node gpu"; "$ddp" plan --nproc-per-node gpu examples/train_ddp.py | sed -n '/^Nodes/,/^local rank 0/p'
    echo "== ddplaunch doctor"; "$ddp" doctor --nproc-per-node 2 examples/train_ddp.py; echo "doctor exit $?"
    echo "== nvidia-smi"; nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version,memory.used --format=csv
    echo "== torchrun"; torchrun --help | head -3; python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
} > "$out/topo.txt" 2>&1
lstopo-no-graphics --of xml > "$out/topo.xml" 2>/dev/null || true
python3 bench/gpu/bench.py --ddplaunch "$ddp" --out "$out/results.json" --reps "$reps" --cases "$cases" \
    ${BENCH_MERGE:+--merge "$BENCH_MERGE"} 2>&1 | tee "$out/bench.log" | tail -80
