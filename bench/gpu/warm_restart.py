"""Warm restart on the GPU host (issue 41): the unmodified DDP tutorial (pytorch/examples ddp-tutorial-series
multigpu_torchrun.py + datautils.py, taken there beside this file, never committed), 1 rank on the one H200.
For each launcher: start it, wait until epoch 0's snapshot is saved (and, warm, until the standby is ready), kill -9
the rank, and time from the kill to the restarted rank's "Loading snapshot" line. Warm, once the standby is ready,
it also records what each standby holds (/dev/nvidia* descriptors, libcuda mapped: a standby must not), or the
launcher's "warm restart off" line. Usage:
  warm_restart.py DIR DDPLAUNCH OUTFILE RUNS [NAMES,...]   (DIR holds the tutorial; prints and appends one JSON line per run)
TUT_DEADLINE_S=N: start no run that would end later than N s after the start (the last run of that launcher's
length), so that the summary is printed within a device call's limit."""
import json, os, signal, statistics, subprocess, sys, threading, time

from standby_gpu import gpu_state, standby_pids

d, ddp, outfile, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
script = "multigpu_torchrun.py"
cmds = {
    "ddplaunch-warm": [ddp, "--nproc-per-node", "1", "--max-restarts", "1", "--warm-restart",
                       "--set", "restart.backoff=0", script, "1000000", "1"],
    "ddplaunch-cold": [ddp, "--nproc-per-node", "1", "--max-restarts", "1",
                       "--set", "restart.backoff=0", script, "1000000", "1"],
    "torchrun": ["torchrun", "--nproc_per_node", "1", "--max_restarts", "1", script, "1000000", "1"],
}


def rank_pid():
    """The worker: a python whose argv is [python, -u, script, ...] (torchrun's own argv names the script too)."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            a = open("/proc/%s/cmdline" % p, "rb").read().split(b"\0")
        except OSError:
            continue
        if len(a) > 2 and b"python" in a[0] and a[1] == b"-u" and a[2] == script.encode():
            return int(p)
    return None


def standby_gpu():
    """Each standby interpreter and what it holds: /dev/nvidia* descriptors, libcuda."""
    return [gpu_state(pid) for pid in standby_pids()] or ["no standby process found"]


def one(name):
    try:
        os.unlink(os.path.join(d, "snapshot.pt"))
    except FileNotFoundError:
        pass
    lines = []
    cv = threading.Condition()
    p = subprocess.Popen(cmds[name], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    def reader():
        for raw in p.stdout:
            with cv:
                lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))
                cv.notify_all()
        with cv:
            lines.append((time.monotonic(), None))
            cv.notify_all()

    threading.Thread(target=reader, daemon=True).start()

    def wait_for(pred, start, timeout):
        end = time.monotonic() + timeout
        with cv:
            while True:
                for i in range(start, len(lines)):
                    if lines[i][1] is None:
                        return None
                    if pred(lines[i][1]):
                        return i
                left = end - time.monotonic()
                if left <= 0:
                    return None
                cv.wait(left)

    res = {"launcher": name}
    t0 = time.monotonic()
    i = wait_for(lambda s: "snapshot saved" in s, 0, 90)
    if i is not None and name == "ddplaunch-warm":
        k = wait_for(lambda s: ("standby interpreter" in s and "ready" in s) or "warm restart off" in s, 0, 60)
        if k is not None and "warm restart off" in lines[k][1]:
            res["warm_off"] = lines[k][1]
        elif k is not None:
            res["standby_gpu"] = standby_gpu()
        i = max(i, k) if k is not None else None
    pid = rank_pid() if i is not None else None
    if pid:
        res["first_snapshot_s"] = round(lines[i][0] - t0, 2)
        tk = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        j = wait_for(lambda s: "Loading snapshot" in s, i, 90)
        if j is not None:
            res["kill_to_loading_snapshot_s"] = round(lines[j][0] - tk, 3)
            res["warm_line"] = any("started warm" in s for _, s in lines if s)
    else:
        res["error"] = "no snapshot or rank"
    try:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(20)
    except Exception:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    res["tail"] = [s for _, s in lines[-6:] if s]
    with open(outfile + ".out.txt", "a") as f:  # every run's whole output, with arrival times
        f.write("=== %s\n" % name)
        f.writelines("%.3f %s\n" % (t - t0, s) for t, s in lines if s is not None)
    print(json.dumps(res), flush=True)
    with open(outfile, "a") as f:
        f.write(json.dumps(res) + "\n")
    return res


if len(sys.argv) > 5:  # only these launchers
    cmds = {k: v for k, v in cmds.items() if k in sys.argv[5].split(",")}
allr = {k: [] for k in cmds}
deadline = time.monotonic() + float(os.environ.get("TUT_DEADLINE_S", "1e9"))
took = {}
for r in range(runs):
    for name in cmds:
        if time.monotonic() + took.get(name, 0) > deadline:
            print("%s, round %d: not run (TUT_DEADLINE_S)" % (name, r + 1), flush=True)
            continue
        t = time.monotonic()
        x = one(name).get("kill_to_loading_snapshot_s")
        took[name] = time.monotonic() - t
        if x is not None:
            allr[name].append(x)
summary = {k: {"runs": v, "median_s": statistics.median(v) if v else None} for k, v in allr.items()}
print(json.dumps(summary, indent=1))
with open(outfile, "a") as f:
    f.write(json.dumps({"summary": summary}) + "\n")
