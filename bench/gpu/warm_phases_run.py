"""Times the DDP tutorial's set-up phase by phase (warm_phases.py) in a fresh python, in a warm rank under
ddplaunch and in a cold one, interleaved, ROUNDS times; prints medians as a table (issue 41). Usage:
  warm_phases_run.py DIR DDPLAUNCH OUTDIR [ROUNDS] [MODES]
DIR holds the tutorial's datautils.py. MODES (comma-separated, default all): fresh (python warm_phases.py by hand,
1 rank), warm (--warm-restart), warm-nosample (and no live stack sampling), warm-preload (and a preload list
that adds what the first warm run imported after its go), cold (restart.warm=no); fresh-profile, warm-profile:
one run each under cProfile. Also times CUDA's own context creation through the driver API (ctypes, no torch)."""
import json, os, re, shutil, signal, socket, statistics, subprocess, sys, threading, time

here = os.path.dirname(os.path.abspath(__file__))
d, ddp, outdir = (os.path.abspath(a) for a in sys.argv[1:4])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
modes = sys.argv[5].split(",") if len(sys.argv) > 5 else ["fresh", "warm", "warm-nosample", "warm-preload", "cold"]
py = os.environ.get("PYTHON", sys.executable)
backend = os.environ.get("PHASES_BACKEND", "nccl")
os.makedirs(outdir, exist_ok=True)
log = open(os.path.join(outdir, "phases-lines.txt"), "a")
extra_preload = []

CUDA_FLOOR = r"""
import ctypes, time
t = [time.time()]
cu = ctypes.CDLL("libcuda.so.1"); t.append(time.time())
assert cu.cuInit(0) == 0; t.append(time.time())
dev = ctypes.c_int(); assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p(); assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0
free, total = ctypes.c_size_t(), ctypes.c_size_t(); assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
t.append(time.time())
print("dlopen libcuda %.3f s, cuInit %.3f s, primary context %.3f s" % (t[1] - t[0], t[2] - t[1], t[3] - t[2]))
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def workdir(mode, n):
    w = os.path.join(outdir, "run-%s-%d" % (mode, n))
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    shutil.copy(os.path.join(here, "warm_phases.py"), w)
    shutil.copy(os.path.join(d, "datautils.py"), w)
    return w


def results(w):
    """The ranks' results; the run's directory goes (the device machine sends back only so many files)."""
    out = []
    for f in sorted(os.listdir(w)):
        if f.startswith("phases-") and f.endswith(".json"):
            out.append(json.load(open(os.path.join(w, f))))
    shutil.rmtree(w, ignore_errors=True)
    return out


def save():
    json.dump({"cuda_floor": floor, "runs": all_runs, "extra_preload": extra_preload},
              open(os.path.join(outdir, "phases.json"), "w"), indent=1)


def run_fresh(mode, n):
    w = workdir(mode, n)
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(free_port()), PHASES_OUT=w, PHASES_MODE=mode, PHASES_BACKEND=backend)
    if mode.endswith("profile"):
        env["PHASES_PROFILE"] = "1"
    r = subprocess.run([py, "-u", "warm_phases.py"], cwd=w, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=120)
    log.write("=== %s %d (exit %d)\n%s" % (mode, n, r.returncode, r.stdout.decode(errors="replace")))
    return results(w)


def gpu_state(pid):
    """What a standby holds once ready: descriptors on /dev/nvidia* and whether libcuda is mapped (issue 41: a
    standby must not initialise CUDA, or its devices are fixed before the rank's CUDA_VISIBLE_DEVICES)."""
    fds = set()
    try:
        for f in os.listdir("/proc/%d/fd" % pid):
            try:
                t = os.readlink("/proc/%d/fd/%s" % (pid, f))
            except OSError:
                continue
            if t.startswith("/dev/nvidia"):
                fds.add(t)
        cuda = any("libcuda.so" in ln for ln in open("/proc/%d/maps" % pid))
    except OSError as e:
        return "standby %d: %s" % (pid, e)
    return "standby %d: /dev/nvidia* descriptors %s, libcuda mapped %s" % (pid, sorted(fds) or "none", cuda)


def run_ddp(mode, n):
    w = workdir(mode, n)
    argv = [ddp, "-v", "--nproc-per-node", "1", "--max-restarts", "1", "--set", "restart.backoff=0"]
    warm = mode.startswith("warm")
    argv += ["--warm-restart"] if warm else ["--set", "restart.warm=no"]
    if "nosample" in mode:
        argv += ["--set", "timeout.sample=no"]
    if "preload" in mode and extra_preload:
        argv += ["--set", "restart.preload=" + ",".join(["torch", "torch.distributed"] + extra_preload)]
    argv += ["warm_phases.py"]
    env = dict(os.environ, PHASES_OUT=w, PHASES_MODE=mode, PHASES_BACKEND=backend)
    if mode.endswith("profile"):
        env["PHASES_PROFILE"] = "1"
    if backend == "gloo":
        argv[1:1] = ["--set", "gpus.select=none"]
    t0 = time.time()
    p = subprocess.Popen(argv, cwd=w, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines, state = [], {"done0": False, "ready": not warm, "go": False}

    def watchdog():
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)

    timer = threading.Timer(120, watchdog)
    timer.start()
    for raw in p.stdout:
        s = raw.decode(errors="replace").rstrip("\n")
        lines.append("%.3f %s" % (time.time() - t0, s))
        if "attempt 0 done" in s:
            state["done0"] = True
        if "standby interpreter" in s and "ready" in s:
            state["ready"] = True
        m = re.search(r"standby of local rank \d+ ready in .* \(pid (\d+)", s)
        if m:
            lines.append("%.3f %s" % (time.time() - t0, gpu_state(int(m.group(1)))))
        if state["done0"] and state["ready"] and not state["go"]:
            open(os.path.join(w, "go"), "w").close()
            state["go"] = True
    rc = p.wait()
    timer.cancel()
    log.write("=== %s %d (exit %d, t0 %.3f)\n%s\n" % (mode, n, rc, t0, "\n".join(lines)))
    log.flush()
    return results(w)


def durations(r):
    """Each step's seconds, and (a restarted rank) the kill to its first line and to "Loading snapshot"."""
    m = r["marks"]
    out = {m[i][0]: m[i][1] - m[i - 1][1] for i in range(1, len(m))}
    at = dict(m)
    if "kill" in r:
        out["kill->start"] = at["start"] - r["kill"]
        if "loading_snapshot" in at:
            out["kill->Loading snapshot"] = at["loading_snapshot"] - r["kill"]
    if "imports" in at and "loading_snapshot" in at:
        out["imports->Loading snapshot"] = at["loading_snapshot"] - at["imports"]
    return out


def cuda_floor():
    """Three times alone on the GPU, then three times while another process holds a context on it (whether the
    GPU is torn down and set up again when its last client goes)."""
    if backend != "nccl":
        return []
    outs = []
    for held in (False, True):
        holder = None
        if held:
            holder = subprocess.Popen([py, "-c", CUDA_FLOOR + "\nprint('held', flush=True)\nimport time; time.sleep(600)"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            holder.stdout.readline()
            holder.stdout.readline()
        for _ in range(3):
            r = subprocess.run([py, "-c", CUDA_FLOOR], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            outs.append(("another process holds a context: " if held else "alone: ")
                        + r.stdout.decode(errors="replace").strip())
        if holder:
            holder.kill()
            holder.wait()
    return outs


all_runs = []
floor = cuda_floor()
print("CUDA driver API, fresh python without torch:", *floor, sep="\n  ", flush=True)
for n in range(rounds):
    for mode in [m for m in modes if not m.endswith("profile")]:
        try:
            rs = run_fresh(mode, n) if mode == "fresh" else run_ddp(mode, n)
        except Exception as e:  # a run that failed is reported, the others go on
            print("%s %d: %s" % (mode, n, e), flush=True)
            continue
        for r in rs:
            r["round"] = n
            all_runs.append(r)
            if mode == "warm" and r["attempt"] == "1" and not extra_preload:
                extra_preload = sorted({x for v in r["new_modules"].values() for x in v
                                        if x.split(".")[0] == "torch" and not x.split(".")[-1].startswith("_")})
                print("imported after go (warm):", r["new_modules"], flush=True)
        print(mode, n, [{k: round(v, 3) for k, v in durations(r).items()} for r in rs], flush=True)
        save()  # what was measured so far, should a time limit end this
for mode in [m for m in modes if m.endswith("profile")]:
    try:
        rs = run_fresh(mode, 0) if mode.startswith("fresh") else run_ddp(mode, 0)
    except Exception as e:
        print("%s: %s" % (mode, e), flush=True)
        continue
    for r in rs:
        r["round"] = 0
        all_runs.append(r)
        with open(os.path.join(outdir, "profile-%s-a%s.txt" % (mode, r["attempt"])), "w") as f:
            f.write(r.get("profile", ""))

save()
# the table: medians per mode of the restarted rank (fresh: the one rank)
rows = {}
for r in all_runs:
    if r["mode"].endswith("profile") or (r["mode"] != "fresh" and r["attempt"] == "0"):
        continue
    for k, v in durations(r).items():
        rows.setdefault(k, {}).setdefault(r["mode"], []).append(v)
cols = [m for m in modes if not m.endswith("profile")]
print("\n| step (s, median of %d) | %s |" % (rounds, " | ".join(cols)))
print("|---|" + "---|" * len(cols))
for k in rows:
    print("| %s | %s |" % (k, " | ".join("%.3f" % statistics.median(rows[k][c]) if rows[k].get(c) else "-" for c in cols)))
print("\nfacts:", json.dumps({r["mode"]: r["facts"] for r in all_runs if r["attempt"] != "0"}, indent=None))
print("modules imported after the start, warm rank:",
      json.dumps([r["new_modules"] for r in all_runs if r["mode"] == "warm" and r["attempt"] == "1"][:1]))
print("extra preload tried:", extra_preload)
