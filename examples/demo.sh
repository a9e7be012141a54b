#!/usr/bin/env bash
# `make demo`: a real multi-worker DDP training run through ddplaunch on whatever this machine has:
# one worker per GPU with NCCL when GPUs are visible, else 2-4 CPU workers with gloo.
set -euo pipefail
ddp=${1:-build/ddplaunch}
cd "$(dirname "$0")/.."

# A Python that has torch: $PYTHON_EXEC, python3 on PATH, or Debian's python3-torch.
py=
for cand in "${PYTHON_EXEC:-}" "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import torch' >/dev/null 2>&1 && { py=$cand; break; }
done
[ -n "$py" ] || { echo "demo: no python3 with torch found (run 'make deps' as root)" >&2; exit 1; }
export PYTHON_EXEC=$py

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    nproc_arg=gpu
else
    n=$(nproc)
    nproc_arg=$(( n < 2 ? 2 : n > 4 ? 4 : n ))
fi

echo "== ddplaunch plan (what will start, and why)"
"$ddp" plan --nproc-per-node "$nproc_arg" examples/train_ddp.py --steps 20 | sed -n '/^Nodes/,/^local rank 0/p' | sed '$d'
echo "== ddplaunch --nproc-per-node $nproc_arg examples/train_ddp.py --steps 20"
exec "$ddp" --nproc-per-node "$nproc_arg" --max-restarts 1 examples/train_ddp.py --steps 20
