#!/bin/bash
# Warm restart proof on the GPU host (issue 41): warm-restart.sh [DIR]. DIR (default .devrt) holds the static
# ddplaunch and the DDP tutorial (multigpu_torchrun.py, datautils.py from pytorch/examples). Writes under $OUT.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
D=$(cd "${1:-.devrt}" && pwd); DDP=$D/ddplaunch; HERE=$(cd "$(dirname "$0")" && pwd)
{ python3 -c 'import torch,sys; print("torch", torch.__version__, sys.executable)'
  for i in 1 2 3; do python3 -c 'import time; t=time.time(); import torch, torch.distributed; print("import torch, torch.distributed: %.2f s" % (time.time()-t))'; done
  python3 -c 'import torch, torch.distributed, os; print("RSS after import:", [l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].strip())'
  # does a standby's preload touch CUDA's driver? (what a standby holds after it: GPU device descriptors, libcuda)
  for pre in "torch, torch.distributed" "torch, torch.distributed, torch._dynamo"; do
    python3 -c 'import os, sys, torch
for m in sys.argv[1].split(","):
    try:
        __import__(m.strip())
    except ModuleNotFoundError as e:
        print("not installed:", e.name)
def link(f):
    try:
        return os.readlink("/proc/self/fd/" + f)
    except OSError:
        return ""
fds = sorted({link(f) for f in os.listdir("/proc/self/fd") if link(f).startswith("/dev/nvidia")})
cuda = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libcuda.so" in l})
print("after import %s: /dev/nvidia* descriptors %s, libcuda mapped %s, torch.cuda initialised %s" % (sys.argv[1], fds or "none", cuda or "no", torch.cuda.is_initialized()))' "$pre"
  done
} > "$OUT/import.txt" 2>&1
cat "$OUT/import.txt"
# the hang restart: 3 gloo ranks, warm (HANG=0: not this time)
[ "${HANG:-1}" = 0 ] || ( cd "$D" && timeout 150 "$DDP" -v --nproc-per-node 3 --max-restarts 1 --warm-restart --set restart.backoff=0 \
    --set gpus.select=none --set timeout.stall=8s --set timeout.heartbeat=file "$HERE/warm_hang.py" ) > "$OUT/hang.txt" 2>&1
rc=$?; [ "${HANG:-1}" = 0 ] || { echo "hang restart: exit $rc"; grep -E "warm|standby|attempt 1|done|timeout|stall" "$OUT/hang.txt" | tail -15; }
timeout ${TUT_TIMEOUT:-280} python3 "$HERE/warm_restart.py" "$D" "$DDP" "$OUT/tutorial.jsonl" "${RUNS:-3}" ${NAMES:-}
# where a restarted rank's seconds go (PHASES=0: not this time): the tutorial's set-up step by step in a fresh
# python, a warm rank and a cold one (warm_phases_run.py), medians of PHASE_ROUNDS
[ "${PHASES:-1}" = 0 ] || timeout ${PHASES_TIMEOUT:-280} python3 "$HERE/warm_phases_run.py" "$D" "$DDP" "$OUT/phases" \
    "${PHASE_ROUNDS:-3}" ${PHASE_MODES:-fresh,warm,warm-nosample,warm-preload,cold,fresh-profile,warm-profile}
