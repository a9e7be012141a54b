#!/usr/bin/env bash
# Issue 22 on the GPU machine: the live hang watch with the newest torch there, every [timeout] key at its default
# and torch's default process-group timeout. Four unmodified DDP loops (tests/integration/watch_worker.py) run at
# once: stuck (rank 1 stops in its data loading), other (rank 1 calls broadcast, the others all_reduce), slow
# (rank 1's data loading 40% slower), ckpt (rank 0 writes a checkpoint for 40 s). Then the same mismatch with
# the process-group timeout at 15 s, 3 ranks and 2, for the verdict when torch gives up; then, with NCCL and one
# GPU, torch's flight recorder dumped on demand through its pipe. Uses the static executable (make static)
# from $DDPLAUNCH or .devrt/ddplaunch; results (console, records, report SVGs) in $OUT (or ./hang-watch-out).
# Usage: bash bench/gpu/hang-watch.sh [gloo|nccl] [NPROC]     (env: WATCH_CKPT_S, PG_TIMEOUT_S)
#   gloo 3 (default): CPU ranks (gpus.select = none), 1 GPU is enough;  nccl 2: one GPU per rank (issue 26).
set -u
ddp=${DDPLAUNCH:-$(pwd)/.devrt/ddplaunch}
w=${WORKER:-$(pwd)/tests/integration/watch_worker.py}
out=${OUT:-hang-watch-out}
backend=${1:-gloo}
n=${2:-3}
sel=()
[ "$backend" = gloo ] && sel=(--set gpus.select=none)
mkdir -p "$out"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "gpus", torch.cuda.device_count())'

# case KIND CULPRIT [env...]: start one job in the background; its start time in $out/KIND.t0
case_start() {
    local kind=$1 culprit=$2
    shift 2
    date +%s.%N >"$out/$kind.t0"
    env WATCH_BACKEND=$backend WATCH_KIND=$kind WATCH_RANK=$culprit "$@" \
        timeout 300 "$ddp" --nproc-per-node "$n" "${sel[@]}" --log-dir "$out/$kind" "$w" \
        >"$out/$kind.out" 2>"$out/$kind.err" &
    echo $! >"$out/$kind.pid"
}

# live KIND MARK: wait for MARK (the hang began) then for the suspicion line; stop the job; print the time.
live() {
    local kind=$1 mark=$2 t0= t1= pid
    pid=$(cat "$out/$kind.pid")
    for _ in $(seq 1 900); do
        [ -z "$t0" ] && grep -q "$mark" "$out/$kind.out" && t0=$(date +%s.%N)
        [ -n "$t0" ] && grep -q "suspected hang" "$out/$kind.err" && { t1=$(date +%s.%N); break; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    running=no
    kill -0 "$pid" 2>/dev/null && running=yes
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    if [ -n "$t1" ]; then
        echo "$kind: named $(python3 -c "print(round($t1 - $t0, 1))") s after the hang began, job still running: $running"
        grep -m1 "suspected hang" "$out/$kind.err" | cut -c1-400
    else
        echo "$kind: NOT named (hang began: ${t0:-never})"; tail -5 "$out/$kind.err"
    fi
}

finished() {
    local kind=$1 pid rc
    pid=$(cat "$out/$kind.pid")
    wait "$pid"
    rc=$?
    echo "$kind: exit $rc after $(python3 -c "import time; print(round(time.time() - $(cat "$out/$kind.t0"), 1))") s"
    grep -E "straggler:|suspected hang|progress again" "$out/$kind.err" | cut -c1-300
    local run
    run=$(ls -d "$out/$kind"/*/ | head -n 1)
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('  summary stragglers:', json.dumps(s.get('stragglers')))" \
        "$run/summary.json"
}

case_start stuck 1
case_start other 1
case_start slow 1 WATCH_STEPS=110
case_start ckpt 0 WATCH_STEPS=12
live stuck "rank 1 stuck from now"
live other "rank 1 at the mismatch"
finished slow
finished ckpt
for k in stuck other slow ckpt; do
    run=$(ls -d "$out/$k"/*/ | head -n 1)
    "$ddp" report --svg "$out/$k.svg" "$run" >"$out/$k.report" 2>&1
done

# torch's own timeout ($PG_TIMEOUT_S, 15 s): the verdict on the mismatch, with 3 ranks (the minority) and 2
pgt=${PG_TIMEOUT_S:-15}
for m in $( [ "$n" -ge 3 ] && echo 3) 2; do
    env WATCH_BACKEND=$backend WATCH_KIND=other WATCH_RANK=1 WATCH_PG_TIMEOUT_S=$pgt timeout 300 "$ddp" \
        --nproc-per-node "$m" "${sel[@]}" --log-dir "$out/timeout$m" "$w" >"$out/timeout$m.out" 2>"$out/timeout$m.err"
    echo "mismatch at torch's ${pgt}s timeout, $m ranks: exit $?"
    grep -A1 "^Hang verdict" "$out/timeout$m.err" | cut -c1-400
done

# The flight recorder on demand (NCCL, one rank): where torch writes the pipe-triggered dump
if python3 -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
    fr=$(mktemp -d)
    cat >"$fr/fr.py" <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl"); torch.cuda.set_device(0)
x = torch.ones(4, device="cuda")
for i in range(5): dist.all_reduce(x)
torch.cuda.synchronize(); print("ready", flush=True); time.sleep(15); print("done", flush=True)
PY
    TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DEBUG_INFO_PIPE_FILE=$fr/pipe_ TORCH_FR_DUMP_TEMP_FILE=$fr/dump_ \
        MASTER_ADDR=127.0.0.1 MASTER_PORT=29561 RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 python3 "$fr/fr.py" >"$fr/log" 2>&1 &
    frpid=$!
    for _ in $(seq 100); do grep -q ready "$fr/log" && break; sleep 0.2; done
    t0=$(date +%s.%N)
    echo x >"$fr/pipe_0.pipe"
    for _ in $(seq 100); do [ -s "$fr/dump_0" ] && break; sleep 0.05; done
    echo "flight recorder: pipe $(ls "$fr" | grep pipe), dump $(ls "$fr" | grep dump) after $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
    wait $frpid
    python3 - "$fr/dump_0" <<'PY'
import pickle, sys
d = pickle.load(open(sys.argv[1], "rb"))
e = d["entries"][-1]
print("  dump version", d["version"], "keys", sorted(d), "entries", len(d["entries"]))
print("  last entry:", {k: e[k] for k in ("collective_seq_id", "profiling_name", "state", "input_sizes")})
PY
    cp "$fr/dump_0" "$out/fr_dump_0.pickle"
fi
