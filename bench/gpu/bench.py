#!/usr/bin/env python3
"""ddplaunch vs torchrun on a GPU machine, side by side, alternating, several runs each.

    python3 bench/gpu/bench.py --ddplaunch PATH --out results.json [--reps 5]

Cases (issue 9): 1 train_ddp.py on 2 GPUs (wall, launch -> first all_reduce, launcher peak RSS, loss values);
2 `--no-python /bin/true` x 8 (launch overhead); 3 rank exits 3 after the first step (time until its peer got
SIGTERM, exit status); 4 an NCCL collective timeout (what each reports, time until training again; ddplaunch
downsizes to 1 GPU); 5 kill -9 of the launcher (workers alive 2 s later). Medians are reported."""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(ROOT, "examples", "train_ddp.py")


def run(cmd, env=None, timeout=600):
    """Run cmd; return (exit status, wall seconds, peak RSS of the launcher process in KiB, output)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                         start_new_session=True)
    peak = 0
    out = []
    import threading

    def reader():
        for line in p.stdout:
            out.append((time.time(), line))

    th = threading.Thread(target=reader)
    th.start()
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        time.sleep(0.02)
        if time.time() - t0 > timeout:
            os.killpg(p.pid, signal.SIGKILL)
    th.join()
    return p.returncode, time.time() - t0, peak, out, t0


def launchers(args):
    return {
        "ddplaunch": [args.ddplaunch],
        "torchrun": ["torchrun"],
    }


def med(xs):
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 4) if xs else None


def case_train(args, L, res):
    for rep in range(args.reps):
        for name, pre in L.items():
            rc, wall, rss, out, t0 = run(pre + ["--nproc-per-node", "2", TRAIN, "--steps", "20"])
            text = "".join(l for _, l in out)
            m = re.search(r"allreduce_unix=([0-9.]+)", text)
            losses = re.findall(r"step (\d+) loss ([0-9.]+)", text)
            r = res.setdefault("train_2gpu", {}).setdefault(name, [])
            r.append({"rc": rc, "wall_s": wall, "first_allreduce_s": (float(m.group(1)) - t0) if m else None,
                      "launcher_peak_rss_kib": rss, "final_loss": float(losses[-1][1]) if losses else None,
                      "checksum": (re.search(r"checksum=(-?[0-9.]+)", text) or [None, None])[1]})
            if rep == 0:
                res.setdefault("train_2gpu_output", {})[name] = text[-3000:]


def case_true(args, L, res):
    for rep in range(args.reps):
        for name, pre in L.items():
            extra = ["--set", "gpus.select=none"] if name == "ddplaunch" else []  # 8 CPU workers on a 2-GPU host
            rc, wall, rss, out, t0 = run(pre + extra + ["--nproc-per-node", "8", "--no-python", "/bin/true"])
            res.setdefault("true_x8", {}).setdefault(name, []).append(
                {"rc": rc, "wall_s": wall, "launcher_peak_rss_kib": rss})


def case_failfast(args, L, res):
    for rep in range(args.reps):
        for name, pre in L.items():
            d = tempfile.mkdtemp(prefix="ff")
            env = dict(os.environ, BENCH_DIR=d)
            rc, wall, rss, out, t0 = run(pre + ["--nproc-per-node", "2", os.path.join(HERE, "failfast.py")], env=env)
            try:
                t_exit = float(open(os.path.join(d, "exit.1")).read())
                t_term = float(open(os.path.join(d, "term.0")).read())
                dt = t_term - t_exit
            except OSError:
                dt = None
            res.setdefault("failfast", {}).setdefault(name, []).append(
                {"rc": rc, "wall_s": wall, "exit_to_peer_sigterm_s": dt})
            if rep == 0:
                res.setdefault("failfast_output", {})[name] = "".join(l for _, l in out)[-3000:]


def case_timeout(args, L, res):
    """Rank 1 hangs before step 2's all_reduce in the first attempt; the NCCL watchdog (10 s) fires."""
    extra = {
        "ddplaunch": ["--max-restarts", "1", "--set", "restart.on_timeout=downsize"],
        "torchrun": ["--max-restarts", "1"],
    }
    for rep in range(max(1, args.reps // 2)):
        for name, pre in L.items():
            env = dict(os.environ, TORCH_NCCL_ASYNC_ERROR_HANDLING="1")
            rc, wall, rss, out, t0 = run(pre + extra[name] + ["--nproc-per-node", "2", TRAIN, "--steps", "6",
                                                             "--pg-timeout", "10", "--hang-rank", "1",
                                                             "--hang-step", "2"], env=env, timeout=args.timeout_case_limit)
            hang_t = next((t for t, l in out if "hanging before" in l), None)
            back_t = next((t for t, l in out if "attempt=1" in l), None)
            text = "".join(l for _, l in out)
            m = re.findall(r"world_size=(\d+)", text)
            res.setdefault("nccl_timeout", {}).setdefault(name, []).append(
                {"rc": rc, "wall_s": wall, "hang_to_training_again_s": (back_t - hang_t) if hang_t and back_t else None,
                 "final_world_size": int(m[-1]) if m else None, "completed": "done steps=" in text,
                 "killed_by_bench_after_s": args.timeout_case_limit if wall >= args.timeout_case_limit else None})
            if rep == 0:
                res.setdefault("nccl_timeout_output", {})[name] = text[-6000:]


def case_kill9(args, L, res):
    for rep in range(args.reps):
        for name, pre in L.items():
            marker = f"ddpbench-{name}-{rep}-{os.getpid()}"
            p = subprocess.Popen(pre + ["--nproc-per-node", "4", "--no-python", "/bin/sleep", "300", marker],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 30
            while time.time() < deadline:
                n = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
                if len([x for x in n if int(x) != p.pid]) >= 4:
                    break
                time.sleep(0.1)
            p.kill()
            p.wait()
            time.sleep(2)
            left = [x for x in subprocess.run(["pgrep", "-f", "sleep 300 " + marker], capture_output=True,
                                              text=True).stdout.split()]
            res.setdefault("kill9", {}).setdefault(name, []).append({"workers_alive_after_2s": len(left)})
            subprocess.run(["pkill", "-9", "-f", marker])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ddplaunch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cases", default="train,true,failfast,timeout,kill9")
    ap.add_argument("--timeout-case-limit", type=float, default=150)
    ap.add_argument("--merge", help="results.json of an earlier run to extend")
    args = ap.parse_args()
    L = launchers(args)
    res = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "reps": args.reps}
    if args.merge and os.path.exists(args.merge):
        res = json.load(open(args.merge))
        res.pop("summary", None)
    try:
        import torch
        res["torch"] = torch.__version__
        res["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        res["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as e:  # noqa
        res["torch_error"] = str(e)
    cases = {"train": case_train, "true": case_true, "failfast": case_failfast, "timeout": case_timeout,
             "kill9": case_kill9}
    for c in args.cases.split(","):
        t = time.time()
        cases[c](args, L, res)
        print(f"case {c}: {time.time() - t:.1f}s", flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    summary = {}
    for case in ("train_2gpu", "true_x8", "failfast", "nccl_timeout", "kill9"):
        for name, runs in res.get(case, {}).items():
            keys = [k for k in runs[0] if k != "rc" and isinstance(runs[0][k], (int, float, type(None)))
                    and not isinstance(runs[0][k], bool)]
            summary.setdefault(case, {})[name] = {k: med([r[k] for r in runs]) for k in keys}
            summary[case][name]["rc"] = sorted(set(r["rc"] for r in runs if "rc" in r))
    res["summary"] = summary
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
