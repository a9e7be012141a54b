#!/usr/bin/env python3
"""Every start-up and scale figure of two ddplaunch binaries, side by side in one run (bench/compare.sh builds them).

usage: python3 bench/compare.py --ref BIN --new BIN [--rounds R] [--agents "256 1024"] [--agent-runs K]
                                [--gpu auto|yes|no] [--threshold 0.10]

Each round runs every figure's command once for each binary, in a fresh random order (interleaved and paired: a
machine whose speed drifts moves both alike). Figures:
  sh 1, sh 8       sh -c '/bin/true & ... wait' (the floor; printed with each launcher's "x sh")
  1 worker         ddplaunch --nproc-per-node 1 --no-python /bin/true (CPU: gpus.select=none on a GPU host)
  8 workers        the same with 8
  plan             ddplaunch plan --nproc-per-node 1 --no-python /bin/true (1 GPU where one exists)
  1 GPU worker     ddplaunch --nproc-per-node 1 --no-python /bin/true on a GPU, where one exists
  peak RSS         the 1-worker job's peak RSS (wait4's ru_maxrss: the launcher, the largest of its tree)
  kill -9 restart  SIGKILL of attempt 0's worker until attempt 1's worker runs (--max-restarts 1; floor 10 ms)
  N agents start/stop/RSS   bench/scale.sh N (K runs each, interleaved): every worker started; SIGKILL of one
                   joined agent until every other agent has exited; the serving agent's peak RSS
A figure is worse when the new median is more than THRESHOLD above the reference's AND the median of the paired
differences is above the figure's noise floor (a few ms, or the larger interquartile range of the two sides when
larger: the whole range for fewer than 4 samples) AND most pairs agree. Exit status 1 when any figure is worse, 0 otherwise. Standard library only.
"""
import argparse, os, random, shutil, signal, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))


def gpu_host():
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


class Side:
    """One binary with its own private runtime and lock directories (its own topology cache)."""

    def __init__(self, name, binary, root):
        self.name, self.bin = name, os.path.abspath(binary)
        self.dir = tempfile.mkdtemp(prefix=name + ".", dir=root)
        run = os.path.join(self.dir, "run")
        os.mkdir(run, 0o700)
        os.mkdir(os.path.join(self.dir, "locks"))
        os.mkdir(os.path.join(self.dir, "home"))
        self.env = dict(os.environ, XDG_RUNTIME_DIR=run, DDPLAUNCH_LOCK_DIR=os.path.join(self.dir, "locks"),
                        HOME=os.path.join(self.dir, "home"))


def run_once(argv, env):
    """Wall seconds and peak RSS (MB) of argv and what it waited for; fails on a non-zero exit."""
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, env, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("compare: %s exited %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return wall, ru.ru_maxrss / 1024.0


def kill9_restart(side, cpu_args):
    """Seconds from SIGKILL of attempt 0's worker until attempt 1's worker runs."""
    d = tempfile.mkdtemp(dir=side.dir)
    pidf, done = os.path.join(d, "pid"), os.path.join(d, "restarted")
    script = ('if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then echo $$ >%s.tmp; mv %s.tmp %s; exec sleep 60; '
              'else : >%s; fi' % (pidf, pidf, pidf, done))
    argv = [side.bin, "--nproc-per-node", "1", "--max-restarts", "1"] + cpu_args + ["--no-python", "/bin/sh", "-c",
                                                                                   script]
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    pid = os.posix_spawnp(argv[0], argv, side.env, file_actions=fa)
    os.close(devnull)
    deadline = time.monotonic() + 30
    while not os.path.exists(pidf) and time.monotonic() < deadline:
        time.sleep(0.0005)
    with open(pidf) as f:
        worker = int(f.read())
    t0 = time.perf_counter()
    os.kill(worker, signal.SIGKILL)
    while not os.path.exists(done) and time.monotonic() < deadline:
        time.sleep(0.0005)
    t = time.perf_counter() - t0
    restarted = os.path.exists(done)
    os.waitpid(pid, 0)
    shutil.rmtree(d, ignore_errors=True)
    if not restarted:
        sys.exit("compare: %s did not restart its worker" % side.bin)
    return t


def scale(side, n, select_none):
    """bench/scale.sh BIN N: (start s, stop s, serving agent's RSS MB, bare start s)."""
    env = dict(side.env)
    if select_none:
        env["DDP_ARGS"] = "--set gpus.select=none"
    out = subprocess.run(["bash", os.path.join(HERE, "scale.sh"), side.bin, str(n)], env=env, capture_output=True,
                         text=True, timeout=900)
    rows = [l.split() for l in out.stdout.splitlines() if l.split() and l.split()[0] == str(n)]
    if out.returncode != 0 or not rows or len(rows[-1]) < 9:
        sys.exit("compare: scale.sh %s %d failed:\n%s%s" % (side.bin, n, out.stdout, out.stderr))
    r = rows[-1]
    return float(r[1]), float(r[5]), float(r[8]), float(r[2])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--agents", default="256 1024", help="agent counts for bench/scale.sh ('' for none)")
    ap.add_argument("--agent-runs", type=int, default=2)
    ap.add_argument("--gpu", choices=["auto", "yes", "no"], default="auto")
    ap.add_argument("--threshold", type=float, default=0.10)
    ap.add_argument("--ref-name", default="ref")
    a = ap.parse_args()
    gpu = gpu_host() if a.gpu == "auto" else a.gpu == "yes"
    cpu_args = ["--set", "gpus.select=none"] if gpu else []
    root = tempfile.mkdtemp(prefix="ddpcompare.")
    sides = [Side("ref", a.ref, root), Side("new", a.new, root)]

    # figure name -> (unit, floor, argv builder or None); samples[figure][side] = [...]
    cmds = {
        "1 worker": lambda s: [s.bin, "--nproc-per-node", "1"] + cpu_args + ["--no-python", "/bin/true"],
        "8 workers": lambda s: [s.bin, "--nproc-per-node", "8"] + cpu_args + ["--no-python", "/bin/true"],
        "plan": lambda s: [s.bin, "plan", "--nproc-per-node", "1", "--no-python", "/bin/true"],
    }
    if gpu:
        cmds["1 GPU worker"] = lambda s: [s.bin, "--nproc-per-node", "1", "--no-python", "/bin/true"]
    floors = {"ms": 3.0, "MB": 0.5, "s": 0.1}
    samples = {k: {"ref": [], "new": []} for k in list(cmds) + ["peak RSS", "kill -9 to restarted"]}
    units = {k: "ms" for k in samples}
    units["peak RSS"] = "MB"
    shs = {1: [], 8: []}
    bares = {}  # N agents -> bare start seconds (scale.sh's processes without the launcher)
    sh = {n: ["/bin/sh", "-c", " ".join(["/bin/true &"] * n) + " wait"] for n in shs}

    for warm in range(2):  # the first runs fill each side's topology cache
        for s in sides:
            for k, f in cmds.items():
                run_once(f(s), s.env)
    for r in range(a.rounds):
        jobs = [(k, s) for k in cmds for s in sides] + [("kill", s) for s in sides] + [("sh", n) for n in shs]
        random.shuffle(jobs)
        for k, s in jobs:
            if k == "sh":
                shs[s].append(run_once(sh[s], os.environ)[0] * 1e3)
            elif k == "kill":
                samples["kill -9 to restarted"][s.name].append(kill9_restart(s, cpu_args) * 1e3)
            else:
                wall, rss = run_once(cmds[k](s), s.env)
                samples[k][s.name].append(wall * 1e3)
                if k == "1 worker":
                    samples["peak RSS"][s.name].append(rss)
        # pairs: ith sample of ref against ith of new (same round)
    for n in [int(x) for x in a.agents.split()]:
        for fig, unit in (("start", "s"), ("stop", "s"), ("serving RSS", "MB")):
            samples["%d agents %s" % (n, fig)] = {"ref": [], "new": []}
            units["%d agents %s" % (n, fig)] = unit
        for run in range(a.agent_runs):
            for s in random.sample(sides, 2):
                st, sp, rss, bare = scale(s, n, gpu)
                bares.setdefault(n, []).append(bare)
                samples["%d agents start" % n][s.name].append(st)
                samples["%d agents stop" % n][s.name].append(sp)
                samples["%d agents serving RSS" % n][s.name].append(rss)

    med = statistics.median
    print("ddplaunch compare: ref %s (%s) vs new %s; %d rounds, medians; %s host" %
          (a.ref_name, a.ref, a.new, a.rounds, "GPU" if gpu else "CPU-only"))
    print("%-26s %10s %10s %7s  %s" % ("figure", a.ref_name, "new", "ratio", "verdict"))
    for n, v in shs.items():
        print("%-26s %10s %10s %7s  %s" % ("sh %d" % n, "%.1f ms" % med(v), "", "", "(the floor)"))
    for n, v in bares.items():
        print("%-26s %10s %10s %7s  %s" % ("%d bare start" % n, "%.2f s" % med(v), "", "", "(the floor)"))
    worse = []
    for k, v in samples.items():
        ref, new = v["ref"], v["new"]
        if not ref or not new:
            continue
        unit = units[k]
        mr, mn = med(ref), med(new)
        ratio = mn / mr if mr > 0 else (1.0 if mn <= 0 else float("inf"))
        diffs = [y - x for x, y in zip(ref, new)]
        md = med(diffs)
        agree = sum(d > 0 for d in diffs) / len(diffs)
        # the noise band: the larger interquartile range of the two (the whole range for fewer than 4 samples)
        def iqr(v):
            q = statistics.quantiles(v, n=4) if len(v) >= 4 else [min(v), 0, max(v)]
            return q[2] - q[0]

        floor = max(floors[unit] if k != "kill -9 to restarted" else 10.0, iqr(ref), iqr(new))
        bad = ratio > 1 + a.threshold and md > floor and agree >= 0.6
        note = "WORSE" if bad else "ok"
        if k in ("1 worker", "8 workers"):
            n = 1 if k == "1 worker" else 8
            note += " (x sh: %.1f -> %.1f)" % (mr / med(shs[n]), mn / med(shs[n]))
        fmt = "%.1f %s" if unit != "s" else "%.2f %s"
        print("%-26s %10s %10s %6.2fx  %s" % (k, fmt % (mr, unit), fmt % (mn, unit), ratio, note))
        if bad:
            worse.append("%s: %.2fx (median difference %.2f %s, noise floor %.2f %s)" % (k, ratio, md, unit, floor,
                                                                                       unit))
    shutil.rmtree(root, ignore_errors=True)
    if worse:
        print("compare: worse than %s beyond noise:\n  %s" % (a.ref_name, "\n  ".join(worse)))
        return 1
    print("compare: no figure more than %d%% worse than %s beyond noise" % (round(a.threshold * 100), a.ref_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
