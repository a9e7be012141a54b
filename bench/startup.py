#!/usr/bin/env python3
"""Start-up cost, side by side in one run: starting and reaping N x /bin/true by sh, by ddplaunch and by torchrun.

usage: python3 bench/startup.py [--ddplaunch PATH] [--torchrun CMD] [--rounds R] [--torchrun-rounds T] [--n 1,8]

Each round runs every command once, in a fresh random order (interleaved: a machine whose speed drifts during the
run moves every command alike); the table gives each command's median wall time over the rounds, the median
CPU time of it and its children (user + system), and the ratio of its median to sh's for the same N. Two warm-up
rounds are not counted (the first ddplaunch run of a boot fills the topology cache). torchrun runs in the first T
rounds only (it takes seconds). Standard library only; nothing but the commands themselves is timed beyond a
posix_spawn and a wait4.

  sh N        sh -c '/bin/true & ... (N times) wait'
  ddplaunch N ddplaunch --nproc-per-node N --no-python /bin/true
  torchrun N  torchrun --nproc_per_node N --no_python /bin/true (--monitor_interval 0.1; Debian's torch 1.13 through
              bench/torchrun.py, which fixes its Std.from_str on Python 3.11)
"""
import argparse, os, random, shlex, shutil, statistics, subprocess, sys, time

HERE = os.path.dirname(os.path.abspath(__file__))


def default_torchrun():
    py = "/usr/bin/python3"
    probe = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    if probe.returncode == 0 and probe.stdout.startswith("1."):
        return [py, os.path.join(HERE, "torchrun.py")], probe.stdout.strip()
    exe = shutil.which("torchrun")
    if not exe:
        return None, None
    ver = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return [exe], ver.stdout.strip() or "?"


def free_port():
    import socket
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def run_once(argv, env, check=True):
    """Wall and CPU seconds of argv and everything it waited for (exiting non-zero is an error when check)."""
    devnull = os.open(os.devnull, os.O_RDWR)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, env, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(devnull)
    if check and os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"startup.py: {' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ddplaunch", default=os.path.join(HERE, "..", "build", "ddplaunch"))
    ap.add_argument("--torchrun", help="the torchrun command line (default: torchrun, or bench/torchrun.py for 1.x)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--torchrun-rounds", type=int, default=5)
    ap.add_argument("--n", default="1,8", help="worker counts (comma-separated)")
    ap.add_argument("--ddplaunch-args", default="", help="more arguments for every ddplaunch row, e.g. "
                    "'--set gpus.select=none' (CPU workers on a machine with fewer GPUs than workers)")
    ap.add_argument("--extra", action="append", default=[], metavar="LABEL:N:COMMAND",
                    help="one more command to time beside the others (split as a shell splits words; compared with "
                         "sh of N workers; its exit status is not checked), e.g. "
                         "'no cache:1:env DDPLAUNCH_TOPOLOGY_CACHE=off build/ddplaunch ...' or 'doctor:1:build/ddplaunch doctor'")
    a = ap.parse_args()
    ddp = os.path.abspath(a.ddplaunch)
    if a.torchrun:
        tr, trver = a.torchrun.split(), "?"
    else:
        tr, trver = default_torchrun()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    ns = [int(x) for x in a.n.split(",")]
    cmds = []  # (label, n, argv, rounds)
    for n in ns:
        cmds.append(("sh", n, ["sh", "-c", "/bin/true & " * n + "wait"], a.rounds))
        cmds.append(("ddplaunch", n, [ddp, "--nproc-per-node", str(n), *a.ddplaunch_args.split(), "--no-python",
                                      "/bin/true"], a.rounds))
        if tr and a.torchrun_rounds > 0:
            cmds.append(("torchrun", n, tr + ["--nproc_per_node", str(n), "--monitor_interval", "0.1", "--master_port",
                                              str(free_port()), "--no_python", "/bin/true"], a.torchrun_rounds))
    labels = ["sh", "ddplaunch", "torchrun"]
    for e in a.extra:
        label, n, cmd = e.split(":", 2)
        cmds.append((label, int(n), shlex.split(cmd), a.rounds))
        labels.append(label)
    times = {(c[0], c[1]): ([], []) for c in cmds}
    for r in range(-2, a.rounds):
        order = [c for c in cmds if r < c[3]]
        random.shuffle(order)
        for label, n, argv, _ in order:
            wall, cpu = run_once(argv, env, check=label in ("sh", "ddplaunch", "torchrun"))
            if r >= 0:
                times[(label, n)][0].append(wall)
                times[(label, n)][1].append(cpu)
    uname = os.uname()
    ver = subprocess.run([ddp, "--version"], capture_output=True, text=True).stdout.strip()
    extra = f"ddplaunch rows with {a.ddplaunch_args}; " if a.ddplaunch_args else ""
    print(f"{ver}; {extra}torchrun {trver or 'not found'}; {os.cpu_count()} CPUs, {uname.sysname} {uname.release}; "
          f"{a.rounds} rounds ({a.torchrun_rounds} for torchrun), interleaved, {time.strftime('%Y-%m-%d')}")
    print()
    print("| starting and reaping | workers | median wall | x sh | median CPU | runs |")
    print("|---|---|---|---|---|---|")
    for n in ns:
        base = statistics.median(times[("sh", n)][0])
        for label in labels:
            if (label, n) not in times:
                continue
            w, c = times[(label, n)]
            m = statistics.median(w)
            print(f"| {label} | {n} x /bin/true | {m * 1000:.1f} ms | {m / base:.1f} | "
                  f"{statistics.median(c) * 1000:.1f} ms | {len(w)} |")


if __name__ == "__main__":
    main()
