#!/usr/bin/env bash
# Issue 18 on the GPU machine with 2 GPUs (nvidia-h200-x2): a real NCCL hang of each kind, and the verdict
# ddplaunch gives before stopping it. Unpacks nothing: uses the static executable (make static) carried as
# .devrt/ddplaunch, or $DDPLAUNCH. Results (console, run records, stacks, report SVG) go to $OUT (or ./hang-out).
# Usage: bash bench/gpu/hang.sh [pg-timeout-seconds]
# What 2 ranks can tell: outside and slow name the culprit (one rank waits in all_reduce, the other's stack is
# outside any collective). other cannot: rank 0 waits in all_reduce #3, rank 1 in broadcast #3, and with one rank
# in each nothing says which branch is wrong, so the right verdict is "collective mismatch, no culprit named"
# (low confidence, mismatch true, both ranks and their collectives in why). With 3 or more ranks the majority
# decides (tests/integration/42-hang-forensics.sh, gloo). torch's flight recorder would show each rank's
# collective history and call sites, but torch 2.11 dumps it as a pickle, which ddplaunch does not read.
# "hang->verdict" below: from the last step both ranks finished ("step 1 ok", timed.log) to the verdict (the hang
# event in events.jsonl); the process-group timeout is most of it.
set -u
ddp=${DDPLAUNCH:-$(pwd)/.devrt/ddplaunch}
out=${OUT:-hang-out}
pgt=${1:-15}
mkdir -p "$out"
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
for k in outside:1 other:mismatch slow:0; do
    kind=${k%:*} culprit=${k#*:}
    start=$(date +%s.%N)
    hr=$culprit
    [ "$culprit" = mismatch ] && hr=1
    HANG_BACKEND=nccl HANG_RANK=$hr HANG_KIND=$kind HANG_PG_TIMEOUT_S=$pgt HANG_SLOW_S=$((pgt * 3)) \
        timeout 300 "$ddp" --nproc-per-node 2 --log-dir "$out/$kind" tests/integration/hang_worker.py \
        >"$out/$kind.out" 2>"$out/$kind.err"
    rc=$?
    secs=$(python3 -c "import time; print(round(time.time() - $start, 1))")
    run=$(ls -d "$out/$kind"/*/ | head -n 1)
    got=$(python3 - "$run" <<'PY'
import glob, json, sys
from datetime import datetime
run = sys.argv[1]
h = json.load(open(run + "/summary.json")).get("hang") or {}
ts = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
last = [ts(l.split()[0]) for f in glob.glob(run + "/attempt_0/*/timed.log") for l in open(f) if "step 1 ok" in l]
ev = [json.loads(l) for l in open(run + "/events.jsonl")]
hv = [ts(e["ts"]) for e in ev if e.get("event") == "hang"]
took = round(hv[0] - max(last), 1) if hv and last else "?"
culprits = ",".join(str(c["rank"]) for c in h.get("culprits", [])) or ("mismatch" if h.get("mismatch") else "none")
print(f"culprit {culprits}, {h.get('confidence')} confidence, hang->verdict {took}s, capture {h.get('capture_ms')} ms, "
      f"flight-recorder files {len(h.get('flight_recorder', []))}")
PY
)
    echo "$kind: exit $rc after ${secs}s; $got (expected: $culprit)"
    grep -A2 '^Hang verdict' "$out/$kind.err" | head -3
    "$ddp" report --svg "$out/$kind.svg" "$run" >"$out/$kind.report" 2>&1
done
