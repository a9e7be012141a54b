#!/usr/bin/env bash
# Issue 32 on the GPU machine (one H200): the real NVML path. A second process holds all but 0.7 GiB of the GPU
# (torch.empty of mem_get_info()[0] - 0.7 GiB, kept alive in the background); then the launch must warn naming
# it, [gpus] busy = fail must refuse before any worker starts (exit 75), and a worker's CUDA out-of-memory must
# be blamed on the holder, not the batch size. Also measured: what reading NVML at launch costs, that the NVML
# event set opens (and its cost), and doctor's health checks on a healthy H200. Uses the static executable
# (make static) carried as .devrt/32/ddplaunch, or $DDPLAUNCH. Everything goes to $OUT (or ./gpu-health-out):
# results.txt (the numbers) and logs.tar.gz.
# Usage: bash bench/gpu/gpu_health.sh
set -u
ddp=${DDPLAUNCH:-$(pwd)/.devrt/32/ddplaunch}
out=${OUT:-gpu-health-out}
mkdir -p "$out/logs"
res=$out/results.txt
say() { echo "$*" | tee -a "$res"; }
ms() { python3 -c "import time; print(round((time.time() - $1) * 1000, 1))"; }
say "== $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode --format=csv,noheader)"
say "ddplaunch: $("$ddp" --version)"

# 1. idle GPU: launch cost with NVML read, the event set, doctor
for i in 1 2 3 4 5 6 7 8 9 10 11; do
    t=$(date +%s.%N); "$ddp" --nproc-per-node 1 --no-python /bin/true 2>>"$out/logs/idle.err"; echo "$(ms "$t")"
done | tail -n 10 | sort -n | awk '{a[NR]=$1} END {print "launch of /bin/true on the GPU, idle GPU (NVML read at launch): median " (a[5]+a[6])/2 " ms of 10"}' | tee -a "$res"
"$ddp" -v --nproc-per-node 1 --no-python /bin/sleep 1 >/dev/null 2>"$out/logs/events.err"
say "event set: $(grep -o 'GPU events.*' "$out/logs/events.err" | head -1)"
for s in 1 11; do
    /usr/bin/time -f "%U %S" -o "$out/logs/time.$s" "$ddp" --nproc-per-node 1 --no-python /bin/sleep $s 2>/dev/null
done
python3 - "$out/logs/time.1" "$out/logs/time.11" <<'PY' | tee -a "$res"
import sys
a, b = (sum(map(float, open(p).read().split()[-2:])) for p in sys.argv[1:3])
print(f"launcher CPU (user+sys, with the event thread waiting 250 ms at a time): sleep 1 job {a*1000:.0f} ms, "
      f"sleep 11 job {b*1000:.0f} ms: {(b-a)*100:.1f} ms per second of run")
PY
"$ddp" doctor --nproc-per-node 1 >"$out/logs/doctor-idle.txt" 2>&1
say "doctor, idle GPU (exit $?):"; grep -E "gpu|nvml|driver" "$out/logs/doctor-idle.txt" | sed 's/^/    /' | tee -a "$res"

# 2. a second process holds all but 0.7 GiB
python3 -c '
import time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - 0.7 * 2**30), dtype=torch.uint8, device="cuda")
print("holding", round(x.numel() / 2**30, 1), "GiB of", round(total / 2**30, 1), flush=True)
time.sleep(400)' >"$out/logs/holder.out" 2>&1 &
holder=$!
for i in $(seq 1 120); do grep -q holding "$out/logs/holder.out" && break; sleep 0.5; done
say "holder: pid $holder, $(cat "$out/logs/holder.out")"

"$ddp" --nproc-per-node 1 --no-python /bin/sh -c 'echo worker started' >"$out/logs/warn.out" 2>"$out/logs/warn.err"
say "launch, busy = warn (exit $?): $(grep 'is held by' "$out/logs/warn.err")"
"$ddp" plan --nproc-per-node 1 --no-python /bin/true >"$out/logs/plan.out" 2>"$out/logs/plan.err"
say "plan: $(grep -A1 'GPU memory now' "$out/logs/plan.out" | tail -1)"
t=$(date +%s.%N)
"$ddp" --nproc-per-node 1 --set gpus.busy=fail --no-python /bin/sh -c "touch $out/logs/ran" \
    >"$out/logs/fail.out" 2>"$out/logs/fail.err"
rc=$?
say "busy = fail: exit $rc after $(ms "$t") ms, worker started: $([ -e "$out/logs/ran" ] && echo yes || echo no), $(wc -l <"$out/logs/fail.err") line: $(cat "$out/logs/fail.err")"

cat >"$out/logs/oom.py" <<'PY'
import os, torch
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
x = torch.empty(4 * 2**30, dtype=torch.uint8, device="cuda")  # a few GiB: more than the 0.7 GiB left
print("allocated", x.numel())
PY
"$ddp" --nproc-per-node 1 --log-dir "$out/logs/oom" "$out/logs/oom.py" >"$out/logs/oom.out" 2>"$out/logs/oom.err"
say "OOM worker (exit $?):"
grep -E "^  (cause|class|hint) " "$out/logs/oom.err" | sed 's/^/    /' | tee -a "$res"
run=$(ls -d "$out"/logs/oom/*/ | head -n 1)
python3 -c "import json; r=json.load(open('$run/summary.json'))['root_cause']; print('    summary.json root_cause: class', r['class'], '| cause', r.get('cause'))" | tee -a "$res"
"$ddp" report "$run" >"$out/logs/oom-report.txt" 2>&1
say "    report: $(grep 'gpu:' "$out/logs/oom-report.txt")"
"$ddp" doctor --nproc-per-node 1 >"$out/logs/doctor-held.txt" 2>&1
say "doctor, held GPU (exit $?):"; grep -E "gpu-busy|gpu-health" "$out/logs/doctor-held.txt" | sed 's/^/    /' | tee -a "$res"
kill $holder
wait $holder 2>/dev/null
tar czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$out/logs"
