"""An unmodified-looking DDP training loop for the live hang watch (issue 22): gloo on CPU, or NCCL on GPUs with
WATCH_BACKEND=nccl. The process group keeps torch's default timeout unless WATCH_PG_TIMEOUT_S is set.
WATCH_KIND: stuck - WATCH_RANK stops in its data loading (load_batch) at step 5, forever;
            other - WATCH_RANK calls broadcast at step 5 while the others call all_reduce;
            slow  - WATCH_RANK's data loading takes 40% longer every step (a straggler), the job ends normally;
            ckpt  - rank 0 writes a checkpoint for WATCH_CKPT_S seconds (40) at step 5 while the others wait in a
                    barrier; the job ends normally.
WATCH_FAKE_FR=1 (gloo): rank 0 makes the flight-recorder FIFO torch 2.x makes for NCCL and says when it is read.
WATCH_STEPS steps (default 40) of WATCH_STEP_S seconds (0.3) of data loading each; a line every 5 steps."""
import datetime, os, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
culprit = int(os.environ.get("WATCH_RANK", "1"))
kind = os.environ.get("WATCH_KIND", "stuck")
backend = os.environ.get("WATCH_BACKEND", "gloo")
steps = int(os.environ.get("WATCH_STEPS", "40"))
step_s = float(os.environ.get("WATCH_STEP_S", "0.3"))
device = "cpu"
if backend == "nccl":
    device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    torch.cuda.set_device(device)
kw = {}
if os.environ.get("WATCH_PG_TIMEOUT_S"):
    kw["timeout"] = datetime.timedelta(seconds=float(os.environ["WATCH_PG_TIMEOUT_S"]))
dist.init_process_group(backend, **kw)
if os.environ.get("WATCH_FAKE_FR") and rank == 0 and backend == "gloo":
    # stands in for torch 2.x's NCCL flight recorder: the FIFO it makes, read by a thread of its own
    import threading
    fifo = os.environ["TORCH_NCCL_DEBUG_INFO_PIPE_FILE"] + f"{rank}.pipe"
    os.mkfifo(fifo)

    def serve_fifo():
        with open(fifo) as f:
            f.readline()
        print(f"rank {rank} flight recorder dump requested", flush=True)

    threading.Thread(target=serve_fifo, daemon=True).start()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(64, 64).to(device))
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def load_batch(step):
    if rank == culprit and kind == "stuck" and step == 5:
        print(f"rank {rank} stuck from now", flush=True)
        time.sleep(100000)  # stuck reading data
    time.sleep(step_s * (1.4 if rank == culprit and kind == "slow" else 1.0))
    return torch.randn(32, 64, device=device)


def save_checkpoint(step):
    time.sleep(float(os.environ.get("WATCH_CKPT_S", "40")))  # writing a large checkpoint


for step in range(steps):
    x = load_batch(step)
    if kind == "other" and step == 5:
        print(f"rank {rank} at the mismatch", flush=True)
        t = torch.ones(4, device=device)
        dist.broadcast(t, src=0) if rank == culprit else dist.all_reduce(t)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if kind == "ckpt" and step == 5:
        if rank == 0:
            save_checkpoint(step)
        dist.barrier()
    if step % 5 == 0:
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
print(f"rank {rank} done", flush=True)
