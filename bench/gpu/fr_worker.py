"""Issue 31: an unmodified-looking training loop that waits for its collectives the way NCCL jobs do. Each step's
gradient all_reduce is enqueued (async_op=True) and the rank then waits by polling work.is_completed() in a function
of its own, as a CUDA sync waits: its Python stack names no collective. gloo on CPU (3 ranks) unless
FR_BACKEND=nccl; the process group keeps a 30-minute timeout.
FR_KIND: stuck   - FR_RANK stays in its data loading (load_batch) at step 5, forever;
         other   - FR_RANK broadcasts at step 5 where the others all_reduce;
         shape   - FR_RANK all_reduces 2 elements at step 5 where the others all_reduce 1;
         slow    - FR_RANK's data loading takes 40% longer every step; ends normally;
         ckpt    - rank 0 writes a checkpoint for FR_CKPT_S (40) seconds at step 5 while the others wait in a
                   barrier; ends normally;
         healthy - FR_STEPS steps of CPU work (a matmul loop), prints its elapsed time; ends normally.
FR_STEPS steps (40) of FR_STEP_S seconds (0.3) of data loading; a line every 5 steps."""
import datetime, os, time
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
culprit = int(os.environ.get("FR_RANK", "1"))
kind = os.environ.get("FR_KIND", "stuck")
backend = os.environ.get("FR_BACKEND", "gloo")
steps = int(os.environ.get("FR_STEPS", "40"))
step_s = float(os.environ.get("FR_STEP_S", "0.3"))
device = "cpu"
if backend == "nccl":
    device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    torch.cuda.set_device(device)
torch.set_num_threads(1)
dist.init_process_group(backend, timeout=datetime.timedelta(minutes=30))
model = torch.nn.Linear(64, 64).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def load_batch(step):
    if rank == culprit and kind == "stuck" and step == 5:
        print(f"rank {rank} stuck from now", flush=True)
        time.sleep(100000)  # stuck reading data
    if kind == "healthy":
        a = torch.randn(256, 256)
        for _ in range(40):
            a = (a @ a).tanh()
    else:
        time.sleep(step_s * (1.4 if rank == culprit and kind == "slow" else 1.0))
    return torch.randn(32, 64, device=device)


def wait_for(work):
    while not work.is_completed():  # as torch.cuda.synchronize() waits for an NCCL kernel
        time.sleep(0.01)


def sync_grads(step):
    flat = torch.cat([p.grad.flatten() for p in model.parameters()])
    if step == 5 and rank == culprit and kind in ("other", "shape"):
        print(f"rank {rank} at the mismatch", flush=True)
        if kind == "other":
            work = dist.broadcast(flat, src=0, async_op=True)
        else:
            work = dist.all_reduce(torch.ones(2, device=device), async_op=True)
    elif step == 5 and kind == "shape":
        work = dist.all_reduce(torch.ones(1, device=device), async_op=True)
    else:
        work = dist.all_reduce(flat, async_op=True)
    if backend == "nccl":
        work.wait()
        torch.cuda.synchronize()
    else:
        wait_for(work)


t0 = time.monotonic()
for step in range(steps):
    x = load_batch(step)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    sync_grads(step)
    opt.step()
    if kind == "ckpt" and step == 5:
        if rank == 0:
            time.sleep(float(os.environ.get("FR_CKPT_S", "40")))  # writing a large checkpoint
        dist.barrier()
    if step % 5 == 0:
        print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
print(f"rank {rank} done in {time.monotonic() - t0:.3f} s", flush=True)
