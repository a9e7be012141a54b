#!/usr/bin/env bash
# bench/gpu/gpu_health_cost.sh (run from the repository root with .devrt/32/ddplaunch): where the launch time goes with NVML read at every launch (issue 32): medians of 10.
ddp=$(pwd)/.devrt/32/ddplaunch
med() { sort -n | awk '{a[NR]=$1} END {print (a[5]+a[6])/2}'; }
ms() { python3 -c "import time; print(round((time.time() - $1) * 1000, 1))"; }
run10() { for i in $(seq 11); do t=$(date +%s.%N); "$@" >/dev/null 2>&1; ms $t; done | tail -n 10 | med; }
echo "launch, 1 GPU worker /bin/true: $(run10 "$ddp" --nproc-per-node 1 --no-python /bin/true) ms"
echo "plan, 1 GPU: $(run10 "$ddp" plan --nproc-per-node 1 --no-python /bin/true) ms"
echo "launch, CPU worker (gpus.select=none): $(run10 "$ddp" --set gpus.select=none --nproc-per-node 1 --no-python /bin/true) ms"
python3 - <<'PY'
import ctypes, time, statistics
res = {k: [] for k in ("dlopen+nvmlInit_v2", "device+memory+processes", "nvmlShutdown")}
for i in range(10):
    t = time.perf_counter(); lib = ctypes.CDLL("libnvidia-ml.so.1"); lib.nvmlInit_v2(); t1 = time.perf_counter()
    h = ctypes.c_void_p(); lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
    mem = (ctypes.c_ulonglong * 3)(); lib.nvmlDeviceGetMemoryInfo(h, mem)
    n = ctypes.c_uint(64); buf = (ctypes.c_byte * (24 * 64))(); lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), buf)
    t2 = time.perf_counter(); lib.nvmlShutdown(); t3 = time.perf_counter()
    for k, v in zip(res, (t1 - t, t2 - t1, t3 - t2)): res[k].append(v * 1000)
for k, v in res.items(): print(f"{k}: median {statistics.median(v):.1f} ms (first {v[0]:.1f})")
PY
