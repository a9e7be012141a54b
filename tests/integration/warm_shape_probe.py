"""The program of test 98 (warm = cold conformance), in every shape it runs as (script, -m module, zipapp,
directory, .pyc): what it sees at its start, written to $PROBE_OUT/a<attempt>.json. Attempt 0 waits for $PROBE_GO
(the test makes it once the launcher's standby is ready, or warm restart was said off) and fails, so that attempt
1 starts in the standby; attempt 1 ends at once. Python 3.6+; no f-strings."""
import json, os, signal, sys, threading, time

_m = sys.modules["__main__"]


def _name(v):
    return None if v is None else type(v).__name__


_saw = {
    "argv": list(sys.argv),
    "orig_argv": getattr(sys, "orig_argv", "n/a"),
    "path": list(sys.path),
    "environ": dict(os.environ),
    "cwd": os.getcwd(),
    "flags": str(sys.flags),
    "signals": {s.name: str(signal.getsignal(s)) for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "masks": [ln.strip() for ln in open("/proc/self/status") if ln.startswith(("SigBlk", "SigIgn"))],
    "main_keys": sorted(k for k in vars(_m) if k.startswith("__")),
    "main_file": getattr(_m, "__file__", "n/a"),
    "main_name": __name__,
    "main_spec": None if _m.__spec__ is None else [_m.__spec__.name, _m.__spec__.origin, _m.__spec__.parent],
    "main_package": getattr(_m, "__package__", "n/a"),
    "main_loader": _name(getattr(_m, "__loader__", None)),
    "main_cached": getattr(_m, "__cached__", "n/a"),
    "site_modules": {k: getattr(sys.modules.get(k), "__file__", None) for k in ("sitecustomize", "usercustomize")
                     if k in sys.modules},
    "main_thread": threading.current_thread() is threading.main_thread(),
    "isatty": [os.isatty(i) for i in range(3)],
}
_a = os.environ["TORCHELASTIC_RESTART_COUNT"]
with open(os.path.join(os.environ["PROBE_OUT"], "a%s.json" % _a), "w") as _f:
    json.dump(_saw, _f, indent=1, sort_keys=True)
print("shape probe attempt", _a, flush=True)
if _a == "0":
    while not os.path.exists(os.environ["PROBE_GO"]):
        time.sleep(0.05)
    sys.exit(3)
