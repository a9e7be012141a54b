#!/usr/bin/env bash
# Issue 51's GPU proof: a hung job back to training at default settings. RUNS (3) jobs under ddplaunch and RUNS under
# torchrun, all at once: 3 gloo ranks that wait as NCCL ranks do (an async all_reduce polled in a function of
# their own, torch 2.x's flight recorder on), rank 0 stuck in a sleep outside any collective AT_S (55) s after it
# started (past ddplaunch's 45 s setup allowance), only in the first attempt; the restart resumes from the
# checkpoint (a step counter rank 0 writes each step) and runs 10 more steps. ddplaunch: --max-restarts 1, every
# other setting at its default (on_suspect = auto). torchrun: --max-restarts 1, which acts when torch's
# process-group timeout ends the hung ranks: PG_TIMEOUT_S (120) s here for both (torch's default for gloo is 30
# minutes, which would be torchrun's time). Measured per job from the stuck rank's "alone from now" line to the
# restarted attempt's first step (wall clock printed by the ranks), medians over RUNS; ddplaunch's summary.json
# recovery too. Results: $OUT (./hang-recovery-out): results.txt, results.json, each job's console and records.
# Beside them, the healthy-but-slow jobs at default settings (HEALTHY=0: not): rank 0 works alone for ALONE_S (300)
# s from step 3 (evaluates in C / writes a checkpoint with fsync / prepares data in Python) while the others wait
# (blocking all_reduce / polled async all_reduce / barrier): each must end with exit 0, no restart, no "hang" word
# and at most one "works alone" line.
# Usage: bash bench/gpu/hang-recovery.sh    (env: DDPLAUNCH, RUNS, AT_S, PG_TIMEOUT_S, HEALTHY, ALONE_S, OUT)
set -u
root=$(pwd)
ddp=${DDPLAUNCH:-$root/.devrt/ddplaunch}
w=$root/tests/integration/states_worker.py
out=${OUT:-hang-recovery-out}
runs=${RUNS:-3}
mkdir -p "$out"
python3 -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0], "gpus", torch.cuda.device_count())' |
    tee "$out/versions.txt"
export HS_KIND=sleep HS_WAIT=poll HS_AT_S=${AT_S:-55} HS_TS=1 HS_PG_TIMEOUT_S=${PG_TIMEOUT_S:-120} HS_AFTER=10
for i in $(seq 1 "$runs"); do
    mkdir -p "$out/ddplaunch-$i" "$out/torchrun-$i"
    (cd "$out/ddplaunch-$i" && timeout 500 "$ddp" --nproc-per-node 3 --set gpus.select=none --max-restarts 1 \
        --log-dir log "$w" >out.txt 2>err.txt; echo $? >rc) &
    (cd "$out/torchrun-$i" && timeout 500 torchrun --nproc_per_node 3 --max_restarts 1 --master_port $((29610 + i)) \
        "$w" >out.txt 2>err.txt; echo $? >rc) &
done
if [ "${HEALTHY:-1}" = 1 ]; then
    for c in eval:allreduce ckpt:poll prep:barrier; do
        mkdir -p "$out/healthy-${c%%:*}"
        (cd "$out/healthy-${c%%:*}" && HS_KIND=${c%%:*} HS_WAIT=${c#*:} HS_AT_S= HS_AT=3 HS_ALONE_S=${ALONE_S:-300} HS_PG_TIMEOUT_S=1800 \
            timeout 580 "$ddp" --nproc-per-node 3 --set gpus.select=none --log-dir log "$w" >out.txt 2>err.txt
            echo $? >rc) &
    done
fi
wait
for d in "$out"/healthy-*; do
    [ -d "$d" ] || continue
    echo "${d##*/}: exit $(cat "$d/rc"), 'hang' on the console $(grep -ci hang "$d/err.txt") times," \
        "works-alone lines $(grep -c 'works alone' "$d/err.txt"), restarts $(grep -c resumed "$d/out.txt");" \
        "$(grep -m1 'works alone' "$d/err.txt" | cut -c1-200)"
done | tee "$out/healthy.txt"
python3 - "$out" "$runs" <<'PYEOF' | tee "$out/results.txt"
import glob, json, os, re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
res = {}
for who in ("ddplaunch", "torchrun"):
    rows = []
    for i in range(1, runs + 1):
        d = f"{out}/{who}-{i}"
        text = open(f"{d}/out.txt", errors="replace").read()
        rc = open(f"{d}/rc").read().strip() if os.path.exists(f"{d}/rc") else "?"
        began = [float(t) for t in re.findall(r"rank 0 alone from now \(sleep\) t=([0-9.]+)", text)]
        resumed = [m.start() for m in re.finditer(r"resumed at step", text)]
        again = None
        if resumed:
            m = re.search(r"rank \d+ step \d+ t=([0-9.]+)", text[resumed[0]:])
            again = float(m.group(1)) if m else None
        row = {"run": i, "exit": rc, "hang_to_training_s": round(again - began[0], 1) if began and again else None}
        for s in glob.glob(f"{d}/log/*/summary.json"):
            rec = json.load(open(s)).get("recovery")
            row["recovery"] = rec
            row["attempts"] = json.load(open(s)).get("attempts")
        rows.append(row)
        print(who, json.dumps(row))
    got = [r["hang_to_training_s"] for r in rows if r["hang_to_training_s"] is not None]
    res[who] = {"runs": rows, "median_s": statistics.median(got) if got else None}
    print(f"{who}: hang -> training again, median of {len(got)}: {res[who]['median_s']} s  ({got})")
json.dump(res, open(f"{out}/results.json", "w"), indent=1)
PYEOF
