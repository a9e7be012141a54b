#!/usr/bin/env bash
# Issue 38 item 3 and the pair-group hang on the GPU machine (torch 2.11, gloo CPU ranks, every [timeout] key at its
# default, 30-minute process-group timeout; bench/gpu/fr_worker.py). First, at once (8 ranks):
#   dtype   pair groups [0,1], [2,3]; rank 1 comes 12 s late to a pair all_reduce and sends float64 where rank 0
#           sent float32: gloo aborts rank 0; the survivors' recorders are asked before they are stopped;
#   wdtype  4 ranks, rank 1 all_reduces float64 in the world group where the others send float32 (no lateness: the
#           survivors' majority says which side differs).
# Then one after the other (the live line's time after launch, not shared with other jobs' start-up):
#   pair2   pair [0,1] runs two all_reduces a step; rank 3 skips its pair all_reduce at step 3 (4 ranks);
#   tpshape init_device_mesh (2,4); rank 5 sends 8 elements in its second tp all_reduce, the others 4 (8 ranks).
# The hangs add on_suspect = restart after 5 s for the post-mortem verdict. Each rank of dtype dumps its recorder
# (FR_DUMP_DIR: rank 1 right after its float64 enqueue, the others once they waited FR_DUMP_AFTER s) for the
# fixtures. Uses the static executable from $DDPLAUNCH or beside this script; results in $OUT (./fr-mismatch-out).
set -u
here=$(cd "$(dirname "$0")" && pwd)
ddp=${DDPLAUNCH:-$here/ddplaunch}
[ -x "$ddp" ] || ddp=$here/../../build/static/ddplaunch
fw=${FR_WORKER:-$here/fr_worker.py}
out=${OUT:-fr-mismatch-out}
mkdir -p "$out"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "cpus", __import__("os").cpu_count())'

start() { # NAME NPROC [env...]: one job in the background
    local name=$1 n=$2
    shift 2
    date +%s.%N >"$out/$name.t0"
    env "$@" timeout 200 "$ddp" --nproc-per-node "$n" --set gpus.select=none ${GARGS:-} --log-dir "$out/$name" "$fw" \
        >"$out/$name.out" 2>"$out/$name.err" &
    echo $! >"$out/$name.pid"
}
after() { python3 -c "import time; print(round(time.time() - $(cat "$out/$1.t0"), 1))"; }
verdict() { # NAME: what summary.json says
    local run
    run=$(ls -d "$out/$1"/*/ | head -n 1)
    "$ddp" report "$run" >"$out/$1.report" 2>&1
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); r=s.get('root_cause') or {}; h=s.get('hang') or {}; m=s.get('mismatch') or {}; print(sys.argv[2], 'exit', s['exit_status'], 'root rank', r.get('rank'), r.get('class'), '| failures', [(f['rank'], f['class']) for f in s['failures']], '| mismatch:', m.get('why'), 'read_ms', m.get('read_ms'), '| hang:', (h.get('why') or '')[:500])" "$run/summary.json" "$1"
}
crashed() { # NAME: wait for the job, the line at the failure
    wait "$(cat "$out/$1.pid")"
    echo "$1: exit $? after $(after "$1") s"
    grep -E "died by|exited with code|flight recorder at the failure" "$out/$1.err" | cut -c1-500
    verdict "$1"
}
live() { # NAME: wait for the suspicion line, then for the post-mortem verdict (on_suspect = restart)
    local name=$1 t1= pid
    pid=$(cat "$out/$name.pid")
    for _ in $(seq 1 600); do
        grep -q "suspected hang" "$out/$name.err" && { t1=$(date +%s.%N); break; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    if [ -n "$t1" ]; then
        echo "$name: named $(python3 -c "print(round($t1 - $(cat "$out/$name.t0"), 1))") s after launch"
        grep -m1 "suspected hang" "$out/$name.err" | cut -c1-700
    else
        echo "$name: NOT named"; tail -5 "$out/$name.err"
    fi
    verdict "$name"
}

start dtype 4 FR_KIND=dtype FR_RANK=1 FR_PAIR01=1 FR_LATE=12 FR_STEPS=10 FR_DUMP_AFTER=5 FR_DUMP_DIR="$out/dumps/dtype"
start wdtype 4 FR_KIND=wdtype FR_RANK=1 FR_STEPS=10
crashed dtype
crashed wdtype
GARGS="--set timeout.on_suspect=restart --set timeout.on_suspect_after=5s"
start pair2 4 FR_KIND=pair FR_RANK=3 FR_PAIR01=2
live pair2
start tpshape 8 FR_KIND=tpshape FR_RANK=5
live tpshape
ls -R "$out/dumps" | head -20
