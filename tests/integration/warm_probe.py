"""What a rank sees at its start (issue 41: a warm start must see what a fresh one does): os.environ, sys.argv,
__file__, sys.path[0], cwd, signal dispositions (Python's and the kernel's masks), isatty, the main thread, the
open descriptors. Written to $PROBE_OUT/rR_aA.json. Attempt 0's rank 0 waits for $PROBE_OUT/go, then kills itself
(SIGKILL); the others wait to be stopped. Attempt 1 ends at once."""
import json, os, signal, sys, threading, time

def _fds():
    """What each descriptor is (pipe:[N] and the like as their kind), less the listing's own and the sampler's
    stacks file in the attempt's directory, which its thread opens for a moment at start."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            what = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if not what.startswith("/proc") and os.environ["DDPLAUNCH_ATTEMPT_DIR"] not in what:
            out.append((fd, what.split(":")[0]))
    return sorted(out)


_start = {
    "environ": dict(os.environ),
    "argv": list(sys.argv),
    "file": __file__,
    "name": __name__,
    "path0": sys.path[0],
    "cwd": os.getcwd(),
    "signals": {s.name: str(signal.getsignal(s)) for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "masks": [ln.strip() for ln in open("/proc/self/status") if ln.startswith(("SigBlk", "SigIgn", "SigCgt"))],
    "isatty": [os.isatty(i) for i in range(3)],
    "main_thread": threading.current_thread() is threading.main_thread(),
    "orig_argv": getattr(sys, "orig_argv", None),
    "fds": _fds(),
    "nice": os.getpriority(os.PRIO_PROCESS, 0),
}
import torch, torch.distributed  # noqa: E402,F401  (a fresh rank pays for it here)

rank, attempt = os.environ["RANK"], os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(os.path.join(os.environ["PROBE_OUT"], "r%s_a%s.json" % (rank, attempt)), "w") as f:
    json.dump(_start, f, indent=1, sort_keys=True)
print("probe rank %s attempt %s" % (rank, attempt), flush=True)
if attempt == "0":
    if rank == "0":
        go = os.path.join(os.environ["PROBE_OUT"], "go")
        for _ in range(1200):
            if os.path.exists(go):
                break
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)
