#!/usr/bin/env bash
# bench/gpu/launch_nvml_cost.sh BEFORE AFTER (run from the repository root; two static ddplaunch binaries): what a
# launch's NVML read costs before and after the launch read only memory and compute processes (no NVLinks, UUIDs,
# names or health queries; nothing for CPU workers; NVML loaded and initialised once). One startup.py run, every
# command interleaved, medians of 30; then what each NVML call costs (ctypes, medians of 10), and the busy check
# on the real NVML with a second process holding the GPU (the warning, busy = fail, plan's holder line).
set -u
before=$(realpath "$1") after=$(realpath "$2") out=${OUT:-/tmp/launch_nvml_cost}
mkdir -p "$out"
say() { echo "$*" | tee -a "$out/results.txt"; }
say "== $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader 2>/dev/null) =="
t='--nproc-per-node 1 --no-python /bin/true'
python3 bench/startup.py --ddplaunch "$after" --rounds 30 --torchrun-rounds 0 --n 1 \
    --ddplaunch-args '--set gpus.select=none' \
    --extra "before, CPU worker:1:$before --set gpus.select=none $t" \
    --extra "before, 1 GPU worker:1:$before $t" --extra "after, 1 GPU worker:1:$after $t" \
    --extra "before, plan 1 GPU:1:$before plan $t" --extra "after, plan 1 GPU:1:$after plan $t" \
    --extra "before, doctor:1:$before doctor" --extra "after, doctor:1:$after doctor" 2>&1 | tee -a "$out/results.txt"
say "== NVML calls one by one (ctypes, median of 10 rounds; GPU 0) =="
python3 - <<'PY' 2>&1 | tee -a "$out/results.txt"
import ctypes as C, time, statistics
lib = C.CDLL("libnvidia-ml.so.1")
res = {}
def t(name, fn):
    s = time.perf_counter(); fn(); res.setdefault(name, []).append((time.perf_counter() - s) * 1000)
for r in range(11):
    t("nvmlInit_v2 (none held)", lambda: lib.nvmlInit_v2())
    h = C.c_void_p(); u = C.c_uint(); ull = C.c_ulonglong(); i1 = C.c_int(); i2 = C.c_int(); buf = C.create_string_buffer(256)
    t("count + handle + pci", lambda: (lib.nvmlDeviceGetCount_v2(C.byref(u)), lib.nvmlDeviceGetHandleByIndex_v2(0, C.byref(h)), lib.nvmlDeviceGetPciInfo_v3(h, buf)))
    t("memory", lambda: lib.nvmlDeviceGetMemoryInfo(h, C.create_string_buffer(24)))
    t("compute processes", lambda: lib.nvmlDeviceGetComputeRunningProcesses_v3(h, C.byref(C.c_uint(64)), C.create_string_buffer(24 * 64)))
    t("uuid + name", lambda: (lib.nvmlDeviceGetUUID(h, buf, 96), lib.nvmlDeviceGetName(h, buf, 96)))
    t("utilisation", lambda: lib.nvmlDeviceGetUtilizationRates(h, C.create_string_buffer(8)))
    t("NVLink loop (18 links: state + remote pci)", lambda: [(lib.nvmlDeviceGetNvLinkState(h, l, C.byref(i1)), i1.value and lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, l, buf)) for l in range(18)])
    t("health (persistence, MIG, ECC mode + 3 counts, remapped, retired, clocks, temperature)", lambda: (
        lib.nvmlDeviceGetPersistenceMode(h, C.byref(i1)), lib.nvmlDeviceGetMigMode(h, C.byref(u), C.byref(u)),
        lib.nvmlDeviceGetEccMode(h, C.byref(i1), C.byref(i2)), [lib.nvmlDeviceGetTotalEccErrors(h, a, b, C.byref(ull)) for a, b in ((0, 0), (1, 0), (1, 1))],
        lib.nvmlDeviceGetRemappedRows(h, C.byref(u), C.byref(u), C.byref(u), C.byref(u)), lib.nvmlDeviceGetRetiredPagesPendingStatus(h, C.byref(i1)),
        lib.nvmlDeviceGetCurrentClocksEventReasons(h, C.byref(ull)), lib.nvmlDeviceGetTemperature(h, 0, C.byref(u))))
    t("nvmlInit_v2 again (one held)", lambda: lib.nvmlInit_v2()); lib.nvmlShutdown()
    t("nvmlShutdown (last)", lambda: lib.nvmlShutdown())
for k, v in res.items():
    print(f"{k}: {statistics.median(v[1:]):.2f} ms (first {v[0]:.2f})")
PY
say "== busy check on the real NVML (after), a second process holding all but 0.7 GiB =="
python3 -c '
import time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - 0.7 * 2**30), dtype=torch.uint8, device="cuda")
print("holding", flush=True)
time.sleep(300)' >"$out/holder.out" 2>&1 &
holder=$!
for i in $(seq 1 120); do grep -q holding "$out/holder.out" && break; sleep 0.5; done
say "holder pid $holder: $(cat "$out/holder.out")"
"$after" $t >/dev/null 2>"$out/warn.err"; say "launch (busy = warn): exit $?: $(cat "$out/warn.err")"
s=$(date +%s%N); "$after" --set gpus.busy=fail $t >/dev/null 2>"$out/fail.err"; rc=$?
say "launch (busy = fail): exit $rc after $(( ($(date +%s%N) - s) / 1000000 )) ms: $(cat "$out/fail.err")"
"$after" plan $t 2>&1 | grep -i "in use\|held\|warning" | tee -a "$out/results.txt"
"$after" --set gpus.select=none $t >/dev/null 2>"$out/cpu.err"; say "CPU worker with the holder: exit $?, stderr: '$(cat "$out/cpu.err")'"
kill $holder; wait $holder 2>/dev/null
say "done"
