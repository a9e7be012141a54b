"""The DDP tutorial's set-up, phase by phase (issue 41: where a warm rank's seconds go before "Loading snapshot").
It is pytorch/examples' ddp-tutorial-series multigpu_torchrun.py up to and including DDP(...), in the same order,
with a wall-clock mark after each step; its datautils.py (never committed) must lie beside this file. Run as a
rank (by ddplaunch, or by hand with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set). Environment:
  PHASES_OUT      directory for the result (phases-MODE-aN-pPID.json) and, under a launcher, the kill handshake
  PHASES_MODE     a label (fresh, warm, cold...)
  PHASES_BACKEND  nccl (the tutorial's; default) or gloo (no GPU: this VM)
  PHASES_PROFILE  set: cProfile from the first line to DDP(...), top 40 by cumulative time, 25 by own time, into
                  the result
Attempt 0 under a launcher (TORCHELASTIC_RESTART_COUNT=0) then waits for PHASES_OUT/go, writes the time into
PHASES_OUT/kill and kills itself (SIGKILL), as the benchmark's kill -9 does; a later attempt's marks are also given
from that time."""
import time

_t0 = time.time()
import os  # noqa: E402
import sys  # noqa: E402

_mods0 = set(sys.modules)
_prof = None
if os.environ.get("PHASES_PROFILE"):
    import cProfile

    _prof = cProfile.Profile()
    _prof.enable()
_marks = [("start", _t0)]
_new = {}  # the modules each step imported (in a warm rank: what preload did not)


def mark(name):
    _marks.append((name, time.time()))
    now = set(sys.modules)
    _new[name] = sorted(now - _mods0)
    _mods0.update(now)


import torch  # noqa: E402
from torch.utils.data import Dataset, DataLoader  # noqa: E402,F401
from datautils import MyTrainDataset  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402,F401
from torch.utils.data.distributed import DistributedSampler  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.distributed import init_process_group  # noqa: E402

mark("imports")
backend = os.environ.get("PHASES_BACKEND", "nccl")
gpu = backend == "nccl"
init_process_group(backend=backend)
mark("init_process_group")
cuda_after_pg = gpu and torch.cuda.is_initialized()
train_set = MyTrainDataset(2048)
mark("dataset")
model = torch.nn.Linear(20, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
mark("model_optimizer")
train_data = DataLoader(train_set, batch_size=32, pin_memory=gpu, shuffle=False, sampler=DistributedSampler(train_set))
mark("dataloader")
gpu_id = int(os.environ["LOCAL_RANK"])
if gpu:
    torch.cuda.init()  # what model.to(gpu_id) does first: split out to time the CUDA context apart from the copy
    mark("cuda_init")
    model = model.to(gpu_id)
    mark("model_to_gpu")
out = os.environ.get("PHASES_OUT", ".")
snap = os.path.join(out, "phases-snapshot.pt")
if os.path.exists(snap):
    print("Loading snapshot", flush=True)
    mark("loading_snapshot")
    model.load_state_dict(torch.load(snap)["MODEL_STATE"])
    mark("torch_load")
model = DDP(model, device_ids=[gpu_id] if gpu else None)
mark("ddp")
if _prof:
    _prof.disable()
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")


def facts():
    st = {ln.split(":")[0]: ln.split(":", 1)[1].strip() for ln in open("/proc/self/status")}
    try:
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except OSError:
        nice = None
    tn = []
    for tid in os.listdir("/proc/self/task"):
        try:
            tn.append(os.getpriority(os.PRIO_PROCESS, int(tid)))
        except OSError:
            pass
    return {
        "threads": int(st.get("Threads", 0)),
        "thread_nice": sorted(tn),
        "nice": nice,
        "affinity": len(os.sched_getaffinity(0)),
        "torch_threads": torch.get_num_threads(),
        "cuda_initialized_by_init_process_group": cuda_after_pg,
        "env": {k: os.environ.get(k) for k in ("CUDA_MODULE_LOADING", "OMP_NUM_THREADS", "MASTER_PORT",
                                                "TORCH_NCCL_TRACE_BUFFER_SIZE", "NCCL_DEBUG", "PYTHONPATH")},
        "torch": torch.__version__,
    }


res = {
    "mode": os.environ.get("PHASES_MODE", "fresh"),
    "attempt": attempt,
    "pid": os.getpid(),
    "marks": _marks,
    "new_modules": {k: v for k, v in _new.items() if v},
    "facts": facts(),
}
if attempt not in (None, "0"):
    try:
        res["kill"] = float(open(os.path.join(out, "kill")).read())
    except (OSError, ValueError):
        pass
if _prof:
    import io
    import pstats

    s = io.StringIO()
    pstats.Stats(_prof, stream=s).sort_stats("cumulative").print_stats(40)
    pstats.Stats(_prof, stream=s).sort_stats("tottime").print_stats(25)
    res["profile"] = s.getvalue()
if attempt == "0" or attempt is None:
    torch.save({"MODEL_STATE": model.module.state_dict(), "EPOCHS_RUN": 0}, snap + ".tmp")
    os.replace(snap + ".tmp", snap)
with open(os.path.join(out, "phases-%s-a%s-p%d.json" % (res["mode"], attempt, os.getpid())), "w") as f:
    import json

    json.dump(res, f, indent=1)
print("phases %s attempt %s done" % (res["mode"], attempt), flush=True)
if attempt != "0":
    torch.distributed.destroy_process_group()
if attempt == "0":
    go = os.path.join(out, "go")
    end = time.time() + 120
    while not os.path.exists(go) and time.time() < end:
        time.sleep(0.01)
    import signal

    with open(os.path.join(out, "kill"), "w") as f:
        f.write("%.6f" % time.time())
    os.kill(os.getpid(), signal.SIGKILL)
