#!/usr/bin/env bash
# bench/gpu/plan-holders.sh REF_BIN NEW_BIN (from the repository root, on the GPU machine; two static ddplaunch
# binaries): issue 40's two figures left unmet by bench/gpu/merged, in one run.
#  0. What holds /dev/nvidia* before anything runs (pid, command, executable), the pid namespace, the uid: what
#     the /proc holder scan (topo/holders.c) sees, and NEW's own account of it (plan -v: "GPU holders: ...").
#  1. bench/compare.py, REF against NEW: plan (1 GPU, nobody else on the GPU), 1 and 8 CPU workers vs sh, 1 GPU
#     worker, peak RSS, kill -9 to restarted, AGENTS c10d agents start/stop/serving RSS (bench/scale.sh, with
#     scale.sh's bare figure beside it).
#  2. plan with a busy GPU: a torch process holds all but 1 GiB of GPU 0; ROUNDS interleaved plan runs of REF and
#     NEW (medians), and what NEW's plan prints about the holder.
#  3. What NVML's calls cost one by one in a fresh process (ctypes): nvmlInit_v2 against
#     nvmlInitWithFlags(NVML_INIT_FLAG_NO_ATTACH), then the device handle by PCI bus id and its compute processes.
# BENCH names the folder of compare.py and scale.sh (default bench). Writes everything to stdout and
# $OUT/plan-holders.txt (OUT default /tmp). Keeps NCCL_NVLS_ENABLE and
# TORCH_SYMM_MEM_DISABLE_MULTICAST as the machine sets them.
set -u
ref=$(realpath "$1") new=$(realpath "$2")
out=${OUT:-/tmp}/plan-holders.txt
rounds=${ROUNDS:-15}
: >"$out"
say() { echo "$*" | tee -a "$out"; }
PY=${PY:-python3}
say "== $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader 2>/dev/null); $(nproc) CPUs;" \
    "uid $(id -u); pid ns $(readlink /proc/self/ns/pid); $(date -u '+%F %H:%M:%S') UTC =="

say "== 0. processes with /dev/nvidia* open now =="
for p in /proc/[0-9]*; do
    d=$(ls -l "$p/fd" 2>/dev/null | grep -o '/dev/nvidia[^ ]*' | sort -u | tr '\n' ' ')
    [ -n "$d" ] && say "pid ${p#/proc/} ($(cat "$p/comm" 2>/dev/null), $(readlink "$p/exe" 2>/dev/null), uid $(stat -c %u "$p")): $d"
done
say "unreadable fd directories: $(for p in /proc/[0-9]*; do ls "$p/fd" >/dev/null 2>&1 || echo x; done | grep -c x)"
"$new" plan -v --nproc-per-node 1 --no-python /bin/true >/tmp/plan-holders.plan 2>&1
grep -E "GPU holders|GPU memory now|^  GPU [0-9]+ \(" /tmp/plan-holders.plan | tee -a "$out"

say "== 1. bench/compare.py (medians; ref = $1) =="
$PY "${BENCH:-bench}"/compare.py --ref "$ref" --new "$new" --ref-name 3ea4b4b --rounds "$rounds" --agents "${AGENTS:-256 1024}" \
    --agent-runs "${AGENT_RUNS:-3}" --gpu "${GPU:-auto}" 2>&1 | tee -a "$out"

say "== 2. plan with a busy GPU (a second process holds all but 1 GiB of GPU 0) =="
if ! $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
    say "skipped: no torch with CUDA here"
else
    ready=$(mktemp -u /tmp/plan-holders-ready.XXXXXX)
    $PY -c '
import sys, time, torch
free, total = torch.cuda.mem_get_info()
x = torch.empty(int(free - 2**30), dtype=torch.uint8, device="cuda")
open(sys.argv[1], "w").close()
time.sleep(300)' "$ready" &
    holder=$!
    for _ in $(seq 1 600); do [ -e "$ready" ] && break; sleep 0.1; done
    say "holder pid $holder: $([ -e "$ready" ] && echo holding || echo 'did not start')"
    "$new" plan -v --nproc-per-node 1 --no-python /bin/true >/tmp/plan-holders.plan 2>&1
    grep -E "GPU holders|GPU memory now|^  GPU [0-9]+ \(|warning" /tmp/plan-holders.plan | tee -a "$out"
    $PY - "$ref" "$new" "$rounds" <<'PY' 2>&1 | tee -a "$out"
import os, random, statistics, subprocess, sys, time
ref, new, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = {"ref": [], "new": []}
argv = ["plan", "--nproc-per-node", "1", "--no-python", "/bin/true"]
for side, b in (("ref", ref), ("new", new)):  # warm the topology caches
    subprocess.run([b] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(rounds):
    order = [("ref", ref), ("new", new)]
    random.shuffle(order)
    for side, b in order:
        t0 = time.perf_counter()
        subprocess.run([b] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        t[side].append((time.perf_counter() - t0) * 1000)
for side in ("ref", "new"):
    print("plan, busy GPU, %s: median %.1f ms (min %.1f, max %.1f, %d runs)" % (
        side, statistics.median(t[side]), min(t[side]), max(t[side]), len(t[side])))
PY
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null
    rm -f "$ready"
fi

say "== 3. NVML's calls one by one in a fresh process (ctypes, medians of 10 processes) =="
$PY - <<'PY' 2>&1 | tee -a "$out"
import statistics, subprocess, sys
code = r'''
import ctypes as C, sys, time
t = {}
def m(k, f):
    s = time.perf_counter(); r = f(); t[k] = (time.perf_counter() - s) * 1000; return r
s = time.perf_counter(); lib = C.CDLL("libnvidia-ml.so.1"); t["dlopen"] = (time.perf_counter() - s) * 1000
flags = int(sys.argv[1])
r = m("init", lambda: lib.nvmlInitWithFlags(flags) if flags else lib.nvmlInit_v2())
h = C.c_void_p(); pci = C.create_string_buffer(128)
m("handle by index 0 + pci", lambda: (lib.nvmlDeviceGetHandleByIndex_v2(0, C.byref(h)), lib.nvmlDeviceGetPciInfo_v3(h, pci)))
bus = pci.raw[32:64].split(b"\0")[0]
h2 = C.c_void_p()
m("handle by bus id", lambda: lib.nvmlDeviceGetHandleByPciBusId_v2(bus, C.byref(h2)))
n = C.c_uint(64)
rc = m("compute processes", lambda: lib.nvmlDeviceGetComputeRunningProcesses_v3(h2, C.byref(n), C.create_string_buffer(24 * 64)))
print(" ".join("%s=%.3f" % kv for kv in t.items()), "init_rc=%d procs_rc=%d" % (r, rc))
'''
for flags, name in ((0, "nvmlInit_v2"), (2, "nvmlInitWithFlags(NO_ATTACH)")):
    runs = []
    for _ in range(10):
        o = subprocess.run([sys.executable, "-c", code, str(flags)], capture_output=True, text=True).stdout.split()
        if not o:
            print(name, ": failed"); break
        runs.append(dict(x.split("=") for x in o if "=" in x))
    if runs:
        keys = [k for k in runs[0] if not k.endswith("_rc")]
        print("%s: %s; %s" % (name, ", ".join("%s %.2f ms" % (k, statistics.median(float(r[k]) for r in runs)) for k in keys),
                             " ".join("%s %s" % (k, runs[0][k]) for k in runs[0] if k.endswith("_rc"))))
PY
say "== done $(date -u '+%H:%M:%S') =="
