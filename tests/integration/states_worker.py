"""A DDP-style loop for the stuck / busy / waiting tests (issue 51; tests 95-97): gloo on CPU, or NCCL on GPUs with
HS_BACKEND=nccl (bench/gpu/hang-recovery.sh). At step HS_AT (3) rank HS_RANK (0) does HS_KIND, alone, while the
others wait as HS_WAIT says: in a barrier, a blocking all_reduce (allreduce), or polling an async all_reduce (poll).
HS_KIND, healthy (it ends after HS_ALONE_S seconds, 12; HS_ALONE_S=inf: never):
  eval  - computes in C (torch matmuls; one source line, so its stack stands still)
  ckpt  - writes a checkpoint: 4 MB writes with fsync, into HS_DIR (the working directory)
  prep  - prepares data in Python (a generator over integers)
stuck (only in the attempts below HS_STUCK_ATTEMPTS, 1; then the step runs normally):
  sleep - time.sleep; lock - a lock it already holds; fifo - a read of a FIFO nobody writes;
  gpu   - spins in a GPU wait that never ends (a stand-in for torch.cuda.synchronize on a hung kernel)
bench/gpu/hang-recovery.sh: HS_AT_S=N starts it at the first step N s after the rank started instead (then the
attempts after a restart run HS_AFTER (10) steps past where they resumed, and end); HS_TS=1 puts time.time() at the
end of each line. Each rank prints "rank R step S" every step, "rank R resumed at step S" when a checkpoint of an earlier attempt was
there (HS_CKPT: a step counter in HS_DIR, written by rank 0 each step), and "rank R done" at the end."""
import datetime, math, os, threading, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
culprit = int(os.environ.get("HS_RANK", "0"))
kind = os.environ.get("HS_KIND", "eval")
wait = os.environ.get("HS_WAIT", "allreduce")
steps = int(os.environ.get("HS_STEPS", "8"))
at = int(os.environ.get("HS_AT", "3"))
alone_s = float(os.environ.get("HS_ALONE_S", "12"))
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
stuck_attempts = int(os.environ.get("HS_STUCK_ATTEMPTS", "1"))
workdir = os.environ.get("HS_DIR", ".")
at_s = float(os.environ.get("HS_AT_S") or "0")
after = int(os.environ.get("HS_AFTER", "10"))
ts = os.environ.get("HS_TS") == "1"
born = time.monotonic()
backend = os.environ.get("HS_BACKEND", "gloo")
device = "cpu"
if backend == "nccl":
    device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    torch.cuda.set_device(device)
dist.init_process_group(backend, timeout=datetime.timedelta(seconds=float(os.environ.get("HS_PG_TIMEOUT_S", "1800"))))
ckpt = os.path.join(workdir, "hs_step")


def say(line):
    print(f"{line} t={time.time():.3f}" if ts else line, flush=True)



start = 0
if os.path.exists(ckpt):
    start = int(open(ckpt).read() or 0)
    say(f"rank {rank} resumed at step {start}")


def evaluate(end):
    a = torch.randn(256, 256)
    while time.monotonic() < end: a = torch.tanh(a @ a / 16)  # noqa: E701 (one line: the stack stands still)


def save_checkpoint(end):
    buf = b"x" * (4 << 20)
    with open(os.path.join(workdir, f"hs_ckpt_{rank}.bin"), "wb") as f:
        while time.monotonic() < end: f.seek(0); f.write(buf); f.flush(); os.fsync(f.fileno())  # noqa: E701,E702


def prepare_data(end):
    while time.monotonic() < end: sum(i * i for i in range(20000))  # noqa: E701


def synchronize():
    while True: pass  # noqa: E701 (the host thread spins while the GPU never finishes)


def fetch_batch():
    if kind == "sleep":
        time.sleep(100000)
    elif kind == "lock":
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    elif kind == "fifo":
        path = os.path.join(workdir, f"hs_fifo_{rank}")
        os.mkfifo(path)
        fd = os.open(path, os.O_RDWR)  # never blocks in open; the read never gets data
        os.read(fd, 1)
    elif kind == "gpu":
        synchronize()


def alone():
    end = time.monotonic() + (math.inf if alone_s == math.inf else alone_s)
    say(f"rank {rank} alone from now ({kind})")
    if kind in ("sleep", "lock", "fifo", "gpu"):
        if attempt < stuck_attempts:
            fetch_batch()
        return
    {"eval": evaluate, "ckpt": save_checkpoint, "prep": prepare_data}[kind](end)


def wait_for_others(t):
    if wait == "barrier":
        dist.barrier()
    if wait == "poll":  # as a CUDA sync waits for an NCCL kernel: in a function of its own, no collective on the stack
        work = dist.all_reduce(t, async_op=True)
        while not work.is_completed(): time.sleep(0.05)  # noqa: E701
        work.wait()  # raises when the process group timed out
    else:
        dist.all_reduce(t)


if at_s:  # by the clock: the attempts after a restart end HS_AFTER steps past where they resumed
    steps = start + after if attempt > 0 else 1 << 30
    at = -1
alone_done = False
for step in range(start, steps):
    t = torch.ones(4, device=device) * step
    if rank == culprit and not alone_done and (step == at or (at_s and attempt == 0 and time.monotonic() - born >= at_s)):
        alone_done = True
        alone()
    wait_for_others(t)
    if rank == 0:
        with open(ckpt + ".tmp", "w") as f:
            f.write(str(step + 1))
        os.replace(ckpt + ".tmp", ckpt)
    say(f"rank {rank} step {step}")
    time.sleep(0.3)
print(f"rank {rank} done", flush=True)
