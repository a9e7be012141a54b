#!/usr/bin/env bash
# Issue 31 on the GPU machine (torch 2.11): the live hang watch reading torch's flight recorder, every [timeout] key
# at its default and a 30-minute process-group timeout. At once: the async/poll form (bench/gpu/fr_worker.py: the
# ranks enqueue and poll, as NCCL jobs wait) of a rank stuck in its data loader, an op mismatch, a shape mismatch,
# a 40% slower rank, rank 0 checkpointing 40 s; the in-collective cases (tests/integration/watch_worker.py stuck,
# other); a 1-rank NCCL job whose recorder status must reach summary.json. Then the cost: the same CPU-bound 3-rank
# job with [timeout] sample on and off, twice each. Uses the static executable (make static) from $DDPLAUNCH or
# beside this script; results in $OUT (or ./fr-proof-out). Usage: bash bench/gpu/fr-proof.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
# in the repository (bench/gpu/) or copied flat beside ddplaunch and the workers (as run on the GPU machine)
ddp=${DDPLAUNCH:-$here/ddplaunch}
[ -x "$ddp" ] || ddp=$here/../../build/static/ddplaunch
fw=${FR_WORKER:-$here/fr_worker.py}
ww=${WATCH_WORKER:-$here/watch_worker.py}
[ -f "$ww" ] || ww=$here/../../tests/integration/watch_worker.py
out=${OUT:-fr-proof-out}
mkdir -p "$out"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "gpus", torch.cuda.device_count())'

# start NAME WORKER NPROC [env...]: one job in the background
start() {
    local name=$1 worker=$2 n=$3 sel=(--set gpus.select=none)
    shift 3
    [ "$n" = 1 ] && sel=()
    date +%s.%N >"$out/$name.t0"
    env "$@" timeout 300 "$ddp" --nproc-per-node "$n" "${sel[@]}" ${GARGS:-} --log-dir "$out/$name" "$worker" \
        >"$out/$name.out" 2>"$out/$name.err" &
    echo $! >"$out/$name.pid"
}

# live NAME: wait for the suspicion line, stop the job, print how long after launch it came and the line
live() {
    local name=$1 t1= pid
    pid=$(cat "$out/$name.pid")
    for _ in $(seq 1 1000); do
        grep -q "suspected hang" "$out/$name.err" && { t1=$(date +%s.%N); break; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    # LIVE_WAIT=S: the job stops itself (on_suspect = restart): give it S seconds for the post-mortem verdict
    for _ in $(seq 1 $((${LIVE_WAIT:-0} * 5))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    if [ -n "$t1" ]; then
        echo "$name: named $(python3 -c "print(round($t1 - $(cat "$out/$name.t0"), 1))") s after launch"
        grep -m1 "suspected hang" "$out/$name.err" | cut -c1-600
    else
        echo "$name: NOT named"
        tail -5 "$out/$name.err"
    fi
}

finished() {
    local name=$1 pid rc run
    pid=$(cat "$out/$name.pid")
    wait "$pid"
    rc=$?
    echo "$name: exit $rc after $(python3 -c "import time; print(round(time.time() - $(cat "$out/$name.t0"), 1))") s"
    grep -E "straggler:|suspected hang|progress again" "$out/$name.err" | cut -c1-400
    run=$(ls -d "$out/$name"/*/ | head -n 1)
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('  summary flight_recorder:', json.dumps(s.get('flight_recorder'))[:600]); print('  summary stragglers:', json.dumps(s.get('stragglers'))[:300])" "$run/summary.json"
}

# groups: issue 38's cases only (several process groups; bash fr-proof.sh groups): each rank dumps its recorder
# after 25 s of waiting (FR_DUMP_DIR: JSON for the fixtures, pickles for torch's analyzer, run on them), the live
# line and when it came, the post-mortem verdict, hang.chain; then a 1-rank NCCL job's RAS port and query.
if [ "${1:-}" = groups ]; then
    # the hangs: live line with every [timeout] default, then stopped as a hang 5 s later for the post-mortem verdict
    GARGS="--set timeout.on_suspect=restart --set timeout.on_suspect_after=5s"
    start g-pair2 "$fw" 4 FR_KIND=pair FR_RANK=3 FR_PAIR01=2 FR_DUMP_DIR="$out/dumps/pair2"
    start g-pair1 "$fw" 4 FR_KIND=pair FR_RANK=3 FR_PAIR01=1 FR_DUMP_DIR="$out/dumps/pair1"
    start g-mesh2x2 "$fw" 4 FR_KIND=mesh FR_RANK=3 FR_DUMP_DIR="$out/dumps/mesh2x2"
    start g-mesh2x4 "$fw" 8 FR_KIND=mesh FR_RANK=6 FR_DUMP_DIR="$out/dumps/mesh2x4"
    start g-order "$fw" 4 FR_KIND=order FR_RANK=1 FR_AT=0 FR_DUMP_DIR="$out/dumps/order"
    start g-order3 "$fw" 4 FR_KIND=order FR_RANK=1 FR_AT=3 FR_DUMP_DIR="$out/dumps/order3"
    start g-tpshape "$fw" 8 FR_KIND=tpshape FR_RANK=5 FR_DUMP_DIR="$out/dumps/tpshape"
    GARGS=
    start g-dtype "$fw" 4 FR_KIND=dtype FR_RANK=1 FR_PAIR01=1 FR_DUMP_DIR="$out/dumps/dtype"
    start g-dpslow "$fw" 4 FR_KIND=dpslow FR_RANK=3 FR_STEPS=80
    sleep 40 # the dumps come after 25 s of waiting; the lines from 45 s (suspect_setup)
    for k in g-pair2 g-pair1 g-mesh2x2 g-mesh2x4 g-order g-order3 g-tpshape; do LIVE_WAIT=30 live $k; done
    for k in g-dtype g-dpslow; do finished $k; done
    for k in g-pair2 g-pair1 g-mesh2x2 g-mesh2x4 g-order g-order3 g-tpshape g-dtype g-dpslow; do
        run=$(ls -d "$out/$k"/*/ | head -n 1)
        "$ddp" report --svg "$out/$k.svg" "$run" >"$out/$k.report" 2>&1
        python3 -c "import json,sys; s=json.load(open(sys.argv[1])); h=s.get('hang') or {}; r=s.get('root_cause') or {}; print(sys.argv[2], 'root rank', r.get('rank'), r.get('class'), 'verdict:', (h.get('why') or '')[:700], 'chain', json.dumps(h.get('chain')), 'stragglers', [x.get('rank') for x in s.get('stragglers') or []])" "$run/summary.json" "$k"
    done
    for d in "$out"/dumps/*/; do
        echo "== torch's analyzer on $d"
        (cd "$d" && timeout 60 python3 -m torch.distributed.flight_recorder.fr_trace pkl -p rank_ 2>&1 | tail -30)
    done
    python3 -m torch.distributed.flight_recorder.fr_trace --help 2>&1 | head -30
    # NCCL RAS: a 1-rank NCCL job with its own port (NCCL_RAS_ADDR), queried while it runs (STATUS text and JSON)
    "$ddp" doctor --nproc-per-node 1 "$fw" 2>&1 | grep -i "ras"
    env FR_BACKEND=nccl FR_KIND=slow FR_RANK=9 FR_STEPS=100 timeout 120 "$ddp" \
        --nproc-per-node 1 --log-dir "$out/ras" "$fw" >"$out/ras.out" 2>"$out/ras.err" &
    rpid=$!
    sleep 22
    grep -h "NCCL_RAS_ADDR" "$out/ras.out"
    port=$(grep -hoE "NCCL_RAS_ADDR=[^ ]*:[0-9]+" "$out/ras.out" | head -1 | sed 's/.*://')
    for p in ${port:-28123} 28028; do
        python3 - "$p" >"$out/ras-$p.txt" 2>&1 <<'PY'
import socket, sys
for fmt in ("text", "json"):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(b"CLIENT PROTOCOL 2\n")
    print("<", s.recv(100).decode().strip())
    if fmt == "json":
        s.sendall(b"SET FORMAT json\n")
        print("<", s.recv(100).decode().strip())
    s.sendall(b"STATUS\n")
    data = b""
    s.settimeout(3)
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except socket.timeout:
        pass
    print("== STATUS", fmt)
    print(data.decode(errors="replace"))
    s.close()
PY
        echo "ras port $p: $(wc -c <"$out/ras-$p.txt") bytes"; head -c 1500 "$out/ras-$p.txt"
    done
    which ncclras && timeout 10 ncclras -p "${port:-28028}" 2>&1 | head -40
    wait $rpid
    echo "ras job exit $?"
    exit 0
fi

start a-stuck "$fw" 3 FR_KIND=stuck FR_RANK=2
start a-op "$fw" 3 FR_KIND=other FR_RANK=1
start a-shape "$fw" 3 FR_KIND=shape FR_RANK=1
start a-slow "$fw" 3 FR_KIND=slow FR_RANK=1 FR_STEPS=110
start a-ckpt "$fw" 3 FR_KIND=ckpt FR_STEPS=12
start c-stuck "$ww" 3 WATCH_KIND=stuck WATCH_RANK=1
start c-other "$ww" 3 WATCH_KIND=other WATCH_RANK=1
start nccl "$fw" 1 FR_BACKEND=nccl FR_KIND=slow FR_RANK=9 FR_STEPS=20
for k in a-stuck a-op a-shape c-stuck c-other; do live $k; done
for k in a-slow a-ckpt nccl; do finished $k; done
for k in a-stuck a-op a-shape a-slow a-ckpt c-stuck c-other nccl; do
    run=$(ls -d "$out/$k"/*/ | head -n 1)
    "$ddp" report --svg "$out/$k.svg" "$run" >"$out/$k.report" 2>&1
done

# cost: a CPU-bound 3-rank job (one thread per rank), [timeout] sample on and off, twice each
for i in 1 2; do
    for s in on off; do
        FR_KIND=healthy FR_STEPS=120 "$ddp" --nproc-per-node 3 --set gpus.select=none --set timeout.sample=$s \
            --log-dir "$out/cost-$s-$i" "$fw" >"$out/cost-$s-$i.out" 2>"$out/cost-$s-$i.err"
        echo "cost sample=$s run $i: exit $? $(grep -h 'done in' "$out/cost-$s-$i.out" | awk '{s+=$(NF-1)} END {printf "mean rank time %.3f s", s/NR}')"
    done
done
