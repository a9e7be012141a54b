"""A DDP-style loop where one rank (HANG_RANK) causes a hang, for the forensics test (issue 18): gloo on CPU, or
NCCL on GPUs with HANG_BACKEND=nccl (one GPU per rank: bench/gpu/hang.sh).
HANG_KIND: outside  - the rank stops taking part: it sleeps in its data loading (load_batch) forever;
           other    - the rank enters a different collective (broadcast) while the others all_reduce;
           slow     - the rank is slow, not stuck: one step takes HANG_SLOW_S seconds (longer than the timeout).
The others wait in all_reduce until gloo's timeout (HANG_PG_TIMEOUT_S) ends them."""
import datetime, os, sys, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
culprit = int(os.environ.get("HANG_RANK", "1"))
kind = os.environ.get("HANG_KIND", "outside")
backend = os.environ.get("HANG_BACKEND", "gloo")
device = "cpu"
if backend == "nccl":
    device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    torch.cuda.set_device(device)
dist.init_process_group(backend, timeout=datetime.timedelta(seconds=float(os.environ.get("HANG_PG_TIMEOUT_S", "6"))))


def load_batch(step):
    if rank == culprit and kind == "outside" and step == 2:
        time.sleep(3600)  # stuck reading data
    return torch.ones(4, device=device) * step


def slow_step(step):
    if rank == culprit and kind == "slow" and step == 2:
        time.sleep(float(os.environ.get("HANG_SLOW_S", "20")))


for step in range(5):
    x = load_batch(step)
    slow_step(step)
    if rank == culprit and kind == "other" and step == 2:
        dist.broadcast(x, src=0)
    else:
        dist.all_reduce(x)
    if backend == "nccl":
        torch.cuda.synchronize()  # NCCL collectives are asynchronous: wait here, as a training step would
    print(f"rank {rank} step {step} ok", flush=True)
print(f"rank {rank} done", flush=True)
