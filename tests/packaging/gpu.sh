#!/usr/bin/env bash
# The shipped ddplaunch on a GPU machine (README "Install"): the static executable alone (no Debian libraries
# beside it) and the wheel's executable in a fresh venv, each running examples/train_ddp.py with NCCL on every
# visible GPU. Usage, from the repository root: bash tests/packaging/gpu.sh DIR
# where DIR holds ddplaunch (make static) and ddplaunch-*.whl (make wheel). Keeps the machine's NCCL
# settings (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 where it sets them).
set -u
dir=${1:?usage: gpu.sh DIR}
steps=${STEPS:-20}
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
say() { printf '\n== %s\n' "$*"; }
rc_all=0

say "machine"
grep PRETTY_NAME /etc/os-release
ldd --version | head -n 1
nvidia-smi -L
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", ".".join(map(str, torch.cuda.nccl.version())), "gpus", torch.cuda.device_count())'
ngpu=$(nvidia-smi -L | grep -c '^GPU')

say "static executable: $dir/ddplaunch"
chmod +x "$dir/ddplaunch"
ldd "$dir/ddplaunch"
"$dir/ddplaunch" --version
"$dir/ddplaunch" topo | head -n 12
"$dir/ddplaunch" doctor | head -n 20
say "static: ddplaunch --nproc-per-node gpu examples/train_ddp.py --steps $steps ($ngpu GPU(s), NCCL)"
start=$(date +%s.%N)
"$dir/ddplaunch" --nproc-per-node gpu examples/train_ddp.py --steps "$steps" >/tmp/static.out 2>&1
rc=$?
end=$(date +%s.%N)
grep -E "allreduce|done|FAILED|error" /tmp/static.out | head -n 8
echo "static: exit status $rc, wall $(echo "$end - $start" | bc 2>/dev/null || python3 -c "print(round($end - $start, 2))") s"
[ $rc = 0 ] || { tail -n 30 /tmp/static.out; rc_all=1; }

say "wheel: fresh venv, pip install --no-index"
venv=/tmp/ddpvenv
rm -rf "$venv"
if ! python3 -m venv --system-site-packages "$venv" 2>/tmp/venv.err; then
    echo "python3 -m venv with pip failed ($(tail -n 1 /tmp/venv.err)); creating it --without-pip"
    python3 -m venv --system-site-packages --without-pip "$venv" || { echo "no venv"; exit 1; }
fi
if [ -x "$venv/bin/pip" ]; then pip=("$venv/bin/pip"); else pip=("$venv/bin/python3" -m pip); fi
# torch may itself live in a venv (python3 on PATH is /opt/.../.venv/bin/python3): --system-site-packages then
# shows the distribution's site-packages, not that one. Make the fresh venv see the torch python3 sees.
if ! "$venv/bin/python3" -c 'import torch' 2>/dev/null; then
    tsite=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
    vsite=$("$venv/bin/python3" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$tsite" >"$vsite/torch-site.pth"
    echo "torch is not in the base interpreter's site-packages; $vsite/torch-site.pth -> $tsite"
fi
"${pip[@]}" install --no-index "$dir"/ddplaunch-*.whl || { echo "pip install failed"; exit 1; }
. "$venv/bin/activate"
command -v ddplaunch
ldd "$(command -v ddplaunch)"
ddplaunch --version
say "wheel: ddplaunch --nproc-per-node gpu examples/train_ddp.py --steps $steps ($ngpu GPU(s), NCCL)"
start=$(date +%s.%N)
ddplaunch --nproc-per-node gpu examples/train_ddp.py --steps "$steps" >/tmp/wheel.out 2>&1
rc=$?
end=$(date +%s.%N)
grep -E "allreduce|done|FAILED|error" /tmp/wheel.out | head -n 8
echo "wheel: exit status $rc, wall $(python3 -c "print(round($end - $start, 2))") s"
[ $rc = 0 ] || { tail -n 30 /tmp/wheel.out; rc_all=1; }
exit $rc_all
