#!/usr/bin/env bash
# bench/gpu/compare.sh REF_BIN NEW_BIN [TUTORIAL_DIR] (from the repository root, on the GPU machine; two static
# ddplaunch binaries, `bench/compare.sh --static --keep DIR` builds them): issue 40's figures side by side in one run.
#  1. bench/compare.py: 1 GPU worker, plan (1 GPU), 1 and 8 CPU workers vs sh, peak RSS, kill -9 to restarted,
#     1024 c10d agents start/stop/serving RSS (gpus.select=none), ratios to REF.
#  2. What a CPU-only launcher (gpus.select=none) holds while its worker runs: /dev/nvidia* descriptors,
#     libnvidia-ml mapped, threads, whether the worker's exec shim was forked; and a GPU launcher beside it.
#  3. kill -9 of the DDP tutorial's rank (pytorch/examples distributed/ddp-tutorial-series/multigpu_torchrun.py,
#     1 GPU, a snapshot every epoch) until the restarted rank prints "Loading snapshot": ddplaunch (new, ref)
#     and torchrun, interleaved, RUNS runs each (default 2). The tutorial's files are not in this repository:
#     TUTORIAL_DIR holds multigpu_torchrun.py and datautils.py.
# Writes everything to stdout (and $OUT/compare-gpu.txt when OUT is set).
set -u
ref=$(realpath "$1") new=$(realpath "$2") tut=${3:-}
runs=${RUNS:-2}
out=${OUT:-/tmp}/compare-gpu.txt
: >"$out"
say() { echo "$*" | tee -a "$out"; }
say "== $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader 2>/dev/null); $(nproc) CPUs; $(date -u '+%F %H:%M') UTC =="

say "== 1. bench/compare.py (medians; ref = $1) =="
python3 bench/compare.py --ref "$ref" --new "$new" --ref-name 3ea4b4b --rounds "${ROUNDS:-15}" \
    --agents "${AGENTS:-1024}" --agent-runs "${AGENT_RUNS:-2}" --gpu yes 2>&1 | tee -a "$out"

say "== 2. what a launcher holds while its worker runs (sleep 1) =="
holds() { # NAME BIN ARGS...
    local name=$1 bin=$2 pid fds maps thr
    shift 2
    "$bin" "$@" --nproc-per-node 1 --no-python /bin/sleep 1 >/dev/null 2>&1 &
    pid=$!
    sleep 0.6
    fds=$(ls -l /proc/$pid/fd 2>/dev/null | grep -c /dev/nvidia)
    maps=$(grep -c libnvidia-ml /proc/$pid/maps 2>/dev/null)
    thr=$(ls /proc/$pid/task 2>/dev/null | wc -l)
    # The worker's exec shim: forked by the launcher (467ee2a) or executed (its command line then has --ppid=).
    shim=$(ps -o args= --ppid "$pid" 2>/dev/null | grep -m1 -- --exec-shim)
    case $shim in *--ppid=*) shim="executed" ;; "") shim="none" ;; *) shim="forked" ;; esac
    wait $pid
    say "$(printf '%-34s /dev/nvidia* fds: %s  libnvidia-ml mappings: %s  threads: %s  shim: %s' "$name" "$fds" "$maps" "$thr" "$shim")"
}
holds "ref, CPU-only (select = none)" "$ref" --set gpus.select=none
holds "new, CPU-only (select = none)" "$new" --set gpus.select=none
holds "ref, 1 GPU worker" "$ref"
holds "new, 1 GPU worker" "$new"

[ -n "$tut" ] && [ -r "$tut/multigpu_torchrun.py" ] || { say "== 3. skipped: no tutorial in '$tut' =="; exit 0; }
say "== 3. kill -9 of the DDP tutorial's rank to its \"Loading snapshot\" (1 GPU, snapshot every epoch) =="
export PYTHONUNBUFFERED=1
snap() { # NAME CMD...: prints seconds from kill -9 of the rank to the restarted rank's "Loading snapshot"
    local name=$1 d l pid rank t0 t1 i
    shift
    d=$(mktemp -d /tmp/ddptut.XXXXXX)
    cp "$tut"/multigpu_torchrun.py "$tut"/datautils.py "$d"/
    (cd "$d" && exec "$@" >"$d/log" 2>&1) &
    l=$!
    for i in $(seq 1 1200); do [ -s "$d/snapshot.pt" ] && grep -q "Epoch 2 " "$d/log" && break; sleep 0.05; done
    rank=""
    for pid in $(pgrep -f multigpu_torchrun.py); do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx LOCAL_RANK=0 &&
            readlink "/proc/$pid/exe" | grep -q python && rank=$pid
    done
    if [ -z "$rank" ]; then say "$name: no rank found"; kill $l; wait $l; return; fi
    t0=$(date +%s%N)
    kill -9 "$rank"
    for i in $(seq 1 6000); do grep -q "Loading snapshot" "$d/log" && break; sleep 0.005; done
    t1=$(date +%s%N)
    grep -q "Loading snapshot" "$d/log" && say "$(awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-12s %.2f s", n, (b - a) / 1e9 }')" ||
        { say "$name: no \"Loading snapshot\" within 30 s"; tail -5 "$d/log" | tee -a "$out"; }
    kill -TERM $l 2>/dev/null
    wait $l 2>/dev/null
    rm -rf "$d"
}
for r in $(seq 1 "$runs"); do
    snap "ddplaunch" "$new" --nproc-per-node 1 --max-restarts 1 multigpu_torchrun.py 100000 1
    snap "torchrun" torchrun --nproc-per-node 1 --max-restarts 1 --monitor-interval 0.1 multigpu_torchrun.py 100000 1
    snap "ref 3ea4b4b" "$ref" --nproc-per-node 1 --max-restarts 1 multigpu_torchrun.py 100000 1
done
