#!/usr/bin/env python3
"""ddplaunch benchmarks (issue 3), ddplaunch next to Debian's torchrun in the same run. Medians.

usage: bench.py DDPLAUNCH HELPERS_DIR [--quick]
Every number is wall-clock on this machine; torchrun is run through bench/torchrun.py (Std.from_str fix)
with --monitor_interval 0.1 (its 1.13 default of 5 s is also shown once)."""
import os, resource, signal, statistics, subprocess, sys, tempfile, time

DDP = os.path.abspath(sys.argv[1])
HELP = os.path.abspath(sys.argv[2])
QUICK = "--quick" in sys.argv
PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
TORCHRUN = [PY, os.path.join(HERE, "torchrun.py")]
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")


def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


def torch_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "python3-torch"], capture_output=True, text=True)
        deb = out.stdout.strip()
    except OSError:
        deb = "?"
    v = subprocess.run([PY, "-c", "import torch,sys; print(torch.__version__, sys.version.split()[0])"],
                       capture_output=True, text=True).stdout.split()
    return f"python3-torch {deb} (torch.__version__ {v[0]}, Python {v[1]})" if len(v) == 2 else deb


def ddp_cmd(n, prog, *extra):
    return [DDP, "--no-python", "--nproc-per-node", str(n), *extra, *prog]


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def tr_cmd(n, prog, *extra, monitor="0.1"):
    # a free port each time: torchrun's default 29500 may be taken by another job on the host
    return [*TORCHRUN, "--nproc_per_node", str(n), "--monitor_interval", monitor, "--master_port", str(free_port()),
            *extra, "--no_python", *prog]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def cpu_children():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(cmd, cpu=None, **kw):
    c = cpu_children()
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, **kw)
    dt = time.perf_counter() - t
    if cpu is not None:
        cpu.append(cpu_children() - c)
    return dt, r.returncode


def row(name, d, t, unit, fmt="{:.1f}"):
    ds = fmt.format(d) if d == d else "-"
    ts = fmt.format(t) if t == t else "-"
    print(f"  {name:<44} {ds:>12} {ts:>12}  {unit}")


def launch_overhead(torch_ok):
    print("launch + reap of N trivial workers (--no-python /bin/true), median wall time")
    for n, reps_d, reps_t in ((1, 21, 3), (8, 21, 3), (64, 11, 3)):
        if QUICK:
            reps_d, reps_t = 5, 1
        dc, tc = [], []
        d = [timed(ddp_cmd(n, ["/bin/true"]), dc)[0] for _ in range(reps_d)]
        t = [timed(tr_cmd(n, ["/bin/true"]), tc)[0] for _ in range(reps_t)] if torch_ok else []
        row(f"N = {n}", median(d) * 1000, median(t) * 1000, "ms")
        row(f"  CPU time, launcher + shims + workers", median(dc) * 1000, median(tc) * 1000, "ms")
        ref = []
        for _ in range(reps_d):
            t0 = time.perf_counter()
            procs = [subprocess.Popen(["/bin/true"]) for _ in range(n)]
            for p in procs:
                p.wait()
            ref.append(time.perf_counter() - t0)
        row(f"  reference: {n} x /bin/true started by Python", median(ref) * 1000, float("nan"), "ms")
        setup = [timed([DDP, "plan", "--no-python", "--nproc-per-node", str(n), "/bin/true"])[0]
                 for _ in range(reps_d)]
        row(f"  of which ddplaunch setup (`ddplaunch plan`)", median(setup) * 1000, float("nan"), "ms")
    if torch_ok:
        t = timed(tr_cmd(8, ["/bin/true"], monitor="5"))[0]
        row("N = 8, torchrun's default --monitor_interval 5", float("nan"), t * 1000, "ms")


def peak_rss(cmd):
    """Launcher's VmHWM (kB), read from /proc until it exits (its workers sleep 0.5 s)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    hwm = 0
    shim = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
            kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
            if kids and not shim:
                with open(f"/proc/{kids[0]}/status") as f:
                    for line in f:
                        if line.startswith("VmRSS:") and int(line.split()[1]) > 0:
                            shim = int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.005)
    return hwm, shim


def rss(torch_ok):
    print("launcher peak RSS (VmHWM) with 8 workers sleeping 0.5 s")
    d, shim = peak_rss(ddp_cmd(8, ["/bin/sleep", "0.5"]))
    t = peak_rss(tr_cmd(8, ["/bin/sleep", "0.5"]))[0] if torch_ok else float("nan")
    row("peak RSS", d / 1024, t / 1024, "MiB")
    row("RSS of one exec shim (ddplaunch; the worker's parent)", shim / 1024, float("nan"), "MiB")


def fail_to_term(cmd_of, reps):
    out = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run(cmd_of(d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, timeout=120)
            try:
                fail = int(open(os.path.join(d, "fail")).read())
                terms = [int(open(os.path.join(d, f)).read()) for f in os.listdir(d) if f.startswith("term.")]
                if terms:
                    out.append((min(terms) - fail) / 1e6)
            except (OSError, ValueError):
                pass
    return out


def failure(torch_ok):
    print("failure -> SIGTERM reaching the peers (rank 0 exits 1, 3 peers time the SIGTERM)")
    d = fail_to_term(lambda t: ddp_cmd(4, [f"{HELP}/termstamp", t]), 5 if QUICK else 15)
    t = fail_to_term(lambda t: tr_cmd(4, [f"{HELP}/termstamp", t]), 1 if QUICK else 3) if torch_ok else []
    row("median latency", median(d), median(t), "ms", "{:.2f}")
    if d:
        row("max latency", max(d), max(t) if t else float("nan"), "ms", "{:.2f}")


def teardown_once(cmd, n):
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.Popen(cmd(d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
        deadline = time.time() + 60
        while len([f for f in os.listdir(d) if f.startswith("pid.")]) < n and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(0.05)
        t = time.perf_counter()
        p.send_signal(signal.SIGTERM)
        p.wait()
        return time.perf_counter() - t


def teardown(torch_ok):
    print("tear down 8 running workers: SIGTERM to the launcher -> launcher exited")
    d = [teardown_once(lambda t: ddp_cmd(8, [f"{HELP}/hang", "3600", t]), 8) for _ in range(3 if QUICK else 11)]
    t = [teardown_once(lambda t: tr_cmd(8, [f"{HELP}/hang", "3600", t]), 8) for _ in range(1 if QUICK else 3)] \
        if torch_ok else []
    row("median", median(d) * 1000, median(t) * 1000, "ms")


def throughput_once(cmd, nlines):
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=ENV)
    count = 0
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
        count += chunk.count(b"\n")
    p.wait()
    return time.perf_counter() - t, count


def throughput(torch_ok):
    n, per = 4, 200000
    total = n * per
    print(f"output: {n} workers x {per} lines (one write() each) to a pipe; lines/s and lines received")
    prog = [f"{HELP}/printlines", str(per)]
    res = [throughput_once(ddp_cmd(n, prog), total) for _ in range(2 if QUICK else 5)]
    dt = median([r[0] for r in res])
    got = min(r[1] for r in res)
    tres = []
    if torch_ok:
        tres = [throughput_once(tr_cmd(n, prog, "--tee", "3", "--log_dir", tempfile.mkdtemp()), total)
                for _ in range(1 if QUICK else 2)]
    tt = median([r[0] for r in tres]) if tres else float("nan")
    tgot = min(r[1] for r in tres) if tres else 0
    row("lines/s (ddplaunch prefixed; torchrun --tee 3)", total / dt, total / tt if tt == tt else tt, "lines/s",
        "{:,.0f}")
    row(f"lines received of {total}", got, tgot if tres else float("nan"), "lines", "{:,.0f}")
    # reference: the same 4 programs writing straight into one pipe, no launcher
    t = time.perf_counter()
    p = subprocess.Popen(["/bin/sh", "-c", " & ".join([" ".join(prog)] * n) + "; wait"], stdout=subprocess.PIPE,
                         env=dict(ENV, RANK="0"))
    c = sum(chunk.count(b"\n") for chunk in iter(lambda: p.stdout.read(1 << 20), b""))
    p.wait()
    direct = time.perf_counter() - t
    row("reference: no launcher, same pipe (lines/s)", total / direct, float("nan"), "lines/s", "{:,.0f}")


def main():
    torch_ok = have_torch()
    print(f"ddplaunch: {DDP}")
    print(f"torchrun:  {'python3 -m torch.distributed.run via bench/torchrun.py, ' + torch_version() if torch_ok else 'not installed (python3-torch missing): torchrun columns empty'}")
    print(f"machine:   {os.cpu_count()} CPUs, {os.uname().release}")
    print(f"  {'':<44} {'ddplaunch':>12} {'torchrun':>12}")
    t0 = time.time()
    launch_overhead(torch_ok)
    rss(torch_ok)
    failure(torch_ok)
    teardown(torch_ok)
    throughput(torch_ok)
    print(f"(bench took {time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
